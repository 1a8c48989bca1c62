//! `market-autoscaler explain --autoscaler NS/NAME [--pods FILE]`: the
//! dry run. It reads what the controller reads — the MarketAutoscaler, its
//! catalog token, the pods, nodes, PDBs, namespaces and its Purchases
//! (one `get`/`list` each: read access is enough), the catalog's offers
//! (one snapshot of the feed) and its contracts — builds the same inputs
//! ([`Inputs::gather`]), makes the same call ([`crate::decide::scale_up`])
//! and prints the decision with prices per hour and per month. It writes
//! nothing.
//!
//! With `--pods FILE` the decision is made for the pods of the file (one
//! Pod, a list of Pods, or a v1 `List`, YAML or JSON) as if they waited,
//! instead of the cluster's waiting pods; a pod without a namespace is
//! taken to be in the first served namespace.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use catalog_client::feed::{self, CatalogAddress};
use catalog_client::market::ContractFilter;
use catalog_client::wire::Contract;
use catalog_client::{Http, Login, Session};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams};
use kube::Client;
use purchase_controller::model::Purchase;

use crate::decide::ScaleUp;
use crate::model::{MarketAutoscaler, PURCHASE_LABEL};
use crate::observe::{self, Inputs, World};
use crate::observe_catalog::USER_AGENT;

/// What `explain` is asked (its flags beside the cluster's).
#[derive(Debug, Clone, clap::Args)]
pub struct Request {
    /// The MarketAutoscaler: NAMESPACE/NAME.
    #[arg(long, value_name = "NS/NAME")]
    pub autoscaler: String,
    /// Decide for the pods in this file (YAML or JSON: one Pod, a list of Pods, or a v1 List) instead of the cluster's waiting pods.
    #[arg(long, value_name = "FILE")]
    pub pods: Option<PathBuf>,
    /// text or json.
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub output: Output,
    /// Give up reaching the cluster or the catalog after this long.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = edge::duration::parse)]
    pub timeout: Duration,
}

/// `explain --output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// Largest `--pods` file read.
pub const MAX_PODS_FILE: u64 = 16 * 1024 * 1024;

/// The pods of a `--pods` file's text (one Pod, a sequence of Pods, or a
/// v1 `List`); `default_ns` for those without a namespace.
pub fn pods_from_text(text: &str, default_ns: &str) -> anyhow::Result<Vec<Pod>> {
    let value: serde_json::Value =
        serde_yaml_ng::from_str(text).context("--pods: neither YAML nor JSON")?;
    let items: Vec<serde_json::Value> = match value {
        serde_json::Value::Array(items) => items,
        serde_json::Value::Object(ref o)
            if o.get("kind").and_then(|k| k.as_str()) == Some("List")
                || o.get("kind").and_then(|k| k.as_str()) == Some("PodList") =>
        {
            o.get("items")
                .and_then(|i| i.as_array())
                .cloned()
                .unwrap_or_default()
        }
        one @ serde_json::Value::Object(_) => vec![one],
        _ => anyhow::bail!("--pods: expected a Pod, a list of Pods or a v1 List"),
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let mut pod: Pod = serde_json::from_value(item)
                .with_context(|| format!("--pods: item {i} is not a Pod"))?;
            if pod.metadata.name.is_none() {
                pod.metadata.name = Some(format!("pod-{i}"));
            }
            if pod.metadata.namespace.is_none() {
                pod.metadata.namespace = Some(default_ns.to_string());
            }
            if pod.metadata.uid.is_none() {
                pod.metadata.uid = Some(format!("explain-{i}"));
            }
            Ok(pod)
        })
        .collect()
}

fn pods_from_file(path: &Path, default_ns: &str) -> anyhow::Result<Vec<Pod>> {
    let text = edge::config_file::read("--pods", path, MAX_PODS_FILE)?;
    pods_from_text(&text, default_ns)
}

