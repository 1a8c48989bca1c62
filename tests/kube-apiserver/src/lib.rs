//! A Kubernetes API server for tests, in process, faithful where
//! controllers depend on it: it refuses what a real API server refuses.
//!
//! - Resources: built-ins ([`builtin`]) and any group/version/resource
//!   registered from a `CustomResourceDefinition` manifest ([`crd`]),
//!   namespaced or cluster-scoped; the Liqo v1.2.0 CRDs (vendored under
//!   `crds/`) are loaded by [`KubeApiServer::start`]. Discovery
//!   ([`discovery`]) serves them to kube-rs and client-go.
//! - Verbs: get, list, watch ([`list`], [`watch`], [`selector`]), create,
//!   update, delete, deletecollection, and patch ([`patch`]): merge, JSON,
//!   strategic (built-ins only) and server-side apply; unknown and
//!   duplicate fields as `fieldValidation` asks ([`field_validation`]);
//!   `pods/binding` ([`binding`]).
//! - Semantics ([`store`]): `resourceVersion` optimistic concurrency,
//!   `generation`, the status subresource, finalizers and
//!   `deletionTimestamp`, `generateName`, namespaces that must exist, and
//!   `openAPIV3Schema` pruning, defaulting and validation ([`schema`]),
//!   with `metav1.Status` errors ([`status`]).
//! - Lifecycle as a real server and kube-controller-manager: DELETE with
//!   propagation policies and preconditions, bumping a set `generation`
//!   when it marks an object ([`deletion`]); the garbage collector
//!   ([`gc`]) and namespace termination ([`namespace_lifecycle`],
//!   [`namespace_controller`]), the controllers running in the background
//!   after each change ([`controllers`]).
//! - Workloads as kube-controller-manager runs them: apps/v1 Deployments
//!   ([`deployment`]: one ReplicaSet per pod template, no rollout pacing)
//!   and ReplicaSets ([`replicaset`]: pods created through admission,
//!   surplus ones deleted in `ActivePods` order, adoption by selector),
//!   policy/v1 PodDisruptionBudgets kept by the disruption controller
//!   ([`disruption`]), and the `pods/eviction` subresource ([`eviction`]).
//!   They are always on: a test creates a Deployment as a client does and
//!   its pods appear.
//! - networking.k8s.io/v1 NetworkPolicies ([`network_policy`]), defaulted
//!   and validated as the real registry does it.
//! - discovery.k8s.io/v1 EndpointSlices ([`endpoint_slice`]), defaulted and
//!   validated as the real registry does it, and kept for every Service
//!   with a selector by kube-controller-manager's EndpointSlice controller
//!   ([`endpointslice_controller`]).
//! - `resourceVersion` as a real server reads it: lists at the most
//!   recent state, at least as fresh as N, or exactly at N (410 once
//!   compacted); reads at an N not reached yet answer the watch cache's
//!   504 "Too large resource version" ([`list`], [`watch`]). BOOKMARKs
//!   are periodic (60 s unless [`KubeApiServer::set_bookmark_interval`])
//!   and only for watches that ask.
//! - Transport ([`listen`], [`tls`]): plain HTTP ([`KubeApiServer::start`])
//!   or HTTPS from a CA made per server ([`KubeApiServer::start_tls`]),
//!   with bearer tokens and client certificates (user = CN) as
//!   credentials.
//! - For tests: direct helpers on [`KubeApiServer`], injected faults
//!   ([`faults`]: any status, 429/503 with `Retry-After`, connections
//!   closed mid-response), held/ended/cut watches and compaction (410
//!   Gone), and a request log in RBAC terms ([`audit`]), each request with
//!   its user: [`KubeApiServer::write_kubeconfig_as`] gives a binary a
//!   bearer token naming a user (a ServiceAccount, say),
//!   [`KubeApiServer::write_kubeconfig_with_client_cert`] a client
//!   certificate, unknown tokens get 401, and with `KUBE_TEST_AUDIT_DIR`
//!   set the log is written there as JSON lines when the server is
//!   dropped, for `deploy-check` to hold against the RBAC shipped in
//!   `deploy/kubernetes/`.
//!
//! - Authorization as a real server with `--authorization-mode=RBAC`
//!   ([`rbac`], on by default, [`KubeApiServer::set_rbac`]): every
//!   request by a user with a token or a client certificate (CN = user,
//!   O = groups; ServiceAccount users get `system:serviceaccounts[:<ns>]`,
//!   everyone `system:authenticated`) is allowed only by the Roles,
//!   ClusterRoles and bindings stored in the server
//!   ([`KubeApiServer::load_rbac`]; `rbac.authorization.k8s.io/v1` is
//!   served), else answered the real 403; their Role and binding writes
//!   pass the `escalate`/`bind` escalation check where the RBAC storage
//!   runs it ([`rbac_storage`], after mutating admission), and every write
//!   OwnerReferencesPermissionEnforcement ([`owner_refs`]) among the
//!   validating admission plugins ([`store::World::create_as`]). Each module
//!   names the Kubernetes v1.31.0 files it follows. `system:masters`
//!   members may do anything; a request without credentials is
//!   `system:anonymous`, which may read `/healthz`, `/livez`, `/readyz`
//!   and `/version` only, as on a real cluster. The tests' own clients are
//!   [`ADMIN`], in `system:masters` ([`KubeApiServer::write_kubeconfig`],
//!   [`KubeApiServer::admin_token`]). On purpose unlike a real server: the
//!   bootstrap discovery roles are built in rather than stored.
//! - CertificateSigningRequests ([`csr`]): the registry's strategies (the
//!   requester fills `spec.username`/`groups`; `spec` immutable; `status`
//!   and `approval` subresources), their validation (a signed PKCS#10
//!   request, [`x509`]), the CertificateApproval and CertificateSigning
//!   admission plugins (`approve`/`sign` on `signers`), and, over HTTPS,
//!   the `kubernetes.io/kube-apiserver-client` signer ([`csr_signer`]),
//!   whose certificates authenticate here
//!   ([`KubeApiServer::write_kubeconfig_with_certificate`]).
//!
//! - Real clients (kubectl 1.35, Helm 4): the OpenAPI v3 documents they
//!   read ([`openapi`]), CustomResourceDefinitions written through the API
//!   and then served ([`crd_controller`]), apps/v1 Deployments, and the
//!   protobuf request bodies of typed clients ([`protobuf`]).
//!
//! Not done: in-cluster configuration (kube-rs reads fixed paths under
//! `/var/run/secrets/kubernetes.io/serviceaccount/`), HTTP/2, protobuf
//! answers (JSON is answered, which clients asking protobuf accept).
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use kube_test_server::{KubeApiServer, Kind, node};
//! let kube = KubeApiServer::start().await?;
//! kube.apply(Kind::Node, node("n1", true, false, "4", "8Gi"));
//! kube.write_kubeconfig(std::path::Path::new("/tmp/kubeconfig"))?;
//! # Ok(()) }
//! ```

