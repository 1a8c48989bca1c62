//! `provider-agent`: keep a plan of the provider's offer in the catalog in
//! step with a ResourceReader chain. Parses flags, loads the credentials,
//! builds the reader and the catalog client, runs the loop; the logic lives
//! in the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use edge::backoff::Backoff;
use edge::duration::parse as parse_duration;
use edge::log::LogFormat;
use provider_agent::config::{catalog_session, load_credentials, parse_catalog_url};
use provider_agent::{Agent, CreateDefaults, ReaderSpec, SyncOptions, Target};
use resource_reader::LiqoApi;

/// Keep a plan of your offer in the broker's catalog in step with what your
/// cluster's ResourceReader chain offers.
///
/// On start, on every notification from the chain (debounced), and every
/// --resync interval, the agent reads the resources the chain offers to
/// --originator and, if they changed, replaces the resources of plan --plan
/// in offer --offer (GET then POST /offer/{id}, conditional on the offer's
/// version). Nothing else in the offer changes.
///
/// The reader is a running resource-monitor (--reader grpc:HOST:PORT) or a
/// chain file run in-process (--config chain.toml, as resource-monitor
/// takes it; its [server] section is ignored).
///
/// The credentials file (JSON or TOML) holds the provider's Liqo peering
/// credentials, the same that `POST /authenticate` takes:
///   {"clusterID": "...", "clusterName": "...", "authURL": "https://...", "token": "..."}
/// The token is never logged.
///
/// If the offer or the plan does not exist, the agent creates it when
/// --plan-cost is given (with --offer-name, --offer-type, --plan-name), and
/// otherwise exits with an error.
///
/// Durations: 500ms, 30s, 5m, 1h 30m, 7d, or a bare number of seconds.
///
/// An unreachable catalog or chain is retried with backoff, and the agent
/// catches up by itself when it returns. It exits non-zero on a
/// configuration error, refused credentials, or an offer that belongs to
/// another provider.
#[derive(Debug, Parser)]
#[command(name = "provider-agent", version, verbatim_doc_comment)]
#[command(group = clap::ArgGroup::new("reader_source").required(true).args(["reader", "config"]))]
struct Args {
    /// Base URL of the catalog, e.g. http://catalog:8080.
    #[arg(long, env = "PROVIDER_AGENT_CATALOG", value_name = "URL")]
    catalog: String,

    /// The provider's peering credentials (JSON or TOML: clusterID, clusterName, authURL, token).
    #[arg(long, env = "PROVIDER_AGENT_CREDENTIALS", value_name = "FILE")]
    credentials: PathBuf,

    /// Id of the offer to keep up to date.
    #[arg(long, env = "PROVIDER_AGENT_OFFER", value_name = "ID")]
    offer: String,

    /// Key of the plan (in the offer's plans) whose resources the agent sets.
    #[arg(long, env = "PROVIDER_AGENT_PLAN", value_name = "ID")]
    plan: String,

    /// Reader to follow: grpc:HOST:PORT (a running resource-monitor), or a source as resource-monitor --source takes it (static:FILE, host, kubernetes).
    #[arg(long, env = "PROVIDER_AGENT_READER", value_name = "SPEC")]
    reader: Option<String>,

