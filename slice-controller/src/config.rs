//! The controller's flags ([`ControllerArgs`], a clap `Args` that
//! `resource-monitor` flattens into its own; every flag has a
//! `RESOURCE_MONITOR_*` variable) and [`run`], which starts the HTTP port,
//! the leader election and the controller.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;
use kube::Client;
use resource_reader::ResourceReader;
use tokio_util::sync::CancellationToken;

use crate::decision::{GrantPolicy, ShrinkPolicy};
use crate::enforcement::reader::{Enforcement, ReaderSettings};
use crate::enforcement::{SoldAsEnforced, UnknownPolicy};
use crate::metrics::Metrics;
use crate::model::{ClassOffer, NodeExtras};
use crate::reconcile::{self, Settings};
use controller_core::flags::{ElectionArgs, EnvPrefix, LeaseTimesArgs, Prefixed, ProbeArgs};
use controller_core::lease::{self, Elector, LeaseSettings, LeaseTimesError};
use quantity::ResourceList;

/// What `resource-monitor --liqo-api` asks for: a gRPC wire shape for Liqo
/// v0.x, or `v1` (no plugin API: this controller, no gRPC server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiqoMode {
    Grpc(resource_reader::LiqoApi),
    V1,
}

impl std::str::FromStr for LiqoMode {
    type Err = String;
    /// `v1`, `1`, `v1.2`, `v1.0.3` → [`LiqoMode::V1`]; anything else as a
    /// wire shape (`v0.5`, `v0.6`, `v0.9`, …).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        let version = lower.strip_prefix('v').unwrap_or(&lower);
        if version.split('.').next() == Some("1") {
            return Ok(LiqoMode::V1);
        }
        s.parse::<resource_reader::LiqoApi>()
            .map(LiqoMode::Grpc)
            .map_err(|e| format!("{e}, or v1 (ResourceSlice classes)"))
    }
}

/// Flags of the ResourceSlice class controller (`--liqo-api v1`).
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("http_listen", |a| a
        .default_value("0.0.0.0:8081")
        .help("Serve /healthz, /readyz and /metrics for the controller on this address")),
    mut_arg("lease_name", |a| a.help("Name of the Lease [default: slice-controller-<class>]")),
    mut_arg("lease_retry", |a| a.help("How often candidates try to take the Lease and the leader renews it")),
)]
pub struct ControllerArgs {
    /// Liqo v1: the ResourceSlice class this process controls (spec.class). Slices of other classes are never touched.
    #[arg(long, env = "RESOURCE_MONITOR_CLASS", value_name = "NAME")]
    pub class: Option<String>,

