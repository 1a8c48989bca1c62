//! The provider's peering users (issue 31) end to end: the real catalog
//! (embedded store) with a provider selling Liqo v1 with a peering user per
//! contract, the real `peering-user-controller` running as the
//! ServiceAccount `deploy/kubernetes/peering-user-controller` ships (its
//! RBAC loaded into the server, leader election on), and the test API
//! server over TLS, which signs approved `kube-apiserver-client` CSRs with
//! its CA and authenticates their certificates by CN and O.
//!
//! Two consumers buy for clusters c1 and c2: each gets its own peering
//! user, each kubeconfig is released with its own consumer's contract and
//! authenticates as `liqo-peer-user-<X>-<32 hex>` in group `liqo.io`, with
//! the RoleBindings' permissions in `liqo-tenant-<X>` (and Liqo's
//! namespace) and 403 in the other consumer's tenant namespace. When c1's
//! contract ends its side goes in `liqoctl unpeer`'s order: its Tenant,
//! drained first and deleted only once Liqo (played by the test) removed
//! the slice replicated from c1; its networking objects (GatewayServer,
//! PublicKey, Connection, Configuration, served from
//! `crds/liqo-v1.2.0-networking`); then its RoleBindings, key and CSR, and
//! its kubeconfig is refused where it was allowed. c2's peering user and
//! networking objects stay.

use std::time::Duration;

use anyhow::{Context, Result};
use e2e::buying::{delete, get};
use e2e::catalog::{provider, Catalog, Env};
use kube_test_server::KubeApiServer;
use serde_json::json;

use crate::liqo_support;
use crate::peering_users_support::{
    blocking, released, settle, two_buyers, write_private, CONTROLLER_USER, LIQO,
};

const NAMESPACES: (&str, &str) = ("", "namespaces");
const CSRS: (&str, &str) = ("certificates.k8s.io", "certificatesigningrequests");
const SECRETS: (&str, &str) = ("", "secrets");
const ROLES: (&str, &str) = ("rbac.authorization.k8s.io", "roles");
const ROLE_BINDINGS: (&str, &str) = ("rbac.authorization.k8s.io", "rolebindings");
const TENANTS: (&str, &str) = ("authentication.liqo.io", "tenants");
const SLICES: (&str, &str) = ("authentication.liqo.io", "resourceslices");
const GATEWAY_SERVERS: (&str, &str) = ("networking.liqo.io", "gatewayservers");
const PUBLIC_KEYS: (&str, &str) = ("networking.liqo.io", "publickeies");
const CONNECTIONS: (&str, &str) = ("networking.liqo.io", "connections");
const CONFIGURATIONS: (&str, &str) = ("networking.liqo.io", "configurations");
/// Every networking kind a consumer's peering leaves on the provider.
const NETWORKING: [(&str, &str); 4] = [GATEWAY_SERVERS, PUBLIC_KEYS, CONNECTIONS, CONFIGURATIONS];

