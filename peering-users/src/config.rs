//! The flags (every one with a `PEERING_USER_CONTROLLER_*` variable) and
//! [`run`], which starts the probe port and, while this replica leads the
//! Lease, the controller.

use std::path::PathBuf;
use std::time::Duration;

use catalog_client::contract_follower::{ContractFollower, FollowerOptions};
use catalog_client::Session;
use controller_core::flags::{
    ElectionArgs, EnvPrefix, KubeArgs, LeaseTimesArgs, Prefixed, ProbeArgs,
};
use controller_core::lease::{self, Elector, LeaseSettings, LeaseTimesError};
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::cluster::{Cluster, UserSettings};
use crate::isolation::controller as isolation;
use crate::isolation::prober::{self, ProbeSettings};
use crate::isolation::report;
use crate::isolation::settings::{IsolationArgs, IsolationFlagError};
use crate::kubeconfig::ApiServer;
use crate::metrics::Metrics;
use crate::reconcile::{self, Pacing};

/// The API server refuses a CSR asking for less
/// (`pkg/apis/certificates/validation`: `expirationSeconds` ≥ 600).
pub const MIN_EXPIRATION: Duration = Duration::from_secs(600);
/// A certificate is replaced (a new peering user made and attached) once
/// this share of its lifetime has passed, so that the consumer holds a
/// working kubeconfig throughout.
pub const RENEW_SHARE: f64 = 0.8;
/// Largest CA file read.
const MAX_CA_BYTES: u64 = 256 * 1024;

/// The controller's flags.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("http_listen", |a| a.default_value("0.0.0.0:8083")),
    mut_arg("lease_name", |a| a.default_value("peering-user-controller")),
)]
pub struct Args {
    /// The catalog's base URL.
    #[arg(long, env = "PEERING_USER_CONTROLLER_CATALOG_URL", value_name = "URL")]
    pub catalog_url: Url,

    /// The provider's catalog credentials (JSON or TOML: clusterID, clusterName, authURL, token); refused when others may read it.
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_CATALOG_CREDENTIALS_FILE",
        value_name = "FILE"
    )]
    pub catalog_credentials_file: PathBuf,

    /// Bound on each request to the catalog.
    #[arg(long, env = "PEERING_USER_CONTROLLER_CATALOG_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = edge::duration::parse)]
    pub catalog_timeout: Duration,

    /// The address consumers reach this cluster's API server at (https://host:port), written into each kubeconfig (liqoctl's --api-server-address-override).
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_API_SERVER_ADDRESS",
        value_name = "URL"
    )]
    pub api_server_address: Url,

    /// PEM CA certificate(s) consumers verify the API server with, written into each kubeconfig [default: none, the consumer's system roots].
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_API_SERVER_CA_FILE",
        value_name = "FILE"
    )]
    pub api_server_ca_file: Option<PathBuf>,

    /// Lifetime asked for each peering user's certificate (spec.expirationSeconds; at least 10m). It is replaced after 80% of it.
    #[arg(long, env = "PEERING_USER_CONTROLLER_CERTIFICATE_LIFETIME", value_name = "DURATION", default_value = "720h", value_parser = edge::duration::parse)]
    pub certificate_lifetime: Duration,

    /// Liqo's namespace (the peering users' Role is bound there).
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_LIQO_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = "liqo"
    )]
    pub liqo_namespace: String,

    /// Liqo's controller-manager Deployment in --liqo-namespace, whose --tls-compatibility-mode decides the peering users' keys (RSA when on, Ed25519 otherwise), as `liqoctl generate peering-user` decides it.
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_LIQO_CONTROLLER_MANAGER_DEPLOYMENT",
        value_name = "NAME",
        default_value = "liqo-controller-manager"
    )]
    pub liqo_controller_manager_deployment: String,

    /// Where the peering users' keys are kept (Secrets) [default: $POD_NAMESPACE, else the kubeconfig's namespace].
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_NAMESPACE",
        value_name = "NAMESPACE"
    )]
    pub namespace: Option<String>,

    /// Fallback poll and resync: contracts arrive on the catalog's change stream (a pass runs at each change); this is the time between passes when nothing is on its way (certificates renewed, Kubernetes-side state re-read) and between polls of the contracts while the stream is unavailable.
    #[arg(long, env = "PEERING_USER_CONTROLLER_POLL_INTERVAL", value_name = "DURATION", default_value = "5m", value_parser = edge::duration::parse)]
    pub poll_interval: Duration,

    /// Time before the next pass while a step failed, or while a peering user is on its way and none of this controller's CSRs changed (their changes are watched and run the next pass at once).
    #[arg(long, env = "PEERING_USER_CONTROLLER_RETRY", value_name = "DURATION", default_value = "1s", value_parser = edge::duration::parse)]
    pub retry: Duration,

    /// When a consumer's last contract ends, set its Tenant's spec.tenantCondition to Drained (Liqo evicts its workloads) and wait until Liqo removed the consumer's ResourceSlices and NamespaceMaps here (at most --drain-grace) before deleting the Tenant; false: the Tenant is deleted straight away.
    #[arg(long, env = "PEERING_USER_CONTROLLER_DRAIN_TENANT", value_name = "BOOL", default_value_t = false, action = clap::ArgAction::Set)]
    pub drain_tenant: bool,

    /// The longest a drained Tenant waits for Liqo to remove the consumer's slices and namespace maps before it is deleted anyway (--drain-tenant).
    #[arg(long, env = "PEERING_USER_CONTROLLER_DRAIN_GRACE", value_name = "DURATION", default_value = "2m", value_parser = edge::duration::parse)]
    pub drain_grace: Duration,

    /// Most peering users (consumer clusters) at once; contracts of further consumers wait, reported once, until one is removed.
    #[arg(long, env = "PEERING_USER_CONTROLLER_MAX_CONSUMERS", value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_consumers: u32,

    /// Most new peering users started in one pass (backpressure: a burst of purchases is served over several passes).
    #[arg(long, env = "PEERING_USER_CONTROLLER_MAX_NEW_PER_PASS", value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_new_per_pass: u32,

    /// Most peering users (consumer clusters) one buyer holds at once; a buyer's further cluster IDs wait, reported once, until one of its own is removed.
    #[arg(long, env = "PEERING_USER_CONTROLLER_MAX_CONSUMERS_PER_BUYER", value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_consumers_per_buyer: u32,

    /// Consumers whose peering users one pass moves on at once (each is a few requests to the API server; a pass over many consumers one at a time waits on each in turn).
    #[arg(long, env = "PEERING_USER_CONTROLLER_CONCURRENCY", value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: u32,

    #[command(flatten)]
    pub isolation: IsolationArgs,

    #[command(flatten)]
    pub kube: Prefixed<KubeArgs, Env>,

    #[command(flatten)]
    pub probe: Prefixed<ProbeArgs, Env>,

    #[command(flatten)]
    pub election: Prefixed<ElectionArgs, Env>,

    /// This replica's identity in the Lease [default: $HOSTNAME-<pid>].
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_LEASE_IDENTITY",
        value_name = "ID"
    )]
    pub lease_identity: Option<String>,

    #[command(flatten)]
    pub lease: Prefixed<LeaseTimesArgs, Env>,
}

