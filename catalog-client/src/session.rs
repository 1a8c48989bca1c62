//! An authenticated session with one catalog: who logs in ([`Login`]), the
//! bearer token it holds, and its renewal — a token is renewed once most of
//! its lifetime has passed ([`renew_after`]), and once more when the catalog
//! answers 401 to it (a restarted catalog with a new signing key). A
//! provider whose credentials are refused re-reads its credentials file:
//! an operator who rotated them updates the file, not the running program.
//!
//! The session retries nothing on its own; callers retry failed calls with
//! [`crate::Backoff`] on their own schedule.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::Utc;
use reqwest::{Method, RequestBuilder, StatusCode};
use tracing::Instrument;

use crate::credentials::{self, Exposure};
use crate::error::Error;
use crate::http::{Answer, Http, MAX_ANSWER_BYTES};
use crate::routes;
use crate::wire::{AdminLogin, IssuedToken, PeeringCredentials};

/// A token is renewed once this share of its lifetime has passed.
const RENEW_AFTER_SHARE: f64 = 0.8;
/// A token that looks expired on arrival (the catalog's clock is ahead of
/// ours) is used this long anyway: the catalog checks expiry by its own
/// clock, and a 401 would make us renew it sooner.
const SKEWED_TOKEN_USE: Duration = Duration::from_secs(30);
/// Long-lived tokens are renewed at least this often.
const MAX_TOKEN_USE: Duration = Duration::from_secs(24 * 3600);

/// Who the session is.
pub enum Login {
    /// A provider: `POST /authenticate` with its peering credentials. With
    /// `file`, the credentials are read again from it when the catalog
    /// refuses them.
    Provider {
        credentials: PeeringCredentials,
        file: Option<(PathBuf, Exposure)>,
    },
    /// An administrator: `POST /authenticate/admin` with the secret.
    Admin { secret: String },
    /// A consumer's bearer token, issued by someone else: never renewed.
    Bearer { token: String },
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Login::Provider { credentials, .. } => f
                .debug_struct("Provider")
                .field("cluster_id", &credentials.cluster_id)
                .finish_non_exhaustive(),
            Login::Admin { .. } => f.write_str("Admin(..)"),
            Login::Bearer { .. } => f.write_str("Bearer(..)"),
        }
    }
}

struct Token {
    bearer: String,
    renew_at: Instant,
}

/// A client of one catalog, logged in as one [`Login`].
pub struct Session {
    http: Http,
    login: Login,
    token: Option<Token>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("base", &self.http.base().as_str())
            .field("login", &self.login)
            .field("authenticated", &self.token.is_some())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session with the catalog behind `http` (nothing is contacted yet).
    pub fn new(http: Http, login: Login) -> Self {
        let token = match &login {
            Login::Bearer { token } => Some(Token {
                bearer: token.clone(),
                renew_at: far_future(),
            }),
            _ => None,
        };
        Self { http, login, token }
    }

    /// A provider's session over a new client (`timeout`, `user_agent`),
    /// with the credentials in `file`: refused when others may read it
    /// (`flag` names it in the error), read again when the catalog refuses
    /// them. Nothing is contacted yet.
    pub fn provider_from_file(
        base: reqwest::Url,
        flag: &str,
        file: &Path,
        timeout: Duration,
        user_agent: &str,
    ) -> Result<Self, Error> {
        let credentials = credentials::load_named(flag, file, Exposure::Refuse)?;
        let http = Http::new(Http::client(timeout, user_agent)?, base);
        Ok(Session::new(
            http,
            Login::Provider {
                credentials,
                file: Some((file.to_path_buf(), Exposure::Refuse)),
            },
        ))
    }

    /// The provider this session authenticates as (empty for the others).
    pub fn cluster_id(&self) -> &str {
        match &self.login {
            Login::Provider { credentials, .. } => &credentials.cluster_id,
            _ => "",
        }
    }

    /// The transport (to open another session with the same client).
    pub fn http(&self) -> &Http {
        &self.http
    }

    /// Exchange the login for a fresh token. A provider refused, whose
    /// credentials file now says something else: once more with those.
    pub async fn authenticate(&mut self) -> Result<(), Error> {
        let refused = match self.authenticate_once().await {
            Err(e @ Error::BadCredentials { .. }) => e,
            other => return other,
        };
        let Login::Provider {
            credentials,
            file: Some((path, exposure)),
        } = &mut self.login
        else {
            return Err(refused);
        };
        match credentials::load(path, *exposure) {
            Ok(fresh) if fresh != *credentials => {
                tracing::info!(path = %path.display(), "the catalog refused the credentials and the file has changed; authenticating with the file's");
                *credentials = fresh;
                self.authenticate_once().await
            }
            Ok(_) => Err(refused),
            Err(e) => {
                tracing::warn!(error = %e, "cannot re-read the credentials file");
                Err(refused)
            }
        }
    }

