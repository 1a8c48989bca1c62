//! The administrator's endpoint the workspace reads: which providers an
//! administrator disabled (`GET /admin/providers`). A disabled provider's
//! offers stay in the catalog, so the feed does not tell.

use std::collections::BTreeSet;

use reqwest::Method;

use crate::error::Error;
use crate::http::MAX_ANSWER_BYTES;
use crate::routes;
use crate::session::Session;
use crate::wire::AdminProvider;

impl Session {
    /// The cluster IDs of the disabled providers. A refused read drops the
    /// token, so the next one authenticates anew.
    pub async fn disabled_providers(&mut self) -> Result<BTreeSet<String>, Error> {
        let what = "GET /admin/providers";
        let answer = self
            .call(what, MAX_ANSWER_BYTES, |http| {
                http.request(Method::GET, routes::ADMIN_PROVIDERS)
            })
            .await?;
        if !answer.status.is_success() {
            self.forget_token();
            return Err(answer.unexpected(what));
        }
        let providers: Vec<AdminProvider> = answer.json(what)?;
        Ok(providers
            .into_iter()
            .filter(|p| p.disabled)
            .map(|p| p.info.cluster_id)
            .collect())
    }
}
