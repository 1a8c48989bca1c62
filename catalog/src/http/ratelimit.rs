//! A per-client token bucket, for the endpoints that check a secret
//! (`POST /authenticate`, `/authenticate/rotate`, `/authenticate/admin`,
//! whose argon2 or constant-time checks are worth guessing at).
//!
//! # Why not `governor`
//!
//! `governor`'s keyed limiter (GCRA, with `retain_recent` to forget idle
//! clients) would do the same job and is the intended replacement. It is
//! not used yet only because it is not in the workspace's dependency tree:
//! adding it brings new crates to fetch and build, which this restructuring
//! deliberately did not do. The bucket below is forty lines, bounded in
//! memory (idle clients are forgotten past `MAX_CLIENTS`) and tested.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Clients not seen for this long are forgotten.
const IDLE_FORGET: Duration = Duration::from_secs(600);
/// Most clients tracked at once; beyond this the table is pruned.
const MAX_CLIENTS: usize = 100_000;

/// `per_minute` requests per client address, in bursts of up to `per_minute`.
/// Zero disables the limit.
pub struct RateLimiter {
    per_minute: u32,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl RateLimiter {
    pub fn new(per_minute: u32) -> Self {
        RateLimiter {
            per_minute,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Take one token for `client`; false means "too many, wait".
    pub fn allow(&self, client: IpAddr) -> bool {
        if self.per_minute == 0 {
            return true;
        }
        let capacity = f64::from(self.per_minute);
        let rate = capacity / 60.0;
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_CLIENTS {
            buckets.retain(|_, (_, seen)| now.duration_since(*seen) < IDLE_FORGET);
        }
        let (tokens, seen) = buckets.entry(client).or_insert((capacity, now));
        *tokens = (*tokens + now.duration_since(*seen).as_secs_f64() * rate).min(capacity);
        *seen = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_after_the_burst_per_client() {
        let l = RateLimiter::new(3);
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        assert!(l.allow(a) && l.allow(a) && l.allow(a));
        assert!(!l.allow(a));
        assert!(l.allow(b));
        assert!(RateLimiter::new(0).allow(a));
    }
}
