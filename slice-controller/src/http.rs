//! The controller's HTTP port (`--controller-http-listen`), served by
//! [`edge::probe`] (guarded with the HTTP/1 limits, announced with the role
//! `controller`):
//!
//! - `/healthz`: 200 while the process runs;
//! - `/readyz`: 200 once the Kubernetes API has answered (as leader, once
//!   the slice cache is filled; as standby, once the Lease could be read)
//!   and, under the `contracts` policy, the catalog first listed the
//!   contracts; else 503. The body says `leader` or `standby`, and notes
//!   when the catalog cannot be reached (decisions then use the last known
//!   contracts) and when Liqo's enforcement settings hold new grants back
//!   (`crate::enforcement`: still 200, the body says why);
//! - `/metrics`: Prometheus text (see [`crate::metrics`]).

use axum::http::StatusCode;
pub use edge::probe::HttpError;

use crate::metrics::Metrics;

impl edge::probe::Probes for Metrics {
    fn readiness(&self) -> (StatusCode, String) {
        let role = if self.reconcile().is_leading() {
            "leader"
        } else {
            "standby"
        };
        let contracts = self.contracts_state();
        let held = self
            .enforcement_note()
            .map(|note| format!("; no new grants: {note}"))
            .unwrap_or_default();
        if self.reconcile().reached_api() && contracts == crate::metrics::CONTRACTS_WAITING {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: no contracts read from the catalog yet\n".to_string(),
            )
        } else if self.reconcile().reached_api() && contracts == crate::metrics::CONTRACTS_STALE {
            (
                StatusCode::OK,
                format!("ok: {role}; the catalog cannot be reached: deciding from the last known contracts{held}\n"),
            )
        } else if self.reconcile().reached_api() {
            (StatusCode::OK, format!("ok: {role}{held}\n"))
        } else {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: the Kubernetes API has not answered yet\n".to_string(),
            )
        }
    }

    fn render(&self) -> String {
        Metrics::render(self)
    }
}
