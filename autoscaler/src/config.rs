//! The command line ([`Cli`]; every flag has a `MARKET_AUTOSCALER_*`
//! variable) and the two things it runs: the controller ([`run`], the
//! default, or `market-autoscaler run`) and the dry run
//! (`market-autoscaler explain`, [`crate::explain`]).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use edge::log::LogFormat;

use controller_core::flags::{
    ElectionArgs, EnvPrefix, KubeArgs, LeaseTimesArgs, Prefixed, ProbeArgs,
};
use controller_core::lease::{self, Elector, LeaseSettings};

use crate::context::{Clients, Settings};
use crate::controller;
use crate::metrics::Metrics;

/// `market-autoscaler`: buys capacity from the catalog for pods that cannot
/// be scheduled, within budgets in money, and gives it back when it is no
/// longer needed — for each MarketAutoscaler (broker.liqo-broker.io/v1alpha1)
/// on this cluster. Without a subcommand it runs the controller.
///
/// Test-only: the environment variable MARKET_AUTOSCALER_FAILPOINT=<step>
/// (after-status-write, after-purchase-create, after-ready, before-cancel)
/// makes the process exit with status 3 right after that step.
#[derive(Debug, clap::Parser)]
#[command(
    name = "market-autoscaler",
    version,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// Log format.
    #[arg(long, env = "MARKET_AUTOSCALER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    #[arg(long, env = "MARKET_AUTOSCALER_LOG_LEVEL", value_name = "LEVEL", default_value = "info", help = edge::log::LOG_LEVEL_HELP, global = true)]
    pub log_level: edge::log::LogLevel,

    #[command(flatten)]
    pub run: RunArgs,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The controller's flags.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("lease_name", |a| a.default_value(LEASE_NAME)),
    mut_arg("http_listen", |a| a.default_value("0.0.0.0:8085"))
)]
pub struct RunArgs {
    #[command(flatten)]
    pub kube: Prefixed<KubeArgs, Env>,

    #[command(flatten)]
    pub probe: Prefixed<ProbeArgs, Env>,

    /// Decide for every MarketAutoscaler at least this often (Cluster Autoscaler's --scan-interval).
    #[arg(long, env = "MARKET_AUTOSCALER_SCAN_INTERVAL", value_name = "DURATION", default_value = "10s", value_parser = edge::duration::parse)]
    pub scan_interval: Duration,

    /// After a new waiting pod, decide once no other pod arrived for this long...
    #[arg(long, env = "MARKET_AUTOSCALER_BATCH_IDLE", value_name = "DURATION", default_value = "1s", value_parser = edge::duration::parse)]
    pub batch_idle: Duration,

    /// ... or once this long has passed since the first one, whichever comes first.
    #[arg(long, env = "MARKET_AUTOSCALER_BATCH_MAX", value_name = "DURATION", default_value = "10s", value_parser = edge::duration::parse)]
    pub batch_max: Duration,

    /// A Purchase not Ready this long after its creation is deleted (its contract cancelled) and its offer backed off (Cluster Autoscaler's --max-node-provision-time).
    #[arg(long, env = "MARKET_AUTOSCALER_PURCHASE_DEADLINE", value_name = "DURATION", default_value = "15m", value_parser = edge::duration::parse)]
    pub purchase_deadline: Duration,

    /// First backoff of an offer whose purchase failed; doubles on each failure...
    #[arg(long, env = "MARKET_AUTOSCALER_BACKOFF_INITIAL", value_name = "DURATION", default_value = "5m", value_parser = edge::duration::parse)]
    pub backoff_initial: Duration,

    /// ... up to this...
    #[arg(long, env = "MARKET_AUTOSCALER_BACKOFF_MAX", value_name = "DURATION", default_value = "30m", value_parser = edge::duration::parse)]
    pub backoff_max: Duration,

    /// ... and is forgotten this long after the offer's last failure.
    #[arg(long, env = "MARKET_AUTOSCALER_BACKOFF_RESET", value_name = "DURATION", default_value = "3h", value_parser = edge::duration::parse)]
    pub backoff_reset: Duration,

    /// Wait this long before retrying a round that failed.
    #[arg(long, env = "MARKET_AUTOSCALER_ERROR_RETRY", value_name = "DURATION", default_value = "2s", value_parser = edge::duration::parse)]
    pub error_retry: Duration,

