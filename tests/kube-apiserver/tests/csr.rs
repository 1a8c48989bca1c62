//! CertificateSigningRequests over HTTPS, as a client of a real cluster
//! meets them: the server fills in who asked, refuses a request a real one
//! refuses, lets only a holder of `approve` on the signer approve, and the
//! `kubernetes.io/kube-apiserver-client` signer then issues a certificate
//! that authenticates to the same server as its CN in its O's — under
//! RBAC like any user. Denied requests and other signers' stay unsigned.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::Api;
use kube_test_server::{ClientCert, KubeApiServer};
use serde_json::{json, Value};

mod common;
use common::{answer, as_admin};

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const SIGNER: &str = "kubernetes.io/kube-apiserver-client";

fn b64(bytes: impl AsRef<[u8]>) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A client trusting the server's CA, as the tests' own user unless a
/// request names another.
fn client(kube: &KubeApiServer) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = reqwest::Certificate::from_pem(kube.ca_pem().unwrap().as_bytes()).unwrap();
    let builder = reqwest::Client::builder()
        .no_proxy()
        .add_root_certificate(ca)
        .timeout(Duration::from_secs(20));
    as_admin(builder, kube).build().unwrap()
}

/// `method path` with `body`, as the holder of `token` (the tests' own
/// user without).
async fn call(
    kube: &KubeApiServer,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut request = client(kube).request(method, format!("{}{path}", kube.url()));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    answer(request).await
}

/// A PKCS#10 request for CN `user` in O `groups`, PEM, and its key.
fn request(user: &str, groups: &[&str]) -> (String, rcgen::KeyPair) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, user);
    for group in groups {
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, *group);
    }
    (params.serialize_request(&key).unwrap().pem().unwrap(), key)
}

/// Create `csr` as the holder of `token` (the tests' own user without).
async fn post(kube: &KubeApiServer, token: Option<&str>, csr: &Value) -> (u16, Value) {
    call(kube, reqwest::Method::POST, CSRS, token, Some(csr)).await
}

/// The CSR `name` as stored.
async fn get(kube: &KubeApiServer, name: &str) -> (u16, Value) {
    call(
        kube,
        reqwest::Method::GET,
        &format!("{CSRS}/{name}"),
        None,
        None,
    )
    .await
}

fn csr(name: &str, pem: &str, signer: &str, usages: &[&str]) -> Value {
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": b64(pem), "signerName": signer, "usages": usages, "expirationSeconds": 3600}})
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
}

fn bind(role: &str, subject: Value) -> Value {
    json!({"kind": "ClusterRoleBinding", "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject]})
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name})
}

/// The stored CSR once `done` holds for it (the signer works in the
/// background, as kube-controller-manager does).
async fn when(kube: &KubeApiServer, name: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, csr) = get(kube, name).await;
        if done(&csr) {
            return csr;
        }
        assert!(
            Instant::now() < deadline,
            "never happened to {name}: {csr:#}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `/approval` with a condition of `kind` added to the CSR as stored now.
async fn decide(kube: &KubeApiServer, name: &str, kind: &str, token: Option<&str>) -> (u16, Value) {
    let path = format!("{CSRS}/{name}");
    let (_, mut csr) = call(kube, reqwest::Method::GET, &path, None, None).await;
    csr["status"]["conditions"] =
        json!([{"type": kind, "status": "True", "reason": "Test", "message": "by the test"}]);
    let approval = format!("{path}/approval");
    call(kube, reqwest::Method::PUT, &approval, token, Some(&csr)).await
}

fn certificate(csr: &Value) -> Option<String> {
    let data = csr["status"]["certificate"].as_str()?;
    Some(
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap(),
        )
        .unwrap(),
    )
}

