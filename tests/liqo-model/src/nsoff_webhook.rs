//! Liqo v1.2.0's NamespaceOffloading validating webhook
//! (`pkg/webhooks/namespaceoffloading/nsoff.go`, NSW below) as a hook on
//! the test API server's admission chain: the object must be named
//! `offloading` (NSW:59-62); a `SelectedName` mapping needs a remote name
//! (NSW:74-81); the mapping strategy and the remote name cannot change
//! after creation (NSW:83-99). The warning on a narrowed pod offloading
//! strategy (NSW:101-105) is not modelled (hooks return no warnings).

use kube_test_server::admission::{Attributes, Denial, ValidatingHook};
use serde_json::Value;

use crate::offloading_consts::OFFLOADING_NAME;

/// The webhook's name in the chart
/// (`deployments/liqo/templates/webhooks/liqo-validating-webhook.yaml:11-25`).
pub const NAME: &str = "nsoff.validate.liqo.io";

/// NSW:52-108: why `object` (replacing `old`, on an update) is refused.
pub fn validate(operation: &str, object: &Value, old: Option<&Value>) -> Result<(), String> {
    if object["metadata"]["name"] != OFFLOADING_NAME {
        return Err(format!(
            "NamespaceOffloading name must match {OFFLOADING_NAME}"
        ));
    }
    let spec = &object["spec"];
    match (operation, old) {
        ("CREATE", _)
            if spec["namespaceMappingStrategy"] == "SelectedName"
                && spec["remoteNamespaceName"]
                    .as_str()
                    .unwrap_or_default()
                    .is_empty() =>
        {
            return Err("The RemoteNamespaceName value cannot be empty when using the SelectedName NamespaceMappingStrategy".into());
        }
        ("UPDATE", Some(old)) => {
            if old["spec"]["namespaceMappingStrategy"] != spec["namespaceMappingStrategy"] {
                return Err(
                    "The NamespaceMappingStrategy value cannot be modified after creation".into(),
                );
            }
            if old["spec"]["remoteNamespaceName"] != spec["remoteNamespaceName"] {
                return Err(
                    "The RemoteNamespaceName value cannot be modified after creation".into(),
                );
            }
        }
        _ => {}
    }
    Ok(())
}

/// The webhook as a validating hook for NamespaceOffloadings.
pub struct Hook;

impl ValidatingHook for Hook {
    fn name(&self) -> &str {
        NAME
    }

    fn validate(&self, a: &Attributes<'_>) -> Result<(), Denial> {
        if a.def.group != "offloading.liqo.io"
            || a.def.plural != "namespaceoffloadings"
            || !a.subresource.is_empty()
        {
            return Ok(());
        }
        // `admission.Denied` answers 403 Forbidden with the message.
        validate(a.operation, a.object, a.old_object).map_err(|m| Denial::new(403, "Forbidden", m))
    }
}
