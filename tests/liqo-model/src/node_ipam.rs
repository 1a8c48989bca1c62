//! kube-controller-manager's node IPAM controller with its default range
//! allocator (Kubernetes', not Liqo's: what gives a test cluster's nodes
//! the `spec.podCIDR` their kubelets' CNI takes pod addresses from,
//! the model's `kubelet`). Run when the controller manager has
//! `--allocate-node-cidrs=true` and a `--cluster-cidr` — kind's clusters
//! have both, `10.244.0.0/16` by default — as the user of the
//! `node-controller` ServiceAccount
//! (`cmd/kube-controller-manager/app/core.go` `startNodeIpamController`,
//! `ClientOrDie("node-controller")`), each node getting a `/24`
//! (`core.go` `defaultNodeMaskCIDRIPv4 = 24`, `--node-cidr-mask-size`).
//!
//! `pkg/controller/nodeipam/ipam/range_allocator.go` (RA below):
//! - at start the podCIDRs the nodes already have are occupied
//!   (`NewCIDRRangeAllocator`);
//! - a node is given one when it has none (`AllocateOrOccupyCIDR`): the
//!   next free block of the cluster CIDR
//!   (`pkg/controller/nodeipam/ipam/cidrset/cidr_set.go` `AllocateNext`,
//!   [`CidrSet`]), written with a strategic merge patch of
//!   `spec.podCIDR` and `spec.podCIDRs` (RA `updateCIDRsAllocation`,
//!   `k8s.io/component-helpers/node/util/cidr.go` `PatchNodeCIDRs`), the
//!   block released again if the write fails; a node that has one keeps it
//!   and has it occupied;
//! - a deleted node's block is released (`ReleaseCIDR`).
//!
//! Every node is given one, Liqo's virtual nodes too, as the controller
//! makes no exception. Not modelled: the service CIDR carved out of the
//! cluster CIDR when they overlap (`filterOutServiceRange`), dual stack,
//! the `CIDRNotAvailable` events and node condition.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::Client;
use serde_json::json;

use crate::consts;
use crate::identity::Rule;
use crate::networking::remap::Cidr;
use crate::runner::{self, Key};
use crate::Error;

/// The `node-controller` ServiceAccount's user.
pub const USER: &str = "system:serviceaccount:kube-system:node-controller";

/// Of `system:controller:node-controller`'s rules
/// (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go`),
/// the nodes part this controller uses; `watch` is the shared informers'
/// (kube-controller-manager watches through its own identity).
pub const RULES: &[Rule] = &[Rule::new(
    &[""],
    &["nodes"],
    &["get", "list", "watch", "update", "patch"],
)];

/// The size of the block each node gets (`core.go`
/// `defaultNodeMaskCIDRIPv4`).
pub const NODE_MASK: u8 = 24;

/// `cidr_set.go`'s `CidrSet`: the cluster CIDR cut into blocks of one
/// size, a bit for each block, and where the next search starts.
#[derive(Debug, Clone)]
pub struct CidrSet {
    cluster: Cidr,
    node_prefix: u8,
    used: BTreeSet<u64>,
    next_candidate: u64,
}

impl CidrSet {
    /// `NewCIDRSet`: `None` when the blocks are not inside the cluster
    /// CIDR or more than 2^16 of them (`ErrCIDRSetSubNetTooBig`,
    /// `clusterSubnetMaxDiff = 16`).
    pub fn new(cluster: Cidr, node_prefix: u8) -> Option<CidrSet> {
        if node_prefix < cluster.prefix || node_prefix > 32 || node_prefix - cluster.prefix > 16 {
            return None;
        }
        Some(CidrSet {
            cluster,
            node_prefix,
            used: BTreeSet::new(),
            next_candidate: 0,
        })
    }

    fn max(&self) -> u64 {
        1 << (self.node_prefix - self.cluster.prefix)
    }

    fn block(&self, index: u64) -> Cidr {
        let offset = index << (32 - u32::from(self.node_prefix));
        Cidr {
            base: self.cluster.base | u32::try_from(offset).unwrap_or(0),
            prefix: self.node_prefix,
        }
    }

    /// The index of `cidr`'s block, when it is one of this set's.
    fn index(&self, cidr: &Cidr) -> Option<u64> {
        if cidr.prefix != self.node_prefix || !self.cluster.overlaps(cidr) {
            return None;
        }
        let offset = u64::from(cidr.base - self.cluster.base);
        Some(offset >> (32 - u32::from(self.node_prefix)))
    }

    /// `AllocateNext`: the first free block from the one after the last
    /// given, wrapping around; `None` when all are used
    /// (`ErrCIDRRangeNoCIDRsRemaining`).
    pub fn allocate_next(&mut self) -> Option<Cidr> {
        let max = self.max();
        let candidate = (0..max)
            .map(|i| (self.next_candidate + i) % max)
            .find(|c| !self.used.contains(c))?;
        self.next_candidate = (candidate + 1) % max;
        self.used.insert(candidate);
        Some(self.block(candidate))
    }

