//! The consumer feed: `GET /subscribe` upgrades to a WebSocket that follows
//! every offer change as it happens.
//!
//! # Protocol
//!
//! Every message is a JSON text frame `{"type": ..., "seq": N, ...}`:
//!
//! - `{"type":"snapshot","seq":N,"offers":[...]}`: the full (filtered) offer
//!   list, ordered by id, each offer exactly as `GET /offers` returns it.
//!   Sent on connect; with `mode=snapshot` (the thesis behaviour) after
//!   every change that touches the list, the latest list (one not yet sent
//!   is replaced by the newer: a burst may bring fewer lists than changes);
//!   in every mode whenever the server had to reload its list (see below).
//! - `mode=delta`, the default: after the first snapshot, `{"type":"upsert","seq":N,
//!   "offer":{...}}` for an offer created, replaced or entering the filtered
//!   view, and `{"type":"delete","seq":N,"id":"..."}` for one deleted or
//!   leaving it.
//!
//! Clients must ignore message types they do not know.
//!
//! `seq` is this catalog process's count of offer-list changes since it
//! started: each create, replace or delete (and each forced reload) adds
//! one; a message carries the `seq` of the last change it reflects. On one
//! connection `seq` never decreases: an unfiltered delta subscriber sees
//! consecutive numbers, so a gap would mean a lost change (the server never
//! drops one: it disconnects the subscriber instead). Filtered subscribers
//! skip the changes that do not touch their view, and snapshot-mode
//! subscribers that read slowly may skip lists (the newer one supersedes).
//! A snapshot is the whole truth whatever its `seq` (after a reconnect, a
//! restart or on another process the count is another one).
//!
//! Query parameters: `mode=snapshot|delta` and the filters of `GET /offers`
//! (`type`, `provider`, `maxCost`, `min.<resource>`); a bad one is refused
//! with 400 before the upgrade.
//!
//! # Limits and close codes
//!
//! - More than `--feed-max-subscribers` connections, or a new filter beyond
//!   `--feed-max-filters`: 503 (with `Retry-After`) instead of the upgrade.
//! - A subscriber that falls behind (a delta subscriber with
//!   `--feed-queue` messages waiting, or any whose waiting messages make no
//!   progress for `--feed-send-timeout`) is closed with **1008** "too slow";
//!   it should reconnect, and gets a fresh snapshot. The others are never
//!   delayed: the publisher only pushes into bounded outboxes.
//! - The server pings every `--feed-ping-interval`; a client silent (no pong)
//!   for `--feed-idle-timeout` is closed with **1001**.
//! - On shutdown every subscriber is closed with **1001**.
//! - A client message over 4 KiB: **1009**, as soon as a frame header
//!   announces it (nothing of it is buffered); a protocol error (unmasked
//!   or fragmented control frames, stray continuations, reserved bits or
//!   opcodes, control frames over 125 bytes): **1002**; a text message or
//!   close reason that is not UTF-8: **1007** ([`frame`]). The feed takes
//!   no messages: client data frames are ignored.
//! - A connection whose close frame makes no progress either is cut (TCP
//!   reset) after another `--feed-send-timeout` (2 s at most on shutdown).
//!
//! # Many processes
//!
//! Each process runs one publisher ([`publisher::publish`]) that follows its
//! store's changes; a new subscriber's handler first applies whatever is
//! already published, so its first list includes every write acknowledged
//! before it connected. With MongoDB these come from the database's change
//! stream, so a change written through any process reaches the subscribers
//! of every process; when the stream cannot resume where it stopped the
//! store asks for a resync, the publisher reloads the list and every
//! subscriber gets a fresh snapshot.
//!
//! The feed never goes backwards, across resyncs too: per offer, no
//! subscriber is sent an older version than one it was sent, and no list
//! older than what it was sent ([`hub::Hub::reload`] refuses a list holding
//! an offer at a lower version than it sent, or lacking one it sent that
//! the store did not confirm deleted; the publisher reads such offers
//! again by id, then the whole list — issue 41, dbfault s3).
//!
//! Per offer, versions go out in increasing order and the last one always
//! does; intermediate ones may be skipped (coalescing, issue 41, dbfault
//! s2): a copy older than one already taken — another process's write
//! through a lagging change stream, after this process's own newer write
//! or a reloaded list — is dropped. The rules are
//! [`crate::store::sequence`]'s, meant for every versioned stream.
//!
//! # Layout
//!
//! [`params`] (query), [`envelope`] (messages as shared frames),
//! [`deflate`] (compression), [`frame`] (client frames), [`hub`]
//! (list, groups, fan-out), [`subscriber`] (bounded outboxes), [`body`] (the
//! connection), [`publisher`] (the tasks), [`conn`] (cutting stuck
//! sockets), [`config`] (flags), [`metrics`].

mod body;
pub mod config;
pub mod conn;
pub mod deflate;
pub mod envelope;
mod frame;
pub(crate) mod handler;
pub mod hub;
pub mod metrics;
pub mod params;
mod publisher;
mod subscriber;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::offers::OfferStore;

pub use config::{FeedConfig, FeedConfigError};
pub use conn::on_connect;
pub use handler::subscribe;
pub use metrics::FeedMetrics;
pub use params::Mode;

/// The running feed: shared by every handler through `web::Data<Feed>`.
#[derive(Clone)]
pub struct Feed {
    hub: Arc<hub::Hub>,
    follower: Arc<publisher::Follower>,
}

impl Feed {
    /// Start following `store` (the publisher and housekeeping tasks run on
    /// the current Tokio runtime until `shutdown`).
    pub fn start(
        store: Arc<dyn OfferStore>,
        config: FeedConfig,
        metrics: FeedMetrics,
        pricing: catalog_client::wire::Pricing,
        shutdown: CancellationToken,
    ) -> Result<Feed, FeedConfigError> {
        config.validate()?;
        let hub = Arc::new(hub::Hub::new(config, metrics).with_pricing(pricing));
        let follower = Arc::new(publisher::Follower::new(hub.clone(), &*store));
        tokio::spawn(
            publisher::publish(follower.clone(), store, shutdown.clone())
                .instrument(tracing::info_span!("feed_publisher")),
        );
        tokio::spawn(
            publisher::housekeep(hub.clone(), shutdown)
                .instrument(tracing::info_span!("feed_housekeeping")),
        );
        Ok(Feed { hub, follower })
    }

    pub(crate) fn hub(&self) -> &Arc<hub::Hub> {
        &self.hub
    }

    /// Apply the changes published so far (see [`publisher::Follower`]).
    pub(crate) fn catch_up(&self) {
        self.follower.catch_up();
    }
}
