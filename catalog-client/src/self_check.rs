//! The provider's self-check reports, which the catalog stamps on the
//! provider's offers for buyers to see: `PUT /provider/enforcement` (the
//! Liqo enforcement level its class controller read) and `PUT
//! /provider/isolation` (the tenant-isolation level its isolation
//! controller checked). One request and one error mapping for both.

use reqwest::{Method, StatusCode};
use serde::Serialize;
use tracing::Instrument;

use crate::error::Error;
use crate::http::MAX_ANSWER_BYTES;
use crate::routes;
use crate::session::Session;
use crate::wire::{EnforcementLevel, EnforcementReport, IsolationLevel, IsolationReport};

impl Session {
    /// `PUT /provider/enforcement`: tell the catalog how strictly Liqo on
    /// this provider enforces grants. Refusals (a disabled provider, a
    /// catalog that does not know the route) are [`Error::Forbidden`] or
    /// [`Error::Rejected`]; the rest is worth retrying.
    pub async fn report_enforcement(&mut self, level: EnforcementLevel) -> Result<(), Error> {
        let span = tracing::info_span!("report_enforcement", level = level.as_str());
        self.report_level(
            "PUT /provider/enforcement",
            routes::PROVIDER_ENFORCEMENT,
            &EnforcementReport { level },
            "the enforcement report",
        )
        .instrument(span)
        .await
    }

    /// `PUT /provider/isolation`: tell the catalog how this provider keeps
    /// its buyers' pods apart (its tenant NetworkPolicies and what its
    /// probe found). Refusals (a disabled provider, a catalog that does
    /// not know the route) are [`Error::Forbidden`] or [`Error::Rejected`];
    /// the rest is worth retrying.
    pub async fn report_isolation(&mut self, level: IsolationLevel) -> Result<(), Error> {
        let span = tracing::info_span!("report_isolation", level = level.as_str());
        self.report_level(
            "PUT /provider/isolation",
            routes::PROVIDER_ISOLATION,
            &IsolationReport { level },
            "the isolation report",
        )
        .instrument(span)
        .await
    }

    /// `PUT` `body` to `route` (`what` names the request in errors,
    /// `report` the body in a rejection): 200 is done, 403 is
    /// [`Error::Forbidden`], any other answer [`Error::Rejected`].
    async fn report_level(
        &mut self,
        what: &str,
        route: &str,
        body: &impl Serialize,
        report: &str,
    ) -> Result<(), Error> {
        let answer = self
            .call(what, MAX_ANSWER_BYTES, |http| {
                Ok(http.request(Method::PUT, route)?.json(body))
            })
            .await?;
        match answer.status {
            StatusCode::OK => Ok(()),
            StatusCode::FORBIDDEN => Err(Error::Forbidden(format!("{what}: {}", answer.message()))),
            _ => Err(answer.rejected(report)),
        }
    }
}
