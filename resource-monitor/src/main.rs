//! `resource-monitor`: serve a ResourceReader chain (source → quota →
//! filter) to Liqo over gRPC. Parses flags and the chain file, builds the
//! chain, serves it; the logic lives in the library.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use edge::log::LogFormat;
use resource_monitor::config::{ChainConfig, SourceConfig};
use resource_monitor::server::{self, ServerOptions};
use resource_monitor::stage::{Percent, QuotaConfig};
use resource_monitor::LiqoApi;
use slice_controller::config::{ControllerArgs, LiqoMode};
use tokio_util::sync::CancellationToken;

const DEFAULT_LISTEN: &str = "0.0.0.0:6001";

/// How long SIGTERM waits for open calls, and for the class controller,
/// before the process exits anyway.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Serve a ResourceReader chain to Liqo: which resources may be offered to
/// each peer cluster.
///
/// A source (kubernetes, host, static file, or an upstream resource-monitor
/// over gRPC) is followed by an optional quota stage and an optional filter
/// stage, and served in the wire shape of a Liqo release: point a Liqo
/// controller-manager at it with `--resource-plugin-address` (or
/// `--external-monitor` on v0.5–v0.6). Health checking (grpc.health.v1) and
/// reflection are served too, so `grpcurl` works.
///
/// Quick start:   resource-monitor --source static:resources.yaml --quota-percent 50 --liqo-api v0.6
/// Full chains:   resource-monitor --config chain.toml
/// Liqo v1:       resource-monitor --liqo-api v1 --class gold --config chain.toml   (the ResourceSlice class controller)
///
/// Chain file (TOML; every section optional, flags override it; unknown
/// keys are errors):
///
///   [server]       listen = "0.0.0.0:6001", liqo_api = "v0.6", pool_name = "", pool_prefix = "", max_connections = 256,
///                  max_connections_per_peer = 32, handshake_timeout = "5s", first_sync_timeout = "10s"
///   [source.static]      path = "resources.yaml"        (YAML/JSON map name → quantity, re-read on change)
///   [source.host]        disk_path = "/", refresh_seconds = 30
///   [source.kubernetes]  kubeconfig = "...", context = "...", origin_labels = ["virtualkubelet.liqo.io/origin", ...]
///   [source.grpc]        address = "http://10.0.0.1:6001", liqo_api = "v0.5"
///   [clusters."<cluster-id>".labels]   tier = "gold"
///   [quota]        percent = 50, max = { cpu = "8", memory = "32Gi" }
///   [[quota.originators]]  clusters = ["id"], labels = { tier = "gold" }, percent = 80, max = { ... }
///   [[filter.rules]]       clusters = [...], labels = {...}, allow = ["nvidia.com/*"], deny = [...]
///
/// Filter rules are tried in order; the first rule that matches the asking
/// cluster and names a resource decides; resources no rule names pass.
///
/// Durations (flags, environment, chain file): 500ms, 30s, 5m, 1h 30m, 7d,
/// or a bare number of seconds.
#[derive(Debug, Parser)]
#[command(name = "resource-monitor", version, verbatim_doc_comment)]
struct Args {
    /// Chain file (TOML) with [server], [source.*], [clusters], [quota] and [filter] sections.
    #[arg(long, env = "RESOURCE_MONITOR_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Where resources come from: static:FILE | host | kubernetes | grpc:ADDRESS. Overrides the chain file's [source].
    #[arg(long, env = "RESOURCE_MONITOR_SOURCE", value_name = "SPEC")]
    source: Option<SourceConfig>,

    /// Kubeconfig for the kubernetes source (default: $KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long, env = "RESOURCE_MONITOR_KUBECONFIG", value_name = "FILE")]
    kubeconfig: Option<PathBuf>,

    /// Kubeconfig context for the kubernetes source (default: the current context).
    #[arg(long, env = "RESOURCE_MONITOR_KUBE_CONTEXT", value_name = "NAME")]
    kube_context: Option<String>,

    /// Wire shape the grpc source's upstream serves: v0.5 | v0.6 | v0.9.
    #[arg(long, env = "RESOURCE_MONITOR_UPSTREAM_API", value_name = "VERSION")]
    upstream_api: Option<LiqoApi>,

    /// Offer only this percentage (0-100) of what the source offers, like Liqo's sharing percentage. Overrides [quota] percent.
    #[arg(long, env = "RESOURCE_MONITOR_QUOTA_PERCENT", value_name = "N")]
    quota_percent: Option<Percent>,

