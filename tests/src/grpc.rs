//! A gRPC client for the ResourceReader API in any of Liqo's three wire
//! shapes, built on the raw generated stubs (not on the code under test), so
//! the end-to-end tests check the wire itself.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use liqo_proto::{shape_a, shape_b, shape_c};
use tonic::transport::{Channel, Endpoint};

/// A Liqo wire shape, named by the `--liqo-api` value that selects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    A,
    B,
    C,
}

impl Shape {
    pub const ALL: [Shape; 3] = [Shape::A, Shape::B, Shape::C];

    /// The `--liqo-api` flag value.
    pub fn liqo_api(self) -> &'static str {
        match self {
            Shape::A => "v0.5",
            Shape::B => "v0.6",
            Shape::C => "v0.9",
        }
    }
}

/// One connection to a served ResourceReader.
#[derive(Clone)]
pub struct ReaderClient {
    shape: Shape,
    channel: Channel,
}

/// A shape C answer: one list per pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    pub name: String,
    pub prefix: String,
    pub resources: BTreeMap<String, String>,
}

impl ReaderClient {
    /// Connect to 127.0.0.1:`port`, retrying for up to [`crate::EVENTUALLY`].
    pub async fn connect(port: u16, shape: Shape) -> Result<Self> {
        let endpoint = Endpoint::from_shared(format!("http://127.0.0.1:{port}"))?
            .connect_timeout(Duration::from_secs(2));
        let deadline = Instant::now() + crate::EVENTUALLY;
        loop {
            match endpoint.connect().await {
                Ok(channel) => return Ok(Self { shape, channel }),
                Err(e) if Instant::now() > deadline => {
                    return Err(e).with_context(|| format!("connecting to port {port}"))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// `ReadResources` for `originator`: resource name → quantity string.
    /// Shape C answers must hold exactly one pool.
    pub async fn read(&self, originator: &str) -> Result<BTreeMap<String, String>, tonic::Status> {
        match self.shape {
            Shape::C => {
                let mut pools = self.read_pools(originator).await?;
                if pools.len() != 1 {
                    return Err(tonic::Status::internal(format!(
                        "expected one pool, got {}",
                        pools.len()
                    )));
                }
                Ok(pools.remove(0).resources)
            }
            Shape::A => {
                let mut c =
                    shape_a::resource_reader_client::ResourceReaderClient::new(self.channel());
                let r = c
                    .read_resources(shape_a::ReadRequest {
                        originator: originator.into(),
                    })
                    .await?
                    .into_inner();
                Ok(r.resources.into_iter().collect())
            }
            Shape::B => {
                let mut c =
                    shape_b::resource_reader_client::ResourceReaderClient::new(self.channel());
                let r = c
                    .read_resources(shape_b::ClusterIdentity {
                        cluster_id: originator.into(),
                    })
                    .await?
                    .into_inner();
                Ok(r.resources
                    .into_iter()
                    .map(|(k, q)| (k, q.string.unwrap_or_default()))
                    .collect())
            }
        }
    }

    /// Shape C `ReadResources`, every pool.
    pub async fn read_pools(&self, originator: &str) -> Result<Vec<Pool>, tonic::Status> {
        let mut c = shape_c::resource_reader_client::ResourceReaderClient::new(self.channel());
        let r = c
            .read_resources(shape_c::ClusterIdentity {
                cluster_id: originator.into(),
            })
            .await?
            .into_inner();
        Ok(r.resource_lists
            .into_iter()
            .map(|l| Pool {
                name: l.pool_name,
                prefix: l.pool_prefix,
                resources: l
                    .resources
                    .into_iter()
                    .map(|(k, q)| (k, q.string.unwrap_or_default()))
                    .collect(),
            })
            .collect())
    }

    /// `RemoveCluster`.
    pub async fn remove_cluster(&self, cluster: &str) -> Result<(), tonic::Status> {
        match self.shape {
            Shape::A => {
                let mut c =
                    shape_a::resource_reader_client::ResourceReaderClient::new(self.channel());
                c.remove_cluster(shape_a::RemoveRequest {
                    cluster: cluster.into(),
                })
                .await?;
            }
            Shape::B => {
                let mut c =
                    shape_b::resource_reader_client::ResourceReaderClient::new(self.channel());
                c.remove_cluster(shape_b::ClusterIdentity {
                    cluster_id: cluster.into(),
                })
                .await?;
            }
            Shape::C => {
                let mut c =
                    shape_c::resource_reader_client::ResourceReaderClient::new(self.channel());
                c.remove_cluster(shape_c::ClusterIdentity {
                    cluster_id: cluster.into(),
                })
                .await?;
            }
        }
        Ok(())
    }

    /// `Subscribe`.
    pub async fn subscribe(&self) -> Result<Subscription, tonic::Status> {
        Ok(match self.shape {
            Shape::A => {
                let mut c =
                    shape_a::resource_reader_client::ResourceReaderClient::new(self.channel());
                Subscription::A(
                    c.subscribe(shape_a::SubscribeRequest {})
                        .await?
                        .into_inner(),
                )
            }
            Shape::B => {
                let mut c =
                    shape_b::resource_reader_client::ResourceReaderClient::new(self.channel());
                Subscription::B(c.subscribe(shape_b::Empty {}).await?.into_inner())
            }
            Shape::C => {
                let mut c =
                    shape_c::resource_reader_client::ResourceReaderClient::new(self.channel());
                Subscription::C(c.subscribe(shape_c::Empty {}).await?.into_inner())
            }
        })
    }

    /// Read until `check` accepts the answer, or fail after `timeout` with
    /// the last answer (or error) seen.
    pub async fn read_until(
        &self,
        originator: &str,
        timeout: Duration,
        check: impl Fn(&BTreeMap<String, String>) -> bool,
    ) -> Result<BTreeMap<String, String>> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = self.read(originator).await;
            if let Ok(answer) = &last {
                if check(answer) {
                    return Ok(answer.clone());
                }
            }
            if Instant::now() > deadline {
                bail!("no acceptable answer for {originator:?} within {timeout:?}; last: {last:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// An open `Subscribe` stream.
pub enum Subscription {
    A(tonic::Streaming<shape_a::UpdateNotification>),
    B(tonic::Streaming<shape_b::ClusterIdentity>),
    C(tonic::Streaming<shape_c::ClusterIdentity>),
}

impl Subscription {
    /// The next notification: the cluster ID it names, `""` for "all
    /// clusters" (always `""` in shape A, whose notifications are empty).
    /// Fails if none arrives within `timeout` or the stream ends.
    pub async fn next_within(&mut self, timeout: Duration) -> Result<String> {
        let next = async {
            Ok::<_, tonic::Status>(match self {
                Subscription::A(s) => s.message().await?.map(|_| String::new()),
                Subscription::B(s) => s.message().await?.map(|n| n.cluster_id),
                Subscription::C(s) => s.message().await?.map(|n| n.cluster_id),
            })
        };
        match tokio::time::timeout(timeout, next).await {
            Err(_) => bail!("no notification within {timeout:?}"),
            Ok(Err(status)) => bail!("subscription failed: {status}"),
            Ok(Ok(None)) => bail!("subscription ended"),
            Ok(Ok(Some(cluster))) => Ok(cluster),
        }
    }

    /// Assert that no notification arrives for `wait` and the stream is
    /// still open: a notification, an error or the end of the stream fails
    /// (a dead stream is silent too). Follow it with a change whose
    /// notification must arrive, to show the stream was listening.
    pub async fn expect_silence(&mut self, wait: Duration) -> Result<()> {
        let next = async {
            Ok::<_, tonic::Status>(match self {
                Subscription::A(s) => s.message().await?.map(|_| String::new()),
                Subscription::B(s) => s.message().await?.map(|n| n.cluster_id),
                Subscription::C(s) => s.message().await?.map(|n| n.cluster_id),
            })
        };
        match tokio::time::timeout(wait, next).await {
            Err(_) => Ok(()),
            Ok(Err(status)) => bail!("the subscription failed instead of staying silent: {status}"),
            Ok(Ok(None)) => bail!("the subscription ended instead of staying silent"),
            Ok(Ok(Some(cluster))) => bail!("expected no notification, got one for {cluster:?}"),
        }
    }

    /// Discard notifications that arrive within `quiet` of each other.
    pub async fn drain(&mut self, quiet: Duration) {
        while self.next_within(quiet).await.is_ok() {}
    }
}

/// Resource name → quantity string, from literal pairs.
pub fn resources(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
