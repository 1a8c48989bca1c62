//! A buyer's network policy for the pods it runs on one provider, carried
//! by the catalog on the buyer's contracts with that provider.
//!
//! The consumer refines its `MultiClusterNetworkPolicy`s (purchase-controller,
//! `network_policy`) into one [`TenantPolicy`] per provider: for each policy,
//! the provider-side namespace its pods run in (Liqo's
//! `NamespaceOffloading.status.remoteNamespaceName`), the pods it selects, and
//! its rules with peers already resolved: pods on that same provider by
//! namespace and labels, everything else as addresses **in the consumer's own
//! view** (its real pod addresses, its real pod CIDR). The provider (the
//! peering-user controller's isolation) translates those addresses into its
//! remapped view of the consumer (`Configuration` spec → status), renders the
//! policies inside that buyer's namespaces only, and never wider than the
//! default isolation; what it applied or refused comes back as a
//! [`TenantPolicyReport`].
//!
//! Routes (`catalog/src/buying/contracts/`): the buyer `PUT`s
//! `/contracts/{id}/network-policy` (a [`TenantPolicy`]; the catalog answers
//! the stored [`ContractNetworkPolicy`] with its new `revision`) and may
//! `DELETE` it; the contract's provider `PUT`s
//! `/provider/contracts/{id}/network-policy/status` (a
//! [`TenantPolicyReport`]). Both parties read it on the contract
//! ([`crate::wire::Contract::network_policy`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Policies in one [`TenantPolicy`].
pub const MAX_POLICIES: usize = 32;
/// Rules per direction of one policy.
pub const MAX_RULES: usize = 32;
/// Peers of one rule.
pub const MAX_PEERS: usize = 256;
/// Ports of one rule.
pub const MAX_PORTS: usize = 16;
/// Labels and requirements of one selector; values of one requirement.
pub const MAX_SELECTOR_TERMS: usize = 16;
/// `except` entries of one address block.
pub const MAX_EXCEPT: usize = 32;
/// Entries of a report's lists.
pub const MAX_REPORT_ENTRIES: usize = 64;
/// Characters of a report's reason.
pub const MAX_REPORT_REASON: usize = 1024;

/// What the buyer asks the provider to enforce on its pods there.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantPolicy {
    /// At most [`MAX_POLICIES`], names unique.
    #[cfg_attr(feature = "openapi", schema(max_items = 32))]
    pub policies: Vec<TenantNetworkPolicy>,
}

/// One policy, as the provider renders it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantNetworkPolicy {
    /// The consumer's `<namespace>/<name>` of the policy it came from
    /// (named in reports).
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 253,
            pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"
        )
    )]
    pub name: String,
    /// The provider-side namespace (a Kubernetes name) of the selected
    /// pods; the provider refuses one that is not this buyer's.
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 63, pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub namespace: String,
    /// The pods of `namespace` it applies to.
    pub pod_selector: Selector,
    /// Absent: ingress is not restricted by this policy (the default
    /// isolation holds). Present, even empty: only what these rules admit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_items = 32))]
    pub ingress: Option<Vec<TenantRule>>,
    /// As `ingress`, for egress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_items = 32))]
    pub egress: Option<Vec<TenantRule>>,
}

/// A label selector, as Kubernetes' (`matchLabels` AND every requirement).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 16))]
    pub match_expressions: Vec<Requirement>,
}

/// `key` `operator` `values`: `In`, `NotIn` (values required), `Exists`,
/// `DoesNotExist` (no values).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Requirement {
    pub key: String,
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^(In|NotIn|Exists|DoesNotExist)$")
    )]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 16))]
    pub values: Vec<String>,
}

/// A rule: it admits traffic when any peer matches (or there are no
/// peers: every peer the default isolation admits) and any port matches
/// (or there are no ports).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantRule {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 256))]
    pub peers: Vec<TenantPeer>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 16))]
    pub ports: Vec<TenantPort>,
}

/// One peer: either pods on this provider (`podSelector`, in `namespace`
/// or, without it, in every namespace of this buyer's here), or an address
/// block in the consumer's view (`ipBlock`). Exactly one of the two forms.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantPeer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub pod_selector: Option<Selector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub ip_block: Option<TenantIpBlock>,
}

/// An IPv4 CIDR in the consumer's view, minus `except` (each inside it).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantIpBlock {
    #[cfg_attr(
        feature = "openapi",
        schema(
            pattern = "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])/([0-9]|[12][0-9]|3[0-2])$"
        )
    )]
    pub cidr: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 32))]
    pub except: Vec<String>,
}

