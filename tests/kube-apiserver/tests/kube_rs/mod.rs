//! What the tests driving the server through kube-rs share: clients, the
//! `Status` of a refusal, and polling for what the server's controllers do
//! after a request. Each test binary uses a part of it.

#![allow(dead_code)]

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use kube::{Client, Config};
use kube_test_server::KubeApiServer;
use serde_json::Value;

/// A client as the tests' own user (`kube_test_server::ADMIN`, in
/// `system:masters`: allowed everything).
pub async fn admin(kube: &KubeApiServer) -> Client {
    let mut config = Config::new(kube.url().parse().unwrap());
    config.auth_info.token = Some(kube.admin_token().to_string().into());
    Client::try_from(config).unwrap()
}

/// A client from a kubeconfig file.
pub async fn from_kubeconfig(path: &Path) -> kube::Result<Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    Client::try_from(config)
}

/// The `Status` of a refused request, as JSON (empty fields left out, as
/// `metav1.Status` leaves them out on the wire).
pub fn status(error: kube::Error) -> Value {
    match error {
        kube::Error::Api(status) => {
            let mut v = serde_json::to_value(&*status).unwrap();
            if let Some(map) = v.as_object_mut() {
                map.remove("metadata");
            }
            v
        }
        other => panic!("not an API error: {other:?}"),
    }
}

/// Poll `check` until it gives a value (the controllers act after the
/// request).
pub async fn until<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Poll `check` until it holds.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    until(what, || {
        let fut = check();
        async move { fut.await.then_some(()) }
    })
    .await
}
