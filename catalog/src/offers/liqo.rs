//! The offers' `liqo` field: the Liqo generations (`v0`, `v1`) the owning
//! provider peers with, stamped by the server on every write (with the
//! owner's `enforcement` and `isolation`, [`super::self_check`]) and again
//! on each of a provider's offers when any of them changes ([`restamp`]);
//! and the `liqo=v0|v1` filter's rule ([`matches`]), which the embedded
//! store runs in memory and the MongoDB store as a query on the same field.

use std::sync::Arc;

use super::{Offer, OfferDraft, OfferFilter, OfferStore, ProviderRef};
use crate::http::FieldError;
use crate::providers::{LiqoGeneration, OwnerStamp};
use crate::store::StoreError;

/// Parse the `liqo` filter's value.
pub fn parse_filter(key: &str, value: &str) -> Result<LiqoGeneration, FieldError> {
    LiqoGeneration::parse(value).ok_or_else(|| FieldError::new(key, "must be v0 or v1"))
}

/// Whether `offer` passes `liqo=` (`None`: no such filter).
pub fn matches(wanted: Option<LiqoGeneration>, offer: &Offer) -> bool {
    wanted.is_none_or(|g| offer.liqo.contains(&g))
}

/// Most attempts at re-stamping one offer that others keep writing.
const MAX_ATTEMPTS: usize = 8;

/// Re-stamp every live offer of `cluster_id` with `stamp`: each gets a new
/// version (a feed upsert) unless it already says so. Returns how many
/// were re-stamped.
pub async fn restamp(
    store: &dyn OfferStore,
    cluster_id: &str,
    stamp: &OwnerStamp,
) -> Result<usize, StoreError> {
    let filter = OfferFilter {
        provider: Some(cluster_id.to_string()),
        ..OfferFilter::default()
    };
    let mut changed = 0;
    for offer in store.list_offers(&filter).await? {
        if offer.cluster_id != cluster_id {
            continue; // another provider whose *name* is this cluster ID
        }
        let mut current = Some(offer);
        for _ in 0..MAX_ATTEMPTS {
            let Some(offer) = current.take() else { break };
            if OwnerStamp::carried_by(&offer) == *stamp {
                break;
            }
            let version = offer.version;
            let id = offer.id.clone();
            match store.put_offer(redraft(offer, stamp), Some(version)).await {
                Ok(_) => {
                    changed += 1;
                    break;
                }
                // Written meanwhile (or deleted): look again.
                Err(StoreError::VersionConflict { .. }) => {
                    current = store.get_offer(&id).await?;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(changed)
}

/// `offer` as the draft that rewrites it with `stamp`.
fn redraft(offer: Offer, stamp: &OwnerStamp) -> OfferDraft {
    OfferDraft {
        id: offer.id,
        owner: ProviderRef {
            cluster_id: offer.cluster_id,
            cluster_name: offer.cluster_name,
            stamp: stamp.clone(),
        },
        name: offer.name,
        offer_type: offer.offer_type,
        kind: offer.kind,
        description: offer.description,
        plans: offer.plans,
        labels: offer.labels,
        // Plans are unchanged, so they keep their stamps whoever writes.
        writer: super::Writer::Provider,
    }
}

/// The providers feature's hook, re-stamping a provider's offers when its
/// generations, enforcement or isolation level change (failures are logged:
/// the provider's own change succeeded; its next offer write stamps again).
pub struct Restamper(pub Arc<dyn OfferStore>);

#[async_trait::async_trait]
impl crate::providers::peering::StampChanged for Restamper {
    async fn changed(&self, cluster_id: &str, stamp: &OwnerStamp) {
        match restamp(&*self.0, cluster_id, stamp).await {
            Ok(n) => tracing::info!(
                cluster_id,
                offers = n,
                "offers re-stamped with the provider's Liqo generations and self-check levels"
            ),
            Err(e) => {
                tracing::warn!(cluster_id, error = %e, "re-stamping the provider's offers failed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_wants_the_generation_stamped() {
        assert_eq!(parse_filter("liqo", "v1").unwrap(), LiqoGeneration::V1);
        assert_eq!(parse_filter("liqo", "V1").unwrap_err().field, "liqo");
        let filter = OfferFilter::from_pairs([("liqo", "v0")]).unwrap();
        let spec = crate::offers::OfferSpec::from_json(
            br#"{"name":"x","type":"t","plans":{"p":{"name":"p","cost":"1","resources":{}}}}"#,
        )
        .unwrap();
        let owner = |liqo| ProviderRef {
            cluster_id: "c".into(),
            cluster_name: "n".into(),
            stamp: OwnerStamp {
                liqo,
                ..OwnerStamp::default()
            },
        };
        let now = crate::store::now();
        let v1 = spec
            .clone()
            .into_draft("a".into(), owner(vec![LiqoGeneration::V1]))
            .into_offer(now, now, 1);
        let both = spec
            .into_draft(
                "b".into(),
                owner(vec![LiqoGeneration::V0, LiqoGeneration::V1]),
            )
            .into_offer(now, now, 1);
        assert!(!filter.matches(&v1) && filter.matches(&both));
        assert!(OfferFilter::default().matches(&v1));
    }
}
