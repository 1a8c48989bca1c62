//! The contract endpoints. A provider lists its active contracts with a
//! conditional `GET /contracts?active=true` (each with its consumer's
//! cluster ID and, for Liqo v1, whether its credentials are attached yet)
//! and attaches a peering user's kubeconfig to one of them; a consumer
//! reserves and buys a plan, reads its contract (with the peering
//! credentials and their state), reports where its side is and extends
//! the contract before it ends.

use reqwest::header::IF_NONE_MATCH;
use reqwest::{Method, StatusCode};

use crate::error::Error;
use crate::http::MAX_ANSWER_BYTES;
use crate::routes;
use crate::session::Session;
use crate::wire::{
    AttachCredentials, Contract, ContractNetworkPolicy, ContractState, ExtendRequest, PeeringState,
    PurchaseRequest, Reservation, ReserveRequest, StateReport, TenantPolicy, TenantPolicyReport,
};

/// Largest contract listing read (a few hundred bytes per contract).
pub const MAX_LISTING_BYTES: usize = 16 * 1024 * 1024;

/// What one listing found: contracts as [`Contract`]s, or as `T` for a
/// caller that reads each one on its own (so one it cannot read is left
/// out rather than failing the whole listing).
#[derive(Debug, Clone, PartialEq)]
pub enum Listing<T = Contract> {
    /// 304: the `ETag` given is still current.
    NotModified,
    /// The contracts, and the `ETag` to ask with next time.
    Contracts {
        etag: Option<String>,
        contracts: Vec<T>,
    },
}

/// Whether a provider's controller still has to attach credentials to
/// `contract`: an active Liqo v1 contract, with its consumer's cluster ID,
/// awaiting them.
pub fn awaits_credentials(contract: &Contract) -> bool {
    contract.active
        && contract.consumer_cluster_id.is_some()
        && contract
            .peering_state
            .as_ref()
            .is_some_and(|p| p.state == PeeringState::AwaitingCredentials)
}

impl Session {
    /// `GET /contracts?active=true`, conditional on `etag`: the caller's
    /// active contracts (a provider's: the ones bought from it, each with
    /// `consumer_cluster_id` and, for Liqo v1, its `peering_state`; see
    /// [`awaits_credentials`]).
    pub async fn active_contracts(&mut self, etag: Option<&str>) -> Result<Listing, Error> {
        self.active_contracts_as(etag).await
    }

    /// [`Session::active_contracts`], each contract read as `T` (e.g.
    /// `serde_json::Value`, to read them one by one).
    pub async fn active_contracts_as<T: serde::de::DeserializeOwned>(
        &mut self,
        etag: Option<&str>,
    ) -> Result<Listing<T>, Error> {
        let what = "GET /contracts";
        let route = format!("{}?active=true", routes::CONTRACTS);
        let answer = self
            .call(what, MAX_LISTING_BYTES, |http| {
                let request = http.request(Method::GET, &route)?;
                Ok(match etag {
                    Some(etag) => request.header(IF_NONE_MATCH, etag),
                    None => request,
                })
            })
            .await?;
        match answer.status {
            StatusCode::NOT_MODIFIED => Ok(Listing::NotModified),
            status if status.is_success() => Ok(Listing::Contracts {
                contracts: answer.json(what)?,
                etag: answer.etag,
            }),
            _ => Err(answer.unexpected(what)),
        }
    }

    /// `GET /contracts/{id}`: the contract with its credentials.
    pub async fn contract(&mut self, id: &str) -> Result<Contract, Error> {
        self.contract_as(id).await
    }

