//! The token bucket of one key: `rate_per_s` tokens a second, at most `burst` held.
//!
//! Pure arithmetic on a time in milliseconds, so it is exact under an injected clock.

/// A bucket's state. Tokens are fractional between refills.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    tokens: f64,
    updated_ms: i64,
}

/// What a bucket says after a take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketState {
    /// Whole tokens left in the bucket.
    pub remaining: u32,
    /// Seconds until the bucket is full again (0 when full).
    pub reset_s: u32,
    /// Seconds until one token is there (0 when one is there now).
    pub retry_after_s: u32,
}

impl Bucket {
    /// A new bucket is full.
    pub fn full(burst: u32, now_ms: i64) -> Bucket {
        Bucket {
            tokens: f64::from(burst),
            updated_ms: now_ms,
        }
    }

    fn refill(&mut self, rate_per_s: u32, burst: u32, now_ms: i64) {
        let elapsed_ms = (now_ms - self.updated_ms).max(0) as f64;
        self.tokens =
            (self.tokens + elapsed_ms * f64::from(rate_per_s) / 1000.0).min(f64::from(burst));
        self.updated_ms = self.updated_ms.max(now_ms);
    }

    /// Takes up to `want` whole tokens; returns how many, and the state after.
    pub fn take(
        &mut self,
        rate_per_s: u32,
        burst: u32,
        want: u32,
        now_ms: i64,
    ) -> (u32, BucketState) {
        self.refill(rate_per_s, burst, now_ms);
        let granted = (self.tokens.floor() as u32).min(want);
        self.tokens -= f64::from(granted);
        (granted, self.state(rate_per_s, burst))
    }

    /// Gives back tokens that were taken and not spent (never above `burst`).
    pub fn give_back(&mut self, burst: u32, tokens: u32) {
        self.tokens = (self.tokens + f64::from(tokens)).min(f64::from(burst));
    }

    pub fn state(&self, rate_per_s: u32, burst: u32) -> BucketState {
        let rate = f64::from(rate_per_s.max(1));
        let missing = f64::from(burst) - self.tokens;
        BucketState {
            remaining: self.tokens.floor().max(0.0) as u32,
            reset_s: (missing / rate).ceil().max(0.0) as u32,
            retry_after_s: if self.tokens >= 1.0 {
                0
            } else {
                ((1.0 - self.tokens) / rate).ceil().max(1.0) as u32
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refill() {
        let mut bucket = Bucket::full(10, 0);
        let (granted, state) = bucket.take(5, 10, 8, 0);
        assert_eq!((granted, state.remaining), (8, 2));
        assert_eq!(state.reset_s, 2); // 8 missing at 5/s
        let (granted, state) = bucket.take(5, 10, 8, 0);
        assert_eq!((granted, state.remaining, state.retry_after_s), (2, 0, 1));
        // 400 ms later: 2 tokens back.
        let (granted, _) = bucket.take(5, 10, 8, 400);
        assert_eq!(granted, 2);
        // Never more than the burst, however long it waited.
        let (granted, state) = bucket.take(5, 10, 100, 1_000_000);
        assert_eq!((granted, state.reset_s), (10, 2));
    }

    #[test]
    fn over_any_window_at_most_burst_plus_rate() {
        let mut bucket = Bucket::full(20, 0);
        let mut total = 0;
        for ms in (0..=3000).step_by(7) {
            total += bucket.take(10, 20, 3, ms).0;
        }
        assert!(total <= 20 + 10 * 3, "{total}");
        assert!(total >= 20 + 10 * 3 - 1, "{total}");
    }

    #[test]
    fn give_back_is_capped() {
        let mut bucket = Bucket::full(4, 0);
        bucket.take(1, 4, 3, 0);
        bucket.give_back(4, 10);
        assert_eq!(bucket.state(1, 4).remaining, 4);
    }
}
