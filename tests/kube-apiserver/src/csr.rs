//! CertificateSigningRequests (`certificates.k8s.io/v1`) as the API
//! server's certificates registry serves them: the three strategies of
//! `pkg/registry/certificates/certificates/strategy.go` (main, `status`,
//! `approval`), the two admission plugins that authorize beyond the
//! request's own RBAC check — CertificateApproval
//! (`plugin/pkg/admission/certificates/approval/admission.go`) and
//! CertificateSigning (`plugin/pkg/admission/certificates/signing/admission.go`)
//! — and CertificateSubjectRestriction
//! (`plugin/pkg/admission/certificates/subjectrestriction/admission.go`),
//! which refuses a client certificate for `system:masters` whoever asks.
//! Their validation is [`crate::validation`]'s; who signs is the
//! `csr_signer` module.
//!
//! Pure decisions: the store runs them on every CSR write, whichever way
//! it comes (create, update, patch, server-side apply; any subresource) —
//! the create strategy for a client's create, the update strategy of the
//! subresource written, and the three plugins after
//! OwnerReferencesPermissionEnforcement, as `AllOrderedPlugins`
//! (`pkg/kubeapiserver/options/plugins.go`) orders them: CertificateApproval,
//! CertificateSigning, ClusterTrustBundleAttest (no trust bundles are
//! served here), CertificateSubjectRestriction (the store's
//! `World::admit`).

use serde_json::{json, Value};

use crate::audit::ResourceAttributes;
use crate::builtin::{CERTIFICATES, CSRS};
use crate::crd::ResourceDef;
use crate::rbac::{self, Attributes, Decision, Policy, UserInfo};
use crate::status::ApiError;

/// The three write paths of a CSR: the object, `status` and `approval`.
pub use crate::target::Target as Subresource;

/// The signer of client certificates the API server accepts
/// (`certificatesv1.KubeAPIServerClientSignerName`).
pub const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

/// Whether `def` is the CSR resource.
pub fn is_csr(def: &ResourceDef) -> bool {
    !def.custom && def.group == CERTIFICATES && def.plural == CSRS
}

/// A condition timestamp, as metav1.Time serializes (seconds, UTC).
pub fn timestamp() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

// ---- strategies (pure) -----------------------------------------------------

/// `csrStrategy.PrepareForCreate`: the requesting user's name, UID, groups
/// and extra replace whatever the client sent (this server's users have
/// no UID or extra, so those are absent), and the status starts empty —
/// no pre-approved requests.
pub fn prepare_create(object: &mut Value, user: &UserInfo) {
    if !object["spec"].is_object() {
        object["spec"] = json!({});
    }
    if let Some(spec) = object["spec"].as_object_mut() {
        for field in ["uid", "extra"] {
            spec.remove(field);
        }
        spec.insert("username".into(), json!(user.name));
        spec.insert("groups".into(), json!(user.groups));
    }
    object["status"] = json!({});
}

