//! Rendering `deploy/kubernetes/*` with the real `kubectl kustomize` (its
//! built-in kustomize), the same rendering `kubectl apply -k` applies, so
//! the checks judge exactly the objects an operator's cluster receives.
//! `scripts/install-test-deps.sh` installs a pinned kubectl into
//! `build/bin/`; nothing here downloads one. A kustomization kubectl
//! refuses is reported with kubectl's own error, quoted.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde::Deserialize;
use serde_json::Value;

/// The variable naming the kubectl to run (the binary's `--kubectl` falls
/// back to it too).
pub const KUBECTL_ENV: &str = "KUBECTL";

/// Where `scripts/install-test-deps.sh` installs kubectl, from the
/// repository's root.
pub const INSTALLED_PATH: &str = "build/bin/kubectl";

/// The names kubectl's kustomize reads a kustomization from, in the order
/// it tries them (sigs.k8s.io/kustomize/api/konfig/general.go,
/// `RecognizedKustomizationFileNames`).
pub const KUSTOMIZATION_FILES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Why `deploy/kubernetes` could not be rendered. (Causes are part of each
/// message, not `source()`s, so a chain printed with `{:#}` does not say
/// them twice.)
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "cannot run kubectl at {path}: {error} (install it with \
         `bash scripts/install-test-deps.sh`, or name another with --kubectl or ${KUBECTL_ENV})"
    )]
    NoKubectl {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("`kubectl kustomize {dir}` failed ({status}): {stderr}")]
    Refused {
        dir: PathBuf,
        status: std::process::ExitStatus,
        /// kubectl's standard error, trimmed.
        stderr: String,
    },
    #[error("`kubectl kustomize {dir}` printed something that is not YAML: {error}")]
    Yaml {
        dir: PathBuf,
        error: serde_yaml_ng::Error,
    },
    #[error(
        "`kubectl kustomize {dir}` printed a document without apiVersion and kind: {document}"
    )]
    NotAnObject { dir: PathBuf, document: Value },
}

/// The kubectl binary to render with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kubectl {
    path: PathBuf,
}

impl Kubectl {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The kubectl `$KUBECTL` names, else `default`.
    pub fn from_env_or(default: impl Into<PathBuf>) -> Self {
        match std::env::var_os(KUBECTL_ENV) {
            Some(path) if !path.is_empty() => Self::new(path),
            _ => Self::new(default),
        }
    }

    /// The kubectl `$KUBECTL` names, else the one installed in the
    /// repository whose root is `root` ([`INSTALLED_PATH`]): what tests
    /// run from a crate's directory use.
    pub fn installed_under(root: &Path) -> Self {
        Self::from_env_or(root.join(INSTALLED_PATH))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Start `kubectl kustomize <dir>`; [`Kubectl::rendered`] collects it,
    /// so several directories render at once.
    fn spawn(&self, dir: &Path) -> Result<Child, RenderError> {
        Command::new(&self.path)
            .arg("kustomize")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| RenderError::NoKubectl {
                path: self.path.clone(),
                error,
            })
    }

    fn rendered(dir: &Path, child: Child) -> Result<Vec<Value>, RenderError> {
        let out = child.wait_with_output().map_err(|error| RenderError::Io {
            path: dir.to_path_buf(),
            error,
        })?;
        if !out.status.success() {
            return Err(RenderError::Refused {
                dir: dir.to_path_buf(),
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        parse(dir, &String::from_utf8_lossy(&out.stdout))
    }

    /// Every object `kubectl kustomize <dir>` renders, in its order.
    pub fn render(&self, dir: &Path) -> Result<Vec<Value>, RenderError> {
        Self::rendered(dir, self.spawn(dir)?)
    }

    /// [`Kubectl::render`] of each of `dirs`, run side by side (kubectl
    /// takes ~0.15 s a directory, mostly starting up).
    pub fn render_each(&self, dirs: &[PathBuf]) -> Result<Vec<Vec<Value>>, RenderError> {
        let children = dirs
            .iter()
            .map(|dir| self.spawn(dir))
            .collect::<Result<Vec<_>, _>>()?;
        dirs.iter()
            .zip(children)
            .map(|(dir, child)| Self::rendered(dir, child))
            .collect()
    }
}

/// The objects of kubectl's output (or helm's: `helm template`), YAML
/// documents separated by `---`; `dir` is what rendered them, for errors.
pub fn parse(dir: &Path, text: &str) -> Result<Vec<Value>, RenderError> {
    let mut out = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|error| RenderError::Yaml {
            dir: dir.to_path_buf(),
            error,
        })?;
        match value {
            Value::Null => {}
            Value::Object(_) if value["kind"].is_string() && value["apiVersion"].is_string() => {
                out.push(value)
            }
            document => {
                return Err(RenderError::NotAnObject {
                    dir: dir.to_path_buf(),
                    document,
                })
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubectl() -> Kubectl {
        Kubectl::installed_under(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
    }

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: example/web:dev\n";

    #[test]
    fn renders_what_kubectl_renders() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "web.yaml", DEPLOYMENT);
        write(
            dir.path(),
            "kustomization.yaml",
            "namespace: shop\nresources: [web.yaml]\n\
             images:\n- name: example/web\n  newTag: v1\n",
        );
        let objects = kubectl().render(dir.path()).unwrap();
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0]["metadata"]["namespace"], "shop");
        assert_eq!(
            objects[0]["spec"]["template"]["spec"]["containers"][0]["image"],
            "example/web:v1"
        );
    }

    #[test]
    fn a_broken_kustomization_is_reported_with_kubectls_error() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "web.yaml", DEPLOYMENT);
        for (kustomization, says) in [
            (
                "resources: [web.yaml]\nbogusField: 1\n",
                "invalid Kustomization: json: unknown field \"bogusField\"",
            ),
            ("resources: [missing.yaml]\n", "missing.yaml"),
        ] {
            write(dir.path(), "kustomization.yaml", kustomization);
            let error = kubectl().render(dir.path()).unwrap_err();
            assert!(matches!(error, RenderError::Refused { .. }), "{error}");
            let message = error.to_string();
            assert!(message.contains(says), "{message}");
            assert!(
                message.contains(&dir.path().display().to_string()),
                "{message}"
            );
        }
    }

    #[test]
    fn a_missing_kubectl_names_its_path_and_the_install_script() {
        let dir = tempfile::tempdir().unwrap();
        let absent = dir.path().join("no-kubectl");
        let error = Kubectl::new(&absent).render(dir.path()).unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, RenderError::NoKubectl { .. }), "{message}");
        assert!(message.contains(&absent.display().to_string()), "{message}");
        assert!(
            message.contains("scripts/install-test-deps.sh"),
            "{message}"
        );
    }
}
