//! One service instance (one service contract) on the provider's cluster,
//! as pure functions: the names of what is made for it, the Purchase that
//! peers towards the customer, and what the Purchase's phase means for the
//! catalog.
//!
//! Everything is named from the contract id, so a restarted controller
//! finds what it made: the instance namespace `svc-<id>` (annotated with
//! the contract, offer and plan, the anchor of everything else — it is
//! made first and removed last), the Purchase `service-<id>` and the
//! customer's kubeconfig Secret `service-<id>-peering` in the controller's
//! namespace, the generated secrets in `service-secrets` and each binding's
//! Secret `binding-<binding id>` in the instance namespace.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::model::ServicePlan;
use crate::template::{MANAGED_BY, MANAGER};

/// Annotations on the instance namespace.
pub const CONTRACT_ANNOTATION: &str = "broker.liqo-broker.io/contract-id";
pub const OFFER_ANNOTATION: &str = "broker.liqo-broker.io/offer-id";
pub const PLAN_ANNOTATION: &str = "broker.liqo-broker.io/plan-id";
/// The objects rendered into the namespace (JSON list of references), so
/// deprovisioning removes exactly those before the peering goes.
pub const RENDERED_ANNOTATION: &str = "broker.liqo-broker.io/rendered";

/// The binding Secret's marks, read by the customer's purchase-controller
/// (shared design, item 2).
pub const BINDING_LABEL: &str = "broker.liqo-broker.io/binding";
pub const TARGET_NAMESPACE_ANNOTATION: &str = "broker.liqo-broker.io/target-namespace";
pub const TARGET_NAME_ANNOTATION: &str = "broker.liqo-broker.io/target-name";

/// The Secret holding an instance's generated secrets.
pub const GENERATED_SECRET: &str = "service-secrets";
/// The key of the customer's kubeconfig in its Secret.
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// The names of what one instance is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub contract_id: String,
    /// The instance namespace (on this cluster; offloaded to the customer).
    pub namespace: String,
    /// The Purchase and, with `-peering`, the kubeconfig Secret.
    pub purchase: String,
    pub peering_secret: String,
}

impl Names {
    pub fn of(contract_id: &str) -> Self {
        let purchase = dns_label("service-", contract_id, "-peering".len());
        Self {
            contract_id: contract_id.to_string(),
            namespace: dns_label("svc-", contract_id, 0),
            peering_secret: format!("{purchase}-peering"),
            purchase,
        }
    }
}

/// The Secret of binding `id`.
pub fn binding_secret(id: &str) -> String {
    dns_label("binding-", id, 0)
}

/// `prefix` + `id` as a DNS-1123 label with room for `reserve` more
/// bytes: lower-cased, other characters made `-`; an id that had to be
/// changed or cut gets a hash of itself, so two ids never share a name.
pub fn dns_label(prefix: &str, id: &str, reserve: usize) -> String {
    let clean: String = id
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect();
    let room = 63 - reserve - prefix.len();
    let exact = clean == id && clean.len() <= room && !clean.ends_with('-');
    if exact {
        return format!("{prefix}{clean}");
    }
    let hash = format!("{:08x}", fnv1a(id) as u32);
    let keep = room - hash.len() - 1;
    let head: String = clean.chars().take(keep).collect();
    format!("{prefix}{}-{hash}", head.trim_end_matches('-'))
        .replace("--", "-")
        .trim_start_matches('-')
        .to_string()
}

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A label value for `id`: itself when Kubernetes accepts it, else its
/// DNS label (the id itself is kept in an annotation).
pub fn label_value(id: &str) -> String {
    let valid = id.len() <= 63
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        id.to_string()
    } else {
        dns_label("", id, 0)
    }
}

/// The Purchase that peers towards the customer with its peering user
/// (purchase-controller, `peeringCredentialsSecretRef`), asks the plan's
/// resources of the customer's cluster and offloads the instance namespace
/// there with the plan's hosting policy.
pub fn purchase(names: &Names, own_namespace: &str, plan: &ServicePlan) -> Value {
    json!({
        "apiVersion": "broker.liqo-broker.io/v1alpha1",
        "kind": "Purchase",
        "metadata": {
            "name": names.purchase,
            "namespace": own_namespace,
            "labels": {MANAGED_BY: MANAGER},
            "annotations": {CONTRACT_ANNOTATION: names.contract_id},
        },
        "spec": {
            "peeringCredentialsSecretRef": {"name": names.peering_secret, "key": KUBECONFIG_KEY},
            "resources": plan.resources,
            "namespaces": [names.namespace],
            "podOffloadingStrategy": plan.hosting,
        },
    })
}

