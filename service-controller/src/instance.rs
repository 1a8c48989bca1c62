//! One service instance (one service contract) on the provider's cluster,
//! as pure functions: the names of what is made for it, the Purchase that
//! peers towards the customer, and what the Purchase's phase means for the
//! catalog.
//!
//! Everything is named from the contract id, so a restarted controller
//! finds what it made: the instance namespace `svc-<id>` (or, when the
//! customer chose a prefix, `svc-<prefix>-<id>`; annotated with the
//! contract, offer and plan, the anchor of everything else — it is made
//! first and removed last, and once made it keeps its name), the Purchase
//! `service-<id>` and the customer's kubeconfig Secret
//! `service-<id>-peering` in the controller's namespace, the generated
//! secrets in `service-secrets` and each binding's Secret
//! `binding-<binding id>` in the instance namespace. Each is a DNS-1123
//! label of at most 63 characters whatever the ids ([`dns_label`]: an id
//! too long, or not a label, is cut and given a hash of itself).
//!
//! **The name at the customer's cluster.** The Purchase offloads the
//! instance namespace there, and Liqo v1.2 names the remote namespace by
//! the NamespaceOffloading's `spec.namespaceMappingStrategy`
//! (`apis/offloading/v1beta1/namespaceoffloading_types.go:40-53`, values
//! `EnforceSameName`, `DefaultName` — the default, line 104 — and
//! `SelectedName` with `spec.remoteNamespaceName`, lines 108-110):
//! `pkg/liqo-controller-manager/offloading/namespaceoffloading-controller/status.go:66-79`
//! gives the namespace's own name, `<namespace>-<local cluster ID>`
//! (`foreigncluster.UniqueName` is the cluster ID itself,
//! `pkg/utils/foreigncluster/uniqueName.go:20-22`) or the selected name,
//! and writes it into `status.remoteNamespaceName` (status.go:36,
//! types.go:130-131) and into the NamespaceMap's desired mapping
//! (`clusterselector.go:65`, `mappings.go:61-68`). Nothing shortens it:
//! the namespace-map controller creates a Namespace of exactly that name
//! (`namespacemap-controller/enforcement.go:41-74`, 115-128) and, when the
//! API server refuses it (a namespace name is a DNS-1123 label, at most
//! 63 characters), marks the mapping `CreationLoopBackOff` and tries
//! again, for ever. A cluster ID may itself be 63 characters (`liqoctl
//! install` checks only `IsDNS1123Label`,
//! `pkg/liqoctl/install/validation.go:68-83`), so under `DefaultName` no
//! local name fits every cluster ID, and `svc-<32 hex>-<ID>` passes 63
//! once the ID is longer than 26. The instance namespace is therefore
//! offloaded with `EnforceSameName` ([`SAME_NAME`], which the Purchase
//! and purchase-controller already carry to the NamespaceOffloading;
//! `SelectedName` would need a field the Purchase does not have): its
//! name at the customer's cluster is its name here, at most 63 characters
//! for any cluster ID. A namespace of that name the customer already has
//! is not taken over: Liqo refuses to use a namespace its NamespaceMap
//! did not make (enforcement.go:76-80). Instances made before keep
//! `DefaultName` ([`DEFAULT_NAME`]; Liqo's webhook refuses to change the
//! strategy of a NamespaceOffloading, `pkg/webhooks/namespaceoffloading/nsoff.go:93-95`),
//! recorded on the namespace ([`MAPPING_ANNOTATION`]). Either way the name
//! the customer's pods use is read from Liqo ([`remote_namespace`]), not
//! recomputed here.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::model::ServicePlan;
use crate::template::{MANAGED_BY, MANAGER};

/// Annotations on the instance namespace.
pub const CONTRACT_ANNOTATION: &str = "broker.liqo-broker.io/contract-id";
pub const OFFER_ANNOTATION: &str = "broker.liqo-broker.io/offer-id";
pub const PLAN_ANNOTATION: &str = "broker.liqo-broker.io/plan-id";
/// The contract the instance is sold under now, when a plan change (issue
/// 45) replaced the one it is named after ([`CONTRACT_ANNOTATION`]): its
/// reports and bindings go to this one. Absent: that one.
pub const CURRENT_CONTRACT_ANNOTATION: &str = "broker.liqo-broker.io/current-contract-id";
/// The objects rendered into the namespace (JSON list of references), so
/// deprovisioning removes exactly those before the peering goes.
pub const RENDERED_ANNOTATION: &str = "broker.liqo-broker.io/rendered";
/// Each binding's objects (its `bindingTemplates`), recorded as
/// [`RENDERED_ANNOTATION`] is, under this prefix and the binding's
/// [`label_value`], so unbinding and deprovisioning remove exactly those.
pub const BINDING_OBJECTS_PREFIX: &str = "binding-objects.broker.liqo-broker.io/";

