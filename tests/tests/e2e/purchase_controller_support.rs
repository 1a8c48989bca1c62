//! The world of the purchase-controller tests: the real catalog (a provider
//! that registered both Liqo generations and published an offer, a
//! consumer with a catalog token), a consumer cluster and a provider
//! cluster (Kubernetes API test servers with Liqo's CRDs and the project's
//! `Purchase` CRD), the real `purchase-controller` on the consumer and the
//! real class controller (`resource-monitor --liqo-api v1 --grant-policy
//! contracts`) on the provider, and Liqo v1.2's controllers as the model
//! runs them on both clusters ([`crate::liqo_support`]), with what the
//! model does not do yet written by `crate::liqo_stand_in`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use e2e::catalog::{Backend, Catalog, Env};
use e2e::{buying, contracts};
use e2e::{Child, Spawn};
use kube_test_server::KubeApiServer;
use serde_json::{json, Value};

use crate::liqo_support::{self, Liqo, Offloading};

pub const PURCHASES: (&str, &str) = ("broker.liqo-broker.io", "purchases");
pub const SECRETS: (&str, &str) = ("", "secrets");
pub const OFFLOADINGS: (&str, &str) = ("offloading.liqo.io", "namespaceoffloadings");
pub const SLICES: (&str, &str) = liqo_support::SLICES;

/// Who the controllers are: the ServiceAccounts of `deploy/kubernetes/`.
pub const PURCHASE_USER: &str = "system:serviceaccount:liqo:purchase-controller";
pub const SLICE_USER: &str = "system:serviceaccount:liqo:slice-controller";

pub const CONSUMER_ID: &str = "consumer-1";
/// The provider: a cluster ID and name as Liqo makes them, an auth URL
/// that Liqo v0.10.3's ForeignCluster schema accepts.
pub const PROVIDER_ID: &str = "b0c1a5e2-provider";
pub const PROVIDER_NAME: &str = "milan-edge";
pub const PROVIDER_AUTH_URL: &str = "https://203.0.113.7:30443";
pub const PROVIDER_TOKEN: &str = "v0-peering-token-of-milan-edge";

/// The provider's catalog credentials (as `POST /authenticate` takes them).
pub fn provider_credentials() -> Value {
    json!({"clusterID": PROVIDER_ID, "clusterName": PROVIDER_NAME,
           "authURL": PROVIDER_AUTH_URL, "token": PROVIDER_TOKEN})
}
pub const CLASS: &str = "liqo-broker";
pub const OFFER: &str = "compute";
/// The namespace of the Purchases and of the consumer's token Secret.
pub const TEAM: &str = "team";

/// The runtime the test API servers and helpers run on. Tests themselves
/// are plain functions: the catalog helpers block, which a runtime thread
/// must not do.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The peering-user kubeconfig the provider registers.
pub fn peering_kubeconfig() -> String {
    contracts::kubeconfig("https://203.0.113.7:6443")
}

/// The catalog with a provider (v0 and v1 registered, offer `compute` with
/// plans `small` = {cpu 2, memory 4Gi} and `large`) and consumers.
pub struct Market {
    /// Keeps the catalog's data for its lifetime.
    pub _env: Env,
    pub catalog: Catalog,
    pub provider_token: String,
    pub admin: String,
}

impl Market {
    pub fn open(extra: &[&str]) -> Self {
        let env = Env::new(Backend::Embedded);
        Self::open_on(env, extra)
    }

    pub fn open_on(env: Env, extra: &[&str]) -> Self {
        let catalog = buying::start(&env, extra);
        let provider_token = catalog.login(&provider_credentials());
        catalog.put_offer(OFFER, &buying::offer(), &provider_token);
        let r = contracts::register_peering(
            &catalog,
            &provider_token,
            Some(&peering_kubeconfig()),
            Some(CLASS),
        );
        assert_eq!(r.status, 200, "register v1 peering: {}", r.text);
        assert_eq!(r.json["liqo"], json!(["v0", "v1"]), "{}", r.text);
        let admin = buying::admin(&catalog);
        Self {
            _env: env,
            catalog,
            provider_token,
            admin,
        }
    }

