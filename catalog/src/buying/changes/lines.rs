//! The stream's lines as bytes: one JSON object and a line feed each
//! ([`ContractEvent`]). A change is rendered as `GET /contracts` shows the
//! contract to the line's reader ([`service::view`], [`service::for_party`]):
//! never credentials, the network policy for its two parties only. A
//! record without contract terms (a reservation, an Open Service Broker
//! purchase) is no contract: no line.

use std::cell::OnceCell;

use bytes::Bytes;
use chrono::{DateTime, Utc};

use crate::buying::contracts::model::Party;
use crate::buying::contracts::service;
use crate::buying::store::Sequenced;
use crate::buying::Buying;
use catalog_client::wire::contract_stream::ContractEvent;

/// `event` as one NDJSON line.
pub fn encode(event: &ContractEvent) -> Bytes {
    // A wire type of strings, numbers and decimals: serializing cannot fail.
    let mut v = serde_json::to_vec(event).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

/// The change line of one record, rendered at most once per way of
/// seeing it: its two parties see the same line, an administrator looking
/// on another (without the network policy).
pub struct ChangeLines<'a> {
    buying: &'a Buying,
    record: &'a Sequenced,
    now: DateTime<Utc>,
    parties: OnceCell<Option<Bytes>>,
    admin: OnceCell<Option<Bytes>>,
}

impl<'a> ChangeLines<'a> {
    pub fn new(buying: &'a Buying, record: &'a Sequenced, now: DateTime<Utc>) -> Self {
        ChangeLines {
            buying,
            record,
            now,
            parties: OnceCell::new(),
            admin: OnceCell::new(),
        }
    }

    /// The line for a reader that is party `p` of the record (None: not a
    /// contract).
    pub fn line(&self, p: Party) -> Option<Bytes> {
        let cell = if p == Party::Admin {
            &self.admin
        } else {
            &self.parties
        };
        cell.get_or_init(|| {
            let mut c = service::view(self.buying, &self.record.record, self.now)?;
            service::for_party(&mut c, p);
            Some(encode(&ContractEvent::Change {
                seq: self.record.seq,
                contract: Box::new(c),
            }))
        })
        .clone()
    }
}