async fn within<T>(
    timeout: Duration,
    what: &str,
    f: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> anyhow::Result<T> {
    tokio::time::timeout(timeout, f)
        .await
        .map_err(|_| {
            anyhow::anyhow!("the Kubernetes API did not answer within {timeout:?} ({what})")
        })?
        .with_context(|| format!("cannot {what}"))
}

fn arcs<K>(list: kube::core::ObjectList<K>) -> Vec<Arc<K>>
where
    K: Clone,
{
    list.items.into_iter().map(Arc::new).collect()
}

/// What `explain` found and decided.
pub struct Explained {
    pub autoscaler: String,
    pub currency: String,
    pub decision: ScaleUp,
    pub waiting: usize,
    pub now: Timestamp,
}

impl Explained {
    /// The text `explain` prints.
    pub fn text(&self) -> String {
        format!(
            "MarketAutoscaler {} — {} pod(s) to place\n{}",
            self.autoscaler,
            self.waiting,
            self.decision.report(&self.currency)
        )
    }

    /// The JSON `explain --output json` prints: the decision as the
    /// status holds it (without the 20-entry caps), and the report.
    pub fn json(&self) -> serde_json::Value {
        let mut d = crate::status::decision(
            &self.decision,
            self.decision.summary(&self.currency),
            self.now,
        );
        // The dry run shows everything.
        d.bought = self
            .decision
            .buy
            .iter()
            .map(|b| crate::model::BoughtStatus {
                offer_id: b.offer_id.clone(),
                plan_id: b.plan_id.clone(),
                provider: b.provider_id.clone(),
                cost_per_hour: b.cost_per_hour.to_string(),
                cost_per_month: b.cost_per_month.to_string(),
            })
            .collect();
        serde_json::json!({
            "autoscaler": self.autoscaler,
            "currency": self.currency,
            "decision": d,
            "addedPerHour": self.decision.added_per_hour.to_string(),
            "addedPerMonth": self.decision.added_per_month.to_string(),
            "report": self.decision.report(&self.currency),
        })
    }
}

/// Read everything and decide (nothing is written).
pub async fn decide(client: Client, args: &Request) -> anyhow::Result<Explained> {
    let timeout = args.timeout;
    let (ns, name) = args
        .autoscaler
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
        .ok_or_else(|| {
            anyhow::anyhow!("--autoscaler {:?}: give NAMESPACE/NAME", args.autoscaler)
        })?;
    let mas: Api<MarketAutoscaler> = Api::namespaced(client.clone(), ns);
    let ma = within(timeout, "read the MarketAutoscaler", mas.get(name)).await?;
    let intent = ma.spec.parse()?;
    let status = ma.status.clone().unwrap_or_default();

    let pods = arcs(
        within(
            timeout,
            "list pods",
            Api::<Pod>::all(client.clone()).list(&ListParams::default()),
        )
        .await?,
    );
    let nodes = arcs(
        within(
            timeout,
            "list nodes",
            Api::<Node>::all(client.clone()).list(&ListParams::default()),
        )
        .await?,
    );
    let purchases = arcs(
        within(
            timeout,
            "list Purchases",
            Api::<Purchase>::namespaced(client.clone(), ns)
                .list(&ListParams::default().labels(PURCHASE_LABEL)),
        )
        .await?,
    );
    let mut pdbs = Vec::new();
    let mut namespaces = Vec::new();
    for served in &intent.namespaces {
        pdbs.extend(arcs(
            within(
                timeout,
                "list PodDisruptionBudgets",
                Api::<PodDisruptionBudget>::namespaced(client.clone(), served)
                    .list(&ListParams::default()),
            )
            .await?,
        ));
        if let Some(n) = within(
            timeout,
            "read a namespace",
            Api::<Namespace>::all(client.clone()).get_opt(served),
        )
        .await?
        {
            namespaces.push(Arc::new(n));
        }
    }
    let world = World::build(&ma, &intent, &pods, &nodes, &purchases, &pdbs, &namespaces);
    let waiting: Vec<Arc<Pod>> = match &args.pods {
        Some(path) => {
            let default_ns = intent.namespaces.first().cloned().unwrap_or_default();
            pods_from_file(path, &default_ns)?
                .into_iter()
                .map(Arc::new)
                .collect()
        }
        None => world.waiting.clone(),
    };

    let secret = &ma.spec.credentials_secret_ref;
    let token = match within(
        timeout,
        "read the catalog token",
        crate::act::token(&client, ns, &secret.name, &secret.key),
    )
    .await?
    {
        Ok(t) => t,
        Err(problem) => anyhow::bail!("CredentialsMissing: {problem}"),
    };
    let url = &ma.spec.catalog_url;
    let address = CatalogAddress::parse(url)?;
    let offers = feed::snapshot(&address, timeout).await?;
    let contracts = contracts_once(url, &token, timeout).await?;
    let mine = observe::my_contracts(&ma, &world, &contracts);
    let in_flight = observe::in_flight(&world, &status.in_flight, &offers, &mine);
    let now = Timestamp::now();
    let inputs = Inputs::gather(
        &intent, &status, &world, &waiting, &offers, &mine, &in_flight, now,
    );
    let decision = crate::decide::scale_up(&inputs.input(&intent, now));
    Ok(Explained {
        autoscaler: args.autoscaler.clone(),
        currency: intent.limits.currency.clone(),
        waiting: waiting.len(),
        decision,
        now,
    })
}

/// Every contract of `token` (one listing).
async fn contracts_once(
    url: &str,
    token: &str,
    timeout: Duration,
) -> anyhow::Result<Vec<Contract>> {
    let base = reqwest::Url::parse(url).with_context(|| format!("spec.catalogURL {url:?}"))?;
    let mut session = Session::new(
        Http::new(Http::client(timeout, USER_AGENT)?, base),
        Login::Bearer {
            token: token.to_string(),
        },
    );
    let all: Vec<serde_json::Value> =
        tokio::time::timeout(timeout, session.contracts_as(&ContractFilter::default()))
            .await
            .map_err(|_| anyhow::anyhow!("the catalog did not answer within {timeout:?}"))??;
    Ok(all
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect())
}

/// `explain`: print the decision.
pub async fn run(client: Client, args: &Request) -> anyhow::Result<()> {
    let explained = decide(client, args).await?;
    match args.output {
        Output::Text => print!("{}", explained.text()),
        Output::Json => println!("{}", serde_json::to_string_pretty(&explained.json())?),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pods_file_is_one_pod_a_list_or_a_v1_list_in_yaml_or_json() {
        let one =
            "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n";
        let pods = pods_from_text(one, "team").unwrap();
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].metadata.namespace.as_deref(), Some("team"));

        let seq = r#"[{"metadata": {"name": "a", "namespace": "x"}}, {"metadata": {}}]"#;
        let pods = pods_from_text(seq, "team").unwrap();
        assert_eq!(pods.len(), 2);
        assert_eq!(pods[0].metadata.namespace.as_deref(), Some("x"));
        assert_eq!(pods[1].metadata.name.as_deref(), Some("pod-1"));

        let list =
            "apiVersion: v1\nkind: List\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n";
        assert_eq!(pods_from_text(list, "team").unwrap().len(), 2);

        let e = pods_from_text("42", "team").unwrap_err().to_string();
        assert!(e.contains("--pods"), "{e}");
    }
}