/// Creating a CSR: the server writes who asked into the spec, whatever
/// the client claims, starts it without conditions, and keeps the spec
/// through later updates; it refuses a duration under 10 minutes and a
/// request that is not a signed PKCS#10 CSR, naming the field.
#[tokio::test]
async fn creation_records_the_requester_and_refuses_bad_requests() {
    let kube = KubeApiServer::start_tls().await.unwrap();
    kube.load_rbac(&[
        cluster_role(
            "csr-writer",
            json!([{"apiGroups": ["certificates.k8s.io"],
            "resources": ["certificatesigningrequests"], "verbs": ["create", "get", "update"]}]),
        ),
        bind(
            "csr-writer",
            json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "dev"}),
        ),
    ]);
    let token = kube.token_for_groups("alice", &["dev"]);
    let (pem, _) = request("alice", &[]);
    let mut sent = csr("mine", &pem, SIGNER, &["client auth"]);
    sent["spec"]["username"] = json!("system:admin");
    sent["spec"]["groups"] = json!(["system:masters"]);
    sent["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
    let (code, created) = post(&kube, Some(&token), &sent).await;
    assert_eq!(code, 201, "{created:#}");
    assert_eq!(created["spec"]["username"], "alice");
    assert_eq!(
        created["spec"]["groups"],
        json!(["dev", "system:authenticated"])
    );
    assert_eq!(created["status"], json!({}), "no pre-approved requests");

    // The spec cannot change after creation: an update keeps it.
    let mut changed = created.clone();
    changed["spec"]["signerName"] = json!("example.com/other");
    changed["metadata"]["labels"] = json!({"edited": "yes"});
    let path = format!("{CSRS}/mine");
    let (code, updated) = call(
        &kube,
        reqwest::Method::PUT,
        &path,
        Some(&token),
        Some(&changed),
    )
    .await;
    assert_eq!(code, 200, "{updated:#}");
    assert_eq!(
        (
            updated["spec"].clone(),
            &updated["metadata"]["labels"]["edited"]
        ),
        (created["spec"].clone(), &json!("yes"))
    );

    let mut short = csr("short", &pem, SIGNER, &["client auth"]);
    short["spec"]["expirationSeconds"] = json!(599);
    let (code, refused) = post(&kube, Some(&token), &short).await;
    assert_eq!(code, 422, "{refused:#}");
    assert_eq!(
        refused["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
            "message": "Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)"}])
    );

    // The same request with its signature changed: its own key does not
    // verify it (the last byte is the ECDSA signature's `s`).
    let der = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<String>();
    let mut forged = base64::engine::general_purpose::STANDARD
        .decode(der)
        .unwrap();
    *forged.last_mut().unwrap() ^= 1;
    let unsigned = format!(
        "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
        b64(&forged)
    );
    let (code, refused) = post(
        &kube,
        Some(&token),
        &csr("forged", &unsigned, SIGNER, &["client auth"]),
    )
    .await;
    assert_eq!(code, 422, "{refused:#}");
    assert_eq!(refused["details"]["causes"][0]["field"], "spec.request");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .ends_with("x509: ECDSA verification failure"),
        "{refused:#}"
    );

    let garbage =
        "-----BEGIN CERTIFICATE REQUEST-----\nTUlJQg==\n-----END CERTIFICATE REQUEST-----\n";
    let (code, refused) = post(
        &kube,
        Some(&token),
        &csr("garbage", garbage, SIGNER, &["client auth"]),
    )
    .await;
    assert_eq!(
        (code, &refused["details"]["causes"][0]["field"]),
        (422, &json!("spec.request")),
        "{refused:#}"
    );
    let (code, _) = get(&kube, "garbage").await;
    assert_eq!(code, 404, "nothing stored");
}

/// Approval is authorized twice, as on a real server: RBAC on
/// `certificatesigningrequests/approval`, then `approve` on the signer
/// (CertificateApproval). Once approved, the signer issues a certificate
/// (for the duration asked) that authenticates as its CN in its O's, with
/// that user's RBAC and nothing more.
#[tokio::test]
async fn an_approved_request_is_signed_and_its_certificate_authenticates() {
    let kube = KubeApiServer::start_tls().await.unwrap();
    kube.load_rbac(&[
        cluster_role(
            "csr-approval",
            json!([{"apiGroups": ["certificates.k8s.io"],
            "resources": ["certificatesigningrequests/approval"], "verbs": ["update"]}]),
        ),
        bind("csr-approval", user("bob")),
        cluster_role(
            "node-reader",
            json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]),
        ),
        bind(
            "node-reader",
            json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "team"}),
        ),
    ]);
    let bob = kube.token_for("bob");
    let (pem, key) = request("carol", &["team"]);
    let (code, _) = post(
        &kube,
        None,
        &csr("carol", &pem, SIGNER, &["digital signature", "client auth"]),
    )
    .await;
    assert_eq!(code, 201);

    let (code, refused) = decide(&kube, "carol", "Approved", Some(&bob)).await;
    assert_eq!(
        (code, refused["message"].as_str().unwrap()),
        (403, "certificatesigningrequests.certificates.k8s.io \"carol\" is forbidden: user not permitted to approve requests with signerName \"kubernetes.io/kube-apiserver-client\"")
    );
    assert_eq!(refused["reason"], "Forbidden");
    let (_, pending) = get(&kube, "carol").await;
    assert_eq!(
        pending["status"],
        json!({}),
        "the refused approval changed nothing"
    );

    kube.load_rbac(&[
        cluster_role(
            "approve-client-certs",
            json!([{"apiGroups": ["certificates.k8s.io"],
            "resources": ["signers"], "verbs": ["approve"], "resourceNames": [SIGNER]}]),
        ),
        bind("approve-client-certs", user("bob")),
    ]);
    let (code, approved) = decide(&kube, "carol", "Approved", Some(&bob)).await;
    assert_eq!(code, 200, "{approved:#}");
    assert_eq!(approved["status"]["conditions"][0]["type"], "Approved");
    assert!(approved["status"]["conditions"][0]["lastTransitionTime"].is_string());
    // The audit file shows the `approve` check CertificateApproval made,
    // so deploy-check counts that permission as used.
    let dir = tempfile::tempdir().unwrap();
    kube.write_audit(dir.path()).unwrap();
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let lines = std::fs::read_to_string(file.path()).unwrap();
    assert!(
        lines.lines().any(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            r["user"] == "bob"
                && r["verb"] == "approve"
                && r["resource"] == "signers"
                && r["name"] == SIGNER
        }),
        "no approve check in the audit file:\n{lines}"
    );

    let signed = when(&kube, "carol", |c| certificate(c).is_some()).await;
    let cert_pem = certificate(&signed).unwrap();
    let der = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
        .unwrap()
        .1
        .contents;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let left = cert.validity().not_after.timestamp() - chrono::Utc::now().timestamp();
    assert!(
        (3500..=3600).contains(&left),
        "valid for {left} s more, 3600 asked"
    );

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("carol");
    let identity = ClientCert {
        cert_pem,
        key_pem: key.serialize_pem(),
    };
    kube.write_kubeconfig_with_certificate(&kubeconfig, "carol", &identity)
        .unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.list(&Default::default()).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    match secrets.get_opt("s").await {
        Err(kube::Error::Api(e)) => assert_eq!(
            (e.code, e.message.as_str()),
            (403, "secrets \"s\" is forbidden: User \"carol\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\"")
        ),
        other => panic!("not refused: {other:?}"),
    }
    let users: Vec<Option<String>> = kube
        .audit()
        .into_iter()
        .rev()
        .take(2)
        .map(|r| r.user)
        .collect();
    assert_eq!(
        users,
        [Some("carol".to_string()), Some("carol".to_string())]
    );
}