// Errors are whole `metav1.Status` answers, built once and sent as they
// are; a test server gains nothing from boxing them.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod audit;
pub mod binding;
pub mod builtin;
pub mod cel;
pub mod clusterrole_aggregation;
pub mod controllers;
pub mod crd;
pub mod crd_conditions;
pub mod crd_controller;
pub mod crd_finalizer;
pub mod csr;
pub mod csr_signer;
pub mod deletion;
pub mod deployment;
pub mod discovery;
pub mod disruption;
pub mod endpoint_slice;
pub mod endpointslice_controller;
pub mod eviction;
pub mod faults;
pub mod field_validation;
pub mod gc;
pub mod gc_graph;
pub mod list;
pub mod listen;
pub mod namespace_controller;
pub mod namespace_lifecycle;
pub mod network_policy;
pub mod openapi;
pub mod owner_refs;
pub mod patch;
pub mod pod_security;
pub mod protobuf;
pub mod rbac;
pub mod rbac_storage;
pub mod replicaset;
pub mod rule_check;
pub mod rules;
pub mod schema;
pub mod selector;
pub mod server;
pub mod shared;
pub mod status;
pub mod store;
pub mod taint_eviction;
pub mod taints;
pub mod target;
pub mod tls;
pub mod validation;
pub mod watch;
pub mod workload;
pub mod x509;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::{broadcast, watch as signal};

pub use audit::{AuditRecord, ResourceAttributes, SeenRequest};
pub use builtin::{node, pod, Kind};
pub use crd::{GroupResource, ResourceDef};
pub use faults::Fault;
pub use rbac::UserInfo;
pub use status::{ApiError, Cause};

