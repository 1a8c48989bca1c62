//! The controllers of kube-controller-manager the API server's object
//! lifecycle depends on — the garbage collector ([`crate::gc`]), the namespace
//! controller ([`crate::namespace_controller`]), the ClusterRole aggregation
//! controller ([`clusterrole_aggregation`]), the node lifecycle
//! controller's NoExecute tainting and the taint eviction controller
//! ([`crate::taint_eviction`]), the Deployment and ReplicaSet controllers
//! ([`crate::deployment`], [`crate::replicaset`]) and the disruption
//! controller ([`crate::disruption`]), the EndpointSlice controller
//! ([`crate::endpointslice_controller`]) — and the apiextensions-apiserver's CRD
//! naming, establishing and finalizing controllers
//! ([`crate::crd_controller`], [`crate::crd_finalizer`]) run beside the
//! server as one background task: after every change to the stored
//! objects it makes one pass of each, and one more whenever a controller's
//! own queue says so (the namespace controller's 5 s grace, the CRD
//! finalizer's 5 s poll, an eviction due), so their writes come after
//! (never inside) the request that called for them, as with the real,
//! asynchronous controllers. Their writes are not in the request log: they
//! are not the client's.

use std::sync::{Mutex, Weak};

use tokio::sync::broadcast::error::RecvError;
use tracing::Instrument;

use crate::clusterrole_aggregation;
use crate::crd_controller::Establisher;
use crate::crd_finalizer::CrdFinalizer;
use crate::gc::Collector;
use crate::namespace_controller::NamespaceController;
use crate::replicaset::ReplicaSetController;
use crate::store::World;
use crate::taint_eviction::Evictor;

/// Run the controllers until the world is dropped.
pub fn spawn(world: &std::sync::Arc<Mutex<World>>) -> tokio::task::JoinHandle<()> {
    let mut changes = world
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .changes
        .subscribe();
    let world: Weak<Mutex<World>> = std::sync::Arc::downgrade(world);
    let span = tracing::info_span!("kube-controllers");
    tokio::spawn(
        async move {
            let mut collector = Collector::default();
            let mut establisher = Establisher::default();
            let mut evictor = Evictor::default();
            let mut namespaces = NamespaceController::default();
            let mut crd_finalizer = CrdFinalizer::default();
            let mut replica_sets = ReplicaSetController::default();
            // The next time a controller's queue is due, if any: a pass
            // then too.
            let mut due: Option<tokio::time::Instant> = None;
            loop {
                let at_due = async {
                    match due {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    r = changes.recv() => match r {
                        Ok(_) | Err(RecvError::Lagged(_)) => {}
                        Err(RecvError::Closed) => return,
                    },
                    () = at_due => {}
                }
                // One pass for everything that changed meanwhile.
                while changes.try_recv().is_ok() {}
                let Some(world) = world.upgrade() else {
                    return;
                };
                let mut world = world.lock().unwrap_or_else(|e| e.into_inner());
                let now = std::time::Instant::now();
                establisher.sync(&mut world);
                let finalizing = crd_finalizer.sync(&mut world, now);
                let terminating = namespaces.sync(&mut world, now);
                collector.sync(&mut world);
                clusterrole_aggregation::sync(&mut world);
                let evicting = evictor.sync(&mut world, now);
                // Deployments before ReplicaSets before budgets: each
                // pass's writes feed the next controller in the same pass.
                crate::deployment::sync(&mut world);
                let replicating = replica_sets.sync(&mut world, now);
                let disrupting = crate::disruption::sync(&mut world, now);
                // After the workloads: the pods they made this pass are
                // listed in their Services' slices in the same pass.
                crate::endpointslice_controller::sync(&mut world);
                due = [finalizing, terminating, evicting, replicating, disrupting]
                    .into_iter()
                    .flatten()
                    .min()
                    .map(tokio::time::Instant::from_std);
            }
        }
        .instrument(span),
    )
}