    pub fn consumer(&self, subject: &str) -> String {
        buying::consumer(&self.catalog, &self.admin, subject)
    }

    /// Reserve and buy `plan` as `token` with `body`; the contract.
    #[track_caller]
    pub fn buy(&self, token: &str, plan: &str, body: Value) -> Value {
        let r = contracts::buy(&self.catalog, token, OFFER, plan, &body);
        assert_eq!(r.status, 201, "purchase: {}", r.text);
        r.json
    }

    /// Cancel contract `id` as its consumer `token` (`DELETE
    /// /purchases/{id}`).
    #[track_caller]
    pub fn cancel(&self, token: &str, id: &str) {
        let r = buying::delete(&self.catalog, &format!("/purchases/{id}"), Some(token));
        assert!(r.status == 200 || r.status == 204, "cancel: {}", r.text);
    }

    /// `GET /contracts/{id}` as `token`.
    pub fn contract(&self, token: &str, id: &str) -> (u16, Value) {
        let r = buying::get(&self.catalog, &format!("/contracts/{id}"), Some(token));
        (r.status, r.json)
    }

    pub fn url(&self) -> String {
        self.catalog.url("")
    }
}

/// The consumer cluster: the test API server with Liqo's CRDs of one
/// generation and the `Purchase` CRD, the namespaces `liqo` and
/// [`TEAM`], and the consumer's catalog token in Secret
/// `team/catalog-token` (key `token`).
pub struct Consumer {
    pub kube: Arc<KubeApiServer>,
    pub _dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

/// Namespace `name`, which Purchases of [`TEAM`] may offload: a Purchase
/// offloads its own namespace, or one whose annotation
/// `broker.liqo-broker.io/offloadable-by` names the Purchase's (issue 41).
pub fn offloadable_namespace(kube: &KubeApiServer, name: &str) {
    kube.apply(
        liqo_support::NAMESPACES,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name,
               "annotations": {"broker.liqo-broker.io/offloadable-by": TEAM}}}),
    );
}

pub fn purchase_crd() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes/purchase-controller/crd.yaml")
}

impl Consumer {
    pub fn start(rt: &tokio::runtime::Runtime, liqo: &str, token: &str) -> Result<Self> {
        let kube = match liqo {
            "v1" => rt.block_on(KubeApiServer::start())?,
            _ => {
                let kube = rt.block_on(KubeApiServer::start_without_crds())?;
                kube.register_liqo_crds("v0.10.3")?;
                kube
            }
        };
        Self::start_on(kube, token)
    }

    /// [`Consumer::start`] on a server already started with the Liqo CRDs
    /// it needs (an HTTPS one, say).
    pub fn start_on(kube: KubeApiServer, token: &str) -> Result<Self> {
        kube.register_crd_file(&purchase_crd())?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        kube.write_kubeconfig_as(&kubeconfig, PURCHASE_USER)?;
        // Under exactly the permissions deploy/ ships for it.
        e2e::rbac::load_shipped(&kube)?;
        for ns in ["liqo", TEAM] {
            liqo_support::namespace(&kube, ns, json!({}));
        }
        let consumer = Self {
            kube: Arc::new(kube),
            _dir: dir,
            kubeconfig,
        };
        consumer.token_secret("catalog-token", token);
        Ok(consumer)
    }

