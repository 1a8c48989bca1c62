//! One set of offers made ready for deciding many namespaces: the
//! [`Index`] built once, and each provider verdict list ([`Qualified`])
//! remembered for the namespaces that share a consumer, rules and demand —
//! the verdicts depend on nothing else, and most namespaces of a consumer
//! ask for the same (or no) resources. Without it a round over N
//! namespaces judged every provider N times (docs/benchmarks.md, the
//! orchestrator at scale). The controller makes one per change of the
//! catalog's offers; deciding with it decides exactly as
//! [`decide`](super::decide) does.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use quantity::ResourceList;

use super::index::Index;
use super::{Decision, Input, Qualified};
use crate::offers::Offers;
use crate::policy::Rules;

/// Provider verdicts remembered at most (summed over the remembered
/// lists): bounds the memory at about this many candidates (≈ 100 bytes
/// each) however varied the namespaces' demands are; past it verdicts are
/// worked out each time, as without the memo.
pub const REMEMBERED_VERDICTS: usize = 256 * 1024;

/// The offers and disabled providers of one snapshot, ready to decide on.
#[derive(Debug)]
pub struct Prepared {
    index: Index,
    disabled: BTreeSet<String>,
    memo: Mutex<Memo>,
}

type Key = (Rules, ResourceList);

#[derive(Debug, Default)]
struct Memo {
    /// By consumer: each rules and demand seen, with its verdicts.
    lists: HashMap<String, Vec<(Key, Arc<Qualified>)>>,
    verdicts: usize,
}

impl Prepared {
    pub fn new(offers: &Offers, disabled: &BTreeSet<String>) -> Prepared {
        Prepared {
            index: Index::new(offers),
            disabled: disabled.clone(),
            memo: Mutex::new(Memo::default()),
        }
    }

    /// Decide `input` (its `offers` and `disabled` must be those this was
    /// made from).
    pub fn decide(&self, input: &Input<'_>) -> Decision {
        let qualified = self.qualified(input.consumer, input.rules, input.demand);
        super::decide_qualified(input, &self.index, &qualified)
    }

    /// The verdicts for a namespace of `consumer` under `rules` needing
    /// `demand`: remembered, or worked out (and remembered while there is
    /// room).
    fn qualified(&self, consumer: &str, rules: &Rules, demand: &ResourceList) -> Arc<Qualified> {
        let found = self.memo.lock().ok().and_then(|memo| {
            memo.lists.get(consumer).and_then(|list| {
                list.iter()
                    .find(|((r, d), _)| r == rules && d == demand)
                    .map(|(_, q)| q.clone())
            })
        });
        if let Some(q) = found {
            return q;
        }
        let q = Arc::new(self.index.qualify(consumer, &self.disabled, rules, demand));
        if let Ok(mut memo) = self.memo.lock() {
            let size = q.candidates.len() + q.excluded.len();
            if memo.verdicts + size <= REMEMBERED_VERDICTS {
                memo.verdicts += size;
                memo.lists
                    .entry(consumer.to_string())
                    .or_default()
                    .push(((rules.clone(), demand.clone()), q.clone()));
            }
        }
        q
    }

    /// How many verdict lists are remembered (for tests).
    pub fn remembered(&self) -> usize {
        self.memo
            .lock()
            .map(|m| m.lists.values().map(Vec::len).sum())
            .unwrap_or_default()
    }
}
