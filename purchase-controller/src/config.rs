//! The flags (every one with a `PURCHASE_CONTROLLER_*` variable) and
//! [`run`], which starts the HTTP port, the leader election and the
//! controller.

use std::future::Future;
use std::time::Duration;

use controller_core::flags::{
    ElectionArgs, EnvPrefix, KubeArgs, LeaseTimesArgs, Prefixed, ProbeArgs,
};
use controller_core::lease::{self, Elector, LeaseSettings, LeaseTimesError};
use tokio_util::sync::CancellationToken;

use crate::binding_copier;
use crate::liqo::Generation;
use crate::metrics::Metrics;
use crate::network_policy;
use crate::network_policy::catalog::CatalogSettings;
use crate::reconcile::{self, Settings};
use crate::secret_scope::SecretScope;

/// Flags of `purchase-controller`.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("lease_name", |a| a
    .default_value("purchase-controller")
    .help("Name of the Lease the replicas elect their leader on")),
    mut_arg("lease_namespace", |a| a
        .help("Namespace of the Lease [default: $POD_NAMESPACE, else --liqo-namespace]")),
    mut_arg("kubeconfig", |a| a
        .help("Kubeconfig of the consumer cluster [default: in-cluster, else $KUBECONFIG or ~/.kube/config]")))]
pub struct Args {
    /// The Liqo generation this cluster runs: v0 (v0.x, out-of-band peering with an auth URL and token) or v1 (v1.x, kubeconfig peering and ResourceSlices).
    #[arg(long, env = "PURCHASE_CONTROLLER_LIQO_API", value_name = "VERSION")]
    pub liqo_api: Generation,

    /// This cluster's Liqo cluster ID (sent to the catalog as the contract's consumerClusterID; ResourceSlices leave spec.consumerClusterID for Liqo to fill).
    #[arg(long, env = "PURCHASE_CONTROLLER_CLUSTER_ID", value_name = "ID")]
    pub cluster_id: String,