/// A port as NetworkPolicy has it: `protocol` (TCP, UDP, SCTP; TCP when
/// absent), `port` a number or a named container port (absent: every
/// port), `endPort` (numeric `port` only) the last of a range.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, pattern = "^(TCP|UDP|SCTP)$")
    )]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub port: Option<PortRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false, minimum = 1))]
    pub end_port: Option<u16>,
}

/// A port number (1–65535) or a container port's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum PortRef {
    Number(u16),
    Name(String),
}

/// The policy the catalog holds on a contract, as both parties read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContractNetworkPolicy {
    /// Set by the catalog: 1 on the first `PUT`, one more on each.
    pub revision: u64,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub updated_at: DateTime<Utc>,
    pub policy: TenantPolicy,
    /// The provider's last report, if any (of this revision or an earlier
    /// one: compare `report.revision`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub report: Option<TenantPolicyReport>,
}

/// What the provider did with a revision of a contract's policy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantPolicyReport {
    /// The revision it rendered.
    pub revision: u64,
    /// The policies applied, by [`TenantNetworkPolicy::name`], with the
    /// NetworkPolicies that hold them.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 64))]
    pub applied: Vec<AppliedTenantPolicy>,
    /// The policies refused, and why (nothing of a refused one is applied).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 64))]
    pub refused: Vec<RefusedTenantPolicy>,
}

/// A policy the provider applied.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppliedTenantPolicy {
    pub name: String,
    /// `<namespace>/<name>` of each NetworkPolicy rendered for it.
    #[cfg_attr(feature = "openapi", schema(max_items = 64))]
    pub network_policies: Vec<String>,
}

/// A policy the provider refused.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RefusedTenantPolicy {
    pub name: String,
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 1024,
            pattern = "^[^\\u0000-\\u0009\\u000B-\\u001F\\u007F-\\u009F]*$"
        )
    )]
    pub reason: String,
}

/// Why a [`TenantPolicy`] or [`TenantPolicyReport`] is not acceptable: the
/// field (a JSON path) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PolicyError {
    pub field: String,
    pub message: String,
}

fn error(field: impl Into<String>, message: impl Into<String>) -> PolicyError {
    PolicyError {
        field: field.into(),
        message: message.into(),
    }
}

impl TenantPolicy {
    /// Check the bounds and the shape the provider relies on (names,
    /// selectors, peers, CIDRs, ports). The provider checks what only it
    /// can know: that a namespace is this buyer's, that an address lies
    /// inside what the isolation admits.
    pub fn check(&self) -> Result<(), PolicyError> {
        if self.policies.len() > MAX_POLICIES {
            return Err(error("policies", format!("at most {MAX_POLICIES}")));
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, p) in self.policies.iter().enumerate() {
            let at = format!("policies[{i}]");
            if p.name.is_empty() || p.name.len() > 253 || p.name.chars().any(char::is_control) {
                return Err(error(
                    format!("{at}.name"),
                    "1 to 253 characters, no control characters",
                ));
            }
            if !names.insert(p.name.as_str()) {
                return Err(error(format!("{at}.name"), format!("{:?} twice", p.name)));
            }
            check_name(&format!("{at}.namespace"), &p.namespace)?;
            check_selector(&format!("{at}.podSelector"), &p.pod_selector)?;
            for (dir, rules) in [("ingress", &p.ingress), ("egress", &p.egress)] {
                let Some(rules) = rules else { continue };
                if rules.len() > MAX_RULES {
                    return Err(error(
                        format!("{at}.{dir}"),
                        format!("at most {MAX_RULES} rules"),
                    ));
                }
                for (j, r) in rules.iter().enumerate() {
                    check_rule(&format!("{at}.{dir}[{j}]"), r)?;
                }
            }
        }
        Ok(())
    }
}

impl TenantPolicyReport {
    /// Check the bounds of a provider's report.
    pub fn check(&self) -> Result<(), PolicyError> {
        if self.applied.len() > MAX_REPORT_ENTRIES {
            return Err(error("applied", format!("at most {MAX_REPORT_ENTRIES}")));
        }
        if self.refused.len() > MAX_REPORT_ENTRIES {
            return Err(error("refused", format!("at most {MAX_REPORT_ENTRIES}")));
        }
        for (i, a) in self.applied.iter().enumerate() {
            if a.name.len() > 253 || a.name.chars().any(char::is_control) {
                return Err(error(
                    format!("applied[{i}].name"),
                    "at most 253 characters, no control characters",
                ));
            }
            if a.network_policies.len() > MAX_REPORT_ENTRIES
                || a.network_policies
                    .iter()
                    .any(|n| n.len() > 507 || n.chars().any(char::is_control))
            {
                return Err(error(
                    format!("applied[{i}].networkPolicies"),
                    format!("at most {MAX_REPORT_ENTRIES} names of at most 507 characters"),
                ));
            }
        }
        for (i, r) in self.refused.iter().enumerate() {
            if r.name.len() > 253 || r.name.chars().any(char::is_control) {
                return Err(error(
                    format!("refused[{i}].name"),
                    "at most 253 characters, no control characters",
                ));
            }
            if r.reason.chars().count() > MAX_REPORT_REASON
                || r.reason.chars().any(|c| c.is_control() && c != '\n')
            {
                return Err(error(
                    format!("refused[{i}].reason"),
                    format!("at most {MAX_REPORT_REASON} characters, no control characters"),
                ));
            }
        }
        Ok(())
    }
}

