//! The command line ([`Cli`]; every flag has an `ORCHESTRATOR_*`
//! variable) and the two things it runs: the controller ([`run`]) and the
//! dry run ([`explain`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;
use kube::Client;
use tokio_util::sync::CancellationToken;

pub use edge::log::LogFormat;

use controller_core::flags::{ElectionArgs, EnvPrefix, LeaseTimesArgs, Prefixed, ProbeArgs};
use controller_core::lease::{self, Elector, LeaseSettings};

use crate::controller::{self, Settings};
use crate::disabled;
use crate::feed::{self, Catalog};
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::view::View;

/// `orchestrator`: places the namespaces consumers offloaded to this
/// broker cluster on providers chosen by policy from the catalog's offers,
/// by writing each one's NamespaceOffloading. Without a subcommand it runs
/// the controller.
#[derive(Debug, clap::Parser)]
#[command(
    name = "orchestrator",
    version,
    mut_arg("lease_name", |a| a.default_value(LEASE_NAME))
)]
pub struct Cli {
    /// The policy file (TOML): allow/deny lists, required labels, spread, hysteresis. Without it: any provider, one per namespace.
    #[arg(long, env = "ORCHESTRATOR_POLICY", value_name = "FILE", global = true)]
    pub policy: Option<PathBuf>,

    /// The catalog: http://HOST:PORT (its feed, /subscribe, is followed).
    #[arg(
        long,
        env = "ORCHESTRATOR_CATALOG",
        value_name = "URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub catalog: String,

    /// A file holding the catalog's administrator secret: with it, providers an administrator disabled are read from GET /admin/providers and never chosen (their offers stay visible in the catalog).
    #[arg(
        long,
        env = "ORCHESTRATOR_CATALOG_ADMIN_SECRET_FILE",
        value_name = "FILE",
        global = true
    )]
    pub catalog_admin_secret_file: Option<PathBuf>,

    /// How often to read the disabled providers (with --catalog-admin-secret-file).
    #[arg(long, env = "ORCHESTRATOR_DISABLED_POLL", value_name = "DURATION", default_value = "30s", value_parser = edge::duration::parse, global = true)]
    pub disabled_poll: Duration,

    /// Kubeconfig of the broker cluster [default: in-cluster, else as kubectl finds it].
    #[arg(
        long,
        env = "ORCHESTRATOR_KUBECONFIG",
        value_name = "FILE",
        global = true
    )]
    pub kubeconfig: Option<PathBuf>,

    /// Context of the kubeconfig to use.
    #[arg(long, env = "ORCHESTRATOR_CONTEXT", value_name = "NAME", global = true)]
    pub context: Option<String>,

    #[command(flatten)]
    pub probe: Prefixed<ProbeArgs, Env>,

    /// Decide every namespace again this often, whatever changed.
    #[arg(long, env = "ORCHESTRATOR_RESYNC", value_name = "DURATION", default_value = "5m", value_parser = edge::duration::parse)]
    pub resync: Duration,

    /// Wait this long before retrying a reconcile that failed.
    #[arg(long, env = "ORCHESTRATOR_ERROR_RETRY", value_name = "DURATION", default_value = "2s", value_parser = edge::duration::parse)]
    pub error_retry: Duration,

    /// Namespaces reconciled at once (each is a few requests to the API server; thousands in flight together cost more CPU in polling than they save in waiting).
    #[arg(long, env = "ORCHESTRATOR_CONCURRENCY", value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,

    /// This replica's name in Events and in the Lease [default: $HOSTNAME-<pid>].
    #[arg(long, env = "ORCHESTRATOR_INSTANCE", value_name = "ID")]
    pub instance: Option<String>,

    #[command(flatten)]
    pub election: Prefixed<ElectionArgs, Env>,

    #[command(flatten)]
    pub lease: Prefixed<LeaseTimesArgs, Env>,

    /// Log format.
    #[arg(long, env = "ORCHESTRATOR_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,

    #[arg(long, env = "ORCHESTRATOR_LOG_LEVEL", value_name = "LEVEL", default_value = "info", help = edge::log::LOG_LEVEL_HELP, global = true)]
    pub log_level: edge::log::LogLevel,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Every flag's environment variable starts `ORCHESTRATOR_`.
