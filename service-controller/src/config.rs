//! The flags (every one with a `SERVICE_CONTROLLER_*` variable) and
//! [`run`], which starts the probe port and, while this replica leads the
//! Lease, the ServiceCatalog controller and the pass over the contracts.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use catalog_client::contract_follower::{ContractFollower, FollowerOptions};
use catalog_client::Session;
use controller_core::flags::{
    ElectionArgs, EnvPrefix, KubeArgs, LeaseTimesArgs, Prefixed, ProbeArgs,
};
use controller_core::lease::{self, Elector, LeaseSettings, LeaseTimesError};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::cluster::Cluster;
use crate::contracts::Follower;
use crate::metrics::Metrics;
use crate::reconcile::{self, Context};
use crate::render::Renderer;
use crate::template::{self, Bounds};

/// The controller's flags.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("http_listen", |a| a.default_value("0.0.0.0:8084")),
    mut_arg("lease_name", |a| a.default_value("service-controller")),
)]
pub struct Args {
    /// The catalog's base URL.
    #[arg(long, env = "SERVICE_CONTROLLER_CATALOG_URL", value_name = "URL")]
    pub catalog_url: Url,

    /// The provider's catalog credentials (JSON or TOML: clusterID, clusterName, authURL, token); refused when others may read it.
    #[arg(
        long,
        env = "SERVICE_CONTROLLER_CATALOG_CREDENTIALS_FILE",
        value_name = "FILE"
    )]
    pub catalog_credentials_file: PathBuf,

    /// Bound on each request to the catalog.
    #[arg(long, env = "SERVICE_CONTROLLER_CATALOG_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = edge::duration::parse)]
    pub catalog_timeout: Duration,

    /// Where the Purchases and the customers' kubeconfig Secrets are kept [default: $POD_NAMESPACE, else the kubeconfig's namespace].
    #[arg(long, env = "SERVICE_CONTROLLER_NAMESPACE", value_name = "NAMESPACE")]
    pub namespace: Option<String>,

    /// Fallback poll and resync: contracts arrive on the catalog's change stream (a pass over the service contracts runs at each change); this is the time between passes when nothing is on its way and between polls of the contracts while the stream is unavailable.
    #[arg(long, env = "SERVICE_CONTROLLER_POLL_INTERVAL", value_name = "DURATION", default_value = "5m", value_parser = edge::duration::parse)]
    pub poll_interval: Duration,

    /// Time before a failed ServiceCatalog reconcile is tried again, before the next pass while an instance is on its way (a Purchase peering, Liqo naming the namespace, a deprovisioning step), and the first wait after a failed provisioning step (doubling up to 1m).
    #[arg(long, env = "SERVICE_CONTROLLER_RETRY", value_name = "DURATION", default_value = "5s", value_parser = edge::duration::parse)]
    pub retry: Duration,

    /// Bound on the template instructions (minijinja fuel) of one render: one plan's templates for one instance, or for the ServiceCatalog's check.
    #[arg(long, env = "SERVICE_CONTROLLER_TEMPLATE_FUEL", value_name = "INSTRUCTIONS", default_value_t = template::DEFAULT_FUEL)]
    pub template_fuel: u64,

    /// Bound on the bytes one render writes (all its templates together).
    #[arg(long, env = "SERVICE_CONTROLLER_TEMPLATE_MAX_OUTPUT", value_name = "BYTES", default_value_t = template::DEFAULT_MAX_OUTPUT)]
    pub template_max_output: usize,

    /// Bound on the wall-clock time of one render; a template refused for any of these bounds is reported once, not rendered again until it changes.
    #[arg(long, env = "SERVICE_CONTROLLER_TEMPLATE_TIMEOUT", value_name = "DURATION", default_value = "2s", value_parser = edge::duration::parse)]
    pub template_timeout: Duration,

    #[command(flatten)]
    pub kube: Prefixed<KubeArgs, Env>,

    #[command(flatten)]
    pub probe: Prefixed<ProbeArgs, Env>,

    #[command(flatten)]
    pub election: Prefixed<ElectionArgs, Env>,

    /// This replica's identity in the Lease [default: $HOSTNAME-<pid>].
    #[arg(long, env = "SERVICE_CONTROLLER_LEASE_IDENTITY", value_name = "ID")]
    pub lease_identity: Option<String>,

    #[command(flatten)]
    pub lease: Prefixed<LeaseTimesArgs, Env>,
}

/// Every flag's environment variable starts `SERVICE_CONTROLLER_`.
#[derive(Debug)]
pub struct Env;

impl EnvPrefix for Env {
    const PREFIX: &'static str = "SERVICE_CONTROLLER";
}

