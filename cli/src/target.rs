//! Which catalog to talk to and as whom: flags, else their BROKERCTL_*
//! variables (clap merges the two, the flag winning), else the context of
//! the config file (`--context`, else its `current-context`), else the
//! defaults. A credential given by a flag or a variable replaces the
//! context's whole (a `--token` does not mix with a context's
//! `token-file`).

use std::path::{Path, PathBuf};

use crate::args::{Given, Global};
use crate::config::{Context, Loaded};
use crate::exit::{Code, Failure};

/// The catalog when nothing names one: a catalog run locally.
pub const DEFAULT_CATALOG: &str = "http://127.0.0.1:8080";

/// Where the catalog is and who to be there.
#[derive(Debug, Clone)]
pub struct Target {
    pub catalog: reqwest::Url,
    pub credential: Option<Credential>,
    /// The context used, if one was.
    pub context: Option<String>,
}

/// Who to be: a bearer token, where one is kept, or a provider's
/// credentials file.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// A token given (`--token`, `BROKERCTL_TOKEN`) or stored in the
    /// config file (checked private when read).
    Token(String),
    /// A file holding a token; `what` names it in errors (`--token-file`,
    /// `context "prod" token-file`).
    TokenFile { what: String, path: PathBuf },
    /// A provider's credentials file.
    Provider(PathBuf),
}

/// Never the token itself.
impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::Token(_) => f.write_str("Token(..)"),
            Credential::TokenFile { what, path } => write!(f, "TokenFile({what}: {path:?})"),
            Credential::Provider(path) => write!(f, "Provider({path:?})"),
        }
    }
}

impl Credential {
    /// What it is, for a log line: never the token.
    pub fn describe(&self) -> String {
        match self {
            Credential::Token(_) => "a bearer token".to_string(),
            Credential::TokenFile { path, .. } => format!("the token in {}", path.display()),
            Credential::Provider(path) => format!("the provider credentials {}", path.display()),
        }
    }
}

/// The context `global` selects in `loaded`: `--context` (or
/// `BROKERCTL_CONTEXT`), else the file's current-context, else none. A
/// name the file does not hold is an error naming the file.
pub fn selected<'l>(global: &Global, loaded: &'l Loaded) -> Result<Option<&'l Context>, Failure> {
    if let Some(name) = &global.context {
        return loaded.context(name).map(Some).ok_or_else(|| {
            Failure::usage(format!(
                "no context {name:?} in {} (brokerctl config get-contexts)",
                loaded.shown()
            ))
        });
    }
    match &loaded.config.current_context {
        Some(name) => loaded.context(name).map(Some).ok_or_else(|| {
            Failure::usage(format!(
                "the current-context {name:?} of {} names no context (brokerctl config use-context NAME)",
                loaded.shown()
            ))
        }),
        None => Ok(None),
    }
}

/// The target the flags, the variables and the selected context of
/// `loaded` give, in that order.
pub fn resolve(global: &Global, given: &Given, loaded: &Loaded) -> Result<Target, Failure> {
    let context = selected(global, loaded)?;
    let catalog = match (
        &global.catalog_url,
        context.and_then(|c| c.catalog.as_deref()),
    ) {
        (Some(url), _) => url.clone(),
        (None, Some(url)) => reqwest::Url::parse(url)
            .map_err(|e| Failure::usage(format!("{}: catalog {url:?}: {e}", loaded.shown())))?,
        (None, None) => reqwest::Url::parse(DEFAULT_CATALOG)
            .map_err(|e| Failure::new(Code::Error, e.to_string()))?,
    };
    let flagged = if let Some(path) = &global.credentials {
        Some(Credential::Provider(path.clone()))
    } else if let Some(path) = &global.token_file {
        Some(Credential::TokenFile {
            what: "--token-file".to_string(),
            path: path.clone(),
        })
    } else {
        global.token.clone().map(Credential::Token)
    };
    let credential = match (flagged, context) {
        (Some(credential), context) => {
            let typed = given.credentials || given.token_file || given.token;
            if let Some(c) = context.filter(|c| !typed && c.credentials_kind() != "-") {
                // A variable exported for another catalog would otherwise
                // go, silently, to this context's.
                tracing::warn!(
                    context = %c.name,
                    "a BROKERCTL_* credential variable replaces the credentials of context {:?}",
                    c.name
                );
            }
            Some(credential)
        }
        (None, Some(context)) => from_context(context, loaded)?,
        (None, None) => None,
    };
    Ok(Target {
        catalog,
        credential,
        context: context.map(|c| c.name.clone()),
    })
}

