//! The controllers of kube-controller-manager the API server's object
//! lifecycle depends on — the garbage collector ([`gc`]), the namespace
//! controller ([`namespace_controller`]), the node lifecycle controller's
//! NoExecute tainting and the taint eviction controller
//! ([`crate::taint_eviction`]) — and the apiextensions-apiserver's
//! CRD naming and establishing controllers ([`crate::crd_controller`]) run beside the server as one
//! background task: after every change to the stored objects it makes one
//! pass of each, so their writes come after (never inside) the request
//! that called for them, as with the real, asynchronous controllers. Their
//! writes are not in the request log: they are not the client's.

use std::sync::{Mutex, Weak};

use tokio::sync::broadcast::error::RecvError;
use tracing::Instrument;

use crate::crd_controller::Establisher;
use crate::gc::Collector;
use crate::namespace_controller;
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
            // The next eviction due, if any: a pass then too.
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
                establisher.sync(&mut world);
                namespace_controller::sync(&mut world);
                collector.sync(&mut world);
                due = evictor
                    .sync(&mut world, std::time::Instant::now())
                    .map(tokio::time::Instant::from_std);
            }
        }
        .instrument(span),
    )
}
