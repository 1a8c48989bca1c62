//! The Liqo objects a Purchase leads to, built and read as pure functions
//! of the contract and of what the cluster holds. Field names and values are
//! Liqo's own (v0.10.3: `pkg/liqoctl/peeroob`, `pkg/utils/authenticationtoken`,
//! `pkg/utils/foreignCluster`; v1.2.0: `pkg/utils/foreigncluster`,
//! `pkg/liqo-controller-manager/authentication/forge/resourceslice.go`,
//! `pkg/consts`).
//!
//! Everything the controller creates carries the label
//! [`MANAGED_BY`]`=purchase-controller` and the annotation [`OWNER`] naming
//! its Purchase; a `NamespaceOffloading`, which several Purchases may share,
//! carries [`OWNERS`] instead (`ns/name=provider,…`). Objects without the
//! mark were made by someone else and are never changed or deleted.

use std::collections::BTreeMap;

use base64::Engine;
use controller_core::liqo::{
    LiqoKind, ACCEPTED, AUTHENTICATION_CONDITION, AUTH_IDENTITY_CONTROL_PLANE_CONDITION,
    CREATE_VIRTUAL_NODE_ANNOTATION, DENIED, FOREIGN_CLUSTER, FOREIGN_CLUSTER_V0,
    NAMESPACE_OFFLOADING, NAMESPACE_OFFLOADING_V0, OFFLOADING_NAME, PROVIDER_ROLES, READY,
    REMOTE_CLUSTER_ID_LABEL, REPLICATION_DESTINATION_LABEL, REPLICATION_REQUESTED_LABEL,
    RESOURCES_CONDITION, RESOURCE_SLICE, V0_AUTHENTICATION_STATUS_CONDITION, V0_AUTH_TOKEN_LABEL,
    V0_CLUSTER_ID_LABEL, V0_ESTABLISHED, V0_OUTGOING_PEERING_CONDITION,
};
use kube::core::ApiResource;
use serde_json::{json, Value};

use catalog_client::wire::PeeringCredentials;

pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGER: &str = "purchase-controller";
pub const OWNER: &str = "broker.liqo-broker.io/purchase";
pub const OWNERS: &str = "broker.liqo-broker.io/purchases";

/// The Liqo generation this consumer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    V0,
    V1,
}

impl Generation {
    /// As the catalog writes it in a contract's `liqo`.
    pub fn as_str(self) -> &'static str {
        match self {
            Generation::V0 => "v0",
            Generation::V1 => "v1",
        }
    }

    pub fn foreign_cluster(self) -> ApiResource {
        match self {
            Generation::V0 => FOREIGN_CLUSTER_V0,
            Generation::V1 => FOREIGN_CLUSTER,
        }
        .api_resource()
    }

    pub fn namespace_offloading(self) -> ApiResource {
        self.namespace_offloading_kind().api_resource()
    }

    fn namespace_offloading_kind(self) -> LiqoKind {
        match self {
            Generation::V0 => NAMESPACE_OFFLOADING_V0,
            Generation::V1 => NAMESPACE_OFFLOADING,
        }
    }
}

impl std::str::FromStr for Generation {
    type Err = String;
    /// `v0`, `v0.10`, `v0.10.3` → V0; `v1`, `v1.2`, `v1.2.0` → V1.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.strip_prefix('v').unwrap_or(&lower).split('.').next() {
            Some("0") => Ok(Generation::V0),
            Some("1") => Ok(Generation::V1),
            _ => Err(format!("unknown Liqo API {s:?}: v0 (v0.x) or v1 (v1.x)")),
        }
    }
}

pub fn resource_slice() -> ApiResource {
    RESOURCE_SLICE.api_resource()
}

/// Whether `object` carries the single-owner mark of `purchase`.
pub fn owned_by(object: &Value, purchase: &str) -> bool {
    object["metadata"]["annotations"][OWNER].as_str() == Some(purchase)
        && object["metadata"]["labels"][MANAGED_BY].as_str() == Some(MANAGER)
}

fn mark(purchase: &str) -> (Value, Value) {
    (json!({ MANAGED_BY: MANAGER }), json!({ OWNER: purchase }))
}

