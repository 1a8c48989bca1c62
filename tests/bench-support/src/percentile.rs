//! The nearest-rank percentile: the smallest sample with at least `p` of
//! the samples at or below it. Every bench uses this one definition (an
//! earlier rounded-index variant gave the same p50/p99 within one sample).

/// The `p` percentile (a fraction, `0.99` for p99) of `sorted` (ascending),
/// or `None` when there are no samples.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn nearest_rank_of_a_hundred_samples() {
        let samples: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&samples, 0.5), Some(50));
        assert_eq!(percentile(&samples, 0.99), Some(99));
        assert_eq!(percentile(&samples, 1.0), Some(100));
        assert_eq!(percentile(&samples, 0.0), Some(1));
    }

    #[test]
    fn one_sample_is_every_percentile_and_none_is_none() {
        assert_eq!(percentile(&[7u32], 0.99), Some(7));
        assert_eq!(percentile::<u32>(&[], 0.5), None);
    }

    #[test]
    fn a_fraction_between_ranks_takes_the_next_sample_up() {
        // 0.99 × 10 = 9.9 → rank 10: the largest of ten.
        let samples: Vec<u32> = (1..=10).collect();
        assert_eq!(percentile(&samples, 0.99), Some(10));
        assert_eq!(percentile(&samples, 0.91), Some(10));
        assert_eq!(percentile(&samples, 0.9), Some(9));
    }
}
