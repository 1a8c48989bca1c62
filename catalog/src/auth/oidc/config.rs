//! OpenID Connect flags.

use std::time::Duration;

use crate::duration::parse_duration;

/// OIDC flags (flattened into the catalog's `Config`).
#[derive(Debug, Clone, clap::Args)]
pub struct OidcConfig {
    /// Issuer URL of an OpenID Connect provider whose JWTs are accepted
    /// besides the catalog's own (its discovery document is read from
    /// <issuer>/.well-known/openid-configuration). https, or http on a
    /// loopback address only.
    #[arg(long, env = "CATALOG_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,

    /// Audience (`aud`) OIDC tokens must carry; required with --oidc-issuer.
    #[arg(long, env = "CATALOG_OIDC_AUDIENCE", requires = "oidc_issuer")]
    pub oidc_audience: Option<String>,

    /// Client ID the web UI signs consumers in with (OpenID Connect
    /// authorization-code flow with PKCE, a public client: no secret). The
    /// UI offers "Sign in with …" only when it is set; register the
    /// catalog's address + `/` as the client's redirect URI at the issuer.
    #[arg(long, env = "CATALOG_OIDC_CLIENT_ID", requires = "oidc_issuer")]
    pub oidc_client_id: Option<String>,

    /// Claim holding the roles (dots descend into objects, e.g.
    /// realm_access.roles); an array of strings or a space-separated string.
    #[arg(long, env = "CATALOG_OIDC_ROLES_CLAIM", default_value = "roles")]
    pub oidc_roles_claim: String,

    /// Extra role names, as value=role pairs separated by commas (e.g.
    /// catalog-admins=admin,buyers=consumer). The catalog's role names
    /// (provider, consumer, admin) always map to themselves.
    #[arg(long, env = "CATALOG_OIDC_ROLE_MAP", value_delimiter = ',')]
    pub oidc_role_map: Vec<String>,

    /// Least time between two JWKS fetches triggered by tokens signed with
    /// an unknown key.
    #[arg(long, env = "CATALOG_OIDC_REFRESH_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub oidc_refresh_interval: Duration,

    /// How long fetched keys are used before they are fetched again.
    #[arg(long, env = "CATALOG_OIDC_KEYS_MAX_AGE", default_value = "1h", value_parser = parse_duration)]
    pub oidc_keys_max_age: Duration,

    /// PEM file of certificate authorities trusted for the issuer's https
    /// endpoints, beside the system's roots (for an issuer whose certificate
    /// a private CA signed).
    #[arg(long, env = "CATALOG_OIDC_CA_FILE", requires = "oidc_issuer")]
    pub oidc_ca_file: Option<std::path::PathBuf>,

    /// Timeout of each request to the issuer.
    #[arg(long, env = "CATALOG_OIDC_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub oidc_timeout: Duration,
}
