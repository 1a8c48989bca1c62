//! The config file: named contexts, each a catalog URL and one kind of
//! credentials, and the current one, as kubectl keeps clusters and users
//! in a kubeconfig. YAML:
//!
//! ```yaml
//! current-context: prod
//! contexts:
//! - name: prod
//!   catalog: https://catalog.example.com
//!   token-file: /home/me/.config/brokerctl/prod.token
//! - name: dev
//!   catalog: http://127.0.0.1:8080
//!   token: eyJ...            # stored here: the file is readable by you alone
//! ```
//!
//! The file is read with edge's `config_file` rules (a regular file, at
//! most [`MAX_CONFIG_BYTES`], within a deadline) and written whole, 0600,
//! through a temporary file renamed over it, so a crash leaves the old
//! file or the new one and never a token readable by others in between.
//! A token stored in it is used only while the file is private (as ssh
//! refuses a private key others may read).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::exit::Failure;
use crate::secrets;

/// Largest config file read: a context is a few hundred bytes (a stored
/// OpenID Connect token a few KiB).
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The config file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Config {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_context: Option<String>,
    #[serde(default)]
    pub contexts: Vec<Context>,
}

/// One context: where the catalog is and who to be there.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Context {
    pub name: String,
    /// The catalog's base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<String>,
    /// A file holding a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// A bearer token stored in the config file itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A provider's credentials file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<PathBuf>,
}

/// Never the token: a context may be logged or shown in an error.
impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("name", &self.name)
            .field("catalog", &self.catalog)
            .field("token_file", &self.token_file)
            .field("token", &self.token.as_ref().map(|_| "(stored)"))
            .field("credentials", &self.credentials)
            .finish()
    }
}

impl Context {
    /// What kind of credentials it holds, never the secret itself:
    /// `token-file PATH`, `token (stored)`, `credentials PATH`, `-`.
    pub fn credentials_kind(&self) -> String {
        if let Some(path) = &self.credentials {
            format!("credentials {}", path.display())
        } else if let Some(path) = &self.token_file {
            format!("token-file {}", path.display())
        } else if self.token.is_some() {
            "token (stored)".to_string()
        } else {
            "-".to_string()
        }
    }
}

/// The config file's path: `--config` (or `BROKERCTL_CONFIG`), else
/// `$XDG_CONFIG_HOME/brokerctl/config.yaml` (an absolute one: the XDG
/// specification says a relative one is ignored), else
/// `$HOME/.config/brokerctl/config.yaml`; none without a home.
pub fn path(flag: Option<&Path>) -> Option<PathBuf> {
    path_from(
        flag,
        std::env::var_os("XDG_CONFIG_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`path`], from the flag and the two variables' values.
pub fn path_from(
    flag: Option<&Path>,
    xdg_config_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    if let Some(path) = flag {
        return Some(path.to_path_buf());
    }
    let xdg = xdg_config_home
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let base = xdg.or_else(|| {
        home.filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".config"))
    })?;
    Some(base.join("brokerctl").join("config.yaml"))
}

/// A config file read: its contents and whether others may read it.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub path: Option<PathBuf>,
    pub config: Config,
    /// Why a token stored in it must not be used (its group or other
    /// users may read it), if so.
    pub exposed: Option<String>,
}

impl Loaded {
    /// The context named `name`.
    pub fn context(&self, name: &str) -> Option<&Context> {
        self.config.contexts.iter().find(|c| c.name == name)
    }

    /// The file's name for messages.
    pub fn shown(&self) -> String {
        self.path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(no config file: no HOME)".to_string())
    }
}

/// Read the config file at `path`; a missing one is an empty config.
pub fn load(path: Option<PathBuf>) -> Result<Loaded, Failure> {
    let Some(path) = path else {
        return Ok(Loaded::default());
    };
    if !path.exists() && std::fs::symlink_metadata(&path).is_err() {
        return Ok(Loaded {
            path: Some(path),
            ..Loaded::default()
        });
    }
    let text = edge::config_file::read("config file", &path, MAX_CONFIG_BYTES)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let config = parse(&text).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    let exposed = secrets::exposure(&path)?;
    Ok(Loaded {
        path: Some(path),
        config,
        exposed,
    })
}

/// The config file's text read and checked: known keys only (a typo such
/// as `toekn-file` is an error, not a context without credentials), one
/// context per name, URLs that parse, at most one kind of credentials per
/// context.
pub fn parse(text: &str) -> Result<Config, String> {
    let config: Config = if text.trim().is_empty() {
        Config::default()
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| format!("not a brokerctl config file: {e}"))?
    };
    check(&config)?;
    Ok(config)
}