/// The binding Secret's marks, read by the customer's purchase-controller
/// (shared design, item 2).
pub const BINDING_LABEL: &str = "broker.liqo-broker.io/binding";
pub const TARGET_NAMESPACE_ANNOTATION: &str = "broker.liqo-broker.io/target-namespace";
pub const TARGET_NAME_ANNOTATION: &str = "broker.liqo-broker.io/target-name";

/// On the instance namespace: the Liqo `namespaceMappingStrategy` it is
/// offloaded with ([`SAME_NAME`]; absent on namespaces made before it was
/// recorded, which were offloaded with [`DEFAULT_NAME`]).
pub const MAPPING_ANNOTATION: &str = "broker.liqo-broker.io/namespace-mapping";
/// Liqo's mapping strategies (`namespaceoffloading_types.go:44-49`): the
/// remote namespace named as the local one, or `<local>-<cluster ID>`.
pub const SAME_NAME: &str = "EnforceSameName";
pub const DEFAULT_NAME: &str = "DefaultName";

/// The provisioning parameter with which a customer chooses the prefix of
/// the instance namespace (thesis §6.4.4's "prefix namespace"):
/// `svc-<prefix>-<contract>`.
pub const PREFIX_PARAMETER: &str = "namespacePrefix";
/// The longest prefix: `svc-` + prefix + `-` + a contract id (32 hex
/// digits) is 63 characters.
pub const MAX_PREFIX: usize = 26;
/// The instance namespaces' own prefix (the admission policy shipped with
/// the chart lets the controller write Namespaces named `svc-…` only).
pub const NAMESPACE_PREFIX: &str = "svc-";

/// The name of the NamespaceOffloading purchase-controller makes in the
/// instance namespace: the only one Liqo acts on
/// (`pkg/consts/namespace_mapping.go:30`, its webhook refuses any other:
/// `pkg/webhooks/namespaceoffloading/nsoff.go:59-62`).
pub const OFFLOADING: &str = "offloading";

/// The Secret holding an instance's generated secrets.
pub const GENERATED_SECRET: &str = "service-secrets";
/// The key of the customer's kubeconfig in its Secret.
pub const KUBECONFIG_KEY: &str = "kubeconfig";

/// The names of what one instance is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The contract everything is named after: the instance's first.
    pub contract_id: String,
    /// The contract the instance is sold under now (the catalog's reports
    /// and bindings are this one's): `contract_id` until a plan change
    /// bought another ([`Names::serving`]).
    pub current: String,
    /// The instance namespace (on this cluster; offloaded to the customer).
    pub namespace: String,
    /// The Purchase and, with `-peering`, the kubeconfig Secret.
    pub purchase: String,
    pub peering_secret: String,
    /// Liqo's `namespaceMappingStrategy` for the instance namespace.
    pub mapping: String,
}

impl Names {
    /// A new instance's names, its namespace `svc-<id>`.
    pub fn of(contract_id: &str) -> Self {
        Self::new(contract_id, None)
    }

    /// A new instance's names, its namespace `svc-<prefix>-<id>` with the
    /// customer's prefix (checked by [`namespace_prefix`]), else `svc-<id>`;
    /// offloaded with [`SAME_NAME`].
    pub fn new(contract_id: &str, prefix: Option<&str>) -> Self {
        let head = match prefix {
            Some(prefix) => format!("{NAMESPACE_PREFIX}{prefix}-"),
            None => NAMESPACE_PREFIX.to_string(),
        };
        Self::in_namespace(contract_id, &dns_label(&head, contract_id, 0), SAME_NAME)
    }

    /// The names of an instance whose namespace exists: it keeps its name
    /// and the mapping strategy it was offloaded with (`None`: made before
    /// the strategy was recorded, so [`DEFAULT_NAME`]).
    pub fn found(contract_id: &str, namespace: &str, mapping: Option<&str>) -> Self {
        Self::in_namespace(contract_id, namespace, mapping.unwrap_or(DEFAULT_NAME))
    }

    /// These names, the instance sold under contract `current` now.
    pub fn serving(self, current: &str) -> Self {
        Self {
            current: current.to_string(),
            ..self
        }
    }

    fn in_namespace(contract_id: &str, namespace: &str, mapping: &str) -> Self {
        let purchase = dns_label("service-", contract_id, "-peering".len());
        Self {
            contract_id: contract_id.to_string(),
            current: contract_id.to_string(),
            namespace: namespace.to_string(),
            peering_secret: format!("{purchase}-peering"),
            purchase,
            mapping: mapping.to_string(),
        }
    }
}

