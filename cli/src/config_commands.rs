//! `brokerctl config …`: the contexts of the config file, as `kubectl
//! config` handles a kubeconfig's. Nothing here prints a token: a context
//! shows the kind of its credentials (`token-file PATH`, `token (stored)`).

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::args::{ConfigCommand, Format, Given, Global, SetContextArgs};
use crate::config::{self, Config, Context, Loaded};
use crate::exit::{Code, Failure};
use crate::output::{self, Table};
use crate::secrets::MAX_TOKEN_FILE_BYTES;

/// Run a `config` subcommand; its text for stdout. `stdin` is where
/// `--token-stdin` reads.
pub fn run(
    global: &Global,
    given: &Given,
    command: ConfigCommand,
    stdin: &mut dyn Read,
) -> Result<String, Failure> {
    let mut loaded = config::load(config::path(global.config.as_deref()))?;
    match command {
        ConfigCommand::GetContexts => get_contexts(global, &loaded),
        ConfigCommand::CurrentContext => match &loaded.config.current_context {
            Some(name) => Ok(format!("{}\n", output::escape(name))),
            None => Err(Failure::new(
                Code::NotFound,
                format!("current-context is not set in {}", loaded.shown()),
            )),
        },
        ConfigCommand::UseContext { name } => {
            exists(&loaded, &name)?;
            loaded.config.current_context = Some(name.clone());
            save(&loaded)?;
            Ok(format!(
                "Switched to context {:?}.\n",
                output::escape(&name)
            ))
        }
        ConfigCommand::DeleteContext { name } => {
            exists(&loaded, &name)?;
            loaded.config.contexts.retain(|c| c.name != name);
            if loaded.config.current_context.as_deref() == Some(name.as_str()) {
                loaded.config.current_context = None;
            }
            save(&loaded)?;
            Ok(format!(
                "deleted context {:?} from {}\n",
                output::escape(&name),
                loaded.shown()
            ))
        }
        ConfigCommand::SetContext(args) => {
            let name = args.name.clone();
            let created = set_context(global, given, &mut loaded.config, args, stdin)?;
            save(&loaded)?;
            let verb = if created { "created" } else { "modified" };
            Ok(format!("Context {:?} {verb}.\n", output::escape(&name)))
        }
    }
}

fn exists(loaded: &Loaded, name: &str) -> Result<(), Failure> {
    match loaded.context(name) {
        Some(_) => Ok(()),
        None => Err(Failure::new(
            Code::NotFound,
            format!("no context {name:?} in {}", loaded.shown()),
        )),
    }
}

fn save(loaded: &Loaded) -> Result<(), Failure> {
    let path = loaded.path.as_deref().ok_or_else(|| {
        Failure::usage("no config file to write: set --config or BROKERCTL_CONFIG (no HOME)")
    })?;
    config::save(path, &loaded.config)
}

/// The contexts as a table (`CURRENT` marks the current one with `*`, as
/// kubectl), or as JSON/YAML without any token.
fn get_contexts(global: &Global, loaded: &Loaded) -> Result<String, Failure> {
    let current = loaded.config.current_context.as_deref();
    let rows: Vec<(bool, &Context)> = loaded
        .config
        .contexts
        .iter()
        .map(|c| (current == Some(c.name.as_str()), c))
        .collect();
    match global.output {
        Format::Json | Format::Yaml => {
            let listed: Vec<_> = rows
                .iter()
                .map(|(is_current, c)| {
                    json!({
                        "name": c.name,
                        "current": is_current,
                        "catalog": c.catalog,
                        "credentials": c.credentials_kind(),
                    })
                })
                .collect();
            if global.output == Format::Json {
                output::json(&listed)
            } else {
                output::yaml(&listed)
            }
        }
        Format::Table | Format::Wide => {
            let mut table = Table::new(&["CURRENT", "NAME", "CATALOG", "CREDENTIALS"]);
            for (is_current, c) in rows {
                table.row(vec![
                    if is_current { "*" } else { "" }.to_string(),
                    c.name.clone(),
                    c.catalog.clone().unwrap_or_else(|| "-".to_string()),
                    c.credentials_kind(),
                ]);
            }
            Ok(table.render_with(!global.no_headers))
        }
    }
}

/// Create the context or change it: the settings typed on the command
/// line (not the BROKERCTL_* variables, which may be set for another
/// catalog). One kind of credentials replaces the one it had. True when
/// it was created.
fn set_context(
    global: &Global,
    given: &Given,
    config: &mut Config,
    args: SetContextArgs,
    stdin: &mut dyn Read,
) -> Result<bool, Failure> {
    if given.token {
        return Err(Failure::usage(
            "config set-context stores no --token: a command line is readable by other local users; use --token-stdin or --token-file",
        ));
    }
    let kinds = [given.token_file, given.credentials, args.token_stdin];
    if kinds.iter().filter(|k| **k).count() > 1 {
        return Err(Failure::usage(
            "config set-context: give one of --token-file, --credentials and --token-stdin",
        ));
    }
    if args.name.trim().is_empty() {
        return Err(Failure::usage("config set-context: the name is empty"));
    }
    let token = if args.token_stdin {
        Some(read_token(stdin)?)
    } else {
        None
    };
    let created = !config.contexts.iter().any(|c| c.name == args.name);
    if created {
        config.contexts.push(Context {
            name: args.name.clone(),
            ..Context::default()
        });
    }
    let context = config
        .contexts
        .iter_mut()
        .find(|c| c.name == args.name)
        .ok_or_else(|| Failure::new(Code::Error, "the context just added is gone"))?;
    if given.catalog_url {
        context.catalog = global.catalog_url.as_ref().map(|u| u.to_string());
    }
    let replace = |context: &mut Context| {
        context.token = None;
        context.token_file = None;
        context.credentials = None;
    };
    if given.token_file {
        replace(context);
        context.token_file = global.token_file.as_deref().map(absolute).transpose()?;
    } else if given.credentials {
        replace(context);
        context.credentials = global.credentials.as_deref().map(absolute).transpose()?;
    } else if let Some(token) = token {
        replace(context);
        context.token = Some(token);
    }
    Ok(created)
}

