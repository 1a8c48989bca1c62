//! A Kubernetes client built the way `kubectl` builds one: from a kubeconfig
//! file and context when given, else inferred (`$KUBECONFIG`,
//! `~/.kube/config`, then the in-cluster service account). The class
//! controller, the purchase controller and the resource monitor's
//! Kubernetes source all start this way, and report a bad configuration in
//! the same words. The file `--kubeconfig` names is read as every file a
//! flag names is: `/dev/zero` or a FIFO there is refused at once.

use std::path::{Path, PathBuf};

use kube::Client;

/// Largest kubeconfig file read: far more than one with a few embedded
/// certificates takes, far less than `/dev/zero` would fill.
pub const MAX_KUBECONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The file named by `--kubeconfig` is not a regular file of at most
    /// [`MAX_KUBECONFIG_BYTES`], or cannot be read in time.
    #[error(transparent)]
    File(#[from] edge::config_file::ConfigFileError),
    #[error("cannot read kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("cannot find a Kubernetes configuration: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// The configuration of `kubeconfig` (and `context`) if given, else of the
/// default kubeconfig with `context`, else inferred.
pub async fn config(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<kube::Config, ClientError> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let unreadable = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ClientError::Kubeconfig { path, source }
    };
    Ok(match kubeconfig {
        Some(path) => {
            let text = read_file(path).await?;
            let file = kube::config::Kubeconfig::from_yaml(&text).map_err(unreadable(path))?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(unreadable(path))?
        }
        // A context names an entry of the default kubeconfig: inferring
        // would ignore it.
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(unreadable(Path::new("(default kubeconfig)")))?,
        None => kube::Config::infer().await?,
    })
}

/// The text of the kubeconfig `--kubeconfig` names, read as every file a
/// flag names is (edge's `config_file`: a regular file, bounded, within a
/// deadline), off the async threads.
async fn read_file(path: &Path) -> Result<String, ClientError> {
    let owned = path.to_path_buf();
    let read = tokio::task::spawn_blocking(move || {
        edge::config_file::read("--kubeconfig", &owned, MAX_KUBECONFIG_BYTES)
    })
    .await;
    match read {
        Ok(result) => Ok(result?),
        // The read panicked or the runtime is stopping: no file either way.
        Err(error) => Err(ClientError::File(edge::config_file::ConfigFileError {
            flag: "--kubeconfig".to_string(),
            path: path.to_path_buf(),
            problem: edge::config_file::Problem::Io(std::io::Error::other(error)),
        })),
    }
}

/// A client over [`config`].
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Client, ClientError> {
    Ok(Client::try_from(config(kubeconfig, context).await?)?)
}

/// [`client`] without kube's default retry of 429, 503 and 504 (up to 15
/// times): as client-go's REST client, which retries only an answer
/// carrying `Retry-After` (`client-go/rest/request.go`, `checkWait`). A
/// PodDisruptionBudget's refused eviction (429) carries none, so a caller
/// that evicts sees the refusal at once instead of waiting out the retries.
pub async fn client_without_retry(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Client, ClientError> {
    let mut config = config(kubeconfig, context).await?;
    config.default_retry = false;
    Ok(Client::try_from(config)?)
}