    async fn authenticate_once(&mut self) -> Result<(), Error> {
        let (route, what, request) = match &self.login {
            Login::Provider { credentials, .. } => {
                let request = self
                    .http
                    .request(Method::POST, routes::AUTHENTICATE)?
                    .json(credentials);
                (routes::AUTHENTICATE, "POST /authenticate", request)
            }
            Login::Admin { secret } => {
                let login = AdminLogin {
                    secret: secret.clone(),
                };
                let request = self
                    .http
                    .request(Method::POST, routes::AUTHENTICATE_ADMIN)?
                    .json(&login);
                (
                    routes::AUTHENTICATE_ADMIN,
                    "POST /authenticate/admin",
                    request,
                )
            }
            // Nothing to exchange: the token is what it is.
            Login::Bearer { .. } => return Ok(()),
        };
        let span = tracing::info_span!("authenticate", route, cluster_id = %self.cluster_id());
        let answer = self
            .http
            .send(request, MAX_ANSWER_BYTES)
            .instrument(span)
            .await?;
        match answer.status {
            StatusCode::OK => {
                let issued: IssuedToken = answer.json(what)?;
                let renew_in = renew_after(issued.expires_at - Utc::now());
                tracing::info!(expires_at = %issued.expires_at, renew_in = ?renew_in, "authenticated to the catalog");
                let now = Instant::now();
                self.token = Some(Token {
                    bearer: issued.token,
                    renew_at: now.checked_add(renew_in).unwrap_or(now + MAX_TOKEN_USE),
                });
                Ok(())
            }
            StatusCode::UNAUTHORIZED if matches!(self.login, Login::Provider { .. }) => {
                Err(Error::BadCredentials {
                    cluster_id: self.cluster_id().to_string(),
                    message: answer.message(),
                })
            }
            StatusCode::BAD_REQUEST if matches!(self.login, Login::Provider { .. }) => {
                Err(Error::InvalidCredentials(answer.message()))
            }
            _ => Err(answer.unexpected(what)),
        }
    }

    /// Authenticate unless the current token is still comfortably valid.
    pub async fn ensure_token(&mut self) -> Result<(), Error> {
        let fresh = self
            .token
            .as_ref()
            .is_some_and(|t| Instant::now() < t.renew_at);
        if !fresh {
            if self.token.is_some() {
                tracing::debug!("renewing the catalog token before it expires");
            }
            self.authenticate().await?;
        }
        Ok(())
    }

    /// Drop the token: the next call authenticates first.
    pub fn forget_token(&mut self) {
        if !matches!(self.login, Login::Bearer { .. }) {
            self.token = None;
        }
    }

    /// The bearer token held (None before authenticating), for a request
    /// that is not read whole through [`Session::call`] (the contract
    /// change stream).
    pub(crate) fn bearer(&self) -> Option<&str> {
        self.token.as_ref().map(|t| t.bearer.as_str())
    }

    /// Whether a refused token is renewed by authenticating again (not a
    /// consumer's bearer token, which is what it is).
    pub(crate) fn renews_token(&self) -> bool {
        !matches!(self.login, Login::Bearer { .. })
    }

    /// Send the request `build` makes, with the bearer token, reading at
    /// most `limit` bytes. A 401 to a token the session can renew renews it
    /// and sends once more ([`Error::TokenRefused`] if that is refused
    /// too); 401/403 to a consumer's token is [`Error::Unauthorized`]; 5xx
    /// and 429 are [`Error::Unavailable`]. Any other answer is the caller's
    /// to sort.
    pub(crate) async fn call(
        &mut self,
        what: &str,
        limit: usize,
        build: impl Fn(&Http) -> Result<RequestBuilder, Error>,
    ) -> Result<Answer, Error> {
        self.ensure_token().await?;
        let mut answer = self.send_once(limit, &build).await?;
        let renewable = !matches!(self.login, Login::Bearer { .. });
        if answer.status == StatusCode::UNAUTHORIZED && renewable {
            tracing::info!(reason = %answer.message(), "the catalog refused our token; authenticating again");
            self.token = None;
            self.authenticate().await?;
            answer = self.send_once(limit, &build).await?;
            if answer.status == StatusCode::UNAUTHORIZED {
                return Err(Error::TokenRefused(answer.message()));
            }
        }
        let status = answer.status;
        if !renewable && (status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN) {
            return Err(Error::Unauthorized {
                status: status.as_u16(),
                message: answer.message(),
            });
        }
        if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
            return Err(answer.unexpected(what));
        }
        Ok(answer)
    }

    async fn send_once(
        &self,
        limit: usize,
        build: &impl Fn(&Http) -> Result<RequestBuilder, Error>,
    ) -> Result<Answer, Error> {
        let bearer = self
            .token
            .as_ref()
            .map(|t| t.bearer.as_str())
            .unwrap_or_default();
        self.http
            .send(build(&self.http)?.bearer_auth(bearer), limit)
            .await
    }
}

fn far_future() -> Instant {
    let now = Instant::now();
    now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600))
        .unwrap_or(now + MAX_TOKEN_USE)
}

/// How long to use a token that expires in `remaining` (by our clock).
pub fn renew_after(remaining: chrono::TimeDelta) -> Duration {
    match remaining.to_std() {
        Ok(lifetime) if !lifetime.is_zero() => lifetime
            .mul_f64(RENEW_AFTER_SHARE)
            .clamp(Duration::from_millis(100), MAX_TOKEN_USE),
        _ => SKEWED_TOKEN_USE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_renewed_before_they_expire() {
        assert_eq!(
            renew_after(chrono::TimeDelta::seconds(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(
            renew_after(chrono::TimeDelta::seconds(2)),
            Duration::from_millis(1600)
        );
        assert_eq!(
            renew_after(chrono::TimeDelta::seconds(-5)),
            SKEWED_TOKEN_USE
        );
        assert_eq!(renew_after(chrono::TimeDelta::days(3650)), MAX_TOKEN_USE);
    }

    #[test]
    fn debug_shows_no_secret() {
        let http = Http::new(
            Http::client(std::time::Duration::from_secs(5), "test").unwrap(),
            "http://h".parse().unwrap(),
        );
        let admin = Session::new(
            http.clone(),
            Login::Admin {
                secret: "s3cret".into(),
            },
        );
        let bearer = Session::new(
            http,
            Login::Bearer {
                token: "t0ken".into(),
            },
        );
        let shown = format!("{admin:?} {bearer:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("t0ken"),
            "{shown}"
        );
    }
}