    /// Address to serve gRPC on [default: 0.0.0.0:6001].
    #[arg(long, env = "RESOURCE_MONITOR_LISTEN", value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// Liqo release to serve: v0.5 (shape A), v0.6 … v0.8 (shape B), v0.9 … v0.10 (shape C) [default: v0.5]; or v1 (v1.0 … v1.2: no gRPC server, the ResourceSlice class controller of --class).
    #[arg(long, env = "RESOURCE_MONITOR_LIQO_API", value_name = "VERSION")]
    liqo_api: Option<LiqoMode>,

    /// Shape C: pool_name of the answered resource list [default: empty].
    #[arg(long, env = "RESOURCE_MONITOR_POOL_NAME", value_name = "NAME")]
    pool_name: Option<String>,

    /// Shape C: pool_prefix of the answered resource list [default: empty].
    #[arg(long, env = "RESOURCE_MONITOR_POOL_PREFIX", value_name = "PREFIX")]
    pool_prefix: Option<String>,

    /// Most connections served at once; more wait [default: 256].
    #[arg(long, env = "RESOURCE_MONITOR_MAX_CONNECTIONS", value_name = "N")]
    max_connections: Option<std::num::NonZeroUsize>,

    /// Most connections served at once to one IP address; more are closed at once [default: 32].
    #[arg(
        long,
        env = "RESOURCE_MONITOR_MAX_CONNECTIONS_PER_PEER",
        value_name = "N"
    )]
    max_connections_per_peer: Option<std::num::NonZeroUsize>,

    /// A new connection that has not sent the HTTP/2 preface within this time is closed, so silent connections cannot hold the slots [default: 5s].
    #[arg(long, env = "RESOURCE_MONITOR_HANDSHAKE_TIMEOUT", value_name = "DURATION", value_parser = edge::duration::parse)]
    handshake_timeout: Option<Duration>,

    /// Shape A (Liqo v0.5, which withdraws the offer on any error): how long a read waits for a source that has not synced yet before answering the error; once synced, a failing read is answered with the last known answer [default: 10s].
    #[arg(long, env = "RESOURCE_MONITOR_FIRST_SYNC_TIMEOUT", value_name = "DURATION", value_parser = edge::duration::parse)]
    first_sync_timeout: Option<Duration>,

    /// Check the configuration (flags, chain file, the source's files) and exit without serving.
    #[arg(long, env = "RESOURCE_MONITOR_CHECK")]
    check: bool,

    /// Liqo v1: the ResourceSlice class controller (see slice-controller/README.md). With --liqo-api v1 it runs alone; with --class and a v0.x --liqo-api it runs beside the gRPC server, over the same chain.
    #[command(flatten)]
    controller: ControllerArgs,

    /// Log format: text or json.
    #[arg(
        long,
        env = "RESOURCE_MONITOR_LOG_FORMAT",
        value_name = "FORMAT",
        default_value = "text"
    )]
    log_format: LogFormat,

    #[arg(
        long,
        env = "RESOURCE_MONITOR_LOG_LEVEL",
        value_name = "LEVEL",
        default_value = "info",
        help = edge::log::LOG_LEVEL_HELP
    )]
    log_level: edge::log::LogLevel,
}

fn main() -> ExitCode {
    let args = Args::parse();
    edge::run(args.log_format, args.log_level.clone(), run(args))
}

/// The chain file merged with the flags (flags win).
fn settle_config(args: &Args) -> anyhow::Result<ChainConfig> {
    let mut config = match &args.config {
        Some(path) => ChainConfig::load(path)?,
        None => ChainConfig::default(),
    };
    if let Some(source) = &args.source {
        config.source = Some(source.clone());
    }
    match &mut config.source {
        Some(SourceConfig::Kubernetes {
            kubeconfig,
            context,
            ..
        }) => {
            if args.kubeconfig.is_some() {
                kubeconfig.clone_from(&args.kubeconfig);
            }
            if args.kube_context.is_some() {
                context.clone_from(&args.kube_context);
            }
        }
        Some(SourceConfig::Grpc { liqo_api, .. }) => {
            if let Some(api) = args.upstream_api {
                *liqo_api = api;
            }
        }
        _ => {}
    }
    if let Some(percent) = args.quota_percent {
        config
            .quota
            .get_or_insert_with(QuotaConfig::default)
            .percent = percent;
    }
    anyhow::ensure!(
        config.source.is_some(),
        "no source configured: pass --source static:FILE|host|kubernetes|grpc:ADDRESS, or --config with a [source.<kind>] table"
    );
    Ok(config)
}

