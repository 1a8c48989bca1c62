//! One store deadline per request: every store call a request makes shares
//! the deadline its first call set, so a request that checks the caller's
//! token and then writes is answered within one `--mongodb-timeout`, not
//! one per call (issue 29, finding 9).
//!
//! The deadline lives in a task-local value that [`per_request`] (an actix
//! middleware) scopes around each request's handling; a backend asks
//! [`deadline`] for the instant its call must end by. Outside a request
//! (the feed's publisher, sweepers, start-up) each call gets its own
//! timeout, as before.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use tokio::time::Instant;

tokio::task_local! {
    /// The current request's store deadline, set by its first store call.
    static REQUEST: OnceLock<Instant>;
}

/// Run `fut` as one request: the store calls it makes share one deadline.
pub async fn scope<F: Future>(fut: F) -> F::Output {
    REQUEST.scope(OnceLock::new(), fut).await
}

/// Scope every request ([`scope`]): wrap the app with
/// `middleware::from_fn(per_request)`.
pub async fn per_request(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    scope(next.call(req)).await
}

/// The instant a store call allowed `timeout` must end by: within a
/// request, the deadline its first store call set (`timeout` from then);
/// outside one, `timeout` from now.
pub fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    REQUEST
        .try_with(|d| *d.get_or_init(|| now + timeout))
        .unwrap_or(now + timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within a request the first call sets the deadline and later calls
    /// share it, whatever timeout they ask; outside one, each call starts
    /// its own; two requests do not share.
    #[tokio::test]
    async fn a_request_shares_the_deadline_its_first_call_set() {
        let t = Duration::from_secs(5);
        let (first, later) = scope(async {
            let first = deadline(t);
            tokio::time::sleep(Duration::from_millis(20)).await;
            (first, deadline(Duration::from_secs(60)))
        })
        .await;
        assert_eq!(first, later);
        let other = scope(async { deadline(t) }).await;
        assert!(other > first, "another request has its own deadline");
        let a = deadline(t);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            deadline(t) > a,
            "outside a request every call starts afresh"
        );
    }
}
