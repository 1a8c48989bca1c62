//! Liqo v1 peering users' kubeconfigs as data, not code.
//!
//! A kubeconfig is a program for the consumer's Kubernetes client: `exec`
//! and `auth-provider` run commands, `tokenFile` and the file-path keys read
//! the consumer's own files (and send them to the provider), `proxy-url`
//! and `insecure-skip-tls-verify` redirect or unprotect the connection. So
//! the catalog never passes on what a provider sent, and no program of the
//! workspace builds a client from a kubeconfig another party wrote (a
//! Purchase's Secret, a contract's peering user) before it passed here.
//! [`canonical`] — the one function every such kubeconfig goes through — parses
//! it into a strict typed model ([`Kubeconfig`]) and writes a fresh copy
//! from the checked fields alone ([`Kubeconfig::to_yaml`]); that copy is
//! what the catalog seals, stores and releases in contracts, and what a
//! controller hands to its Kubernetes client (so nothing the check did not
//! read can reach the client).
//!
//! The accepted shape is the one `liqoctl generate peering-user` writes
//! (v1.2.0: `pkg/liqoctl/rest/peering-user/userfactory/cert.go` calling
//! `pkg/utils/kubeconfig/kubeconfig.go`'s `GenerateKubeconfig`, written by
//! client-go's `clientcmd.Write`), plus a token user:
//!
//! - at most [`MAX_KUBECONFIG_BYTES`] of one YAML document with no anchors,
//!   aliases, tags, merge keys (`<<`), directives or duplicate keys;
//! - `apiVersion: v1`, `kind: Config`, optionally `preferences: {}`;
//! - exactly one cluster, one user and one context, each named; the
//!   context names that cluster and user (and optionally a `namespace`, a
//!   DNS-1123 label), and `current-context` names the context;
//! - the cluster: an `https://` `server` with a host and no userinfo, query
//!   or fragment, and optionally `certificate-authority-data`: base64 of
//!   PEM holding only X.509 certificates. It may be absent because liqoctl
//!   leaves it out when the provider's API server has no private CA
//!   (`RetrieveAPIServerCA` returns nothing); the consumer then verifies
//!   the server against its system roots — still verified, as TLS
//!   verification cannot be turned off;
//! - the user: exactly one of a `token` (RFC 6750 characters) or
//!   `client-certificate-data` with `client-key-data` (base64 PEM: the
//!   certificate chain, then one private key that rustls can use — RSA,
//!   ECDSA P-256/P-384 or Ed25519 — and that matches the certificate).
//!
//! Nothing else: unknown keys (and case variants of known ones) are
//! refused, and so are `tls-server-name` (liqoctl never writes it; the
//! certificate must be checked against the server's own name), basic auth,
//! impersonation, `extensions` and `disable-compression`.

use std::fmt;

use base64::Engine;
use rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, PrivateSec1KeyDer,
};
use serde::{Deserialize, Serialize};
use serde_yaml_ng::Value;

/// Largest kubeconfig accepted, in bytes.
pub const MAX_KUBECONFIG_BYTES: usize = 32 * 1024;

/// Longest cluster, user or context name accepted.
const MAX_NAME: usize = 253;

/// What is wrong with a kubeconfig (the message names the part).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KubeconfigError(pub String);

fn bad(msg: impl Into<String>) -> KubeconfigError {
    KubeconfigError(msg.into())
}

/// A checked kubeconfig: only what a consumer needs to reach the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kubeconfig {
    pub context: String,
    pub namespace: Option<String>,
    pub cluster: String,
    /// An `https://` URL (see [`check_server`]).
    pub server: String,
    /// DER certificates the server's chain must lead to; None: the
    /// consumer's system roots.
    pub certificate_authority: Option<Vec<Pem>>,
    pub user: String,
    pub credential: Credential,
}

/// How the peering user authenticates.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// A bearer token.
    Token(String),
    /// A client certificate chain (leaf first) and its private key.
    ClientCertificate { chain: Vec<Pem>, key: Pem },
}

/// One PEM section: its label and DER contents.
#[derive(Clone, PartialEq, Eq)]
pub struct Pem {
    pub label: &'static str,
    pub der: Vec<u8>,
}