    pub fn token_secret(&self, name: &str, token: &str) {
        use base64::Engine;
        self.kube.apply(
            SECRETS,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": name, "namespace": TEAM},
                   "data": {"token": base64::engine::general_purpose::STANDARD.encode(token)}}),
        );
    }

    /// `purchase-controller` for `liqo` (`v0`/`v1`), as its ServiceAccount,
    /// with short waits.
    pub fn controller(&self, liqo: &str) -> Result<(Child, u16)> {
        let (child, bound) = self.controller_spawn(liqo).start_announced(1)?;
        Ok((child, bound.port(None)))
    }

    /// The controller [`Consumer::controller`] starts, not yet started (to
    /// send its log to a file, say).
    pub fn controller_spawn(&self, liqo: &str) -> Spawn {
        controller_as(&self.kubeconfig, liqo, CONSUMER_ID)
    }

    /// Create a Purchase in [`TEAM`] with exactly `spec` (validated
    /// against the CRD): the API server's answer.
    // The test server's own error type, as its client returns it; boxing it
    // here would only make callers unbox it to read the status.
    #[allow(clippy::result_large_err)]
    pub fn create_purchase(
        &self,
        name: &str,
        spec: Value,
    ) -> Result<Value, kube_test_server::ApiError> {
        self.kube.create(
            PURCHASES,
            json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "Purchase",
                   "metadata": {"name": name, "namespace": TEAM}, "spec": spec}),
        )
    }

    /// Create a Purchase in [`TEAM`] (validated against the CRD).
    pub fn purchase(&self, name: &str, catalog: &str, spec: Value) -> Value {
        let mut full = json!({"catalogURL": catalog,
            "credentialsSecretRef": {"name": "catalog-token", "key": "token"}});
        for (k, v) in spec.as_object().expect("spec object") {
            full[k] = v.clone();
        }
        self.kube
            .create(
                PURCHASES,
                json!({"apiVersion": "broker.liqo-broker.io/v1alpha1", "kind": "Purchase",
                       "metadata": {"name": name, "namespace": TEAM}, "spec": full}),
            )
            .expect("Purchase created")
    }

    pub fn get_purchase(&self, name: &str) -> Option<Value> {
        self.kube.get(PURCHASES, Some(TEAM), name)
    }

    /// Wait until Purchase `name` satisfies `check`, for at most
    /// [`e2e::EVENTUALLY`].
    pub fn wait_purchase(&self, name: &str, check: impl Fn(&Value) -> bool) -> Result<Value> {
        let deadline = Instant::now() + e2e::EVENTUALLY;
        loop {
            let purchase = self.get_purchase(name);
            if let Some(p) = &purchase {
                if check(p) {
                    return Ok(p.clone());
                }
            }
            if Instant::now() >= deadline {
                bail!(
                    "Purchase {name} never matched within {:?}; it is {purchase:#?}",
                    e2e::EVENTUALLY
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Delete Purchase `name` and wait until it is gone (its finalizer
    /// done).
    pub fn delete_purchase(&self, name: &str) {
        self.kube
            .delete_object(PURCHASES, Some(TEAM), name)
            .expect("Purchase deleted");
        wait_until(&format!("Purchase {name} is gone"), || {
            self.get_purchase(name).is_none()
        });
    }

    pub fn wait_phase(&self, name: &str, phase: &str) -> Result<Value> {
        self.wait_purchase(name, |p| p["status"]["phase"] == phase)
    }
}

/// `purchase-controller` for `liqo` (`v0`/`v1`) as the user `kubeconfig`
/// names, cluster `cluster_id`, with short waits; not yet started.
pub fn controller_as(kubeconfig: &Path, liqo: &str, cluster_id: &str) -> Spawn {
    Spawn::new("purchase-controller")
        .args(["--liqo-api", liqo, "--cluster-id", cluster_id])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--http-listen", "127.0.0.1:0"])
        // The contract's changes come on the catalog's stream: the shipped
        // --poll-interval (the fallback). A short --resync: the tests of a
        // contract's end by time (expiry, ending soon) see the periodic re-read.
        .args(["--resync", "500ms"])
        .args([
            "--retry",
            "200ms",
            "--retry-max",
            "1s",
            "--catalog-timeout",
            "2s",
        ])
        // A restarted (killed) controller takes its predecessor's Lease
        // within 2 s, not the default 15 s (issue 31's leader election).
        .args(["--lease-duration", "2s", "--lease-renew-deadline", "1500ms"])
        .args(["--lease-retry", "200ms"])
        .env("RUST_LOG", "info,purchase_controller=debug")
        // Their provider is not reachable: the peering command is the
        // way (purchase_controller_auto_peer.rs sets --auto-peer).
        .env("PURCHASE_CONTROLLER_AUTO_PEER", "false")
}

/// A condition of a Purchase by type.
pub fn condition(purchase: &Value, kind: &str) -> Value {
    purchase["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == kind).cloned())
        .unwrap_or(Value::Null)
}

/// Wait until `check` holds (at most [`e2e::EVENTUALLY`]).
#[track_caller]
pub fn wait_until(what: &str, check: impl Fn() -> bool) {
    contracts::wait_for(what, || check().then_some(()));
}

/// The provider cluster: the test API server with Liqo v1.2.0's CRDs and
/// the real class controller with the `contracts` grant policy, over a
/// static chain far larger than any contract.
pub struct Provider {
    pub kube: Arc<KubeApiServer>,
    pub _dir: tempfile::TempDir,
    pub _controller: Child,
}

impl Provider {
    pub fn start(rt: &tokio::runtime::Runtime, catalog: &str) -> Result<Self> {
        // HTTPS: its CSR signer signs the consumer's slice certificates
        // (Liqo's identity provider, `certificateIdentityProvider.go:104-159`).
        Self::start_on(rt.block_on(KubeApiServer::start_tls())?, catalog)
    }

    /// [`Provider::start`] on a server already started (an HTTPS one, say).
    pub fn start_on(kube: KubeApiServer, catalog: &str) -> Result<Self> {
        // The followed contracts read again every 200 ms (the tests of a
        // contract's end see it soon).
        Self::start_on_with(kube, catalog, &["--contracts-poll-interval", "200ms"])
    }

    /// [`Provider::start_on`] with these class-controller flags in place
    /// of its short contracts poll (none: its shipped defaults).
    pub fn start_on_with(kube: KubeApiServer, catalog: &str, flags: &[&str]) -> Result<Self> {
        liqo_support::namespace(&kube, "liqo", json!({}));
        // Liqo's install: its cluster ID, which `liqoctl` (and
        // `purchase-controller --auto-peer`) reads before peering.
        cluster_id_configmap(&kube, PROVIDER_ID);
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        kube.write_kubeconfig_as(&kubeconfig, SLICE_USER)?;
        e2e::rbac::load_shipped(&kube)?;
        std::fs::write(
            dir.path().join("resources.yaml"),
            "cpu: \"64\"\nmemory: \"256Gi\"\npods: \"500\"\n",
        )?;
        let chain = dir.path().join("chain.toml");
        std::fs::write(&chain, "[source.static]\npath = \"resources.yaml\"\n")?;
        let creds = dir.path().join("provider.json");
        std::fs::write(&creds, provider_credentials().to_string())?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600))?;
        let (controller, _) = Spawn::new("resource-monitor")
            .args([
                "--liqo-api",
                "v1",
                "--class",
                CLASS,
                "--grant-policy",
                "contracts",
            ])
            .args(["--catalog-url", catalog, "--catalog-credentials-file"])
            .arg(&creds)
            .arg("--config")
            .arg(&chain)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--leader-elect", "false"])
            .args(flags)
            .args(["--http-listen", "127.0.0.1:0"])
            .env("RUST_LOG", "info,slice_controller=debug")
            .start_announced(1)?;
        Ok(Self {
            kube: Arc::new(kube),
            _dir: dir,
            _controller: controller,
        })
    }

    /// The replica of the consumer's slice `name` on the provider.
    pub fn replica(&self, name: &str) -> Option<Value> {
        self.kube.get(
            SLICES,
            Some(&liqo_support::tenant_namespace(CONSUMER_ID)),
            name,
        )
    }
}

/// A v1 consumer already peered with the provider, Liqo running, the
/// class controller and `purchase-controller` running, and consumer
/// `alice`'s token in `team/catalog-token`.
pub struct Peered {
    pub market: Market,
    pub alice: String,
    pub consumer: Consumer,
    pub provider: Provider,
    _liqo: Liqo,
    _offload: Offloading,
    _controller: Child,
    /// The controller's `/metrics` port.
    pub port: u16,
    /// Last: the servers' tasks run on it until everything else is gone.
    pub rt: tokio::runtime::Runtime,
}

impl Peered {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`Peered::start`] with these catalog flags.
    pub fn start_with(catalog_flags: &[&str]) -> Self {
        let rt = runtime();
        let market = Market::open(catalog_flags);
        let alice = market.consumer("alice");
        let consumer = Consumer::start(&rt, "v1", &alice).expect("consumer cluster");
        let provider = Provider::start(&rt, &market.url()).expect("provider cluster");
        let (liqo, offload) = run_liqo(&rt, &consumer, &provider);
        let (controller, port) = consumer.controller("v1").expect("purchase-controller");
        Self {
            market,
            alice,
            consumer,
            provider,
            _liqo: liqo,
            _offload: offload,
            _controller: controller,
            port,
            rt,
        }
    }
}

/// Peer the consumer with the provider as `liqoctl peer` leaves them, and
/// run the model of Liqo on both, its offloading included (the
/// NamespaceOffloading status is Liqo's), the slices' Identities made by
/// the model from the provider's signature; all stop when dropped.
pub fn run_liqo(
    rt: &tokio::runtime::Runtime,
    consumer: &Consumer,
    provider: &Provider,
) -> (Liqo, Offloading) {
    liqo_support::peer(&consumer.kube, CONSUMER_ID, &provider.kube, PROVIDER_ID);
    let liqo = rt
        .block_on(Liqo::start(
            &consumer.kube,
            CONSUMER_ID,
            &provider.kube,
            PROVIDER_ID,
        ))
        .expect("Liqo's controllers");
    let offload = rt
        .block_on(Offloading::start(
            &consumer.kube,
            CONSUMER_ID,
            &provider.kube,
            PROVIDER_ID,
        ))
        .expect("Liqo's offloading");
    (liqo, offload)
}

/// The `ipam.liqo.io/v1alpha1` Network CRD, as far as the tests use it
/// (`spec.cidr` required, `status.cidr`; Liqo's
/// `deployments/liqo/charts/liqo-crds/crds/ipam.liqo.io_networks.yaml`).
/// The networking CRDs of the test API server leave IPAM out.
const NETWORK_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: networks.ipam.liqo.io}
spec:
  group: ipam.liqo.io
  scope: Namespaced
  names: {kind: Network, listKind: NetworkList, plural: networks, singular: network}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          required: [spec]
          properties:
            spec:
              type: object
              required: [cidr]
              properties:
                cidr: {type: string}
                preAllocated: {type: integer, format: int32, minimum: 0}
            status:
              type: object
              properties:
                cidr: {type: string}
"#;

/// Liqo's cluster-ID ConfigMap in `liqo`
/// (`deployments/liqo/templates/clusterid-configmap.yaml`).
pub fn cluster_id_configmap(kube: &KubeApiServer, cluster_id: &str) {
    kube.apply(
        ("", "configmaps"),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "liqo-clusterid-configmap", "namespace": "liqo",
                            "labels": {"app.kubernetes.io/name": "clusterid-configmap"}},
               "data": {"CLUSTER_ID": cluster_id}}),
    );
}

