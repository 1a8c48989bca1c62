//! A NetworkPolicy (`networking.k8s.io/v1`) semantics evaluator for the
//! tests. It shares no code with the product: it reads NetworkPolicy, Pod
//! and Namespace objects as [`serde_json::Value`]s exactly as an API server
//! returns them (empty lists and maps omitted, `policyTypes` and `protocol`
//! usually defaulted, but not required to be) and answers whether a
//! connection is allowed ([`allowed`]). [`Matrix`] holds the reachability
//! of every ordered pod pair and prints it as the upstream e2e truth table.
//!
//! It is held to Kubernetes' own NetworkPolicy conformance cases
//! (`kubernetes/kubernetes` `test/e2e/network/netpol/network_policy.go`),
//! ported as table tests in `tests/upstream_e2e.rs`.
//!
//! # Sources
//! - **API reference**: <https://kubernetes.io/docs/reference/kubernetes-api/networking-resources/network-policy-v1/>
//!   (field documentation, the same text as the Go comments in
//!   `staging/src/k8s.io/api/networking/v1/types.go`).
//! - **Concepts**: <https://kubernetes.io/docs/concepts/services-networking/network-policies/>.
//! - **Defaulting**: `pkg/apis/networking/v1/defaults.go`
//!   (`SetDefaults_NetworkPolicy`, `SetDefaults_NetworkPolicyPort`).
//! - **Label selectors**: `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go`
//!   (`LabelSelectorAsSelector`) and `.../pkg/labels/selector.go`
//!   (`Requirement.Matches`).
//!
//! # Semantics, rule by rule
//! 1. **`policyTypes` defaulting.** An explicit non-empty `spec.policyTypes`
//!    is used as written. Otherwise the policy affects Ingress always, and
//!    Egress only if `spec.egress` has at least one rule (API reference,
//!    `policyTypes`: "If this field is not specified, it will default based
//!    on the existence of ingress or egress rules; policies that contain an
//!    egress section are assumed to affect egress, and all policies (whether
//!    or not they contain an ingress section) are assumed to affect
//!    ingress"; `SetDefaults_NetworkPolicy` tests `len(Spec.Egress) != 0`).
//! 2. **Isolation per direction.** A pod is isolated for ingress (egress)
//!    only if some policy *in its own namespace* whose `spec.podSelector`
//!    selects it has Ingress (Egress) in its policy types; an empty
//!    `podSelector` selects every pod of the namespace (API reference,
//!    `podSelector`; Concepts, "The two sorts of pod isolation").
//!    A non-isolated direction allows everything.
//! 3. **Verdict** = the source's egress allows the connection AND the
//!    destination's ingress allows it (Concepts: "for a connection from a
//!    source pod to a destination pod to be allowed, both the egress policy
//!    on the source pod and the ingress policy on the destination pod need to
//!    allow the connection"). An external IP endpoint has no policies of its
//!    own: only the pod side is checked. Return traffic is implied.
//! 4. **Additive union.** Policies never deny: an isolated direction allows
//!    a connection if *any* rule of *any* selecting policy of that type
//!    matches, whatever the order (Concepts: "Network policies do not
//!    conflict; they are additive").
//! 5. **A rule** (`spec.ingress[]`/`spec.egress[]`) matches when (its peer
//!    list `from`/`to` is missing or empty, or any peer matches the other
//!    endpoint) AND (its `ports` list is missing or empty, or any port
//!    matches). A policy with no rules of a type it has allows nothing
//!    (default deny) (API reference, `ingress.from`, `ingress.ports`).
//! 6. **Peers** (`NetworkPolicyPeer`, API reference):
//!    - `podSelector` alone: pods in the *policy's* namespace whose labels
//!      match;
//!    - `namespaceSelector` alone: every pod of the namespaces whose labels
//!      match;
//!    - both: pods matching `podSelector` in namespaces matching
//!      `namespaceSelector` (AND);
//!    - `ipBlock`: the endpoint's IP is in `cidr` and in none of `except`
//!      (for a pod, `status.podIP`/`status.podIPs`; upstream's CIDR cases
//!      use pod IPs). Selectors never match an external IP.
//!    - A peer with none of these matches nothing (the API server rejects
//!      it anyway).
//! 7. **Label selectors**: `matchLabels` and every `matchExpressions`
//!    requirement must hold (AND); an empty selector matches everything.
//!    Operators: `In` (key present, value listed), `NotIn` (key absent or
//!    value not listed), `Exists`, `DoesNotExist` (`selector.go`,
//!    `Requirement.Matches`). An unknown operator matches nothing.
//! 8. **Ports** (`NetworkPolicyPort`): `protocol` defaults to TCP
//!    (`SetDefaults_NetworkPolicyPort`) and must equal the connection's;
//!    a missing `port` matches every port of that protocol; a numeric
//!    `port` matches that port, or with `endPort` the inclusive range
//!    `port..=endPort` (API reference, `endPort`: "indicates that the range
//!    of ports from port to endPort if set, inclusive, should be allowed";
//!    it applies to numeric ports only); a named `port` is resolved against
//!    the *destination* pod's `spec.containers[].ports[]` with the same
//!    `name` and protocol (container port protocol also defaulting to TCP),
//!    and never matches a destination that is not a pod.
//! 9. **Loopback** (a pod to itself) is always allowed: upstream's e2e
//!    ignores it because CNIs differ (`network_policy.go`,
//!    `ignoreLoopback`, kubernetes/kubernetes#95879), and [`Matrix`]
//!    comparisons skip the diagonal likewise.
//!
//! Out of scope: Services (policies see pod IPs after DNAT), host-network
//! pods and node traffic, `initContainers` sidecar ports, and any
//! CNI-specific behaviour.

mod cidr;
mod matrix;
mod policy;
mod selector;

pub use matrix::{Matrix, Peer};
pub use policy::{allowed, Endpoint, World};
