//! The check a Liqo v1 peering user's kubeconfig passes before the catalog
//! keeps it (`PUT /provider/peering`): at most [`MAX_KUBECONFIG_BYTES`] of
//! YAML whose `current-context` names a context, whose cluster has an
//! `https://` server and whose user has a token or an embedded client
//! certificate and key (`liqoctl generate peering-user` writes the latter).
//! Paths to files are refused: the buyer's cluster cannot read them.

use serde_yaml::Value;

/// Largest kubeconfig accepted, in bytes.
pub const MAX_KUBECONFIG_BYTES: usize = 32 * 1024;

/// What is wrong with a kubeconfig (the message names the part).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KubeconfigError(pub String);

fn bad(msg: impl Into<String>) -> KubeconfigError {
    KubeconfigError(msg.into())
}

fn text<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// The entry named `name` of the list `key` (`clusters`, `contexts`,
/// `users`), and its inner mapping (`cluster`, `context`, `user`).
fn named<'a>(
    doc: &'a Value,
    key: &str,
    inner: &str,
    name: &str,
) -> Result<&'a Value, KubeconfigError> {
    let list = doc
        .get(key)
        .and_then(Value::as_sequence)
        .ok_or_else(|| bad(format!("has no `{key}` list")))?;
    list.iter()
        .find(|e| text(e, "name") == Some(name))
        .and_then(|e| e.get(inner))
        .filter(|v| v.is_mapping())
        .ok_or_else(|| {
            bad(format!(
                "`{key}` has no entry `{name}` with a `{inner}` mapping"
            ))
        })
}

/// Check `yaml` (see the module docs); `Ok` means a consumer can use it
/// as it is.
pub fn check(yaml: &str) -> Result<(), KubeconfigError> {
    if yaml.len() > MAX_KUBECONFIG_BYTES {
        return Err(bad(format!(
            "is {} bytes; at most {MAX_KUBECONFIG_BYTES} are accepted",
            yaml.len()
        )));
    }
    let doc: Value = serde_yaml::from_str(yaml).map_err(|e| bad(format!("is not YAML: {e}")))?;
    if !doc.is_mapping() {
        return Err(bad("is not a kubeconfig (a YAML mapping)"));
    }
    let current = text(&doc, "current-context").ok_or_else(|| bad("has no `current-context`"))?;
    let context = named(&doc, "contexts", "context", current)?;
    let cluster_name = text(context, "cluster")
        .ok_or_else(|| bad(format!("context `{current}` names no cluster")))?;
    let user_name =
        text(context, "user").ok_or_else(|| bad(format!("context `{current}` names no user")))?;
    let cluster = named(&doc, "clusters", "cluster", cluster_name)?;
    let server = text(cluster, "server")
        .ok_or_else(|| bad(format!("cluster `{cluster_name}` has no `server`")))?;
    let url = url::Url::parse(server).map_err(|e| {
        bad(format!(
            "cluster `{cluster_name}`: server `{server}` is not a URL: {e}"
        ))
    })?;
    if url.scheme() != "https" || url.host_str().is_none_or(str::is_empty) {
        return Err(bad(format!(
            "cluster `{cluster_name}`: server must be an https:// URL with a host"
        )));
    }
    let user = named(&doc, "users", "user", user_name)?;
    let has_token = text(user, "token").is_some();
    let has_cert =
        text(user, "client-certificate-data").is_some() && text(user, "client-key-data").is_some();
    if !has_token && !has_cert {
        return Err(bad(format!(
            "user `{user_name}` has neither a `token` nor `client-certificate-data` with `client-key-data` (files cannot travel with a contract)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(server: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: peer\ncontexts:\n- name: peer\n  context:\n    cluster: prov\n    user: liqo-peer\nclusters:\n- name: prov\n  cluster:\n    server: {server}\n    certificate-authority-data: Q0E=\nusers:\n- name: liqo-peer\n  user:\n{user}\n"
        )
    }

    const CERT: &str = "    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ";

    #[test]
    fn accepts_certificate_or_token_users() {
        check(&config("https://provider.example:6443", CERT)).unwrap();
        check(&config("https://10.0.0.1:6443", "    token: abc")).unwrap();
    }

    #[test]
    fn names_what_is_wrong() {
        let cases = [
            (config("http://provider.example", CERT), "https://"),
            (
                config(
                    "https://p.example",
                    "    client-certificate: /tmp/c.pem\n    client-key: /tmp/k.pem",
                ),
                "neither",
            ),
            (config("https://p.example", "    token: ''"), "neither"),
            (
                config("https://p.example", CERT)
                    .replace("current-context: peer", "current-context: other"),
                "`other`",
            ),
            (
                config("https://p.example", CERT).replace("cluster: prov\n", "cluster: gone\n"),
                "`gone`",
            ),
            ("just text".to_string(), "mapping"),
            ("a: [".to_string(), "not YAML"),
            (
                format!(
                    "{}\n# {}",
                    config("https://p.example", CERT),
                    "x".repeat(MAX_KUBECONFIG_BYTES)
                ),
                "bytes",
            ),
        ];
        for (yaml, want) in cases {
            let e = check(&yaml).expect_err(&yaml);
            assert!(e.0.contains(want), "{want}: {e}");
        }
    }
}
