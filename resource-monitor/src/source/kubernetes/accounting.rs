//! The local monitor's bookkeeping, fed by Node and Pod watch events:
//! allocatable of the counted nodes, requests of the counted pods, and the
//! requests of pods each peer offloaded here. Pure state, no I/O, so the
//! rules can be tested without an API server.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::watcher::Event;
use quantity::ResourceList;

use super::objects::{counted_node, counted_pod, CountedPod};

/// One watched kind: the current objects (only those that count), and the
/// objects of a re-list in progress.
#[derive(Debug)]
struct Tracked<V> {
    items: HashMap<String, V>,
    relisting: Option<HashMap<String, V>>,
    synced: bool,
}

impl<V> Default for Tracked<V> {
    fn default() -> Self {
        Self {
            items: HashMap::new(),
            relisting: None,
            synced: false,
        }
    }
}

/// The answer of the local monitor, kept up to date from watch events.
#[derive(Debug)]
pub struct Accounting {
    origin_labels: Vec<String>,
    nodes: Tracked<ResourceList>,
    pods: Tracked<CountedPod>,
    /// Sum of the allocatable of counted nodes.
    allocatable: ResourceList,
    /// Sum of the requests of counted pods (zero entries removed).
    used: ResourceList,
    /// Per peer, the requests of the counted pods it offloaded here.
    offloaded: HashMap<String, ResourceList>,
}

/// Whether an event changed the answer, which is then worth a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed {
    Yes,
    No,
}

impl Accounting {
    /// `origin_labels`: the pod labels naming the peer that offloaded a pod.
    pub fn new(origin_labels: Vec<String>) -> Self {
        Self {
            origin_labels,
            nodes: Tracked::default(),
            pods: Tracked::default(),
            allocatable: ResourceList::new(),
            used: ResourceList::new(),
            offloaded: HashMap::new(),
        }
    }

    /// Both kinds have been listed at least once.
    pub fn synced(&self) -> bool {
        self.nodes.synced && self.pods.synced
    }

    /// What may be offered to `originator`: allocatable of the counted
    /// nodes, minus the requests of the counted pods, plus the requests of
    /// the pods `originator` itself offloaded here; never below zero. Only
    /// resources the nodes offer appear. `None` before the first sync.
    pub fn answer(&self, originator: &str) -> Option<ResourceList> {
        if !self.synced() {
            return None;
        }
        let own = self.offloaded.get(originator);
        let answer = self
            .allocatable
            .0
            .iter()
            .map(|(name, allocatable)| {
                let mut free = allocatable.clone();
                if let Some(mine) = own.and_then(|o| o.0.get(name)) {
                    free = free.add(mine);
                }
                if let Some(used) = self.used.0.get(name) {
                    free = free.saturating_sub(used);
                }
                (name.clone(), free)
            })
            .collect();
        Some(ResourceList(answer))
    }

    pub fn on_node_event(&mut self, event: Event<Node>) -> Changed {
        match event {
            Event::Init => {
                self.nodes.relisting = Some(HashMap::new());
                Changed::No
            }
            Event::InitApply(node) => {
                if let (Some(buffer), Some(counted)) =
                    (self.nodes.relisting.as_mut(), counted_node(&node))
                {
                    buffer.insert(node_key(&node), counted);
                }
                Changed::No
            }
            Event::InitDone => {
                let first = !self.nodes.synced;
                self.nodes.items = self.nodes.relisting.take().unwrap_or_default();
                self.nodes.synced = true;
                let changed = self.recompute_allocatable();
                if first && self.synced() {
                    Changed::Yes
                } else {
                    changed
                }
            }
            Event::Apply(node) => {
                let key = node_key(&node);
                match counted_node(&node) {
                    Some(counted) => {
                        self.nodes.items.insert(key, counted);
                    }
                    None => {
                        self.nodes.items.remove(&key);
                    }
                }
                self.recompute_allocatable()
            }
            Event::Delete(node) => {
                if self.nodes.items.remove(&node_key(&node)).is_some() {
                    self.recompute_allocatable()
                } else {
                    Changed::No
                }
            }
        }
    }

