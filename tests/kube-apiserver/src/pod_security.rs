//! Pod Security Admission, the `PodSecurity` validating admission plugin
//! (`plugin/pkg/admission/security/podsecurity/admission.go`, delegating
//! to `staging/src/k8s.io/pod-security-admission/`), written from those
//! sources:
//! - the namespace labels `pod-security.kubernetes.io/{enforce,audit,warn}`
//!   and their `-version`s pick the policy, the server's defaults filling
//!   what a namespace leaves out (`api/helpers.go` `PolicyToEvaluate`);
//!   an unparsable level is `restricted` for enforce and `privileged` for
//!   audit and warn, an unparsable version `latest`;
//! - a namespace created with unparsable labels is refused, one updated
//!   to new unparsable ones too (`admission/admission.go` `ValidateNamespace`);
//! - pods, on create and on an update that changes what the policy reads
//!   (`isSignificantPodUpdate`), are refused when they break the enforce
//!   level (`pods "x" is forbidden: violates PodSecurity "baseline:latest":
//!   <reason> (<detail>), …`), and otherwise warned about (`Warning`
//!   headers, `would violate PodSecurity …`) when they break the warn
//!   level (`EvaluatePod`); their `status`, `binding`, `eviction`, … are
//!   not checked (`ignoredPodSubresources`);
//! - workloads with a pod template (Deployments, ReplicaSets,
//!   StatefulSets, DaemonSets, Jobs, CronJobs, ReplicationControllers,
//!   PodTemplates: `defaultPodSpecResources`) are never refused, only
//!   warned about (`ValidatePodController` evaluates with `enforce=false`):
//!   their pods are refused when the controller makes them.
//!
//! The `baseline` checks, in the order the registry runs them
//! (`policy/registry.go` `EvaluatePod`: the non-overlapping baseline
//! checks, then the overlapping ones, each list in `init` order, that is
//! by file name): `appArmorProfile`, `hostNamespaces`, `hostPorts`,
//! `privileged`, `procMount`, `seLinuxOptions`, `sysctls`, then
//! `capabilities_baseline`, `hostPathVolumes`, `seccompProfile_baseline`.
//!
//! Not modelled: the `restricted` level (a policy that would evaluate it
//! is answered 500, loudly, rather than passed), Windows' `hostProcess`
//! and the 1.34 `hostProbesAndhostLifecycle` checks, the checks of older
//! policy versions (a pinned `-version` is parsed and named in messages,
//! the checks are `latest`'s), exemptions (the real default has none),
//! audit annotations, and the warnings for existing pods when a
//! namespace's enforce level is raised.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::admission::Attributes;
use crate::status::{ApiError, Cause};

/// `api/constants.go`: the namespace labels.
pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
pub const AUDIT_LABEL: &str = "pod-security.kubernetes.io/audit";
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
pub const WARN_LABEL: &str = "pod-security.kubernetes.io/warn";
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// A Pod Security Standards level (`api/constants.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    /// `api/helpers.go` `ParseLevel`.
    pub fn parse(level: &str) -> Option<Level> {
        match level {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }
}

impl std::str::FromStr for Level {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Level::parse(s).ok_or_else(|| "must be one of privileged, baseline, restricted".into())
    }
}

/// A policy version: `latest` or `v1.<minor>` (`api/helpers.go` `Version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    Latest,
    Minor(u32),
}

impl Version {
    /// `ParseVersion`: `latest`, or `v1.` and a minor without a leading
    /// zero (`^v1\.([0-9]|[1-9][0-9]*)$`).
    fn parse(version: &str) -> Option<Version> {
        if version == "latest" {
            return Some(Version::Latest);
        }
        let minor = version.strip_prefix("v1.")?;
        let digits = !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit());
        if !digits || (minor.len() > 1 && minor.starts_with('0')) {
            return None;
        }
        minor.parse().ok().map(Version::Minor)
    }
}

/// A level at a version, named `<level>:<version>` (`LevelVersion.String`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl std::fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.version {
            Version::Latest => write!(f, "{}:latest", self.level.as_str()),
            Version::Minor(m) => write!(f, "{}:v1.{m}", self.level.as_str()),
        }
    }
}

