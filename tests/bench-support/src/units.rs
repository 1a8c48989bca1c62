//! Durations and sizes as the benches' tables print them.

use std::time::Duration;

/// Milliseconds, fractional.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Mebibytes, fractional.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_scale() {
        assert_eq!(ms(Duration::from_micros(1500)), 1.5);
        assert_eq!(mib(3 * 1024 * 1024 / 2), 1.5);
    }
}
