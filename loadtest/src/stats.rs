//! What a run measures: HDR latency histograms per request and overall, answers by status and
//! error type, and a per-second timeline.
//!
//! Latency is from when a request was *due* (its place in the schedule) to when its answer was
//! read, in microseconds, so time spent waiting for a free connection counts: a slow server
//! cannot hide its slowness by slowing the generator (no coordinated omission).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

/// The longest latency kept exactly; longer ones are recorded as this (60 s).
pub const LATENCY_US_MAX: u64 = 60_000_000;
/// Significant figures of the histograms.
pub const SIGNIFICANT_FIGURES: u8 = 3;

pub fn histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts; this cannot fail.
    Histogram::new_with_bounds(1, LATENCY_US_MAX, SIGNIFICANT_FIGURES)
        .unwrap_or_else(|error| panic!("histogram bounds: {error}"))
}

fn record(histogram: &mut Histogram<u64>, us: u64) {
    histogram.saturating_record(us.clamp(1, LATENCY_US_MAX));
}

/// One kind of request's answers.
pub struct KindStats {
    pub latency: Histogram<u64>,
    pub statuses: BTreeMap<u16, u64>,
    pub error_types: BTreeMap<String, u64>,
    /// Answers with another status than the kind expects.
    pub unexpected: u64,
    /// Requests that got no answer (connection refused, reset, malformed answer).
    pub transport_errors: u64,
}

impl KindStats {
    fn new() -> KindStats {
        KindStats {
            latency: histogram(),
            statuses: BTreeMap::new(),
            error_types: BTreeMap::new(),
            unexpected: 0,
            transport_errors: 0,
        }
    }
}

/// One second of the run.
#[derive(Clone, Debug, Serialize)]
pub struct Tick {
    /// Seconds since the measurement began (end of this second).
    pub t_s: u64,
    pub sent: u64,
    pub completed: u64,
    pub errors: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// Everything counted in the measurement window (after warm-up).
pub struct Stats {
    pub kinds: Vec<KindStats>,
    pub all: Histogram<u64>,
    /// Requests due in the window.
    pub sent: u64,
    pub completed: u64,
    /// Due requests not sent: the queue was over its bound (the generator fell behind).
    pub dropped: u64,
    /// Requests still queued or in flight when the drain timeout ended the run.
    pub unfinished: u64,
    pub timeline: Vec<Tick>,
    window: Histogram<u64>,
    window_sent: u64,
    window_completed: u64,
    window_errors: u64,
}

impl Stats {
    pub fn new(kinds: usize) -> Stats {
        Stats {
            kinds: (0..kinds).map(|_| KindStats::new()).collect(),
            all: histogram(),
            sent: 0,
            completed: 0,
            dropped: 0,
            unfinished: 0,
            timeline: Vec::new(),
            window: histogram(),
            window_sent: 0,
            window_completed: 0,
            window_errors: 0,
        }
    }

    pub fn sent(&mut self) {
        self.sent += 1;
        self.window_sent += 1;
    }

    /// A warm-up request: shown in the second's progress line, not counted.
    pub fn warmup_sent(&mut self) {
        self.window_sent += 1;
    }

    /// A warm-up request without an answer: shown, not counted.
    pub fn warmup_error(&mut self) {
        self.window_errors += 1;
    }

    /// A warm-up answer (`ok`: the status the request expected): shown, not counted.
    pub fn warmup_answered(&mut self, ok: bool, latency_us: u64) {
        record(&mut self.window, latency_us);
        self.window_completed += 1;
        if !ok {
            self.window_errors += 1;
        }
    }

    /// An answer to a request of `kind` that expected `expected`, `latency_us` after it was
    /// due.
    pub fn answered(
        &mut self,
        kind: usize,
        expected: u16,
        status: u16,
        error_type: Option<String>,
        latency_us: u64,
    ) {
        let stats = &mut self.kinds[kind];
        record(&mut stats.latency, latency_us);
        record(&mut self.all, latency_us);
        record(&mut self.window, latency_us);
        *stats.statuses.entry(status).or_default() += 1;
        if let Some(error_type) = error_type {
            *stats.error_types.entry(error_type).or_default() += 1;
        }
        if status != expected {
            stats.unexpected += 1;
            self.window_errors += 1;
        }
        self.completed += 1;
        self.window_completed += 1;
    }

    pub fn transport_error(&mut self, kind: usize) {
        self.kinds[kind].transport_errors += 1;
        self.window_errors += 1;
    }

    /// Closes the current second; returns it.
    pub fn tick(&mut self, t_s: u64) -> Tick {
        let tick = Tick {
            t_s,
            sent: self.window_sent,
            completed: self.window_completed,
            errors: self.window_errors,
            p50_us: self.window.value_at_quantile(0.5),
            p99_us: self.window.value_at_quantile(0.99),
            max_us: self.window.max(),
        };
        self.window.reset();
        self.window_sent = 0;
        self.window_completed = 0;
        self.window_errors = 0;
        self.timeline.push(tick.clone());
        tick
    }

    /// Unexpected answers, transport errors, drops and unfinished requests.
    pub fn errors(&self) -> u64 {
        self.kinds
            .iter()
            .map(|k| k.unexpected + k.transport_errors)
            .sum::<u64>()
            + self.dropped
            + self.unfinished
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_counted_where_they_belong() {
        let mut stats = Stats::new(2);
        stats.sent();
        stats.sent();
        stats.answered(0, 200, 200, None, 1500);
        stats.answered(1, 401, 401, Some("unauthorized".into()), 300);
        stats.answered(0, 200, 503, Some("busy".into()), 90_000_000);
        stats.transport_error(1);
        assert_eq!(stats.completed, 3);
        assert_eq!(stats.kinds[0].unexpected, 1);
        assert_eq!(stats.kinds[1].unexpected, 0);
        assert_eq!(stats.errors(), 2);
        assert_eq!(
            stats.kinds[0].latency.max(),
            stats.kinds[0].latency.highest_equivalent(LATENCY_US_MAX)
        );
        let tick = stats.tick(1);
        assert_eq!((tick.sent, tick.completed, tick.errors), (2, 3, 2));
        assert_eq!(stats.tick(2).completed, 0);
    }
}