/// The three modes' levels (`api.Policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Policy {
    /// Every mode at `level:latest`: what an AdmissionConfiguration whose
    /// `defaults` name one level for all three gives.
    pub fn all(level: Level) -> Self {
        let lv = LevelVersion {
            level,
            version: Version::Latest,
        };
        Policy {
            enforce: lv,
            audit: lv,
            warn: lv,
        }
    }
}

/// `api/helpers.go` `PolicyToEvaluate`: the namespace's policy, and the
/// labels that could not be parsed (as `metadata.labels[<key>]` causes).
pub fn policy_to_evaluate(labels: &Value, defaults: Policy) -> (Policy, Vec<Cause>) {
    let mut policy = defaults;
    let mut causes = Vec::new();
    let Some(labels) = labels.as_object() else {
        return (policy, causes);
    };
    let mut cause = |key: &str, value: &str, why: &str| {
        causes.push(Cause::new(
            "FieldValueInvalid",
            format!("metadata.labels[{key}]"),
            format!("Invalid value: {value:?}: {why}"),
        ))
    };
    const LEVEL: &str = "must be one of privileged, baseline, restricted";
    const VERSION: &str = "must be \"latest\" or \"v1.x\"";
    let modes: [(&str, &str, &mut LevelVersion, Level); 3] = [
        // An unparsable enforce level is the strictest; audit and warn
        // fail open (helpers.go, `PolicyToEvaluate`).
        (
            ENFORCE_LABEL,
            ENFORCE_VERSION_LABEL,
            &mut policy.enforce,
            Level::Restricted,
        ),
        (
            AUDIT_LABEL,
            AUDIT_VERSION_LABEL,
            &mut policy.audit,
            Level::Privileged,
        ),
        (
            WARN_LABEL,
            WARN_VERSION_LABEL,
            &mut policy.warn,
            Level::Privileged,
        ),
    ];
    for (level_key, version_key, lv, fallback) in modes {
        if let Some(value) = labels.get(level_key) {
            let value = value.as_str().unwrap_or_default();
            lv.level = Level::parse(value).unwrap_or_else(|| {
                cause(level_key, value, LEVEL);
                fallback
            });
        }
        if let Some(value) = labels.get(version_key) {
            let value = value.as_str().unwrap_or_default();
            lv.version = Version::parse(value).unwrap_or_else(|| {
                cause(version_key, value, VERSION);
                Version::Latest
            });
        }
    }
    (policy, causes)
}

/// One check's refusal (`policy.CheckResult` with `Allowed: false`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden {
    pub reason: String,
    pub detail: String,
}

impl Forbidden {
    fn new(reason: impl Into<String>, detail: impl Into<String>) -> Option<Self> {
        Some(Forbidden {
            reason: reason.into(),
            detail: detail.into(),
        })
    }
}