/// The variables' prefix.
#[derive(Debug)]
pub struct Env;

impl EnvPrefix for Env {
    const PREFIX: &'static str = "PEERING_USER_CONTROLLER";
}

/// A flag that cannot be used, or a start-up step that failed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--certificate-lifetime ({0:?}) must be at least 10m (the API server refuses less) and at most 68 years")]
    Lifetime(Duration),
    #[error("--api-server-address ({0}) must be an https:// URL with a host")]
    Address(String),
    #[error("--poll-interval and --retry must be positive")]
    Intervals,
    #[error("--api-server-ca-file: {0}")]
    Ca(String),
    #[error(transparent)]
    Isolation(#[from] IsolationFlagError),
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
        if self.certificate_lifetime < MIN_EXPIRATION
            || self.certificate_lifetime.as_secs() > i32::MAX as u64
        {
            return Err(ConfigError::Lifetime(self.certificate_lifetime));
        }
        let a = &self.api_server_address;
        if a.scheme() != "https" || a.host_str().is_none_or(str::is_empty) {
            return Err(ConfigError::Address(a.to_string()));
        }
        if self.poll_interval.is_zero() || self.retry.is_zero() {
            return Err(ConfigError::Intervals);
        }
        if self.election.leader_elect {
            self.lease.times().validate()?;
        }
        self.isolation.settings(&self.liqo_namespace)?;
        self.isolation.probe("liqo")?;
        Ok(())
    }

    /// The address as written into kubeconfigs (no trailing slash).
    fn address(&self) -> String {
        self.api_server_address
            .as_str()
            .trim_end_matches('/')
            .to_string()
    }
}

