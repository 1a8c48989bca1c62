//! The provider's self-check report: `PUT /provider/enforcement`, the Liqo
//! enforcement level its class controller read, which the catalog stamps
//! on the provider's offers for buyers to see.

use reqwest::{Method, StatusCode};
use tracing::Instrument;

use crate::error::Error;
use crate::http::MAX_ANSWER_BYTES;
use crate::routes;
use crate::session::Session;
use crate::wire::{EnforcementLevel, EnforcementReport};

const WHAT: &str = "PUT /provider/enforcement";

impl Session {
    /// `PUT /provider/enforcement`: tell the catalog how strictly Liqo on
    /// this provider enforces grants. Refusals (a disabled provider, a
    /// catalog that does not know the route) are [`Error::Forbidden`] or
    /// [`Error::Rejected`]; the rest is worth retrying.
    pub async fn report_enforcement(&mut self, level: EnforcementLevel) -> Result<(), Error> {
        let body = EnforcementReport { level };
        let span = tracing::info_span!("report_enforcement", level = level.as_str());
        let answer = self
            .call(WHAT, MAX_ANSWER_BYTES, |http| {
                Ok(http
                    .request(Method::PUT, routes::PROVIDER_ENFORCEMENT)?
                    .json(&body))
            })
            .instrument(span)
            .await?;
        match answer.status {
            StatusCode::OK => Ok(()),
            StatusCode::FORBIDDEN => Err(Error::Forbidden(format!("{WHAT}: {}", answer.message()))),
            _ => Err(answer.rejected("the enforcement report")),
        }
    }
}
