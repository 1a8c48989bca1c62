//! Each subcommand: from its arguments, through the catalog (or the
//! cluster), to the text it prints. A command returns its output as a
//! string (`main` writes it), except `follow purchase`, which prints each
//! change as it comes.
//!
//! The noun-first spellings of before (`offers list`, `contracts show`,
//! `purchase follow`) are read as the verb-first ones ([`Action`]), so
//! both run the same code.

use std::time::Duration;

use catalog_client::market::{ContractFilter, OfferFilter};
use catalog_client::wire::{Contract, Offer, PeeringCredentials, Reservation};
use catalog_client::{Exposure, Http, Login, Session};
use clap::CommandFactory;
use serde::Serialize;
use serde_json::{json, Value};

use crate::args::{
    BuyArgs, Cli, Command, ContractFilterArgs, ContractsCommand, DescribeCommand, FollowArgs,
    FollowCommand, Format, GetCommand, Global, OfferFilterArgs, OffersCommand, PublishArgs,
    PublishCommand, PurchaseCommand, ReserveArgs, Shell,
};
use crate::config::{self, Loaded};
use crate::exit::{Code, Failure};
use crate::output::Table;
use crate::target::{self, Credential, Target};
use crate::views::{read, Columns};
use crate::{config_commands, follow, offer_file, output, verbose, views};

pub use crate::secrets::{read_token_file, MAX_TOKEN_FILE_BYTES};

/// What the catalog's client calls itself (the catalog logs it).
const USER_AGENT: &str = concat!("brokerctl/", env!("CARGO_PKG_VERSION"));

/// A command, whichever way it was spelled.
#[derive(Debug)]
pub enum Action {
    GetOffers(Option<String>, OfferFilterArgs),
    DescribeOffer(String),
    PublishOffer(PublishArgs),
    Reserve(ReserveArgs),
    Buy(BuyArgs),
    GetContracts(Option<String>, ContractFilterArgs),
    DescribeContract(String),
    FollowPurchase(FollowArgs),
    Config(crate::args::ConfigCommand),
    Completion(Shell),
}

impl From<Command> for Action {
    fn from(command: Command) -> Self {
        match command {
            Command::Get(GetCommand::Offers { id, filter }) => Action::GetOffers(id, filter),
            Command::Offers(OffersCommand::List(filter)) => Action::GetOffers(None, filter),
            Command::Get(GetCommand::Contracts { id, filter }) => Action::GetContracts(id, filter),
            Command::Contracts(ContractsCommand::List(filter)) => {
                Action::GetContracts(None, filter)
            }
            Command::Describe(DescribeCommand::Offer { id })
            | Command::Offers(OffersCommand::Show { id }) => Action::DescribeOffer(id),
            Command::Describe(DescribeCommand::Contract { id })
            | Command::Contracts(ContractsCommand::Show { id }) => Action::DescribeContract(id),
            Command::Publish(PublishCommand::Offer(publish))
            | Command::Offers(OffersCommand::Publish(publish)) => Action::PublishOffer(publish),
            Command::Reserve(reserve) => Action::Reserve(reserve),
            Command::Buy(buy) => Action::Buy(buy),
            Command::Follow(FollowCommand::Purchase(args))
            | Command::Purchase(PurchaseCommand::Follow(args)) => Action::FollowPurchase(args),
            Command::Config(config) => Action::Config(config),
            Command::Completion { shell } => Action::Completion(shell),
        }
    }
}

/// Run `cli`; the text for stdout.
pub async fn run(cli: Cli) -> Result<String, Failure> {
    let Cli {
        global,
        command,
        given,
    } = cli;
    let action = Action::from(command);
    match action {
        Action::Config(command) => {
            config_commands::run(&global, &given, command, &mut std::io::stdin().lock())
        }
        Action::Completion(shell) => Ok(completion(shell)),
        Action::FollowPurchase(args) => follow_purchase(&global, args).await,
        action => {
            let loaded = config::load(config::path(global.config.as_deref()))?;
            let target = target::resolve(&global, &given, &loaded)?;
            tracing::info!(
                "context {}: catalog {}, {}",
                target.context.as_deref().unwrap_or("(none)"),
                verbose::shown_uri(&target.catalog),
                target
                    .credential
                    .as_ref()
                    .map(Credential::describe)
                    .unwrap_or_else(|| "no credentials".to_string())
            );
            let catalog = Catalog {
                global: &global,
                target,
            };
            catalog.run(action).await
        }
    }
}

