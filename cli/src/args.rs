//! The command line. Every global flag has an environment variable
//! (`BROKERCTL_*`), shown in `--help`, so a script or a shell profile sets
//! the catalog and the token once.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The broker's command line: find, buy and follow capacity as a consumer,
/// publish offers as a provider.
///
/// Commands are `brokerctl VERB [KIND] ...`, as kubectl's: `get offers`,
/// `describe offer ID`, `publish offer -f FILE`, `reserve OFFER PLAN`, `buy
/// RESERVATION`, `get contracts`, `follow purchase NAME`, `config
/// use-context NAME`.
///
/// Where the catalog is and who you are come from flags, else their
/// BROKERCTL_* variables, else the current context of the config file
/// (`brokerctl config --help`).
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
    /// Which global settings were typed on the command line rather than
    /// taken from the environment (`main` fills it from clap's matches):
    /// `config set-context` stores only those.
    #[arg(skip)]
    pub given: Given,
}

/// The global settings given on the command line itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Given {
    pub catalog_url: bool,
    pub token: bool,
    pub token_file: bool,
    pub credentials: bool,
}

impl Given {
    /// From clap's matches of the whole command line (global arguments
    /// are propagated to the top level).
    pub fn from_matches(matches: &clap::ArgMatches) -> Self {
        let typed = |id: &str| {
            matches!(
                matches.value_source(id),
                Some(clap::parser::ValueSource::CommandLine)
            )
        };
        Given {
            catalog_url: typed("catalog_url"),
            token: typed("token"),
            token_file: typed("token_file"),
            credentials: typed("credentials"),
        }
    }
}

/// What every command shares.
#[derive(Debug, Args)]
pub struct Global {
    /// The catalog's base URL (default: the context's, else
    /// http://127.0.0.1:8080).
    #[arg(
        long,
        visible_alias = "catalog",
        global = true,
        env = "BROKERCTL_CATALOG_URL"
    )]
    pub catalog_url: Option<reqwest::Url>,
    /// A bearer token: a consumer's (issued by the catalog's
    /// administrator with `POST /consumer-tokens`, by an OpenID Connect
    /// issuer, or printed by `catalog --demo`), or a provider's catalog
    /// token (from `POST /authenticate`). Prefer BROKERCTL_TOKEN or
    /// --token-file: other local users can read a command line (ps,
    /// /proc/PID/cmdline).
    #[arg(long, global = true, env = "BROKERCTL_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A file holding the bearer token (surrounding whitespace ignored;
    /// a regular file, not readable by its group or other users, at most
    /// 64 KiB). Used instead of --token.
    #[arg(long, global = true, env = "BROKERCTL_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// A provider's credentials file (its Liqo peering credentials, JSON
    /// or TOML, readable by its owner only), exchanged for a catalog token
    /// with `POST /authenticate`. Used instead of --token.
    #[arg(long, global = true, env = "BROKERCTL_CREDENTIALS")]
    pub credentials: Option<PathBuf>,
    /// The context of the config file to use (default: its
    /// current-context). For `follow purchase`, a name that is no
    /// brokerctl context is the kubeconfig's context, as it always was
    /// (prefer --kube-context).
    #[arg(long, global = true, env = "BROKERCTL_CONTEXT")]
    pub context: Option<String>,
    /// The config file holding the contexts (default:
    /// $XDG_CONFIG_HOME/brokerctl/config.yaml, else
    /// ~/.config/brokerctl/config.yaml).
    #[arg(long, global = true, env = "BROKERCTL_CONFIG")]
    pub config: Option<PathBuf>,
    /// Output format: a table for people (`wide`: more columns), JSON or
    /// YAML (the catalog's own fields) for scripts.
    #[arg(
        short,
        long,
        global = true,
        env = "BROKERCTL_OUTPUT",
        value_enum,
        default_value = "table"
    )]
    pub output: Format,
    /// Tables without their header row (for `while read` loops, `wc -l`).
    #[arg(long, global = true, env = "BROKERCTL_NO_HEADERS")]
    pub no_headers: bool,
    /// More on stderr: -v the requests sent to the catalog (method, URL,
    /// status; never a token) and the context used, -vv debugging, -vvv
    /// everything. RUST_LOG, when set, wins.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// How long one request to the catalog may take (e.g. 10s, 1m).
    #[arg(long, global = true, env = "BROKERCTL_REQUEST_TIMEOUT", default_value = "30s", value_parser = edge::duration::parse)]
    pub request_timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Wide,
    Json,
    Yaml,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List offers (one row per plan) or contracts: `get offers --min
    /// memory=8Gi`, `get contracts --active`, `get offer ID`.
    #[command(subcommand)]
    Get(GetCommand),
    /// One offer or contract in detail: `describe offer ID`.
    #[command(subcommand)]
    Describe(DescribeCommand),
    /// Create or replace an offer from a file (providers): `publish offer
    /// -f offer.yaml`.
    #[command(subcommand)]
    Publish(PublishCommand),
    /// Hold one unit of a plan (consumers); buy it with `buy`.
    Reserve(ReserveArgs),
    /// Buy a reservation (consumers): the answer is the contract.
    Buy(BuyArgs),
    /// Follow a Purchase in the cluster until it is Ready: `follow
    /// purchase NAME`.
    #[command(subcommand)]
    Follow(FollowCommand),
    /// The config file's contexts (a catalog URL and credentials each):
    /// `config set-context`, `use-context`, `get-contexts`.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// A shell completion script: `source <(brokerctl completion bash)`.
    Completion {
        #[arg(value_enum)]
        shell: Shell,
    },
    /// `offers list|show|publish`, the noun-first form of before: kept
    /// working, hidden from help.
    #[command(subcommand, alias = "offer", hide = true)]
    Offers(OffersCommand),
    /// `contracts list|show`, the noun-first form of before.
    #[command(subcommand, alias = "contract", hide = true)]
    Contracts(ContractsCommand),
    /// `purchase follow`, the noun-first form of before.
    #[command(subcommand, alias = "purchases", hide = true)]
    Purchase(PurchaseCommand),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Subcommand)]