/// Where a Purchase is, for the catalog's `last_operation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peering {
    /// Ready: the namespace is offloaded; render the templates.
    Ready,
    /// Still on its way: the description a platform reads.
    Waiting(String),
    /// Failed for good.
    Failed(String),
}

/// Judge a Purchase's status (None: not seen yet).
pub fn peering(status: Option<&Value>) -> Peering {
    let Some(status) = status else {
        return Peering::Waiting("peering with the customer's cluster".into());
    };
    let phase = status.get("phase").and_then(Value::as_str).unwrap_or("");
    // The condition that is not True says what is missing.
    let why = status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("status").and_then(Value::as_str) != Some("True"))
        .and_then(|c| c.get("message").and_then(Value::as_str))
        .unwrap_or("");
    match phase {
        "Ready" => Peering::Ready,
        "Failed" => Peering::Failed(format!("peering with the customer's cluster failed: {why}")),
        "" => Peering::Waiting("peering with the customer's cluster".into()),
        other => Peering::Waiting(
            format!("peering with the customer's cluster: {other} {why}")
                .trim_end()
                .to_string(),
        ),
    }
}

/// The generated secrets `wanted` with those already kept: kept ones
/// stay (so the service's passwords never change under it), missing ones
/// are drawn with `draw`. The second value says whether anything was
/// drawn.
pub fn generated<E>(
    kept: &BTreeMap<String, String>,
    wanted: &[String],
    mut draw: impl FnMut() -> Result<String, E>,
) -> Result<(BTreeMap<String, String>, bool), E> {
    let mut all = kept.clone();
    let mut drew = false;
    for name in wanted {
        if !all.contains_key(name) {
            all.insert(name.clone(), draw()?);
            drew = true;
        }
    }
    Ok((all, drew))
}

/// Where the customer wants a binding's Secret: `parameters.namespace` and
/// `parameters.secretName` (the catalog checked both).
pub fn binding_target(parameters: &Value) -> Option<(String, String)> {
    let text = |k: &str| {
        parameters
            .get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Some((text("namespace")?, text("secretName")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels_and_distinct() {
        let n = Names::of("c-1");
        assert_eq!(n.namespace, "svc-c-1");
        assert_eq!(n.purchase, "service-c-1");
        assert_eq!(n.peering_secret, "service-c-1-peering");
        let a = Names::of("ABC_1").namespace;
        let b = Names::of("abc-1").namespace;
        assert_ne!(a, b);
        assert!(a.starts_with("svc-abc-1-"), "{a}");
        let long = Names::of(&"x".repeat(100));
        assert!(long.namespace.len() <= 63 && long.peering_secret.len() <= 63);
        assert_eq!(binding_secret("b1"), "binding-b1");
        assert_eq!(label_value("b.1"), "b.1");
        assert_ne!(label_value("b/1"), "b/1");
    }

    #[test]
    fn the_purchase_offloads_the_instance_namespace_with_the_hosting_policy() {
        let plan = ServicePlan {
            hosting: "Remote".into(),
            resources: [("cpu".to_string(), "1".to_string())].into(),
            ..ServicePlan::default()
        };
        let p = purchase(&Names::of("c1"), "services", &plan);
        assert_eq!(p["spec"]["podOffloadingStrategy"], "Remote");
        assert_eq!(p["spec"]["namespaces"], json!(["svc-c1"]));
        assert_eq!(
            p["spec"]["peeringCredentialsSecretRef"],
            json!({"name": "service-c1-peering", "key": "kubeconfig"})
        );
        assert_eq!(p["spec"]["resources"]["cpu"], "1");
        assert_eq!(p["metadata"]["namespace"], "services");
    }

    #[test]
    fn the_purchase_phase_says_what_the_catalog_hears() {
        assert_eq!(peering(Some(&json!({"phase": "Ready"}))), Peering::Ready);
        let failed = json!({"phase": "Failed", "conditions": [
            {"type": "Peered", "status": "False", "message": "bad kubeconfig"}]});
        assert!(
            matches!(peering(Some(&failed)), Peering::Failed(m) if m.contains("bad kubeconfig"))
        );
        assert!(matches!(peering(None), Peering::Waiting(_)));
        assert!(
            matches!(peering(Some(&json!({"phase": "Peering"}))), Peering::Waiting(m) if m.contains("Peering"))
        );
    }

    #[test]
    fn generated_secrets_are_drawn_once() {
        let kept = [("a".to_string(), "old".to_string())].into();
        let wanted = ["a".to_string(), "b".to_string()];
        let (all, drew) = generated(&kept, &wanted, || Ok::<_, ()>("new".into())).unwrap();
        assert_eq!(all["a"], "old");
        assert_eq!(all["b"], "new");
        assert!(drew);
        let (_, drew) = generated(&all, &wanted, || Err(())).unwrap();
        assert!(!drew);
    }
}