/// The CA file, checked to hold PEM certificates only.
fn read_ca(path: &std::path::Path) -> Result<String, ConfigError> {
    let text = edge::config_file::read("--api-server-ca-file", path, MAX_CA_BYTES)
        .map_err(|e| ConfigError::Ca(e.to_string()))?;
    let mut rest = text.as_bytes();
    let mut found = 0;
    while !String::from_utf8_lossy(rest).trim().is_empty() {
        let (next, pem) = x509_parser::pem::parse_x509_pem(rest)
            .map_err(|e| ConfigError::Ca(format!("{}: not PEM: {e}", path.display())))?;
        if pem.label != "CERTIFICATE" || pem.parse_x509().is_err() {
            return Err(ConfigError::Ca(format!(
                "{}: holds a {} that is not an X.509 certificate",
                path.display(),
                pem.label
            )));
        }
        found += 1;
        rest = next;
    }
    if found == 0 {
        return Err(ConfigError::Ca(format!(
            "{}: holds no certificate",
            path.display()
        )));
    }
    Ok(text)
}

/// The isolation loop's parts, for each term.
#[derive(Clone)]
struct Isolation {
    client: kube::Client,
    settings: crate::isolation::render::Settings,
    probe: ProbeSettings,
    resync: Duration,
    /// Its own catalog session: the contracts' loop holds the other one
    /// for the whole term. Shared by the level's report and the buyers'
    /// policies' reports, one call at a time.
    reports: report::SharedSession,
}

impl Isolation {
    /// The loop and the level's report, until `stop`.
    /// `listing`: the buyers' policies of each contract listing the
    /// contracts' loop reads.
    fn run(
        &self,
        metrics: Metrics,
        listing: isolation::Listing,
        stop: CancellationToken,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let controller = isolation::run(
            self.client.clone(),
            self.settings.clone(),
            self.resync,
            metrics,
            listing,
            self.reports.clone(),
            stop.clone(),
        );
        let (verdicts_tx, verdicts) = tokio::sync::watch::channel(None);
        let prober = prober::run(
            self.client.clone(),
            self.probe.clone(),
            verdicts_tx,
            stop.clone(),
        );
        let (reports, enabled, every) = (self.reports.clone(), self.settings.enabled, self.resync);
        async move {
            tokio::join!(
                controller,
                prober,
                report::run(reports, enabled, verdicts, every, stop)
            );
        }
    }
}

