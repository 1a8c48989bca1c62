//! Reloading without a restart: on SIGHUP, and when the config file changes,
//! the flags and file are resolved again and the upstreams, policy and
//! timeout are applied ([`Aggregate::apply`]): unchanged upstreams keep
//! their connections, new ones connect, removed ones are dropped. A file
//! that fails to parse or validate is reported and changes nothing.
//!
//! The file's directory is watched rather than the file, so editors that
//! save by renaming and Kubernetes ConfigMap mounts (which swap a `..data`
//! symlink) are seen too.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::config::{Cli, Settings};
use crate::metrics::Metrics;
use crate::sum::Aggregate;

/// Wait this long after a file event before reading, so a save made of
/// several writes is read once, complete.
const SETTLE: Duration = Duration::from_millis(100);

/// Why something triggered a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    Sighup,
    FileChanged,
}

/// Reloads on SIGHUP and on changes of `cli.config`.
pub struct Reloader {
    cli: Cli,
    current: Settings,
    aggregate: Arc<Aggregate>,
    metrics: Metrics,
    rx: mpsc::Receiver<Trigger>,
    hup: Option<tokio::signal::unix::Signal>,
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Reloader {
    /// Take over SIGHUP and start watching the file now, before serving:
    /// SIGHUP's default action ends the process, and a reload asked for
    /// while the rest starts up must not be lost. Must be called inside a
    /// Tokio runtime.
    pub fn start(cli: Cli, current: Settings, aggregate: Arc<Aggregate>, metrics: Metrics) -> Self {
        let (tx, rx) = mpsc::channel::<Trigger>(16);
        let watcher = cli.config.as_deref().and_then(|path| watch_file(path, tx));
        let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|error| tracing::error!(%error, "cannot handle SIGHUP; reloading on file changes only"))
            .ok();
        Self {
            cli,
            current,
            aggregate,
            metrics,
            rx,
            hup,
            _watcher: watcher,
        }
    }

    /// Reload on every trigger, for as long as the future runs.
    pub async fn run(mut self) {
        loop {
            let hup = &mut self.hup;
            let trigger = tokio::select! {
                Some(t) = self.rx.recv() => t,
                Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => None } } => Trigger::Sighup,
                else => return,
            };
            if trigger == Trigger::FileChanged {
                tokio::time::sleep(SETTLE).await;
            }
            // One reload covers every trigger queued meanwhile.
            while self.rx.try_recv().is_ok() {}
            if self.cli.config.is_none() {
                tracing::info!("SIGHUP: no config file (--config), nothing to reload");
                continue;
            }
            reload(
                &self.cli,
                &mut self.current,
                &self.aggregate,
                &self.metrics,
                trigger,
            );
        }
    }
}

fn reload(
    cli: &Cli,
    current: &mut Settings,
    aggregate: &Aggregate,
    metrics: &Metrics,
    trigger: Trigger,
) {
    let span = tracing::info_span!("reload", ?trigger);
    let _entered = span.enter();
    let new = match Settings::resolve(cli) {
        Ok(new) => new,
        Err(error) => {
            tracing::error!(%error, "configuration not reloaded; the running configuration stays");
            metrics.count_reload(false);
            return;
        }
    };
    let applied = match aggregate.apply(&new.dynamic) {
        Ok(applied) => applied,
        Err(error) => {
            tracing::error!(%error, "configuration not reloaded; the running configuration stays");
            metrics.count_reload(false);
            return;
        }
    };
    metrics.count_reload(true);
    if applied.changed_anything() {
        tracing::info!(
            added = ?applied.added,
            removed = ?applied.removed,
            kept = applied.kept,
            policy = %new.dynamic.policy,
            upstream_timeout = ?new.dynamic.upstream_timeout,
            "configuration reloaded"
        );
    } else {
        tracing::debug!("configuration reloaded; nothing changed");
    }
    let restart = current.restart_needed(&new);
    if !restart.is_empty() {
        tracing::warn!(keys = ?restart, "these settings changed but only take effect after a restart");
    }
    current.dynamic = new.dynamic;
}

/// Watch the directory of `path`; `None` (logged) if that is impossible.
fn watch_file(path: &Path, tx: mpsc::Sender<Trigger>) -> Option<notify::RecommendedWatcher> {
    let absolute = match std::path::absolute(path) {
        Ok(p) => p,
        Err(error) => {
            tracing::error!(path = %path.display(), %error, "cannot watch the config file; reload with SIGHUP");
            return None;
        }
    };
    let dir = absolute
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let name = absolute.file_name().map(|n| n.to_os_string());
    let handler = move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if event.kind.is_access() {
            return;
        }
        let concerns_file = event.paths.iter().any(|p| {
            let file = p.file_name();
            file == name.as_deref()
                // A ConfigMap mount swaps its `..data` symlink.
                || file.is_some_and(|f| f.to_string_lossy().starts_with(".."))
        });
        if concerns_file {
            // Full means a reload is already queued.
            let _ = tx.try_send(Trigger::FileChanged);
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(error) => {
            tracing::error!(%error, "cannot watch the config file; reload with SIGHUP");
            return None;
        }
    };
    if let Err(error) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
        tracing::error!(dir = %dir.display(), %error, "cannot watch the config file's directory; reload with SIGHUP");
        return None;
    }
    tracing::info!(path = %absolute.display(), "watching the config file; also reloading on SIGHUP");
    Some(watcher)
}
