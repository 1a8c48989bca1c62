//! The catalog, as one Purchase uses it: a consumer session opened from the
//! credentials Secret (read and checked once per round), and the catalog's
//! answers sorted into what the controller does about them — a contract
//! that cannot be used ([`Unusable`]) or an unreachable catalog (kept
//! working from the contract as last read, retried with backoff).
//!
//! The wire, the routes and the transport are `catalog-client`'s.

use std::time::Duration;

use catalog_client::http::Http;
use catalog_client::{Error, Login, Session};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use quantity::ResourceList;

pub use catalog_client::wire::{Contract, ContractState};

use crate::caches::Caches;
use crate::contract_stream::Credentials;
use crate::decision::{Ending, Unusable};
use crate::model::{Purchase, PurchaseStatus};
use crate::secret_ref;

/// Sent as `User-Agent` with every catalog request.
const USER_AGENT: &str = "liqo-broker-purchase-controller";

/// The HTTP client every session shares; `timeout` bounds each request.
pub fn http_client(timeout: Duration) -> Result<reqwest::Client, Error> {
    Http::client(timeout, USER_AGENT)
}

/// A session with the Purchase's catalog, and what its contract follower
/// is started from ([`crate::contract_stream`]).
pub struct Opened {
    pub session: Session,
    pub credentials: Credentials,
    pub token: String,
}

/// Where the credentials Secret `namespace/name` is remembered.
fn credentials_key(where_: &str) -> String {
    format!("credentials/{where_}")
}

/// The credentials Secret of `purchase` is read again next round: the
/// catalog refused its token (it may have been replaced).
pub fn forget_credentials(caches: &Caches, purchase: &Purchase) {
    if let Some(reference) = &purchase.spec.credentials_secret_ref {
        let namespace = purchase.metadata.namespace.clone().unwrap_or_default();
        caches.forget(&credentials_key(&format!("{namespace}/{}", reference.name)));
    }
}

/// A session with the Purchase's catalog, as the consumer whose bearer
/// token is in the Purchase's credentials Secret — read once and
/// remembered for `--liqo-resync` ([`Caches`]) while its token is one and
/// the catalog takes it ([`forget_credentials`]); a missing or unusable
/// Secret is read again each round.
pub async fn open(
    client: &Client,
    http: &reqwest::Client,
    purchase: &Purchase,
    caches: &Caches,
) -> Result<Opened, Unusable> {
    let (Some(reference), Some(url)) = (
        &purchase.spec.credentials_secret_ref,
        &purchase.spec.catalog_url,
    ) else {
        return Err(Unusable::Spec(
            "spec.catalogURL and spec.credentialsSecretRef are required with spec.contractID or spec.offerID and spec.planID".to_string(),
        ));
    };
    let namespace = purchase.metadata.namespace.clone().unwrap_or_default();
    let remembered = credentials_key(&format!("{namespace}/{}", reference.name));
    let recalled = caches.recall::<(Secret, String)>(&remembered);
    let fresh = recalled.is_none();
    let (secret, where_) = match recalled {
        Some(read) => read,
        None => {
            secret_ref::read(
                client,
                purchase,
                reference,
                "credentials",
                Unusable::Credentials,
            )
            .await?
        }
    };
    let token = bearer_token(&secret, &reference.key).map_err(|problem| {
        caches.forget(&remembered);
        Unusable::Credentials(format!("credentials Secret {where_} {problem}"))
    })?;
    if fresh {
        caches.remember(remembered, (secret, where_.clone()));
    }
    let base = reqwest::Url::parse(url)
        .map_err(|e| Unusable::Spec(format!("spec.catalogURL is not a URL: {e}")))?;
    let credentials = Credentials {
        catalog: base.clone(),
        secret: where_.clone(),
        key: reference.key.clone(),
    };
    let session = Session::new(
        Http::new(http.clone(), base),
        Login::Bearer {
            token: token.clone(),
        },
    );
    Ok(Opened {
        session,
        credentials,
        token,
    })
}

/// The token under `key`, or what is wrong with it (the end of a sentence
/// about the Secret; the token itself is never in it).
pub fn bearer_token(secret: &Secret, key: &str) -> Result<String, String> {
    let token =
        secret_ref::text(secret, key).ok_or_else(|| format!("has no non-empty key {key:?}"))?;
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("key {key:?} is not a bearer token"));
    }
    Ok(token)
}

/// A failed call, sorted: a contract (or offer) `id` that cannot be used,
/// or `Err` with why the catalog is unavailable (retried with backoff).
pub fn unusable(error: Error, id: &str) -> Result<Unusable, String> {
    match error {
        Error::NotFound(_) => Ok(Unusable::NotFound(id.to_string())),
        Error::Unauthorized { status, message } => Ok(Unusable::Credentials(format!(
            "the catalog refused the consumer's token (HTTP {status}): {message}"
        ))),
        Error::Rejected { .. } | Error::Ended(_) => Ok(Unusable::Refused(error.to_string())),
        other => Err(other.to_string()),
    }
}

