//! The command line. Every global flag has an environment variable
//! (`BROKERCTL_*`), shown in `--help`, so a script or a shell profile sets
//! the catalog and the token once.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The broker's command line: find, buy and follow capacity as a consumer,
/// publish offers as a provider.
///
/// Exit codes: 0 ok, 1 error (the catalog refused or could not be
/// reached), 2 usage, 3 not found, 4 conflict (sold out, terms changed,
/// expired, stale version), 5 unauthorized, 6 the Purchase failed, 7
/// timed out.
#[derive(Debug, Parser)]
#[command(name = "brokerctl", version)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// What every command shares.
#[derive(Debug, Args)]
pub struct Global {
    /// The catalog's base URL.
    #[arg(
        long,
        global = true,
        env = "BROKERCTL_CATALOG_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub catalog_url: reqwest::Url,
    /// A bearer token: a consumer's (issued by the catalog's
    /// administrator with `POST /consumer-tokens`, by an OpenID Connect
    /// issuer, or printed by `catalog --demo`), or a provider's catalog
    /// token (from `POST /authenticate`). Prefer BROKERCTL_TOKEN or
    /// --token-file: other local users can read a command line (ps,
    /// /proc/PID/cmdline).
    #[arg(long, global = true, env = "BROKERCTL_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A file holding the bearer token (surrounding whitespace ignored;
    /// a regular file, not readable by other users, at most 64 KiB). Used
    /// instead of --token.
    #[arg(long, global = true, env = "BROKERCTL_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// A provider's credentials file (its Liqo peering credentials, JSON
    /// or TOML, readable by its owner only), exchanged for a catalog token
    /// with `POST /authenticate`. Used instead of --token.
    #[arg(long, global = true, env = "BROKERCTL_CREDENTIALS")]
    pub credentials: Option<PathBuf>,
    /// Output format: a table for people, JSON or YAML (the catalog's own
    /// fields) for scripts.
    #[arg(
        short,
        long,
        global = true,
        env = "BROKERCTL_OUTPUT",
        value_enum,
        default_value = "table"
    )]
    pub output: Format,
    /// How long one request to the catalog may take (e.g. 10s, 1m).
    #[arg(long, global = true, env = "BROKERCTL_REQUEST_TIMEOUT", default_value = "30s", value_parser = edge::duration::parse)]
    pub request_timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Browse offers and publish your own (providers).
    #[command(subcommand, visible_alias = "offer")]
    Offers(OffersCommand),
    /// Hold one unit of a plan (consumers); buy it with `buy`.
    Reserve(ReserveArgs),
    /// Buy a reservation (consumers): the answer is the contract.
    Buy(BuyArgs),
    /// Your contracts and their state.
    #[command(subcommand, visible_alias = "contract")]
    Contracts(ContractsCommand),
    /// Purchases in the cluster (the purchase-controller's kind).
    #[command(subcommand, visible_alias = "purchases")]
    Purchase(PurchaseCommand),
    /// A shell completion script: `source <(brokerctl completion bash)`.
    Completion {
        #[arg(value_enum)]
        shell: Shell,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Subcommand)]
pub enum OffersCommand {
    /// List offers, one row per plan, filtered as `GET /offers` filters.
    #[command(visible_alias = "ls")]
    List(OfferFilterArgs),
    /// One offer with its plans.
    Show {
        /// The offer id.
        id: String,
    },
    /// Create or replace an offer from a YAML or JSON file (providers:
    /// --credentials or a provider's --token).
    Publish(PublishArgs),
}

