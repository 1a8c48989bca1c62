//! Running the probe ([`probe`]) every `--isolation-probe-interval` while
//! this replica leads: leftovers deleted, the server started and its
//! address awaited, the two clients started and awaited, the verdict
//! published, the pods deleted. One run is bounded by
//! `--isolation-probe-timeout` as a whole. Pods are listed by the probe's
//! label in its two namespaces only (the chart's Role allows nothing
//! else).

use std::time::{Duration, Instant};

use controller_core::liqo::REMOTE_CLUSTER_ID_LABEL;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::probe::{self, Ended, Verdict, CONTROL, PROBE_LABEL, SERVER, STRANGER};
use super::render::TENANT_POLICY;

/// The flags' values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSettings {
    /// The server's (and the control's) namespace, and the stranger's.
    pub namespaces: (String, String),
    pub image: String,
    pub timeout: Duration,
    /// `None`: never run.
    pub interval: Option<Duration>,
    /// The controller's own ServiceAccount (namespace, name): bound the
    /// probe's ClusterRole in the probe's namespaces.
    pub account: (String, String),
}

/// The ClusterRole (pods: create, list, delete) the controller binds
/// itself in the probe's namespaces, and the binding's name.
pub const PROBE_ROLE: &str = "liqo-broker-isolation-probe";

/// How often a run looks again at what it waits for.
const POLL: Duration = Duration::from_millis(500);

/// Run the probe every interval until `stop`, each verdict on `verdicts`.
pub async fn run(
    client: Client,
    settings: ProbeSettings,
    verdicts: watch::Sender<Option<Verdict>>,
    stop: CancellationToken,
) {
    let Some(interval) = settings.interval else {
        return;
    };
    let span = tracing::info_span!("isolation_probe");
    async move {
        loop {
            let verdict = tokio::select! {
                _ = stop.cancelled() => None,
                v = run_once(&client, &settings) => Some(v),
            };
            clean(&client, &settings).await;
            let Some(verdict) = verdict else { break };
            match &verdict {
                Verdict::Enforced => tracing::info!("probe: isolation enforced by the CNI"),
                Verdict::Failed(why) => tracing::error!("probe: isolation NOT enforced: {why}"),
                Verdict::Inconclusive(why) => tracing::warn!("probe inconclusive: {why}"),
            }
            verdicts.send_replace(Some(verdict));
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(interval) => {}
            }
        }
    }
    .instrument(span)
    .await
}

/// One run.
pub async fn run_once(client: &Client, s: &ProbeSettings) -> Verdict {
    match attempt(client, s).await {
        Ok(v) => v,
        Err(why) => Verdict::Inconclusive(why),
    }
}

fn pods(client: &Client, namespace: &str) -> Api<Pod> {
    Api::namespaced(client.clone(), namespace)
}

async fn find(client: &Client, namespace: &str, name: &str) -> Result<Option<Pod>, String> {
    let list = pods(client, namespace)
        .list(&ListParams::default().labels(PROBE_LABEL))
        .await
        .map_err(|e| format!("list the probe's pods in {namespace}: {e}"))?;
    Ok(list
        .items
        .into_iter()
        .find(|p| p.metadata.name.as_deref() == Some(name)))
}