/// The conditions of a CSR, owned.
fn conditions(object: &Value) -> Vec<Value> {
    object["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// `preserveConditionInstances`: when `new` has as many conditions of type
/// `kind` as `old`, they are `old`'s, in `new`'s places.
fn preserve_condition_instances(new: &mut [Value], old: &[Value], kind: &str) {
    let new_at: Vec<usize> = (0..new.len()).filter(|i| new[*i]["type"] == kind).collect();
    let old_of: Vec<&Value> = old.iter().filter(|c| c["type"] == kind).collect();
    if new_at.len() == old_of.len() {
        for (i, condition) in new_at.into_iter().zip(old_of) {
            new[i] = condition.clone();
        }
    }
}

/// `populateConditionTimestamps`: a missing `lastUpdateTime` is now; a
/// missing `lastTransitionTime` is that of the old condition of the same
/// type and status, else now.
fn populate_condition_timestamps(new: &mut [Value], old: &[Value], now: &str) {
    let unset = |v: &Value| v.as_str().is_none_or(str::is_empty);
    for condition in new.iter_mut() {
        if unset(&condition["lastUpdateTime"]) {
            condition["lastUpdateTime"] = json!(now);
        }
        if unset(&condition["lastTransitionTime"]) {
            let kept = old
                .iter()
                .find(|o| {
                    o["type"] == condition["type"]
                        && o["status"] == condition["status"]
                        && !unset(&o["lastTransitionTime"])
                })
                .map(|o| o["lastTransitionTime"].clone());
            condition["lastTransitionTime"] = kept.unwrap_or_else(|| json!(now));
        }
    }
}

/// `PrepareForUpdate` of the strategy of `subresource`: what is stored of
/// `sent` over `old`. Main: `spec` and `status` stay as stored (the store
/// keeps the status itself). Status: `spec` stays, Approved and Denied
/// conditions are preserved, timestamps populated. Approval: only the
/// conditions change (timestamps populated).
pub fn prepare_update(mut sent: Value, old: &Value, subresource: Subresource, now: &str) -> Value {
    sent["spec"] = old["spec"].clone();
    let old_conditions = conditions(old);
    match subresource {
        Subresource::Main | Subresource::Finalize => sent["status"] = old["status"].clone(),
        Subresource::Status => {
            let mut new = conditions(&sent);
            for kind in ["Approved", "Denied"] {
                preserve_condition_instances(&mut new, &old_conditions, kind);
            }
            populate_condition_timestamps(&mut new, &old_conditions, now);
            set_conditions(&mut sent, new);
        }
        Subresource::Approval => {
            let mut new = conditions(&sent);
            populate_condition_timestamps(&mut new, &old_conditions, now);
            sent["status"] = old["status"].clone();
            set_conditions(&mut sent, new);
        }
    }
    sent
}

/// `status.conditions = conditions` (absent when none, as `omitempty`).
fn set_conditions(object: &mut Value, conditions: Vec<Value>) {
    if !object["status"].is_object() {
        object["status"] = json!({});
    }
    if let Some(status) = object["status"].as_object_mut() {
        if conditions.is_empty() {
            status.remove("conditions");
        } else {
            status.insert("conditions".into(), Value::Array(conditions));
        }
    }
}

// ---- admission (pure) --------------------------------------------------------

/// `IsAuthorizedForSignerName` (plugin/pkg/admission/certificates/util.go):
/// `verb` on resource `signers` of `certificates.k8s.io` named the signer,
/// or `<domain>/*`.
pub fn authorized_for_signer(policy: &Policy, user: &UserInfo, verb: &str, signer: &str) -> bool {
    let domain = signer.split('/').next().unwrap_or_default();
    [signer.to_string(), format!("{domain}/*")]
        .into_iter()
        .any(|name| {
            let attributes = ResourceAttributes {
                verb: verb.to_string(),
                api_group: CERTIFICATES.to_string(),
                resource: "signers".to_string(),
                subresource: None,
                namespace: None,
                name: Some(name),
            };
            matches!(
                policy.authorize(user, &Attributes::Resource(&attributes)),
                Decision::Allow
            )
        })
}

/// The CertificateApproval and CertificateSigning plugins on an update of
/// CSR `name` by `user`: any `approval` write needs `approve` on the
/// signer; a `status` write changing the certificate or the conditions
/// needs `sign` on it. Both read the signer of the stored object. Their
/// refusal is `admission.NewForbidden`'s 403.
pub fn admit(
    policy: &Policy,
    user: &UserInfo,
    subresource: Subresource,
    name: &str,
    new: &Value,
    old: &Value,
) -> Result<(), ApiError> {
    let signer = old["spec"]["signerName"].as_str().unwrap_or_default();
    let verb = match subresource {
        Subresource::Main | Subresource::Finalize => return Ok(()),
        Subresource::Approval => "approve",
        Subresource::Status => {
            let unchanged = new["status"]["certificate"] == old["status"]["certificate"]
                && new["status"]["conditions"] == old["status"]["conditions"];
            if unchanged {
                return Ok(());
            }
            "sign"
        }
    };
    if authorized_for_signer(policy, user, verb, signer) {
        return Ok(());
    }
    Err(rbac::forbidden_status(
        CERTIFICATES,
        CSRS,
        name,
        &format!("user not permitted to {verb} requests with signerName {signer:?}"),
    ))
}

/// CertificateSubjectRestriction (`plugin/pkg/admission/certificates/subjectrestriction/admission.go`,
/// on by default): a create (its handler admits `admission.Create` only)
/// of a CSR — not of a subresource — for [`KUBE_APISERVER_CLIENT_SIGNER`]
/// whose request's subject has the organization `system:masters` is
/// refused, whoever asks (a certificate for that group would be allowed
/// everything), with `admission.NewForbidden`'s 403
/// (`staging/src/k8s.io/apiserver/pkg/admission/errors.go`: the resource,
/// the object's name, the plugin's error). `name` is the CSR's, generated
/// by then (`rest.BeforeCreate` runs before the validating plugins).
pub fn restrict_subject(
    subresource: Subresource,
    creating: bool,
    name: &str,
    object: &Value,
) -> Result<(), ApiError> {
    if !creating || subresource != Subresource::Main {
        return Ok(());
    }
    if object["spec"]["signerName"].as_str() != Some(KUBE_APISERVER_CLIENT_SIGNER) {
        return Ok(());
    }
    let forbidden = |why: String| rbac::forbidden_status(CERTIFICATES, CSRS, name, &why);
    // `spec.request` is `[]byte`, base64 in JSON; validation has read it
    // already, so a request that does not parse is refused there first.
    let pem = object["spec"]["request"]
        .as_str()
        .and_then(|r| base64::Engine::decode(&base64::engine::general_purpose::STANDARD, r).ok())
        .unwrap_or_default();
    let organizations = crate::x509::request_organizations(&pem)
        .map_err(|e| forbidden(format!("failed to parse CSR: {e}")))?;
    if organizations.iter().any(|o| o == rbac::MASTERS) {
        return Err(forbidden(format!(
            "use of {KUBE_APISERVER_CLIENT_SIGNER} signer with system:masters group is not allowed"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(kind: &str, at: &str) -> Value {
        json!({"type": kind, "status": "True", "lastUpdateTime": at, "lastTransitionTime": at})
    }

    #[test]
    fn creation_takes_the_requester_not_the_client() {
        let mut object = json!({"spec": {"username": "root", "groups": ["system:masters"], "uid": "1",
            "extra": {"a": ["b"]}, "request": "x"}, "status": {"conditions": [condition("Approved", "t")]}});
        let user = UserInfo::authenticated("alice", &["dev".to_string()]);
        prepare_create(&mut object, &user);
        assert_eq!(
            object,
            json!({"spec": {"username": "alice", "groups": ["dev", "system:authenticated"], "request": "x"},
                "status": {}})
        );
    }

    #[test]
    fn each_subresource_changes_only_its_part() {
        let old = json!({"spec": {"signerName": "a.io/b"}, "status": {"conditions": [condition("Approved", "t0")]}});
        let mut sent = json!({"metadata": {"labels": {"l": "v"}}, "spec": {"signerName": "x.io/y"},
            "status": {"certificate": "Y2VydA==", "conditions": [
                {"type": "Approved", "status": "True", "reason": "changed"},
                {"type": "Failed", "status": "True"}]}});
        let main = prepare_update(sent.clone(), &old, Subresource::Main, "t1");
        assert_eq!(
            (&main["spec"], &main["status"]),
            (&old["spec"], &old["status"])
        );
        assert_eq!(main["metadata"]["labels"]["l"], "v");
        let status = prepare_update(sent.clone(), &old, Subresource::Status, "t1");
        assert_eq!(status["spec"], old["spec"]);
        assert_eq!(status["status"]["certificate"], "Y2VydA==");
        // The Approved condition is the stored one; the new Failed one is
        // stamped now.
        assert_eq!(
            status["status"]["conditions"],
            json!([condition("Approved", "t0"), condition("Failed", "t1")])
        );
        sent["status"]["conditions"] =
            json!([condition("Approved", "t0"), {"type": "Denied", "status": "True"}]);
        let approval = prepare_update(sent, &old, Subresource::Approval, "t1");
        assert_eq!(approval["status"]["certificate"], Value::Null);
        assert_eq!(
            approval["status"]["conditions"],
            json!([condition("Approved", "t0"), condition("Denied", "t1")])
        );
    }

    /// subjectrestriction/admission.go: only a create of the CSR itself,
    /// only for the kube-apiserver-client signer, only `O=system:masters`
    /// (among others, or alone); the refusal is `NewForbidden`'s
    /// (errors.go) with the plugin's message.
    #[test]
    fn a_client_certificate_for_system_masters_is_never_requested() {
        let csr = |signer: &str, groups: &[&str]| {
            let pem = crate::x509::test_request_in("eve", groups);
            json!({"spec": {"signerName": signer, "request": base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD, pem)}})
        };
        let masters = csr(KUBE_APISERVER_CLIENT_SIGNER, &["dev", "system:masters"]);
        let refused = restrict_subject(Subresource::Main, true, "eve", &masters).unwrap_err();
        assert_eq!(
            refused.to_status(),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "certificatesigningrequests.certificates.k8s.io \"eve\" is forbidden: \
                    use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed",
                "reason": "Forbidden",
                "details": {"name": "eve", "group": "certificates.k8s.io", "kind": "certificatesigningrequests"},
                "code": 403})
        );
        // Not on an update or a subresource (the handler is create-only),
        // nor for another signer or other groups.
        assert!(restrict_subject(Subresource::Main, false, "eve", &masters).is_ok());
        assert!(restrict_subject(Subresource::Approval, true, "eve", &masters).is_ok());
        assert!(restrict_subject(Subresource::Status, true, "eve", &masters).is_ok());
        let kubelet = csr(
            "kubernetes.io/kube-apiserver-client-kubelet",
            &["system:masters"],
        );
        assert!(restrict_subject(Subresource::Main, true, "eve", &kubelet).is_ok());
        let dev = csr(KUBE_APISERVER_CLIENT_SIGNER, &["dev", "system:mastersx"]);
        assert!(restrict_subject(Subresource::Main, true, "eve", &dev).is_ok());
    }

    #[test]
    fn approval_needs_approve_and_signing_needs_sign_on_the_signer() {
        let role = |verb: &str, name: &str| {
            json!({"metadata": {"name": format!("{verb}-{}", name.replace('/', "-"))}, "rules": [{
                "apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "verbs": [verb],
                "resourceNames": [name]}]})
        };
        let binding = |role: &Value, user: &str| {
            json!({"metadata": {"name": role["metadata"]["name"]}, "subjects": [{"kind": "User", "name": user}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]}})
        };
        let approver = role("approve", "kubernetes.io/*");
        let signer = role("sign", "example.com/s");
        let policy = Policy::new(&rbac::Stored {
            roles: vec![],
            cluster_roles: vec![approver.clone(), signer.clone()],
            role_bindings: vec![],
            cluster_role_bindings: vec![binding(&approver, "ann"), binding(&signer, "sid")],
        });
        let user = |name: &str| UserInfo::authenticated(name, &[]);
        let old = json!({"spec": {"signerName": "kubernetes.io/kube-apiserver-client"}});
        let approved = json!({"status": {"conditions": [condition("Approved", "t")]}});
        assert!(admit(
            &policy,
            &user("ann"),
            Subresource::Approval,
            "c",
            &approved,
            &old
        )
        .is_ok());
        let refused = admit(
            &policy,
            &user("sid"),
            Subresource::Approval,
            "c",
            &approved,
            &old,
        )
        .unwrap_err();
        assert_eq!(refused.code, 403);
        assert_eq!(
            refused.message,
            "certificatesigningrequests.certificates.k8s.io \"c\" is forbidden: user not permitted to approve requests with signerName \"kubernetes.io/kube-apiserver-client\""
        );
        let other = json!({"spec": {"signerName": "example.com/s"}});
        let signed = json!({"status": {"certificate": "Y2VydA=="}});
        assert!(admit(
            &policy,
            &user("sid"),
            Subresource::Status,
            "c",
            &signed,
            &other
        )
        .is_ok());
        assert!(admit(
            &policy,
            &user("ann"),
            Subresource::Status,
            "c",
            &signed,
            &other
        )
        .is_err());
        // A status write that changes neither needs nothing.
        assert!(admit(
            &policy,
            &user("ann"),
            Subresource::Status,
            "c",
            &other,
            &other
        )
        .is_ok());
    }
}