// Secrets stay out of logs: Debug shows the kind of credential and the
// size of each PEM section, never a token or key.
impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::Token(_) => f.write_str("Token(..)"),
            Credential::ClientCertificate { chain, key } => f
                .debug_struct("ClientCertificate")
                .field("chain", chain)
                .field("key", key)
                .finish(),
        }
    }
}

impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} bytes)", self.label, self.der.len())
    }
}

const LABEL_CERTIFICATE: &str = "CERTIFICATE";
const LABEL_PKCS8: &str = "PRIVATE KEY";
const LABEL_PKCS1: &str = "RSA PRIVATE KEY";
const LABEL_SEC1: &str = "EC PRIVATE KEY";

// The wire shape: every struct refuses unknown fields. Fields are declared
// in the order `clientcmd.Write` emits them (sorted), so the canonical copy
// of what liqoctl writes is the same text.

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(rename = "apiVersion")]
    api_version: String,
    clusters: Vec<NamedCluster>,
    contexts: Vec<NamedContext>,
    #[serde(rename = "current-context")]
    current_context: String,
    kind: String,
    #[serde(default)]
    preferences: Option<Preferences>,
    users: Vec<NamedUser>,
}

/// `preferences: {}`, and nothing in it.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Preferences {}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedCluster {
    cluster: Cluster,
    name: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cluster {
    #[serde(
        rename = "certificate-authority-data",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    certificate_authority_data: Option<String>,
    server: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedContext {
    context: Context,
    name: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Context {
    cluster: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    user: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedUser {
    name: String,
    user: User,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct User {
    #[serde(
        rename = "client-certificate-data",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    client_certificate_data: Option<String>,
    #[serde(
        rename = "client-key-data",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    client_key_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token: Option<String>,
}

/// Check `yaml` and return the canonical copy to store and release (see
/// the module docs). Every kubeconfig the catalog takes in, or hands out,
/// and every one a controller builds a client from, goes through here.
pub fn canonical(yaml: &str) -> Result<String, KubeconfigError> {
    check(yaml)?.to_yaml()
}

/// Parse and check `yaml` into the model (see the module docs).
pub fn check(yaml: &str) -> Result<Kubeconfig, KubeconfigError> {
    if yaml.len() > MAX_KUBECONFIG_BYTES {
        return Err(bad(format!(
            "is {} bytes; at most {MAX_KUBECONFIG_BYTES} are accepted",
            yaml.len()
        )));
    }
    scan(yaml)?;
    // Through a Value first: it refuses duplicate keys and several
    // documents, and lets `refuse_known_hostile` explain itself.
    let doc: Value = serde_yaml_ng::from_str(yaml).map_err(|e| bad(format!("is not YAML: {e}")))?;
    if !doc.is_mapping() {
        return Err(bad("is not a kubeconfig (a YAML mapping)"));
    }
    refuse_known_hostile(&doc, "")?;
    let file: File = serde_path_to_error::deserialize(doc).map_err(|e| {
        let path = e.path().to_string();
        bad(format!("{path}: {}", e.inner()))
    })?;
    model(file)
}

/// Refuse what must not hide between the parser and the model: anchors and
/// aliases (`&`, `*`), tags (`!`), merge keys (`<<`) and directives (`%`
/// at the start of a line). Comments are cut first, at the first `#` on
/// each line. That is sound although `#` may also sit inside a scalar:
/// no accepted value may contain `#` (nor `&`, `*`, `!` or `<`), so a line
/// cut inside a scalar belongs to a document refused later anyway, and an
/// anchor, alias or tag needs its indicator before any `#` it contains.
fn scan(yaml: &str) -> Result<(), KubeconfigError> {
    for (i, line) in yaml.lines().enumerate() {
        let code = line.split('#').next().unwrap_or("");
        let at = |what: &str| bad(format!("line {}: {what} are not accepted", i + 1));
        if code.starts_with('%') {
            return Err(at("YAML directives (`%`)"));
        }
        if code.contains("<<") {
            return Err(at("YAML merge keys (`<<`)"));
        }
        if code.contains('&') || code.contains('*') {
            return Err(at("YAML anchors and aliases (`&`, `*`)"));
        }
        if code.contains('!') {
            return Err(at("YAML tags (`!`)"));
        }
    }
    Ok(())
}

/// Why each key a client would act on (in any spelling: case, `-` and
/// `_` ignored) is refused.
const HOSTILE: &[(&str, &str)] = &[
    (
        "exec",
        "a kubeconfig must not run commands on the consumer's machine",
    ),
    (
        "auth-provider",
        "a kubeconfig must not run commands or plugins on the consumer's machine",
    ),
    (
        "tokenFile",
        "file paths would be read on the consumer's machine (and its token sent to the provider)",
    ),
    (
        "certificate-authority",
        "file paths would be read on the consumer's machine; embed `certificate-authority-data`",
    ),
    (
        "client-certificate",
        "file paths would be read on the consumer's machine; embed `client-certificate-data`",
    ),
    (
        "client-key",
        "file paths would be read on the consumer's machine; embed `client-key-data`",
    ),
    (
        "proxy-url",
        "the consumer connects to the server itself, not through a proxy",
    ),
    (
        "insecure-skip-tls-verify",
        "the server's certificate is always verified",
    ),
    (
        "tls-server-name",
        "the server's certificate is verified against the server's own name",
    ),
    ("username", "basic authentication is not accepted"),
    ("password", "basic authentication is not accepted"),
    ("as", "impersonation is not accepted"),
    ("as-uid", "impersonation is not accepted"),
    ("as-groups", "impersonation is not accepted"),
    ("as-user-extra", "impersonation is not accepted"),
    ("extensions", "extensions are not accepted"),
    ("disable-compression", "client options are not accepted"),
];

fn fold(key: &str) -> String {
    key.chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Walk every mapping: keys must be strings, and a key a client acts on
/// (see [`HOSTILE`]) is refused wherever it is, with its reason.
fn refuse_known_hostile(v: &Value, path: &str) -> Result<(), KubeconfigError> {
    match v {
        Value::Mapping(m) => {
            for (k, v) in m {
                let Some(key) = k.as_str() else {
                    let at = if path.is_empty() { "." } else { path };
                    return Err(bad(format!("{at}: keys must be strings")));
                };
                let here = if path.is_empty() {
                    key.to_string()
                } else {
                    format!("{path}.{key}")
                };
                let folded = fold(key);
                if let Some((_, why)) = HOSTILE.iter().find(|(h, _)| fold(h) == folded) {
                    return Err(bad(format!("{here} is not accepted: {why}")));
                }
                refuse_known_hostile(v, &here)?;
            }
        }
        Value::Sequence(s) => {
            for (i, v) in s.iter().enumerate() {
                refuse_known_hostile(v, &format!("{path}[{i}]"))?;
            }
        }
        Value::Tagged(_) => return Err(bad(format!("{path}: YAML tags are not accepted"))),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
    Ok(())
}

/// The one entry of `list`, or why not.
fn one<'a, T>(list: &'a [T], key: &str, what: &str) -> Result<&'a T, KubeconfigError> {
    match list {
        [only] => Ok(only),
        _ => Err(bad(format!(
            "has {} `{key}`; exactly one is accepted (the peering {what})",
            list.len()
        ))),
    }
}

fn model(file: File) -> Result<Kubeconfig, KubeconfigError> {
    if file.api_version != "v1" {
        return Err(bad("apiVersion must be `v1`"));
    }
    if file.kind != "Config" {
        return Err(bad("kind must be `Config`"));
    }
    let cluster = one(&file.clusters, "clusters", "cluster")?;
    let context = one(&file.contexts, "contexts", "context")?;
    let user = one(&file.users, "users", "user")?;
    check_name("clusters[0].name", &cluster.name)?;
    check_name("contexts[0].name", &context.name)?;
    check_name("users[0].name", &user.name)?;
    if file.current_context != context.name {
        return Err(bad(format!(
            "current-context must name the context `{}`",
            context.name
        )));
    }
    if context.context.cluster != cluster.name {
        return Err(bad(format!(
            "contexts[0].context.cluster must name the cluster `{}`",
            cluster.name
        )));
    }
    if context.context.user != user.name {
        return Err(bad(format!(
            "contexts[0].context.user must name the user `{}`",
            user.name
        )));
    }
    if let Some(ns) = &context.context.namespace {
        let part = "contexts[0].context.namespace";
        if !crate::wire::names::is_dns_label(ns) {
            return Err(bad(format!(
                "{part} must be a DNS-1123 label (a Kubernetes namespace)"
            )));
        }
        read_alike(part, ns)?;
    }
    let server = check_server(&cluster.cluster.server)?;
    let certificate_authority = match &cluster.cluster.certificate_authority_data {
        None => None,
        Some(data) => {
            let part = "clusters[0].cluster.certificate-authority-data";
            let certs = pem_sections(part, data)?;
            // Trust anchors as rustls reads them (webpki also takes X.509 v1
            // roots here, which it refuses as end-entity certificates).
            let mut roots = rustls::RootCertStore::empty();
            for_each_certificate(part, &certs, |der| roots.add(der))?;
            Some(certs)
        }
    };
    let credential = credential(&user.user)?;
    Ok(Kubeconfig {
        context: context.name.clone(),
        namespace: context.context.namespace.clone(),
        cluster: cluster.name.clone(),
        server,
        certificate_authority,
        user: user.name.clone(),
        credential,
    })
}

/// A name as kubeconfigs use them (`kubernetes-admin@kubernetes`, EKS ARNs):
/// 1–253 of `A-Z a-z 0-9 . _ - : @ /`.
fn check_name(part: &str, name: &str) -> Result<(), KubeconfigError> {
    let ok = (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-:@/".contains(&b));
    if !ok {
        return Err(bad(format!(
            "{part} must be 1 to {MAX_NAME} of A-Z a-z 0-9 . _ - : @ /"
        )));
    }
    read_alike(part, name)
}

/// Refuse `value` if the canonical copy would write it unquoted and YAML
/// 1.1 readers (client-go reads kubeconfigs through go-yaml v2) would read
/// it as a boolean, null or number rather than the string serde_yaml_ng (YAML
/// 1.2) reads: `yes`, `on`, `n`, `1_000`, `0b101`, …. Quoted values are
/// read alike by both.
fn read_alike(part: &str, value: &str) -> Result<(), KubeconfigError> {
    let plain = serde_yaml_ng::to_string(value).is_ok_and(|t| !t.starts_with(['\'', '"']));
    if plain && yaml11_not_a_string(value) {
        return Err(bad(format!(
            "{part} `{value}` would be read as a boolean or a number by client-go (YAML 1.1)"
        )));
    }
    Ok(())
}

/// Whether go-yaml v2 resolves the plain scalar `s` to something other
/// than a string (its bool and null words; ints with `_`, `0b`, `0o`,
/// `0x`; floats).
pub(crate) fn yaml11_not_a_string(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "y", "yes", "n", "no", "on", "off", "true", "false", "null", "~",
    ];
    if WORDS.iter().any(|w| s.eq_ignore_ascii_case(w)) {
        return true;
    }
    if !s.starts_with(|c: char| c.is_ascii_digit() || "+-.".contains(c)) {
        return false;
    }
    let t: String = s.chars().filter(|c| *c != '_').collect();
    let digits = t.trim_start_matches(['+', '-']);
    let int = match digits.get(..2) {
        Some("0b") => u64::from_str_radix(&digits[2..], 2).is_ok(),
        Some("0o") => u64::from_str_radix(&digits[2..], 8).is_ok(),
        Some("0x") => u64::from_str_radix(&digits[2..], 16).is_ok(),
        _ => digits.parse::<u64>().is_ok(),
    };
    int || t.parse::<f64>().is_ok()
}

/// The server URL, checked: `https://`, a host (a DNS name, IPv4 or a
/// bracketed IPv6 address) and optional port, an optional path, and
/// nothing that two URL parsers could read differently — no userinfo
/// (`@`), query, fragment, percent-encoding, backslash or whitespace.
fn check_server(server: &str) -> Result<String, KubeconfigError> {
    let part = "clusters[0].cluster.server";
    let Some(rest) = server.strip_prefix("https://") else {
        return Err(bad(format!("{part} must be an https:// URL")));
    };
    if let Some(c) = rest
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-._~:/[]".contains(*c)))
    {
        let why = match c {
            '@' => "userinfo is not accepted".to_string(),
            '?' => "a query is not accepted".to_string(),
            '#' => "a fragment is not accepted".to_string(),
            c => format!("{c:?} is not accepted"),
        };
        return Err(bad(format!("{part}: {why}")));
    }
    let authority = rest.split('/').next().unwrap_or("");
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, _)) if !h.ends_with(']') && h.contains(':') => (authority, None),
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    let url = url::Url::parse(server).map_err(|e| bad(format!("{part} is not a URL: {e}")))?;
    let same_host = url
        .host_str()
        .is_some_and(|h| !h.is_empty() && h.eq_ignore_ascii_case(host));
    if !same_host {
        return Err(bad(format!(
            "{part} must name its host plainly (a DNS name, an IPv4 address or a [bracketed] IPv6 address)"
        )));
    }
    if let Some(p) = port {
        let n: u16 = p
            .parse()
            .ok()
            .filter(|n| *n > 0 && p.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| bad(format!("{part}: port must be 1 to 65535")))?;
        if url.port_or_known_default() != Some(n) {
            return Err(bad(format!("{part}: port must be 1 to 65535")));
        }
    }
    Ok(server.to_string())
}

fn credential(user: &User) -> Result<Credential, KubeconfigError> {
    let part = "users[0].user";
    match (
        &user.token,
        &user.client_certificate_data,
        &user.client_key_data,
    ) {
        (Some(token), None, None) => {
            check_token(token)?;
            Ok(Credential::Token(token.clone()))
        }
        (None, Some(cert), Some(key)) => {
            let cpart = "users[0].user.client-certificate-data";
            let kpart = "users[0].user.client-key-data";
            let chain = pem_sections(cpart, cert)?;
            for_each_certificate(cpart, &chain, |der| {
                rustls::server::ParsedCertificate::try_from(&der).map(drop)
            })?;
            let keys = pem_sections(kpart, key)?;
            let [key] = <[Pem; 1]>::try_from(keys)
                .map_err(|_| bad(format!("{kpart} must hold exactly one private key")))?;
            check_key(&chain, &key)?;
            Ok(Credential::ClientCertificate { chain, key })
        }
        (None, None, None) => Err(bad(format!(
            "{part} has neither a `token` nor `client-certificate-data` with `client-key-data` (files cannot travel with a contract)"
        ))),
        (None, _, _) => Err(bad(format!(
            "{part} needs both `client-certificate-data` and `client-key-data`"
        ))),
        (Some(_), _, _) => Err(bad(format!(
            "{part} has a `token` and a client certificate; exactly one is accepted"
        ))),
    }
}

/// A bearer token as RFC 6750 spells one (so it cannot break the header
/// it travels in): `A-Z a-z 0-9 - . _ ~ + /`, then optional `=` padding.
fn check_token(token: &str) -> Result<(), KubeconfigError> {
    let body = token.trim_end_matches('=');
    let ok = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b));
    if !ok {
        return Err(bad(
            "users[0].user.token must be a non-empty bearer token (A-Z a-z 0-9 - . _ ~ + /, then = padding)",
        ));
    }
    read_alike("users[0].user.token", token)
}

