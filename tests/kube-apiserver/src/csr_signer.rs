//! The `kubernetes.io/kube-apiserver-client` signer of kube-controller-manager
//! (its `csrsigning` controller, `pkg/controller/certificates/signer/signer.go`),
//! run beside an HTTPS server: an approved CSR of that signer, not failed
//! and not yet issued, gets `status.certificate` signed by the CA the server
//! takes client certificates from ([`crate::tls::Pki::sign_request`]), so
//! the certificate authenticates here as its CN in its O's. A CSR asking
//! for usages a client certificate may not have gets a `Failed` condition
//! instead. Like the real controller it works asynchronously, after the
//! approval is stored, writing through the `status` subresource. CSRs of
//! other signers stay pending, as on a cluster without their signer.
//!
//! The signer reads the time from its own [`Clock`]: kube-controller-manager
//! runs on its own host, whose clock may lag the clients' (the reason the
//! real signer backdates `notBefore`, `signer.go` `sign`). A test sets it
//! behind ([`crate::KubeApiServer::set_signer_clock_behind`]) to be issued
//! certificates most of whose life has already passed, as such a signer
//! issues them, instead of waiting out a lifetime of at least 10 minutes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;
use tracing::Instrument;

use crate::builtin::{CERTIFICATES, CSRS};
use crate::crd::GroupResource;
use crate::csr;
use crate::shared::Shared;
use crate::target::Target;
use crate::tls::Pki;

/// The one signer served (`capi.KubeAPIServerClientSignerName`).
pub const SIGNER_NAME: &str = csr::KUBE_APISERVER_CLIENT_SIGNER;

/// kube-controller-manager's `--cluster-signing-duration` default, 8760h
/// (`pkg/controller/certificates/signer/config/v1alpha1/defaults.go`): the
/// longest certificate it issues.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// The clock of the kube-controller-manager the signer runs in: this
/// process's, or behind it by a set amount (a host whose clock lags).
#[derive(Debug, Default)]
pub struct Clock {
    behind_ms: AtomicU64,
}

impl Clock {
    /// From now on, read `behind` earlier than this process's clock.
    pub fn set_behind(&self, behind: Duration) {
        let ms = u64::try_from(behind.as_millis()).unwrap_or(u64::MAX);
        self.behind_ms.store(ms, Ordering::Relaxed);
    }

    /// The signer's time: `signer.go` `handle` signs with `time.Now` of
    /// its host.
    pub fn now(&self) -> SystemTime {
        let behind = Duration::from_millis(self.behind_ms.load(Ordering::Relaxed));
        SystemTime::now()
            .checked_sub(behind)
            .unwrap_or(SystemTime::UNIX_EPOCH)
    }
}

/// `notBefore` and `notAfter` (seconds since the epoch) of the first
/// certificate of `pem`, as a test reads what the signer issued.
pub fn validity(pem: &[u8]) -> Result<(i64, i64), String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).map_err(|e| e.to_string())?;
    let certificate = pem.parse_x509().map_err(|e| e.to_string())?;
    let validity = certificate.validity();
    Ok((
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    ))
}

/// What the signer does with a CSR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not approved, denied, failed, issued already, or another signer's.
    Ignore,
    /// A `Failed` condition with this message (`SignerValidationFailure`).
    Fail(String),
    /// Sign the request (DER) for these usages and this long.
    Sign {
        request: Vec<u8>,
        usages: Vec<String>,
        ttl: Duration,
    },
}

fn has_condition(csr: &Value, kind: &str, status: Option<&str>) -> bool {
    csr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && status.is_none_or(|s| c["status"] == s))
}