async fn attempt(client: &Client, s: &ProbeSettings) -> Result<Verdict, String> {
    let deadline = Instant::now() + s.timeout;
    let (home, other) = (&s.namespaces.0, &s.namespaces.1);
    // The namespaces, the rights in them, and isolation's policy in each.
    for ns in [home, other] {
        ensure_namespace(client, ns, &s.account).await?;
        let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), ns);
        wait(
            deadline,
            &format!("the isolation policy in {ns}"),
            || async {
                Ok(policies
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| format!("list NetworkPolicies in {ns}: {e}"))?
                    .items
                    .iter()
                    .any(|p| p.metadata.name.as_deref() == Some(TENANT_POLICY))
                    .then_some(()))
            },
        )
        .await?;
    }
    // Leftovers of a run cut short (a restart, another leader's).
    clean(client, s).await;
    create(client, &probe::server(home, &s.image, s.timeout)).await?;
    let ip = wait(deadline, "the server's address", || async {
        let pod = find(client, home, SERVER).await?;
        let status = pod.as_ref().and_then(|p| p.status.as_ref());
        match status.and_then(|s| s.phase.as_deref()) {
            Some("Failed" | "Succeeded") => Err("the probe's server stopped".to_string()),
            Some("Running") => Ok(status.and_then(|s| s.pod_ip.clone())),
            _ => Ok(None),
        }
    })
    .await?;
    create(
        client,
        &probe::client(home, CONTROL, &s.image, &ip, s.timeout),
    )
    .await?;
    create(
        client,
        &probe::client(other, STRANGER, &s.image, &ip, s.timeout),
    )
    .await?;
    let ended_or = |p: Option<Pod>| {
        p.as_ref()
            .map_or(Ended::Pending("gone".into()), probe::ended)
    };
    let done = |e: &Ended| !matches!(e, Ended::Pending(_));
    let last = loop {
        let control = ended_or(find(client, home, CONTROL).await?);
        let stranger = ended_or(find(client, other, STRANGER).await?);
        // A stranger that connected is a verdict at once.
        if (done(&control) && done(&stranger))
            || stranger == Ended::Connected
            || Instant::now() >= deadline
        {
            break (control, stranger);
        }
        tokio::time::sleep(POLL).await;
    };
    Ok(probe::verdict(&last.0, &last.1))
}

/// The probe's namespace `ns`, labelled as a consumer's own (its
/// `liqo.io/remote-cluster-id` is its name, so isolation renders its
/// policy there as in a consumer's), Pod Security `baseline` enforced
/// (the pods meet `restricted`); and the
/// RoleBinding giving `account` the probe's ClusterRole there. Made if
/// missing, left as found otherwise.
async fn ensure_namespace(
    client: &Client,
    ns: &str,
    account: &(String, String),
) -> Result<(), String> {
    let namespace: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {"name": ns, "labels": {
            REMOTE_CLUSTER_ID_LABEL: ns,
            "pod-security.kubernetes.io/enforce": "baseline",
            super::render::MANAGED_BY_LABEL: super::render::MANAGED_BY}}}))
    .map_err(|e| e.to_string())?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces
        .get_opt(ns)
        .await
        .map_err(|e| format!("read namespace {ns}: {e}"))?
        .is_none()
    {
        match namespaces.create(&PostParams::default(), &namespace).await {
            Ok(_) => tracing::info!(namespace = ns, "probe namespace made"),
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(format!("create namespace {ns}: {e}")),
        }
    }
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
    let present = bindings
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("list RoleBindings in {ns}: {e}"))?
        .items
        .iter()
        .any(|b| b.metadata.name.as_deref() == Some(PROBE_ROLE));
    if !present {
        let binding: RoleBinding = serde_json::from_value(serde_json::json!({
            "metadata": {"name": PROBE_ROLE, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": PROBE_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": account.1, "namespace": account.0}]}))
        .map_err(|e| e.to_string())?;
        match bindings.create(&PostParams::default(), &binding).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(format!("create RoleBinding {ns}/{PROBE_ROLE}: {e}")),
        }
    }
    Ok(())
}

async fn create(client: &Client, pod: &Pod) -> Result<(), String> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    pods(client, &ns)
        .create(&PostParams::default(), pod)
        .await
        .map(|_| ())
        .map_err(|e| format!("create pod {ns}/{name}: {e}"))
}

/// Poll `probe` until it gives a value, an error, or `deadline` passes.
async fn wait<T, F, Fut>(deadline: Instant, what: &str, mut probe: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, String>>,
{
    loop {
        if let Some(v) = probe().await? {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(format!("{what}: not within --isolation-probe-timeout"));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Delete the probe's pods (a failure is logged: the next run tries again).
async fn clean(client: &Client, s: &ProbeSettings) {
    for ns in [&s.namespaces.0, &s.namespaces.1] {
        let api = pods(client, ns);
        let Ok(list) = api.list(&ListParams::default().labels(PROBE_LABEL)).await else {
            continue;
        };
        for pod in list.items {
            let name = pod.metadata.name.unwrap_or_default();
            if let Err(error) = api.delete(&name, &DeleteParams::default()).await {
                tracing::debug!(%error, pod = %name, "cannot delete a probe pod");
            }
        }
    }
}