/// The catalog as the flags, the variables and the context name it.
struct Catalog<'g> {
    global: &'g Global,
    target: Target,
}

impl Catalog<'_> {
    async fn run(&self, action: Action) -> Result<String, Failure> {
        let out = Out::of(self.global);
        match action {
            Action::GetOffers(id, filter) => self.get_offers(id, filter).await,
            Action::DescribeOffer(id) => {
                let offer: Value = self.http()?.offer_as(&id).await?;
                out.render(&offer, |_| {
                    read("an offer", &offer).map(|o| Shown::Text(views::offer_details(&o)))
                })
            }
            Action::PublishOffer(publish) => {
                let file = offer_file::load(&publish.file, publish.id.as_deref())?;
                let mut session = self.session()?;
                let written = session.put_offer(&file.id, &file.body).await?;
                let verb = if written.created {
                    "created"
                } else {
                    "replaced"
                };
                let result =
                    json!({"id": file.id, "created": written.created, "version": written.version});
                out.render(&result, |_| {
                    Ok(Shown::Text(format!(
                        "offer {} {verb} (version {})\n",
                        output::escape(&file.id),
                        written.version
                    )))
                })
            }
            Action::Reserve(reserve) => {
                let reservation: Value = self
                    .session()?
                    .reserve_as(&reserve.offer, &reserve.plan, whole_seconds(reserve.ttl))
                    .await?;
                out.render(&reservation, |_| {
                    read::<Reservation>("a reservation", &reservation)
                        .map(|r| Shown::Table(views::reservation_table(&r)))
                })
            }
            Action::Buy(buy) => {
                let contract: Value = self
                    .session()?
                    .buy_as(
                        &buy.reservation,
                        buy.consumer_cluster_id.as_deref(),
                        whole_seconds(buy.duration),
                    )
                    .await?;
                out.render(&contract, |_| {
                    read("a contract", &contract).map(|c| Shown::Text(views::contract_details(&c)))
                })
            }
            Action::GetContracts(id, filter) => self.get_contracts(id, filter).await,
            Action::DescribeContract(id) => {
                let contract: Value = self.session()?.contract_as(&id).await?;
                out.render(&contract, |_| {
                    read("a contract", &contract).map(|c| Shown::Text(views::contract_details(&c)))
                })
            }
            Action::FollowPurchase(_) | Action::Config(_) | Action::Completion(_) => {
                Err(Failure::new(Code::Error, "not a catalog command"))
            }
        }
    }

    async fn get_offers(
        &self,
        id: Option<String>,
        args: OfferFilterArgs,
    ) -> Result<String, Failure> {
        let out = Out::of(self.global);
        if let Some(id) = id {
            if args.any() {
                return Err(Failure::usage("get offer ID takes no filters"));
            }
            let offer: Value = self.http()?.offer_as(&id).await?;
            return out.render(&offer, |columns| {
                read::<Offer>("an offer", &offer).map(|o| {
                    Shown::Table(views::offers_table_as(std::slice::from_ref(&o), columns))
                })
            });
        }
        let filter = OfferFilter {
            offer_type: args.offer_type,
            provider: args.provider,
            max_cost: args.max_cost,
            min: args.min,
            liqo: args.liqo,
            enforcement: args.enforcement,
            isolation: args.isolation,
            labels: args.label,
            extra: args.filter,
        };
        let offers: Vec<Value> = self.http()?.offers_as(&filter).await?;
        out.render(&offers, |columns| {
            let typed: Result<Vec<Offer>, _> = offers.iter().map(|o| read("an offer", o)).collect();
            typed.map(|t| Shown::Table(views::offers_table_as(&t, columns)))
        })
    }

    async fn get_contracts(
        &self,
        id: Option<String>,
        args: ContractFilterArgs,
    ) -> Result<String, Failure> {
        let out = Out::of(self.global);
        if let Some(id) = id {
            if args.any() {
                return Err(Failure::usage("get contract ID takes no filters"));
            }
            let contract: Value = self.session()?.contract_as(&id).await?;
            return out.render(&contract, |columns| {
                read::<Contract>("a contract", &contract).map(|c| {
                    Shown::Table(views::contracts_table_as(std::slice::from_ref(&c), columns))
                })
            });
        }
        let filter = ContractFilter {
            active: (args.active || args.ended).then_some(args.active),
            state: args.state,
        };
        let contracts: Vec<Value> = self.session()?.contracts_as(&filter).await?;
        out.render(&contracts, |columns| {
            let typed: Result<Vec<Contract>, _> =
                contracts.iter().map(|c| read("a contract", c)).collect();
            typed.map(|t| Shown::Table(views::contracts_table_as(&t, columns)))
        })
    }

    fn http(&self) -> Result<Http, Failure> {
        let client = verbose::client(self.global.request_timeout, USER_AGENT)?;
        Ok(Http::new(client, self.target.catalog.clone()))
    }

    /// A session as whoever the target says: a provider's credentials
    /// file, a token file or a bearer token; none is
    /// [`Code::Unauthorized`].
    fn session(&self) -> Result<Session, Failure> {
        let http = self.http()?;
        let login = match &self.target.credential {
            Some(Credential::Provider(path)) => {
                let credentials: PeeringCredentials =
                    catalog_client::credentials::load(path, Exposure::Refuse)
                        .map_err(|e| Failure::usage(e.to_string()))?;
                Login::Provider {
                    credentials,
                    file: None,
                }
            }
            Some(Credential::TokenFile { what, path }) => Login::Bearer {
                token: crate::secrets::read_token_file_named(what, path)?,
            },
            Some(Credential::Token(token)) => Login::Bearer {
                token: token.clone(),
            },
            None => {
                return Err(Failure::new(
                    Code::Unauthorized,
                    "no credentials: set BROKERCTL_TOKEN (or pass --token-file or --token), a provider's --credentials file, or a context with credentials (brokerctl config set-context)",
                ))
            }
        };
        Ok(Session::new(http, login))
    }
}