    pub fn on_pod_event(&mut self, event: Event<Pod>) -> Changed {
        match event {
            Event::Init => {
                self.pods.relisting = Some(HashMap::new());
                Changed::No
            }
            Event::InitApply(pod) => {
                if let (Some(buffer), Some(counted)) = (
                    self.pods.relisting.as_mut(),
                    counted_pod(&pod, &self.origin_labels),
                ) {
                    buffer.insert(pod_key(&pod), counted);
                }
                Changed::No
            }
            Event::InitDone => {
                let first = !self.pods.synced;
                self.pods.items = self.pods.relisting.take().unwrap_or_default();
                self.pods.synced = true;
                let changed = self.recompute_used();
                if first && self.synced() {
                    Changed::Yes
                } else {
                    changed
                }
            }
            Event::Apply(pod) => {
                let key = pod_key(&pod);
                let new = counted_pod(&pod, &self.origin_labels);
                let old = match &new {
                    Some(counted) => self.pods.items.insert(key, counted.clone()),
                    None => self.pods.items.remove(&key),
                };
                self.pod_changed(old, new)
            }
            Event::Delete(pod) => {
                let old = self.pods.items.remove(&pod_key(&pod));
                self.pod_changed(old, None)
            }
        }
    }

    /// Adjust the totals for one pod going from `old` to `new`.
    fn pod_changed(&mut self, old: Option<CountedPod>, new: Option<CountedPod>) -> Changed {
        let old = old.filter(|p| !is_empty(&p.requests));
        let new = new.filter(|p| !is_empty(&p.requests));
        if old == new {
            return Changed::No;
        }
        if let Some(old) = &old {
            self.used = subtract(&self.used, &old.requests);
            if let Some(origin) = &old.origin {
                let remaining = self
                    .offloaded
                    .get(origin)
                    .map(|o| subtract(o, &old.requests))
                    .unwrap_or_default();
                if remaining.0.is_empty() {
                    self.offloaded.remove(origin);
                } else {
                    self.offloaded.insert(origin.clone(), remaining);
                }
            }
        }
        if let Some(new) = &new {
            self.used = drop_zeros(self.used.add(&new.requests));
            if let Some(origin) = &new.origin {
                let sum = self
                    .offloaded
                    .get(origin)
                    .cloned()
                    .unwrap_or_default()
                    .add(&new.requests);
                self.offloaded.insert(origin.clone(), sum);
            }
        }
        if self.synced() {
            Changed::Yes
        } else {
            Changed::No
        }
    }

    fn recompute_allocatable(&mut self) -> Changed {
        let total = self
            .nodes
            .items
            .values()
            .fold(ResourceList::new(), |sum, node| sum.add(node));
        let changed = total != self.allocatable;
        self.allocatable = total;
        if changed && self.synced() {
            Changed::Yes
        } else {
            Changed::No
        }
    }

    fn recompute_used(&mut self) -> Changed {
        let mut used = ResourceList::new();
        let mut offloaded: HashMap<String, ResourceList> = HashMap::new();
        for pod in self.pods.items.values() {
            used = used.add(&pod.requests);
            if let Some(origin) = &pod.origin {
                let entry = offloaded.entry(origin.clone()).or_default();
                *entry = entry.add(&pod.requests);
            }
        }
        let used = drop_zeros(used);
        let changed = used != self.used || offloaded != self.offloaded;
        self.used = used;
        self.offloaded = offloaded;
        if changed && self.synced() {
            Changed::Yes
        } else {
            Changed::No
        }
    }
}

fn node_key(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

fn is_empty(list: &ResourceList) -> bool {
    list.0.values().all(|q| q.is_zero())
}

/// `a - b` per name, exact (the totals only ever lose what they gained);
/// names that reach zero are dropped so equal totals compare equal.
fn subtract(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (name, q) in &b.0 {
        if let Some(have) = out.0.get(name) {
            let left = have.sub(q);
            if left.is_zero() || left.is_negative() {
                out.0.remove(name);
            } else {
                out.0.insert(name.clone(), left);
            }
        }
    }
    out
}

fn drop_zeros(mut list: ResourceList) -> ResourceList {
    list.0.retain(|_, q| !q.is_zero());
    list
}