/// Run until `shutdown`: the probe port, then the controller whenever this
/// replica leads.
pub async fn run(args: &Args, shutdown: CancellationToken) -> Result<(), ConfigError> {
    args.validate()?;
    let ca_pem = args
        .api_server_ca_file
        .as_deref()
        .map(read_ca)
        .transpose()?;
    // A session of the provider's own, read from its credentials file:
    // one each for the controller, the isolation level and the follower.
    let provider_session = || {
        Session::provider_from_file(
            args.catalog_url.clone(),
            "--catalog-credentials-file",
            &args.catalog_credentials_file,
            args.catalog_timeout,
            concat!("peering-user-controller/", env!("CARGO_PKG_VERSION")),
        )
    };
    let catalog = provider_session()?;
    // The isolation level's own session, from the same reading of the
    // credentials (read before the probe port says the controller is up).
    let reports = provider_session()?;
    // The contracts' follower, with a session of its own (its stream holds
    // a token for as long as it lasts): started at once, whether or not
    // this replica leads, so a new leader decides from current contracts.
    let follower_session = provider_session()?;
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
    let cluster = Cluster::new(
        client.clone(),
        UserSettings {
            own_namespace: own_namespace.clone(),
            liqo_namespace: args.liqo_namespace.clone(),
            controller_manager: args.liqo_controller_manager_deployment.clone(),
            expiration_seconds: args.certificate_lifetime.as_secs() as i32,
            renew_share: RENEW_SHARE,
            api_server: ApiServer {
                address: args.address(),
                ca_pem,
            },
        },
    );
    let pacing = Pacing {
        poll: args.poll_interval,
        retry: args.retry,
        drain: args.drain_tenant.then_some(args.drain_grace),
        concurrency: args.concurrency as usize,
        bounds: crate::plan::Bounds {
            total: args.max_consumers as usize,
            new_per_pass: args.max_new_per_pass as usize,
            per_buyer: args.max_consumers_per_buyer as usize,
        },
    };
    let mut isolation_settings = args.isolation.settings(&args.liqo_namespace)?;
    // The provider's cluster ID, as Liqo knows it (its peering
    // credentials'): direct connections naming it are refused.
    isolation_settings.cluster_id = catalog.cluster_id().to_string();
    let isolation = Isolation {
        client: client.clone(),
        settings: isolation_settings,
        probe: args.isolation.probe(&own_namespace)?,
        resync: args.isolation.isolation_resync,
        reports: std::sync::Arc::new(tokio::sync::Mutex::new(reports)),
    };
    tracing::info!(
        catalog = %args.catalog_url,
        provider = catalog.cluster_id(),
        api_server = %args.address(),
        leader_elect = args.election.leader_elect,
        "peering-user controller starting"
    );
    if args.election.leader_elect {
        let identity = args
            .lease_identity
            .clone()
            .unwrap_or_else(|| lease::replica_identity("peering-user-controller"));
        let name = args
            .election
            .lease_name
            .clone()
            .unwrap_or_else(|| "peering-user-controller".to_string());
        let settings = LeaseSettings::from_parts(
            &client,
            name,
            args.election.lease_namespace.clone(),
            identity,
            args.lease.times(),
        );
        let elector = Elector::new(client.clone(), settings);
        let lead_metrics = metrics.clone();
        let isolation = isolation.clone();
        // The session (its token) outlives one term: a new term starts
        // from a copy of the credentials, not a new login each time.
        let catalog = std::sync::Arc::new(tokio::sync::Mutex::new(catalog));
        lease::run_elected(
            elector,
            metrics.reconcile().clone(),
            shutdown.clone(),
            move |term| {
                let cluster = cluster.clone();
                let metrics = lead_metrics.clone();
                let catalog = catalog.clone();
                let contracts = contracts.clone();
                let (listing_tx, listing) = tokio::sync::watch::channel(None);
                let isolated = isolation.run(metrics.clone(), listing, term.clone());
                async move {
                    let mut session = catalog.lock().await;
                    tokio::join!(
                        reconcile::run(
                            cluster,
                            contracts,
                            &mut session,
                            pacing,
                            metrics,
                            listing_tx,
                            term
                        ),
                        isolated
                    );
                }
            },
        )
        .await;
    } else {
        metrics.reconcile().set_leading(true);
        let mut catalog = catalog;
        let (listing_tx, listing) = tokio::sync::watch::channel(None);
        tokio::join!(
            reconcile::run(
                cluster,
                contracts,
                &mut catalog,
                pacing,
                metrics.clone(),
                listing_tx,
                shutdown.clone()
            ),
            isolation.run(metrics, listing, shutdown.clone())
        );
    }
    shutdown.cancel();
    edge::probe::join(probe).await?;
    tracing::info!("peering-user controller stopped");
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

    fn parse(extra: &[&str]) -> Result<Args, clap::Error> {
        let mut argv = vec![
            "x",
            "--catalog-url",
            "https://catalog.example",
            "--catalog-credentials-file",
            "/c.json",
        ];
        if !extra.contains(&"--api-server-address") {
            argv.extend_from_slice(&["--api-server-address", "https://203.0.113.7:6443"]);
        }
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).map(|c| c.args)
    }

    #[test]
    fn defaults_pass_and_bad_flags_are_named() {
        let args = parse(&[]).unwrap();
        args.validate().unwrap();
        assert_eq!(args.address(), "https://203.0.113.7:6443");
        assert_eq!(args.liqo_namespace, "liqo");
        assert_eq!(
            args.election.lease_name.as_deref(),
            Some("peering-user-controller")
        );
        let short = parse(&["--certificate-lifetime", "9m"]).unwrap();
        assert!(matches!(short.validate(), Err(ConfigError::Lifetime(_))));
        parse(&["--certificate-lifetime", "10m"])
            .unwrap()
            .validate()
            .unwrap();
        let plain = parse(&["--api-server-address", "http://h:6443"]).unwrap();
        let e = plain.validate().unwrap_err();
        assert!(e.to_string().contains("--api-server-address"), "{e}");
        let zero = parse(&["--retry", "0s"]).unwrap();
        assert!(matches!(zero.validate(), Err(ConfigError::Intervals)));
        // Contracts come on the stream: the poll is the fallback and resync.
        assert_eq!(args.poll_interval, Duration::from_secs(5 * 60));
        let zero = parse(&["--poll-interval", "0s"]).unwrap();
        assert!(matches!(zero.validate(), Err(ConfigError::Intervals)));
    }

    #[test]
    fn the_ca_file_holds_certificates_only() {
        let dir = tempfile_dir();
        let bad = dir.join("bad.pem");
        std::fs::write(
            &bad,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let e = read_ca(&bad).unwrap_err().to_string();
        assert!(e.contains("--api-server-ca-file"), "{e}");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "\n").unwrap();
        assert!(read_ca(&empty)
            .unwrap_err()
            .to_string()
            .contains("no certificate"));
        let _ = std::fs::remove_dir_all(dir);
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("peering-users-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
