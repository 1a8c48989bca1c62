//! The providers' side of a pass, through the catalog: the buyer's
//! active contracts, as its [`ContractFollower`] keeps them from the
//! catalog's contract stream (conditional on the last `ETag`, from
//! memory), and each provider's [`TenantPolicy`] put on every active
//! contract with it when it differs from the one stored there, deleted
//! when the provider has no policy left. The session is the buyer's, its
//! bearer token read from `--network-policy-credentials` (a Secret as a
//! Purchase's `credentialsSecretRef` names one) at each pass; the follower
//! starts again when the token read is another one (the Secret changed).

use std::collections::{BTreeMap, BTreeSet};

use catalog_client::contract_follower::{ContractFollower, FollowerOptions};
use catalog_client::contracts::Listing;
use catalog_client::http::Http;
use catalog_client::wire::{Contract, TenantPolicy};
use catalog_client::{Error, Login, Session};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::Client;
use tokio_util::sync::CancellationToken;

use super::status::Delivery;

/// Where the buyer's session comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogSettings {
    pub url: reqwest::Url,
    pub secret_namespace: String,
    pub secret_name: String,
    pub secret_key: String,
}

/// The catalog as the passes see it: the last listing, kept across passes.
pub struct Catalog {
    settings: CatalogSettings,
    http: reqwest::Client,
    etag: Option<String>,
    contracts: Option<Vec<Contract>>,
    /// The follower's fallback poll.
    options: FollowerOptions,
    /// The follower of the buyer's contracts, with the token it was
    /// started with; it stops with `stop`.
    follower: Option<(String, ContractFollower, CancellationToken)>,
    stop: CancellationToken,
}

impl Catalog {
    pub fn new(
        settings: CatalogSettings,
        http: reqwest::Client,
        options: FollowerOptions,
        stop: CancellationToken,
    ) -> Self {
        Catalog {
            settings,
            http,
            etag: None,
            contracts: None,
            options,
            follower: None,
            stop,
        }
    }

    /// Resolves when the buyer's contracts changed on the catalog (a
    /// provider's report on a network policy, a contract come or gone);
    /// never before a follower runs.
    pub async fn changed(&mut self) {
        match &mut self.follower {
            Some((_, follower, _)) => follower.changed().await,
            None => std::future::pending().await,
        }
    }