    /// How much of a slice's request to grant, out of what the chain offers its consumer less what the consumer's other accepted slices of the class hold: fit (all or deny), clamp (per resource, at most what remains), offer (what remains, whatever was asked), contracts (as clamp, within the consumer's active contracts in the catalog: needs --catalog-url and --catalog-credentials-file; no contract, nothing granted).
    #[arg(
        long,
        env = "RESOURCE_MONITOR_GRANT_POLICY",
        value_name = "POLICY",
        default_value = "fit"
    )]
    pub grant_policy: GrantPolicy,

    /// When a consumer's allowance shrinks below what it was granted: keep (grants stand; only new requests see less) or follow (accepted slices are re-decided: shrunk in place under clamp, offer and contracts, every key kept; revoked — Accepted, every key 0, liqo.io/cordon — under fit when they no longer fit and under contracts when none is left; a new grant lifts the cordon).
    #[arg(
        long,
        env = "RESOURCE_MONITOR_ON_SHRINK",
        value_name = "BEHAVIOUR",
        default_value = "keep"
    )]
    pub on_shrink: ShrinkPolicy,

    /// The catalog's base URL (e.g. https://catalog.example): needed by --grant-policy contracts; under any policy, Liqo's enforcement level is reported to it (PUT /provider/enforcement) and shown on this provider's offers.
    #[arg(long, env = "RESOURCE_MONITOR_CATALOG_URL", value_name = "URL")]
    pub catalog_url: Option<url::Url>,
    /// With --catalog-url: the provider's catalog credentials, JSON {clusterID, clusterName, authURL, token} (what POST /authenticate takes); refused if group or others may read it.
    #[arg(
        long,
        env = "RESOURCE_MONITOR_CATALOG_CREDENTIALS_FILE",
        value_name = "FILE"
    )]
    pub catalog_credentials_file: Option<PathBuf>,
    /// With --grant-policy contracts: fallback poll and resync. Contracts arrive on the catalog's change stream (consumers whose contracts changed are reconciled at once); this is how often the catalog is asked (conditionally) for the active contracts while the stream is unavailable, and how often the followed contracts are read again.
    #[arg(long, env = "RESOURCE_MONITOR_CONTRACTS_POLL_INTERVAL", value_name = "DURATION", default_value = "5m", value_parser = edge::duration::parse)]
    pub contracts_poll_interval: Duration,
    /// Re-read the chain for every consumer this often, notified or not.
    #[arg(long, env = "RESOURCE_MONITOR_RESYNC", value_name = "DURATION", default_value = "5m", value_parser = edge::duration::parse)]
    pub resync: Duration,

    /// Wait this long before retrying a reconcile that failed (the API server refused or did not answer). A 409 Conflict is not a failure: it is re-read and rewritten at once.
    #[arg(long, env = "RESOURCE_MONITOR_ERROR_RETRY", value_name = "DURATION", default_value = "2s", value_parser = edge::duration::parse)]
    pub error_retry: Duration,

    /// Consumers (Tenants) reconciled at once; each writes up to 16 of its slices at a time. Unbounded, 1,000 consumers deciding together opened thousands of connections to the API server at once, more than its listen queue holds.
    #[arg(long, env = "RESOURCE_MONITOR_CONCURRENCY", value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,

    /// The keys every grant carries and the value each gets when the policy's grant lacks it (not asked for, or sold by none of the consumer's contracts), at most what was asked, what the chain offers the consumer and what its contracts sell of it: Liqo's virtual node is Ready only with cpu > 0 and memory > 0 and schedules pods only with a pods allocatable. Per slice, not counted against allowances. Must name cpu, memory and pods, each above 0.
    #[arg(long, env = "RESOURCE_MONITOR_GRANT_DEFAULTS", value_name = "NAME=QUANTITY,...", default_value = "cpu=4,memory=8Gi,pods=110", value_parser = parse_grant_defaults)]
    pub grant_defaults: ResourceList,

    /// Storage classes of this cluster offered on the consumer's virtual node, written into every accepted grant (status.storageClasses); NAME:default marks Liqo's default one. Liqo fills these only for its own default class.
    #[arg(
        long,
        env = "RESOURCE_MONITOR_STORAGE_CLASSES",
        value_name = "NAME[:default],...",
        value_delimiter = ','
    )]
    pub storage_classes: Vec<ClassOffer>,

    /// Ingress classes offered on the consumer's virtual node (status.ingressClasses); NAME:default marks the default one.
    #[arg(
        long,
        env = "RESOURCE_MONITOR_INGRESS_CLASSES",
        value_name = "NAME[:default],...",
        value_delimiter = ','
    )]
    pub ingress_classes: Vec<ClassOffer>,

    /// Load-balancer classes offered on the consumer's virtual node (status.loadBalancerClasses); NAME:default marks the default one.
    #[arg(
        long,
        env = "RESOURCE_MONITOR_LOAD_BALANCER_CLASSES",
        value_name = "NAME[:default],...",
        value_delimiter = ','
    )]
    pub load_balancer_classes: Vec<ClassOffer>,

    /// Labels Liqo puts on the consumer's virtual node (status.nodeLabels), e.g. the offer's provider labels: KEY=VALUE,...
    #[arg(long, env = "RESOURCE_MONITOR_NODE_LABELS", value_name = "KEY=VALUE,...", value_parser = parse_labels, default_value = "")]
    pub node_labels: Labels,

    /// Node selector Liqo applies to pods offloaded through the grant (status.nodeSelector): KEY=VALUE,...
    #[arg(long, env = "RESOURCE_MONITOR_NODE_SELECTOR", value_name = "KEY=VALUE,...", value_parser = parse_labels, default_value = "")]
    pub node_selector: Labels,

    /// What the capacity this class grants is sold with, checked against Liqo's enforcement settings read from its Deployments: on (Liqo's resource enforcement on: its ShadowPod webhook holds each consumer's pods to the Quota made from the grant), soft or hard (also defaultLimitsEnforcement at least Soft or Hard), no (report only). While the settings fall short no new grants are made (reason LiqoEnforcementOff); grants held are kept or shrunk.
    #[arg(
        long,
        env = "RESOURCE_MONITOR_SOLD_AS_ENFORCED",
        value_name = "LEVEL",
        default_value = "on"
    )]
    pub sold_as_enforced: SoldAsEnforced,

    /// While Liqo's enforcement settings cannot be read (reading its Deployments refused or they are missing): grant (as if met, reported as unknown) or refuse (no new grants, reason LiqoEnforcementUnknown).
    #[arg(
        long,
        env = "RESOURCE_MONITOR_IF_ENFORCEMENT_UNKNOWN",
        value_name = "ACTION",
        default_value = "grant"
    )]
    pub if_enforcement_unknown: UnknownPolicy,

    /// The namespace Liqo is installed in (its webhook's and controller-manager's Deployments).
    #[arg(
        long,
        env = "RESOURCE_MONITOR_LIQO_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = "liqo"
    )]
    pub liqo_namespace: String,

    /// Liqo's webhook Deployment, whose --enable-resource-enforcement says whether Quotas are enforced.
    #[arg(
        long,
        env = "RESOURCE_MONITOR_LIQO_WEBHOOK_DEPLOYMENT",
        value_name = "NAME",
        default_value = "liqo-webhook"
    )]
    pub liqo_webhook_deployment: String,

    /// Liqo's controller-manager Deployment, whose --default-limits-enforcement is every Quota's level.
    #[arg(
        long,
        env = "RESOURCE_MONITOR_LIQO_CONTROLLER_MANAGER_DEPLOYMENT",
        value_name = "NAME",
        default_value = "liqo-controller-manager"
    )]
    pub liqo_controller_manager_deployment: String,

    /// How often Liqo's enforcement settings are read again.
    #[arg(long, env = "RESOURCE_MONITOR_LIQO_SETTINGS_INTERVAL", value_name = "DURATION", default_value = "1m", value_parser = edge::duration::parse)]
    pub liqo_settings_interval: Duration,

    #[command(flatten)]
    pub probe: Prefixed<ProbeArgs, Env>,

    #[command(flatten)]
    pub election: Prefixed<ElectionArgs, Env>,

    /// This replica's identity in the Lease [default: $HOSTNAME-<pid>].
    #[arg(long, env = "RESOURCE_MONITOR_LEASE_IDENTITY", value_name = "ID")]
    pub lease_identity: Option<String>,

    #[command(flatten)]
    pub lease: Prefixed<LeaseTimesArgs, Env>,
}

