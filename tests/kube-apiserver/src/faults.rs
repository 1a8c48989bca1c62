//! Injected faults: the next requests matching a verb and/or resource are
//! answered with an error status instead of being served, so a test can
//! see a controller retry on 409, back off on 429/500, or survive a 503.
//! (Held and ended watches and compaction live with the server handle.)

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
        }
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
pub fn take(faults: &mut Vec<Fault>, request: &ResourceAttributes) -> Option<ApiError> {
    let i = faults
        .iter()
        .position(|f| f.times > 0 && f.matches(request))?;
    faults[i].times -= 1;
    let code = faults[i].code;
    faults.retain(|f| f.times > 0);
    Some(ApiError::injected(code))
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
        assert_eq!(
            take(&mut faults, &request("update", "leases"))
                .unwrap()
                .code,
            409
        );
        assert!(take(&mut faults, &request("update", "leases")).is_some());
        assert!(take(&mut faults, &request("update", "leases")).is_none());
        assert!(faults.is_empty());
    }
}