    /// The namespace Liqo runs in (Liqo v0.x keeps peering token Secrets there).
    #[arg(
        long,
        env = "PURCHASE_CONTROLLER_LIQO_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = "liqo"
    )]
    pub liqo_namespace: String,

    /// The fallback: a contract's changes (the provider's peering credentials attached, its end, an extension) come on the catalog's contract stream (GET /contract-changes) and wake its Purchase at once; a Purchase waiting for the provider is looked at again this often all the same, and the contracts are polled this often while the stream is unavailable.
    #[arg(long, env = "PURCHASE_CONTROLLER_POLL_INTERVAL", value_name = "DURATION", default_value = "5m", value_parser = edge::duration::parse)]
    pub poll_interval: Duration,

    /// While a peering waits on the provider's API server (its GatewayServer, nonce, Tenant: Liqo's peering user may not watch there) or on Liqo v0.x, look again after this, doubling while nothing changes up to --liqo-poll-max. What it waits on here (ForeignClusters, ResourceSlices, NamespaceOffloadings, networking objects, the signed nonce) is watched instead: see --liqo-resync.
    #[arg(long, env = "PURCHASE_CONTROLLER_LIQO_POLL_INTERVAL", value_name = "DURATION", default_value = "100ms", value_parser = edge::duration::parse)]
    pub liqo_poll_interval: Duration,

    /// The longest wait between two looks at a peering that waits on the provider's API server.
    #[arg(long, env = "PURCHASE_CONTROLLER_LIQO_POLL_MAX", value_name = "DURATION", default_value = "1s", value_parser = edge::duration::parse)]
    pub liqo_poll_max: Duration,

    /// The safety resync: while a peering waits on Liqo's objects on this cluster (watched: a change Liqo makes wakes its Purchases at once), look again this often all the same.
    #[arg(long, env = "PURCHASE_CONTROLLER_LIQO_RESYNC", value_name = "DURATION", default_value = "30s", value_parser = edge::duration::parse)]
    pub liqo_resync: Duration,

    /// Once a Purchase is ready, re-read its contract this often (to see expiry and cancellation).
    #[arg(long, env = "PURCHASE_CONTROLLER_RESYNC", value_name = "DURATION", default_value = "1m", value_parser = edge::duration::parse)]
    pub resync: Duration,

    /// First retry after the catalog or the API server failed; the delay doubles up to --retry-max.
    #[arg(long, env = "PURCHASE_CONTROLLER_RETRY", value_name = "DURATION", default_value = "1s", value_parser = edge::duration::parse)]
    pub retry: Duration,

    /// Longest delay between retries.
    #[arg(long, env = "PURCHASE_CONTROLLER_RETRY_MAX", value_name = "DURATION", default_value = "1m", value_parser = edge::duration::parse)]
    pub retry_max: Duration,

    /// Bounds each request to a catalog.
    #[arg(long, env = "PURCHASE_CONTROLLER_CATALOG_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = edge::duration::parse)]
    pub catalog_timeout: Duration,

    /// Warn this long before a contract ends: the Purchase's EndingSoon condition and a Warning Event, once per end; also when the catalog reads the contract endingSoon (its own --contract-ending-soon). Extending the contract clears it.
    #[arg(long, env = "PURCHASE_CONTROLLER_CONTRACT_ENDING_SOON", value_name = "DURATION", default_value = "1d", value_parser = edge::duration::parse)]
    pub contract_ending_soon: Duration,

    /// Liqo v1: peer with the provider itself, as `liqoctl peer` does (networking as --networking says, then authentication), through the contract's peering-user kubeconfig (false: show status.peeringCommand for a person to run, as also when the contract has no usable kubeconfig).
    #[arg(long, env = "PURCHASE_CONTROLLER_AUTO_PEER", value_name = "BOOL", default_value = "true", action = clap::ArgAction::Set)]
    pub auto_peer: bool,

    /// Liqo v1 --auto-peer: set up Liqo's networking first, as `liqoctl peer` does by default (Configurations, a GatewayServer on the provider, a GatewayClient here, PublicKeys, the Connection). false: as `liqoctl peer --networking-disabled` — offloading works, but pods here and there cannot reach each other and services are not reachable across the clusters. A Purchase's spec.networking overrides it.
    #[arg(long, env = "PURCHASE_CONTROLLER_NETWORKING", value_name = "BOOL", default_value = "true", action = clap::ArgAction::Set)]
    pub networking: bool,

    /// Liqo v1 --auto-peer with networking: the namespace Liqo runs in on the providers (their cluster-ID ConfigMap, Networks and gateway templates are read there through the peering user).
    #[arg(
        long,
        env = "PURCHASE_CONTROLLER_PROVIDER_LIQO_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = "liqo"
    )]
    pub provider_liqo_namespace: String,

    /// Copy the binding Secrets a service provider's Liqo reflected into this cluster (label broker.liqo-broker.io/binding, annotations broker.liqo-broker.io/target-namespace and target-name) into their target namespace, if it is labelled broker.liqo-broker.io/accept-bindings=true; never over a Secret the controller did not make; kept in step, deleted with the source. Needs no Purchase.
    #[arg(long, env = "PURCHASE_CONTROLLER_COPY_BINDINGS", value_name = "BOOL", default_value = "true", action = clap::ArgAction::Set)]
    pub copy_bindings: bool,

    /// Namespaces (comma-separated) whose Secrets this controller may use; empty: every namespace (a ClusterRole grants the Secret rules). Listed, Secrets are listed, watched and written in these only (a Role in each, chart value purchaseController.secretNamespaces), and a Purchase needing one elsewhere fails with reason SecretNamespaceNotListed: list the namespaces of the Purchases and, with Liqo v1 and --auto-peer, the tenant namespace liqo-tenant-<provider cluster ID> of every provider bought from. Binding copies are watched and made in these only. Liqo's namespace needs no entry.
    #[arg(
        long,
        env = "PURCHASE_CONTROLLER_SECRET_NAMESPACES",
        value_name = "NAMESPACES",
        value_delimiter = ','
    )]
    pub secret_namespaces: Vec<String>,

    /// The largest answer read from a provider's API server (a peering user's kubeconfig: the Purchase's Secret or the contract's), in bytes; a larger one is cut off at this size and the Purchase says so (ProviderAnswerTooLarge, or the credentials' RemoteClusterUnreachable). A watch: the largest event.
    #[arg(long, env = "PURCHASE_CONTROLLER_PROVIDER_MAX_RESPONSE_BYTES", value_name = "BYTES", default_value_t = controller_core::bounded::DEFAULT_MAX_RESPONSE_BYTES)]
    pub provider_max_response_bytes: usize,

    /// The longest a request to a provider's API server may take, its whole answer included (not per read: an answer trickled byte by byte is cut off at this time), and the Purchase says so (ProviderAnswerTooSlow, or the credentials' RemoteClusterUnreachable).
    #[arg(long, env = "PURCHASE_CONTROLLER_PROVIDER_REQUEST_TIMEOUT", value_name = "DURATION", default_value = "30s", value_parser = edge::duration::parse)]
    pub provider_request_timeout: Duration,

    /// Refine MultiClusterNetworkPolicies into NetworkPolicies here and, through the catalog, into each provider's document (Liqo v1 only; docs/network-policy.md).
    #[arg(long, env = "PURCHASE_CONTROLLER_NETWORK_POLICIES", value_name = "BOOL", default_value = "true", action = clap::ArgAction::Set)]
    pub network_policies: bool,

    /// The name of this domain (this consumer and every provider it holds an active contract with) in policies' `domain` [default: --cluster-id].
    #[arg(
        long,
        env = "PURCHASE_CONTROLLER_NETWORK_POLICY_DOMAIN",
        value_name = "NAME"
    )]
    pub network_policy_domain: Option<String>,

    /// Cluster IDs (comma-separated) where Liqo runs with networking.fabric.config.fullMasquerade=true: all traffic leaving them carries one address, so a policy naming pods (a Service) that run there is refused.
    #[arg(
        long,
        env = "PURCHASE_CONTROLLER_FULL_MASQUERADE_CLUSTERS",
        value_name = "IDS",
        value_delimiter = ','
    )]
    pub full_masquerade_clusters: Vec<String>,

    /// The catalog's base URL, to put each provider's network-policy document on the buyer's contracts (with --network-policy-credentials; without both, providers are not told).
    #[arg(
        long,
        env = "PURCHASE_CONTROLLER_NETWORK_POLICY_CATALOG",
        value_name = "URL"
    )]
    pub network_policy_catalog: Option<String>,

    /// The Secret (`namespace/name`) holding the buyer's catalog bearer token under --network-policy-credentials-key, as a Purchase's credentialsSecretRef.
    #[arg(
        long,
        env = "PURCHASE_CONTROLLER_NETWORK_POLICY_CREDENTIALS",
        value_name = "NAMESPACE/NAME"
    )]
    pub network_policy_credentials: Option<String>,

    /// The key of the token in --network-policy-credentials.
    #[arg(
        long,
        env = "PURCHASE_CONTROLLER_NETWORK_POLICY_CREDENTIALS_KEY",
        value_name = "KEY",
        default_value = "token"
    )]
    pub network_policy_credentials_key: String,

    /// Restricted egress on this cluster also admits the cluster DNS: its namespace (empty: not added).
    #[arg(
        long,
        env = "PURCHASE_CONTROLLER_NETWORK_POLICY_DNS_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = "kube-system"
    )]
    pub network_policy_dns_namespace: String,

    /// The labels of the cluster DNS pods (`key=value,...`).
    #[arg(
        long,
        env = "PURCHASE_CONTROLLER_NETWORK_POLICY_DNS_POD_LABELS",
        value_name = "LABELS",
        default_value = "k8s-app=kube-dns"
    )]
    pub network_policy_dns_pod_labels: String,

    /// Look again this often without a change (providers' reports come in this way).
    #[arg(long, env = "PURCHASE_CONTROLLER_NETWORK_POLICY_INTERVAL", value_name = "DURATION", default_value = "10s", value_parser = edge::duration::parse)]
    pub network_policy_interval: Duration,

    #[command(flatten)]
    pub probe: Prefixed<ProbeArgs, Env>,

    #[command(flatten)]
    pub election: Prefixed<ElectionArgs, Env>,

    /// This replica's identity in the Lease and in its Events' reportingInstance [default: $HOSTNAME-<pid>].
    #[arg(long, env = "PURCHASE_CONTROLLER_LEASE_IDENTITY", value_name = "ID")]
    pub lease_identity: Option<String>,

    #[command(flatten)]
    pub lease: Prefixed<LeaseTimesArgs, Env>,

    #[command(flatten)]
    pub kube: Prefixed<KubeArgs, Env>,
}