use crd::Registry;
use shared::Shared;
use store::{Counters, PatchOptions, Target, World};
pub use tls::ClientCert;
use tls::Pki;

/// A running API server on a loopback port; stops when dropped.
pub struct KubeApiServer {
    shared: Shared,
    server: tokio::task::JoinHandle<()>,
    /// The `kube-apiserver-client` CSR signer ([`csr_signer`]), with HTTPS.
    signer: Option<tokio::task::JoinHandle<()>>,
    /// Set when serving HTTPS.
    pki: Option<Arc<Pki>>,
    /// The signer's clock ([`csr_signer::Clock`]).
    signer_clock: Arc<csr_signer::Clock>,
    /// The bearer token of [`ADMIN`], the tests' own user.
    admin_token: String,
}

/// The tests' own user, in `system:masters`: what the kubeconfig of
/// [`KubeApiServer::write_kubeconfig`] and [`KubeApiServer::admin_token`]
/// authenticate as — a cluster administrator's credentials (kubeadm's
/// `admin.conf` user is in `system:masters` too), so the tests act on the
/// cluster as its operator does, and a request without credentials is
/// anonymous's, as on a real cluster.
pub const ADMIN: &str = "kube-test-admin";

impl Drop for KubeApiServer {
    fn drop(&mut self) {
        self.server.abort();
        if let Some(signer) = &self.signer {
            signer.abort();
        }
        if let Some(dir) = std::env::var_os(AUDIT_DIR_ENV) {
            // A test cannot fail from a destructor: say so loudly instead,
            // and `deploy-check` fails on the missing records.
            if let Err(e) = self.write_audit(Path::new(&dir)) {
                eprintln!("kube-test-server: {e:#}");
            }
        }
    }
}

/// Where every server writes its audit log when dropped, if set.
pub const AUDIT_DIR_ENV: &str = "KUBE_TEST_AUDIT_DIR";

fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Tells the tokens of one process's servers apart.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

impl KubeApiServer {
    /// Built-in resources and the Liqo v1.2.0 CRDs, with the namespaces a
    /// new cluster has (`default`, `kube-system`, `kube-public`,
    /// `kube-node-lease`).
    pub async fn start() -> Result<Self> {
        let server = Self::start_without_crds().await?;
        server.register_liqo_crds("v1.2.0")?;
        Ok(server)
    }

    /// As [`KubeApiServer::start`], over HTTPS: a CA made for this server
    /// ([`KubeApiServer::ca_pem`]), which every kubeconfig it writes
    /// trusts, and client certificates as credentials
    /// ([`KubeApiServer::write_kubeconfig_with_client_cert`]).
    pub async fn start_tls() -> Result<Self> {
        let server = Self::launch(true).await?;
        server.register_liqo_crds("v1.2.0")?;
        Ok(server)
    }

    /// Built-in resources only (register CRDs with
    /// [`KubeApiServer::register_crd_file`]).
    pub async fn start_without_crds() -> Result<Self> {
        Self::launch(false).await
    }

    async fn launch(tls: bool) -> Result<Self> {
        let pki = if tls {
            Some(Arc::new(Pki::new()?))
        } else {
            None
        };
        let mut registry = Registry::default();
        for def in builtin::definitions() {
            registry.register(def);
        }
        let (changes, _) = broadcast::channel(1024);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Shared {
            world: Arc::new(Mutex::new(World::new(registry, changes))),
            hold: signal::Sender::new(false),
            epoch: signal::Sender::new(0),
            reset: signal::Sender::new(0),
            addr,
            tokens: Arc::new(Mutex::new(HashMap::new())),
            rbac_enforced: Arc::new(AtomicBool::new(true)),
        };
        {
            let mut world = shared.world();
            let namespaces = world
                .registry
                .get(&Kind::Namespace.into())
                .context("namespaces are built in")?;
            for ns in builtin::DEFAULT_NAMESPACES {
                world
                    .create(&namespaces, None, json!({ "metadata": { "name": ns } }))
                    .map_err(|e| anyhow!("creating namespace {ns}: {e}"))?;
            }
        }
        let app = Router::new()
            .fallback(server::handle)
            .with_state(shared.clone());
        let server = tokio::spawn(listen::serve(listener, app, pki.clone()));
        let signer_clock = Arc::new(csr_signer::Clock::default());
        let signer = pki
            .clone()
            .map(|pki| tokio::spawn(csr_signer::run(shared.clone(), pki, signer_clock.clone())));
        // Ends by itself once the world is dropped with the server.
        controllers::spawn(&shared.world);
        let mut server = Self {
            shared,
            server,
            signer,
            pki,
            signer_clock,
            admin_token: String::new(),
        };
        server.admin_token = server.token_for_groups(ADMIN, &[rbac::MASTERS]);
        Ok(server)
    }

