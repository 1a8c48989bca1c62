//! The autoscaler's HTTP port (`--http-listen`), served by
//! [`edge::probe`]: `/healthz` (200 while the process runs), `/readyz` and
//! `/metrics` (see [`crate::metrics`]).
//!
//! `/readyz` is 200 once the Kubernetes API has answered (as leader, once
//! the caches are filled; as standby, once the Lease could be read) — and,
//! as leader, while every autoscaler's catalog answers: when one cannot be
//! reached nothing is bought for it, and `/readyz` says 503 naming it, so
//! an operator's alert on readiness sees the outage.
//!
//! Its connections are guarded as every controller's ([`edge::conn`]).

use axum::http::StatusCode;
pub use edge::probe::HttpError;

use crate::metrics::Metrics;

impl edge::probe::Probes for Metrics {
    fn readiness(&self) -> (StatusCode, String) {
        let (code, body) = self.reconcile().readiness();
        if code != StatusCode::OK || !self.reconcile().is_leading() {
            return (code, body);
        }
        match self.catalog_unreachable() {
            Some((autoscaler, why)) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: CatalogUnreachable: the catalog of {autoscaler} cannot be reached: {why}\n"),
            ),
            None => (code, body),
        }
    }

    fn render(&self) -> String {
        Metrics::render(self)
    }
}

#[cfg(test)]
mod tests {
    use edge::probe::Probes;

    use super::*;

    #[test]
    fn readyz_is_503_naming_the_autoscaler_while_its_catalog_is_unreachable() {
        let metrics = Metrics::new();
        assert_eq!(metrics.readiness().0, StatusCode::SERVICE_UNAVAILABLE);
        metrics.reconcile().set_reached_api();
        metrics.reconcile().set_leading(true);
        assert_eq!(metrics.readiness().0, StatusCode::OK);
        metrics.set_catalog_unreachable("team/mas", Some("connection refused".into()));
        let (code, body) = metrics.readiness();
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            body.contains("CatalogUnreachable") && body.contains("team/mas"),
            "{body}"
        );
        metrics.set_catalog_unreachable("team/mas", None);
        assert_eq!(metrics.readiness().0, StatusCode::OK);
    }
}