/// `path` from the working directory, so the context means the same file
/// wherever brokerctl runs next.
fn absolute(path: &Path) -> Result<PathBuf, Failure> {
    std::path::absolute(path).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))
}

/// A token from stdin: at most [`MAX_TOKEN_FILE_BYTES`], whitespace
/// around it ignored, not empty.
fn read_token(stdin: &mut dyn Read) -> Result<String, Failure> {
    let mut text = String::new();
    stdin
        .take(MAX_TOKEN_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| Failure::usage(format!("--token-stdin: cannot read stdin: {e}")))?;
    if text.len() as u64 > MAX_TOKEN_FILE_BYTES {
        return Err(Failure::usage(format!(
            "--token-stdin: more than {MAX_TOKEN_FILE_BYTES} bytes"
        )));
    }
    let token = text.trim();
    if token.is_empty() || token.contains(char::is_whitespace) {
        return Err(Failure::usage(
            "--token-stdin: stdin holds no token (one word expected)",
        ));
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command};
    use clap::Parser;

    /// Run `brokerctl --config FILE args…` with `stdin`; flags count as
    /// typed.
    fn config(file: &Path, args: &[&str], stdin: &str) -> Result<String, Failure> {
        let mut argv = vec!["brokerctl", "--config", file.to_str().unwrap()];
        argv.extend(args);
        let cli = Cli::try_parse_from(argv).unwrap();
        let given = Given {
            catalog_url: cli.global.catalog_url.is_some(),
            token: cli.global.token.is_some(),
            token_file: cli.global.token_file.is_some(),
            credentials: cli.global.credentials.is_some(),
        };
        let Command::Config(command) = cli.command else {
            panic!("not a config command")
        };
        run(&cli.global, &given, command, &mut stdin.as_bytes())
    }

    #[test]
    fn contexts_are_set_used_listed_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.yaml");
        let out = config(
            &file,
            &[
                "config",
                "set-context",
                "prod",
                "--catalog",
                "https://prod.example/",
                "--token-file",
                "/t",
            ],
            "",
        )
        .unwrap();
        assert_eq!(out, "Context \"prod\" created.\n");
        let out = config(
            &file,
            &["config", "set-context", "dev", "--token-stdin"],
            "s3cret\n",
        )
        .unwrap();
        assert_eq!(out, "Context \"dev\" created.\n");
        // Changing the catalog keeps the credentials.
        config(
            &file,
            &[
                "config",
                "set-context",
                "dev",
                "--catalog",
                "http://dev.example/",
            ],
            "",
        )
        .unwrap();
        config(&file, &["config", "current-context"], "").unwrap_err();
        assert_eq!(
            config(&file, &["config", "use-context", "dev"], "").unwrap(),
            "Switched to context \"dev\".\n"
        );
        assert_eq!(
            config(&file, &["config", "current-context"], "").unwrap(),
            "dev\n"
        );
        let table = config(&file, &["config", "get-contexts"], "").unwrap();
        assert_eq!(
            table,
            "CURRENT   NAME   CATALOG                 CREDENTIALS\n\
             \x20         prod   https://prod.example/   token-file /t\n\
             *         dev    http://dev.example/     token (stored)\n"
        );
        assert!(!table.contains("s3cret"));
        let json = config(&file, &["config", "get-contexts", "-o", "json"], "").unwrap();
        assert!(!json.contains("s3cret"), "{json}");
        assert!(json.contains("\"current\": true"), "{json}");
        let rows = config(&file, &["config", "get-contexts", "--no-headers"], "").unwrap();
        assert_eq!(rows.lines().count(), 2, "{rows}");
        // The token is in the file, which only its owner may read.
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("token: s3cret"), "{text}");
        // A token file replaces the stored token.
        config(
            &file,
            &["config", "set-context", "dev", "--token-file", "/u"],
            "",
        )
        .unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("s3cret"), "{text}");
        // Deleting the current one clears the current-context.
        config(&file, &["config", "delete-context", "dev"], "").unwrap();
        let missing = config(&file, &["config", "use-context", "dev"], "").unwrap_err();
        assert_eq!(missing.code, Code::NotFound);
        assert_eq!(
            config(&file, &["config", "current-context"], "")
                .unwrap_err()
                .code,
            Code::NotFound
        );
    }

    #[test]
    fn set_context_keeps_tokens_off_the_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.yaml");
        let argv = ["config", "set-context", "x", "--token", "s3cret"];
        let err = config(&file, &argv, "").unwrap_err();
        assert_eq!(err.code, Code::Usage);
        assert!(err.message.contains("--token-stdin"), "{}", err.message);
        assert!(!file.exists());
        let both = [
            "config",
            "set-context",
            "x",
            "--token-stdin",
            "--token-file",
            "/t",
        ];
        assert!(config(&file, &both, "t").is_err());
        let empty = config(
            &file,
            &["config", "set-context", "x", "--token-stdin"],
            "\n",
        );
        assert_eq!(empty.unwrap_err().code, Code::Usage);
    }
}
