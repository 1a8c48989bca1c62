//! A ResourceReader served by another process, read over gRPC: the `grpc`
//! source of a chain, and what an aggregator uses to reach its upstreams.
//!
//! [`UpstreamClient`] keeps one subscription to the upstream open. It
//! reconnects with capped exponential backoff (and jitter) when the
//! upstream goes away, re-subscribes, and turns upstream notifications into
//! its own — plus one [`Notification::All`] every time the subscription is
//! (re)established, since changes made while disconnected were missed.
//! While the subscription is down, reads fail fast with
//! [`ReadError::Unavailable`] instead of waiting on a dead peer. Negative
//! quantities in an upstream's answer are ignored (counted as zero) with a
//! warning naming the upstream and the resource.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use liqo_proto::{shape_a, shape_b, shape_c};
use quantity::ResourceList;
use tokio::sync::watch;
use tonic::transport::{Channel, Endpoint};
use tracing::Instrument;

use crate::reader::{Notification, NotificationStream, Notifier, ReadError, ResourceReader};
use crate::task::AbortOnDrop;
use crate::wire::{self, LiqoApi};

/// Reconnection delays: doubling from `initial` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(5),
        }
    }
}

/// How to talk to an upstream.
#[derive(Debug, Clone)]
pub struct UpstreamOptions {
    /// The wire shape the upstream serves (our own servers default to v0.5).
    pub api: LiqoApi,
    pub backoff: Backoff,
    /// Limit for establishing a connection.
    pub connect_timeout: Duration,
    /// Limit for one read or remove call.
    pub request_timeout: Duration,
    /// Largest answer accepted from the upstream.
    pub max_message_size: usize,
}

impl Default for UpstreamOptions {
    fn default() -> Self {
        Self {
            api: LiqoApi::V05,
            backoff: Backoff::default(),
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(5),
            max_message_size: 1024 * 1024,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid upstream address {address:?}: {reason}")]
    InvalidAddress { address: String, reason: String },
}

/// State of the subscription to the upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Link {
    /// Not subscribed; the last failure, for error messages.
    Down(String),
    Up,
}

/// A reconnecting client of an upstream ResourceReader; implements
/// [`ResourceReader`] itself, so it can be the source of a chain.
pub struct UpstreamClient {
    shared: Arc<Shared>,
    _subscriber: AbortOnDrop,
}

struct Shared {
    address: String,
    options: UpstreamOptions,
    channel: Channel,
    link: watch::Sender<Link>,
    notifier: Notifier,
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamClient")
            .field("address", &self.shared.address)
            .field("api", &self.shared.options.api)
            .finish_non_exhaustive()
    }
}

impl UpstreamClient {
    /// Start talking to the upstream at `address` (`http://host:port`, or
    /// just `host:port`). Returns at once; the connection is made in the
    /// background. Must be called inside a Tokio runtime.
    pub fn connect(address: &str, options: UpstreamOptions) -> Result<Self, ClientError> {
        let uri = if address.contains("://") {
            address.to_string()
        } else {
            format!("http://{address}")
        };
        let invalid = |reason: String| ClientError::InvalidAddress {
            address: address.to_string(),
            reason,
        };
        if uri.starts_with("https://") {
            return Err(invalid(
                "TLS upstreams are not supported; use http://".into(),
            ));
        }
        let endpoint = Endpoint::from_shared(uri.clone())
            .map_err(|e| invalid(e.to_string()))?
            .connect_timeout(options.connect_timeout)
            .timeout(options.request_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(20))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true);
        let (link, _) = watch::channel(Link::Down("not connected yet".into()));
        let shared = Arc::new(Shared {
            address: uri.clone(),
            options,
            channel: endpoint.connect_lazy(),
            link,
            notifier: Notifier::new(),
        });
        let span = tracing::info_span!("upstream", address = %uri, api = %shared.options.api);
        let task = tokio::spawn(keep_subscribed(shared.clone()).instrument(span));
        Ok(Self {
            shared,
            _subscriber: AbortOnDrop(task),
        })
    }

    /// The upstream's address, as an URI.
    pub fn address(&self) -> &str {
        &self.shared.address
    }

    /// Whether the subscription to the upstream is established now.
    pub fn is_connected(&self) -> bool {
        *self.shared.link.borrow() == Link::Up
    }

    /// Wait until the subscription is established (or `timeout` passes);
    /// returns whether it is.
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        let mut rx = self.shared.link.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|l| *l == Link::Up))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    fn unavailable_reason(&self) -> Option<String> {
        match &*self.shared.link.borrow() {
            Link::Up => None,
            Link::Down(reason) => Some(format!(
                "upstream {} is unreachable: {reason}",
                self.shared.address
            )),
        }
    }
}

#[async_trait::async_trait]
impl ResourceReader for UpstreamClient {
    async fn read(&self, originator: &str) -> Result<ResourceList, ReadError> {
        if let Some(reason) = self.unavailable_reason() {
            return Err(ReadError::Unavailable(reason));
        }
        let s = &self.shared;
        let to_err = |status: tonic::Status| wire::read_error_from(&status, &s.address);
        let max = s.options.max_message_size;
        let list = match s.options.api {
            LiqoApi::V05 => {
                let mut c =
                    shape_a::resource_reader_client::ResourceReaderClient::new(s.channel.clone())
                        .max_decoding_message_size(max);
                let request = shape_a::ReadRequest {
                    originator: originator.to_string(),
                };
                wire::from_shape_a(
                    c.read_resources(request)
                        .await
                        .map_err(to_err)?
                        .into_inner(),
                )
            }
            LiqoApi::V06 => {
                let mut c =
                    shape_b::resource_reader_client::ResourceReaderClient::new(s.channel.clone())
                        .max_decoding_message_size(max);
                let request = shape_b::ClusterIdentity {
                    cluster_id: originator.to_string(),
                };
                wire::from_shape_b(
                    c.read_resources(request)
                        .await
                        .map_err(to_err)?
                        .into_inner(),
                )
            }
            LiqoApi::V09 => {
                let mut c =
                    shape_c::resource_reader_client::ResourceReaderClient::new(s.channel.clone())
                        .max_decoding_message_size(max);
                let request = shape_c::ClusterIdentity {
                    cluster_id: originator.to_string(),
                };
                wire::from_shape_c(
                    c.read_resources(request)
                        .await
                        .map_err(to_err)?
                        .into_inner(),
                )
            }
        }?;
        Ok(without_negative(list, &s.address, originator))
    }

