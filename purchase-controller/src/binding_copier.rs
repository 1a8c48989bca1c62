//! Binding copies, the effects (`--copy-bindings`): a task that watches the
//! Secrets carrying the binding label and the copies it made, and on each
//! change (and at the resync interval, for namespaces that start or stop
//! accepting bindings) brings every copy in step with what
//! [`crate::binding_copy`] decides. Level-triggered: one pass looks at all
//! sources and copies, so a missed event or a restart loses nothing. A
//! pass reads the sources and copies from the watches' own stores (no
//! listing per pass), and runs only once every watch has listed.
//!
//! A refusal is logged and recorded as a Warning Event on the source,
//! once per distinct refusal; nothing is written for it.
//!
//! With `--secret-namespaces` ([`SecretScope`]) the sources and copies are
//! listed and watched in the listed namespaces only (a binding reflected
//! into another namespace is not seen), and a copy into a namespace
//! outside the list is refused, naming the value to set.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use controller_core::runtime;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::binding_copy::{self, NotCopied, Plan, Target, BINDING, COPY_OF};
use crate::secret_scope::SecretScope;

/// Run until `stop` is cancelled, as `cluster_id`, with the Secrets of
/// `scope`, looking again every `resync` besides on each change.
pub async fn run(
    client: Client,
    cluster_id: String,
    scope: SecretScope,
    resync: Duration,
    reporter: Reporter,
    stop: CancellationToken,
) {
    let span = tracing::info_span!("binding_copies", %cluster_id);
    async move {
        tracing::info!("copying binding Secrets into namespaces that accept them");
        // One watch of each label per namespace of the scope (or one for
        // all): a watch over every namespace needs a ClusterRole. Each
        // keeps its store, which the passes read.
        let (mut sources, mut copies, mut watches) = (Vec::new(), Vec::new(), Vec::new());
        for secrets in scope.apis::<Secret>(&client) {
            for (label, stores) in [(BINDING, &mut sources), (COPY_OF, &mut copies)] {
                let (reader, writer) = reflector::store();
                stores.push(reader);
                watches.push(
                    watcher(secrets.clone(), watcher::Config::default().labels(label))
                        .default_backoff()
                        .reflect(writer)
                        .boxed(),
                );
            }
        }
        let mut changes = futures::stream::select_all(watches);
        let mut copier = Copier {
            client: client.clone(),
            cluster_id,
            scope,
            recorder: Recorder::new(client, reporter),
            refused: HashMap::new(),
            sources,
            copies,
        };
        loop {
            // Until every watch has listed, a pass would take a missing
            // copy's source for gone: the first pass waits for them.
            if copier.listed() {
                if let Err(error) = copier.pass().await {
                    tracing::warn!(%error, "binding copies: a pass failed; retrying");
                }
            }
            tokio::select! {
                () = stop.cancelled() => break,
                change = changes.next() => match change {
                    Some(Err(error)) => tracing::debug!(%error, "binding copies: watch interrupted"),
                    Some(Ok(_)) => {}
                    None => break,
                },
                () = tokio::time::sleep(resync) => {}
            }
            // One pass for a burst of changes.
            runtime::take_ready(&mut changes);
        }
        tracing::info!("binding copies stopped");
    }
    .instrument(span)
    .await
}

struct Copier {
    client: Client,
    cluster_id: String,
    /// Where Secrets may be read and written.
    scope: SecretScope,
    recorder: Recorder,
    /// The refusal last said per source, so each is said once.
    refused: HashMap<String, String>,
    /// The watches' stores of the sources and of the copies, one per
    /// namespace of the scope.
    sources: Vec<Store<Secret>>,
    copies: Vec<Store<Secret>>,
}

impl Copier {
    /// Every watch has listed once.
    fn listed(&self) -> bool {
        self.sources.iter().chain(&self.copies).all(|store| {
            store
                .wait_until_ready()
                .now_or_never()
                .is_some_and(|r| r.is_ok())
        })
    }