/// The v0.x token Secret `liqoctl peer out-of-band` stores
/// (`authenticationtoken.StoreInSecret`): `remote-token-<clusterID>`.
pub fn v0_token_secret(creds: &PeeringCredentials, liqo_namespace: &str, purchase: &str) -> Value {
    let (mut labels, annotations) = mark(purchase);
    labels[V0_CLUSTER_ID_LABEL] = json!(creds.cluster_id);
    labels[V0_AUTH_TOKEN_LABEL] = json!("");
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("remote-token-{}", creds.cluster_id), "namespace": liqo_namespace,
                     "labels": labels, "annotations": annotations},
        "data": {"token": base64::engine::general_purpose::STANDARD.encode(&creds.token)},
    })
}

/// The v0.x ForeignCluster `peeroob.enforceForeignCluster` creates when
/// there is none for the cluster ID: named after the remote cluster, the
/// ID label, out-of-band peering with outgoing peering enabled, incoming
/// `Auto` and `insecureSkipTLSVerify` (its defaults for unset fields).
pub fn v0_foreign_cluster(creds: &PeeringCredentials, purchase: &str) -> Value {
    let (mut labels, annotations) = mark(purchase);
    labels[V0_CLUSTER_ID_LABEL] = json!(creds.cluster_id);
    json!({
        "apiVersion": FOREIGN_CLUSTER_V0.api_version(), "kind": FOREIGN_CLUSTER_V0.kind,
        "metadata": {"name": v0_foreign_cluster_name(creds), "labels": labels, "annotations": annotations},
        "spec": {"peeringType": "OutOfBand",
                 "clusterIdentity": {"clusterID": creds.cluster_id, "clusterName": creds.cluster_name},
                 "foreignAuthUrl": creds.auth_url, "foreignProxyUrl": "",
                 "outgoingPeeringEnabled": "Yes", "incomingPeeringEnabled": "Auto",
                 "insecureSkipTLSVerify": true},
    })
}

/// `liqoctl peer out-of-band <cluster-name>` names the ForeignCluster
/// after the name the operator gives; here the provider's cluster name when
/// it is a valid object name (a DNS-1123 subdomain), else its cluster ID.
pub fn v0_foreign_cluster_name(creds: &PeeringCredentials) -> String {
    if catalog_client::wire::names::is_dns_subdomain(&creds.cluster_name) {
        creds.cluster_name.clone()
    } else {
        creds.cluster_id.clone()
    }
}

fn peering_condition<'a>(conditions: &'a Value, kind: &str) -> Option<&'a str> {
    conditions.as_array()?.iter().find(|c| c["type"] == kind)?["status"].as_str()
}

/// v0.x: established as `liqoctl peer` waits for it: authenticated
/// (`AuthenticationStatus`) and the outgoing peering joined
/// (`OutgoingPeering`), both `Established`.
pub fn v0_peered(fc: &Value) -> bool {
    let conditions = &fc["status"]["peeringConditions"];
    peering_condition(conditions, V0_AUTHENTICATION_STATUS_CONDITION) == Some(V0_ESTABLISHED)
        && peering_condition(conditions, V0_OUTGOING_PEERING_CONDITION) == Some(V0_ESTABLISHED)
}

/// v0.10.3 `apis/discovery/v1alpha1/foreigncluster_types.go:31,162`: the
/// incoming peering's condition, and the status of a condition not set
/// (`peeringConditionsUtils.go:53-62` reads an absent one as `None`).
const V0_INCOMING_PEERING_CONDITION: &str = "IncomingPeering";
const V0_NONE: &str = "None";
/// `PeeringEnabledNo`: what `liqoctl unpeer out-of-band` writes.
const V0_PEERING_DISABLED: &str = "No";

/// The next step of taking a v0.x out-of-band peering down, in the order
/// `liqoctl unpeer out-of-band` follows (v0.10.3
/// `pkg/liqoctl/unpeeroob/handler.go:44-125`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V0Unpeer {
    /// Set `spec.outgoingPeeringEnabled: No` (:102-111).
    Disable,
    /// Wait for Liqo to take the outgoing peering to `None` (:65-69,
    /// `wait.ForOutgoingUnpeering`, `foreignCluster.IsOutgoingPeeringNone`).
    WaitOutgoing,
    /// Delete the ForeignCluster: no incoming peering remains (:114-124).
    Delete,
    /// An incoming peering is still active: the ForeignCluster stays
    /// (:80-84, liqoctl warns and stops there).
    IncomingRemains,
}