/// `AggregateCheckResult.ForbiddenDetail` (`policy/checks.go`): each
/// reason with its detail in parentheses, joined by `, `.
pub fn forbidden_detail(results: &[Forbidden]) -> String {
    results
        .iter()
        .map(|r| {
            if r.detail.is_empty() {
                r.reason.clone()
            } else {
                format!("{} ({})", r.reason, r.detail)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `policy/helpers.go` `joinQuote`.
fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let inner: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("\"{}\"", inner.join("\", \""))
}

/// `policy/helpers.go` `pluralize`.
fn pluralize<'a>(singular: &'a str, plural: &'a str, count: usize) -> &'a str {
    if count == 1 {
        singular
    } else {
        plural
    }
}

/// `policy/visitor.go` `visitContainers`: init containers, containers,
/// then ephemeral containers.
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |k| spec[k].as_array().into_iter().flatten())
}

fn name_of(container: &Value) -> String {
    container["name"].as_str().unwrap_or_default().to_string()
}

/// A sorted set's `List()`, as Go's `sets.String` gives it.
fn sorted(set: BTreeSet<String>) -> Vec<String> {
    set.into_iter().collect()
}

/// `check_appArmorProfile.go` `appArmorProfileV1Dot0`: the beta
/// annotations may name `runtime/default`, `localhost/*` or nothing.
fn app_armor_profile(meta: &Value, _spec: &Value) -> Option<Forbidden> {
    const PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
    let mut bad: Vec<String> = meta["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(PREFIX))
        .filter_map(|(k, v)| {
            let v = v.as_str().unwrap_or_default();
            let allowed = v.is_empty() || v == "runtime/default" || v.starts_with("localhost/");
            (!allowed).then(|| format!("{k}={v:?}"))
        })
        .collect();
    if bad.is_empty() {
        return None;
    }
    bad.sort();
    Forbidden::new(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            bad.len(),
        ),
        bad.join(", "),
    )
}

/// `check_hostNamespaces.go` `hostNamespaces_1_0`.
fn host_namespaces(_meta: &Value, spec: &Value) -> Option<Forbidden> {
    let set: BTreeSet<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|k| spec[*k] == Value::Bool(true))
        .map(str::to_string)
        .collect();
    if set.is_empty() {
        return None;
    }
    Forbidden::new("host namespaces", sorted(set).join(", "))
}

/// `check_hostPorts.go` `hostPorts_1_0`.
fn host_ports(_meta: &Value, spec: &Value) -> Option<Forbidden> {
    let mut bad = Vec::new();
    let mut ports = BTreeSet::new();
    for c in containers(spec) {
        let mut valid = true;
        for port in c["ports"].as_array().into_iter().flatten() {
            let host = port["hostPort"].as_i64().unwrap_or(0);
            if host != 0 {
                valid = false;
                ports.insert(host.to_string());
            }
        }
        if !valid {
            bad.push(name_of(c));
        }
    }
    if bad.is_empty() {
        return None;
    }
    let ports = sorted(ports);
    Forbidden::new(
        "hostPort",
        format!(
            "{} {} {} {} {}",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

/// `check_privileged.go` `privileged_1_0`.
fn privileged(_meta: &Value, spec: &Value) -> Option<Forbidden> {
    let bad: Vec<String> = containers(spec)
        .filter(|c| c["securityContext"]["privileged"] == Value::Bool(true))
        .map(name_of)
        .collect();
    if bad.is_empty() {
        return None;
    }
    Forbidden::new(
        "privileged",
        format!(
            "{} {} must not set securityContext.privileged=true",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad)
        ),
    )
}

/// `check_procMount.go`: unset or `Default` only.
fn proc_mount(_meta: &Value, spec: &Value) -> Option<Forbidden> {
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for c in containers(spec) {
        if let Some(t) = c["securityContext"]["procMount"].as_str() {
            if t != "Default" {
                bad.push(name_of(c));
                types.insert(t.to_string());
            }
        }
    }
    if bad.is_empty() {
        return None;
    }
    Forbidden::new(
        "procMount",
        format!(
            "{} {} must not set securityContext.procMount to {}",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad),
            join_quote(&sorted(types))
        ),
    )
}

/// `check_seLinuxOptions.go` `seLinuxOptions_1_0`.
fn se_linux_options(_meta: &Value, spec: &Value) -> Option<Forbidden> {
    const ALLOWED: [&str; 4] = ["", "container_t", "container_init_t", "container_kvm_t"];
    let mut bad_types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut valid = |opts: &Value| {
        let mut ok = true;
        let t = opts["type"].as_str().unwrap_or_default();
        if !ALLOWED.contains(&t) {
            ok = false;
            bad_types.insert(t.to_string());
        }
        if !opts["user"].as_str().unwrap_or_default().is_empty() {
            ok = false;
            set_user = true;
        }
        if !opts["role"].as_str().unwrap_or_default().is_empty() {
            ok = false;
            set_role = true;
        }
        ok
    };
    let mut setters = Vec::new();
    let pod = &spec["securityContext"]["seLinuxOptions"];
    if pod.is_object() && !valid(pod) {
        setters.push("pod".to_string());
    }
    let mut bad = Vec::new();
    for c in containers(spec) {
        let opts = &c["securityContext"]["seLinuxOptions"];
        if opts.is_object() && !valid(opts) {
            bad.push(name_of(c));
        }
    }
    if !bad.is_empty() {
        setters.push(format!(
            "{} {}",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad)
        ));
    }
    if setters.is_empty() {
        return None;
    }
    // As the source has it: user and role are named only beside a bad type.
    let mut data = Vec::new();
    if !bad_types.is_empty() {
        let types = sorted(bad_types);
        data.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quote(&types)
        ));
        if set_user {
            data.push("user may not be set".to_string());
        }
        if set_role {
            data.push("role may not be set".to_string());
        }
    }
    Forbidden::new(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters.join(" and "),
            data.join("; ")
        ),
    )
}