/// The customer's prefix for a new instance namespace, from the
/// provisioning parameters ([`PREFIX_PARAMETER`]; absent or `null`: none).
/// A DNS-1123 label of at most [`MAX_PREFIX`] characters, so
/// `svc-<prefix>-<contract>` fits 63 characters here and, named the same,
/// at the customer's cluster; anything else is refused, saying so (the
/// value itself is not repeated: it is the customer's).
pub fn namespace_prefix(parameters: &Value) -> Result<Option<String>, String> {
    let refused = |what: &str| {
        Err(format!(
            "parameters.{PREFIX_PARAMETER}: {what}; it must be a DNS-1123 label of 1 to {MAX_PREFIX} characters (lower-case letters, digits and '-', starting and ending with a letter or digit), so that the instance namespace {NAMESPACE_PREFIX}<prefix>-<contract>, named the same on your cluster, fits 63 characters"
        ))
    };
    match parameters.get(PREFIX_PARAMETER) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(prefix)) if prefix.len() > MAX_PREFIX => refused(&format!(
            "{} characters are too many",
            prefix.chars().count()
        )),
        Some(Value::String(prefix)) if is_dns_label(prefix) => Ok(Some(prefix.clone())),
        Some(Value::String(_)) => refused("not a DNS-1123 label"),
        Some(_) => refused("not a string"),
    }
}

