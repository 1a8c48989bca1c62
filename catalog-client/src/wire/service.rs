//! The provider's side of a service a contract bought (the catalog server
//! reads and writes these in `catalog/src/osb/provider_report.rs` and
//! `catalog/src/osb/provider_bindings.rs`; the provider's controller sends
//! and reads them): its report of the service's state
//! (`PUT /provider/contracts/{id}/service`), the customer's peering
//! kubeconfig (`GET .../customer-peering`), the bindings waiting for it
//! (`GET .../bindings`) and its report on one
//! (`PUT .../bindings/{bindingID}`).

use serde::{Deserialize, Serialize};

/// Where the provider is with the service bought by a contract, spelled as
/// OSB `last_operation` spells its states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ServiceState {
    /// Still being set up (or removed).
    #[serde(rename = "in progress")]
    InProgress,
    /// Set up (or, while deprovisioning, removed).
    #[serde(rename = "succeeded")]
    Succeeded,
    /// It could not be done; `description` says why.
    #[serde(rename = "failed")]
    Failed,
}

/// The body of `PUT /provider/contracts/{id}/service`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ServiceReport {
    pub state: ServiceState,
    /// What a platform polling `last_operation` reads (at most 1024 bytes,
    /// no control characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 1024,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*$",
            nullable = false
        )
    )]
    pub description: Option<String>,
    /// The update (OSB `PATCH`) this report answers: the `update` of the
    /// customer peering the provider rendered from. While an instance is
    /// being updated, a report naming another update (or none) is refused
    /// (409): it comes from work done before the update was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub update: Option<String>,
    /// This report answers the removal: the provider saw the contract end
    /// and is taking the service down. While an instance is being
    /// deprovisioned, a finished report without it is refused (409): it
    /// comes from work done before the provider read the cancellation (a
    /// late "set up" must not settle a removal).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub removal: bool,
}

/// The answer of `GET /provider/contracts/{id}/customer-peering`: the
/// kubeconfig of the Liqo peering user the customer minted for the service
/// provider and sent when provisioning (`context.peering.kubeconfig`), in
/// the catalog's canonical form, with the instance's parameters. The
/// kubeconfig is a secret: `Debug` leaves it out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CustomerPeering {
    pub kubeconfig: String,
    /// The instance's `parameters` as the catalog checked them against the
    /// plan's schema (the last update's, once updated); `{}` when none.
    /// Absent from an older catalog's answer: `{}`.
    #[serde(default = "empty_object")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub parameters: serde_json::Value,
    /// The contract whose names the instance has on the provider's
    /// cluster (its namespace, Purchase and peering Secret were named
    /// after it): the instance's first contract, once a plan change
    /// replaced it by another. Absent: this contract.
    #[serde(
        rename = "instanceContractID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub instance_contract_id: Option<String>,
    /// The id of the update (OSB `PATCH`) waiting for the provider: its
    /// objects are rendered again with these parameters (and plan), then
    /// the provider reports the service's state, `succeeded` or `failed`,
    /// as for a provisioning. Absent when no update waits.
    #[serde(rename = "update", default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub update: Option<String>,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

impl std::fmt::Debug for CustomerPeering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomerPeering")
            .field("kubeconfig", &"<redacted>")
            .field("parameters", &self.parameters)
            .field("instance_contract_id", &self.instance_contract_id)
            .field("update", &self.update)
            .finish()
    }
}

/// What the provider has to do for a binding it reads at
/// `GET /provider/contracts/{id}/bindings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PendingBindingState {
    /// Bound by a platform: make the credentials and report them.
    #[serde(rename = "creating")]
    Creating,
    /// Unbound by a platform: remove what the binding made and report
    /// `succeeded`.
    #[serde(rename = "deleting")]
    Deleting,
}

/// One binding of a service contract waiting for its provider (an element
/// of `GET /provider/contracts/{id}/bindings`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PendingBinding {
    /// The binding id the platform chose.
    #[serde(rename = "bindingID")]
    pub binding_id: String,
    /// The bind request's `parameters` (`{}` when none): for service
    /// bindings at least `namespace` and `secretName`, where the customer
    /// wants the credentials Secret.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub parameters: serde_json::Value,
    pub state: PendingBindingState,
}

/// Longest credential key: a Secret data key.
pub const MAX_CREDENTIAL_KEY: usize = 253;

/// Whether `key` may name a credential: what Kubernetes accepts as a
/// Secret (or ConfigMap) data key, since the credentials become a Secret
/// (`[-._a-zA-Z0-9]+`, at most 253 bytes, not `.` or `..`).
pub fn is_credential_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_CREDENTIAL_KEY
        && key != "."
        && key != ".."
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// The body of `PUT /provider/contracts/{id}/bindings/{bindingID}`: where
/// the provider is with a pending binding. `credentials` are required when
/// a creation `succeeded` (and refused otherwise); the catalog keeps them
/// sealed and hands them to the platform that bound. `Debug` leaves their
/// values out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BindingReport {
    pub state: ServiceState,
    /// What a platform polling the binding's `last_operation` reads (at
    /// most 1024 bytes, no control characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 1024,
            pattern = r"^[^\x00-\x1f\x7f-\x9f]*$",
            nullable = false
        )
    )]
    pub description: Option<String>,
    /// The binding's credentials, keys as Secret data keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub credentials: Option<std::collections::BTreeMap<String, String>>,
}

impl std::fmt::Debug for BindingReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BindingReport")
            .field("state", &self.state)
            .field("description", &self.description)
            .field(
                "credentials",
                &self
                    .credentials
                    .as_ref()
                    .map(|c| c.keys().collect::<Vec<_>>()),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pending_bindings_read_as_the_catalog_writes_them() {
        let b: PendingBinding = serde_json::from_value(json!({
            "bindingID": "b1", "state": "deleting",
            "parameters": { "namespace": "app", "secretName": "db" },
        }))
        .unwrap();
        assert_eq!(b.state, PendingBindingState::Deleting);
        assert_eq!(b.parameters["secretName"], "db");
        assert!(serde_json::from_value::<PendingBinding>(
            json!({ "bindingID": "b1", "state": "bound", "parameters": {} })
        )
        .is_err());
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let peering = CustomerPeering {
            kubeconfig: "token: s3cret".into(),
            parameters: json!({}),
            instance_contract_id: None,
            update: None,
        };
        assert!(!format!("{peering:?}").contains("s3cret"));
        let report = BindingReport {
            state: ServiceState::Succeeded,
            description: None,
            credentials: Some([("password".to_string(), "s3cret".to_string())].into()),
        };
        let shown = format!("{report:?}");
        assert!(
            shown.contains("password") && !shown.contains("s3cret"),
            "{shown}"
        );
    }

    #[test]
    fn credential_keys_are_secret_data_keys() {
        for ok in ["password", "db.host", "a_b-c", "..x"] {
            assert!(is_credential_key(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", &"k".repeat(254)] {
            assert!(!is_credential_key(bad), "{bad}");
        }
    }
}