/// `check_sysctls.go` `sysctls_1_0`: the safe set of 1.0.
fn sysctls(_meta: &Value, spec: &Value) -> Option<Forbidden> {
    const ALLOWED: [&str; 5] = [
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    ];
    let bad: Vec<&str> = spec["securityContext"]["sysctls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str())
        .filter(|n| !ALLOWED.contains(n))
        .collect();
    if bad.is_empty() {
        return None;
    }
    Forbidden::new("forbidden sysctls", bad.join(", "))
}

/// `check_capabilities_baseline.go` `capabilitiesBaseline_1_0`: only the
/// container runtime's default set may be added (not `NET_RAW`, not
/// `NET_ADMIN`).
fn capabilities_baseline(_meta: &Value, spec: &Value) -> Option<Forbidden> {
    const ALLOWED: [&str; 13] = [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ];
    let mut bad = Vec::new();
    let mut caps = BTreeSet::new();
    for c in containers(spec) {
        let mut valid = true;
        for cap in c["securityContext"]["capabilities"]["add"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let cap = cap.as_str().unwrap_or_default();
            if !ALLOWED.contains(&cap) {
                valid = false;
                caps.insert(cap.to_string());
            }
        }
        if !valid {
            bad.push(name_of(c));
        }
    }
    if bad.is_empty() {
        return None;
    }
    Forbidden::new(
        "non-default capabilities",
        format!(
            "{} {} must not include {} in securityContext.capabilities.add",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad),
            join_quote(&sorted(caps))
        ),
    )
}

/// `check_hostPathVolumes.go` `hostPathVolumes_1_0`.
fn host_path_volumes(_meta: &Value, spec: &Value) -> Option<Forbidden> {
    let bad: Vec<String> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["hostPath"].is_object())
        .map(name_of)
        .collect();
    if bad.is_empty() {
        return None;
    }
    Forbidden::new(
        "hostPath volumes",
        format!(
            "{} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad)
        ),
    )
}

/// `check_seccompProfile_baseline.go` `seccompProfileBaseline_1_19`: a
/// profile set must be `RuntimeDefault` or `Localhost`.
fn seccomp_profile_baseline(_meta: &Value, spec: &Value) -> Option<Forbidden> {
    let valid = |t: &str| t == "Localhost" || t == "RuntimeDefault";
    let mut setters = Vec::new();
    let mut values = BTreeSet::new();
    let pod = &spec["securityContext"]["seccompProfile"];
    if pod.is_object() {
        let t = pod["type"].as_str().unwrap_or_default();
        if !valid(t) {
            setters.push("pod".to_string());
            values.insert(t.to_string());
        }
    }
    let mut bad = Vec::new();
    for c in containers(spec) {
        let profile = &c["securityContext"]["seccompProfile"];
        if profile.is_object() {
            let t = profile["type"].as_str().unwrap_or_default();
            if !valid(t) {
                bad.push(name_of(c));
                values.insert(t.to_string());
            }
        }
    }
    if !bad.is_empty() {
        setters.push(format!(
            "{} {}",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad)
        ));
    }
    if setters.is_empty() {
        return None;
    }
    Forbidden::new(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            setters.join(" and "),
            join_quote(&sorted(values))
        ),
    )
}

type Check = fn(&Value, &Value) -> Option<Forbidden>;