/// What a command shows as text: a table (`-o wide` widens it,
/// `--no-headers` drops its header) or lines of details.
pub enum Shown {
    Table(Table),
    Text(String),
}

/// How to print: `-o` and `--no-headers`.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    pub format: Format,
    pub headers: bool,
}

impl Out {
    pub fn of(global: &Global) -> Self {
        Out {
            format: global.output,
            headers: !global.no_headers,
        }
    }

    /// `value` as JSON or YAML, or what `show` makes of it, with the
    /// columns `-o` asks for.
    pub fn render<T: Serialize + ?Sized>(
        self,
        value: &T,
        show: impl FnOnce(Columns) -> Result<Shown, Failure>,
    ) -> Result<String, Failure> {
        let columns = match self.format {
            Format::Json => return output::json(value),
            Format::Yaml => return output::yaml(value),
            Format::Table => Columns::Normal,
            Format::Wide => Columns::Wide,
        };
        Ok(match show(columns)? {
            Shown::Table(table) => table.render_with(self.headers),
            Shown::Text(text) => text,
        })
    }
}

/// The completion script for `shell`.
pub fn completion(shell: Shell) -> String {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "brokerctl", &mut script);
    String::from_utf8_lossy(&script).into_owned()
}

fn whole_seconds(duration: Option<Duration>) -> Option<u64> {
    duration.map(|d| d.as_secs().max(1))
}

/// The kubeconfig context `follow purchase` uses: `--kube-context`, else
/// the global `--context` when the config file holds no brokerctl context
/// of that name (`purchase follow --context C` named the kubeconfig's
/// before brokerctl had contexts), else the kubeconfig's current one.
fn kube_context(global: &Global, args: &FollowArgs, loaded: &Loaded) -> Option<String> {
    if let Some(name) = &args.kube_context {
        return Some(name.clone());
    }
    global
        .context
        .as_ref()
        .filter(|name| loaded.context(name).is_none())
        .cloned()
}

