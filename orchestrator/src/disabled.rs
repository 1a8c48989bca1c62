//! Providers a catalog administrator disabled. A disabled provider's offers
//! stay in the catalog (it may withdraw them but not publish), so the feed
//! does not tell; with the administrator secret
//! (`--catalog-admin-secret-file`), the orchestrator reads
//! `GET /admin/providers` every `--disabled-poll` and leaves the disabled
//! ones out of every decision. When the catalog cannot answer, the last set
//! stays, as the offers do.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::watch;

use crate::feed::Snapshot;

/// Renew the admin token this long after it was issued (the catalog's
/// tokens live an hour by default).
const TOKEN_AGE: Duration = Duration::from_secs(20 * 60);

#[derive(Debug, Deserialize)]
struct Token {
    token: String,
}

#[derive(Debug, Deserialize)]
struct AdminProvider {
    #[serde(rename = "clusterID")]
    cluster_id: String,
    disabled: bool,
}

/// Why one poll failed.
#[derive(Debug, thiserror::Error)]
enum PollError {
    #[error("{0}")]
    Http(#[from] reqwest::Error),
    #[error("{what} answered {status}")]
    Status {
        what: &'static str,
        status: reqwest::StatusCode,
    },
}

struct Poller {
    http: reqwest::blocking::Client,
    base: String,
    secret: String,
    token: Option<(String, Instant)>,
}

impl Poller {
    fn token(&mut self) -> Result<String, PollError> {
        if let Some((token, at)) = &self.token {
            if at.elapsed() < TOKEN_AGE {
                return Ok(token.clone());
            }
        }
        let r = self
            .http
            .post(format!("{}/authenticate/admin", self.base))
            .json(&serde_json::json!({"secret": self.secret}))
            .send()?;
        if !r.status().is_success() {
            return Err(PollError::Status {
                what: "POST /authenticate/admin",
                status: r.status(),
            });
        }
        let token = r.json::<Token>()?.token;
        self.token = Some((token.clone(), Instant::now()));
        Ok(token)
    }

    fn disabled(&mut self) -> Result<BTreeSet<String>, PollError> {
        let token = self.token()?;
        let r = self
            .http
            .get(format!("{}/admin/providers", self.base))
            .bearer_auth(token)
            .send()?;
        if !r.status().is_success() {
            self.token = None;
            return Err(PollError::Status {
                what: "GET /admin/providers",
                status: r.status(),
            });
        }
        Ok(r.json::<Vec<AdminProvider>>()?
            .into_iter()
            .filter(|p| p.disabled)
            .map(|p| p.cluster_id)
            .collect())
    }
}

/// The disabled providers now (for `explain`).
pub fn fetch(base: &str, secret: &str) -> Result<BTreeSet<String>, String> {
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    Poller {
        http,
        base: base.to_string(),
        secret: secret.to_string(),
        token: None,
    }
    .disabled()
    .map_err(|e| format!("cannot read the disabled providers from {base}: {e}"))
}

/// Poll the catalog at `base` (`http://HOST:PORT`) every `every` until
/// `stop`, publishing the disabled providers into `snapshot`. (The blocking
/// HTTP client is built and dropped on the polling thread: it may not be
/// inside the async runtime.)
pub fn follow(
    base: String,
    secret: String,
    every: Duration,
    snapshot: Arc<watch::Sender<Arc<Snapshot>>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let span = tracing::info_span!("catalog_admin", catalog = %base);
    std::thread::spawn(move || {
        let _entered = span.enter();
        let http = match reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
        {
            Ok(http) => http,
            Err(error) => {
                tracing::error!(%error, "cannot build an HTTP client; disabled providers are not followed");
                return;
            }
        };
        let mut poller = Poller {
            http,
            base,
            secret,
            token: None,
        };
        while !stop.load(Ordering::Relaxed) {
            match poller.disabled() {
                Ok(disabled) => {
                    snapshot.send_if_modified(|s| {
                        if s.disabled == disabled {
                            return false;
                        }
                        tracing::info!(?disabled, "disabled providers changed");
                        *s = Arc::new(Snapshot {
                            disabled: disabled.clone(),
                            ..(**s).clone()
                        });
                        true
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot read the disabled providers; keeping the last set")
                }
            }
            let until = Instant::now() + every;
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    })
}