fn check_name(field: &str, name: &str) -> Result<(), PolicyError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(error(
            field,
            format!("{name:?} is not a Kubernetes namespace name (RFC 1123 label)"),
        ))
    }
}

/// A label key or value as Kubernetes allows them (prefix/name, each part
/// alphanumeric with `-_.` inside; 63 characters, a prefix 253).
fn label_part_ok(s: &str, may_be_empty: bool) -> bool {
    if s.is_empty() {
        return may_be_empty;
    }
    s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

fn label_key_ok(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => {
            !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.split('.').all(|p| label_part_ok(p, false))
                && label_part_ok(name, false)
        }
        None => label_part_ok(key, false),
    }
}

fn check_selector(field: &str, s: &Selector) -> Result<(), PolicyError> {
    if s.match_labels.len() > MAX_SELECTOR_TERMS || s.match_expressions.len() > MAX_SELECTOR_TERMS {
        return Err(error(
            field,
            format!("at most {MAX_SELECTOR_TERMS} labels and {MAX_SELECTOR_TERMS} requirements"),
        ));
    }
    for (k, v) in &s.match_labels {
        if !label_key_ok(k) || !label_part_ok(v, true) {
            return Err(error(
                format!("{field}.matchLabels"),
                format!("{k:?}={v:?} is not a valid label"),
            ));
        }
    }
    for (i, r) in s.match_expressions.iter().enumerate() {
        let at = format!("{field}.matchExpressions[{i}]");
        if !label_key_ok(&r.key) {
            return Err(error(
                format!("{at}.key"),
                format!("{:?} is not a valid label key", r.key),
            ));
        }
        match r.operator.as_str() {
            "In" | "NotIn" => {
                if r.values.is_empty() || r.values.len() > MAX_SELECTOR_TERMS {
                    return Err(error(
                        format!("{at}.values"),
                        format!("{} needs 1 to {MAX_SELECTOR_TERMS} values", r.operator),
                    ));
                }
                if let Some(v) = r.values.iter().find(|v| !label_part_ok(v, true)) {
                    return Err(error(
                        format!("{at}.values"),
                        format!("{v:?} is not a valid label value"),
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !r.values.is_empty() {
                    return Err(error(
                        format!("{at}.values"),
                        format!("{} takes no values", r.operator),
                    ));
                }
            }
            other => {
                return Err(error(
                    format!("{at}.operator"),
                    format!("{other:?}: one of In, NotIn, Exists, DoesNotExist"),
                ))
            }
        }
    }
    Ok(())
}

/// An IPv4 CIDR (`10.1.2.3/32`).
pub fn parse_cidr(text: &str) -> Option<(std::net::Ipv4Addr, u8)> {
    let (addr, len) = text.split_once('/')?;
    let addr: std::net::Ipv4Addr = addr.parse().ok()?;
    let len: u8 = len.parse().ok().filter(|l| *l <= 32)?;
    Some((addr, len))
}

fn check_rule(at: &str, r: &TenantRule) -> Result<(), PolicyError> {
    if r.peers.len() > MAX_PEERS {
        return Err(error(format!("{at}.peers"), format!("at most {MAX_PEERS}")));
    }
    if r.ports.len() > MAX_PORTS {
        return Err(error(format!("{at}.ports"), format!("at most {MAX_PORTS}")));
    }
    for (k, p) in r.peers.iter().enumerate() {
        let at = format!("{at}.peers[{k}]");
        match (&p.ip_block, &p.pod_selector, &p.namespace) {
            (Some(b), None, None) => {
                let Some((_, len)) = parse_cidr(&b.cidr) else {
                    return Err(error(
                        format!("{at}.ipBlock.cidr"),
                        format!("{:?} is not an IPv4 CIDR", b.cidr),
                    ));
                };
                if b.except.len() > MAX_EXCEPT {
                    return Err(error(
                        format!("{at}.ipBlock.except"),
                        format!("at most {MAX_EXCEPT}"),
                    ));
                }
                for e in &b.except {
                    match parse_cidr(e) {
                        Some((_, l)) if l >= len => {}
                        _ => {
                            return Err(error(
                                format!("{at}.ipBlock.except"),
                                format!("{e:?} is not an IPv4 CIDR inside {}", b.cidr),
                            ))
                        }
                    }
                }
            }
            (None, Some(s), ns) => {
                check_selector(&format!("{at}.podSelector"), s)?;
                if let Some(ns) = ns {
                    check_name(&format!("{at}.namespace"), ns)?;
                }
            }
            _ => {
                return Err(error(
                    at,
                    "either ipBlock alone, or podSelector (with an optional namespace)",
                ))
            }
        }
    }
    for (k, p) in r.ports.iter().enumerate() {
        let at = format!("{at}.ports[{k}]");
        if let Some(proto) = &p.protocol {
            if !matches!(proto.as_str(), "TCP" | "UDP" | "SCTP") {
                return Err(error(
                    format!("{at}.protocol"),
                    format!("{proto:?}: one of TCP, UDP, SCTP"),
                ));
            }
        }
        match (&p.port, p.end_port) {
            (Some(PortRef::Number(0)), _) => {
                return Err(error(format!("{at}.port"), "1 to 65535"));
            }
            (Some(PortRef::Name(n)), _)
                if n.is_empty()
                    || n.len() > 15
                    || !n
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') =>
            {
                return Err(error(
                    format!("{at}.port"),
                    format!("{n:?} is not a port name (IANA_SVC_NAME)"),
                ));
            }
            (Some(PortRef::Number(start)), Some(end)) if end < *start => {
                return Err(error(
                    format!("{at}.endPort"),
                    format!("{end} is below port {start}"),
                ));
            }
            (Some(PortRef::Name(_)) | None, Some(_)) => {
                return Err(error(format!("{at}.endPort"), "only with a numeric port"));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> TenantPolicy {
        serde_json::from_value(serde_json::json!({"policies": [{
            "name": "shop/backend",
            "namespace": "shop-consumer-1",
            "podSelector": {"matchLabels": {"app": "backend"}},
            "ingress": [{
                "peers": [
                    {"podSelector": {"matchLabels": {"app": "frontend"}}},
                    {"ipBlock": {"cidr": "10.0.0.7/32"}}
                ],
                "ports": [{"port": 8080}, {"protocol": "TCP", "port": "http"}]
            }]
        }]}))
        .expect("parses")
    }

    #[test]
    fn a_well_formed_policy_passes() {
        assert_eq!(policy().check(), Ok(()));
    }

    /// A change that breaks a policy, and the field it must be named by.
    type Case = (fn(&mut TenantPolicy), &'static str);

    #[test]
    fn each_bad_field_is_named() {
        let cases: Vec<Case> = vec![
            (
                |p| p.policies[0].namespace = "Shop".into(),
                "policies[0].namespace",
            ),
            (
                |p| {
                    p.policies[0]
                        .pod_selector
                        .match_expressions
                        .push(Requirement {
                            key: "app".into(),
                            operator: "Like".into(),
                            values: vec![],
                        })
                },
                "policies[0].podSelector.matchExpressions[0].operator",
            ),
            (
                |p| {
                    p.policies[0].ingress.as_mut().unwrap()[0].peers[1]
                        .ip_block
                        .as_mut()
                        .unwrap()
                        .cidr = "10.0.0.300/32".into()
                },
                "policies[0].ingress[0].peers[1].ipBlock.cidr",
            ),
            (
                |p| {
                    p.policies[0].ingress.as_mut().unwrap()[0].peers[0].ip_block =
                        Some(TenantIpBlock::default())
                },
                "policies[0].ingress[0].peers[0]",
            ),
            (
                |p| p.policies[0].ingress.as_mut().unwrap()[0].ports[1].end_port = Some(9000),
                "policies[0].ingress[0].ports[1].endPort",
            ),
            (
                |p| p.policies.push(p.policies[0].clone()),
                "policies[1].name",
            ),
        ];
        for (break_it, field) in cases {
            let mut p = policy();
            break_it(&mut p);
            assert_eq!(p.check().map_err(|e| e.field), Err(field.to_string()));
        }
    }

    #[test]
    fn unknown_fields_are_refused() {
        let bad = serde_json::json!({"policies": [], "extra": 1});
        assert!(serde_json::from_value::<TenantPolicy>(bad).is_err());
    }
}
