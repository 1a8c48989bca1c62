//! The followed contracts as a pure state: what the stream's lines and the
//! fallback polls do to the set, with no I/O, so every rule is unit-tested.
//!
//! Contracts are kept as the JSON the catalog sent (so a caller reading
//! them as its own type sees fields [`Contract`] does not know) beside
//! their [`Contract`] reading. Each carries the `seq` it was learnt at: a
//! change older than what is held for its contract (or than the last
//! snapshot) is ignored, and an ended contract leaves a marker with its
//! `seq`, so a late, older line cannot bring it back.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::wire::Contract;

/// Ended contracts remembered (their end's `seq`) before the older half is
/// forgotten; the forgotten ones are still covered by [`ContractSet`]'s
/// floor, raised to the newest of them.
const MAX_ENDED: usize = 10_000;

/// One active contract held.
#[derive(Debug, Clone)]
struct Held {
    /// The position it was learnt at (for a polled one: the stream position
    /// at the poll, so every later change applies).
    seq: u64,
    raw: Value,
    /// None when the JSON does not read as a [`Contract`] (a newer
    /// catalog's shape): kept for raw readers only.
    contract: Option<Contract>,
}

/// What a contract line carries that the set needs.
#[derive(Debug)]
struct Read {
    id: String,
    active: bool,
    raw: Value,
    contract: Option<Contract>,
}