#[derive(Debug)]
pub struct Env;

impl EnvPrefix for Env {
    const PREFIX: &'static str = "ORCHESTRATOR";
}

/// `--lease-name`'s default.
const LEASE_NAME: &str = "orchestrator";

/// What to do instead of running the controller.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Print where a namespace would go and why — the controller's own decision, from the cluster and the catalog as they are now — writing nothing.
    Explain {
        /// The namespace (on the broker cluster) to decide.
        #[arg(long, value_name = "NS")]
        namespace: String,
        /// text or json.
        #[arg(long, value_name = "FORMAT", default_value = "text")]
        output: Output,
        /// Give up reaching the cluster or the catalog after this long.
        #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = edge::duration::parse)]
        timeout: Duration,
    },
}

/// `explain --output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// The policy named on the command line, or the default one.
pub fn policy(cli: &Cli) -> anyhow::Result<Policy> {
    Ok(match &cli.policy {
        Some(path) => Policy::load(path)?,
        None => Policy::default(),
    })
}

/// Largest administrator secret file read.
const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// The catalog's administrator secret, if a file names it (a regular file,
/// read up to [`MAX_SECRET_BYTES`]).
pub fn admin_secret(cli: &Cli) -> anyhow::Result<Option<String>> {
    let Some(path) = &cli.catalog_admin_secret_file else {
        return Ok(None);
    };
    let text = edge::config_file::read("--catalog-admin-secret-file", path, MAX_SECRET_BYTES)?;
    let secret = text.trim().to_string();
    if secret.is_empty() {
        anyhow::bail!("--catalog-admin-secret-file {} is empty", path.display());
    }
    Ok(Some(secret))
}

/// A client for the broker cluster, built as every controller builds one
/// (`--kubeconfig` read as a bounded regular file).
pub async fn client(kubeconfig: Option<&Path>, context: Option<&str>) -> anyhow::Result<Client> {
    Ok(controller_core::kubeconfig::client(kubeconfig, context).await?)
}

/// Run what the command line asks until `shutdown` completes.
pub async fn main(cli: Cli, shutdown: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
    // Every input is checked before anything starts.
    let policy = policy(&cli)?;
    if cli.election.leader_elect {
        cli.lease.times().validate()?;
    }
    let catalog = Catalog::parse(&cli.catalog)?;
    let secret = admin_secret(&cli)?;
    let client = client(cli.kubeconfig.as_deref(), cli.context.as_deref()).await?;
    match &cli.command {
        Some(Command::Explain {
            namespace,
            output,
            timeout,
        }) => {
            let ask = Explain {
                namespace,
                output: *output,
                timeout: *timeout,
            };
            explain(client, &policy, catalog, secret, ask).await
        }
        None => run(cli, client, policy, catalog, secret, shutdown).await,
    }
}

/// What `explain` is asked.
pub struct Explain<'a> {
    pub namespace: &'a str,
    pub output: Output,
    pub timeout: Duration,
}

/// The dry run: print the decision for `namespace`.
pub async fn explain(
    client: Client,
    policy: &Policy,
    catalog: Catalog,
    secret: Option<String>,
    ask: Explain<'_>,
) -> anyhow::Result<()> {
    let Explain {
        namespace,
        output,
        timeout,
    } = ask;
    let view = tokio::time::timeout(timeout, View::read(&client, namespace))
        .await
        .map_err(|_| anyhow::anyhow!("the Kubernetes API did not answer within {timeout:?}"))??;
    let offers = feed::fetch(&catalog, timeout).await?;
    let disabled = match secret {
        Some(secret) => tokio::time::timeout(timeout, disabled::fetch(&catalog.base(), secret))
            .await
            .map_err(|_| anyhow::anyhow!("the catalog did not answer within {timeout:?}"))?
            .map_err(anyhow::Error::msg)?,
        None => Default::default(),
    };
    let decision = crate::explain::explain(&view, policy, &offers, &disabled);
    match output {
        Output::Json => println!("{}", crate::explain::to_json(&view, &decision)),
        Output::Text => print!("{}", crate::explain::to_text(&view, &decision)),
    }
    Ok(())
}