    /// `PUT /provider/contracts/{id}/peering` (a provider): attach the
    /// peering user's kubeconfig made for this contract's consumer
    /// cluster; the contract as now stored (without credentials). A
    /// kubeconfig the catalog's check refuses is [`Error::Rejected`] (400,
    /// naming the part); an ended contract [`Error::Ended`].
    pub async fn attach_credentials(
        &mut self,
        id: &str,
        kubeconfig: &str,
    ) -> Result<Contract, Error> {
        let what = "PUT /provider/contracts/{id}/peering";
        let body = AttachCredentials {
            kubeconfig: kubeconfig.to_string(),
        };
        let route = routes::contract_peering(id);
        let answer = self
            .call(what, MAX_ANSWER_BYTES, |http| {
                Ok(http.request(Method::PUT, &route)?.json(&body))
            })
            .await?;
        match answer.status {
            StatusCode::OK => answer.json(what),
            StatusCode::NOT_FOUND => Err(Error::NotFound(format!("contract {id}"))),
            StatusCode::CONFLICT => Err(Error::Ended(answer.message())),
            _ => Err(answer.rejected("the contract's credentials")),
        }
    }

    /// `POST /contracts/{id}/extend` (its consumer): push the contract's
    /// end `duration_seconds` further (None: to a whole contract duration
    /// from now), same id, same peering; the contract as now stored.
    pub async fn extend(
        &mut self,
        id: &str,
        duration_seconds: Option<u64>,
    ) -> Result<Contract, Error> {
        let what = "POST /contracts/{id}/extend";
        let body = ExtendRequest { duration_seconds };
        let route = routes::contract_extend(id);
        let answer = self
            .call(what, MAX_ANSWER_BYTES, |http| {
                Ok(http.request(Method::POST, &route)?.json(&body))
            })
            .await?;
        match answer.status {
            StatusCode::OK => answer.json(what),
            StatusCode::NOT_FOUND => Err(Error::NotFound(format!("contract {id}"))),
            _ => Err(answer.rejected("the extension")),
        }
    }

    /// `PUT /contracts/{id}/network-policy` (its consumer): the policy the
    /// contract's provider is to render for the buyer's pods there; the
    /// stored policy with its new revision. One the catalog's check
    /// refuses is [`Error::Rejected`] (400, naming the field); an ended
    /// contract [`Error::Ended`].
    pub async fn put_network_policy(
        &mut self,
        id: &str,
        policy: &TenantPolicy,
    ) -> Result<ContractNetworkPolicy, Error> {
        let what = "PUT /contracts/{id}/network-policy";
        let route = routes::contract_network_policy(id);
        let answer = self
            .call(what, MAX_ANSWER_BYTES, |http| {
                Ok(http.request(Method::PUT, &route)?.json(policy))
            })
            .await?;
        match answer.status {
            StatusCode::OK => answer.json(what),
            StatusCode::NOT_FOUND => Err(Error::NotFound(format!("contract {id}"))),
            StatusCode::CONFLICT => Err(Error::Ended(answer.message())),
            _ => Err(answer.rejected("the network policy")),
        }
    }

    /// `DELETE /contracts/{id}/network-policy` (its consumer): the
    /// provider goes back to the default isolation. Already absent counts
    /// as done.
    pub async fn delete_network_policy(&mut self, id: &str) -> Result<(), Error> {
        let what = "DELETE /contracts/{id}/network-policy";
        let route = routes::contract_network_policy(id);
        let answer = self
            .call(what, MAX_ANSWER_BYTES, |http| {
                http.request(Method::DELETE, &route)
            })
            .await?;
        match answer.status {
            StatusCode::OK | StatusCode::NO_CONTENT => Ok(()),
            StatusCode::NOT_FOUND => Err(Error::NotFound(format!("contract {id}"))),
            StatusCode::CONFLICT => Err(Error::Ended(answer.message())),
            _ => Err(answer.rejected("the network policy's removal")),
        }
    }