/// Every section of `sections` is a certificate that `parse` accepts.
fn for_each_certificate(
    part: &str,
    sections: &[Pem],
    mut parse: impl FnMut(CertificateDer<'_>) -> Result<(), rustls::Error>,
) -> Result<(), KubeconfigError> {
    for (i, s) in sections.iter().enumerate() {
        if s.label != LABEL_CERTIFICATE {
            return Err(bad(format!(
                "{part}: section {} is {}, not a CERTIFICATE",
                i + 1,
                s.label
            )));
        }
        parse(CertificateDer::from(s.der.as_slice()))
            .map_err(|e| bad(format!("{part}: certificate {} does not parse: {e}", i + 1)))?;
    }
    Ok(())
}

/// The key is one rustls can sign with, and belongs to the chain's leaf.
fn check_key(chain: &[Pem], key: &Pem) -> Result<(), KubeconfigError> {
    let kpart = "users[0].user.client-key-data";
    let der = match key.label {
        LABEL_PKCS8 => PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.der.clone())),
        LABEL_PKCS1 => PrivateKeyDer::Pkcs1(PrivatePkcs1KeyDer::from(key.der.clone())),
        LABEL_SEC1 => PrivateKeyDer::Sec1(PrivateSec1KeyDer::from(key.der.clone())),
        other => {
            return Err(bad(format!(
                "{kpart}: a {other} section is not a private key"
            )))
        }
    };
    let signing = rustls::crypto::ring::sign::any_supported_type(&der).map_err(|_| {
        bad(format!(
            "{kpart} is not an RSA (2048 bits or more), ECDSA P-256/P-384 or Ed25519 private key"
        ))
    })?;
    let certs = chain
        .iter()
        .map(|c| CertificateDer::from(c.der.clone()))
        .collect();
    match rustls::sign::CertifiedKey::new(certs, signing).keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(()),
        Err(_) => Err(bad(format!(
            "{kpart} does not belong to the client certificate"
        ))),
    }
}

