//! `maintenance_info` in provision and update requests (OSB v2.17).
//!
//! A `maintenance_info` is an object whose `version` is a required
//! semantic-version string; anything else is a malformed request (400).
//! This broker's plans declare no `maintenance_info`, so a well-formed one
//! never matches the plan: 422 `MaintenanceInfoConflict`, as the spec asks
//! for a version that differs from the plan's or names one on a plan that
//! declares none.

use actix_web::http::StatusCode;
use serde_json::Value;

use super::error::OsbError;

/// 400 unless `v` is absent or a well-formed `maintenance_info`; 422
/// `MaintenanceInfoConflict` for a well-formed one (the plans declare none).
pub fn check(v: &Option<Value>) -> Result<(), OsbError> {
    let Some(v) = v else {
        return Ok(());
    };
    let Value::Object(fields) = v else {
        return Err(OsbError::bad_request(
            "maintenance_info: must be an object such as {\"version\": \"1.0.0\"}",
        ));
    };
    let version = match fields.get("version") {
        None => {
            return Err(OsbError::bad_request(
                "maintenance_info.version: is required in a maintenance_info",
            ))
        }
        Some(Value::String(s)) if is_semver(s) => s,
        Some(_) => {
            return Err(OsbError::bad_request(
                "maintenance_info.version: must be a semantic version string such as \"1.0.0\"",
            ))
        }
    };
    if let Some(d) = fields.get("description") {
        if !d.is_string() {
            return Err(OsbError::bad_request(
                "maintenance_info.description: must be a string",
            ));
        }
    }
    Err(OsbError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        Some("MaintenanceInfoConflict"),
        format!(
            "maintenance_info.version {version} does not match the plan: this broker's plans declare no maintenance_info; send none"
        ),
    ))
}

/// `MAJOR.MINOR.PATCH` with optional `-pre` and `+build` (semver 2.0.0).
fn is_semver(s: &str) -> bool {
    let (rest, build) = match s.split_once('+') {
        Some((r, b)) => (r, Some(b)),
        None => (s, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (rest, None),
    };
    let ident =
        |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let number = |x: &str| {
        !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()) && (x == "0" || !x.starts_with('0'))
    };
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| number(p))
        && pre.is_none_or(|p| p.split('.').all(ident))
        && build.is_none_or(|b| b.split('.').all(ident))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(v: Value) -> u16 {
        check(&Some(v)).unwrap_err().status.as_u16()
    }

    #[test]
    fn malformed_is_400_and_well_formed_conflicts() {
        assert!(check(&None).is_ok());
        assert_eq!(status(json!({})), 400);
        assert_eq!(status(json!("1.0.0")), 400);
        assert_eq!(status(json!({"version": 1})), 400);
        assert_eq!(status(json!({"version": "1.0"})), 400);
        assert_eq!(status(json!({"version": "1.0.0", "description": 5})), 400);
        let e = check(&Some(json!({"version": "1.0.0"}))).unwrap_err();
        assert_eq!(e.status.as_u16(), 422);
        assert_eq!(e.code, Some("MaintenanceInfoConflict"));
    }

    #[test]
    fn semantic_versions() {
        for ok in [
            "1.0.0",
            "0.1.2",
            "1.2.3-rc.1",
            "1.2.3+build.5",
            "1.2.3-a-b+c",
            "1.2.3+b-x",
        ] {
            assert!(is_semver(ok), "{ok}");
        }
        for bad in ["1", "1.2", "01.2.3", "1.2.3-", "1.2.3+", "1.2.x", ""] {
            assert!(!is_semver(bad), "{bad}");
        }
    }
}
