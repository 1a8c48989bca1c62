//! A reservation record as a store test writes it: held, unbought, for
//! five minutes, on the REST channel, at no cost.

use catalog::buying::model::{Channel, Reservation, ReservationState};
use catalog::offers::Cost;
use chrono::{DateTime, Utc};

/// `consumer` holds one unit of plan `p` of `provider`'s offer
/// `<provider>-offer` from `now`.
pub fn reservation(id: &str, consumer: &str, provider: &str, now: DateTime<Utc>) -> Reservation {
    Reservation {
        id: id.into(),
        consumer: consumer.into(),
        offer_id: format!("{provider}-offer"),
        plan_id: "p".into(),
        cluster_id: provider.into(),
        cost: Cost::ZERO,
        state: ReservationState::Reserved,
        channel: Channel::Rest,
        created_at: now,
        expires_at: now + chrono::Duration::seconds(300),
        purchased_at: None,
        ended_at: None,
        contract: None,
        reserved_plan: None,
        bought_by: None,
    }
}
