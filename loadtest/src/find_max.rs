//! `--find-max --p99 50ms`: the highest open-loop arrival rate at which the p99 latency stays
//! under a target.
//!
//! Steps of `step` seconds each: the rate doubles from `start_rate` while a step passes, then
//! a geometric bisection between the last rate that passed and the first that failed, until
//! they are within `precision` of each other. A step passes when its p99 is at most the target,
//! its errors (unexpected answers, transport errors, drops, unfinished) are at most
//! `error_ratio_max` of what was sent, and it completed at least 95 % of the asked rate.

use std::time::Duration;

use serde::Serialize;

use crate::generator::{run, Arrivals, Load, RunConfig};
use crate::prepare::Prepared;
use crate::report::Report;

/// Steps at most (doubling and bisection together).
pub const STEPS_MAX: usize = 24;

#[derive(Clone, Debug)]
pub struct Search {
    pub p99_target: Duration,
    pub start_rate: f64,
    pub rate_max: f64,
    pub step: Duration,
    pub warmup: Duration,
    pub pause: Duration,
    pub error_ratio_max: f64,
    pub precision: f64,
    pub arrivals: Arrivals,
}

#[derive(Clone, Debug, Serialize)]
pub struct Step {
    pub rate: f64,
    /// Answers in the step's measured time.
    pub completed: u64,
    pub throughput_per_s: f64,
    pub p99_us: u64,
    pub errors: u64,
    /// The server's CPU time per answer, microseconds (with `--server-pid`).
    pub server_cpu_us_per_answer: Option<f64>,
    pub passed: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct SearchResult {
    pub p99_target_us: u64,
    /// The highest rate that passed, if any did.
    pub max_rate: Option<f64>,
    pub steps: Vec<Step>,
    /// The report of the step at `max_rate`.
    pub best: Option<Report>,
}

fn passes(report: &Report, rate: f64, search: &Search) -> bool {
    report.latency.p99_us as u128 <= search.p99_target.as_micros()
        && report.errors as f64 <= search.error_ratio_max * report.sent.max(1) as f64
        && report.throughput_per_s >= 0.95 * rate
}

pub fn find_max(
    base: &RunConfig,
    requests: &[Prepared],
    scenario: &str,
    search: &Search,
    mut on_step: impl FnMut(&Step),
) -> anyhow::Result<SearchResult> {
    let mut steps = Vec::new();
    let mut best: Option<Report> = None;
    let mut good: Option<f64> = None;
    let mut bad: Option<f64> = None;
    let mut rate = search.start_rate.max(0.1);
    while steps.len() < STEPS_MAX {
        let load = Load::Open {
            rate,
            arrivals: search.arrivals,
        };
        let config = RunConfig {
            load,
            duration: search.step,
            warmup: search.warmup,
            ..base.clone()
        };
        let result = run(&config, requests)?;
        let report = Report::new(scenario, load, &result, requests);
        let passed = passes(&report, rate, search);
        let step = Step {
            rate,
            completed: report.completed,
            throughput_per_s: report.throughput_per_s,
            p99_us: report.latency.p99_us,
            errors: report.errors,
            server_cpu_us_per_answer: report.server_cpu_us_per_answer,
            passed,
        };
        on_step(&step);
        steps.push(step);
        if passed {
            good = Some(rate);
            best = Some(report);
        } else {
            bad = Some(rate);
        }
        rate = match (good, bad) {
            (Some(good), None) if good * 2.0 <= search.rate_max => good * 2.0,
            (Some(_), None) => break,
            (None, Some(bad)) if bad / 2.0 >= 0.1 => bad / 2.0,
            (None, _) => break,
            (Some(good), Some(bad)) => {
                if bad / good <= search.precision {
                    break;
                }
                (good * bad).sqrt()
            }
        };
        std::thread::sleep(search.pause);
    }
    Ok(SearchResult {
        p99_target_us: search.p99_target.as_micros() as u64,
        max_rate: good,
        steps,
        best,
    })
}