/// A flag value that cannot be used, or a start that failed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--poll-interval and --retry must be positive")]
    Intervals,
    #[error("--template-fuel, --template-max-output and --template-timeout must be positive")]
    TemplateBounds,
    #[error(transparent)]
    LeaseTimes(#[from] LeaseTimesError),
    #[error(transparent)]
    Catalog(#[from] catalog_client::Error),
    #[error(transparent)]
    Kube(#[from] controller_core::kubeconfig::ClientError),
    #[error(transparent)]
    Http(#[from] edge::probe::HttpError),
}

impl Args {
    /// Check the flags, changing nothing.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.poll_interval.is_zero() || self.retry.is_zero() {
            return Err(ConfigError::Intervals);
        }
        if self.template_fuel == 0
            || self.template_max_output == 0
            || self.template_timeout.is_zero()
        {
            return Err(ConfigError::TemplateBounds);
        }
        if self.election.leader_elect {
            self.lease.times().validate()?;
        }
        Ok(())
    }

    /// The templates' execution bounds.
    pub fn template_bounds(&self) -> Bounds {
        Bounds {
            fuel: self.template_fuel,
            max_output: self.template_max_output,
            timeout: self.template_timeout,
        }
    }
}

/// Run until `shutdown`: the probe port, then (while this replica leads)
/// the ServiceCatalog controller beside the pass over the contracts.
pub async fn run(args: &Args, shutdown: CancellationToken) -> Result<(), ConfigError> {
    args.validate()?;
    let session = Session::provider_from_file(
        args.catalog_url.clone(),
        "--catalog-credentials-file",
        &args.catalog_credentials_file,
        args.catalog_timeout,
        concat!("service-controller/", env!("CARGO_PKG_VERSION")),
    )?;
    // One session (its token) for the controller and the pass, kept
    // across terms of leadership.
    let session = Arc::new(Mutex::new(session));
    // The contracts' follower, with a session of its own (its stream holds
    // a token for as long as it lasts): started at once, whether or not
    // this replica leads, so a new leader passes over current contracts.
    let follower_session = Session::provider_from_file(
        args.catalog_url.clone(),
        "--catalog-credentials-file",
        &args.catalog_credentials_file,
        args.catalog_timeout,
        concat!("service-controller/", env!("CARGO_PKG_VERSION")),
    )?;
    let client = args.kube.client().await?;
    let contracts = ContractFollower::start(
        follower_session,
        FollowerOptions::polling_every(args.poll_interval),
        shutdown.clone(),
    );
    let own_namespace = args
        .namespace
        .clone()
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(|| client.default_namespace().to_string());
    let metrics = Metrics::new();
    let probe = args.probe.spawn(None, metrics.clone(), &shutdown).await?;
    let cluster = Cluster {
        client: client.clone(),
        own_namespace,
    };
    let (poll, retry) = (args.poll_interval, args.retry);
    tracing::info!(
        catalog = %args.catalog_url,
        namespace = %cluster.own_namespace,
        leader_elect = args.election.leader_elect,
        "service controller starting"
    );
    let lead = {
        let metrics = metrics.clone();
        // One renderer for every term: its verdicts are kept across them.
        let renderer = Renderer::new(args.template_bounds());
        move |term: CancellationToken| {
            let (cluster, metrics, session) = (cluster.clone(), metrics.clone(), session.clone());
            let (renderer, contracts) = (renderer.clone(), contracts.clone());
            async move {
                lead(
                    cluster,
                    contracts,
                    session,
                    metrics,
                    renderer,
                    (poll, retry),
                    term,
                )
                .await
            }
        }
    };
    if args.election.leader_elect {
        let identity = args
            .lease_identity
            .clone()
            .unwrap_or_else(|| lease::replica_identity("service-controller"));
        let name = args
            .election
            .lease_name
            .clone()
            .unwrap_or_else(|| "service-controller".to_string());
        let settings = LeaseSettings::from_parts(
            &client,
            name,
            args.election.lease_namespace.clone(),
            identity,
            args.lease.times(),
        );
        let elector = Elector::new(client, settings);
        lease::run_elected(elector, metrics.reconcile().clone(), shutdown.clone(), lead).await;
    } else {
        metrics.reconcile().set_leading(true);
        lead(shutdown.clone()).await;
    }
    shutdown.cancel();
    edge::probe::join(probe).await?;
    tracing::info!("service controller stopped");
    Ok(())
}

/// One term of leadership: the controller and the pass, until `term` ends.
async fn lead(
    cluster: Cluster,
    contracts: ContractFollower,
    session: Arc<Mutex<Session>>,
    metrics: Metrics,
    renderer: Renderer,
    (poll, retry): (Duration, Duration),
    term: CancellationToken,
) {
    let ctx = Arc::new(Context {
        renderer: renderer.clone(),
        ..Context::new(
            cluster.client.clone(),
            session.clone(),
            metrics.clone(),
            retry,
        )
    });
    let catalogs_changed = ctx.catalogs_changed.clone();
    let purchases_changed = Arc::new(tokio::sync::Notify::new());
    let purchase_watch =
        crate::purchase_watch::run(cluster.purchases(), purchases_changed.clone(), term.clone());
    let (store_tx, store_rx) = tokio::sync::oneshot::channel();
    let controller = reconcile::run(ctx, term.clone(), move |store| {
        let _ = store_tx.send(store);
    });
    let follower = async {
        let Ok(store) = store_rx.await else { return };
        Follower::new(cluster, metrics, renderer)
            .run(
                contracts,
                session,
                store,
                catalogs_changed,
                purchases_changed,
                (poll, retry),
                term.clone(),
            )
            .await
    };
    tokio::join!(controller, follower, purchase_watch);
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
        let base = [
            "x",
            "--catalog-url",
            "http://c",
            "--catalog-credentials-file",
            "/c",
        ];
        let with = |extra: &[&str]| Cli::try_parse_from(base.iter().chain(extra)).unwrap().args;
        let args = with(&[]);
        args.validate().unwrap();
        // Contracts come on the stream: the poll is the fallback and resync.
        assert_eq!(args.poll_interval, Duration::from_secs(5 * 60));
        assert_eq!(args.retry, Duration::from_secs(5));
        assert_eq!(
            args.election.lease_name.as_deref(),
            Some("service-controller")
        );
        assert_eq!(args.probe.http_listen.port(), 8084);
        assert!(matches!(
            with(&["--poll-interval", "0s"]).validate(),
            Err(ConfigError::Intervals)
        ));
        assert!(Cli::try_parse_from(["x", "--catalog-url", "http://c"]).is_err());
    }
}