pub enum GetCommand {
    /// Offers, one row per plan, filtered as `GET /offers` filters; with
    /// an ID, that offer's plans.
    #[command(visible_alias = "offer")]
    Offers {
        /// One offer's id (no filters with it).
        id: Option<String>,
        #[command(flatten)]
        filter: OfferFilterArgs,
    },
    /// Your contracts (a provider's: the ones sold by its cluster); with
    /// an ID, that contract.
    #[command(visible_alias = "contract")]
    Contracts {
        /// One contract's id (no filters with it).
        id: Option<String>,
        #[command(flatten)]
        filter: ContractFilterArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum DescribeCommand {
    /// One offer with its plans.
    #[command(visible_alias = "offers")]
    Offer {
        /// The offer id.
        id: String,
    },
    /// One contract (with its peering credentials in -o json|yaml, to its
    /// consumer, while active).
    #[command(visible_alias = "contracts")]
    Contract {
        /// The contract id.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum PublishCommand {
    /// Create or replace an offer from a YAML or JSON file (providers:
    /// --credentials or a provider's --token).
    #[command(visible_alias = "offers")]
    Offer(PublishArgs),
}

#[derive(Debug, Subcommand)]
pub enum FollowCommand {
    /// Follow a Purchase until it is Ready, printing each change of its
    /// phase and conditions; exits 6 if it fails, 7 on --timeout.
    #[command(visible_alias = "purchases")]
    Purchase(FollowArgs),
}

/// The config file: contexts, each a catalog URL and one kind of
/// credentials (a token file, a token stored in the file, or a provider's
/// credentials file), and the current one. Flags win over BROKERCTL_*
/// variables, which win over the context.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// The contexts (never a token): CURRENT, NAME, CATALOG, CREDENTIALS.
    GetContexts,
    /// Make NAME the current context.
    UseContext {
        /// The context's name.
        name: String,
    },
    /// Create a context, or change the settings given of one: the catalog
    /// (--catalog), and one kind of credentials (--token-file,
    /// --credentials or --token-stdin), which replaces the one it had.
    SetContext(SetContextArgs),
    /// The current context's name.
    CurrentContext,
    /// Delete a context (and the current-context, if it was that one).
    DeleteContext {
        /// The context's name.
        name: String,
    },
}

#[derive(Debug, Args)]
pub struct SetContextArgs {
    /// The context's name.
    pub name: String,
    /// Store a bearer token read from stdin in the config file itself
    /// (written readable by you alone) rather than a --token-file path:
    /// `brokerctl config set-context dev --token-stdin < token`.
    #[arg(long)]
    pub token_stdin: bool,
}

/// `offers list|show|publish`: `get offers`, `describe offer` and
/// `publish offer` as they were spelled before.
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

impl OfferFilterArgs {
    /// Whether any filter is set.
    pub fn any(&self) -> bool {
        self.offer_type.is_some()
            || self.provider.is_some()
            || self.max_cost.is_some()
            || !self.min.is_empty()
            || self.liqo.is_some()
            || self.enforcement.is_some()
            || self.isolation.is_some()
            || !self.label.is_empty()
            || !self.filter.is_empty()
    }
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

/// The filters of `GET /contracts`.
#[derive(Debug, Args)]
pub struct ContractFilterArgs {
    /// Only active contracts.
    #[arg(long, conflicts_with = "ended")]
    pub active: bool,
    /// Only ended contracts.
    #[arg(long)]
    pub ended: bool,
    /// Only contracts in this state (pending, peered, granted, ready,
    /// failed).
    #[arg(long)]
    pub state: Option<String>,
}

impl ContractFilterArgs {
    /// Whether any filter is set.
    pub fn any(&self) -> bool {
        self.active || self.ended || self.state.is_some()
    }
}

/// `contracts list|show`: `get contracts` and `describe contract` as they
/// were spelled before.
#[derive(Debug, Subcommand)]
pub enum ContractsCommand {
    /// Your contracts (a provider's: the ones sold by its cluster).
    #[command(visible_alias = "ls")]
    List(ContractFilterArgs),
    /// One contract (with its peering credentials in -o json|yaml, to its
    /// consumer, while active).
    Show {
        /// The contract id.
        id: String,
    },
}

/// `purchase follow`: `follow purchase` as it was spelled before.
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
    /// The kubeconfig context (default: its current one). The global
    /// --context still names one when it is no brokerctl context, as
    /// `purchase follow --context` always did.
    #[arg(long)]
    pub kube_context: Option<String>,
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