/// The step a v0.x ForeignCluster is at.
pub fn v0_unpeer_step(fc: &Value) -> V0Unpeer {
    let conditions = &fc["status"]["peeringConditions"];
    let status = |kind| peering_condition(conditions, kind).unwrap_or(V0_NONE);
    if fc["spec"]["outgoingPeeringEnabled"] != V0_PEERING_DISABLED {
        V0Unpeer::Disable
    } else if status(V0_OUTGOING_PEERING_CONDITION) != V0_NONE {
        V0Unpeer::WaitOutgoing
    } else if status(V0_INCOMING_PEERING_CONDITION) != V0_NONE {
        V0Unpeer::IncomingRemains
    } else {
        V0Unpeer::Delete
    }
}

/// The merge patch of [`V0Unpeer::Disable`].
pub fn v0_disable_outgoing() -> Value {
    json!({"spec": {"outgoingPeeringEnabled": V0_PEERING_DISABLED}})
}

/// Whether this controller made `object` (for any Purchase): a shared
/// peering object (a v0.x ForeignCluster and its token Secret) is the
/// controller's while any Purchase of the provider uses it, whichever made
/// it. One without the mark was made by a person and is never removed.
pub fn managed(object: &Value) -> bool {
    object["metadata"]["labels"][MANAGED_BY].as_str() == Some(MANAGER)
}

/// A v1 ForeignCluster as the consumer sees a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1Peering {
    /// The provider is peered as one: role `Provider` or
    /// `ConsumerAndProvider`, authentication module enabled, and the
    /// control-plane Identity `Ready` — or, declaratively, no such
    /// condition at all (see [`v1_peering`]).
    pub peered: bool,
    /// Peered the declarative way: a control-plane kubeconfig Secret and
    /// no Identity.
    pub declarative: bool,
    /// Where its ResourceSlices go: `status.tenantNamespace.local`, or
    /// Liqo's default `liqo-tenant-<clusterID>`.
    pub tenant_namespace: String,
}

/// Whether a v1 ForeignCluster shows a peering both ways: role
/// `ConsumerAndProvider` (`apis/core/v1beta1/foreigncluster_types.go:42`;
/// set by `pkg/utils/foreigncluster/roles.go:23`), which `liqoctl unpeer` reads
/// to keep the network the other direction uses
/// (`pkg/liqoctl/unpeer/handler.go:82-87, 105-111, 178-184`).
pub fn bidirectional(fc: Option<&Value>) -> bool {
    fc.is_some_and(|fc| fc["status"]["role"].as_str() == Some("ConsumerAndProvider"))
}

pub fn v1_peering(fc: Option<&Value>, provider: &str) -> V1Peering {
    let default_ns = format!("liqo-tenant-{provider}");
    let Some(fc) = fc else {
        return V1Peering {
            peered: false,
            declarative: false,
            tenant_namespace: default_ns,
        };
    };
    let status = &fc["status"];
    let role = status["role"].as_str().unwrap_or_default();
    let auth = &status["modules"]["authentication"];
    let provider = PROVIDER_ROLES.contains(&role) && auth["enabled"].as_bool() == Some(true);
    // v1.2.0 `foreigncluster-controller/status.go:293-324`: with a
    // control-plane Identity (liqoctl's handshake) the condition says
    // whether its kubeconfig exists; without one Liqo deletes the condition
    // (:297) and, finding a control-plane kubeconfig Secret (the
    // declarative peering), still makes the peer a provider with
    // authentication enabled (:303-318). So an absent condition on a
    // provider is a declarative peering, and a present one must be `Ready`.
    let identity = peering_condition(&auth["conditions"], AUTH_IDENTITY_CONTROL_PLANE_CONDITION);
    V1Peering {
        peered: provider && matches!(identity, None | Some(READY)),
        declarative: provider && identity.is_none(),
        tenant_namespace: status["tenantNamespace"]["local"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .unwrap_or(default_ns),
    }
}

/// The name of a contract's ResourceSlice (DNS-1123: lower-case, and other
/// bytes replaced by `-`, at most 63 characters).
pub fn slice_name(contract_id: &str) -> String {
    let cleaned: String = contract_id
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let name = format!("contract-{cleaned}");
    name.chars()
        .take(63)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

/// The name of the ResourceSlice of a Purchase from peering credentials
/// (no contract): after the Purchase's UID, unique and a DNS-1123 label.
pub fn direct_slice_name(uid: &str) -> String {
    slice_name(uid).replacen("contract-", "purchase-", 1)
}

/// What the slice asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceRequest<'a> {
    /// The slice's name ([`slice_name`], [`direct_slice_name`]).
    pub name: &'a str,
    pub class: &'a str,
    pub resources: &'a BTreeMap<String, String>,
    pub provider: &'a str,
}

/// The ResourceSlice as `liqoctl create resourceslice` forges it
/// (`forge.MutateResourceSlice`: replication labels towards the provider, a
/// virtual node asked for), with the contract's class and resources and
/// the provider's cluster ID. `spec.consumerClusterID` is left unset: Liqo's
/// local slice controller fills it with this cluster's own ID
/// (`pkg/liqo-controller-manager/authentication/localresourceslice-controller/localresourceslice_controller.go`
/// lines 83-85), and a wrong one would make the provider skip the slice for
/// ever (its tenant namespace must match).
pub fn v1_resource_slice(request: &SliceRequest<'_>, namespace: &str, purchase: &str) -> Value {
    let (mut labels, mut annotations) = mark(purchase);
    labels[REPLICATION_REQUESTED_LABEL] = json!("true");
    labels[REPLICATION_DESTINATION_LABEL] = json!(request.provider);
    labels[REMOTE_CLUSTER_ID_LABEL] = json!(request.provider);
    annotations[CREATE_VIRTUAL_NODE_ANNOTATION] = json!("true");
    json!({
        "apiVersion": RESOURCE_SLICE.api_version(), "kind": RESOURCE_SLICE.kind,
        "metadata": {"name": request.name, "namespace": namespace,
                     "labels": labels, "annotations": annotations},
        "spec": {"class": request.class, "providerClusterID": request.provider,
                 "resources": request.resources},
    })
}

/// The provider's answer to a slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// No `Resources` condition yet.
    Waiting,
    Accepted(BTreeMap<String, String>),
    Denied(String),
}