/// `GET /contracts/{id}`; a contract bought `from_offer` that the catalog
/// does not show yet is a reservation (recorded in an earlier round, or
/// just now) not bought yet: buy it for `consumer` (saying `bought_by`,
/// for `duration_seconds` when given), then read it.
pub async fn read_or_buy(
    session: &mut Session,
    id: &str,
    from_offer: bool,
    consumer: &str,
    bought_by: Option<&str>,
    duration_seconds: Option<u64>,
) -> Result<Contract, Error> {
    match session.contract(id).await {
        Err(Error::NotFound(_)) if from_offer => {
            session
                .purchase(id, consumer, bought_by, duration_seconds)
                .await?;
            tracing::info!(contract = %id, "reservation purchased");
            session.contract(id).await
        }
        other => other,
    }
}

/// The contract as last read, from the status (no credentials).
pub fn cached_contract(status: &PurchaseStatus, id: &str) -> Option<Contract> {
    let resources = ResourceList::from_strings(
        status
            .resources
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    )
    .ok()?;
    Some(Contract {
        id: id.to_string(),
        cluster_id: status.provider_cluster_id.clone()?,
        resources,
        resource_slice_class: status.resource_slice_class.clone().unwrap_or_default(),
        active: true,
        ..Contract::default()
    })
}

/// `expiresAt` as the catalog spells it (RFC 3339, UTC).
pub fn expires_at(contract: &Contract) -> Option<String> {
    serde_json::to_value(contract.expires_at)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .filter(|e| !e.is_empty())
}

/// When the contract ends: `expiresAt` as the status keeps it (so it is
/// known while the catalog is down), and what the catalog said of it this
/// round (`endingSoon`, `extendedAt`) — or, when it did not answer, what
/// the `EndingSoon` condition says it said, so an outage neither takes a
/// warning back (to give it again later) nor forgets an extension.
pub fn ending(status: &PurchaseStatus, fresh: Option<&Contract>) -> Option<Ending> {
    let at = status.expires_at.as_deref()?.parse().ok()?;
    let (catalog_says_soon, extended) = match fresh {
        Some(c) => (c.ending_soon, c.extended_at.is_some()),
        None => status
            .conditions
            .iter()
            .find(|c| c.type_ == crate::decision::ENDING_SOON)
            .map_or((false, false), |c| {
                (c.status == "True", c.reason == "ContractExtended")
            }),
    };
    Some(Ending {
        at,
        catalog_says_soon,
        extended,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn cached_contracts_need_a_known_provider() {
        let mut status = PurchaseStatus::default();
        assert!(cached_contract(&status, "c").is_none());
        status.provider_cluster_id = Some("p".into());
        status.resources.insert("memory".into(), "4Gi".into());
        let cached = cached_contract(&status, "c").unwrap();
        assert_eq!(cached.cluster_id, "p");
        assert_eq!(cached.resources.to_strings()["memory"], "4Gi");
    }

    #[test]
    fn an_outage_keeps_what_the_catalog_said_of_the_end() {
        let mut status = PurchaseStatus {
            expires_at: Some("2026-01-01T12:00:00.5Z".into()),
            ..PurchaseStatus::default()
        };
        let fresh = Contract {
            ending_soon: true,
            ..Contract::default()
        };
        let told = ending(&status, Some(&fresh)).unwrap();
        assert!(told.catalog_says_soon && !told.extended);
        assert_eq!(told.at, "2026-01-01T12:00:00.5Z".parse().unwrap());
        assert!(!ending(&status, None).unwrap().catalog_says_soon);
        status.conditions.push(crate::model::Condition {
            type_: crate::decision::ENDING_SOON.into(),
            status: "True".into(),
            reason: "ContractEndingSoon".into(),
            ..Default::default()
        });
        assert!(ending(&status, None).unwrap().catalog_says_soon);
        status.conditions[0].status = "False".into();
        status.conditions[0].reason = "ContractExtended".into();
        let kept = ending(&status, None).unwrap();
        assert!(kept.extended && !kept.catalog_says_soon);
        status.expires_at = None;
        assert!(ending(&status, Some(&fresh)).is_none());
    }

    #[test]
    fn tokens_are_one_word_and_never_echoed() {
        let secret = |v: &str| Secret {
            data: Some([("token".to_string(), ByteString(v.as_bytes().to_vec()))].into()),
            ..Secret::default()
        };
        assert_eq!(bearer_token(&secret(" t0k \n"), "token"), Ok("t0k".into()));
        let spaced = bearer_token(&secret("se cret"), "token").unwrap_err();
        assert!(!spaced.contains("se cret"), "{spaced}");
        assert!(bearer_token(&secret(""), "token").is_err());
        assert!(bearer_token(&secret("x"), "other").is_err());
    }

    #[test]
    fn refusals_are_unusable_and_outages_are_retried() {
        assert_eq!(
            unusable(Error::NotFound("contract c".into()), "c"),
            Ok(Unusable::NotFound("c".into()))
        );
        assert!(matches!(
            unusable(
                Error::Unauthorized {
                    status: 401,
                    message: "m".into()
                },
                "c"
            ),
            Ok(Unusable::Credentials(_))
        ));
        assert!(unusable(Error::Unavailable("down".into()), "c").is_err());
    }
}