/// What Liqo v1.2.0's install leaves in its namespace `liqo` on a cluster
/// and `liqoctl peer` reads there: the cluster-ID ConfigMap
/// (`deployments/liqo/templates/clusterid-configmap.yaml`, found by the
/// label `app.kubernetes.io/name: clusterid-configmap`,
/// `pkg/utils/cluster_info.go:61-78`) and the IPAM's pod-CIDR and
/// external-CIDR Networks with their CIDR in `status.cidr`
/// (`pkg/utils/ipam/networks.go`, label `ipam.liqo.io/network-type`).
pub fn liqo_install(kube: &KubeApiServer, cluster_id: &str, pod_cidr: &str, external_cidr: &str) {
    kube.register_crd_yaml(NETWORK_CRD)
        .expect("the Network CRD");
    liqo_support::namespace(kube, "liqo", json!({}));
    cluster_id_configmap(kube, cluster_id);
    for (name, kind, cidr) in [
        ("pod-cidr", "pod-cidr", pod_cidr),
        ("external-cidr", "external-cidr", external_cidr),
    ] {
        kube.apply(
            ("ipam.liqo.io", "networks"),
            json!({"apiVersion": "ipam.liqo.io/v1alpha1", "kind": "Network",
                   "metadata": {"name": name, "namespace": "liqo",
                                "labels": {"ipam.liqo.io/network-type": kind}},
                   "spec": {"cidr": cidr}, "status": {"cidr": cidr}}),
        );
    }
}