    /// Give up on one catalog request after this long (the catalog is then unreachable for this round).
    #[arg(long, env = "MARKET_AUTOSCALER_CATALOG_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = edge::duration::parse)]
    pub catalog_timeout: Duration,

    /// A node being given back is cordoned and its pods evicted; an eviction a PodDisruptionBudget refuses is retried each round for this long, then the node is uncordoned and kept (Cluster Autoscaler's --max-pod-eviction-time).
    #[arg(long, env = "MARKET_AUTOSCALER_MAX_DRAIN_TIME", value_name = "DURATION", default_value = "2m", value_parser = edge::duration::parse)]
    pub max_drain_time: Duration,

    /// This replica's name in Events and in the Lease [default: $HOSTNAME-<pid>].
    #[arg(long, env = "MARKET_AUTOSCALER_INSTANCE", value_name = "ID")]
    pub instance: Option<String>,

    #[command(flatten)]
    pub election: Prefixed<ElectionArgs, Env>,

    #[command(flatten)]
    pub lease: Prefixed<LeaseTimesArgs, Env>,
}

/// Every flag's environment variable starts `MARKET_AUTOSCALER_`.
#[derive(Debug)]
pub struct Env;

impl EnvPrefix for Env {
    const PREFIX: &'static str = "MARKET_AUTOSCALER";
}

/// `--lease-name`'s default.
const LEASE_NAME: &str = "market-autoscaler";

/// What to run.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run the controller (the default; the same flags work without `run`).
    Run(Box<RunArgs>),
    /// Print what the controller would buy for one MarketAutoscaler now, and why — the same decision from the same inputs, with prices per hour and per month — writing nothing (read access is enough).
    Explain(ExplainArgs),
}

/// `explain`'s flags: the cluster's, and the request's.
#[derive(Debug, Clone, clap::Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub kube: Prefixed<KubeArgs, Env>,
    #[command(flatten)]
    pub request: crate::explain::Request,
}

impl RunArgs {
    /// Every duration flag checked together.
    pub fn validate(&self) -> anyhow::Result<()> {
        let positive = [
            ("--scan-interval", self.scan_interval),
            ("--batch-max", self.batch_max),
            ("--purchase-deadline", self.purchase_deadline),
            ("--backoff-initial", self.backoff_initial),
            ("--backoff-max", self.backoff_max),
            ("--catalog-timeout", self.catalog_timeout),
            ("--max-drain-time", self.max_drain_time),
        ];
        for (flag, d) in positive {
            if d.is_zero() {
                anyhow::bail!("{flag} must be more than 0");
            }
        }
        if self.batch_idle > self.batch_max {
            anyhow::bail!("--batch-idle must not exceed --batch-max");
        }
        if self.backoff_initial > self.backoff_max {
            anyhow::bail!("--backoff-initial must not exceed --backoff-max");
        }
        if self.election.leader_elect {
            self.lease.times().validate()?;
        }
        Ok(())
    }

    /// The controller's settings.
    pub fn settings(&self, instance: String) -> Settings {
        Settings {
            scan_interval: self.scan_interval,
            batch_idle: self.batch_idle,
            batch_max: self.batch_max,
            purchase_deadline: self.purchase_deadline,
            backoff_initial: self.backoff_initial,
            backoff_max: self.backoff_max,
            backoff_reset: self.backoff_reset,
            retry: self.error_retry,
            catalog_timeout: self.catalog_timeout,
            max_drain_time: self.max_drain_time,
            instance,
        }
    }
}

/// Run what the command line asks until `shutdown` completes.
pub async fn main(cli: Cli, shutdown: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
    let args = match cli.command {
        Some(Command::Explain(args)) => {
            let client = args.kube.client().await?;
            return crate::explain::run(client, &args.request).await;
        }
        Some(Command::Run(args)) => *args,
        None => cli.run,
    };
    args.validate()?;
    crate::failpoint::init();
    let clients = Clients {
        api: args.kube.client().await?,
        evictions: args.kube.client_without_retry().await?,
    };
    run(args, clients, shutdown).await
}