/// A client presenting `kubeconfig` (its context's namespace by default).
async fn client_of(kubeconfig: &str) -> Result<kube::Client> {
    let file = kube::config::Kubeconfig::from_yaml(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// The HTTP status of listing `plural` (core group) in `namespace`.
async fn list_status(client: &kube::Client, namespace: &str, plural: &str) -> Result<u16> {
    let request = axum::http::Request::get(format!("/api/v1/namespaces/{namespace}/{plural}"))
        .body(Vec::new())?;
    match client.request_text(request).await {
        Ok(_) => Ok(200),
        Err(kube::Error::Api(status)) => Ok(status.code),
        Err(e) => Err(e).context("listing"),
    }
}

/// The users the server authenticated the requests of `since` onwards as,
/// other than the controller and the tests' own.
fn users_seen(kube: &KubeApiServer, since: usize) -> Vec<String> {
    let mut users: Vec<String> = kube.audit()[since..]
        .iter()
        .filter_map(|r| r.user.clone())
        .filter(|u| u != CONTROLLER_USER && u != "system:anonymous")
        .collect();
    users.dedup();
    users
}

fn rolebindings(kube: &KubeApiServer, consumer: &str) -> Vec<String> {
    let mut names: Vec<String> = kube
        .objects(ROLE_BINDINGS)
        .iter()
        .filter(|b| {
            b["metadata"]["labels"]["liqo.io/peering-user-name"]
                == format!("liqo-peer-user-{consumer}")
        })
        .map(|b| {
            format!(
                "{}/{}",
                b["metadata"]["namespace"].as_str().unwrap_or_default(),
                b["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    names.sort();
    names
}

/// What `liqoctl peer` leaves in `consumer`'s tenant namespace on the
/// provider (`pkg/liqoctl/network/cluster.go`: a Configuration, a
/// GatewayServer, a PublicKey; the gateway's Connection,
/// `pkg/gateway/tunnel/wireguard/k8s.go`), each labelled
/// `liqo.io/remote-cluster-id` as Liqo labels them.
fn network_of(kube: &KubeApiServer, consumer: &str) {
    let namespace = format!("liqo-tenant-{consumer}");
    let object = |kind: &str, spec: serde_json::Value| {
        json!({"apiVersion": "networking.liqo.io/v1beta1", "kind": kind,
               "metadata": {"name": consumer, "namespace": namespace,
                            "labels": {"liqo.io/remote-cluster-id": consumer}},
               "spec": spec})
    };
    kube.apply(
        CONFIGURATIONS,
        object(
            "Configuration",
            json!({"remote": {"cidr": {"pod": ["10.1.0.0/16"], "external": ["10.2.0.0/16"]}}}),
        ),
    );
    kube.apply(
        GATEWAY_SERVERS,
        object(
            "GatewayServer",
            json!({"endpoint": {"port": 51840, "serviceType": "LoadBalancer"}, "mtu": 1340}),
        ),
    );
    kube.apply(
        PUBLIC_KEYS,
        object("PublicKey", json!({"publicKey": "AAECAw=="})),
    );
    // Not owned by the gateway here (as a peering made declaratively,
    // from `docs/advanced/peering/peering-via-cr.md`, leaves them): the
    // controller, not the garbage collector, must remove it.
    kube.apply(
        CONNECTIONS,
        object(
            "Connection",
            json!({"type": "Server", "gatewayRef": {"kind": "GatewayServer", "name": consumer, "namespace": namespace}}),
        ),
    );
}

/// The networking objects of `consumer` still on the provider.
fn network_left(kube: &KubeApiServer, consumer: &str) -> Vec<String> {
    NETWORKING
        .iter()
        .filter(|kind| {
            kube.get(**kind, Some(&format!("liqo-tenant-{consumer}")), consumer)
                .is_some()
        })
        .map(|(_, plural)| plural.to_string())
        .collect()
}

/// The test API server (Liqo's peering-user roles installed, the RBAC
/// `rbac` loads), the catalog where alice bought for cluster c1 and bob
/// for c2, and the controller running as its ServiceAccount.
struct World {
    kube: KubeApiServer,
    _dir: tempfile::TempDir,
    _env: Env,
    catalog: Catalog,
    alice: String,
    bob: String,
    alices: String,
    bobs: String,
    controller: e2e::Child,
    /// The controller's `/metrics` port.
    port: u16,
}

impl World {
    async fn start(rbac: impl FnOnce(&KubeApiServer) -> Result<()>) -> Result<Self> {
        Self::start_with(rbac, &[]).await
    }

    /// [`World::start`] with these flags added to the controller's.
    async fn start_with(
        rbac: impl FnOnce(&KubeApiServer) -> Result<()>,
        flags: &[&str],
    ) -> Result<Self> {
        let kube = KubeApiServer::start_tls().await?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        kube.write_kubeconfig_as(&kubeconfig, CONTROLLER_USER)?;
        rbac(&kube)?;
        kube.register_liqo_networking_crds()?;
        kube.apply(
            NAMESPACES,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LIQO}}),
        );
        liqo_support::install_peering_user_roles(&kube, LIQO);
        // A probe of the certificates' O: only group liqo.io may read here.
        kube.apply(
            NAMESPACES,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "o-probe"}}),
        );
        kube.apply(
            ROLES,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "reader", "namespace": "o-probe"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]}),
        );
        kube.apply(
            ROLE_BINDINGS,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "liqo-io-reads", "namespace": "o-probe"},
                   "subjects": [{"kind": "Group", "name": "liqo.io", "apiGroup": "rbac.authorization.k8s.io"}],
                   "roleRef": {"kind": "Role", "name": "reader", "apiGroup": "rbac.authorization.k8s.io"}}),
        );
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, kube.ca_pem().context("TLS server")?)?;

        // The catalog: provider 1 sells Liqo v1 with a peering user per
        // contract; alice buys for cluster c1, bob for c2.
        let (_env, catalog, alice, bob, alices, bobs) = blocking(two_buyers);
        let credentials = dir.path().join("catalog-credentials.json");
        write_private(&credentials, &provider(1).to_string())?;

        let (controller, bound) = liqo_support::peering_user_controller(
            &kube,
            &kubeconfig,
            &ca,
            &catalog.url(""),
            &credentials,
            LIQO,
        )
        // A grace no test waits out: the Tenant goes when the drain is over.
        .args(["--drain-tenant", "true", "--drain-grace", "10m"])
        .args(flags)
        .start_announced(1)?;
        Ok(World {
            kube,
            _dir: dir,
            _env,
            catalog,
            alice,
            bob,
            alices,
            bobs,
            controller,
            port: bound.port(None),
        })
    }
}