/// The signer leaves alone what it must not sign: a Denied request, one of
/// another signer; one asking for usages a client certificate may not
/// have gets a Failed condition. A request approved after all of them is
/// signed, so the signer had its chance at each.
#[tokio::test]
async fn denied_failed_and_foreign_requests_get_no_certificate() {
    let kube = KubeApiServer::start_tls().await.unwrap();
    let create = |name: &'static str, signer: &'static str, usages: &'static [&'static str]| {
        let kube = &kube;
        async move {
            let (pem, _) = request(name, &[]);
            let (code, body) = post(kube, None, &csr(name, &pem, signer, usages)).await;
            assert_eq!(code, 201, "{body:#}");
        }
    };
    create("denied", SIGNER, &["client auth"]).await;
    create("foreign", "example.com/signer", &["client auth"]).await;
    create("server", SIGNER, &["client auth", "server auth"]).await;
    create("last", SIGNER, &["client auth"]).await;
    assert_eq!(decide(&kube, "denied", "Denied", None).await.0, 200);
    for name in ["foreign", "server"] {
        assert_eq!(decide(&kube, name, "Approved", None).await.0, 200);
    }
    // The last one by a merge patch of `/approval`.
    let response = client(&kube)
        .patch(format!("{}{CSRS}/last/approval", kube.url()))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"status": {"conditions": [{"type": "Approved", "status": "True"}]}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let failed = when(&kube, "server", |c| {
        c["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.len() == 2)
    })
    .await;
    assert_eq!(
        (
            &failed["status"]["conditions"][1]["type"],
            &failed["status"]["conditions"][1]["reason"],
            &failed["status"]["conditions"][1]["message"]
        ),
        (
            &json!("Failed"),
            &json!("SignerValidationFailure"),
            &json!("invalid usage for client certificate: server auth")
        )
    );
    assert_eq!(certificate(&failed), None);
    when(&kube, "last", |c| certificate(c).is_some()).await;
    for name in ["denied", "foreign"] {
        let (_, csr) = get(&kube, name).await;
        assert_eq!(certificate(&csr), None, "{name} was signed");
    }

    // A Denied request cannot be approved as well.
    let path = format!("{CSRS}/denied");
    let (_, mut both) = call(&kube, reqwest::Method::GET, &path, None, None).await;
    both["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "Approved", "status": "True"}));
    let (code, refused) = call(
        &kube,
        reqwest::Method::PUT,
        &format!("{path}/approval"),
        None,
        Some(&both),
    )
    .await;
    assert_eq!(code, 422, "{refused:#}");
    assert_eq!(
        refused["details"]["causes"][0],
        json!({"reason": "FieldValueInvalid", "field": "status.conditions[1].type",
            "message": "Invalid value: \"Approved\": Approved and Denied conditions are mutually exclusive"})
    );
}

/// `PATCH path` with `body` of `content_type`, as the holder of `token`.
async fn patch(
    kube: &KubeApiServer,
    path: &str,
    content_type: &str,
    token: Option<&str>,
    body: &Value,
) -> (u16, Value) {
    let mut request = client(kube)
        .patch(format!("{}{path}", kube.url()))
        .header("content-type", content_type)
        .body(body.to_string());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    answer(request).await
}

/// Every way of writing a CSR takes the registry's strategies
/// (pkg/registry/certificates/certificates/strategy.go: `spec` is kept
/// from the stored object on any update) and the CertificateApproval
/// plugin (plugin/pkg/admission/certificates/approval/admission.go):
/// server-side apply and merge patches change labels but never `spec`,
/// and an apply to `/approval` needs `approve` on the signer.
#[tokio::test]
async fn apply_and_patches_keep_the_spec_and_approval_needs_approve() {
    let kube = KubeApiServer::start_tls().await.unwrap();
    kube.load_rbac(&[
        cluster_role(
            "csr-writer",
            json!([{"apiGroups": ["certificates.k8s.io"],
                "resources": ["certificatesigningrequests", "certificatesigningrequests/approval"],
                "verbs": ["get", "patch", "update"]}]),
        ),
        bind("csr-writer", user("sid")),
    ]);
    let (pem, _) = request("someone", &[]);
    let (code, made) = post(&kube, None, &csr("c", &pem, SIGNER, &["client auth"])).await;
    assert_eq!(code, 201, "{made}");
    let path = format!("{CSRS}/c");
    let apply = "application/apply-patch+yaml";
    let mut config = csr("c", &pem, "example.com/other", &["server auth"]);
    config["metadata"]["labels"] = json!({"applied": "yes"});
    config["spec"]["username"] = json!("root");
    let (code, applied) = patch(
        &kube,
        &format!("{path}?fieldManager=test&force=true"),
        apply,
        None,
        &config,
    )
    .await;
    assert_eq!(code, 200, "{applied}");
    assert_eq!(applied["metadata"]["labels"]["applied"], "yes");
    assert_eq!(applied["spec"], made["spec"], "apply changed the spec");
    let (code, patched) = patch(
        &kube,
        &path,
        "application/merge-patch+json",
        None,
        &json!({"metadata": {"labels": {"merged": "yes"}}, "spec": {"signerName": "example.com/other"}}),
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["metadata"]["labels"]["merged"], "yes");
    assert_eq!(
        patched["spec"], made["spec"],
        "a merge patch changed the spec"
    );

    let token = kube.token_for("sid");
    let approve = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "c"},
        "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "Test", "message": "m"}]}});
    let (code, refused) = patch(
        &kube,
        &format!("{path}/approval?fieldManager=sid"),
        apply,
        Some(&token),
        &approve,
    )
    .await;
    assert_eq!(code, 403, "{refused}");
    assert_eq!(
        refused["message"],
        format!("certificatesigningrequests.certificates.k8s.io \"c\" is forbidden: user not permitted to approve requests with signerName \"{SIGNER}\"")
    );
    let (_, stored) = get(&kube, "c").await;
    assert_eq!(stored["status"].get("conditions"), None);
}