/// A DNS-1123 label (Kubernetes `IsDNS1123Label`): 1-63 lower-case
/// letters, digits and `-`, starting and ending with a letter or digit.
pub fn is_dns_label(text: &str) -> bool {
    (1..=63).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

/// The name Liqo gave the instance namespace at the customer's cluster:
/// the NamespaceOffloading's `status.remoteNamespaceName`
/// (`namespaceoffloading_types.go:130-131`, written by
/// `namespaceoffloading-controller/status.go:36`); `None` until Liqo has
/// written it.
pub fn remote_namespace(offloading: &Value) -> Option<String> {
    offloading
        .pointer("/status/remoteNamespaceName")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .map(str::to_string)
}

/// The Secret of binding `id`.
pub fn binding_secret(id: &str) -> String {
    dns_label("binding-", id, 0)
}

/// `prefix` + `id` as a DNS-1123 label with room for `reserve` more
/// bytes (at most 63 with them, for a `prefix` of at most 54 bytes):
/// lower-cased, other characters made `-`; an id that had to be changed
/// or cut gets a hash of itself, so two ids never share a name.
pub fn dns_label(prefix: &str, id: &str, reserve: usize) -> String {
    let clean: String = id
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect();
    let room = 63usize.saturating_sub(reserve + prefix.len());
    let exact = format!("{prefix}{clean}");
    if !clean.is_empty() && clean == id && clean.len() <= room && is_dns_label(&exact) {
        return exact;
    }
    let hash = format!("{:08x}", fnv1a(id) as u32);
    let keep = room.saturating_sub(hash.len() + 1);
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
    let mut purchase = json!({
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
    });
    // An instance made before keeps exactly the Purchase it had (whose
    // strategy, absent, is purchase-controller's default, DefaultName).
    if names.mapping != DEFAULT_NAME {
        purchase["spec"]["namespaceMappingStrategy"] = json!(names.mapping);
    }
    purchase
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
        // Not a label value as it is: made one.
        assert!(is_dns_label(&label_value("-b")), "{}", label_value("-b"));
    }

    /// Liqo v1.2's remote namespace name
    /// (`namespaceoffloading-controller/status.go:66-79`; the cluster ID
    /// is `UniqueName`, `pkg/utils/foreigncluster/uniqueName.go:20-22`).
    fn liqo_remote_name(mapping: &str, namespace: &str, cluster_id: &str) -> String {
        match mapping {
            SAME_NAME => namespace.to_string(),
            _ => format!("{namespace}-{cluster_id}"),
        }
    }

    /// Issue 45: every name made for an instance is a DNS-1123 label of at
    /// most 63 characters, here and (the namespace, as Liqo names it) at
    /// the customer's cluster, with any contract id, binding id, prefix
    /// and a cluster ID of 63 characters (the longest `liqoctl install`
    /// accepts).
    #[test]
    fn every_name_fits_63_characters_with_any_ids_and_cluster_id() {
        let cluster_id = format!("cluster-{}", "0".repeat(55));
        assert_eq!(cluster_id.len(), 63);
        assert!(is_dns_label(&cluster_id));
        let hex = "0123456789abcdef0123456789abcdef";
        let ids = [
            hex.to_string(),
            "c-1".to_string(),
            "x".repeat(63),
            "x".repeat(64),
            "y".repeat(1000),
            "ABC_1/../é?".repeat(20),
            "-".to_string(),
            "a-".repeat(40),
            "--x--".to_string(),
        ];
        let prefixes = [
            None,
            Some("shop"),
            Some(&*"p".repeat(MAX_PREFIX)),
            Some("a--b"),
        ];
        let mut namespaces = std::collections::BTreeSet::new();
        for id in &ids {
            for prefix in prefixes {
                let n = Names::new(id, prefix);
                for name in [&n.namespace, &n.purchase, &n.peering_secret] {
                    assert!(is_dns_label(name), "{name:?} ({id:?}, {prefix:?})");
                }
                assert!(n.namespace.starts_with(NAMESPACE_PREFIX), "{}", n.namespace);
                assert_eq!(n.mapping, SAME_NAME);
                let remote = liqo_remote_name(&n.mapping, &n.namespace, &cluster_id);
                assert!(is_dns_label(&remote), "{remote:?}");
                // Two contracts never share a namespace.
                assert!(namespaces.insert(n.namespace.clone()), "{}", n.namespace);
            }
            assert!(is_dns_label(&binding_secret(id)), "{}", binding_secret(id));
            assert!(label_value(id).len() <= 63, "{}", label_value(id));
        }
        // The catalog's ids (32 hex digits) are kept whole, even with the
        // longest prefix: exactly 63.
        let longest = Names::new(hex, Some(&"p".repeat(MAX_PREFIX))).namespace;
        assert_eq!(longest, format!("svc-{}-{hex}", "p".repeat(MAX_PREFIX)));
        assert_eq!(longest.len(), 63);
        // What Liqo's default mapping would have made of it: too long for
        // a namespace, so never made (why EnforceSameName).
        let default = liqo_remote_name(DEFAULT_NAME, &Names::of(hex).namespace, &cluster_id);
        assert!(default.len() > 63, "{default}");
    }

    #[test]
    fn the_customer_chooses_a_bounded_dns_label_prefix() {
        assert_eq!(Names::new("c1", Some("shop")).namespace, "svc-shop-c1");
        assert_eq!(namespace_prefix(&json!({})), Ok(None));
        assert_eq!(namespace_prefix(&json!({PREFIX_PARAMETER: null})), Ok(None));
        assert_eq!(
            namespace_prefix(&json!({PREFIX_PARAMETER: "shop-1", "size": 3})),
            Ok(Some("shop-1".into()))
        );
        let longest = "p".repeat(MAX_PREFIX);
        assert_eq!(
            namespace_prefix(&json!({ PREFIX_PARAMETER: longest })),
            Ok(Some(longest))
        );
        for bad in [
            json!("Shop"),
            json!("-shop"),
            json!("shop-"),
            json!("sh.op"),
            json!(""),
            json!("p".repeat(MAX_PREFIX + 1)),
            json!("é"),
            json!(7),
            json!(["shop"]),
        ] {
            let e = namespace_prefix(&json!({ PREFIX_PARAMETER: bad })).unwrap_err();
            assert!(e.starts_with("parameters.namespacePrefix: "), "{e}");
            assert!(e.contains("DNS-1123 label of 1 to 26 characters"), "{e}");
            // The customer's value is not repeated.
            assert!(!e.contains("Shop") && !e.contains("sh.op"), "{e}");
        }
        let e = namespace_prefix(&json!({PREFIX_PARAMETER: "p".repeat(27)})).unwrap_err();
        assert!(e.contains("27 characters are too many"), "{e}");
    }

    /// The name the customer's pods use is Liqo's, read from the
    /// NamespaceOffloading's status: none until Liqo wrote it.
    #[test]
    fn the_remote_name_is_liqos() {
        let nsoff = json!({"metadata": {"namespace": "svc-c1", "name": OFFLOADING},
                           "status": {"remoteNamespaceName": "svc-c1-cluster"}});
        assert_eq!(remote_namespace(&nsoff).as_deref(), Some("svc-c1-cluster"));
        assert_eq!(remote_namespace(&json!({"spec": {}})), None);
        assert_eq!(
            remote_namespace(&json!({"status": {"remoteNamespaceName": ""}})),
            None
        );
        assert_eq!(
            remote_namespace(&json!({"status": {"offloadingPhase": "Ready"}})),
            None
        );
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
        // Named the same at the customer's cluster.
        assert_eq!(p["spec"]["namespaceMappingStrategy"], "EnforceSameName");
        // An instance made before keeps its Purchase as it was: no
        // strategy, purchase-controller's default (DefaultName).
        let old = purchase(&Names::found("c1", "svc-c1", None), "services", &plan);
        assert!(
            old["spec"].get("namespaceMappingStrategy").is_none(),
            "{old}"
        );
        let new = purchase(
            &Names::found("c1", "svc-shop-c1", Some(SAME_NAME)),
            "services",
            &plan,
        );
        assert_eq!(new["spec"]["namespaces"], json!(["svc-shop-c1"]));
        assert_eq!(new["spec"]["namespaceMappingStrategy"], "EnforceSameName");
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
