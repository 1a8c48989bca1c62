//! Change events: what a store publishes after each committed write, for the
//! consumer feed and anything else that must follow the catalog live.

use super::Offer;

/// One committed change. Versions let a receiver drop stale copies: for one
/// offer id, a later event always carries a larger `version`.
// One change per write, moved from the store to its followers and never
// held in bulk (a broadcast channel keeps a bounded few): boxing the
// offer would cost an allocation per write for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum OfferChange {
    /// An offer was created or replaced; this is its new state.
    Upserted(Offer),
    /// An offer was deleted. `version` is the deletion's own version (one
    /// past the offer's last), `cluster_id` its former owner.
    Deleted {
        id: String,
        cluster_id: String,
        version: u64,
    },
    /// Changes may have been missed (e.g. the MongoDB change stream had to be
    /// reopened without its resume point): reload the full list.
    Resync,
}

impl OfferChange {
    /// The offer id this change concerns, if it concerns one.
    pub fn offer_id(&self) -> Option<&str> {
        match self {
            OfferChange::Upserted(o) => Some(&o.id),
            OfferChange::Deleted { id, .. } => Some(id),
            OfferChange::Resync => None,
        }
    }
}