    /// Every source copied or refused, every orphaned copy deleted.
    async fn pass(&mut self) -> Result<(), kube::Error> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let state = |stores: &[Store<Secret>]| -> Vec<Secret> {
            stores
                .iter()
                .flat_map(Store::state)
                .map(|secret| (*secret).clone())
                .collect()
        };
        let (sources, copies) = (state(&self.sources), state(&self.copies));
        let mut kept: BTreeMap<String, Target> = BTreeMap::new();
        let mut refusals = HashMap::new();
        for source in &sources {
            let key = binding_copy::key(&source.metadata);
            let home = namespaces
                .get_opt(source.metadata.namespace.as_deref().unwrap_or_default())
                .await?;
            let target = match binding_copy::source(source, home.as_ref(), &self.cluster_id) {
                Ok(target) => target,
                Err(NotCopied::NotASource(why)) => {
                    tracing::trace!(source = %key, why, "not a binding source");
                    continue;
                }
                Err(NotCopied::Refused(why)) => {
                    self.refused_now(source, &key, why, &mut refusals);
                    continue;
                }
            };
            match self.copy(source, &target).await {
                Ok(Ok(())) => {
                    kept.insert(key, target);
                }
                Ok(Err(NotCopied::Refused(why) | NotCopied::NotASource(why))) => {
                    self.refused_now(source, &key, why, &mut refusals);
                }
                // Not a refusal: the copy, if there is one, stays until a
                // pass can look at it.
                Err(error) => {
                    tracing::warn!(source = %key, %error, "binding copy: the API server failed; retrying");
                    kept.insert(key, target);
                }
            }
        }
        self.refused = refusals;
        for orphan in binding_copy::orphans(&copies, &kept) {
            let name = orphan.metadata.name.as_deref().unwrap_or_default();
            let namespace = orphan.metadata.namespace.as_deref().unwrap_or_default();
            let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(copy = %format!("{namespace}/{name}"), "binding copy deleted: its source is gone")
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Copy `source` to `target` (or keep the copy as it is); `Ok(Err)`
    /// when the copy is refused.
    async fn copy(
        &self,
        source: &Secret,
        target: &Target,
    ) -> Result<Result<(), NotCopied>, kube::Error> {
        // Refused before any call: its Secrets may not be read there.
        if let Err(why) = self.scope.copy_target(&target.namespace) {
            return Ok(Err(NotCopied::Refused(why)));
        }
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &target.namespace);
        let namespace = namespaces.get_opt(&target.namespace).await?;
        let existing = match namespace {
            Some(_) => api.get_opt(&target.name).await?,
            None => None,
        };
        let plan = match binding_copy::plan(source, target, namespace.as_ref(), existing.as_ref()) {
            Ok(plan) => plan,
            Err(refused) => return Ok(Err(refused)),
        };
        let at = format!("{}/{}", target.namespace, target.name);
        match plan {
            Plan::Keep => {}
            Plan::Create(copy) => {
                api.create(&PostParams::default(), &copy).await?;
                tracing::info!(copy = %at, binding = %target.binding, "binding copied");
            }
            Plan::Recreate(copy) => {
                api.delete(&target.name, &DeleteParams::default()).await?;
                api.create(&PostParams::default(), &copy).await?;
                tracing::info!(copy = %at, binding = %target.binding, "binding copy made again (its type changed)");
            }
            Plan::Update(copy) => {
                api.replace(&target.name, &PostParams::default(), &copy)
                    .await?;
                tracing::info!(copy = %at, binding = %target.binding, "binding copy updated");
            }
        }
        Ok(Ok(()))
    }

    /// A refusal this pass: said when it is new.
    fn refused_now(
        &self,
        source: &Secret,
        key: &str,
        why: String,
        refusals: &mut HashMap<String, String>,
    ) {
        if self.refused.get(key) != Some(&why) {
            self.refuse(source, &why);
        }
        refusals.insert(key.to_string(), why);
    }

    /// A refused copy: a Warning Event on the source, and the log.
    fn refuse(&self, source: &Secret, why: &str) {
        tracing::warn!(source = %binding_copy::key(&source.metadata), why, "binding copy refused");
        let event = Event {
            type_: EventType::Warning,
            reason: "BindingCopyRefused".to_string(),
            note: Some(runtime::note(why)),
            action: "CopyBinding".to_string(),
            secondary: None,
        };
        runtime::publish_event(&self.recorder, event, source.object_ref(&()));
    }
}