/// The peering user `liqoctl generate peering-user --consumer-cluster-id
/// <consumer_id>` makes on `remote` (the peering roles installed first,
/// `liqo_support::install_peering_user_roles`): the tenant namespace, a
/// client certificate for `liqo-peer-user-<consumer_id>-…` in group
/// `liqo.io`, its RoleBindings in Liqo's namespace and the tenant
/// namespace; the kubeconfig's text, written under `dir`.
pub fn peering_user(remote: &KubeApiServer, consumer_id: &str, dir: &Path) -> String {
    let tenant = liqo_support::tenant_namespace(consumer_id);
    // `tenantNamespace.CreateNamespace`: with Liqo's labels, Pod Security
    // `privileged` included (`pkg/tenantNamespace/namespaceManager.go:128-150`),
    // which the gateway pods Liqo runs there need.
    liqo_support::namespace(
        remote,
        &tenant,
        json!({"liqo.io/tenant-namespace": "true", "liqo.io/remote-cluster-id": consumer_id,
               "pod-security.kubernetes.io/audit": "privileged",
               "pod-security.kubernetes.io/enforce": "privileged",
               "pod-security.kubernetes.io/warn": "privileged"}),
    );
    let user = format!("liqo-peer-user-{consumer_id}-0123456789abcdef0123456789abcdef");
    let cert = remote
        .client_cert(&user, &["liqo.io"])
        .expect("a client certificate");
    let path = dir.join(format!("peering-user-{consumer_id}.kubeconfig"));
    remote
        .write_kubeconfig_with_certificate(&path, &format!("{consumer_id}-user"), &cert)
        .expect("the peering user's kubeconfig");
    for (name, namespace, kind, role) in [
        (
            "liqo-ns-reader",
            "liqo",
            "Role",
            "liqo-peering-user-liqo-ns",
        ),
        (
            "tenant-ns-writer",
            tenant.as_str(),
            "ClusterRole",
            "liqo-peering-user-tenant-ns",
        ),
    ] {
        remote.apply(
            ("rbac.authorization.k8s.io", "rolebindings"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": format!("liqo-peer-user-{consumer_id}-{name}"),
                                "namespace": namespace},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
        );
    }
    std::fs::read_to_string(&path).expect("the kubeconfig")
}