/// Every flag's environment variable starts `PURCHASE_CONTROLLER_`.
#[derive(Debug)]
pub struct Env;

impl EnvPrefix for Env {
    const PREFIX: &'static str = "PURCHASE_CONTROLLER";
}

/// A flag value that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--cluster-id must not be empty")]
    NoClusterId,
    #[error("--retry ({retry:?}) must be positive and at most --retry-max ({max:?})")]
    Retry { retry: Duration, max: Duration },
    #[error("--poll-interval, --resync and --liqo-resync must be positive")]
    Intervals,
    #[error("--liqo-poll-interval ({interval:?}) must be positive and at most --liqo-poll-max ({max:?})")]
    LiqoPoll { interval: Duration, max: Duration },
    #[error("--provider-max-response-bytes and --provider-request-timeout must be positive")]
    ProviderBounds,
    #[error("--network-policy-catalog and --network-policy-credentials go together")]
    NetworkPolicyCatalog,
    #[error("--network-policy-catalog is not an http(s) URL: {0}")]
    NetworkPolicyCatalogUrl(String),
    #[error("--network-policy-credentials must be namespace/name, not {0:?}")]
    NetworkPolicyCredentials(String),
    #[error(
        "--network-policy-dns-pod-labels must be key=value pairs separated by commas, not {0:?}"
    )]
    NetworkPolicyDnsLabels(String),
    #[error("--network-policy-interval must be positive")]
    NetworkPolicyInterval,
    /// A Secret named by a flag lies outside `--secret-namespaces`.
    #[error("{0}")]
    SecretNamespace(String),
    #[error(transparent)]
    LeaseTimes(#[from] LeaseTimesError),
    #[error(transparent)]
    Kube(#[from] controller_core::kubeconfig::ClientError),
    #[error(transparent)]
    Http(#[from] crate::http::HttpError),
    #[error(transparent)]
    Catalog(#[from] catalog_client::Error),
}

impl Args {
    /// Check every value that can be checked without the cluster.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.cluster_id.trim().is_empty() {
            return Err(ConfigError::NoClusterId);
        }
        if self.retry.is_zero() || self.retry > self.retry_max {
            return Err(ConfigError::Retry {
                retry: self.retry,
                max: self.retry_max,
            });
        }
        if self.poll_interval.is_zero() || self.resync.is_zero() || self.liqo_resync.is_zero() {
            return Err(ConfigError::Intervals);
        }
        if self.liqo_poll_interval.is_zero() || self.liqo_poll_interval > self.liqo_poll_max {
            return Err(ConfigError::LiqoPoll {
                interval: self.liqo_poll_interval,
                max: self.liqo_poll_max,
            });
        }
        if self.provider_max_response_bytes == 0 || self.provider_request_timeout.is_zero() {
            return Err(ConfigError::ProviderBounds);
        }
        if self.election.leader_elect {
            self.lease.times().validate()?;
        }
        if self.network_policies {
            let settings = self.network_policy_settings()?;
            if let Some(catalog) = &settings.catalog {
                self.secret_scope()
                    .configured_secret("--network-policy-credentials", &catalog.secret_namespace)
                    .map_err(ConfigError::SecretNamespace)?;
            }
        }
        Ok(())
    }

    /// Where Secrets may be used (`--secret-namespaces`).
    pub fn secret_scope(&self) -> SecretScope {
        SecretScope::from_list(&self.secret_namespaces)
    }

    /// The multi-cluster network policies' settings.
    pub fn network_policy_settings(
        &self,
    ) -> Result<network_policy::controller::Settings, ConfigError> {
        if self.network_policy_interval.is_zero() {
            return Err(ConfigError::NetworkPolicyInterval);
        }
        let catalog = match (
            &self.network_policy_catalog,
            &self.network_policy_credentials,
        ) {
            (None, None) => None,
            (Some(url), Some(secret)) => {
                let url = reqwest::Url::parse(url)
                    .ok()
                    .filter(|u| matches!(u.scheme(), "http" | "https"))
                    .ok_or_else(|| ConfigError::NetworkPolicyCatalogUrl(url.clone()))?;
                let (namespace, name) = secret
                    .split_once('/')
                    .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
                    .ok_or_else(|| ConfigError::NetworkPolicyCredentials(secret.clone()))?;
                Some(CatalogSettings {
                    url,
                    secret_namespace: namespace.to_string(),
                    secret_name: name.to_string(),
                    secret_key: self.network_policy_credentials_key.clone(),
                })
            }
            _ => return Err(ConfigError::NetworkPolicyCatalog),
        };
        let consumer = self.cluster_id.trim().to_string();
        let dns_namespace = self.network_policy_dns_namespace.trim();
        let dns = if dns_namespace.is_empty() {
            None
        } else {
            let labels = &self.network_policy_dns_pod_labels;
            let pod_labels = labels
                .split(',')
                .map(|pair| {
                    pair.split_once('=')
                        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                        .filter(|(k, _)| !k.is_empty())
                })
                .collect::<Option<std::collections::BTreeMap<_, _>>>()
                .ok_or_else(|| ConfigError::NetworkPolicyDnsLabels(labels.clone()))?;
            Some(network_policy::snapshot::Dns {
                namespace: dns_namespace.to_string(),
                pod_labels,
            })
        };
        Ok(network_policy::controller::Settings {
            dns,
            domain: self
                .network_policy_domain
                .as_deref()
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map_or_else(|| consumer.clone(), str::to_string),
            consumer,
            full_masquerade: self
                .full_masquerade_clusters
                .iter()
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect(),
            interval: self.network_policy_interval,
            catalog,
        })
    }
}

/// The Lease's namespace when `--lease-namespace` is not given: the pod's
/// (`LeaseSettings::from_parts` reads `$POD_NAMESPACE`), else Liqo's — where
/// deploy/ installs the controller and its Lease Role — rather than the
/// kubeconfig's namespace, which says nothing about where the Role is.
fn lease_namespace(args: &Args) -> Option<String> {
    args.election.lease_namespace.clone().or_else(|| {
        std::env::var_os("POD_NAMESPACE")
            .filter(|n| !n.is_empty())
            .is_none()
            .then(|| args.liqo_namespace.clone())
    })
}

/// With `--copy-bindings`, the binding copies until `stop`.
fn copier(
    enabled: bool,
    client: &kube::Client,
    settings: &Settings,
    stop: CancellationToken,
) -> Option<impl Future<Output = ()>> {
    enabled.then(|| {
        binding_copier::run(
            client.clone(),
            settings.cluster_id.clone(),
            settings.secret_scope.clone(),
            settings.resync,
            reconcile::reporter(settings),
            stop,
        )
    })
}

/// With `--network-policies` (Liqo v1), the multi-cluster network
/// policies until `stop`.
fn network_policies(
    settings: Option<&network_policy::controller::Settings>,
    client: &kube::Client,
    http: &reqwest::Client,
    fallback_poll: Duration,
    stop: CancellationToken,
) -> Option<impl Future<Output = ()>> {
    settings.map(|settings| {
        let follower =
            catalog_client::contract_follower::FollowerOptions::polling_every(fallback_poll);
        network_policy::controller::run(
            client.clone(),
            settings.clone(),
            http.clone(),
            follower,
            stop,
        )
    })
}

/// The controller and, with `--copy-bindings` and `--network-policies`,
/// the binding copies and the network policies beside it: all stop on the
/// same token.
async fn beside(
    controller: impl Future<Output = ()>,
    copies: Option<impl Future<Output = ()>>,
    policies: Option<impl Future<Output = ()>>,
) {
    async fn optional(f: Option<impl Future<Output = ()>>) {
        if let Some(f) = f {
            f.await;
        }
    }
    tokio::join!(controller, optional(copies), optional(policies));
}

/// Run until `shutdown` is cancelled: the HTTP port, then (with leader
/// election) the controller whenever this replica leads.
pub async fn run(args: &Args, shutdown: CancellationToken) -> Result<(), ConfigError> {
    args.validate()?;
    crate::authentication::set_provider_bounds(controller_core::bounded::Bounds {
        max_response_bytes: args.provider_max_response_bytes,
        request_timeout: args.provider_request_timeout,
        ..Default::default()
    });
    let client = args.kube.client().await?;
    let metrics = Metrics::new();
    let http = args.probe.spawn(None, metrics.clone(), &shutdown).await?;
    let identity = args
        .lease_identity
        .clone()
        .unwrap_or_else(|| lease::replica_identity("purchase-controller"));
    let settings = Settings {
        generation: args.liqo_api,
        cluster_id: args.cluster_id.trim().to_string(),
        liqo_namespace: args.liqo_namespace.clone(),
        poll: args.poll_interval,
        liqo_poll: args.liqo_poll_interval,
        liqo_poll_max: args.liqo_poll_max,
        liqo_resync: args.liqo_resync,
        resync: args.resync,
        retry: args.retry,
        retry_max: args.retry_max,
        catalog_timeout: args.catalog_timeout,
        ending_soon: args.contract_ending_soon,
        auto_peer: args.auto_peer,
        networking: args.networking,
        provider_liqo_namespace: args.provider_liqo_namespace.clone(),
        instance: identity.clone(),
        secret_scope: args.secret_scope(),
    };
    tracing::info!(namespaces = %settings.secret_scope.describe(), "Secrets used in these namespaces");
    // Built once, so a client that cannot be built fails the process
    // rather than every term of leadership.
    let http_client = crate::catalog::http_client(settings.catalog_timeout)?;
    let policy_settings = match (args.network_policies, args.liqo_api) {
        (true, Generation::V1) => Some(args.network_policy_settings()?),
        (true, Generation::V0) => {
            tracing::info!("multi-cluster network policies are off: they need Liqo v1 networking");
            None
        }
        (false, _) => None,
    };
    if args.election.leader_elect {
        let name = args
            .election
            .lease_name
            .clone()
            .unwrap_or_else(|| "purchase-controller".to_string());
        let lease = LeaseSettings::from_parts(
            &client,
            name,
            lease_namespace(args),
            identity,
            args.lease.times(),
        );
        let elector = Elector::new(client.clone(), lease);
        let lead_metrics = metrics.clone();
        let stopping = shutdown.clone();
        let copy_bindings = args.copy_bindings;
        lease::run_elected(elector, metrics, shutdown.clone(), move |term| {
            // `term` ends with the process too; only a term that ends while
            // the process goes on is a lost Lease, which must stop writes
            // at once rather than let in-flight reconciles finish.
            let lost = CancellationToken::new();
            let (ended, lost_on, stopping) = (term.clone(), lost.clone(), stopping.clone());
            tokio::spawn(async move {
                ended.cancelled().await;
                if !stopping.is_cancelled() {
                    lost_on.cancel();
                }
            });
            let copies = copier(copy_bindings, &client, &settings, term.clone());
            let policies = network_policies(
                policy_settings.as_ref(),
                &client,
                &http_client,
                settings.poll,
                term.clone(),
            );
            let controller = reconcile::run(
                client.clone(),
                http_client.clone(),
                settings.clone(),
                lead_metrics.clone(),
                term,
                lost,
            );
            beside(controller, copies, policies)
        })
        .await;
    } else {
        metrics.reconcile().set_leading(true);
        let copies = copier(args.copy_bindings, &client, &settings, shutdown.clone());
        let policies = network_policies(
            policy_settings.as_ref(),
            &client,
            &http_client,
            settings.poll,
            shutdown.clone(),
        );
        let controller = reconcile::run(
            client,
            http_client,
            settings,
            metrics,
            shutdown.clone(),
            CancellationToken::new(),
        );
        beside(controller, copies, policies).await;
    }
    shutdown.cancel();
    edge::probe::join(http).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn flags_parse_and_are_checked() {
        let cli = Cli::try_parse_from(["x", "--liqo-api", "v1.2.0", "--cluster-id", "c1"]).unwrap();
        assert_eq!(cli.args.liqo_api, Generation::V1);
        assert_eq!(cli.args.liqo_namespace, "liqo");
        assert!(cli.args.auto_peer);
        assert!(cli.args.networking);
        assert!(cli.args.copy_bindings);
        assert_eq!(cli.args.provider_liqo_namespace, "liqo");
        cli.args.validate().unwrap();
        assert!(cli.args.election.leader_elect);
        assert_eq!(
            cli.args.election.lease_name.as_deref(),
            Some("purchase-controller")
        );
        let v1_with = |extra: &[&str]| {
            let base = ["x", "--liqo-api", "v1", "--cluster-id", "c"];
            Cli::try_parse_from(base.iter().chain(extra)).unwrap().args
        };
        assert!(matches!(
            v1_with(&["--lease-duration", "2s", "--lease-renew-deadline", "3s"]).validate(),
            Err(ConfigError::LeaseTimes(_))
        ));
        let cli = Cli::try_parse_from(["x", "--liqo-api", "v0.10", "--cluster-id", " "]).unwrap();
        assert_eq!(cli.args.liqo_api, Generation::V0);
        assert!(matches!(cli.args.validate(), Err(ConfigError::NoClusterId)));
        assert!(Cli::try_parse_from(["x", "--liqo-api", "v2", "--cluster-id", "c"]).is_err());
        assert!(matches!(
            v1_with(&["--retry", "2m"]).validate(),
            Err(ConfigError::Retry { .. })
        ));
        // The contract stream wakes Purchases: the poll is a fallback, as
        // long as the follower's.
        let defaults = v1_with(&[]);
        assert_eq!(defaults.poll_interval, Duration::from_secs(300));
        assert_eq!(
            defaults.poll_interval,
            catalog_client::contract_follower::FollowerOptions::default().fallback_poll
        );
        assert_eq!(
            (defaults.liqo_poll_interval, defaults.liqo_poll_max),
            (Duration::from_millis(100), Duration::from_secs(1))
        );
        // Liqo's objects here are watched: their timer is a safety resync.
        assert_eq!(defaults.liqo_resync, Duration::from_secs(30));
        assert!(matches!(
            v1_with(&["--liqo-resync", "0s"]).validate(),
            Err(ConfigError::Intervals)
        ));
        assert!(matches!(
            v1_with(&["--liqo-poll-interval", "2s"]).validate(),
            Err(ConfigError::LiqoPoll { .. })
        ));
        assert!(matches!(
            v1_with(&["--liqo-poll-interval", "0s"]).validate(),
            Err(ConfigError::LiqoPoll { .. })
        ));
    }

    #[test]
    fn secret_namespaces_default_to_every_namespace_and_bound_the_configured_secret() {
        let with = |extra: &[&str]| {
            let base = ["x", "--liqo-api", "v1", "--cluster-id", "c1"];
            Cli::try_parse_from(base.iter().chain(extra)).unwrap().args
        };
        assert_eq!(with(&[]).secret_scope(), SecretScope::Cluster);
        let listed = with(&["--secret-namespaces", "team,liqo-tenant-p1"]);
        assert!(listed.secret_scope().admits("liqo-tenant-p1"));
        assert!(!listed.secret_scope().admits("other"));
        listed.validate().unwrap();
        let policies = [
            "--secret-namespaces",
            "team",
            "--network-policy-catalog",
            "https://catalog.example",
            "--network-policy-credentials",
        ];
        let outside = with(&[&policies[..], &["liqo/token"]].concat());
        match outside.validate() {
            Err(ConfigError::SecretNamespace(said)) => {
                assert!(said.contains("namespace liqo"), "{said}")
            }
            other => panic!("{other:?}"),
        }
        with(&[&policies[..], &["team/token"]].concat())
            .validate()
            .unwrap();
    }

    #[test]
    fn network_policy_flags_default_and_are_checked() {
        let with = |extra: &[&str]| {
            let base = ["x", "--liqo-api", "v1", "--cluster-id", "c1"];
            Cli::try_parse_from(base.iter().chain(extra)).unwrap().args
        };
        let args = with(&[]);
        assert!(args.network_policies);
        let s = args.network_policy_settings().unwrap();
        assert_eq!((s.domain.as_str(), s.consumer.as_str()), ("c1", "c1"));
        assert_eq!(s.interval, Duration::from_secs(10));
        assert!(s.catalog.is_none() && s.full_masquerade.is_empty());
        let dns = s.dns.unwrap();
        assert_eq!(dns.namespace, "kube-system");
        assert_eq!(dns.pod_labels["k8s-app"], "kube-dns");
        assert!(with(&["--network-policy-dns-namespace", ""])
            .network_policy_settings()
            .unwrap()
            .dns
            .is_none());
        assert!(matches!(
            with(&["--network-policy-dns-pod-labels", "k8s-app"]).validate(),
            Err(ConfigError::NetworkPolicyDnsLabels(_))
        ));
        let s = with(&[
            "--network-policy-domain",
            "d",
            "--full-masquerade-clusters",
            "p1,p2",
            "--network-policy-catalog",
            "https://catalog.example",
            "--network-policy-credentials",
            "liqo/token",
        ])
        .network_policy_settings()
        .unwrap();
        assert_eq!(s.domain, "d");
        assert_eq!(s.full_masquerade.len(), 2);
        let catalog = s.catalog.unwrap();
        assert_eq!(
            (
                catalog.secret_namespace.as_str(),
                catalog.secret_name.as_str(),
                catalog.secret_key.as_str()
            ),
            ("liqo", "token", "token")
        );
        assert!(matches!(
            with(&["--network-policy-catalog", "https://c"]).validate(),
            Err(ConfigError::NetworkPolicyCatalog)
        ));
        assert!(matches!(
            with(&[
                "--network-policy-catalog",
                "https://c",
                "--network-policy-credentials",
                "token"
            ])
            .validate(),
            Err(ConfigError::NetworkPolicyCredentials(_))
        ));
        assert!(!with(&["--network-policies", "false"]).network_policies);
    }
}