/// `signer.handle` with the controller's skip of issued CSRs
/// (`pkg/controller/certificates/certificate_controller.go`, `syncFunc`):
/// approved and not denied (`IsCertificateRequestApproved`), no `Failed`
/// condition that is `True`, this signer; then `validAPIServerClientUsages`
/// (`client auth` required, `digital signature` and `key encipherment`
/// allowed, nothing else) and the duration.
pub fn decide(csr: &Value) -> Decision {
    let issued = csr["status"]["certificate"]
        .as_str()
        .is_some_and(|c| !c.is_empty());
    let approved = has_condition(csr, "Approved", None) && !has_condition(csr, "Denied", None);
    if issued
        || !approved
        || has_condition(csr, "Failed", Some("True"))
        || csr["spec"]["signerName"] != SIGNER_NAME
    {
        return Decision::Ignore;
    }
    let request = csr["spec"]["request"]
        .as_str()
        .and_then(|r| base64::Engine::decode(&base64::engine::general_purpose::STANDARD, r).ok())
        .and_then(|pem| crate::x509::request_der(&pem).ok());
    let Some(request) = request else {
        // Stored CSRs passed validation; the real controller would retry
        // an unparsable one for ever, never failing it.
        return Decision::Ignore;
    };
    let usages: Vec<String> = csr["spec"]["usages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| u.as_str().map(str::to_string))
        .collect();
    if let Some(bad) = usages.iter().find(|u| {
        !matches!(
            u.as_str(),
            "digital signature" | "key encipherment" | "client auth"
        )
    }) {
        return Decision::Fail(format!("invalid usage for client certificate: {bad}"));
    }
    if !usages.iter().any(|u| u == "client auth") {
        return Decision::Fail(
            "missing required usage for client certificate: client auth".to_string(),
        );
    }
    Decision::Sign {
        request,
        usages,
        ttl: duration(csr["spec"]["expirationSeconds"].as_u64()),
    }
}

/// `signer.duration`: the requested `expirationSeconds` within [10 min,
/// [`DEFAULT_DURATION`]], the default when none is asked.
pub fn duration(expiration_seconds: Option<u64>) -> Duration {
    let Some(seconds) = expiration_seconds else {
        return DEFAULT_DURATION;
    };
    Duration::from_secs(seconds).clamp(Duration::from_secs(600), DEFAULT_DURATION)
}

/// The status write that carries out `decision` on `csr`, if any: the
/// stored object with a `Failed` condition or the certificate, as the
/// controller's `UpdateStatus` sends it (with the resourceVersion it read,
/// so a CSR changed since is not overwritten).
fn status_write(pki: &Pki, csr: &Value, decision: Decision, now: SystemTime) -> Option<Value> {
    let mut sent = csr.clone();
    match decision {
        Decision::Ignore => return None,
        Decision::Fail(message) => {
            let mut conditions = csr["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            conditions.push(json!({
                "type": "Failed",
                "status": "True",
                "reason": "SignerValidationFailure",
                "message": message,
                "lastUpdateTime": csr::timestamp(),
            }));
            sent["status"]["conditions"] = Value::Array(conditions);
        }
        Decision::Sign {
            request,
            usages,
            ttl,
        } => match pki.sign_request(&request, &usages, ttl, now) {
            Ok(pem) => {
                sent["status"]["certificate"] = json!(base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    pem
                ));
            }
            Err(e) => {
                // The real controller returns the error and retries;
                // nothing here would change on a retry.
                tracing::warn!(csr = %csr["metadata"]["name"], error = %e, "not signed");
                return None;
            }
        },
    }
    Some(sent)
}

/// One pass over every CSR: sign or fail what is due. The decisions and
/// signatures are made outside the store's lock.
fn sync(shared: &Shared, pki: &Pki, clock: &Clock) {
    let gr = GroupResource::new(CERTIFICATES, CSRS);
    let csrs = shared.world().list_objects(&gr);
    for csr in csrs {
        let Some(sent) = status_write(pki, &csr, decide(&csr), clock.now()) else {
            continue;
        };
        let name = csr["metadata"]["name"].as_str().unwrap_or_default();
        let mut world = shared.world();
        let Some(def) = world.registry.get(&gr) else {
            return;
        };
        if let Err(e) = world.update(&def, None, name, sent, Target::Status) {
            // A conflict: the next change brings the CSR as it is now.
            tracing::debug!(csr = name, error = %e, "status not written");
        }
    }
}