pub fn slice_grant(slice: &Value) -> Grant {
    let Some(condition) = slice["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == RESOURCES_CONDITION))
    else {
        return Grant::Waiting;
    };
    match condition["status"].as_str() {
        Some(ACCEPTED) => Grant::Accepted(
            slice["status"]["resources"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        Some(DENIED) => Grant::Denied(format!(
            "{}: {}",
            condition["reason"].as_str().unwrap_or(DENIED),
            condition["message"].as_str().unwrap_or_default()
        )),
        _ => Grant::Waiting,
    }
}

/// The CSR (`spec.csr`, as Liqo made it from this cluster's key) of a
/// slice whose authentication the provider denied; None otherwise.
/// Liqo sends the CSR base64-encoded as a `[]byte` field, and signs the
/// decoded bytes (`resourceslice_types.go`, `CSR []byte`).
pub fn denied_slice_csr(slice: &Value) -> Option<String> {
    let denied = slice["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == AUTHENTICATION_CONDITION && c["status"] == DENIED)
    });
    let encoded = slice["spec"]["csr"].as_str().filter(|c| !c.is_empty())?;
    if !denied {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// `ns/name=provider` entries of a shared NamespaceOffloading.
fn owners(object: &Value) -> BTreeMap<String, String> {
    object["metadata"]["annotations"][OWNERS]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .filter_map(|entry| entry.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn owners_text(owners: &BTreeMap<String, String>) -> String {
    owners
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Offloading settings of a Purchase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offloading<'a> {
    pub generation: Generation,
    pub namespace: &'a str,
    pub purchase: &'a str,
    pub provider: &'a str,
    pub pod_strategy: &'a str,
    pub mapping_strategy: &'a str,
}

/// What to do with a namespace's NamespaceOffloading.
#[derive(Debug, Clone, PartialEq)]
pub enum OffloadingPlan {
    Create(Value),
    /// Replace ours with this (same `resourceVersion`).
    Update(Value),
    /// Already as wanted.
    Keep,
    /// Someone else's: left alone.
    NotOurs,
    /// Shared with other Purchases that chose other strategies: left alone.
    Conflict(String),
    Delete,
}

fn offloading_object(o: &Offloading<'_>, owners: &BTreeMap<String, String>) -> Value {
    // The providers, never one contract's virtual node: Liqo v1.2.0 maps a
    // namespace per cluster, walking every VirtualNode and adding the
    // namespace to its cluster's NamespaceMap when the node matches and
    // removing it when it does not
    // (`namespaceoffloading-controller/clusterselector.go:37-75`), so a
    // selector matching one of a provider's two nodes would flap. Every
    // namespace offloaded to a provider thus reaches all its virtual
    // nodes: the sharing module reports what that shares.
    let providers: std::collections::BTreeSet<&String> = owners.values().collect();
    let kind = o.generation.namespace_offloading_kind();
    json!({
        "apiVersion": kind.api_version(), "kind": kind.kind,
        "metadata": {"name": OFFLOADING_NAME, "namespace": o.namespace,
                     "labels": {MANAGED_BY: MANAGER}, "annotations": {OWNERS: owners_text(owners)}},
        "spec": {"namespaceMappingStrategy": o.mapping_strategy,
                 "podOffloadingStrategy": o.pod_strategy,
                 "clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": REMOTE_CLUSTER_ID_LABEL, "operator": "In", "values": providers}]}]}},
    })
}

/// The NamespaceOffloading `offloading` with this Purchase among its owners:
/// its `clusterSelector` selects the virtual nodes of every owner's
/// provider (`liqo.io/remote-cluster-id In [...]`). The strategies are the
/// sole owner's; a Purchase joining others must ask for the ones in place
/// ([`OffloadingPlan::Conflict`] otherwise, and nothing is written).
pub fn plan_offloading(existing: Option<&Value>, o: &Offloading<'_>) -> OffloadingPlan {
    let Some(existing) = existing else {
        let owners = BTreeMap::from([(o.purchase.to_string(), o.provider.to_string())]);
        return OffloadingPlan::Create(offloading_object(o, &owners));
    };
    if existing["metadata"]["labels"][MANAGED_BY].as_str() != Some(MANAGER) {
        return OffloadingPlan::NotOurs;
    }
    let mut owners = owners(existing);
    let shared = owners.keys().any(|k| k != o.purchase);
    let (pod, mapping) = (
        existing["spec"]["podOffloadingStrategy"]
            .as_str()
            .unwrap_or_default(),
        existing["spec"]["namespaceMappingStrategy"]
            .as_str()
            .unwrap_or_default(),
    );
    if shared && (pod != o.pod_strategy || mapping != o.mapping_strategy) {
        return OffloadingPlan::Conflict(format!(
            "the NamespaceOffloading in {} is shared with other Purchases and uses podOffloadingStrategy {pod}, namespaceMappingStrategy {mapping}",
            o.namespace
        ));
    }
    owners.insert(o.purchase.to_string(), o.provider.to_string());
    let mut wanted = offloading_object(o, &owners);
    if wanted["spec"] == existing["spec"]
        && wanted["metadata"]["annotations"] == existing["metadata"]["annotations"]
    {
        return OffloadingPlan::Keep;
    }
    wanted["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"].clone();
    OffloadingPlan::Update(wanted)
}

/// Liqo's verdict on a NamespaceOffloading: `Ok` once `status.offloadingPhase`
/// is `Ready` for the current generation (what `liqoctl offload` waits
/// for), else the phase seen so far (`""` before Liqo looked at it).
pub fn offloading_ready(object: &Value) -> Result<(), String> {
    let status = &object["status"];
    let phase = status["offloadingPhase"].as_str().unwrap_or_default();
    let current = status["observedGeneration"] == object["metadata"]["generation"];
    if phase == READY && current {
        Ok(())
    } else {
        Err(phase.to_string())
    }
}

/// This Purchase leaves a NamespaceOffloading: delete it when it was the
/// last owner, else drop it from the owners (and the selector).
pub fn release_offloading(existing: &Value, o: &Offloading<'_>) -> OffloadingPlan {
    if existing["metadata"]["labels"][MANAGED_BY].as_str() != Some(MANAGER) {
        return OffloadingPlan::NotOurs;
    }
    let mut owners = owners(existing);
    if owners.remove(o.purchase).is_none() {
        return OffloadingPlan::Keep;
    }
    if owners.is_empty() {
        return OffloadingPlan::Delete;
    }
    let mut wanted = offloading_object(o, &owners);
    wanted["spec"]["namespaceMappingStrategy"] =
        existing["spec"]["namespaceMappingStrategy"].clone();
    wanted["spec"]["podOffloadingStrategy"] = existing["spec"]["podOffloadingStrategy"].clone();
    wanted["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"].clone();
    OffloadingPlan::Update(wanted)
}

/// The Secret holding a contract's peering-user kubeconfig (type Opaque,
/// key `kubeconfig`), owned by the Purchase.
pub fn kubeconfig_secret(
    name: &str,
    namespace: &str,
    kubeconfig: &str,
    purchase: &str,
    owner: Value,
) -> Value {
    let (labels, annotations) = mark(purchase);
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "annotations": annotations, "ownerReferences": [owner]},
        "data": {"kubeconfig": base64::engine::general_purpose::STANDARD.encode(kubeconfig)},
    })
}

