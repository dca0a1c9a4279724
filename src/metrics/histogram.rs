//! A fixed-bucket histogram in integer units (microseconds, records), cheap enough to observe
//! on every request: a short scan of a constant table and three additions, no allocation.
//!
//! Buckets are stored non-cumulative and summed at render time; Prometheus wants cumulative
//! `_bucket` series ending in `+Inf`, `_sum` and `_count` ([`super::exposition`]).

/// Bucket upper bounds in microseconds for request, decode, resize and model times: 0.5 ms
/// to 10 s.
pub const LATENCY_BOUNDS_US: [u64; 14] = [
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000,
];

/// Bucket upper bounds in microseconds for journal commits and fsyncs, which run from tens of
/// microseconds (page cache) to many milliseconds (a slow disk).
pub const STORAGE_BOUNDS_US: [u64; 14] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000,
];

/// Bucket upper bounds of journal batch sizes, in records.
pub const BATCH_BOUNDS: [u64; 10] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512];

/// Counts of observations per bucket (the last slot is over every bound), their sum and count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Histogram<const N: usize> {
    /// `counts[i]`: observations in `(bounds[i-1], bounds[i]]`; `counts[N]`: above `bounds[N-1]`.
    pub counts: [u64; N],
    pub over: u64,
    pub sum: u64,
    pub count: u64,
}

impl<const N: usize> Default for Histogram<N> {
    fn default() -> Self {
        Histogram {
            counts: [0; N],
            over: 0,
            sum: 0,
            count: 0,
        }
    }
}

impl<const N: usize> Histogram<N> {
    pub fn observe(&mut self, bounds: &[u64; N], value: u64) {
        match bounds.iter().position(|&bound| value <= bound) {
            Some(bucket) => self.counts[bucket] += 1,
            None => self.over += 1,
        }
        self.sum = self.sum.saturating_add(value);
        self.count += 1;
    }

    pub fn add(&mut self, other: &Self) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine += theirs;
        }
        self.over += other.over;
        self.sum = self.sum.saturating_add(other.sum);
        self.count += other.count;
    }

    /// Cumulative counts per bound, then the `+Inf` count (equal to `count`).
    pub fn cumulative(&self) -> impl Iterator<Item = u64> + '_ {
        self.counts
            .iter()
            .chain(std::iter::once(&self.over))
            .scan(0u64, |total, &n| {
                *total += n;
                Some(*total)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let mut histogram = Histogram::<14>::default();
        for value in [0, 500, 501, 10_000_000, 10_000_001] {
            histogram.observe(&LATENCY_BOUNDS_US, value);
        }
        assert_eq!(histogram.counts[0], 2);
        assert_eq!(histogram.counts[1], 1);
        assert_eq!(histogram.counts[13], 1);
        assert_eq!(histogram.over, 1);
        assert_eq!(histogram.count, 5);
        let cumulative: Vec<u64> = histogram.cumulative().collect();
        assert_eq!(cumulative.len(), 15);
        assert_eq!(cumulative[0], 2);
        assert_eq!(*cumulative.last().unwrap(), 5);
        assert!(cumulative.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn sums_of_shards_add_up() {
        let mut a = Histogram::<10>::default();
        let mut b = Histogram::<10>::default();
        a.observe(&BATCH_BOUNDS, 3);
        b.observe(&BATCH_BOUNDS, 600);
        a.add(&b);
        assert_eq!((a.count, a.sum, a.over, a.counts[2]), (2, 603, 1, 1));
    }
}