fn server_options(args: &Args, config: &ChainConfig) -> ServerOptions {
    let section = &config.server;
    let api = match args.liqo_api {
        Some(LiqoMode::Grpc(api)) => api,
        Some(LiqoMode::V1) | None => section.liqo_api.unwrap_or_default(),
    };
    let mut options = ServerOptions::new(api);
    if let Some(name) = args.pool_name.clone().or_else(|| section.pool_name.clone()) {
        options.pool_name = name;
    }
    if let Some(prefix) = args
        .pool_prefix
        .clone()
        .or_else(|| section.pool_prefix.clone())
    {
        options.pool_prefix = prefix;
    }
    if let Some(max) = args.max_connections {
        options.max_connections = max.get();
    } else if let Some(max) = section.max_connections {
        options.max_connections = usize::try_from(max.get()).unwrap_or(usize::MAX);
    }
    if let Some(max) = args.max_connections_per_peer {
        options.max_connections_per_peer = max.get();
    } else if let Some(max) = section.max_connections_per_peer {
        options.max_connections_per_peer = usize::try_from(max.get()).unwrap_or(usize::MAX);
    }
    if let Some(timeout) = args
        .handshake_timeout
        .or(section.handshake_timeout.map(|d| d.0))
    {
        options.handshake_timeout = timeout;
    }
    if let Some(timeout) = args
        .first_sync_timeout
        .or(section.first_sync_timeout.map(|d| d.0))
    {
        options.first_sync_timeout = timeout;
    }
    options
}

async fn run(args: Args) -> anyhow::Result<()> {
    let config = settle_config(&args)?;
    let listen = match args.listen.or(config.server.listen) {
        Some(addr) => addr,
        None => DEFAULT_LISTEN.parse().context("default listen address")?,
    };
    let options = server_options(&args, &config);
    // Liqo v1: the class controller alone; with --class and a v0.x API, the
    // controller beside the gRPC server (a provider moving to v1).
    let v1_only = args.liqo_api == Some(LiqoMode::V1);
    let controller = v1_only || args.controller.class.is_some();
    if controller {
        args.controller.validate()?;
    }

    // Everything that can be wrong with the configuration (including the
    // source's own files) fails here, before the port is bound.
    let reader = resource_monitor::chain::build(&config).await?;
    if args.check {
        println!("configuration is valid");
        return Ok(());
    }
    tracing::info!(source = ?config.source, quota = config.quota.is_some(), filter = config.filter.is_some(), "chain built");

    let stop_controller = CancellationToken::new();
    let controller = if controller {
        let client = controller_core::kubeconfig::client(
            args.kubeconfig.as_deref(),
            args.kube_context.as_deref(),
        )
        .await?;
        let (reader, settings, stop) = (
            reader.clone(),
            args.controller.clone(),
            stop_controller.clone(),
        );
        Some(tokio::spawn(async move {
            Ok::<_, anyhow::Error>(
                slice_controller::config::run(client, reader, &settings, stop).await?,
            )
        }))
    } else {
        None
    };
    if v1_only {
        let Some(task) = controller else {
            return Ok(());
        };
        return edge::signal::run_until_shutdown(
            "the ResourceSlice controller",
            task,
            || stop_controller.cancel(),
            STOP_TIMEOUT,
        )
        .await;
    }

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stop_rx.await;
    };
    let server = tokio::spawn(server::serve(reader, listen, options, shutdown));
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => {
            stop_controller.cancel();
            return result.context("server task")?.map_err(Into::into);
        }
        () = edge::signal::shutdown() => {}
    }
    let _ = stop_tx.send(());
    stop_controller.cancel();
    if let Some(task) = controller {
        match tokio::time::timeout(STOP_TIMEOUT, task).await {
            Ok(Ok(Err(error))) => tracing::warn!(%error, "the ResourceSlice controller failed"),
            Ok(Err(error)) => tracing::warn!(%error, "the ResourceSlice controller task failed"),
            Ok(Ok(Ok(()))) => {}
            Err(_) => tracing::warn!(
                "the ResourceSlice controller still running after {STOP_TIMEOUT:?}; exiting anyway"
            ),
        }
    }
    // Controllers that hold calls open must not keep us from exiting.
    match tokio::time::timeout(STOP_TIMEOUT, &mut server).await {
        Ok(result) => result.context("server task")?.map_err(Into::into),
        Err(_) => {
            tracing::warn!("connections still open after 5s; exiting anyway");
            Ok(())
        }
    }
}