/// `KEY=VALUE` pairs of `--node-labels` and `--node-selector`.
pub type Labels = BTreeMap<String, String>;

/// The keys [`ControllerArgs::grant_defaults`] must name.
pub const MANDATORY_KEYS: [&str; 3] = ["cpu", "memory", "pods"];

/// `--grant-defaults`: `NAME=QUANTITY` pairs naming each of
/// [`MANDATORY_KEYS`] above 0.
fn parse_grant_defaults(text: &str) -> Result<ResourceList, String> {
    let mut list = ResourceList::new();
    for (name, value) in parse_pairs(text)? {
        let quantity: quantity::Quantity = value
            .parse()
            .map_err(|e| format!("{name}={value}: not a quantity: {e}"))?;
        list.insert(name, quantity);
    }
    for key in MANDATORY_KEYS {
        match list.get(key) {
            None => {
                return Err(format!(
                    "must name {key} (every grant carries cpu, memory and pods)"
                ))
            }
            Some(q) if q.is_zero() => {
                return Err(format!(
                    "{key} must be above 0 (Liqo's virtual node needs it)"
                ))
            }
            Some(_) => {}
        }
    }
    Ok(list)
}

/// `--node-labels`, `--node-selector`: `KEY=VALUE` pairs (or nothing).
fn parse_labels(text: &str) -> Result<Labels, String> {
    Ok(parse_pairs(text)?.into_iter().collect())
}

/// `a=1,b=2` → pairs; an entry without `=`, with an empty key, or a key
/// given twice is refused, naming it.
fn parse_pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((key, value)) = entry.split_once('=') else {
            return Err(format!("{entry:?}: expected KEY=VALUE"));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("{entry:?}: empty key"));
        }
        if pairs.iter().any(|(k, _)| k == key) {
            return Err(format!("{key} given twice"));
        }
        pairs.push((key.to_string(), value.trim().to_string()));
    }
    Ok(pairs)
}

