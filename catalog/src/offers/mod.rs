//! Offers: what providers sell and anyone browses.
//!
//! - [`offer`]: offers and plans — the JSON the thesis writes, its
//!   validation, and the stored form. The stored form ([`Offer`], [`Plan`],
//!   [`Writer`]) and exact costs ([`Cost`]) are the wire types of
//!   `catalog-client`, declared once for the server and its clients.
//! - [`filter`]: the filters of `GET /offers` (and of the feed).
//! - [`liqo`]: the server-added `liqo` field and its filter, and the
//!   re-stamping of a provider's offers when what they carry of it changes.
//! - [`self_check`]: the filters of the server-added `enforcement` and
//!   `isolation` fields (the levels the provider's self-checks report).
//! - [`service`]: service offers' plans — hosting policy, parameter
//!   schemas checked on publish, parameters checked against them.
//! - [`labels`]: provider labels, validated as Kubernetes labels.
//! - [`unique_keys`]: the body's free-form objects refuse a key given twice.
//! - [`rules`]: the decisions of a write (ownership, versions), made once
//!   for every backend; [`stamps`]: who last changed each plan, and when.
//! - [`store`]: the [`OfferStore`] trait the backends implement, and
//!   [`change`]: what they publish after each committed write.
//! - [`handlers`]: `GET /offers`, `GET/POST/DELETE /offer/{id}`; the list's
//!   body as sent (ETag, 304, compression): [`list_body`].
//!
//! Handlers get this feature's own state, [`Offers`], as
//! `web::Data<Offers>`.

pub mod change;
pub mod filter;
pub mod handlers;
pub mod labels;
pub mod liqo;
pub mod list_body;
pub mod offer;
pub mod rules;
pub mod self_check;
pub mod service;
pub mod stamps;
pub mod store;
pub mod unique_keys;

use std::sync::Arc;

use crate::providers::ProviderStore;

pub use catalog_client::wire::cost::{Cost, CostError, COST_SCALE};
pub use change::OfferChange;
pub use filter::OfferFilter;
pub use labels::Labels;
pub use offer::{
    HostingPolicy, Offer, OfferDraft, OfferInput, OfferKind, OfferSpec, Plan, PlanInput,
    PlanSchemas, ProviderRef, MAX_PLANS, MAX_RESOURCES,
};
pub use stamps::Writer;
pub use store::{OfferStore, PutOutcome};

/// What the offer handlers share (`web::Data<Offers>`).
#[derive(Clone)]
pub struct Offers {
    pub store: Arc<dyn OfferStore>,
    /// A disabled provider may withdraw its offers but not publish.
    pub providers: Arc<dyn ProviderStore>,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// The unit of the plans' costs, stamped on every offer served.
    pub pricing: catalog_client::wire::Pricing,
}

impl Offers {
    /// `offer` as every read answers it: [`offer::served`], with this
    /// catalog's `pricing`.
    pub fn serve(&self, offer: Offer) -> Offer {
        Offer {
            pricing: Some(self.pricing.clone()),
            ..offer::served(offer)
        }
    }
}