/// The command that peers this cluster with a v1 provider using the
/// contract's kubeconfig. No ResourceSlice of class `default` is made
/// (`--create-resource-slice=false`): the controller makes the contract's.
pub fn peering_command(secret_namespace: &str, secret_name: &str) -> String {
    format!(
        "kubectl -n {secret_namespace} get secret {secret_name} -o jsonpath='{{.data.kubeconfig}}' | base64 -d > provider.kubeconfig && \
         liqoctl peer --remote-kubeconfig provider.kubeconfig --create-resource-slice=false"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_denied_authentication_gives_its_csr() {
        let csr = "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n";
        let encoded = base64::engine::general_purpose::STANDARD.encode(csr);
        let slice = |status: &str| {
            json!({"spec": {"csr": encoded},
                   "status": {"conditions": [{"type": "Authentication", "status": status}]}})
        };
        assert_eq!(denied_slice_csr(&slice("Denied")).as_deref(), Some(csr));
        assert_eq!(denied_slice_csr(&slice("Accepted")), None);
        assert_eq!(denied_slice_csr(&json!({"spec": {"csr": encoded}})), None);
        let mut no_csr = slice("Denied");
        no_csr["spec"]["csr"] = json!("");
        assert_eq!(denied_slice_csr(&no_csr), None);
    }

    /// Only `ConsumerAndProvider` is a peering both ways; a missing
    /// ForeignCluster or status is not.
    #[test]
    fn a_foreign_cluster_in_both_roles_is_bidirectional() {
        let fc = |role: &str| json!({"status": {"role": role}});
        assert!(bidirectional(Some(&fc("ConsumerAndProvider"))));
        for role in ["Provider", "Consumer", "Unknown", ""] {
            assert!(!bidirectional(Some(&fc(role))), "{role}");
        }
        assert!(!bidirectional(Some(&json!({}))));
        assert!(!bidirectional(None));
    }

    fn creds() -> PeeringCredentials {
        PeeringCredentials {
            cluster_id: "p-1".into(),
            cluster_name: "prov".into(),
            auth_url: "https://auth.prov:443".into(),
            token: "tok".into(),
        }
    }

    #[test]
    fn the_v0_objects_are_what_liqoctl_peer_out_of_band_creates() {
        let secret = v0_token_secret(&creds(), "liqo", "ns/p");
        assert_eq!(secret["metadata"]["name"], "remote-token-p-1");
        assert_eq!(secret["metadata"]["namespace"], "liqo");
        assert_eq!(secret["metadata"]["labels"][V0_CLUSTER_ID_LABEL], "p-1");
        assert_eq!(secret["metadata"]["labels"][V0_AUTH_TOKEN_LABEL], "");
        assert_eq!(secret["data"]["token"], "dG9r");

        let fc = v0_foreign_cluster(&creds(), "ns/p");
        assert_eq!(fc["metadata"]["name"], "prov");
        assert_eq!(fc["metadata"]["labels"][V0_CLUSTER_ID_LABEL], "p-1");
        assert_eq!(
            fc["spec"],
            json!({"peeringType": "OutOfBand",
                   "clusterIdentity": {"clusterID": "p-1", "clusterName": "prov"},
                   "foreignAuthUrl": "https://auth.prov:443", "foreignProxyUrl": "",
                   "outgoingPeeringEnabled": "Yes", "incomingPeeringEnabled": "Auto",
                   "insecureSkipTLSVerify": true})
        );
        assert!(owned_by(&fc, "ns/p"));
        let spaced = PeeringCredentials {
            cluster_name: "Provider 1".into(),
            ..creds()
        };
        assert_eq!(
            v0_foreign_cluster(&spaced, "ns/p")["metadata"]["name"],
            "p-1"
        );
        assert!(!owned_by(&fc, "ns/q"));
    }

    #[test]
    fn peerings_are_read_as_liqo_reports_them() {
        let mut fc = json!({"status": {"peeringConditions": [
            {"type": "AuthenticationStatus", "status": "Established"},
            {"type": "OutgoingPeering", "status": "Pending"}]}});
        assert!(!v0_peered(&fc));
        fc["status"]["peeringConditions"][1]["status"] = json!("Established");
        assert!(v0_peered(&fc));

        assert_eq!(
            v1_peering(None, "p"),
            V1Peering {
                peered: false,
                declarative: false,
                tenant_namespace: "liqo-tenant-p".into()
            }
        );
        let mut fc = json!({"status": {"role": "Provider", "tenantNamespace": {"local": "liqo-tenant-x"},
            "modules": {"authentication": {"enabled": true, "conditions": [
                {"type": "AuthIdentityControlPlaneStatus", "status": "Ready"}]}}}});
        assert_eq!(
            v1_peering(Some(&fc), "p"),
            V1Peering {
                peered: true,
                declarative: false,
                tenant_namespace: "liqo-tenant-x".into()
            }
        );
        fc["status"]["modules"]["authentication"]["conditions"][0]["status"] = json!("NotReady");
        assert!(
            !v1_peering(Some(&fc), "p").peered,
            "an Identity without its kubeconfig yet"
        );
        fc["status"]["role"] = json!("Consumer");
        assert!(!v1_peering(Some(&fc), "p").peered);
    }

    #[test]
    fn a_declarative_peering_has_no_identity_condition_and_is_peered() {
        // status.go:297-318: no control-plane Identity, a control-plane
        // kubeconfig Secret: provider, authentication enabled, no
        // AuthIdentityControlPlaneStatus.
        let mut fc = json!({"status": {"role": "Provider", "apiServerUrl": "https://p:6443",
            "modules": {"authentication": {"enabled": true, "conditions": []}}}});
        assert_eq!(
            v1_peering(Some(&fc), "p"),
            V1Peering {
                peered: true,
                declarative: true,
                tenant_namespace: "liqo-tenant-p".into()
            }
        );
        // A consumer only (a Tenant, no credentials towards the peer).
        fc["status"]["role"] = json!("Consumer");
        assert!(!v1_peering(Some(&fc), "p").peered);
        fc["status"]["role"] = json!("Provider");
        fc["status"]["modules"]["authentication"]["enabled"] = json!(false);
        assert!(!v1_peering(Some(&fc), "p").peered);
    }

    #[test]
    fn v0_unpeering_goes_in_liqoctl_unpeer_out_of_band_order() {
        let mut fc = json!({"metadata": {"labels": {MANAGED_BY: MANAGER}},
            "spec": {"outgoingPeeringEnabled": "Yes"},
            "status": {"peeringConditions": [
                {"type": "OutgoingPeering", "status": "Established"},
                {"type": "IncomingPeering", "status": "Established"}]}});
        assert!(managed(&fc));
        assert_eq!(v0_unpeer_step(&fc), V0Unpeer::Disable);
        fc["spec"]["outgoingPeeringEnabled"] =
            v0_disable_outgoing()["spec"]["outgoingPeeringEnabled"].clone();
        assert_eq!(v0_unpeer_step(&fc), V0Unpeer::WaitOutgoing);
        fc["status"]["peeringConditions"][0]["status"] = json!("Disconnecting");
        assert_eq!(v0_unpeer_step(&fc), V0Unpeer::WaitOutgoing);
        fc["status"]["peeringConditions"][0]["status"] = json!("None");
        assert_eq!(v0_unpeer_step(&fc), V0Unpeer::IncomingRemains);
        // An absent condition reads as None.
        fc["status"]["peeringConditions"] = json!([{"type": "OutgoingPeering", "status": "None"}]);
        assert_eq!(v0_unpeer_step(&fc), V0Unpeer::Delete);
        assert!(!managed(&json!({"metadata": {}})));
    }

    #[test]
    fn the_slice_carries_class_resources_the_provider_and_liqo_labels_not_the_consumer_id() {
        let resources = BTreeMap::from([("cpu".to_string(), "2".to_string())]);
        let name = slice_name("AB_12");
        let request = SliceRequest {
            name: &name,
            class: "liqo-broker",
            resources: &resources,
            provider: "p-1",
        };
        let slice = v1_resource_slice(&request, "liqo-tenant-p-1", "ns/p");
        assert_eq!(slice["metadata"]["name"], "contract-ab-12");
        assert_eq!(
            slice["metadata"]["labels"][REPLICATION_REQUESTED_LABEL],
            "true"
        );
        assert_eq!(
            slice["metadata"]["labels"][REPLICATION_DESTINATION_LABEL],
            "p-1"
        );
        assert_eq!(slice["metadata"]["labels"][REMOTE_CLUSTER_ID_LABEL], "p-1");
        assert_eq!(
            slice["metadata"]["annotations"][CREATE_VIRTUAL_NODE_ANNOTATION],
            "true"
        );
        assert_eq!(
            slice["spec"],
            json!({"class": "liqo-broker", "providerClusterID": "p-1",
                   "resources": {"cpu": "2"}})
        );
        assert_eq!(slice_grant(&slice), Grant::Waiting);
        let mut answered = slice.clone();
        answered["status"] = json!({"conditions": [{"type": "Resources", "status": "Denied",
            "reason": "Short", "message": "no cpu"}]});
        assert_eq!(
            slice_grant(&answered),
            Grant::Denied("Short: no cpu".into())
        );
        answered["status"] = json!({"resources": {"cpu": "2"}, "conditions": [
            {"type": "Resources", "status": "Accepted"}]});
        assert_eq!(slice_grant(&answered), Grant::Accepted(resources.clone()));
        assert_eq!(slice_name(&"x".repeat(80)).len(), 63);
        assert_eq!(direct_slice_name("9F1c-0a"), "purchase-9f1c-0a");
    }

    #[test]
    fn a_namespace_offloading_is_shared_by_owner_and_never_taken_over() {
        let a = Offloading {
            generation: Generation::V1,
            namespace: "apps",
            purchase: "ns/a",
            provider: "p1",
            pod_strategy: "Remote",
            mapping_strategy: "DefaultName",
        };
        let OffloadingPlan::Create(created) = plan_offloading(None, &a) else {
            panic!("create")
        };
        assert_eq!(created["apiVersion"], "offloading.liqo.io/v1beta1");
        assert_eq!(created["metadata"]["name"], "offloading");
        assert_eq!(
            created["spec"]["clusterSelector"],
            json!({"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "liqo.io/remote-cluster-id", "operator": "In", "values": ["p1"]}]}]})
        );
        assert_eq!(created["spec"]["podOffloadingStrategy"], "Remote");
        assert_eq!(plan_offloading(Some(&created), &a), OffloadingPlan::Keep);

        let b = Offloading {
            purchase: "ns/b",
            provider: "p2",
            ..a.clone()
        };
        let OffloadingPlan::Update(both) = plan_offloading(Some(&created), &b) else {
            panic!("update")
        };
        assert_eq!(
            both["spec"]["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]
                ["values"],
            json!(["p1", "p2"])
        );
        let OffloadingPlan::Update(only_b) = release_offloading(&both, &a) else {
            panic!("release")
        };
        assert_eq!(
            only_b["spec"]["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]
                ["values"],
            json!(["p2"])
        );
        assert_eq!(release_offloading(&only_b, &b), OffloadingPlan::Delete);

        assert_eq!(offloading_ready(&created), Err(String::new()));
        let mut ready = created.clone();
        ready["metadata"]["generation"] = json!(2);
        ready["status"] = json!({"offloadingPhase": "Ready", "observedGeneration": 1});
        assert_eq!(
            offloading_ready(&ready),
            Err("Ready".into()),
            "an older generation"
        );
        ready["status"]["observedGeneration"] = json!(2);
        assert_eq!(offloading_ready(&ready), Ok(()));

        let other_strategy = Offloading {
            purchase: "ns/c",
            pod_strategy: "LocalAndRemote",
            ..a.clone()
        };
        assert!(matches!(
            plan_offloading(Some(&both), &other_strategy),
            OffloadingPlan::Conflict(m) if m.contains("Remote")
        ));

        let foreign = json!({"metadata": {"name": "offloading"}, "spec": {}});
        assert_eq!(plan_offloading(Some(&foreign), &a), OffloadingPlan::NotOurs);
        assert_eq!(release_offloading(&foreign, &a), OffloadingPlan::NotOurs);
        let v0 = Offloading {
            generation: Generation::V0,
            ..a
        };
        let OffloadingPlan::Create(old) = plan_offloading(None, &v0) else {
            panic!("create")
        };
        assert_eq!(old["apiVersion"], "offloading.liqo.io/v1alpha1");
    }
}