    /// `PUT /provider/contracts/{id}/network-policy/status` (its
    /// provider): what was applied and refused of a revision.
    pub async fn report_network_policy(
        &mut self,
        id: &str,
        report: &TenantPolicyReport,
    ) -> Result<(), Error> {
        let what = "PUT /provider/contracts/{id}/network-policy/status";
        let route = routes::contract_network_policy_status(id);
        let answer = self
            .call(what, MAX_ANSWER_BYTES, |http| {
                Ok(http.request(Method::PUT, &route)?.json(report))
            })
            .await?;
        match answer.status {
            StatusCode::OK | StatusCode::NO_CONTENT => Ok(()),
            StatusCode::NOT_FOUND => Err(Error::NotFound(format!("contract {id}"))),
            StatusCode::CONFLICT => Err(Error::Ended(answer.message())),
            _ => Err(answer.rejected("the network policy's report")),
        }
    }

    /// `DELETE /purchases/{id}` (its buyer): end the contract now. A
    /// contract already ended (409) or unknown to the catalog (404) bills
    /// nothing more, so both count as done: a caller that died between
    /// cancelling and recording it may cancel again.
    pub async fn cancel(&mut self, id: &str) -> Result<(), Error> {
        let route = routes::purchase_record(id);
        let answer = self
            .call("DELETE /purchases/{id}", MAX_ANSWER_BYTES, |http| {
                http.request(Method::DELETE, &route)
            })
            .await?;
        match answer.status {
            StatusCode::OK | StatusCode::NO_CONTENT => Ok(()),
            StatusCode::CONFLICT | StatusCode::NOT_FOUND => {
                tracing::info!(contract = %id, status = %answer.status, reason = %answer.message(), "nothing to cancel");
                Ok(())
            }
            _ => Err(answer.rejected("the cancellation")),
        }
    }

    /// `POST /reservations`: hold one unit of a plan, saying who buys
    /// (`boughtBy`, kept with the contract) if `bought_by` is given.
    pub async fn reserve(
        &mut self,
        offer: &str,
        plan: &str,
        bought_by: Option<&str>,
    ) -> Result<Reservation, Error> {
        self.reserve_with(ReserveRequest {
            offer_id: offer.to_string(),
            plan_id: plan.to_string(),
            ttl_seconds: None,
            bought_by: bought_by.map(str::to_string),
        })
        .await
    }

    /// `POST /reservations/{id}/purchase` with the consumer's cluster ID
    /// (required when the provider peers with Liqo v1: its peering user
    /// is made for that one cluster) and, if given, who buys and for how
    /// many seconds (unset: the catalog's contract duration).
    pub async fn purchase(
        &mut self,
        id: &str,
        consumer: &str,
        bought_by: Option<&str>,
        duration_seconds: Option<u64>,
    ) -> Result<(), Error> {
        let body = PurchaseRequest {
            consumer_cluster_id: Some(consumer.to_string()),
            duration_seconds,
            bought_by: bought_by.map(str::to_string),
        };
        let route = routes::purchase(id);
        let answer = self
            .call(
                "POST /reservations/{id}/purchase",
                MAX_ANSWER_BYTES,
                |http| Ok(http.request(Method::POST, &route)?.json(&body)),
            )
            .await?;
        match answer.status {
            StatusCode::CREATED | StatusCode::OK => Ok(()),
            StatusCode::NOT_FOUND => Err(Error::NotFound(format!("reservation {id}"))),
            _ => Err(answer.rejected("the purchase")),
        }
    }

    /// `PUT /contracts/{id}/state`.
    pub async fn report(
        &mut self,
        id: &str,
        state: ContractState,
        reason: Option<&str>,
        consumer: Option<&str>,
    ) -> Result<(), Error> {
        let body = StateReport {
            state,
            reason: reason.map(str::to_string),
            consumer_cluster_id: consumer.map(str::to_string),
        };
        let route = routes::contract_state(id);
        let answer = self
            .call("PUT /contracts/{id}/state", MAX_ANSWER_BYTES, |http| {
                Ok(http.request(Method::PUT, &route)?.json(&body))
            })
            .await?;
        match answer.status {
            StatusCode::OK => Ok(()),
            StatusCode::NOT_FOUND => Err(Error::NotFound(format!("contract {id}"))),
            StatusCode::CONFLICT => Err(Error::Ended(answer.message())),
            _ => Err(answer.rejected("the state report")),
        }
    }
}