/// A context's credentials; a stored token only from a private file, a
/// relative path from the config file's directory (as kubectl reads a
/// kubeconfig's).
fn from_context(context: &Context, loaded: &Loaded) -> Result<Option<Credential>, Failure> {
    let relative = |path: &Path| match loaded.path.as_deref().and_then(Path::parent) {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_path_buf(),
    };
    if let Some(path) = &context.credentials {
        return Ok(Some(Credential::Provider(relative(path))));
    }
    if let Some(path) = &context.token_file {
        return Ok(Some(Credential::TokenFile {
            what: format!("context {:?} token-file", context.name),
            path: relative(path),
        }));
    }
    match (&context.token, &loaded.exposed) {
        (Some(_), Some(why)) => Err(Failure::usage(format!(
            "context {:?} stores a token, refused: {why}",
            context.name
        ))),
        (Some(token), None) => Ok(Some(Credential::Token(token.clone()))),
        (None, _) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Cli;
    use crate::config::{parse, Loaded};
    use clap::Parser;

    fn loaded(text: &str, exposed: bool) -> Loaded {
        Loaded {
            path: Some(PathBuf::from("/home/me/.config/brokerctl/config.yaml")),
            config: parse(text).unwrap(),
            exposed: exposed.then(|| "permissions 0644 are too open".to_string()),
        }
    }

    const CONFIG: &str = "current-context: prod\ncontexts:\n\
        - name: prod\n  catalog: https://prod.example/\n  token-file: prod.token\n\
        - name: dev\n  catalog: http://dev.example/\n  token: s3cret\n\
        - name: bare\n";

    /// The target of `args` (flags only: the environment is not read
    /// here, clap's `env` fallbacks being clap's).
    fn target(args: &[&str], config: &Loaded) -> Result<Target, Failure> {
        let mut argv = vec!["brokerctl"];
        argv.extend(args);
        argv.extend(["get", "offers"]);
        let cli = Cli::try_parse_from(argv).unwrap();
        let given = Given {
            catalog_url: cli.global.catalog_url.is_some(),
            token: cli.global.token.is_some(),
            token_file: cli.global.token_file.is_some(),
            credentials: cli.global.credentials.is_some(),
        };
        resolve(&cli.global, &given, config)
    }

    #[test]
    fn the_current_context_gives_the_catalog_and_credentials() {
        let config = loaded(CONFIG, false);
        let t = target(&[], &config).unwrap();
        assert_eq!(t.catalog.as_str(), "https://prod.example/");
        assert_eq!(t.context.as_deref(), Some("prod"));
        // Relative to the config file's directory.
        assert_eq!(
            t.credential,
            Some(Credential::TokenFile {
                what: "context \"prod\" token-file".into(),
                path: "/home/me/.config/brokerctl/prod.token".into()
            })
        );
        let t = target(&["--context", "dev"], &config).unwrap();
        assert_eq!(t.catalog.as_str(), "http://dev.example/");
        assert_eq!(t.credential, Some(Credential::Token("s3cret".into())));
        assert!(!format!("{t:?}").contains("s3cret"), "{t:?}");
        // Nothing anywhere: the local catalog, no credentials.
        let none = target(&[], &Loaded::default()).unwrap();
        assert_eq!(none.catalog.as_str(), "http://127.0.0.1:8080/");
        assert_eq!(none.credential, None);
        assert_eq!(none.context, None);
    }

    #[test]
    fn flags_win_over_the_context() {
        let config = loaded(CONFIG, false);
        let t = target(
            &["--catalog", "http://flag.example/", "--token", "t"],
            &config,
        )
        .unwrap();
        assert_eq!(t.catalog.as_str(), "http://flag.example/");
        assert_eq!(t.credential, Some(Credential::Token("t".into())));
        // A flag's credential replaces the context's, the catalog stays.
        let t = target(&["--context", "dev", "--token-file", "/t"], &config).unwrap();
        assert_eq!(t.catalog.as_str(), "http://dev.example/");
        assert_eq!(
            t.credential,
            Some(Credential::TokenFile {
                what: "--token-file".into(),
                path: "/t".into()
            })
        );
        let t = target(&["--context", "bare"], &config).unwrap();
        assert_eq!(t.catalog.as_str(), "http://127.0.0.1:8080/");
        assert_eq!(t.credential, None);
    }

    #[test]
    fn a_missing_context_or_an_exposed_token_is_refused() {
        let config = loaded(CONFIG, false);
        let missing = target(&["--context", "nope"], &config).unwrap_err();
        assert_eq!(missing.code, Code::Usage);
        assert!(
            missing.message.contains("no context \"nope\" in /home/me"),
            "{}",
            missing.message
        );
        let dangling = loaded("current-context: gone\n", false);
        let err = target(&[], &dangling).unwrap_err();
        assert!(err.message.contains("\"gone\""), "{}", err.message);
        // A stored token in a file others may read: refused, not shown.
        let exposed = loaded(CONFIG, true);
        let err = target(&["--context", "dev"], &exposed).unwrap_err();
        assert_eq!(err.code, Code::Usage);
        assert!(err.message.contains("too open"), "{}", err.message);
        assert!(!err.message.contains("s3cret"), "{}", err.message);
        // A token file path is not a secret: the config may be readable.
        assert!(target(&[], &exposed).is_ok());
    }
}