    /// Wire shape of a grpc: reader: v0.5 | v0.6 | v0.9.
    #[arg(
        long,
        env = "PROVIDER_AGENT_READER_API",
        value_name = "VERSION",
        default_value = "v0.5"
    )]
    reader_api: LiqoApi,

    /// Chain file (resource-monitor's TOML) to run in-process instead of --reader.
    #[arg(long, env = "PROVIDER_AGENT_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Cluster ID the chain is asked for: publish what this cluster would be offered. The default (empty) is a cluster the chain knows nothing about: any new consumer.
    #[arg(
        long,
        env = "PROVIDER_AGENT_ORIGINATOR",
        value_name = "ID",
        default_value = ""
    )]
    originator: String,

    /// Notifications within this window after the first make one update.
    #[arg(long, env = "PROVIDER_AGENT_DEBOUNCE", value_name = "DURATION", default_value = "500ms", value_parser = parse_duration)]
    debounce: Duration,

    /// Compare with the catalog this often even without notifications (repairs edits made behind the agent's back).
    #[arg(long, env = "PROVIDER_AGENT_RESYNC", value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    resync: Duration,

    /// Longest wait between retries while the catalog or the chain is unreachable.
    #[arg(long, env = "PROVIDER_AGENT_MAX_BACKOFF", value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    max_backoff: Duration,

    /// Limit for one request to the catalog.
    #[arg(long, env = "PROVIDER_AGENT_REQUEST_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    request_timeout: Duration,

    /// Cost of the plan if the agent creates it (a non-negative decimal). Without it, the offer and the plan must already exist.
    #[arg(long, env = "PROVIDER_AGENT_PLAN_COST", value_name = "DECIMAL")]
    plan_cost: Option<String>,

    /// Display name of the plan if the agent creates it [default: the plan id].
    #[arg(long, env = "PROVIDER_AGENT_PLAN_NAME", value_name = "NAME")]
    plan_name: Option<String>,

    /// Name of the offer if the agent creates it [default: the offer id].
    #[arg(long, env = "PROVIDER_AGENT_OFFER_NAME", value_name = "NAME")]
    offer_name: Option<String>,

    /// Type of the offer if the agent creates it.
    #[arg(
        long,
        env = "PROVIDER_AGENT_OFFER_TYPE",
        value_name = "TYPE",
        default_value = "compute"
    )]
    offer_type: String,

    /// Description of the offer if the agent creates it.
    #[arg(
        long,
        env = "PROVIDER_AGENT_OFFER_DESCRIPTION",
        value_name = "TEXT",
        default_value = "Resources published live from the provider's cluster."
    )]
    offer_description: String,

    /// Check the configuration (flags, credentials file, reader) and exit without contacting the catalog.
    #[arg(long, env = "PROVIDER_AGENT_CHECK")]
    check: bool,

    /// Log format: text or json.
    #[arg(
        long,
        env = "PROVIDER_AGENT_LOG_FORMAT",
        value_name = "FORMAT",
        default_value = "text"
    )]
    log_format: LogFormat,

    #[arg(
        long,
        env = "PROVIDER_AGENT_LOG_LEVEL",
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

async fn run(args: Args) -> anyhow::Result<()> {
    let base = parse_catalog_url(&args.catalog)?;
    let credentials = load_credentials(&args.credentials)?;
    let target = Target {
        offer_id: args.offer.clone(),
        plan_id: args.plan.clone(),
        originator: args.originator.clone(),
        create: args.plan_cost.clone().map(|plan_cost| CreateDefaults {
            offer_name: args
                .offer_name
                .clone()
                .unwrap_or_else(|| args.offer.clone()),
            offer_type: args.offer_type.clone(),
            offer_description: args.offer_description.clone(),
            plan_name: args.plan_name.clone().unwrap_or_else(|| args.plan.clone()),
            plan_cost,
        }),
    };
    target.check()?;
    let spec = match (&args.reader, &args.config) {
        (Some(reader), None) => ReaderSpec::source(reader, args.reader_api)?,
        (None, Some(path)) => ReaderSpec::chain_file(path.clone())?,
        // clap's argument group makes this exactly one of the two.
        _ => anyhow::bail!("pass exactly one of --reader and --config"),
    };
    let reader = spec.build().await?;
    if args.check {
        println!("configuration is valid");
        return Ok(());
    }
    let catalog = catalog_session(
        base,
        credentials,
        Some(args.credentials.clone()),
        args.request_timeout,
    )
    .context("cannot set up the HTTP client")?;
    let options = SyncOptions {
        debounce: args.debounce,
        resync: args.resync.max(Duration::from_secs(1)),
        backoff: Backoff::new(Duration::from_millis(200), args.max_backoff),
        ..SyncOptions::default()
    };
    tracing::info!(catalog = %args.catalog, reader = ?spec, "provider agent starting");
    Agent::new(reader, catalog, target, options)
        .run(edge::signal::shutdown())
        .await?;
    tracing::info!("stopped");
    Ok(())
}