    /// `Occupy` (a block of another size or outside the cluster CIDR is
    /// not this set's, and left alone).
    pub fn occupy(&mut self, cidr: &Cidr) {
        if let Some(i) = self.index(cidr) {
            self.used.insert(i);
        }
    }

    /// `Release`.
    pub fn release(&mut self, cidr: &Cidr) {
        if let Some(i) = self.index(cidr) {
            self.used.remove(&i);
        }
    }
}

/// The allocator's memory: the set, and each node's block as last seen
/// (so that a deleted node's is released).
struct Allocator {
    set: CidrSet,
    nodes: BTreeMap<String, Cidr>,
}

/// The node's `spec.podCIDR`, when it reads.
fn pod_cidr(node: &DynamicObject) -> Option<Cidr> {
    node.data["spec"]["podCIDR"].as_str().and_then(Cidr::parse)
}

/// Run the controller on `client` for the cluster CIDR `cluster` until
/// the task is dropped.
pub async fn run(client: Client, cluster: Cidr) {
    let Some(set) = CidrSet::new(cluster, NODE_MASK) else {
        tracing::error!(%cluster, "the cluster CIDR cannot be cut into node blocks");
        return;
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &consts::nodes());
    let allocator = Mutex::new(Allocator {
        set,
        nodes: BTreeMap::new(),
    });
    // RA `NewCIDRRangeAllocator`: the blocks already given are occupied
    // before any node is looked at.
    loop {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                let mut a = allocator.lock().unwrap_or_else(|e| e.into_inner());
                for node in &list.items {
                    if let Some(cidr) = pod_cidr(node) {
                        a.set.occupy(&cidr);
                        a.nodes.insert(Key::of(node).name, cidr);
                    }
                }
                break;
            }
            Err(e) => {
                tracing::warn!(error = %e, "listing nodes failed; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    }
    let keys = runner::keys(runner::touched(api.clone(), ""), |n| Some(Key::of(&n)));
    let (api, allocator) = (&api, &allocator);
    runner::run("node-ipam", vec![keys], |key| {
        reconcile(api, allocator, key)
    })
    .await;
}

async fn reconcile(
    api: &Api<DynamicObject>,
    allocator: &Mutex<Allocator>,
    key: Key,
) -> Result<(), Error> {
    let lock = || allocator.lock().unwrap_or_else(|e| e.into_inner());
    let Some(node) = api.get_opt(&key.name).await? else {
        // RA `ReleaseCIDR` on the node's deletion.
        let mut a = lock();
        if let Some(cidr) = a.nodes.remove(&key.name) {
            a.set.release(&cidr);
        }
        return Ok(());
    };
    // RA `AllocateOrOccupyCIDR`: a node that has a block keeps it.
    if let Some(cidr) = pod_cidr(&node) {
        let mut a = lock();
        a.set.occupy(&cidr);
        a.nodes.insert(key.name, cidr);
        return Ok(());
    }
    let cidr = lock()
        .set
        .allocate_next()
        .ok_or_else(|| Error::Waiting(format!("no remaining CIDRs for node {}", key.name)))?;
    let patch = json!({"spec": {"podCIDR": cidr.to_string(), "podCIDRs": [cidr.to_string()]}});
    match api
        .patch(
            &key.name,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
    {
        Ok(_) => {
            lock().nodes.insert(key.name, cidr);
            Ok(())
        }
        Err(e) => {
            // RA `updateCIDRsAllocation`: released when not written.
            lock().set.release(&cidr);
            Err(e.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cluster: &str) -> CidrSet {
        CidrSet::new(Cidr::parse(cluster).unwrap(), NODE_MASK).unwrap()
    }

    #[test]
    fn blocks_are_given_in_order_from_the_first() {
        let mut s = set("10.244.0.0/16");
        let given: Vec<String> = (0..3)
            .map(|_| s.allocate_next().unwrap().to_string())
            .collect();
        assert_eq!(given, ["10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24"]);
    }

    #[test]
    fn occupied_blocks_are_skipped_and_a_released_one_not_given_at_once() {
        let mut s = set("10.244.0.0/16");
        s.occupy(&Cidr::parse("10.244.0.0/24").unwrap());
        let first = s.allocate_next().unwrap();
        assert_eq!(first.to_string(), "10.244.1.0/24");
        s.release(&first);
        // `AllocateNext` goes on from the block after the last one given.
        assert_eq!(s.allocate_next().unwrap().to_string(), "10.244.2.0/24");
    }

    #[test]
    fn a_full_set_gives_none_and_wraps_to_a_released_block() {
        let mut s = set("10.244.0.0/23");
        let a = s.allocate_next().unwrap();
        let b = s.allocate_next().unwrap();
        assert_eq!(b.to_string(), "10.244.1.0/24");
        assert!(s.allocate_next().is_none());
        s.release(&a);
        assert_eq!(s.allocate_next(), Some(a));
    }

    #[test]
    fn blocks_too_many_or_larger_than_the_cluster_cidr_are_refused() {
        assert!(CidrSet::new(Cidr::parse("10.0.0.0/8").unwrap(), 25).is_none());
        assert!(CidrSet::new(Cidr::parse("10.0.0.0/24").unwrap(), 16).is_none());
    }
}