    fn subscribe(&self) -> NotificationStream {
        self.shared.notifier.subscribe()
    }

    async fn remove_cluster(&self, cluster: &str) -> Result<(), ReadError> {
        if let Some(reason) = self.unavailable_reason() {
            return Err(ReadError::Unavailable(reason));
        }
        let s = &self.shared;
        let to_err = |status: tonic::Status| wire::read_error_from(&status, &s.address);
        match s.options.api {
            LiqoApi::V05 => {
                let mut c =
                    shape_a::resource_reader_client::ResourceReaderClient::new(s.channel.clone());
                let request = shape_a::RemoveRequest {
                    cluster: cluster.to_string(),
                };
                c.remove_cluster(request).await.map_err(to_err)?;
            }
            LiqoApi::V06 => {
                let mut c =
                    shape_b::resource_reader_client::ResourceReaderClient::new(s.channel.clone());
                let request = shape_b::ClusterIdentity {
                    cluster_id: cluster.to_string(),
                };
                c.remove_cluster(request).await.map_err(to_err)?;
            }
            LiqoApi::V09 => {
                let mut c =
                    shape_c::resource_reader_client::ResourceReaderClient::new(s.channel.clone());
                let request = shape_c::ClusterIdentity {
                    cluster_id: cluster.to_string(),
                };
                c.remove_cluster(request).await.map_err(to_err)?;
            }
        }
        Ok(())
    }
}

/// Keep one subscription open for as long as the client lives.
async fn keep_subscribed(shared: Arc<Shared>) {
    let backoff = shared.options.backoff;
    let mut delay = backoff.initial;
    loop {
        let mut was_up = false;
        let reason = match subscribe_once(&shared, &mut was_up).await {
            Ok(()) => "the upstream ended the subscription".to_string(),
            Err(status) => describe(&status),
        };
        shared.link.send_replace(Link::Down(reason.clone()));
        if was_up {
            tracing::warn!(%reason, "lost the upstream; reconnecting");
            delay = backoff.initial;
        } else {
            tracing::debug!(%reason, retry_in = ?delay, "upstream not reachable");
        }
        tokio::time::sleep(jitter(delay)).await;
        delay = (delay * 2).min(backoff.max);
    }
}

/// Subscribe and forward notifications until the stream breaks.
async fn subscribe_once(shared: &Shared, was_up: &mut bool) -> Result<(), tonic::Status> {
    let channel = shared.channel.clone();
    let mut up = || {
        *was_up = true;
        shared.link.send_replace(Link::Up);
        tracing::info!("subscribed to the upstream");
        // Whatever changed while we were not subscribed was missed.
        shared.notifier.notify(Notification::All);
    };
    match shared.options.api {
        LiqoApi::V05 => {
            let mut c = shape_a::resource_reader_client::ResourceReaderClient::new(channel);
            let mut stream = c
                .subscribe(shape_a::SubscribeRequest {})
                .await?
                .into_inner();
            up();
            while stream.message().await?.is_some() {
                shared.notifier.notify(Notification::All);
            }
        }
        LiqoApi::V06 => {
            let mut c = shape_b::resource_reader_client::ResourceReaderClient::new(channel);
            let mut stream = c.subscribe(shape_b::Empty {}).await?.into_inner();
            up();
            while let Some(id) = stream.message().await? {
                shared
                    .notifier
                    .notify(Notification::from_cluster_id(id.cluster_id));
            }
        }
        LiqoApi::V09 => {
            let mut c = shape_c::resource_reader_client::ResourceReaderClient::new(channel);
            let mut stream = c.subscribe(shape_c::Empty {}).await?.into_inner();
            up();
            while let Some(id) = stream.message().await? {
                shared
                    .notifier
                    .notify(Notification::from_cluster_id(id.cluster_id));
            }
        }
    }
    Ok(())
}

/// An upstream's answer without its negative quantities, each logged: a
/// negative amount of a resource offers nothing, and summed with others it
/// would take away what they offer. Counted as absent (zero).
fn without_negative(list: ResourceList, upstream: &str, originator: &str) -> ResourceList {
    if !list.0.values().any(|q| q.is_negative()) {
        return list;
    }
    ResourceList(
        list.0
            .into_iter()
            .filter(|(name, quantity)| {
                if quantity.is_negative() {
                    tracing::warn!(
                        %upstream,
                        %originator,
                        resource = %name,
                        value = %quantity,
                        "the upstream answered a negative quantity: ignored (counted as zero)"
                    );
                }
                !quantity.is_negative()
            })
            .collect(),
    )
}

fn describe(status: &tonic::Status) -> String {
    use std::error::Error as _;
    let mut text = format!("{}: {}", status.code(), status.message());
    let mut source = status.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `delay` ± 20%, so many clients of one restarted upstream do not all
/// reconnect in the same instant.
fn jitter(delay: Duration) -> Duration {
    let random = std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    let factor = 0.8 + (random % 401) as f64 / 1000.0;
    delay.mul_f64(factor)
}
