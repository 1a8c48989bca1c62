//! The orchestrator's HTTP port (`--http-listen`), served by
//! [`edge::probe`]: `/healthz` (200 while the process runs), `/readyz` (200
//! once the Kubernetes API has answered — as leader, once the caches are
//! filled; as standby, once the Lease could be read — else 503; the body
//! says `leader` or `standby`) and `/metrics` (see [`crate::metrics`]).
//!
//! Its connections are guarded ([`edge::conn`], the HTTP/1 limits): at most
//! 64 at once, 8 per IP address, a request line within 5 s, closed after
//! 30 s without a byte, so clients that connect and send nothing cannot
//! starve the probes.

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