/// A service provider's peering without a catalog (issue 32): the
/// consumer (the service provider, Liqo consumer) holds a peering user's
/// kubeconfig for the remote cluster (the customer, Liqo provider) in
/// Secret `team/peer`; both HTTPS test API servers run the model of
/// Liqo v1.2 with its authentication, offloading and reflection; the real
/// `purchase-controller` runs on both — on the consumer with `--auto-peer`
/// (networking off), on the remote cluster for its binding copies.
pub struct DirectWorld {
    pub consumer: Consumer,
    pub remote: Arc<KubeApiServer>,
    _remote_dir: tempfile::TempDir,
    _controllers: Vec<Child>,
    _liqo: (
        liqo_model::Provider,
        liqo_model::Consumer,
        liqo_model::Replicator,
    ),
    _offloading: Offloading,
    _reflection: liqo_model::reflection_objects::Reflection,
    /// Last: the servers' tasks run on it until everything else is gone.
    _rt: tokio::runtime::Runtime,
}

impl DirectWorld {
    pub fn open() -> Self {
        Self::open_with(false)
    }

    /// [`DirectWorld::open`], with Liqo's networking when `networking`:
    /// both clusters installed with Liqo's IPAM networks (the chart's
    /// defaults for both, `10.244.0.0/16` pods, so the peers' pod CIDRs
    /// clash and each sees the other's remapped), its networking module
    /// running on both, and the consumer's purchase-controller peering with
    /// networking (`--networking true`, `liqoctl peer`'s default).
    pub fn open_with(networking: bool) -> Self {
        let rt = runtime();
        let tls = || rt.block_on(KubeApiServer::start_tls()).expect("API server");
        let consumer = Consumer::start_on(tls(), "no-catalog").expect("consumer cluster");
        let remote = tls();
        // A Liqo v1 cluster serves networking.liqo.io (the controller's
        // unpeering looks for what --auto-peer may have made there).
        for kube in [&*consumer.kube, &remote] {
            kube.register_liqo_networking_crds()
                .expect("the networking CRDs");
        }
        liqo_support::namespace(&remote, "liqo", json!({}));
        let net = liqo_model::networking::Options::default();
        if networking {
            liqo_install(
                &consumer.kube,
                CONSUMER_ID,
                &net.pod_cidr,
                &net.external_cidr,
            );
            liqo_install(&remote, PROVIDER_ID, &net.pod_cidr, &net.external_cidr);
        }
        remote
            .register_crd_file(&purchase_crd())
            .expect("the Purchase CRD");
        e2e::rbac::load_shipped(&remote).expect("shipped RBAC");
        cluster_id_configmap(&remote, PROVIDER_ID);
        liqo_support::install_peering_user_roles(&remote, "liqo");
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = peering_user(&remote, CONSUMER_ID, dir.path());
        {
            use base64::Engine;
            consumer.kube.apply(
                SECRETS,
                json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "peer", "namespace": TEAM},
                       "data": {"kubeconfig": base64::engine::general_purpose::STANDARD.encode(kubeconfig)}}),
            );
        }
        let (c, p) = (&consumer.kube, &remote);
        let (liqo, offloading, reflection) = rt
            .block_on(async {
                let mut provider =
                    liqo_model::Provider::start(p, liqo_model::ProviderConfig::default())
                        .await?
                        .with_authentication(p)
                        .await?;
                let mut controllers = liqo_model::Consumer::start_as(c, CONSUMER_ID)
                    .await?
                    .with_authentication(c)
                    .await?
                    .with_identity_creator_only(c)
                    .await?;
                if networking {
                    provider = provider.with_networking(p, net.clone()).await?;
                    controllers = controllers.with_networking(c, net.clone()).await?;
                }
                let replicator =
                    liqo_model::Replicator::start(c, CONSUMER_ID, p, PROVIDER_ID).await?;
                let offloading = Offloading::start(c, CONSUMER_ID, p, PROVIDER_ID).await?;
                let reflection = liqo_model::reflection_objects::Reflection::start(
                    c,
                    CONSUMER_ID,
                    p,
                    PROVIDER_ID,
                    liqo_model::reflection_forge::Options::default(),
                )
                .await?;
                anyhow::Ok(((provider, controllers, replicator), offloading, reflection))
            })
            .expect("Liqo on both clusters");
        let remote_kubeconfig = dir.path().join("remote-purchase-controller.kubeconfig");
        remote
            .write_kubeconfig_as(&remote_kubeconfig, PURCHASE_USER)
            .expect("kubeconfig");
        let on_consumer = consumer
            .controller_spawn("v1")
            .args([
                "--auto-peer",
                "true",
                "--networking",
                &networking.to_string(),
            ])
            .start_announced(1)
            .expect("purchase-controller on the consumer")
            .0;
        let on_remote = controller_as(&remote_kubeconfig, "v1", PROVIDER_ID)
            .start_announced(1)
            .expect("purchase-controller on the remote cluster")
            .0;
        Self {
            consumer,
            remote: Arc::new(remote),
            _remote_dir: dir,
            _controllers: vec![on_consumer, on_remote],
            _liqo: liqo,
            _offloading: offloading,
            _reflection: reflection,
            _rt: rt,
        }
    }
}