async fn follow_purchase(global: &Global, args: FollowArgs) -> Result<String, Failure> {
    let loaded = match &global.context {
        Some(_) => config::load(config::path(global.config.as_deref()))?,
        None => Loaded::default(),
    };
    let context = kube_context(global, &args, &loaded);
    let config =
        controller_core::kubeconfig::config(args.kubeconfig.as_deref(), context.as_deref())
            .await
            .map_err(|e| Failure::usage(e.to_string()))?;
    // Each answer bounded (8 MiB, a watch per event; 30 s whole): an API
    // server answering a 128 MiB object was once read whole (issue 41,
    // B-19). A Purchase is a few KiB.
    let client = controller_core::bounded::client(config, follow::bounds())
        .map_err(|e| Failure::usage(format!("cannot build a Kubernetes client: {e}")))?;
    let resource = follow::purchase_resource();
    let api = match &args.namespace {
        Some(ns) => kube::Api::namespaced_with(client, ns, &resource),
        None => kube::Api::default_namespaced_with(client, &resource),
    };
    let mut stdout = std::io::stdout();
    let last = follow::follow(api, &args.name, args.timeout, &mut stdout).await?;
    match global.output {
        // Each change was printed as it came.
        Format::Table | Format::Wide => Ok(String::new()),
        Format::Json => output::json(&last),
        Format::Yaml => output::yaml(&last),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn action(args: &[&str]) -> Action {
        let mut argv = vec!["brokerctl"];
        argv.extend(args);
        Action::from(Cli::try_parse_from(argv).unwrap().command)
    }

    #[test]
    fn the_old_spellings_run_the_new_commands() {
        // Verb first, as kubectl; the noun-first forms of before still parse
        // to the same action.
        for (new, old) in [
            (
                &["get", "offers", "--min", "memory=8Gi"][..],
                &["offers", "list", "--min", "memory=8Gi"][..],
            ),
            (&["get", "offers"], &["offer", "ls"]),
            (&["describe", "offer", "o1"], &["offers", "show", "o1"]),
            (
                &["publish", "offer", "-f", "x.yaml"],
                &["offers", "publish", "-f", "x.yaml"],
            ),
            (
                &["get", "contracts", "--active"],
                &["contracts", "list", "--active"],
            ),
            (&["describe", "contract", "c1"], &["contract", "show", "c1"]),
            (&["follow", "purchase", "p1"], &["purchase", "follow", "p1"]),
        ] {
            assert_eq!(
                format!("{:?}", action(new)),
                format!("{:?}", action(old)),
                "{new:?} and {old:?}"
            );
        }
        assert!(
            matches!(action(&["get", "offer", "o1"]), Action::GetOffers(Some(id), _) if id == "o1")
        );
        assert!(
            matches!(action(&["get", "contract", "c1"]), Action::GetContracts(Some(id), _) if id == "c1")
        );
    }

    #[test]
    fn help_lists_the_verbs_only() {
        let help = Cli::command().render_long_help().to_string();
        for verb in [
            "get", "describe", "publish", "reserve", "buy", "follow", "config",
        ] {
            assert!(help.contains(&format!("\n  {verb} ")), "{verb}: {help}");
        }
        for old in ["offers", "contracts", "purchase "] {
            assert!(!help.contains(&format!("\n  {old}")), "{old}: {help}");
        }
    }

    #[test]
    fn follow_reads_an_unknown_context_as_the_kubeconfigs() {
        let cli = |args: &[&str]| {
            let mut argv = vec!["brokerctl"];
            argv.extend(args);
            let cli = Cli::try_parse_from(argv).unwrap();
            let (Command::Purchase(PurchaseCommand::Follow(f))
            | Command::Follow(FollowCommand::Purchase(f))) = cli.command
            else {
                panic!("not follow")
            };
            (cli.global, f)
        };
        let loaded = Loaded {
            config: config::parse("contexts:\n- name: prod\n").unwrap(),
            ..Loaded::default()
        };
        let (g, f) = cli(&["purchase", "follow", "p", "--context", "kind-a"]);
        assert_eq!(kube_context(&g, &f, &loaded).as_deref(), Some("kind-a"));
        let (g, f) = cli(&["follow", "purchase", "p", "--context", "prod"]);
        assert_eq!(kube_context(&g, &f, &loaded), None);
        let (g, f) = cli(&[
            "follow",
            "purchase",
            "p",
            "--context",
            "prod",
            "--kube-context",
            "k",
        ]);
        assert_eq!(kube_context(&g, &f, &loaded).as_deref(), Some("k"));
    }
}