/// The baseline checks in the registry's order (see the module's notes).
const BASELINE: [Check; 10] = [
    app_armor_profile,
    host_namespaces,
    host_ports,
    privileged,
    proc_mount,
    se_linux_options,
    sysctls,
    capabilities_baseline,
    host_path_volumes,
    seccomp_profile_baseline,
];

/// What a level finds wrong with a pod (`checkRegistry.EvaluatePod`,
/// keeping the refusals): nothing at `privileged`.
pub fn evaluate(lv: LevelVersion, meta: &Value, spec: &Value) -> Result<Vec<Forbidden>, String> {
    match lv.level {
        Level::Privileged => Ok(Vec::new()),
        Level::Baseline => Ok(BASELINE.iter().filter_map(|c| c(meta, spec)).collect()),
        Level::Restricted => Err(format!(
            "the test server does not model PodSecurity level {lv}"
        )),
    }
}

/// The pod template of a workload `defaultPodSpecResources` names, by
/// group and plural (`DefaultPodSpecExtractor.ExtractPodSpec`): its
/// metadata and spec.
fn template<'a>(group: &str, plural: &str, object: &'a Value) -> Option<&'a Value> {
    match (group, plural) {
        ("", "podtemplates") => Some(&object["template"]),
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => Some(&object["spec"]["template"]),
        ("batch", "cronjobs") => Some(&object["spec"]["jobTemplate"]["spec"]["template"]),
        _ => None,
    }
}

/// `ignoredPodSubresources` (`admission/admission.go`).
const IGNORED_POD_SUBRESOURCES: [&str; 8] = [
    "exec",
    "attach",
    "binding",
    "eviction",
    "log",
    "portforward",
    "proxy",
    "status",
];

/// `isSignificantPodUpdate`: whether anything the policy reads can have
/// changed (the rest of a pod's spec is immutable): the seccomp
/// annotations, the number of containers, an image, an ephemeral
/// container added.
fn significant_pod_update(pod: &Value, old: &Value) -> bool {
    const POD_SECCOMP: &str = "seccomp.security.alpha.kubernetes.io/pod";
    const CONTAINER_SECCOMP: &str = "container.seccomp.security.alpha.kubernetes.io/";
    let annotation = |p: &Value, k: &str| p["metadata"]["annotations"][k].clone();
    if annotation(pod, POD_SECCOMP) != annotation(old, POD_SECCOMP) {
        return true;
    }
    let container_changed = |c: &Value, o: &Value| {
        let key = format!("{CONTAINER_SECCOMP}{}", name_of(c));
        c["image"] != o["image"] || annotation(pod, &key) != annotation(old, &key)
    };
    for kind in ["containers", "initContainers"] {
        let (new, was) = (
            pod["spec"][kind].as_array().cloned().unwrap_or_default(),
            old["spec"][kind].as_array().cloned().unwrap_or_default(),
        );
        if new.len() != was.len() || new.iter().zip(&was).any(|(c, o)| container_changed(c, o)) {
            return true;
        }
    }
    let was = old["spec"]["ephemeralContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    pod["spec"]["ephemeralContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| match was.iter().find(|o| o["name"] == c["name"]) {
            None => true,
            Some(o) => container_changed(c, o),
        })
}

