//! The controller's HTTP port (`--http-listen`), served by [`edge::probe`]:
//! `/healthz` (200 while the process runs), `/readyz` (200 once the
//! Kubernetes API has answered — as leader, a list of Purchases; as
//! standby, a read of the Lease — else 503; the body says `leader` or
//! `standby`) and `/metrics` (see
//! [`crate::metrics`]). Connections are guarded ([`edge::conn`], HTTP/1
//! limits): capped in number, overall and per peer, a request line within
//! 5 s, closed after 30 s without a byte.

use axum::http::StatusCode;
pub use edge::probe::HttpError;

use crate::metrics::Metrics;

impl edge::probe::Probes for Metrics {
    fn readiness(&self) -> (StatusCode, String) {
        self.reconcile().readiness()
    }

    fn render(&self) -> String {
        Metrics::render(self)
    }
}