/// `data` (base64 of PEM, as kubeconfigs embed it) as its sections: only
/// PEM sections with known labels, no headers, nothing between them but
/// blank lines.
fn pem_sections(part: &str, data: &str) -> Result<Vec<Pem>, KubeconfigError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let bytes = b64
        .decode(data)
        .map_err(|e| bad(format!("{part} is not base64: {e}")))?;
    let text = std::str::from_utf8(&bytes).map_err(|_| bad(format!("{part} is not PEM text")))?;
    let mut sections = Vec::new();
    let mut open: Option<(&'static str, String)> = None;
    for line in text.lines().map(|l| l.strip_suffix('\r').unwrap_or(l)) {
        match &mut open {
            None if line.trim().is_empty() => {}
            None => {
                let label = line
                    .strip_prefix("-----BEGIN ")
                    .and_then(|l| l.strip_suffix("-----"))
                    .ok_or_else(|| bad(format!("{part} holds text outside PEM sections")))?;
                let label = [LABEL_CERTIFICATE, LABEL_PKCS8, LABEL_PKCS1, LABEL_SEC1]
                    .into_iter()
                    .find(|l| *l == label)
                    .ok_or_else(|| bad(format!("{part}: a {label} section is not accepted")))?;
                open = Some((label, String::new()));
            }
            Some((label, body)) => {
                if line == format!("-----END {label}-----") {
                    let der = b64.decode(&*body).map_err(|e| {
                        bad(format!("{part}: a {label} section is not base64: {e}"))
                    })?;
                    sections.push(Pem { label, der });
                    open = None;
                } else if line
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
                {
                    body.push_str(line);
                } else {
                    return Err(bad(format!(
                        "{part}: a {label} section holds something other than base64"
                    )));
                }
            }
        }
    }
    if open.is_some() {
        return Err(bad(format!("{part}: a PEM section is not closed")));
    }
    if sections.is_empty() {
        return Err(bad(format!("{part} holds no PEM section")));
    }
    Ok(sections)
}

