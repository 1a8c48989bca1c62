//! The service provider's endpoints (issue 32): for each contract that
//! bought one of its services, read the customer's peering kubeconfig,
//! report the service's state, read the bindings waiting for it and report
//! on each (with the credentials once made).

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
use crate::http::MAX_ANSWER_BYTES;
use crate::routes;
use crate::session::Session;
use crate::wire::{BindingReport, CustomerPeering, PendingBinding, ServiceReport};

impl Session {
    /// `PUT /provider/contracts/{id}/service`: where the provider is with
    /// the service contract `id` bought. A contract that is not one of
    /// this provider's service contracts is [`Error::NotFound`]; a report
    /// no operation waits for (already settled) is [`Error::Rejected`]
    /// with status 409.
    pub async fn report_service(&mut self, id: &str, report: &ServiceReport) -> Result<(), Error> {
        self.provider_put(
            "PUT /provider/contracts/{id}/service",
            &routes::contract_service(id),
            report,
            format!("service contract {id}"),
            "the service report",
        )
        .await
    }

    /// `GET /provider/contracts/{id}/customer-peering`: the kubeconfig of
    /// the peering user the customer minted for this provider. Once the
    /// instance is being deprovisioned or the contract ended:
    /// [`Error::Ended`] (410).
    pub async fn customer_peering(&mut self, id: &str) -> Result<CustomerPeering, Error> {
        self.provider_get(
            "GET /provider/contracts/{id}/customer-peering",
            &routes::contract_customer_peering(id),
            id,
        )
        .await
    }

    /// `GET /provider/contracts/{id}/bindings`: the contract's bindings
    /// waiting for the provider (`creating` or `deleting`).
    pub async fn pending_bindings(&mut self, id: &str) -> Result<Vec<PendingBinding>, Error> {
        self.provider_get(
            "GET /provider/contracts/{id}/bindings",
            &routes::contract_bindings(id),
            id,
        )
        .await
    }

    /// `PUT /provider/contracts/{id}/bindings/{binding}`: where the
    /// provider is with one pending binding. A binding that is not
    /// pending (already settled, or gone) is [`Error::NotFound`] (404) or
    /// [`Error::Rejected`] with status 409; a report the catalog refuses
    /// (credentials missing on success, a bad key) is [`Error::Rejected`]
    /// (400, naming the field).
    pub async fn report_binding(
        &mut self,
        id: &str,
        binding: &str,
        report: &BindingReport,
    ) -> Result<(), Error> {
        self.provider_put(
            "PUT /provider/contracts/{id}/bindings/{bindingID}",
            &routes::contract_binding(id, binding),
            report,
            format!("binding {binding} of service contract {id}"),
            "the binding report",
        )
        .await
    }

    /// GET a service contract's `route`: 404 is [`Error::NotFound`], 410
    /// [`Error::Ended`].
    async fn provider_get<T: DeserializeOwned>(
        &mut self,
        what: &str,
        route: &str,
        id: &str,
    ) -> Result<T, Error> {
        let answer = self
            .call(what, MAX_ANSWER_BYTES, |http| {
                http.request(Method::GET, route)
            })
            .await?;
        match answer.status {
            StatusCode::OK => answer.json(what),
            StatusCode::NOT_FOUND => Err(Error::NotFound(format!("service contract {id}"))),
            StatusCode::GONE => Err(Error::Ended(answer.message())),
            _ => Err(answer.unexpected(what)),
        }
    }

    /// PUT `body` on a service contract's `route`: 404 is
    /// [`Error::NotFound`] naming `object`, other refusals
    /// [`Error::Rejected`] naming `refused`.
    async fn provider_put(
        &mut self,
        what: &str,
        route: &str,
        body: &impl Serialize,
        object: String,
        refused: &str,
    ) -> Result<(), Error> {
        let answer = self
            .call(what, MAX_ANSWER_BYTES, |http| {
                Ok(http.request(Method::PUT, route)?.json(body))
            })
            .await?;
        match answer.status {
            StatusCode::OK => Ok(()),
            StatusCode::NOT_FOUND => Err(Error::NotFound(object)),
            _ => Err(answer.rejected(refused)),
        }
    }
}
