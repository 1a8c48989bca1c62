//! A Kubernetes client built the way `kubectl` builds one: from a kubeconfig
//! file and context when given, else inferred (`$KUBECONFIG`,
//! `~/.kube/config`, then the in-cluster service account). The class
//! controller, the purchase controller and the resource monitor's
//! Kubernetes source all start this way, and report a bad configuration in
//! the same words.

use std::path::{Path, PathBuf};

use kube::Client;

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
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
            let file = kube::config::Kubeconfig::read_from(path).map_err(unreadable(path))?;
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

/// A client over [`config`].
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Client, ClientError> {
    Ok(Client::try_from(config(kubeconfig, context).await?)?)
}
