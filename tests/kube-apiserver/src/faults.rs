//! Injected faults: the next requests matching a verb and/or resource are
//! answered with an error status instead of being served, so a test can
//! see a controller retry on 409, back off on 429 (with `Retry-After`, as a
//! real server's max-in-flight filter answers), 500 or 503, or survive a
//! connection closed in the middle of a response ([`Fault::reset`]).
//! (Held, ended and reset watches and compaction live with the server
//! handle.)

use crate::audit::ResourceAttributes;
use crate::status::ApiError;

/// A fault: answer `code` to the next `times` requests that match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub code: u16,
    pub times: usize,
    /// RBAC verb (`update`, `patch`, `list`…); any if `None`.
    pub verb: Option<String>,
    /// Resource plural (`leases`); any if `None`.
    pub resource: Option<String>,
    /// Subresource (`status`); if `None`, main and subresource alike.
    pub subresource: Option<String>,
    /// `Retry-After` (header and `details.retryAfterSeconds`), in seconds.
    pub retry_after: Option<u64>,
    /// Instead of a status: the connection is closed after the first bytes
    /// of a 200 response, as when a load balancer or the server dies.
    pub reset: bool,
}

/// What a fired fault makes the server do.
#[derive(Debug, Clone, PartialEq)]
pub enum Injected {
    /// Answer this error (its `Retry-After`, if any, as a header too).
    Status(ApiError, Option<u64>),
    /// Begin a 200 answer, then close the connection.
    Reset,
}

impl Fault {
    /// Answer `code` once to any resource request.
    pub fn new(code: u16) -> Self {
        Self {
            code,
            times: 1,
            verb: None,
            resource: None,
            subresource: None,
            // What a real server's max-in-flight filter sends with a 429.
            retry_after: (code == 429).then_some(1),
            reset: false,
        }
    }

    /// Close the connection mid-response, once, for any resource request.
    pub fn reset() -> Self {
        Self {
            reset: true,
            ..Self::new(0)
        }
    }

    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    pub fn times(mut self, times: usize) -> Self {
        self.times = times;
        self
    }

    pub fn verb(mut self, verb: &str) -> Self {
        self.verb = Some(verb.to_string());
        self
    }

    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.to_string());
        self
    }

    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = Some(subresource.to_string());
        self
    }

    fn matches(&self, request: &ResourceAttributes) -> bool {
        self.verb.as_ref().is_none_or(|v| *v == request.verb)
            && self
                .resource
                .as_ref()
                .is_none_or(|r| *r == request.resource)
            && self
                .subresource
                .as_ref()
                .is_none_or(|s| Some(s) == request.subresource.as_ref())
    }
}

/// The error for `request` if a fault fires (using one of its times).
pub fn take(faults: &mut Vec<Fault>, request: &ResourceAttributes) -> Option<Injected> {
    let i = faults
        .iter()
        .position(|f| f.times > 0 && f.matches(request))?;
    faults[i].times -= 1;
    let fault = faults[i].clone();
    faults.retain(|f| f.times > 0);
    if fault.reset {
        return Some(Injected::Reset);
    }
    let mut error = ApiError::injected(fault.code);
    if let Some(seconds) = fault.retry_after {
        error = error.retry_after(seconds);
    }
    Some(Injected::Status(error, fault.retry_after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_fire_the_given_number_of_times() {
        let mut faults = vec![Fault::new(409).times(2).verb("update").resource("leases")];
        let request = |verb: &str, resource: &str| ResourceAttributes {
            verb: verb.into(),
            api_group: String::new(),
            resource: resource.into(),
            subresource: None,
            namespace: None,
            name: None,
        };
        assert!(take(&mut faults, &request("get", "leases")).is_none());
        assert!(take(&mut faults, &request("update", "pods")).is_none());
        assert!(matches!(
            take(&mut faults, &request("update", "leases")),
            Some(Injected::Status(ApiError { code: 409, .. }, None))
        ));
        assert!(take(&mut faults, &request("update", "leases")).is_some());
        assert!(take(&mut faults, &request("update", "leases")).is_none());
        assert!(faults.is_empty());
    }

    #[test]
    fn a_429_says_when_to_retry_and_a_reset_is_no_status() {
        let any = ResourceAttributes {
            verb: "list".into(),
            api_group: String::new(),
            resource: "nodes".into(),
            subresource: None,
            namespace: None,
            name: None,
        };
        let mut faults = vec![
            Fault::new(429),
            Fault::new(503).retry_after(5),
            Fault::reset(),
        ];
        let Some(Injected::Status(e, Some(1))) = take(&mut faults, &any) else {
            panic!("429 without Retry-After");
        };
        assert_eq!(e.to_status()["details"]["retryAfterSeconds"], 1);
        assert!(matches!(
            take(&mut faults, &any),
            Some(Injected::Status(ApiError { code: 503, .. }, Some(5)))
        ));
        assert_eq!(take(&mut faults, &any), Some(Injected::Reset));
        assert_eq!(take(&mut faults, &any), None);
    }
}
