//! Each subcommand: from its arguments, through the catalog (or the
//! cluster), to the text it prints. A command returns its output as a
//! string (`main` writes it), except `purchase follow`, which prints each
//! change as it comes.

use std::time::Duration;

use catalog_client::market::{ContractFilter, OfferFilter};
use catalog_client::wire::{Contract, Offer, PeeringCredentials, Reservation};
use catalog_client::{Exposure, Http, Login, Session};
use clap::CommandFactory;
use serde::Serialize;
use serde_json::{json, Value};

use crate::args::{
    BuyArgs, Cli, Command, ContractsCommand, FollowArgs, Format, Global, OfferFilterArgs,
    OffersCommand, PurchaseCommand, ReserveArgs, Shell,
};
use crate::exit::{Code, Failure};
use crate::views::read;
use crate::{follow, offer_file, output, views};

/// What the catalog's client calls itself (the catalog logs it).
const USER_AGENT: &str = concat!("brokerctl/", env!("CARGO_PKG_VERSION"));

/// Run `cli`; the text for stdout.
pub async fn run(cli: Cli) -> Result<String, Failure> {
    let global = &cli.global;
    match cli.command {
        Command::Offers(OffersCommand::List(filter)) => list_offers(global, filter).await,
        Command::Offers(OffersCommand::Show { id }) => show_offer(global, &id).await,
        Command::Offers(OffersCommand::Publish(publish)) => {
            let file = offer_file::load(&publish.file, publish.id.as_deref())?;
            let mut session = session(global)?;
            let written = session.put_offer(&file.id, &file.body).await?;
            let verb = if written.created {
                "created"
            } else {
                "replaced"
            };
            let result =
                json!({"id": file.id, "created": written.created, "version": written.version});
            render(global.output, &result, || {
                Ok(format!(
                    "offer {} {verb} (version {})\n",
                    output::escape(&file.id),
                    written.version
                ))
            })
        }
        Command::Reserve(reserve) => reserve_plan(global, reserve).await,
        Command::Buy(buy) => buy_reservation(global, buy).await,
        Command::Contracts(ContractsCommand::List {
            active,
            ended,
            state,
        }) => {
            let filter = ContractFilter {
                active: (active || ended).then_some(active),
                state,
            };
            let contracts: Vec<Value> = session(global)?.contracts_as(&filter).await?;
            render(global.output, &contracts, || {
                let typed: Result<Vec<Contract>, _> =
                    contracts.iter().map(|c| read("a contract", c)).collect();
                typed.map(|t| views::contracts_table(&t).render())
            })
        }
        Command::Contracts(ContractsCommand::Show { id }) => {
            let contract: Value = session(global)?.contract_as(&id).await?;
            render(global.output, &contract, || {
                read("a contract", &contract).map(|c| views::contract_details(&c))
            })
        }
        Command::Purchase(PurchaseCommand::Follow(args)) => follow_purchase(global, args).await,
        Command::Completion { shell } => Ok(completion(shell)),
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

/// `value` as JSON or YAML, or the table `table` makes.
fn render<T: Serialize + ?Sized>(
    format: Format,
    value: &T,
    table: impl FnOnce() -> Result<String, Failure>,
) -> Result<String, Failure> {
    match format {
        Format::Json => output::json(value),
        Format::Yaml => output::yaml(value),
        Format::Table => table(),
    }
}

fn http(global: &Global) -> Result<Http, Failure> {
    let client = Http::client(global.request_timeout, USER_AGENT)?;
    Ok(Http::new(client, global.catalog_url.clone()))
}

/// Largest `--token-file` read: a catalog token is a few hundred bytes, an
/// OpenID Connect ID token a few KiB.
pub const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;

/// The token `--token-file` holds: a regular file of at most
/// [`MAX_TOKEN_FILE_BYTES`] (edge's `config_file`: `/dev/zero` or a FIFO is
/// refused at once), no other user may read, whitespace around it ignored
/// (an editor's final newline). The file is the way to keep a token out of
/// the command line other local users can read (issue 41, B-14).
pub fn read_token_file(path: &std::path::Path) -> Result<String, Failure> {
    let text = edge::config_file::read("--token-file", path, MAX_TOKEN_FILE_BYTES)
        .map_err(|e| Failure::usage(e.to_string()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|e| Failure::usage(format!("--token-file {}: {e}", path.display())))?
            .permissions()
            .mode();
        if mode & 0o007 != 0 {
            return Err(Failure::usage(format!(
                "--token-file {}: is readable by other users (mode {:o}); it holds a secret: chmod 600",
                path.display(),
                mode & 0o777
            )));
        }
    }
    let token = text.trim();
    if token.is_empty() {
        return Err(Failure::usage(format!(
            "--token-file {}: holds no token",
            path.display()
        )));
    }
    Ok(token.to_string())
}

/// A session as whoever the flags say: a provider's credentials file, else
/// a token file, else a bearer token; none is [`Code::Unauthorized`].
fn session(global: &Global) -> Result<Session, Failure> {
    let http = http(global)?;
    let token = match &global.token_file {
        Some(path) => Some(read_token_file(path)?),
        None => global.token.clone(),
    };
    let login = match (&global.credentials, token) {
        (Some(path), _) => {
            let credentials: PeeringCredentials =
                catalog_client::credentials::load(path, Exposure::Refuse)
                    .map_err(|e| Failure::usage(e.to_string()))?;
            Login::Provider {
                credentials,
                file: None,
            }
        }
        (None, Some(token)) => Login::Bearer { token },
        (None, None) => {
            return Err(Failure::new(
                Code::Unauthorized,
                "no credentials: set BROKERCTL_TOKEN (or pass --token-file or --token), or a provider's --credentials file",
            ))
        }
    };
    Ok(Session::new(http, login))
}

async fn list_offers(global: &Global, args: OfferFilterArgs) -> Result<String, Failure> {
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
    let offers: Vec<Value> = http(global)?.offers_as(&filter).await?;
    render(global.output, &offers, || {
        let typed: Result<Vec<Offer>, _> = offers.iter().map(|o| read("an offer", o)).collect();
        typed.map(|t| views::offers_table(&t).render())
    })
}

async fn show_offer(global: &Global, id: &str) -> Result<String, Failure> {
    let offer: Value = http(global)?.offer_as(id).await?;
    render(global.output, &offer, || {
        read("an offer", &offer).map(|o| views::offer_details(&o))
    })
}

fn whole_seconds(duration: Option<Duration>) -> Option<u64> {
    duration.map(|d| d.as_secs().max(1))
}

async fn reserve_plan(global: &Global, args: ReserveArgs) -> Result<String, Failure> {
    let reservation: Value = session(global)?
        .reserve_as(&args.offer, &args.plan, whole_seconds(args.ttl))
        .await?;
    render(global.output, &reservation, || {
        read::<Reservation>("a reservation", &reservation)
            .map(|r| views::reservation_table(&r).render())
    })
}

async fn buy_reservation(global: &Global, args: BuyArgs) -> Result<String, Failure> {
    let contract: Value = session(global)?
        .buy_as(
            &args.reservation,
            args.consumer_cluster_id.as_deref(),
            whole_seconds(args.duration),
        )
        .await?;
    render(global.output, &contract, || {
        read("a contract", &contract).map(|c| views::contract_details(&c))
    })
}

async fn follow_purchase(global: &Global, args: FollowArgs) -> Result<String, Failure> {
    let config =
        controller_core::kubeconfig::config(args.kubeconfig.as_deref(), args.context.as_deref())
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
        Format::Table => Ok(String::new()),
        Format::Json => output::json(&last),
        Format::Yaml => output::yaml(&last),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_file(dir: &std::path::Path, text: &str, mode: u32) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("token");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_token_file_keeps_the_token_off_the_command_line() {
        // B-14: the token read from a file, bounded and private.
        let dir = tempfile::tempdir().unwrap();
        let path = token_file(dir.path(), "  s3cret.jwt\n", 0o600);
        assert_eq!(read_token_file(&path).unwrap(), "s3cret.jwt");

        let exposed = read_token_file(&token_file(dir.path(), "s3cret", 0o604)).unwrap_err();
        assert_eq!(exposed.code, Code::Usage);
        assert!(exposed.message.contains("chmod 600"), "{}", exposed.message);
        assert!(!exposed.message.contains("s3cret"), "{}", exposed.message);

        let empty = read_token_file(&token_file(dir.path(), "\n", 0o600)).unwrap_err();
        assert_eq!(empty.code, Code::Usage);

        let zero = read_token_file(std::path::Path::new("/dev/zero")).unwrap_err();
        assert_eq!(zero.code, Code::Usage);
        assert!(
            zero.message.contains("not a regular file"),
            "{}",
            zero.message
        );

        let big = "x".repeat(MAX_TOKEN_FILE_BYTES as usize + 1);
        let too_large = read_token_file(&token_file(dir.path(), &big, 0o600)).unwrap_err();
        assert!(
            too_large.message.contains("larger than"),
            "{}",
            too_large.message
        );
    }
}