/// Why a contract in a line cannot be followed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("a contract without {0}: left out")]
pub struct Unreadable(&'static str);

fn read(raw: Value) -> Result<Read, Unreadable> {
    let id = raw
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .ok_or(Unreadable("an id"))?
        .to_string();
    let active = raw
        .get("active")
        .and_then(Value::as_bool)
        .ok_or(Unreadable("`active`"))?;
    let contract = <Contract as serde::Deserialize>::deserialize(&raw).ok();
    Ok(Read {
        id,
        active,
        raw,
        contract,
    })
}

/// The caller's active contracts as the lines and polls left them.
#[derive(Debug, Clone, Default)]
pub struct ContractSet {
    /// None until a snapshot or a poll answered.
    held: Option<BTreeMap<String, Held>>,
    /// Ended contracts, by id: the `seq` of their end.
    ended: BTreeMap<String, u64>,
    /// Lines older than this are already in what is held (the last
    /// snapshot's `seq`, raised when ended markers are forgotten).
    floor: u64,
    /// The stream position: the highest `seq` seen.
    seq: u64,
    /// Whether a stream line was seen (then `seq` can be resumed from).
    positioned: bool,
    /// Contracts left out for being unreadable (for the caller's log).
    unreadable: Vec<Unreadable>,
}

impl ContractSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// The stream position (0 before any line).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The position a reconnect resumes from: None before any stream line.
    pub fn since(&self) -> Option<u64> {
        self.positioned.then_some(self.seq)
    }

    /// Forget the position (the catalog refused to resume from it): the
    /// next connect takes a snapshot. The contracts held stay.
    pub fn forget_position(&mut self) {
        self.positioned = false;
    }

    /// Whether a snapshot or a poll answered.
    pub fn known(&self) -> bool {
        self.held.is_some()
    }

    /// Contracts left out since the last call, for the caller to log.
    pub fn take_unreadable(&mut self) -> Vec<Unreadable> {
        std::mem::take(&mut self.unreadable)
    }

    /// A line that only moves the position (`resumed`, `heartbeat`).
    pub fn position(&mut self, seq: u64) {
        self.seq = self.seq.max(seq);
        self.positioned = true;
    }

    /// `snapshot`: the contracts as of `seq` replace whatever was held.
    /// Returns whether the contracts changed.
    pub fn snapshot(&mut self, seq: u64, contracts: Vec<Value>) -> bool {
        self.position(seq);
        self.floor = seq;
        self.ended.clear();
        self.replace(seq, contracts)
    }

    /// A fallback poll's answer (`GET /contracts?active=true`): it replaces
    /// the set, at the current position, so every later change applies.
    /// Returns whether the contracts changed.
    pub fn polled(&mut self, contracts: Vec<Value>) -> bool {
        self.replace(self.seq, contracts)
    }

    fn replace(&mut self, seq: u64, contracts: Vec<Value>) -> bool {
        let mut fresh = BTreeMap::new();
        for raw in contracts {
            match read(raw) {
                Ok(r) if r.active => {
                    fresh.insert(
                        r.id,
                        Held {
                            seq,
                            raw: r.raw,
                            contract: r.contract,
                        },
                    );
                }
                Ok(_) => {}
                Err(e) => self.unreadable.push(e),
            }
        }
        let changed = match &self.held {
            None => true,
            Some(old) => {
                old.len() != fresh.len()
                    || old
                        .iter()
                        .zip(&fresh)
                        .any(|((a, x), (b, y))| a != b || x.raw != y.raw)
            }
        };
        self.held = Some(fresh);
        changed
    }

    /// `change`: one contract as it now is, at `seq`. An active one is
    /// added or replaced, an ended one removed; one older than what is held
    /// for it is ignored. Returns whether the contracts changed.
    pub fn change(&mut self, seq: u64, contract: Value) -> bool {
        self.position(seq);
        let r = match read(contract) {
            Ok(r) => r,
            Err(e) => {
                self.unreadable.push(e);
                return false;
            }
        };
        if seq < self.floor || self.ended.get(&r.id).is_some_and(|&end| seq < end) {
            return false;
        }
        // Before the first snapshot (a resume without one cannot happen,
        // but a catalog may send a change first): the change starts the set
        // only once something answered, so "unknown" is never mistaken for
        // "nothing".
        let Some(held) = self.held.as_mut() else {
            return false;
        };
        if held.get(&r.id).is_some_and(|h| seq < h.seq) {
            return false;
        }
        if r.active {
            self.ended.remove(&r.id);
            let same = held.get(&r.id).is_some_and(|h| h.raw == r.raw);
            held.insert(
                r.id,
                Held {
                    seq,
                    raw: r.raw,
                    contract: r.contract,
                },
            );
            !same
        } else {
            let removed = held.remove(&r.id).is_some();
            self.ended.insert(r.id, seq);
            self.forget_old_ends();
            removed
        }
    }

    /// Keep the ended markers bounded: the older half goes, and the floor
    /// rises to the newest of them (a line that old is stale anyway).
    fn forget_old_ends(&mut self) {
        if self.ended.len() <= MAX_ENDED {
            return;
        }
        let mut seqs: Vec<u64> = self.ended.values().copied().collect();
        seqs.sort_unstable();
        let cut = seqs[seqs.len() / 2];
        self.ended.retain(|_, &mut end| end > cut);
        self.floor = self.floor.max(cut);
    }

    /// The contracts held, newest first (by purchasedAt, then id): the ones
    /// that read as [`Contract`], and every one as JSON. None until a
    /// snapshot or a poll answered.
    pub fn contracts(&self) -> Option<(Vec<Contract>, Vec<Value>)> {
        let held = self.held.as_ref()?;
        let mut all: Vec<&Held> = held.values().collect();
        // Ids are unique, so the order is total; contracts that do not read
        // as a Contract sort by their purchasedAt text (RFC 3339 from the
        // catalog, comparable as text) and id.
        all.sort_by(|a, b| {
            order_key(b)
                .cmp(&order_key(a))
                .then_with(|| id(a).cmp(id(b)))
        });
        let contracts = all.iter().filter_map(|h| h.contract.clone()).collect();
        let raw = all.iter().map(|h| h.raw.clone()).collect();
        Some((contracts, raw))
    }
}

fn order_key(h: &Held) -> Option<chrono::DateTime<chrono::Utc>> {
    match &h.contract {
        Some(c) => Some(c.purchased_at),
        None => h
            .raw
            .get("purchasedAt")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&chrono::Utc)),
    }
}

fn id(h: &Held) -> &str {
    h.raw.get("id").and_then(Value::as_str).unwrap_or_default()
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
