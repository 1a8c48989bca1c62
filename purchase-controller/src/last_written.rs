//! The status this replica last wrote on each Purchase, so that a round
//! started from a cache that has not seen that write yet (one woken by
//! the contract stream or a watch right after the round that wrote)
//! starts from what it wrote, not from the older status: it then neither
//! writes the same status again nor repeats the Event of a phase change
//! already announced (issue 44).
//!
//! A Purchase read at a version this replica wrote over is stale; any
//! other version (the write itself come back through the watch, or
//! someone else's change after it) is the cache's to trust.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::ResourceExt;

use crate::model::{Purchase, PurchaseStatus};

/// One write: the versions of the Purchase it went over (and those the
/// writes before it went over or made), and the status it left.
#[derive(Debug, Clone)]
struct Written {
    superseded: Vec<String>,
    version: Option<String>,
    status: PurchaseStatus,
}

/// How many superseded versions are kept per Purchase: more than the
/// writes a cache can lag behind by.
const KEPT: usize = 8;

/// Per Purchase (by key), the last status written.
#[derive(Debug, Default)]
pub struct LastWritten {
    by_key: Mutex<HashMap<String, Written>>,
}

impl LastWritten {
    /// The status a round on `purchase` (as the cache holds it) starts
    /// from: its own, unless this replica wrote over that very version —
    /// then what it wrote.
    pub fn before(&self, key: &str, purchase: &Purchase) -> PurchaseStatus {
        let by_key = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        let version = purchase.resource_version();
        match (by_key.get(key), version) {
            (Some(written), Some(version)) if written.superseded.contains(&version) => {
                written.status.clone()
            }
            _ => purchase.status(),
        }
    }

    /// `status` was written over the versions `superseded` (the one the
    /// round read, and any it wrote itself before), making `version`.
    pub fn wrote(
        &self,
        key: &str,
        superseded: Vec<String>,
        version: Option<String>,
        status: PurchaseStatus,
    ) {
        let mut by_key = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        // Every version before the last write is stale, the earlier
        // writes' own included.
        let mut all = match by_key.remove(key) {
            Some(earlier) => {
                let mut all = earlier.superseded;
                all.extend(earlier.version);
                all
            }
            None => Vec::new(),
        };
        all.extend(superseded);
        all.retain(|v| Some(v) != version.as_ref());
        let excess = all.len().saturating_sub(KEPT);
        all.drain(..excess);
        by_key.insert(
            key.to_string(),
            Written {
                superseded: all,
                version,
                status,
            },
        );
    }

    /// The Purchase is gone.
    pub fn forget(&self, key: &str) {
        self.by_key
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PurchaseSpec;

    fn at(version: &str, phase: &str) -> Purchase {
        let mut purchase = Purchase::new("p", PurchaseSpec::default());
        purchase.metadata.resource_version = Some(version.to_string());
        purchase.status = Some(PurchaseStatus {
            phase: phase.to_string(),
            ..PurchaseStatus::default()
        });
        purchase
    }

    #[test]
    fn a_stale_read_starts_from_what_was_written() {
        let last = LastWritten::default();
        // Nothing written yet: the cache's.
        assert_eq!(last.before("team/p", &at("1", "Pending")).phase, "Pending");
        // Read at 1, written Ready (at 2): a round reading 1 again starts
        // from Ready, so it neither writes it nor announces it again.
        let ready = PurchaseStatus {
            phase: "Ready".into(),
            ..PurchaseStatus::default()
        };
        last.wrote("team/p", vec!["1".into()], Some("2".into()), ready);
        assert_eq!(last.before("team/p", &at("1", "Pending")).phase, "Ready");
        // The write came back (2), or someone changed it since (3): the
        // cache's.
        assert_eq!(last.before("team/p", &at("2", "Ready")).phase, "Ready");
        assert_eq!(last.before("team/p", &at("3", "Failed")).phase, "Failed");
        // Written again from the stale 1 (making 4): 1 and 2 are both
        // stale now.
        let ended = PurchaseStatus {
            phase: "Ended".into(),
            ..PurchaseStatus::default()
        };
        last.wrote("team/p", vec!["1".into()], Some("4".into()), ended);
        assert_eq!(last.before("team/p", &at("2", "Ready")).phase, "Ended");
        assert_eq!(last.before("team/p", &at("1", "Pending")).phase, "Ended");
        assert_eq!(last.before("team/p", &at("4", "Ended")).phase, "Ended");
        // Another Purchase, or this one forgotten: the cache's.
        assert_eq!(last.before("team/q", &at("1", "Pending")).phase, "Pending");
        last.forget("team/p");
        assert_eq!(last.before("team/p", &at("1", "Pending")).phase, "Pending");
    }
}