fn check(config: &Config) -> Result<(), String> {
    for (i, context) in config.contexts.iter().enumerate() {
        if context.name.trim().is_empty() {
            return Err(format!("context {} has no name", i + 1));
        }
        if config.contexts[..i].iter().any(|c| c.name == context.name) {
            return Err(format!("context {:?} is defined twice", context.name));
        }
        if let Some(url) = &context.catalog {
            reqwest::Url::parse(url)
                .map_err(|e| format!("context {:?}: catalog {url:?}: {e}", context.name))?;
        }
        let kinds = [
            context.token_file.is_some(),
            context.token.is_some(),
            context.credentials.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() > 1 {
            return Err(format!(
                "context {:?}: give one of token-file, token and credentials",
                context.name
            ));
        }
    }
    Ok(())
}

/// Write `config` to `path`, readable and writable by its owner alone
/// (0600), through a temporary file in the same directory renamed over
/// it. The directory is created (0700) if need be.
pub fn save(path: &Path, config: &Config) -> Result<(), Failure> {
    check(config).map_err(Failure::usage)?;
    let fail = |what: &str, e: std::io::Error| {
        Failure::usage(format!("config file {}: {what}: {e}", path.display()))
    };
    let text = serde_yaml_ng::to_string(config)
        .map_err(|e| Failure::usage(format!("cannot write the config: {e}")))?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(dir)
            .map_err(|e| fail("cannot create its directory", e))?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config.yaml".to_string());
    let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temporary, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(fail("cannot write it", e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_reads_its_contexts() {
        let config = parse(
            "current-context: prod\ncontexts:\n\
             - name: prod\n  catalog: https://c.example/\n  token-file: /t\n\
             - name: dev\n  catalog: http://127.0.0.1:8080\n  token: s3cret\n",
        )
        .unwrap();
        assert_eq!(config.current_context.as_deref(), Some("prod"));
        assert_eq!(config.contexts.len(), 2);
        assert_eq!(config.contexts[0].credentials_kind(), "token-file /t");
        assert_eq!(config.contexts[1].credentials_kind(), "token (stored)");
        // Its Debug shows no token.
        assert!(!format!("{config:?}").contains("s3cret"), "{config:?}");
        assert_eq!(parse("").unwrap(), Config::default());
    }

    #[test]
    fn the_file_is_found_where_xdg_says() {
        let os = |s: &str| Some(std::ffi::OsString::from(s));
        let at = |p: &str| Some(PathBuf::from(p));
        assert_eq!(
            path_from(Some(Path::new("/f.yaml")), os("/x"), os("/h")),
            at("/f.yaml")
        );
        assert_eq!(
            path_from(None, os("/x"), os("/h")),
            at("/x/brokerctl/config.yaml")
        );
        // A relative XDG_CONFIG_HOME is ignored, as the specification says.
        assert_eq!(
            path_from(None, os("rel"), os("/h")),
            at("/h/.config/brokerctl/config.yaml")
        );
        assert_eq!(path_from(None, None, os("")), None);
    }

    #[test]
    fn a_bad_config_says_what_is_wrong() {
        let typo = parse("contexts:\n- name: a\n  toekn-file: /t\n").unwrap_err();
        assert!(typo.contains("toekn-file"), "{typo}");
        let twice = parse("contexts:\n- name: a\n- name: a\n").unwrap_err();
        assert!(twice.contains("\"a\" is defined twice"), "{twice}");
        let url = parse("contexts:\n- name: a\n  catalog: not a url\n").unwrap_err();
        assert!(url.contains("catalog \"not a url\""), "{url}");
        let both = parse("contexts:\n- name: a\n  token: x\n  token-file: /t\n").unwrap_err();
        assert!(both.contains("one of token-file, token"), "{both}");
        assert!(!both.contains(": x"), "{both}");
    }

    #[test]
    fn the_file_is_written_private_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("config.yaml");
        let config = Config {
            current_context: Some("dev".into()),
            contexts: vec![Context {
                name: "dev".into(),
                catalog: Some("http://127.0.0.1:1/".into()),
                token: Some("s3cret".into()),
                ..Context::default()
            }],
        };
        save(&path, &config).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o077, 0, "{dir_mode:o}");
        let loaded = load(Some(path.clone())).unwrap();
        assert_eq!(loaded.config, config);
        assert_eq!(loaded.exposed, None);
        // Replaced whole, still private, no temporary file left.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(load(Some(path.clone())).unwrap().exposed.is_some());
        save(&path, &Config::default()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["config.yaml"]);
        // A missing file is an empty config.
        let missing = load(Some(dir.path().join("none.yaml"))).unwrap();
        assert_eq!(missing.config, Config::default());
    }
}