/// The controller: the HTTP port, the catalog's feed (followed by leader and
/// standby alike, so a new leader decides at once) and, while this replica
/// leads (or always, without election), the reconciles.
pub async fn run(
    cli: Cli,
    client: Client,
    policy: Policy,
    catalog: Catalog,
    secret: Option<String>,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let stop = CancellationToken::new();
    let http = cli.probe.spawn(None, metrics.clone(), &stop).await?;
    // The catalog's tasks stop with `stop_catalog`, after the controller.
    let stop_catalog = CancellationToken::new();
    let admin = match secret {
        Some(secret) => Some(disabled::session(&catalog.base(), secret)?),
        None => None,
    };
    tracing::info!(catalog = %catalog.url(), "orchestrator starting");
    let (snapshot, feed_task) = feed::follow(catalog, metrics.clone(), stop_catalog.clone());
    let offers = snapshot.subscribe();
    let disabled_task = admin.map(|session| {
        disabled::follow(
            session,
            cli.disabled_poll,
            snapshot.clone(),
            stop_catalog.clone(),
        )
    });
    let identity = cli
        .instance
        .clone()
        .unwrap_or_else(|| lease::replica_identity("orchestrator"));
    let settings = Settings {
        policy: Arc::new(policy),
        resync: cli.resync,
        retry: cli.error_retry,
        concurrency: cli.concurrency,
        reporter: Reporter {
            controller: "liqo-broker-orchestrator".to_string(),
            instance: Some(identity.clone()),
        },
    };
    let stopping = stop.clone();
    let controller = async move {
        if !cli.election.leader_elect {
            metrics.reconcile().set_leading(true);
            controller::run(client, settings, offers, metrics, stopping).await;
            return;
        }
        let lease = LeaseSettings::from_parts(
            &client,
            cli.election
                .lease_name
                .clone()
                .unwrap_or_else(|| LEASE_NAME.to_string()),
            cli.election.lease_namespace.clone(),
            identity,
            cli.lease.times(),
        );
        let elector = Elector::new(client.clone(), lease);
        lease::run_elected(
            elector,
            metrics.reconcile().clone(),
            stopping,
            move |term| {
                let (client, settings, offers, metrics) = (
                    client.clone(),
                    settings.clone(),
                    offers.clone(),
                    metrics.clone(),
                );
                async move {
                    controller::run(client, settings, offers, metrics, term).await;
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
    stop_catalog.cancel();
    let _ = feed_task.await;
    if let Some(task) = disabled_task {
        let _ = task.await;
    }
    edge::probe::join(http).await?;
    tracing::info!("orchestrator stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[test]
    fn the_admin_secret_file_is_a_bounded_regular_file_named_in_errors() {
        let cli = |path: &Path| {
            Cli::parse_from([
                "orchestrator".as_ref(),
                "--catalog-admin-secret-file".as_ref(),
                path.as_os_str(),
            ])
        };
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("secret");
        std::fs::write(&good, " s3cret \n").unwrap();
        assert_eq!(
            admin_secret(&cli(&good)).unwrap().as_deref(),
            Some("s3cret")
        );

        let big = dir.path().join("big");
        std::fs::write(&big, "x".repeat(70 * 1024)).unwrap();
        let e = admin_secret(&cli(&big)).unwrap_err().to_string();
        assert!(e.contains("--catalog-admin-secret-file"), "{e}");
        assert!(!e.contains("xxxx"), "{e}");

        let e = admin_secret(&cli(Path::new("/dev/zero")))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--catalog-admin-secret-file") && e.contains("not a regular file"),
            "{e}"
        );

        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let e = admin_secret(&cli(&empty)).unwrap_err().to_string();
        assert!(e.contains("is empty"), "{e}");
    }
}