    /// A session as the buyer, the follower started (again) for its
    /// token; `Err`: why the credentials cannot be used.
    pub async fn session(&mut self, client: &Client) -> Result<Session, String> {
        let s = &self.settings;
        let where_ = format!("{}/{}", s.secret_namespace, s.secret_name);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &s.secret_namespace);
        let secret = match secrets.get_opt(&s.secret_name).await {
            Ok(Some(secret)) => secret,
            Ok(None) => return Err(format!("credentials Secret {where_} does not exist")),
            Err(e) => return Err(format!("cannot read credentials Secret {where_}: {e}")),
        };
        let token = crate::catalog::bearer_token(&secret, &s.secret_key)
            .map_err(|problem| format!("credentials Secret {where_} {problem}"))?;
        let session = |token: &str| {
            Session::new(
                Http::new(self.http.clone(), s.url.clone()),
                Login::Bearer {
                    token: token.to_string(),
                },
            )
        };
        if self.follower.as_ref().map(|(t, _, _)| t) != Some(&token) {
            if let Some((_, _, old)) = self.follower.take() {
                tracing::info!(secret = %where_, "the credentials Secret changed: the contract follower starts again");
                old.cancel();
                self.etag = None;
            }
            let stop = self.stop.child_token();
            let follower =
                ContractFollower::start(session(&token), self.options.clone(), stop.clone());
            self.follower = Some((token.clone(), follower, stop));
        }
        Ok(session(&token))
    }

    /// Read the active contracts again from the follower (unchanged since
    /// the last `ETag`: kept as they are); `Err` until the catalog has
    /// answered it once.
    pub fn refresh(&mut self) -> Result<(), Error> {
        let etag = self.contracts.as_ref().and(self.etag.as_deref());
        let Some((_, follower, _)) = &self.follower else {
            return Err(Error::Unavailable(
                "no contract follower: the credentials were not read".to_string(),
            ));
        };
        match follower.active_contracts(etag)? {
            Listing::NotModified => {}
            Listing::Contracts { etag, contracts } => {
                self.etag = etag;
                self.contracts = Some(contracts);
            }
        }
        Ok(())
    }

    /// The active contracts of `consumer` (this cluster), as last read.
    fn mine<'a>(&'a self, consumer: &'a str) -> impl Iterator<Item = &'a Contract> + 'a {
        self.contracts
            .iter()
            .flatten()
            .filter(move |c| c.active && c.consumer_cluster_id.as_deref() == Some(consumer))
    }

    /// The providers `consumer` holds an active contract with, once a
    /// listing has been read.
    pub fn providers(&self, consumer: &str) -> Option<BTreeSet<String>> {
        self.contracts.as_ref()?;
        Some(self.mine(consumer).map(|c| c.cluster_id.clone()).collect())
    }

    /// Put each provider's document on its contracts (delete it where the
    /// document is empty); what became of each. A failure the catalog may
    /// get over is `Err`, and the listing is read again in full next time.
    pub async fn deliver(
        &mut self,
        session: &mut Session,
        consumer: &str,
        documents: &BTreeMap<String, TenantPolicy>,
    ) -> Result<BTreeMap<String, Delivery>, Error> {
        let mut deliveries = BTreeMap::new();
        let result = self
            .deliver_each(session, consumer, documents, &mut deliveries)
            .await;
        if result.is_err() {
            self.etag = None;
        }
        result.map(|()| deliveries)
    }

    async fn deliver_each(
        &mut self,
        session: &mut Session,
        consumer: &str,
        documents: &BTreeMap<String, TenantPolicy>,
        deliveries: &mut BTreeMap<String, Delivery>,
    ) -> Result<(), Error> {
        let Some(contracts) = self.contracts.as_mut() else {
            return Ok(());
        };
        for (provider, document) in documents {
            let checked = if document.policies.is_empty() {
                None
            } else {
                Some(document.check().map_err(|e| {
                    format!("the document for {provider} is not sent: {e} (what it held before is removed)")
                }))
            };
            let mut stored = Vec::new();
            let mut refused = None;
            let mine = contracts.iter_mut().filter(|c| {
                c.active
                    && c.consumer_cluster_id.as_deref() == Some(consumer)
                    && c.cluster_id == *provider
            });
            for contract in mine {
                match &checked {
                    // Nothing (or nothing sendable) for this provider: what
                    // the contract holds goes.
                    None | Some(Err(_)) => {
                        if contract.network_policy.is_some() {
                            match session.delete_network_policy(&contract.id).await {
                                Ok(()) | Err(Error::NotFound(_) | Error::Ended(_)) => {
                                    tracing::info!(contract = %contract.id, %provider, "network policy removed from the contract");
                                    contract.network_policy = None;
                                }
                                Err(e) => return Err(e),
                            }
                        }
                    }
                    Some(Ok(())) => {
                        let held = contract.network_policy.as_ref().map(|n| &n.policy);
                        if held != Some(document) {
                            match session.put_network_policy(&contract.id, document).await {
                                Ok(now) => {
                                    tracing::info!(contract = %contract.id, %provider, revision = now.revision, "network policy sent");
                                    contract.network_policy = Some(now);
                                }
                                Err(Error::NotFound(_) | Error::Ended(_)) => {
                                    // Ended meanwhile: the next listing leaves it out.
                                    self.etag = None;
                                    continue;
                                }
                                Err(e @ (Error::Rejected { .. } | Error::Forbidden(_))) => {
                                    refused = Some(format!(
                                        "the catalog refused the document for {provider}: {e}"
                                    ));
                                    continue;
                                }
                                Err(e) => return Err(e),
                            }
                        }
                        stored.push(contract.network_policy.clone());
                    }
                }
            }
            let delivery = match (checked, refused) {
                (Some(Err(why)), _) | (_, Some(why)) => Delivery::Refused(why),
                _ => Delivery::Stored(stored),
            };
            deliveries.insert(provider.clone(), delivery);
        }
        Ok(())
    }
}