/// Every flag's environment variable starts `RESOURCE_MONITOR_` (the flags
/// are `resource-monitor`'s).
#[derive(Debug)]
pub struct Env;

impl EnvPrefix for Env {
    const PREFIX: &'static str = "RESOURCE_MONITOR";
}

/// A flag value that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--liqo-api v1 needs --class NAME (the ResourceSlice class to control)")]
    NoClass,
    #[error("--class: the classes \"\" and \"default\" belong to Liqo's own controller")]
    LiqoClass,
    #[error(transparent)]
    LeaseTimes(#[from] LeaseTimesError),
    #[error(transparent)]
    Kube(#[from] controller_core::kubeconfig::ClientError),
    #[error(transparent)]
    Http(#[from] crate::http::HttpError),
    #[error("--grant-policy contracts needs --catalog-url and --catalog-credentials-file")]
    NoCatalog,
    #[error("--catalog-url and --catalog-credentials-file go together")]
    CatalogIncomplete,
    #[error("--contracts-poll-interval must be positive")]
    PollInterval,
    #[error(transparent)]
    Catalog(#[from] crate::contracts::ClientError),
}

impl ControllerArgs {
    /// The class, checked: set, and not one of Liqo's own.
    pub fn class(&self) -> Result<&str, ConfigError> {
        match self.class.as_deref() {
            None => Err(ConfigError::NoClass),
            Some("" | "default") => Err(ConfigError::LiqoClass),
            Some(class) => Ok(class),
        }
    }

    /// Check every value that can be checked without the cluster.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.class()?;
        let complete = self.catalog_url.is_some() && self.catalog_credentials_file.is_some();
        let any = self.catalog_url.is_some() || self.catalog_credentials_file.is_some();
        if self.grant_policy == GrantPolicy::Contracts && !complete {
            return Err(ConfigError::NoCatalog);
        }
        // Under the other policies the catalog only hears the enforcement
        // level: one flag without the other is a mistake, not a choice.
        if any && !complete {
            return Err(ConfigError::CatalogIncomplete);
        }
        if self.contracts_poll_interval.is_zero() {
            return Err(ConfigError::PollInterval);
        }
        if self.election.leader_elect {
            self.lease.times().validate()?;
        }
        Ok(())
    }
}

/// A session with the catalog as this provider, when its address and
/// credentials are given: the credentials loaded (refusing a file others
/// may read), nothing contacted yet.
fn catalog_session(
    args: &ControllerArgs,
) -> Result<Option<crate::contracts::CatalogClient>, ConfigError> {
    use crate::contracts::{CatalogClient, ClientError};
    use catalog_client::{credentials, Exposure, Http, Login};
    let (Some(url), Some(file)) = (&args.catalog_url, &args.catalog_credentials_file) else {
        return Ok(None);
    };
    let credentials = credentials::load_named("--catalog-credentials-file", file, Exposure::Refuse)
        .map_err(ClientError::from)?;
    let http = Http::client(
        CATALOG_TIMEOUT,
        concat!("slice-controller/", env!("CARGO_PKG_VERSION")),
    )?;
    // No file to re-read: credentials refused by the catalog stay refused
    // (each poll reports it) until the controller is restarted, as before.
    Ok(Some(CatalogClient::new(
        Http::new(http, url.clone()),
        Login::Provider {
            credentials,
            file: None,
        },
    )))
}

/// Under `contracts`: start following the catalog (whether or not this
/// replica leads, so a new leader decides from current contracts at once).
fn follow_contracts(
    args: &ControllerArgs,
    metrics: &Metrics,
    shutdown: &CancellationToken,
) -> Result<Option<crate::contracts::Contracts>, ConfigError> {
    use crate::contracts::{Contracts, FollowerSettings};
    use catalog_client::contract_follower::{ContractFollower, FollowerOptions};
    if args.grant_policy != GrantPolicy::Contracts {
        return Ok(None);
    }
    let Some(client) = catalog_session(args)? else {
        return Ok(None);
    };
    tracing::info!(catalog = %client.http().base(), provider = client.cluster_id(), "following the provider's contracts");
    metrics.expect_contracts();
    let provider = client.cluster_id().to_string();
    // The follower's own session (its stream holds the token as long as it
    // lasts); the enforcement report has another.
    let follower = ContractFollower::start(
        client,
        FollowerOptions::polling_every(args.contracts_poll_interval),
        shutdown.clone(),
    );
    Ok(Some(Contracts::follow(
        follower,
        provider,
        FollowerSettings {
            interval: args.contracts_poll_interval,
        },
        metrics.clone(),
        shutdown.clone(),
    )))
}

/// Bound on each request to the catalog.
const CATALOG_TIMEOUT: Duration = Duration::from_secs(10);

/// Run the controller of `args.class` over `reader` until `shutdown` is
/// cancelled: the HTTP port, then (with leader election) the controller
/// whenever this replica leads.
pub async fn run(
    client: Client,
    reader: Arc<dyn ResourceReader>,
    args: &ControllerArgs,
    shutdown: CancellationToken,
) -> Result<(), ConfigError> {
    args.validate()?;
    let class = args.class()?.to_string();
    let metrics = Metrics::new();
    let http = args
        .probe
        .spawn(Some("controller"), metrics.clone(), &shutdown)
        .await?;
    let contracts = follow_contracts(args, &metrics, &shutdown)?;
    // Read by every replica (a standby's /metrics and /readyz say it too),
    // once before the first decision.
    let enforcement = Enforcement::follow(
        client.clone(),
        ReaderSettings {
            namespace: args.liqo_namespace.clone(),
            webhook: args.liqo_webhook_deployment.clone(),
            controller_manager: args.liqo_controller_manager_deployment.clone(),
            interval: args.liqo_settings_interval,
            sold: args.sold_as_enforced,
            unknown: args.if_enforcement_unknown,
        },
        metrics.clone(),
        shutdown.clone(),
    )
    .await;
    // Every replica reports, as every replica reads: the same level.
    if let Some(client) = catalog_session(args)? {
        crate::enforcement_report::spawn(
            client,
            &enforcement,
            args.liqo_settings_interval,
            shutdown.clone(),
        );
    }

    let identity = args
        .lease_identity
        .clone()
        .unwrap_or_else(|| lease::replica_identity("slice-controller"));
    let settings = Settings {
        class: class.clone(),
        policy: args.grant_policy,
        shrink: args.on_shrink,
        defaults: args.grant_defaults.clone(),
        extras: NodeExtras {
            storage_classes: args.storage_classes.clone(),
            ingress_classes: args.ingress_classes.clone(),
            load_balancer_classes: args.load_balancer_classes.clone(),
            node_labels: args.node_labels.clone(),
            node_selector: args.node_selector.clone(),
        },
        resync: args.resync,
        retry: args.error_retry,
        concurrency: args.concurrency,
        reporter: Reporter {
            controller: "liqo-broker-slice-controller".to_string(),
            instance: Some(identity.clone()),
        },
    };
    tracing::info!(
        class = %class,
        policy = settings.policy.as_str(),
        on_shrink = ?settings.shrink,
        leader_elect = args.election.leader_elect,
        "ResourceSlice class controller starting"
    );
    if args.election.leader_elect {
        let name = args
            .election
            .lease_name
            .clone()
            .unwrap_or_else(|| format!("slice-controller-{class}"));
        let lease = LeaseSettings::from_parts(
            &client,
            name,
            args.election.lease_namespace.clone(),
            identity,
            args.lease.times(),
        );
        let elector = Elector::new(client.clone(), lease);
        let lead_metrics = metrics.clone();
        lease::run_elected(elector, metrics, shutdown.clone(), move |term| {
            reconcile::run(
                client.clone(),
                reader.clone(),
                settings.clone(),
                contracts.clone(),
                Some(enforcement.clone()),
                lead_metrics.clone(),
                term,
            )
        })
        .await;
    } else {
        metrics.reconcile().set_leading(true);
        reconcile::run(
            client,
            reader,
            settings,
            contracts,
            Some(enforcement),
            metrics,
            shutdown.clone(),
        )
        .await;
    }
    shutdown.cancel();
    edge::probe::join(http).await?;
    tracing::info!("ResourceSlice class controller stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        controller: ControllerArgs,
    }

    #[test]
    fn liqo_modes() {
        assert_eq!("v1".parse::<LiqoMode>(), Ok(LiqoMode::V1));
        assert_eq!("v1.2.0".parse::<LiqoMode>(), Ok(LiqoMode::V1));
        assert_eq!(
            "v0.9".parse::<LiqoMode>(),
            Ok(LiqoMode::Grpc(resource_reader::LiqoApi::V09))
        );
        assert!("v2".parse::<LiqoMode>().is_err());
    }

    #[test]
    fn flags_and_checks() {
        let cli = Cli::try_parse_from([
            "x",
            "--class",
            "gold",
            "--grant-policy",
            "clamp",
            "--on-shrink",
            "follow",
        ])
        .expect("parse");
        assert_eq!(cli.controller.class().expect("class"), "gold");
        assert_eq!(cli.controller.grant_policy, GrantPolicy::Clamp);
        assert_eq!(cli.controller.on_shrink, ShrinkPolicy::Follow);
        assert!(cli.controller.election.leader_elect);
        cli.controller.validate().expect("valid");

        let cli = Cli::try_parse_from(["x", "--class", "default"]).expect("parse");
        assert!(matches!(
            cli.controller.validate(),
            Err(ConfigError::LiqoClass)
        ));
        let cli = Cli::try_parse_from(["x"]).expect("parse");
        assert!(matches!(
            cli.controller.validate(),
            Err(ConfigError::NoClass)
        ));
        let cli = Cli::try_parse_from([
            "x",
            "--class",
            "g",
            "--lease-duration",
            "5s",
            "--lease-renew-deadline",
            "6s",
        ])
        .expect("parse");
        assert!(matches!(
            cli.controller.validate(),
            Err(ConfigError::LeaseTimes { .. })
        ));
        // The catalog hears the enforcement level under any policy, given
        // both its address and the credentials.
        let cli = Cli::try_parse_from([
            "x",
            "--class",
            "g",
            "--catalog-url",
            "https://catalog.example",
            "--catalog-credentials-file",
            "/c.json",
        ])
        .expect("parse");
        cli.controller.validate().expect("fit with a catalog");
        let cli = Cli::try_parse_from(["x", "--class", "g", "--catalog-url", "https://c.example"])
            .expect("parse");
        assert!(matches!(
            cli.controller.validate(),
            Err(ConfigError::CatalogIncomplete)
        ));
        let cli =
            Cli::try_parse_from(["x", "--class", "g", "--leader-elect", "false"]).expect("parse");
        assert!(!cli.controller.election.leader_elect);
        // Contracts come on the stream: the poll is the fallback and resync.
        assert_eq!(
            cli.controller.contracts_poll_interval,
            Duration::from_secs(5 * 60)
        );
        let cli = Cli::try_parse_from(["x", "--class", "g", "--contracts-poll-interval", "0s"])
            .expect("parse");
        assert!(matches!(
            cli.controller.validate(),
            Err(ConfigError::PollInterval)
        ));
    }

    #[test]
    fn grant_defaults_and_node_extras() {
        let cli = Cli::try_parse_from(["x", "--class", "g"]).expect("parse");
        assert_eq!(
            cli.controller.grant_defaults.to_strings(),
            [("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into()
        );
        assert!(cli.controller.storage_classes.is_empty());
        assert!(cli.controller.node_labels.is_empty());
        let cli = Cli::try_parse_from([
            "x",
            "--class",
            "g",
            "--grant-defaults",
            "cpu=500m,memory=1Gi,pods=20,ephemeral-storage=1Gi",
            "--storage-classes",
            "standard:default,fast",
            "--node-labels",
            "region=eu, tier=gold",
        ])
        .expect("parse");
        assert_eq!(cli.controller.grant_defaults.to_strings()["cpu"], "500m");
        assert_eq!(cli.controller.storage_classes.len(), 2);
        assert!(cli.controller.storage_classes[0].default);
        assert_eq!(cli.controller.node_labels["tier"], "gold");
        for bad in [
            ["--grant-defaults", "cpu=1,memory=1Gi"],
            ["--grant-defaults", "cpu=0,memory=1Gi,pods=1"],
            ["--grant-defaults", "cpu=lots,memory=1Gi,pods=1"],
            ["--node-labels", "region"],
            ["--node-selector", "a=1,a=2"],
            ["--storage-classes", "Standard"],
        ] {
            let error =
                Cli::try_parse_from(["x", "--class", "g", bad[0], bad[1]]).expect_err("refused");
            assert!(error.to_string().contains(bad[0]), "{bad:?}: {error}");
        }
    }
}