/// CertificateSubjectRestriction (kubernetes v1.31.0
/// `plugin/pkg/admission/certificates/subjectrestriction/admission.go`, on
/// by default): no one — a `system:masters` member included — may ask the
/// `kube-apiserver-client` signer for a certificate in `system:masters`;
/// the create is refused with `admission.NewForbidden`'s 403
/// (`staging/src/k8s.io/apiserver/pkg/admission/errors.go`) and nothing is
/// stored. Other signers, and other groups, are not its business.
#[tokio::test]
async fn a_certificate_for_system_masters_cannot_be_requested() {
    let kube = KubeApiServer::start_tls().await.unwrap();
    let (pem, _) = request("eve", &["dev", "system:masters"]);
    let (code, refused) = post(&kube, None, &csr("eve", &pem, SIGNER, &["client auth"])).await;
    assert_eq!(
        (code, refused),
        (
            403,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "certificatesigningrequests.certificates.k8s.io \"eve\" is forbidden: \
                    use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed",
                "reason": "Forbidden",
                "details": {"name": "eve", "group": "certificates.k8s.io",
                    "kind": "certificatesigningrequests"},
                "code": 403})
        )
    );
    assert_eq!(get(&kube, "eve").await.0, 404);

    let other = csr(
        "eve-elsewhere",
        &pem,
        "example.com/signer",
        &["client auth"],
    );
    assert_eq!(post(&kube, None, &other).await.0, 201);
    let (pem, _) = request("eve", &["dev"]);
    let dev = csr("eve-dev", &pem, SIGNER, &["client auth"]);
    assert_eq!(post(&kube, None, &dev).await.0, 201);
}