/// `sections` as base64 of PEM, as Go's `pem.EncodeToMemory` writes it
/// (64-character lines, `\n` after each).
fn encode_pem(sections: &[Pem]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut text = String::new();
    for s in sections {
        text.push_str(&format!("-----BEGIN {}-----\n", s.label));
        let body = b64.encode(&s.der);
        for chunk in body.as_bytes().chunks(64) {
            text.push_str(&String::from_utf8_lossy(chunk));
            text.push('\n');
        }
        text.push_str(&format!("-----END {}-----\n", s.label));
    }
    b64.encode(text)
}

impl Kubeconfig {
    /// The canonical YAML: built from the checked fields alone, in the
    /// layout `clientcmd.Write` uses, so what liqoctl wrote comes out the
    /// same (comments, spacing and key order of the received text are
    /// gone).
    pub fn to_yaml(&self) -> Result<String, KubeconfigError> {
        let (token, cert, key) = match &self.credential {
            Credential::Token(t) => (Some(t.clone()), None, None),
            Credential::ClientCertificate { chain, key } => (
                None,
                Some(encode_pem(chain)),
                Some(encode_pem(std::slice::from_ref(key))),
            ),
        };
        let file = File {
            api_version: "v1".into(),
            clusters: vec![NamedCluster {
                cluster: Cluster {
                    certificate_authority_data: self
                        .certificate_authority
                        .as_deref()
                        .map(encode_pem),
                    server: self.server.clone(),
                },
                name: self.cluster.clone(),
            }],
            contexts: vec![NamedContext {
                context: Context {
                    cluster: self.cluster.clone(),
                    namespace: self.namespace.clone(),
                    user: self.user.clone(),
                },
                name: self.context.clone(),
            }],
            current_context: self.context.clone(),
            kind: "Config".into(),
            preferences: Some(Preferences {}),
            users: vec![NamedUser {
                name: self.user.clone(),
                user: User {
                    client_certificate_data: cert,
                    client_key_data: key,
                    token,
                },
            }],
        };
        serde_yaml_ng::to_string(&file).map_err(|e| bad(format!("cannot be written back: {e}")))
    }
}

#[cfg(test)]
#[path = "kubeconfig_tests.rs"]
mod tests;