    pub fn url(&self) -> String {
        let scheme = if self.pki.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.shared.addr)
    }

    /// Run the CSR signer on a clock `behind` this process's (see
    /// [`csr_signer::Clock`]): what it issues from now on is dated as a
    /// signer on a lagging host dates it.
    pub fn set_signer_clock_behind(&self, behind: std::time::Duration) {
        self.signer_clock.set_behind(behind);
    }

    /// The CA certificate (PEM) a client must trust, when serving HTTPS.
    pub fn ca_pem(&self) -> Option<String> {
        self.pki.as_ref().map(|p| p.ca_pem())
    }

    /// A client certificate this server takes as `user` (its CN) in
    /// `groups` (its O), when serving HTTPS.
    pub fn client_cert(&self, user: &str, groups: &[&str]) -> Result<ClientCert> {
        self.pki
            .as_ref()
            .context("client certificates need a server started with start_tls")?
            .client_cert(user, groups)
    }

    /// A kubeconfig pointing at this server as the tests' own user
    /// ([`ADMIN`], in `system:masters`: allowed everything, as a cluster
    /// administrator's kubeconfig is), for what the tests run as the
    /// cluster's operator — kubectl, helm, a CLI. A controller under test
    /// should get [`KubeApiServer::write_kubeconfig_as`] its ServiceAccount
    /// instead, so that RBAC holds it to what `deploy/` grants. kubectl
    /// and helm (client-go) send a kubeconfig's credentials only over TLS
    /// (`staging/src/k8s.io/client-go/tools/clientcmd/client_config.go`):
    /// give them a server started with [`KubeApiServer::start_tls`], or
    /// they are `system:anonymous`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<()> {
        let credentials = format!("{{token: {}}}", self.admin_token);
        self.write_kubeconfig_text(path, ADMIN, &credentials)
    }

    /// The bearer token of the tests' own user ([`ADMIN`], in
    /// `system:masters`), for a client a test builds itself. A request
    /// without it (or other credentials) is `system:anonymous`'s and gets
    /// the real 403 for anything but the public health and version paths.
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// A kubeconfig whose bearer token this server maps to `user`, e.g.
    /// `system:serviceaccount:liqo:resource-monitor`: what a Pod running
    /// under that ServiceAccount presents, so the audit log says who made
    /// each call.
    pub fn write_kubeconfig_as(&self, path: &Path, user: &str) -> Result<()> {
        let token = self.token_for(user);
        let entry = format!("{user:?}");
        self.write_kubeconfig_text(path, &entry, &format!("{{token: {token}}}"))
    }

    /// A kubeconfig with a client certificate (`client-certificate-data`,
    /// `client-key-data`) this server takes as `user`; HTTPS only.
    pub fn write_kubeconfig_with_client_cert(&self, path: &Path, user: &str) -> Result<()> {
        let cert = self.client_cert(user, &[])?;
        self.write_kubeconfig_with_certificate(path, user, &cert)
    }

    /// A kubeconfig presenting `cert` (PEM certificate and key) — say one
    /// this server's signer issued for an approved
    /// `kubernetes.io/kube-apiserver-client` CSR (`status.certificate`,
    /// base64-decoded, with the key the CSR was made from) — under the
    /// kubeconfig user entry `name`. The server takes the certificate as
    /// its CN in its O's, not as `name`; HTTPS only.
    pub fn write_kubeconfig_with_certificate(
        &self,
        path: &Path,
        name: &str,
        cert: &ClientCert,
    ) -> Result<()> {
        anyhow::ensure!(
            self.pki.is_some(),
            "client certificates need a server started with start_tls"
        );
        let credentials = format!(
            "{{client-certificate-data: {}, client-key-data: {}}}",
            b64(&cert.cert_pem),
            b64(&cert.key_pem)
        );
        self.write_kubeconfig_text(path, &format!("{name:?}"), &credentials)
    }

    /// As [`KubeApiServer::write_kubeconfig_as`], but trusting `ca_pem`
    /// instead of this server's CA (say [`tls::unrelated_ca_pem`]): the
    /// client must refuse the server.
    pub fn write_kubeconfig_trusting(&self, path: &Path, user: &str, ca_pem: &str) -> Result<()> {
        let token = self.token_for(user);
        let text = self.kubeconfig_text(
            &format!("{user:?}"),
            &format!("{{token: {token}}}"),
            Some(ca_pem),
        );
        std::fs::write(path, text).context("writing kubeconfig")
    }

    /// A fresh bearer token this server maps to `user` (with the groups a
    /// real token authenticator gives it: the ServiceAccount groups for
    /// `system:serviceaccount:<ns>:<name>`, and `system:authenticated`).
    pub fn token_for(&self, user: &str) -> String {
        self.token_for_groups(user, &[])
    }

    /// As [`KubeApiServer::token_for`], the user also in `groups`
    /// ([`rbac::MASTERS`] makes it a superuser).
    pub fn token_for_groups(&self, user: &str, groups: &[&str]) -> String {
        let n = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let token = format!("kts-{}-{n}-{nanos:08x}", self.shared.addr.port());
        self.shared
            .tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                token.clone(),
                UserInfo::authenticated(
                    user,
                    &groups.iter().map(|g| g.to_string()).collect::<Vec<_>>(),
                ),
            );
        token
    }

    // ---- authorization ------------------------------------------------------

    /// Whether RBAC decides who may do what (the default): every request by
    /// a user with a token or client certificate is authorized against the
    /// Roles, ClusterRoles and bindings stored in this server
    /// ([`KubeApiServer::load_rbac`]), as [`rbac`] describes, and its writes
    /// pass the escalation and owner-reference checks; requests without
    /// credentials too, as `system:anonymous`. Members of `system:masters`
    /// ([`ADMIN`], the tests' own user) are always allowed. `false`:
    /// everyone may do anything (calls are still recorded).
    pub fn set_rbac(&self, enforce: bool) {
        self.shared.rbac_enforced.store(enforce, Ordering::Relaxed);
    }

    /// The Pod Security Admission level of namespaces without its labels,
    /// for enforce, audit and warn alike ([`pod_security`]). `baseline`
    /// unless set: what the tests' clusters are given, so that what runs
    /// privileged must be let to, as on a hardened cluster; a real
    /// cluster's default is `privileged` unless an AdmissionConfiguration
    /// sets another.
    pub fn set_pod_security_default(&self, level: pod_security::Level) {
        self.shared.world().pod_security = pod_security::Policy::all(level);
    }

    /// Store the Roles, ClusterRoles, RoleBindings and ClusterRoleBindings
    /// among `objects` (anything else is skipped) as given; how many.
    pub fn load_rbac(&self, objects: &[Value]) -> usize {
        let mut loaded = 0;
        for object in objects {
            let resource = match object["kind"].as_str() {
                Some("Role") => "roles",
                Some("ClusterRole") => "clusterroles",
                Some("RoleBinding") => "rolebindings",
                Some("ClusterRoleBinding") => "clusterrolebindings",
                _ => continue,
            };
            self.apply(
                GroupResource::new(rbac::RBAC_GROUP, resource),
                object.clone(),
            );
            loaded += 1;
        }
        loaded
    }

    fn write_kubeconfig_text(&self, path: &Path, user_name: &str, user: &str) -> Result<()> {
        let text = self.kubeconfig_text(user_name, user, self.ca_pem().as_deref());
        std::fs::write(path, text).context("writing kubeconfig")
    }

    fn kubeconfig_text(&self, user_name: &str, user: &str, ca_pem: Option<&str>) -> String {
        let ca = ca_pem
            .map(|pem| format!("    certificate-authority-data: {}\n", b64(pem)))
            .unwrap_or_default();
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n{ca}\
             users:\n- name: {user_name}\n  user: {user}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: {user_name}\n    namespace: default\n\
             current-context: test\n",
            self.url()
        )
    }

    /// Write the resource requests of the audit log and the authorization
    /// checks admission made beyond them (`World::authorization_checks`),
    /// one JSON object a line ([`AuditRecord::to_json_line`]), into a new
    /// file in `dir`.
    pub fn write_audit(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating audit dir {}", dir.display()))?;
        let checks = self.shared.world().authorization_checks.clone();
        let lines: String = self
            .audit()
            .iter()
            .chain(&checks)
            .filter_map(AuditRecord::to_json_line)
            .map(|l| l + "\n")
            .collect();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        // pid and port tell apart the servers alive at once; the time, a
        // port reused by a later server of the same process.
        let name = format!(
            "audit-{}-{}-{nanos}.jsonl",
            std::process::id(),
            self.shared.addr.port()
        );
        let path = dir.join(name);
        std::fs::write(&path, lines).with_context(|| format!("writing {}", path.display()))
    }

    // ---- resources ----------------------------------------------------

    fn register(&self, defs: Vec<ResourceDef>) -> Vec<GroupResource> {
        let mut world = self.shared.world();
        defs.into_iter()
            .map(|def| {
                let gr = def.group_resource();
                world.registry.register(def);
                gr
            })
            .collect()
    }

    /// Serve the CRDs of a manifest file (one or more YAML documents).
    pub fn register_crd_file(&self, path: &Path) -> Result<Vec<GroupResource>> {
        Ok(self.register(crd::read_crd_file(path)?))
    }

    /// Serve the CRDs of YAML text.
    pub fn register_crd_yaml(&self, yaml: &str) -> Result<Vec<GroupResource>> {
        Ok(self.register(crd::parse_crds(yaml)?))
    }

    /// Serve every vendored Liqo CRD of a tag: `v1.2.0` or `v0.10.3`
    /// (`crds/liqo-<tag>/`).
    pub fn register_liqo_crds(&self, tag: &str) -> Result<Vec<GroupResource>> {
        Ok(self.register(crd::read_crd_dir(&crd::liqo_crd_dir(tag))?))
    }

    /// Serve Liqo v1.2.0's `networking.liqo.io/v1beta1` Configuration,
    /// GatewayServer, GatewayClient, PublicKey and Connection
    /// (`crds/liqo-v1.2.0-networking/`, written from Liqo's Go types, not
    /// vendored: its README says which).
    pub fn register_liqo_networking_crds(&self) -> Result<Vec<GroupResource>> {
        self.register_liqo_crds("v1.2.0-networking")
    }

    fn def(&self, resource: impl Into<GroupResource>) -> Arc<ResourceDef> {
        let gr = resource.into();
        self.shared
            .world()
            .registry
            .get(&gr)
            .unwrap_or_else(|| panic!("{gr} is not served"))
    }

    // ---- test writes, bypassing concurrency and finalizers --------------

    /// Create or replace an object as given (ADDED or MODIFIED), with no
    /// concurrency check; `apiVersion` and `kind` are set. The object is
    /// validated as a client's write is (schema, CEL rules, the kind's
    /// rules): a fixture a real server would refuse panics here, naming
    /// the refused fields, rather than making a test prove a world that
    /// cannot exist.
    pub fn apply(&self, resource: impl Into<GroupResource>, object: Value) -> Value {
        self.try_apply(resource, object)
            .unwrap_or_else(|e| panic!("kube.apply: a real API server refuses this object: {e}"))
    }

    /// [`KubeApiServer::apply`], with the refusal returned, for a test that
    /// must wait out a refusal the real system also gives for a while (an
    /// admission webhook judging from a cache that has not seen an object
    /// yet).
    pub fn try_apply(
        &self,
        resource: impl Into<GroupResource>,
        object: Value,
    ) -> Result<Value, String> {
        let def = self.def(resource);
        self.shared
            .world()
            .upsert(&def, object)
            .map_err(|e| e.to_string())
    }

    /// Remove an object at once (DELETED), by `name` or `namespace/name`,
    /// finalizers or not: a test's clean-up, bypassing the lifecycle (a
    /// namespace goes without terminating, its objects stay; the garbage
    /// collector still deletes the object's dependents afterwards). A
    /// client's DELETE is [`KubeApiServer::delete_object`].
    pub fn delete(&self, resource: impl Into<GroupResource>, key: &str) {
        let def = self.def(resource);
        self.shared.world().remove(&def, key);
    }

    // ---- admission ------------------------------------------------------

    /// Add a mutating admission hook (run, in the order added, before
    /// validation): how an in-process model of a mutating webhook takes part.
    pub fn add_mutating_hook(&self, hook: Arc<dyn admission::MutatingHook>) {
        self.shared.world().hooks.mutating.push(hook);
    }

    /// Add a validating admission hook (run, in the order added, after
    /// validation and ValidatingAdmissionPolicies).
    pub fn add_validating_hook(&self, hook: Arc<dyn admission::ValidatingHook>) {
        self.shared.world().hooks.validating.push(hook);
    }

    // ---- writes as a client makes them --------------------------------

    /// Create as a POST would (validated; namespace from the object).
    pub fn create(
        &self,
        resource: impl Into<GroupResource>,
        object: Value,
    ) -> Result<Value, ApiError> {
        let def = self.def(resource);
        let ns = object["metadata"]["namespace"].as_str().map(str::to_string);
        self.shared.world().create(&def, ns.as_deref(), object)
    }

    /// Replace as a PUT would (to `/status` with `status: true`).
    pub fn replace(
        &self,
        resource: impl Into<GroupResource>,
        object: Value,
        status: bool,
    ) -> Result<Value, ApiError> {
        let def = self.def(resource);
        let ns = object["metadata"]["namespace"].as_str().map(str::to_string);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let target = if status { Target::Status } else { Target::Main };
        self.shared
            .world()
            .update(&def, ns.as_deref(), &name, object, target)
    }

    /// JSON merge patch as a PATCH would (to `/status` with `status: true`).
    pub fn merge_patch(
        &self,
        resource: impl Into<GroupResource>,
        namespace: Option<&str>,
        name: &str,
        patch: Value,
        status: bool,
    ) -> Result<Value, ApiError> {
        let def = self.def(resource);
        let target = if status { Target::Status } else { Target::Main };
        let body = patch.to_string();
        self.shared
            .world()
            .patch(
                &def,
                namespace,
                name,
                patch::PatchType::Merge,
                body.as_bytes(),
                target,
                &PatchOptions::default(),
            )
            .map(|(o, _)| o)
    }

    /// Delete as a DELETE without options would: finalizers hold it
    /// (marked, generation bumped), a namespace terminates, and the
    /// garbage collector and namespace controller act afterwards.
    pub fn delete_object(
        &self,
        resource: impl Into<GroupResource>,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let def = self.def(resource);
        self.shared
            .world()
            .delete(&def, namespace, name, &Value::Null)
    }

    // ---- reads ----------------------------------------------------------

    pub fn get(
        &self,
        resource: impl Into<GroupResource>,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let def = self.def(resource);
        self.shared
            .world()
            .get(&def, namespace.filter(|_| def.namespaced), name)
            .ok()
    }

    /// Every stored object of a resource, in `namespace/name` order.
    pub fn objects(&self, resource: impl Into<GroupResource>) -> Vec<Value> {
        self.shared.world().list_objects(&resource.into())
    }

    /// The current resourceVersion (of the last change).
    pub fn resource_version(&self) -> u64 {
        self.shared.world().rv
    }

    // ---- list and watch behaviour ---------------------------------------

    /// Return at most `max` items per list page, whatever `limit` asks
    /// (`None`: as many as asked). Lists without `limit` are never paged.
    pub fn set_max_page(&self, max: Option<usize>) {
        self.shared.world().max_page = max.filter(|m| *m > 0);
    }

    /// Forget the history up to now, as etcd compaction does: a watch from
    /// an older resourceVersion gets 410 Gone, and the continue tokens of
    /// lists begun before the last change expire.
    pub fn compact(&self) {
        let mut world = self.shared.world();
        let rv = world.rv;
        world.compacted = rv;
        world.history.clear();
        world.snapshots.retain(|_, s| s.rv >= rv);
    }

    /// End every open watch stream (the client sees the response end, as
    /// when the API server restarts or its timeout passes).
    pub fn end_watches(&self) {
        self.shared.epoch.send_modify(|e| *e += 1);
    }

    /// Cut every open watch stream mid-response: the connection is closed
    /// without the chunked body's end, as when the server or a proxy dies.
    pub fn reset_watches(&self) {
        self.shared.reset.send_modify(|e| *e += 1);
    }

    /// How often an open watch that asked for them
    /// (`allowWatchBookmarks=true`) gets a BOOKMARK (60 s unless set).
    /// Applies to watches started afterwards.
    pub fn set_bookmark_interval(&self, every: std::time::Duration) {
        self.shared.world().bookmark_interval = every;
    }

    /// How long a list or watch from a resourceVersion the server has not
    /// reached waits for it before "Too large resource version" (3 s, as
    /// the real watch cache, unless set).
    pub fn set_fresh_wait(&self, wait: std::time::Duration) {
        self.shared.world().fresh_wait = wait;
    }

    /// While `true`, new watch requests wait (unanswered) until it is
    /// `false` again; open streams are unaffected.
    pub fn hold_watches(&self, hold: bool) {
        self.shared.hold.send_replace(hold);
    }

    // ---- faults ---------------------------------------------------------

    /// Answer the next requests matching `fault` with its error status.
    pub fn inject(&self, fault: Fault) {
        self.shared.world().faults.push(fault);
    }

    /// Answer the next `n` resource requests, whatever they are, with
    /// `code`.
    pub fn fail_next(&self, n: usize, code: u16) {
        self.inject(Fault::new(code).times(n));
    }

    /// How many requests injected faults have answered so far.
    pub fn faults_fired(&self) -> usize {
        self.shared.world().faults_fired_at.len()
    }

    /// When each injected fault fired, in order.
    pub fn faults_fired_at(&self) -> Vec<std::time::Instant> {
        self.shared.world().faults_fired_at.clone()
    }

    pub fn clear_faults(&self) {
        self.shared.world().faults.clear();
    }

    // ---- what clients did -----------------------------------------------

    fn counters(&self, resource: impl Into<GroupResource>) -> Counters {
        self.shared
            .world()
            .counters
            .get(&resource.into())
            .copied()
            .unwrap_or_default()
    }

    /// How many lists were begun (requests without `continue`).
    pub fn lists(&self, resource: impl Into<GroupResource>) -> usize {
        self.counters(resource).lists
    }

    /// How many list pages were served, the first included.
    pub fn pages(&self, resource: impl Into<GroupResource>) -> usize {
        self.counters(resource).pages
    }

    /// How many watch calls were made (held ones included).
    pub fn watches(&self, resource: impl Into<GroupResource>) -> usize {
        self.counters(resource).watches
    }

    /// How many watch calls wait under [`KubeApiServer::hold_watches`] now.
    pub fn waiting_watches(&self, resource: impl Into<GroupResource>) -> usize {
        self.counters(resource).waiting
    }

    /// How many 410 Gone answers were served (expired watch
    /// resourceVersions and expired continue tokens).
    pub fn gone(&self, resource: impl Into<GroupResource>) -> usize {
        self.counters(resource).gone
    }

    /// How many periodic BOOKMARKs watches of a resource were sent.
    pub fn bookmarks(&self, resource: impl Into<GroupResource>) -> usize {
        self.counters(resource).bookmarks
    }

    /// Every list and watch request for a resource, oldest first.
    pub fn requests(&self, resource: impl Into<GroupResource>) -> Vec<SeenRequest> {
        let gr = resource.into();
        self.shared
            .world()
            .requests
            .iter()
            .filter(|r| r.resource == gr)
            .cloned()
            .collect()
    }

    /// Every request answered, oldest first.
    pub fn audit(&self) -> Vec<AuditRecord> {
        self.shared.world().audit.clone()
    }

    /// The distinct `(verb, apiGroup, resource, subresource, namespace)` of
    /// every resource request, sorted: what the client's RBAC must allow.
    pub fn rbac_requests(&self) -> Vec<ResourceAttributes> {
        let mut all: Vec<ResourceAttributes> = self
            .audit()
            .into_iter()
            .filter_map(|r| r.resource)
            .map(|mut r| {
                r.name = None;
                r
            })
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// Forget the request log, counters and seen requests.
    pub fn clear_requests(&self) {
        let mut world = self.shared.world();
        world.audit.clear();
        world.requests.clear();
        world.counters.clear();
    }
}
