//! Retry delays for anything a binary reaches over the network (the
//! catalog, a resource chain): doubling from an initial delay up to a cap,
//! with jitter so that many clients behind one restarted server do not all
//! retry in the same instant. The one backoff of the workspace: every
//! catalog client retries with it.

use std::hash::BuildHasher;
use std::time::Duration;

/// Capped exponential backoff. [`next_delay`](Backoff::next_delay) gives the delay
/// before the next retry; [`reset`](Backoff::reset) after a success.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    /// Delays start at `initial` and double up to `max` (`max` is raised to
    /// `initial` if smaller).
    pub fn new(initial: Duration, max: Duration) -> Self {
        let max = max.max(initial);
        Self {
            initial,
            max,
            current: initial,
        }
    }

    /// The delay before the next retry (±20% jitter), then double it.
    pub fn next_delay(&mut self) -> Duration {
        let delay = jitter(self.current);
        self.current = (self.current * 2).min(self.max);
        delay
    }

    /// Back to the initial delay, after a success.
    pub fn reset(&mut self) {
        self.current = self.initial;
    }

    /// The largest delay this backoff waits (before jitter).
    pub fn max(&self) -> Duration {
        self.max
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(Duration::from_millis(200), Duration::from_secs(5))
    }
}

/// `delay` ± 20%.
fn jitter(delay: Duration) -> Duration {
    // A fresh RandomState is randomly keyed: enough randomness for jitter
    // without a dependency on a random number generator.
    let random = std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    let factor = 0.8 + (random % 401) as f64 / 1000.0;
    delay.mul_f64(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within(d: Duration, nominal: Duration) -> bool {
        d >= nominal.mul_f64(0.79) && d <= nominal.mul_f64(1.21)
    }

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(700));
        let nominal = [100, 200, 400, 700, 700];
        for ms in nominal {
            let d = b.next_delay();
            assert!(
                within(d, Duration::from_millis(ms)),
                "{d:?} is not about {ms}ms"
            );
        }
        b.reset();
        let d = b.next_delay();
        assert!(within(d, Duration::from_millis(100)), "{d:?} after reset");
    }

    #[test]
    fn cap_below_initial_is_raised() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_millis(10));
        assert_eq!(b.max(), Duration::from_secs(1));
        assert!(within(b.next_delay(), Duration::from_secs(1)));
        assert!(within(b.next_delay(), Duration::from_secs(1)));
    }
}
