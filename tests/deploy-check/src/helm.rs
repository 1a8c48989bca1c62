//! Running the real `helm` (v4, installed by `scripts/install-test-deps.sh`
//! into `build/bin/`, nothing downloaded here): `helm template` renders the
//! chart the kustomize bases are generated from, `helm lint --strict` holds
//! the chart to Helm's own rules. Values go in on standard input
//! (`--values -`), so nothing is written to disk to render.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The variable naming the helm to run (the binary's `--helm` falls back
/// to it too).
pub const HELM_ENV: &str = "HELM";

/// Where `scripts/install-test-deps.sh` installs helm, from the
/// repository's root.
pub const INSTALLED_PATH: &str = "build/bin/helm";

/// Why helm could not render or lint the chart. (Causes are part of each
/// message, as in [`crate::kubectl::RenderError`].)
#[derive(Debug, thiserror::Error)]
pub enum HelmError {
    #[error(
        "cannot run helm at {path}: {error} (install it with \
         `bash scripts/install-test-deps.sh`, or name another with --helm or ${HELM_ENV})"
    )]
    NoHelm {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("`helm {command}` failed ({status}): {output}")]
    Refused {
        command: String,
        status: std::process::ExitStatus,
        /// helm's standard output and error, trimmed.
        output: String,
    },
    #[error("`helm {command}`: {error}")]
    Io {
        command: String,
        error: std::io::Error,
    },
}

/// The helm binary to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helm {
    path: PathBuf,
}

/// A helm started with its values written to its standard input.
pub struct Running {
    command: String,
    child: Child,
}

impl Helm {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The helm `$HELM` names, else the one installed in the repository
    /// whose root is `root` ([`INSTALLED_PATH`]).
    pub fn installed_under(root: &Path) -> Self {
        match std::env::var_os(HELM_ENV) {
            Some(path) if !path.is_empty() => Self::new(path),
            _ => Self::new(root.join(INSTALLED_PATH)),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Start helm with `args` and `values` (YAML) on its standard input.
    fn spawn(&self, args: &[&str], values: &str) -> Result<Running, HelmError> {
        let command = args.join(" ");
        let mut child = Command::new(&self.path)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| HelmError::NoHelm {
                path: self.path.clone(),
                error,
            })?;
        let written = child
            .stdin
            .take()
            .map(|mut stdin| stdin.write_all(values.as_bytes()));
        if let Some(Err(error)) = written {
            return Err(HelmError::Io { command, error });
        }
        Ok(Running { command, child })
    }

    /// Start `helm template <release> <chart> --namespace <namespace>`
    /// with `values`; [`Running::output`] collects what it printed.
    pub fn template(
        &self,
        chart: &Path,
        release: &str,
        namespace: &str,
        values: &str,
    ) -> Result<Running, HelmError> {
        let chart = chart.to_string_lossy();
        self.spawn(
            &[
                "template",
                release,
                &chart,
                "--namespace",
                namespace,
                "--values",
                "-",
            ],
            values,
        )
    }

    /// Start `helm lint --strict <chart>` with `values`: warnings fail too.
    pub fn lint(&self, chart: &Path, values: &str) -> Result<Running, HelmError> {
        let chart = chart.to_string_lossy();
        self.spawn(&["lint", "--strict", &chart, "--values", "-"], values)
    }
}

impl Running {
    /// What helm printed on its standard output, once it exited 0.
    pub fn output(self) -> Result<String, HelmError> {
        let out = self
            .child
            .wait_with_output()
            .map_err(|error| HelmError::Io {
                command: self.command.clone(),
                error,
            })?;
        if !out.status.success() {
            return Err(HelmError::Refused {
                command: self.command,
                status: out.status,
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                )
                .trim()
                .to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}