/// Run the signer until the server's task is aborted: a pass at start and
/// after every change to a CSR (or when changes were missed).
pub async fn run(shared: Shared, pki: Arc<Pki>, clock: Arc<Clock>) {
    let gr = GroupResource::new(CERTIFICATES, CSRS);
    let mut changes = shared.world().changes.subscribe();
    async move {
        sync(&shared, &pki, &clock);
        loop {
            match changes.recv().await {
                Ok(change) if change.gr != gr => continue,
                Ok(_) | Err(RecvError::Lagged(_)) => sync(&shared, &pki, &clock),
                Err(RecvError::Closed) => return,
            }
        }
    }
    .instrument(tracing::info_span!("csrsigning", signer = SIGNER_NAME))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csr(usages: &[&str], conditions: Value) -> Value {
        let pem = crate::x509::test_request("someone");
        json!({"spec": {"signerName": SIGNER_NAME, "usages": usages, "expirationSeconds": 700,
            "request": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pem)},
            "status": {"conditions": conditions}})
    }

    fn yes(kind: &str) -> Value {
        json!({"type": kind, "status": "True"})
    }

    #[test]
    fn only_approved_pending_requests_of_this_signer_are_signed() {
        let approved = json!([yes("Approved")]);
        assert!(matches!(
            decide(&csr(&["client auth", "digital signature"], approved.clone())),
            Decision::Sign { ttl, .. } if ttl == Duration::from_secs(700)
        ));
        assert_eq!(decide(&csr(&["client auth"], json!([]))), Decision::Ignore);
        assert_eq!(
            decide(&csr(&["client auth"], json!([yes("Denied")]))),
            Decision::Ignore
        );
        assert_eq!(
            decide(&csr(
                &["client auth"],
                json!([yes("Approved"), yes("Failed")])
            )),
            Decision::Ignore
        );
        let mut other = csr(&["client auth"], approved.clone());
        other["spec"]["signerName"] = json!("example.com/other");
        assert_eq!(decide(&other), Decision::Ignore);
        let mut issued = csr(&["client auth"], approved.clone());
        issued["status"]["certificate"] = json!("Y2VydA==");
        assert_eq!(decide(&issued), Decision::Ignore);
    }

    #[test]
    fn a_client_certificate_needs_client_auth_and_nothing_of_a_server() {
        let approved = json!([yes("Approved")]);
        assert_eq!(
            decide(&csr(&["client auth", "server auth"], approved.clone())),
            Decision::Fail("invalid usage for client certificate: server auth".to_string())
        );
        assert_eq!(
            decide(&csr(&["digital signature"], approved)),
            Decision::Fail(
                "missing required usage for client certificate: client auth".to_string()
            )
        );
    }

    #[test]
    fn a_clock_behind_dates_the_certificate_back_by_as_much() {
        let pki = Pki::new().unwrap();
        let csr = csr(&["client auth"], json!([yes("Approved")]));
        let dated = |behind: Duration| {
            let clock = Clock::default();
            clock.set_behind(behind);
            let sent = status_write(&pki, &csr, decide(&csr), clock.now()).unwrap();
            let pem = base64::Engine::decode(
                &base64::engine::general_purpose::STANDARD,
                sent["status"]["certificate"].as_str().unwrap(),
            )
            .unwrap();
            validity(&pem).unwrap()
        };
        let (now_from, now_to) = dated(Duration::ZERO);
        let (then_from, then_to) = dated(Duration::from_secs(400));
        // Within the second the two signings took.
        assert!(
            (now_from - then_from - 400).abs() <= 1,
            "{now_from} {then_from}"
        );
        assert!((now_to - then_to - 400).abs() <= 1, "{now_to} {then_to}");
        // `policies.go`: 5 minutes back, the TTL (short) from the signer's now.
        assert_eq!(then_to - then_from, 300 + 700);
    }

    #[test]
    fn the_duration_is_the_one_asked_within_bounds() {
        assert_eq!(duration(None), DEFAULT_DURATION);
        assert_eq!(duration(Some(3600)), Duration::from_secs(3600));
        assert_eq!(duration(Some(100)), Duration::from_secs(600));
        assert_eq!(duration(Some(u64::MAX / 2)), DEFAULT_DURATION);
    }
}
