//! The service instance a provider sold: what every provider-side route of
//! a service contract (`/provider/contracts/{id}/...`) acts on, found the
//! same way by each.

use super::model::OsbInstance;
use super::Osb;
use crate::auth::Caller;
use crate::http::ApiError;

/// The service instance bought as contract `id` from the caller's
/// cluster: 404 for another provider's contract, a capacity contract or
/// an unknown one (the same answer, so nothing leaks).
pub async fn sold_instance(
    state: &Osb,
    caller: &Caller,
    id: &str,
) -> Result<OsbInstance, ApiError> {
    state
        .store
        .osb_instance_of_reservation(id)
        .await?
        .filter(|i| i.service && i.provider.as_deref() == Some(caller.cluster_id.as_str()))
        .ok_or_else(|| ApiError::NotFound(format!("no service instance bought as contract {id}")))
}
