//! The feed's limits and timings, as command-line flags (flattened into
//! the catalog's `Config`), each with an environment-variable fallback.

use std::time::Duration;

use clap::Args;

use crate::duration::parse_duration;

/// Limits of the `/subscribe` WebSocket feed.
#[derive(Debug, Clone, Args)]
pub struct FeedConfig {
    /// Most open feed connections (GET /subscribe); more get 503 until one
    /// closes.
    #[arg(long, env = "CATALOG_FEED_MAX_SUBSCRIBERS", default_value_t = 10_000)]
    pub feed_max_subscribers: usize,

    /// Most distinct filters the feed subscribers may use at once (each
    /// keeps its own filtered list); a subscriber with a new filter beyond
    /// this gets 503.
    #[arg(long, env = "CATALOG_FEED_MAX_FILTERS", default_value_t = 1_000)]
    pub feed_max_filters: usize,

    /// Messages a delta-mode subscriber may have waiting; one more and it is
    /// disconnected as too slow (close code 1008). Snapshot-mode subscribers
    /// only ever wait for the latest list.
    #[arg(long, env = "CATALOG_FEED_QUEUE", default_value_t = 64,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub feed_queue: u16,

    /// A subscriber whose waiting messages make no progress for this long is
    /// disconnected as too slow (close code 1008); if even its close frame
    /// makes no progress for as long again, its connection is cut.
    #[arg(long, env = "CATALOG_FEED_SEND_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub feed_send_timeout: Duration,

    /// How often the feed pings each subscriber.
    #[arg(long, env = "CATALOG_FEED_PING_INTERVAL", default_value = "20s", value_parser = parse_duration)]
    pub feed_ping_interval: Duration,

    /// A subscriber that sends nothing (not even a pong) for this long is
    /// closed (code 1001). Must be longer than --feed-ping-interval.
    #[arg(long, env = "CATALOG_FEED_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub feed_idle_timeout: Duration,
}

impl Default for FeedConfig {
    fn default() -> Self {
        FeedConfig {
            feed_max_subscribers: 10_000,
            feed_max_filters: 1_000,
            feed_queue: 64,
            feed_send_timeout: Duration::from_secs(10),
            feed_ping_interval: Duration::from_secs(20),
            feed_idle_timeout: Duration::from_secs(60),
        }
    }
}

/// A combination of feed flags that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FeedConfigError(String);

impl FeedConfig {
    /// Refuse settings that would disconnect healthy subscribers or never
    /// check anything.
    pub fn validate(&self) -> Result<(), FeedConfigError> {
        let zero = |name: &str| FeedConfigError(format!("--{name} must be more than zero"));
        if self.feed_max_subscribers == 0 {
            return Err(zero("feed-max-subscribers"));
        }
        if self.feed_max_filters == 0 {
            return Err(zero("feed-max-filters"));
        }
        if self.feed_send_timeout.is_zero() {
            return Err(zero("feed-send-timeout"));
        }
        if self.feed_ping_interval.is_zero() {
            return Err(zero("feed-ping-interval"));
        }
        if self.feed_idle_timeout <= self.feed_ping_interval {
            return Err(FeedConfigError(format!(
                "--feed-idle-timeout ({:?}) must be longer than --feed-ping-interval ({:?}), \
                 or healthy subscribers would be closed between two pings",
                self.feed_idle_timeout, self.feed_ping_interval
            )));
        }
        Ok(())
    }

    /// How often the housekeeping sweep runs: often enough to notice a
    /// stalled or idle subscriber within a fraction of its timeout.
    pub(crate) fn sweep_interval(&self) -> Duration {
        let shortest = self
            .feed_send_timeout
            .min(self.feed_ping_interval)
            .min(self.feed_idle_timeout);
        (shortest / 4).clamp(Duration::from_millis(20), Duration::from_secs(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        FeedConfig::default().validate().unwrap();
    }

    #[test]
    fn idle_timeout_must_exceed_ping_interval() {
        let c = FeedConfig {
            feed_idle_timeout: Duration::from_secs(20),
            ..FeedConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--feed-idle-timeout"));
    }

    #[test]
    fn sweep_interval_follows_the_shortest_timeout() {
        let c = FeedConfig {
            feed_send_timeout: Duration::from_millis(400),
            ..FeedConfig::default()
        };
        assert_eq!(c.sweep_interval(), Duration::from_millis(100));
        assert_eq!(
            FeedConfig::default().sweep_interval(),
            Duration::from_secs(1)
        );
    }
}