/// The controller's gauge `name` as `/metrics` shows it now.
fn gauge(port: u16, name: &str) -> Option<f64> {
    let text = blocking(|| {
        e2e::http::blocking_client(Duration::from_secs(5))
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .and_then(|r| r.text())
            .ok()
    })?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// The default of `--poll-interval` as `peering-user-controller --help`
/// states it: what the controller runs at in these tests.
fn shipped_poll_interval() -> Result<Duration> {
    let out = e2e::Spawn::new("peering-user-controller")
        .arg("--help")
        .output()?;
    let help = String::from_utf8_lossy(&out.stdout).to_string();
    let flag = help
        .split("--poll-interval")
        .nth(1)
        .context("--help names --poll-interval")?;
    let default = flag
        .split("[default: ")
        .nth(1)
        .and_then(|d| d.split(']').next())
        .context("--poll-interval states its default")?;
    edge::duration::parse(default).map_err(|e| anyhow::anyhow!("{default}: {e}"))
}

/// Issue 44: contracts come on the catalog's change stream. The
/// controller runs at the shipped `--poll-interval` (its fallback poll and
/// resync, minutes), yet a contract bought while it runs, once it is idle
/// on the stream, gets its kubeconfig within the suite's
/// [`e2e::EVENTUALLY`], less than one poll. With `--retry` at an hour, each
/// peering user's steps (its CSR approved, its certificate awaited) are
/// driven by the watch of the controller's CSRs, not by retries.
#[tokio::test(flavor = "multi_thread")]
async fn a_contract_bought_later_gets_its_kubeconfig_from_the_stream_not_a_poll() -> Result<()> {
    let poll = shipped_poll_interval()?;
    assert!(
        e2e::EVENTUALLY < poll,
        "the shipped --poll-interval ({poll:?}) would answer within the test's wait ({:?}): it proves nothing",
        e2e::EVENTUALLY
    );
    // Whole: its API server and controller live as long as the test.
    let world = World::start_with(e2e::rbac::load_shipped, &["--retry", "1h"]).await?;
    let (catalog, alice, port) = (&world.catalog, &world.alice, world.port);
    let (alices, bob, bobs) = (&world.alices, &world.bob, &world.bobs);
    // The contracts bought before it started: from the stream's snapshot.
    settle("c1's kubeconfig released", || {
        released(catalog, alice, alices)
    })
    .await?;
    settle("c2's kubeconfig released", || released(catalog, bob, bobs)).await?;
    settle("contracts followed on the stream", || {
        (gauge(port, "peering_user_controller_contracts_streamed") == Some(1.0)).then_some(())
    })
    .await?;
    assert_eq!(
        gauge(port, "peering_user_controller_catalog_reachable"),
        Some(1.0)
    );

    // Alice buys for a third cluster: the change reaches the controller.
    let third = blocking(|| {
        let r = e2e::contracts::buy(
            catalog,
            alice,
            "shop",
            "small",
            &json!({"consumerClusterID": "c3"}),
        );
        assert_eq!(r.status, 201, "{}", r.text);
        r.json["id"].as_str().unwrap_or_default().to_string()
    });
    settle("c3's kubeconfig released, with no poll", || {
        released(catalog, alice, &third)
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_peering_user_per_consumer_released_to_its_contracts_only() -> Result<()> {
    let World {
        kube,
        catalog,
        alice,
        bob,
        alices,
        bobs,
        mut controller,
        ..
    } = World::start(e2e::rbac::load_shipped).await?;

    // Each consumer's contract carries its own peering user's kubeconfig.
    let c1 = settle("c1's kubeconfig released", || {
        released(&catalog, &alice, &alices)
    })
    .await?;
    let c2 = settle("c2's kubeconfig released", || {
        released(&catalog, &bob, &bobs)
    })
    .await?;
    // (Not printed: they hold the test users' keys.)
    assert!(c1 != c2, "one kubeconfig released to both consumers");
    for (text, consumer) in [(&c1, "c1"), (&c2, "c2")] {
        let v = kube::config::Kubeconfig::from_yaml(text)?;
        let context = v.contexts[0].context.as_ref().context("a context")?;
        assert_eq!(
            context.namespace.as_deref(),
            Some(format!("liqo-tenant-{consumer}").as_str())
        );
        assert_eq!(v.auth_infos[0].name, format!("{consumer}-user"));
        let cluster = v.clusters[0].cluster.as_ref().context("a cluster")?;
        assert_eq!(cluster.server.as_deref(), Some(kube.url().as_str()));
    }
    // Nobody else gets it.
    let r = blocking(|| get(&catalog, &format!("/contracts/{alices}"), Some(&bob)));
    assert_eq!(r.status, 404, "{}", r.text);

    // What liqoctl generate peering-user makes, for each.
    for consumer in ["c1", "c2"] {
        let csr = kube
            .get(CSRS, None, &format!("liqo-peer-user-{consumer}"))
            .context("CSR")?;
        assert_eq!(
            csr["spec"]["signerName"],
            "kubernetes.io/kube-apiserver-client"
        );
        assert_eq!(csr["spec"]["expirationSeconds"], 3600);
        assert_eq!(
            csr["spec"]["usages"],
            json!(["digital signature", "key encipherment", "client auth"])
        );
        assert_eq!(
            csr["metadata"]["labels"]["liqo.io/peering-user-name"],
            format!("liqo-peer-user-{consumer}")
        );
        assert_eq!(csr["spec"]["username"], CONTROLLER_USER);
        assert_eq!(csr["status"]["conditions"][0]["type"], "Approved");
        let tenant = format!("liqo-tenant-{consumer}");
        let namespace = kube
            .get(NAMESPACES, None, &tenant)
            .context("tenant namespace")?;
        // Liqo's labels (`namespaceManager.go:143-149`), so that its
        // gateway pod, privileged with NET_ADMIN, runs there under the
        // test server's `baseline` default Pod Security level.
        for mode in ["audit", "enforce", "warn"] {
            assert_eq!(
                namespace["metadata"]["labels"][format!("pod-security.kubernetes.io/{mode}")],
                "privileged",
                "{namespace:#}"
            );
        }
        kube.create(
            kube_test_server::Kind::Pod,
            json!({"metadata": {"name": "gw-probe", "namespace": tenant},
                   "spec": liqo_model::networking::gateway_pod::pod_spec(consumer)}),
        )
        .map_err(|e| anyhow::anyhow!("the gateway pod in {tenant}: {e}"))?;
        assert!(kube
            .get(SECRETS, Some(LIQO), &format!("liqo-peer-user-{consumer}"))
            .is_some());
        assert_eq!(
            rolebindings(&kube, consumer),
            [
                format!("liqo-tenant-{consumer}/liqo-peer-user-{consumer}-tenant-ns-writer"),
                format!("liqo/liqo-peer-user-{consumer}-liqo-ns-reader"),
            ]
        );
    }

    // c1's kubeconfig is c1's peering user, in group liqo.io, with the
    // RoleBindings' permissions only.
    let as_c1 = client_of(&c1).await?;
    let before = kube.audit().len();
    assert_eq!(list_status(&as_c1, "liqo-tenant-c1", "secrets").await?, 200);
    assert_eq!(list_status(&as_c1, "liqo", "configmaps").await?, 200);
    assert_eq!(list_status(&as_c1, "o-probe", "configmaps").await?, 200);
    assert_eq!(list_status(&as_c1, "liqo-tenant-c2", "secrets").await?, 403);
    assert_eq!(list_status(&as_c1, "liqo", "secrets").await?, 403);
    let users = users_seen(&kube, before);
    assert_eq!(users.len(), 1, "{users:?}");
    let suffix = users[0]
        .strip_prefix("liqo-peer-user-c1-")
        .with_context(|| format!("authenticated as {}", users[0]))?;
    assert!(
        suffix.len() == 32 && suffix.bytes().all(|b| b.is_ascii_hexdigit()),
        "{suffix}"
    );
    let as_c2 = client_of(&c2).await?;
    assert_eq!(list_status(&as_c2, "liqo-tenant-c2", "secrets").await?, 200);
    assert_eq!(list_status(&as_c2, "liqo-tenant-c1", "secrets").await?, 403);

    // Both peered: Liqo made c1's Tenant (as the slice controller's tests
    // write it) and the slice replicated from c1, and liqoctl the
    // networking objects of each.
    kube.apply(
        TENANTS,
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "Tenant",
               "metadata": {"name": "c1", "namespace": "liqo-tenant-c1",
                            "labels": {"liqo.io/remote-cluster-id": "c1"}},
               "spec": {"clusterID": "c1", "authzPolicy": "KeysExchange", "tenantCondition": "Active"}}),
    );
    kube.apply(
        SLICES,
        json!({"apiVersion": "authentication.liqo.io/v1beta1", "kind": "ResourceSlice",
               "metadata": {"name": "c1-slice", "namespace": "liqo-tenant-c1",
                            "labels": {"liqo.io/replicated": "true", "liqo.io/originID": "c1",
                                       "liqo.io/remote-cluster-id": "c1", "liqo.io/replication": "false"}},
               "spec": {"class": "liqo-broker", "consumerClusterID": "c1", "providerClusterID": "provider-1",
                        "resources": {"cpu": "1"}, "csr": "Y3NyLWJ5dGVz"}}),
    );
    for consumer in ["c1", "c2"] {
        network_of(&kube, consumer);
    }

    // c1's contract ends: its Tenant is drained and stays while the
    // slice replicated from c1 is there.
    blocking(|| {
        let r = delete(&catalog, &format!("/purchases/{alices}"), Some(&alice));
        assert_eq!(r.status, 200, "{}", r.text);
    });
    settle("c1's Tenant drained", || {
        let tenant = kube.get(TENANTS, Some("liqo-tenant-c1"), "c1")?;
        (tenant["spec"]["tenantCondition"] == "Drained").then_some(())
    })
    .await?;
    assert_eq!(
        network_left(&kube, "c1").len(),
        4,
        "networking before the Tenant"
    );
    // Liqo's Tenant controller removes what c1 had here
    // (`handleTenantDrained`); --drain-grace (10m) is not what ends the
    // wait.
    let drained_at = kube.audit().len();
    kube.delete(SLICES, "liqo-tenant-c1/c1-slice");

    // Then its Tenant, networking objects and peering user go; c2's stay.
    settle("c1's side taken down", || {
        let gone = kube.get(CSRS, None, "liqo-peer-user-c1").is_none()
            && rolebindings(&kube, "c1").is_empty()
            && kube.get(SECRETS, Some(LIQO), "liqo-peer-user-c1").is_none();
        gone.then_some(())
    })
    .await?;
    assert!(kube.get(TENANTS, Some("liqo-tenant-c1"), "c1").is_none());
    assert_eq!(network_left(&kube, "c1"), Vec::<String>::new());
    assert_eq!(network_left(&kube, "c2").len(), 4, "c2's networking stays");
    let calls: Vec<String> = kube
        .audit()
        .iter()
        .filter(|r| r.user.as_deref() == Some(CONTROLLER_USER))
        .filter_map(|r| r.resource.as_ref())
        .filter(|a| a.verb == "delete" || (a.verb == "patch" && a.resource == "tenants"))
        .map(|a| format!("{} {}", a.verb, a.resource))
        .collect();
    assert_eq!(
        calls,
        [
            "patch tenants",
            "delete tenants",
            "delete gatewayservers",
            "delete publickeies",
            "delete connections",
            "delete configurations",
            "delete rolebindings",
            "delete rolebindings",
            "delete secrets",
            "delete certificatesigningrequests",
        ],
        "Liqo's order: Tenant, gateway, Configuration, then the peering user"
    );
    let tenant_deleted_at = kube.audit().iter().position(|r| {
        r.user.as_deref() == Some(CONTROLLER_USER)
            && r.resource
                .as_ref()
                .is_some_and(|a| a.resource == "tenants" && a.verb == "delete")
    });
    assert!(
        tenant_deleted_at.is_some_and(|at| at >= drained_at),
        "the Tenant went only once the slice had gone ({tenant_deleted_at:?}, slice gone at {drained_at})"
    );
    assert_eq!(list_status(&as_c1, "liqo-tenant-c1", "secrets").await?, 403);
    assert!(kube.get(CSRS, None, "liqo-peer-user-c2").is_some());
    assert_eq!(rolebindings(&kube, "c2").len(), 2);
    assert_eq!(list_status(&as_c2, "liqo-tenant-c2", "secrets").await?, 200);
    // Liqo's tenant namespace stays: Liqo keeps its own objects there.
    assert!(kube.get(NAMESPACES, None, "liqo-tenant-c1").is_some());

    controller.terminate(Duration::from_secs(5))?;
    Ok(())
}

/// Without `approve` on the kube-apiserver-client signer (taken from the
/// shipped ClusterRole), the API server refuses the approval with 403:
/// no certificate is issued and nothing is released. The shipped RBAC
/// holds that permission because the controller needs it.
#[tokio::test(flavor = "multi_thread")]
async fn without_approve_on_the_signer_nothing_is_issued() -> Result<()> {
    let world = World::start(|kube| {
        e2e::rbac::load_shipped_without(
            kube,
            "liqo-broker-peering-user-controller",
            "certificates.k8s.io",
            "signers",
            "approve",
        )
    })
    .await?;
    let refused = |kube: &KubeApiServer| {
        kube.audit().iter().any(|r| {
            r.user.as_deref() == Some(CONTROLLER_USER)
                && r.code == 403
                && r.resource
                    .as_ref()
                    .is_some_and(|a| a.subresource.as_deref() == Some("approval"))
        })
    };
    settle("the approval refused", || {
        refused(&world.kube).then_some(())
    })
    .await?;
    let csr = world
        .kube
        .get(CSRS, None, "liqo-peer-user-c1")
        .context("CSR")?;
    assert!(csr["status"]["conditions"].is_null(), "{csr}");
    assert!(csr["status"]["certificate"].is_null(), "{csr}");
    assert_eq!(
        released(&world.catalog, &world.alice, &world.alices),
        None,
        "nothing released"
    );
    Ok(())
}
