//! The three wire shapes of Liqo's ResourceReader API, and the conversions
//! between them and the in-process types, shared by the server and the
//! client.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use liqo_proto::{k8s, shape_a, shape_b, shape_c};
use quantity::{Quantity, ResourceList};

use crate::reader::ReadError;

/// Which Liqo release's wire shape to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LiqoApi {
    /// Shape A — the thesis design, Liqo v0.5.x (`--external-monitor`):
    /// string maps, empty notifications.
    #[default]
    V05,
    /// Shape B — Liqo v0.6.0 … v0.8.x: Kubernetes `Quantity` messages,
    /// notifications naming a cluster.
    V06,
    /// Shape C — Liqo v0.9.0 … v0.10.3 (and v0.11.0-rc.1/rc.2): as B, reads
    /// answer one list per pool.
    V09,
}

impl LiqoApi {
    /// The proto descriptors of this shape, for gRPC reflection.
    pub fn file_descriptor_set(self) -> &'static [u8] {
        match self {
            LiqoApi::V05 => shape_a::FILE_DESCRIPTOR_SET,
            LiqoApi::V06 => shape_b::FILE_DESCRIPTOR_SET,
            LiqoApi::V09 => shape_c::FILE_DESCRIPTOR_SET,
        }
    }
}

impl fmt::Display for LiqoApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LiqoApi::V05 => "v0.5",
            LiqoApi::V06 => "v0.6",
            LiqoApi::V09 => "v0.9",
        })
    }
}

/// Not a Liqo release this crate can speak to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown Liqo API {0:?}: use v0.5 (shape A), v0.6 … v0.8 (shape B) or v0.9 … v0.10 (shape C)"
)]
pub struct UnknownLiqoApi(pub String);

impl FromStr for LiqoApi {
    type Err = UnknownLiqoApi;
    /// Accepts a Liqo release (`v0.5`, `0.7`, `v0.10.3`; `v0.11` for its
    /// release candidates rc.1 and rc.2, the last with the plugin API) or a
    /// shape (`a`, `b`, `c`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "a" | "shape-a" => return Ok(LiqoApi::V05),
            "b" | "shape-b" => return Ok(LiqoApi::V06),
            "c" | "shape-c" => return Ok(LiqoApi::V09),
            _ => {}
        }
        let version = lower.strip_prefix('v').unwrap_or(&lower);
        let mut parts = version.split('.');
        let major = parts.next().and_then(|p| p.parse::<u32>().ok());
        let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
        match (major, minor) {
            (Some(0), Some(5)) => Ok(LiqoApi::V05),
            (Some(0), Some(6..=8)) => Ok(LiqoApi::V06),
            (Some(0), Some(9..=11)) => Ok(LiqoApi::V09),
            _ => Err(UnknownLiqoApi(s.to_string())),
        }
    }
}

impl<'de> serde::Deserialize<'de> for LiqoApi {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A read error as a gRPC status.
pub fn status_from(error: ReadError) -> tonic::Status {
    match error {
        ReadError::Unavailable(m) => tonic::Status::unavailable(m),
        ReadError::InvalidArgument(m) => tonic::Status::invalid_argument(m),
        ReadError::Internal(m) => tonic::Status::internal(m),
    }
}

/// A gRPC status from an upstream as a read error, keeping "try again
/// later" distinct from "broken".
pub fn read_error_from(status: &tonic::Status, upstream: &str) -> ReadError {
    let message = format!("upstream {upstream}: {}", status.message());
    match status.code() {
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => {
            ReadError::Unavailable(message)
        }
        tonic::Code::InvalidArgument => ReadError::InvalidArgument(message),
        _ => ReadError::Internal(message),
    }
}

pub fn to_shape_a(list: &ResourceList) -> shape_a::ReadResponse {
    shape_a::ReadResponse {
        resources: list.to_strings().into_iter().collect(),
    }
}

pub fn to_shape_b(list: &ResourceList) -> shape_b::ResourceList {
    shape_b::ResourceList {
        resources: to_k8s_map(list),
    }
}

pub fn to_shape_c(
    list: &ResourceList,
    pool_name: &str,
    pool_prefix: &str,
) -> shape_c::PoolResourceList {
    shape_c::PoolResourceList {
        resource_lists: vec![shape_c::ResourceList {
            resources: to_k8s_map(list),
            pool_name: pool_name.to_string(),
            pool_prefix: pool_prefix.to_string(),
        }],
    }
}

fn to_k8s_map(list: &ResourceList) -> HashMap<String, k8s::Quantity> {
    list.0
        .iter()
        .map(|(name, q)| {
            (
                name.clone(),
                k8s::Quantity {
                    string: Some(q.to_string()),
                },
            )
        })
        .collect()
}

pub fn from_shape_a(response: shape_a::ReadResponse) -> Result<ResourceList, ReadError> {
    parse_entries(
        response
            .resources
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    )
}

pub fn from_shape_b(response: shape_b::ResourceList) -> Result<ResourceList, ReadError> {
    from_k8s_map(&response.resources)
}

/// Shape C answers one list per pool; downstream of this crate a cluster's
/// offer is one list, so the pools are summed.
pub fn from_shape_c(response: shape_c::PoolResourceList) -> Result<ResourceList, ReadError> {
    response
        .resource_lists
        .iter()
        .map(|pool| from_k8s_map(&pool.resources))
        .try_fold(ResourceList::new(), |sum, pool| Ok(sum.add(&pool?)))
}

fn from_k8s_map(map: &HashMap<String, k8s::Quantity>) -> Result<ResourceList, ReadError> {
    parse_entries(
        map.iter()
            .map(|(k, v)| (k.as_str(), v.string.as_deref().unwrap_or("0"))),
    )
}

fn parse_entries<'a>(
    entries: impl Iterator<Item = (&'a str, &'a str)>,
) -> Result<ResourceList, ReadError> {
    let mut out = std::collections::BTreeMap::new();
    for (name, value) in entries {
        let q: Quantity = value.parse().map_err(|e| {
            ReadError::Internal(format!(
                "upstream sent {name}={value:?}, not a quantity: {e}"
            ))
        })?;
        out.insert(name.to_string(), q);
    }
    Ok(ResourceList(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liqo_versions_map_to_shapes() {
        for (s, api) in [
            ("v0.5", LiqoApi::V05),
            ("0.5.4", LiqoApi::V05),
            ("v0.6", LiqoApi::V06),
            ("v0.8.3", LiqoApi::V06),
            ("v0.9", LiqoApi::V09),
            ("v0.10.1", LiqoApi::V09),
            ("V0.11", LiqoApi::V09),
            ("b", LiqoApi::V06),
        ] {
            assert_eq!(s.parse::<LiqoApi>(), Ok(api), "{s}");
        }
        for bad in ["v0.4", "v1.0", "v0.12", "", "latest"] {
            assert!(bad.parse::<LiqoApi>().is_err(), "{bad}");
        }
        assert_eq!(
            LiqoApi::V06.to_string().parse::<LiqoApi>(),
            Ok(LiqoApi::V06)
        );
    }
}