/// The plugin's decision on one write (`Admission.Validate`): `Err` to
/// refuse it, else the warnings to answer with. `namespace` is the
/// stored namespace the object is in (`Null` for a cluster-scoped one).
pub fn validate(
    attributes: &Attributes<'_>,
    namespace: &Value,
    defaults: Policy,
) -> Result<Vec<String>, ApiError> {
    let def = attributes.def;
    if def.custom || !matches!(attributes.operation, "CREATE" | "UPDATE") {
        return Ok(Vec::new());
    }
    let object = attributes.object;
    if def.group.is_empty() && def.plural == "namespaces" {
        return validate_namespace(attributes, defaults).map(|()| Vec::new());
    }
    let is_pod = def.group.is_empty() && def.plural == "pods";
    let (meta, spec) = if is_pod {
        if IGNORED_POD_SUBRESOURCES.contains(&attributes.subresource) {
            return Ok(Vec::new());
        }
        if let Some(old) = attributes.old_object {
            if !significant_pod_update(object, old) {
                return Ok(Vec::new());
            }
        }
        (&object["metadata"], &object["spec"])
    } else {
        let Some(template) = template(&def.group, &def.plural, object) else {
            return Ok(Vec::new());
        };
        if !attributes.subresource.is_empty() || template.is_null() {
            return Ok(Vec::new());
        }
        (&template["metadata"], &template["spec"])
    };
    let (policy, _) = policy_to_evaluate(&namespace["metadata"]["labels"], defaults);
    let internal = |why: String| ApiError::new(500, "InternalError", why);
    // Enforce only for pods (`ValidatePodController` passes enforce=false).
    if is_pod {
        let refused = evaluate(policy.enforce, meta, spec).map_err(internal)?;
        if !refused.is_empty() {
            // `forbiddenResponse(attrs, …)`: `apierrors.NewForbidden` on the
            // request's resource and name.
            return Err(ApiError::forbidden(
                def,
                attributes.name,
                &format!(
                    "violates PodSecurity {:?}: {}",
                    policy.enforce.to_string(),
                    forbidden_detail(&refused)
                ),
            ));
        }
    }
    let warned = evaluate(policy.warn, meta, spec).map_err(internal)?;
    if warned.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![format!(
        "would violate PodSecurity {:?}: {}",
        policy.warn.to_string(),
        forbidden_detail(&warned)
    )])
}

/// `ValidateNamespace`: labels must parse on create, and on an update
/// that changes what fails to parse.
fn validate_namespace(attributes: &Attributes<'_>, defaults: Policy) -> Result<(), ApiError> {
    if !attributes.subresource.is_empty() {
        return Ok(());
    }
    let labels = |o: &Value| o["metadata"]["labels"].clone();
    let (_, causes) = policy_to_evaluate(&labels(attributes.object), defaults);
    if causes.is_empty() {
        return Ok(());
    }
    if let Some(old) = attributes.old_object {
        let (_, old_causes) = policy_to_evaluate(&labels(old), defaults);
        if old_causes == causes {
            return Ok(());
        }
    }
    Err(ApiError::invalid(attributes.def, attributes.name, causes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_parse_as_the_regexp_has_it() {
        assert_eq!(Version::parse("latest"), Some(Version::Latest));
        assert_eq!(Version::parse("v1.31"), Some(Version::Minor(31)));
        assert_eq!(Version::parse("v1.0"), Some(Version::Minor(0)));
        for bad in ["v1.01", "v2.1", "1.31", "v1.", "v1.x"] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn unparsable_labels_are_strict_for_enforce_and_open_for_warn() {
        let labels = json!({ENFORCE_LABEL: "nope", WARN_LABEL: "nope"});
        let (policy, causes) = policy_to_evaluate(&labels, Policy::all(Level::Baseline));
        assert_eq!(policy.enforce.level, Level::Restricted);
        assert_eq!(policy.warn.level, Level::Privileged);
        assert_eq!(policy.audit.level, Level::Baseline);
        assert_eq!(causes.len(), 2);
        assert_eq!(
            causes[0].text(),
            "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"nope\": must be one of privileged, baseline, restricted"
        );
    }

    #[test]
    fn details_join_as_the_aggregate_does() {
        let spec = json!({"hostNetwork": true, "hostPID": true, "containers": [
            {"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}]},
            {"name": "b", "securityContext": {"capabilities": {"add": ["NET_RAW", "CHOWN"]}}}]});
        let lv = LevelVersion {
            level: Level::Baseline,
            version: Version::Latest,
        };
        let found = evaluate(lv, &json!({}), &spec).expect("baseline is modelled");
        assert_eq!(
            forbidden_detail(&found),
            "host namespaces (hostNetwork, hostPID), hostPort (container \"a\" uses hostPort 8080), \
             non-default capabilities (container \"b\" must not include \"NET_RAW\" in securityContext.capabilities.add)"
        );
    }
}