/// The filters of `GET /offers` (and of the web UI), passed to the catalog
/// as they are: it alone decides what is valid.
#[derive(Debug, Args)]
pub struct OfferFilterArgs {
    /// Only offers of this type.
    #[arg(long = "type")]
    pub offer_type: Option<String>,
    /// Only this provider's offers (its cluster ID).
    #[arg(long)]
    pub provider: Option<String>,
    /// A plan costing at most this (a decimal, compared exactly).
    #[arg(long)]
    pub max_cost: Option<String>,
    /// A plan with at least this much of a resource, e.g. `memory=8Gi`
    /// (repeatable; all must hold for the same plan as --max-cost).
    #[arg(long, value_name = "RESOURCE=QUANTITY", value_parser = key_value)]
    pub min: Vec<(String, String)>,
    /// Only providers peering with this Liqo generation (v0, v1).
    #[arg(long)]
    pub liqo: Option<String>,
    /// Only providers that last reported this enforcement level (off,
    /// none, soft, hard, unknown).
    #[arg(long)]
    pub enforcement: Option<String>,
    /// Only providers that last reported this tenant-isolation level
    /// (enforced, unverified, failed, off).
    #[arg(long)]
    pub isolation: Option<String>,
    /// Only offers with this provider label, e.g. `region=eu-west-1`
    /// (repeatable; all must hold).
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    pub label: Vec<(String, String)>,
    /// Any other filter of `GET /offers`, as the catalog names it, e.g.
    /// `kind=service` (repeatable): the catalog judges it.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    pub filter: Vec<(String, String)>,
}

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The offer file (`.yaml`, `.yml` or `.json`; other names: whichever
    /// parses), as `POST /offer/{id}` takes it.
    #[arg(short, long)]
    pub file: PathBuf,
    /// The offer id (else the file's `id`).
    #[arg(long)]
    pub id: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReserveArgs {
    /// The offer id.
    pub offer: String,
    /// The plan's key in the offer.
    pub plan: String,
    /// Hold the unit this long (default: the catalog's), e.g. 2m.
    #[arg(long, value_parser = edge::duration::parse)]
    pub ttl: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct BuyArgs {
    /// The reservation id (from `reserve`).
    pub reservation: String,
    /// Your cluster's Liqo cluster ID (required by providers that peer
    /// with Liqo v1).
    #[arg(long, env = "BROKERCTL_CONSUMER_CLUSTER_ID")]
    pub consumer_cluster_id: Option<String>,
    /// How long the contract lasts (default: the catalog's), e.g. 7d.
    #[arg(long, value_parser = edge::duration::parse)]
    pub duration: Option<Duration>,
}

#[derive(Debug, Subcommand)]
pub enum ContractsCommand {
    /// Your contracts (a provider's: the ones sold by its cluster).
    #[command(visible_alias = "ls")]
    List {
        /// Only active contracts.
        #[arg(long, conflicts_with = "ended")]
        active: bool,
        /// Only ended contracts.
        #[arg(long)]
        ended: bool,
        /// Only contracts in this state (pending, peered, granted, ready,
        /// failed).
        #[arg(long)]
        state: Option<String>,
    },
    /// One contract (with its peering credentials in -o json|yaml, to its
    /// consumer, while active).
    Show {
        /// The contract id.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum PurchaseCommand {
    /// Follow a Purchase until it is Ready, printing each change of its
    /// phase and conditions; exits 6 if it fails, 7 on --timeout.
    Follow(FollowArgs),
}

#[derive(Debug, Args)]
pub struct FollowArgs {
    /// The Purchase's name.
    pub name: String,
    /// Its namespace (default: the kubeconfig context's, else `default`).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// The kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current one).
    #[arg(long)]
    pub context: Option<String>,
    /// Give up after this long, e.g. 5m.
    #[arg(long, default_value = "5m", value_parser = edge::duration::parse)]
    pub timeout: Duration,
}

/// `KEY=VALUE`, split at the first `=`; the key must not be empty.
pub fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_token_help_says_to_keep_it_off_the_command_line() {
        // B-14: --token is visible in /proc/PID/cmdline.
        let command = Cli::command();
        let help = |name: &str| {
            command
                .get_arguments()
                .find(|a| a.get_id() == name)
                .and_then(|a| a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default()
        };
        let token = help("token");
        assert!(token.contains("Prefer BROKERCTL_TOKEN"), "{token}");
        assert!(token.contains("--token-file"), "{token}");
        assert!(token.contains("/proc/PID/cmdline"), "{token}");
        let cli =
            Cli::try_parse_from(["brokerctl", "--token-file", "/t", "contracts", "list"]).unwrap();
        assert_eq!(
            cli.global.token_file.as_deref(),
            Some(std::path::Path::new("/t"))
        );
    }

    #[test]
    fn filters_are_key_value_pairs() {
        assert_eq!(
            key_value("memory=8Gi").unwrap(),
            ("memory".to_string(), "8Gi".to_string())
        );
        assert_eq!(
            key_value("a=b=c").unwrap(),
            ("a".to_string(), "b=c".to_string())
        );
        assert!(key_value("=x").is_err());
        assert!(key_value("memory").is_err());
    }
}