/// The controller: the HTTP port and, while this replica leads (or always,
/// without election), the reconciles.
pub async fn run(
    args: RunArgs,
    clients: Clients,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let client = clients.api.clone();
    let metrics = Metrics::new();
    let stop = CancellationToken::new();
    let http = args.probe.spawn(None, metrics.clone(), &stop).await?;
    let identity = args
        .instance
        .clone()
        .unwrap_or_else(|| lease::replica_identity("market-autoscaler"));
    let settings = settings_of(&args, identity.clone());
    tracing::info!("market-autoscaler starting");
    let stopping = stop.clone();
    let controller = async move {
        if !args.election.leader_elect {
            metrics.reconcile().set_leading(true);
            controller::run(clients, settings, metrics, stopping).await;
            return;
        }
        let lease = LeaseSettings::from_parts(
            &client,
            args.election
                .lease_name
                .clone()
                .unwrap_or_else(|| LEASE_NAME.to_string()),
            args.election.lease_namespace.clone(),
            identity,
            args.lease.times(),
        );
        let elector = Elector::new(client.clone(), lease);
        lease::run_elected(
            elector,
            metrics.reconcile().clone(),
            stopping,
            move |term| {
                let (clients, settings, metrics) =
                    (clients.clone(), settings.clone(), metrics.clone());
                async move {
                    controller::run(clients, settings, metrics, term).await;
                }
            },
        )
        .await;
    };
    tokio::select! {
        () = controller => {}
        () = shutdown => tracing::info!("stopping"),
    }
    stop.cancel();
    edge::probe::join(http).await?;
    tracing::info!("market-autoscaler stopped");
    Ok(())
}

fn settings_of(args: &RunArgs, identity: String) -> Settings {
    args.settings(identity)
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[test]
    fn defaults_follow_the_cluster_autoscaler_and_karpenter() {
        let cli = Cli::try_parse_from(["market-autoscaler"]).unwrap();
        let r = &cli.run;
        assert_eq!(r.scan_interval, Duration::from_secs(10));
        assert_eq!(r.batch_idle, Duration::from_secs(1));
        assert_eq!(r.batch_max, Duration::from_secs(10));
        assert_eq!(r.purchase_deadline, Duration::from_secs(15 * 60));
        assert_eq!(r.backoff_initial, Duration::from_secs(5 * 60));
        assert_eq!(r.backoff_max, Duration::from_secs(30 * 60));
        assert_eq!(r.backoff_reset, Duration::from_secs(3 * 3600));
        assert_eq!(r.election.lease_name.as_deref(), Some("market-autoscaler"));
        assert!(cli.command.is_none());
        r.validate().unwrap();
    }

    #[test]
    fn explain_takes_the_autoscaler_and_a_pods_file() {
        let cli = Cli::try_parse_from([
            "market-autoscaler",
            "explain",
            "--autoscaler",
            "team/mas",
            "--pods",
            "/tmp/pods.yaml",
        ])
        .unwrap();
        let Some(Command::Explain(args)) = cli.command else {
            panic!("not explain");
        };
        assert_eq!(args.request.autoscaler, "team/mas");
        assert_eq!(
            args.request.pods,
            Some(std::path::PathBuf::from("/tmp/pods.yaml"))
        );
    }

    #[test]
    fn run_takes_the_same_flags_with_or_without_the_subcommand() {
        let plain = Cli::try_parse_from([
            "market-autoscaler",
            "--scan-interval",
            "1s",
            "--leader-elect",
            "false",
        ])
        .unwrap();
        assert_eq!(plain.run.scan_interval, Duration::from_secs(1));
        assert!(!plain.run.election.leader_elect);
        let sub =
            Cli::try_parse_from(["market-autoscaler", "run", "--scan-interval", "1s"]).unwrap();
        let Some(Command::Run(args)) = sub.command else {
            panic!("not run");
        };
        assert_eq!(args.scan_interval, Duration::from_secs(1));
        assert_eq!(
            args.election.lease_name.as_deref(),
            Some("market-autoscaler")
        );
    }

    #[test]
    fn inconsistent_durations_are_refused_naming_the_flag() {
        let cli = Cli::try_parse_from(["market-autoscaler", "--batch-idle", "20s"]).unwrap();
        let e = cli.run.validate().unwrap_err().to_string();
        assert!(e.contains("--batch-idle"), "{e}");
        let cli = Cli::try_parse_from(["market-autoscaler", "--scan-interval", "0s"]).unwrap();
        let e = cli.run.validate().unwrap_err().to_string();
        assert!(e.contains("--scan-interval"), "{e}");
    }
}
