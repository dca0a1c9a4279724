//! The Prometheus text format (version 0.0.4) of the summed shards.
//!
//! Every family gets `# HELP` and `# TYPE`; counters end in `_total`; times are in seconds and
//! sizes in bytes (the shards count integer microseconds, converted here). Labelled series
//! appear once they are non-zero; unlabelled ones always.

use std::fmt::Write as _;

use super::histogram::{Histogram, BATCH_BOUNDS, LATENCY_BOUNDS_US, STORAGE_BOUNDS_US};
use super::{Counters, ShardSnapshot, ACTIONS, ROUTE_SLOTS, STATUSES};
use crate::download::Refusal;
use crate::error::ErrorKind;
use crate::image::Format;
use crate::route::Route;

/// The `Content-Type` of the answer.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What the process knows besides the shards' counts.
#[derive(Clone, Copy, Debug)]
pub struct ProcessInfo {
    pub shards: usize,
    /// Shards that answered this scrape.
    pub answering: usize,
    pub ready: bool,
    /// In a fleet: the applied control-plane revision and its staleness in seconds.
    pub control_plane: Option<(i64, f64)>,
    /// In a fleet with Redis/Valkey: the budgets' engine.
    pub budgets: Option<BudgetFigures>,
    /// In a fleet: the quota ledger.
    pub quota_ledger: Option<QuotaLedgerFigures>,
}

/// The fleet's quota ledger (PostgreSQL) as a node sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct QuotaLedgerFigures {
    pub ledger_up: bool,
    /// Requests (one transaction each) sent to the ledger.
    pub round_trips: u64,
    /// Units granted from this node's share while the ledger could not be reached.
    pub fallback_units: u64,
}

/// The fleet's budget engine (Redis/Valkey) as a node sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct BudgetFigures {
    pub engine_up: bool,
    /// Rounds (one pipeline each) sent to the engine.
    pub round_trips: u64,
    /// Leases answered from this node's fallback share while the engine was down.
    pub fallback_takes: u64,
}

fn route_label(slot: usize) -> &'static str {
    Route::ALL.get(slot).map_or("none", |route| route.path())
}

fn status_label(slot: usize) -> String {
    STATUSES
        .get(slot)
        .map_or_else(|| "other".to_owned(), u16::to_string)
}

/// A label value with `\`, `"` and newlines escaped.
fn escaped(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The units a histogram counts in, and how they are written in the exported unit.
#[derive(Clone, Copy)]
enum Unit {
    /// Microseconds, exported as seconds.
    Micros,
    /// Plain counts.
    Count,
}

impl Unit {
    /// `value` in the exported unit, exactly (no binary floating point on the way).
    fn write(self, value: u64) -> String {
        match self {
            Unit::Count => value.to_string(),
            Unit::Micros => {
                let (whole, fraction) = (value / 1_000_000, value % 1_000_000);
                if fraction == 0 {
                    whole.to_string()
                } else {
                    let digits = format!("{fraction:06}");
                    format!("{whole}.{}", digits.trim_end_matches('0'))
                }
            }
        }
    }
}

/// Writes the series of one histogram.
fn histogram<const N: usize>(
    out: &mut String,
    name: &str,
    labels: &str,
    histogram: &Histogram<N>,
    bounds: &[u64; N],
    unit: Unit,
) {
    let separator = if labels.is_empty() { "" } else { "," };
    for (bound, count) in bounds
        .iter()
        .map(|&b| unit.write(b))
        .chain(std::iter::once("+Inf".to_owned()))
        .zip(histogram.cumulative())
    {
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{separator}le=\"{bound}\"}} {count}"
        );
    }
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let _ = writeln!(out, "{name}_sum{braces} {}", unit.write(histogram.sum));
    let _ = writeln!(out, "{name}_count{braces} {}", histogram.count);
}

/// Renders the sum of `snapshots`.
pub fn render(snapshots: &[ShardSnapshot], process: &ProcessInfo) -> String {
    let mut sum = Counters::default();
    for snapshot in snapshots {
        sum.add(&snapshot.counters);
    }
    let mut out = String::with_capacity(16 * 1024);

    family(
        &mut out,
        "modgate_build_info",
        "gauge",
        "Version of the running modgate.",
    );
    let _ = writeln!(
        out,
        "modgate_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    family(
        &mut out,
        "modgate_shards",
        "gauge",
        "Shards (one per core) the server runs.",
    );
    let _ = writeln!(out, "modgate_shards {}", process.shards);
    family(
        &mut out,
        "modgate_shards_answering",
        "gauge",
        "Shards whose counts are in this scrape.",
    );
    let _ = writeln!(out, "modgate_shards_answering {}", process.answering);
    family(
        &mut out,
        "modgate_ready",
        "gauge",
        "1 when GET /health answers 200.",
    );
    let _ = writeln!(out, "modgate_ready {}", u8::from(process.ready));
    if let Some((revision, stale_s)) = process.control_plane {
        family(
            &mut out,
            "modgate_control_plane_revision",
            "gauge",
            "The fleet's control-plane revision this node has applied.",
        );
        let _ = writeln!(out, "modgate_control_plane_revision {revision}");
        family(
            &mut out,
            "modgate_control_plane_staleness_seconds",
            "gauge",
            "Seconds since PostgreSQL last answered this node's follower.",
        );
        let _ = writeln!(out, "modgate_control_plane_staleness_seconds {stale_s:.3}");
    }
    if let Some(budgets) = process.budgets {
        family(
            &mut out,
            "modgate_budget_engine_up",
            "gauge",
            "1 while Redis/Valkey answers; 0: each node serves on its share of the rate and concurrency limits (or refuses, for plans with engine_down = \"closed\").",
        );
        let _ = writeln!(
            out,
            "modgate_budget_engine_up {}",
            u8::from(budgets.engine_up)
        );
        family(
            &mut out,
            "modgate_budget_engine_round_trips_total",
            "counter",
            "Round trips (one pipeline each) to Redis/Valkey for rate and concurrency budgets.",
        );
        let _ = writeln!(
            out,
            "modgate_budget_engine_round_trips_total {}",
            budgets.round_trips
        );
        family(
            &mut out,
            "modgate_budget_fallback_takes_total",
            "counter",
            "Leases answered from this node's share of a limit while Redis/Valkey was down.",
        );
        let _ = writeln!(
            out,
            "modgate_budget_fallback_takes_total {}",
            budgets.fallback_takes
        );
    }
    if let Some(quota) = process.quota_ledger {
        family(
            &mut out,
            "modgate_quota_ledger_up",
            "gauge",
            "1 while the quota ledger (PostgreSQL) answers; 0: the node grants from its share of what was left (or refuses, for plans with engine_down = \"closed\").",
        );
        let _ = writeln!(out, "modgate_quota_ledger_up {}", u8::from(quota.ledger_up));
        family(
            &mut out,
            "modgate_quota_ledger_round_trips_total",
            "counter",
            "Requests (one transaction each) to the quota ledger.",
        );
        let _ = writeln!(
            out,
            "modgate_quota_ledger_round_trips_total {}",
            quota.round_trips
        );
        family(
            &mut out,
            "modgate_quota_fallback_units_total",
            "counter",
            "Quota units granted from this node's share while the ledger could not be reached.",
        );
        let _ = writeln!(
            out,
            "modgate_quota_fallback_units_total {}",
            quota.fallback_units
        );
    }

    family(
        &mut out,
        "modgate_requests_total",
        "counter",
        "Answers by route and HTTP status (route \"none\": no route was reached).",
    );
    for (route, statuses) in sum.requests.iter().enumerate() {
        for (status, &count) in statuses.iter().enumerate() {
            if count > 0 {
                let _ = writeln!(
                    out,
                    "modgate_requests_total{{route=\"{}\",status=\"{}\"}} {count}",
                    route_label(route),
                    status_label(status)
                );
            }
        }
    }

    family(
        &mut out,
        "modgate_errors_total",
        "counter",
        "Error answers by route and error.type (429s: rate_limited, too_many_concurrent, quota_exceeded; 503s: busy, workflow_unavailable).",
    );
    for (route, kinds) in sum.errors.iter().enumerate() {
        // Kinds that share a wire type (404, 405, 414, 431 are all bad_request) are summed.
        let mut by_type: Vec<(&str, u64)> = Vec::new();
        for (slot, &count) in kinds.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let wire = ErrorKind::ALL[slot].wire_type();
            match by_type.iter_mut().find(|(t, _)| *t == wire) {
                Some((_, total)) => *total += count,
                None => by_type.push((wire, count)),
            }
        }
        for (wire, count) in by_type {
            let _ = writeln!(
                out,
                "modgate_errors_total{{route=\"{}\",type=\"{wire}\"}} {count}",
                route_label(route)
            );
        }
    }

    family(
        &mut out,
        "modgate_request_duration_seconds",
        "histogram",
        "Server time per answer by route, from the end of the request head to the answer.",
    );
    for route in 0..ROUTE_SLOTS {
        let h = &sum.request_seconds[route];
        if h.count > 0 {
            let labels = format!("route=\"{}\"", route_label(route));
            histogram(
                &mut out,
                "modgate_request_duration_seconds",
                &labels,
                h,
                &LATENCY_BOUNDS_US,
                Unit::Micros,
            );
        }
    }

    family(
        &mut out,
        "modgate_checks_total",
        "counter",
        "Checks that ran, by kind (text, image), workflow and action.",
    );
    for (workflow, kind, actions) in &sum.checks {
        for (action, &count) in ACTIONS.iter().zip(actions) {
            if count > 0 {
                let _ = writeln!(
                    out,
                    "modgate_checks_total{{kind=\"{}\",workflow=\"{}\",action=\"{action}\"}} {count}",
                    kind.as_str(),
                    escaped(workflow)
                );
            }
        }
    }

    family(
        &mut out,
        "modgate_image_decode_duration_seconds",
        "histogram",
        "Time to decode an image, by format.",
    );
    for (format, h) in Format::ALL.iter().zip(&sum.decode_seconds) {
        if h.count > 0 {
            let labels = format!("format=\"{}\"", format.label());
            histogram(
                &mut out,
                "modgate_image_decode_duration_seconds",
                &labels,
                h,
                &LATENCY_BOUNDS_US,
                Unit::Micros,
            );
        }
    }
    family(
        &mut out,
        "modgate_image_resize_duration_seconds",
        "histogram",
        "Time to make one model's input from a decoded image, by model.",
    );
    for (model, h) in &sum.resize_seconds {
        if h.count > 0 {
            let labels = format!("model=\"{model}\"");
            histogram(
                &mut out,
                "modgate_image_resize_duration_seconds",
                &labels,
                h,
                &LATENCY_BOUNDS_US,
                Unit::Micros,
            );
        }
    }
    family(
        &mut out,
        "modgate_model_duration_seconds",
        "histogram",
        "Model run time per check, by model (a batch's run time is shared among its checks).",
    );
    for (model, h) in &sum.model_seconds {
        if h.count > 0 {
            let labels = format!("model=\"{model}\"");
            histogram(
                &mut out,
                "modgate_model_duration_seconds",
                &labels,
                h,
                &LATENCY_BOUNDS_US,
                Unit::Micros,
            );
        }
    }

    for (name, help, value) in [
        (
            "modgate_open_connections",
            "Open client connections, by shard.",
            (|g: &super::Gauges| g.open_connections) as fn(&super::Gauges) -> usize,
        ),
        (
            "modgate_uploads_in_progress",
            "Compatible-form uploads being received, by shard.",
            |g| g.uploads_in_progress,
        ),
        (
            "modgate_model_queue_depth",
            "Model jobs waiting or running on the shard's model worker, by shard.",
            |g| g.model_queue_depth,
        ),
        (
            "modgate_journal_unshipped_records",
            "Journal records committed and not yet in the fleet's table, by shard (0 on one node).",
            |g| g.journal_unshipped,
        ),
    ] {
        family(&mut out, name, "gauge", help);
        for snapshot in snapshots {
            let _ = writeln!(
                out,
                "{name}{{shard=\"{}\"}} {}",
                snapshot.shard,
                value(&snapshot.gauges)
            );
        }
    }
    family(
        &mut out,
        "modgate_image_results_reused_total",
        "counter",
        "Image checks answered from the result of an earlier check of the same bytes (inference.image_results_kept).",
    );
    let _ = writeln!(
        out,
        "modgate_image_results_reused_total {}",
        sum.image_results_reused
    );
    family(
        &mut out,
        "modgate_toxblock_windows_reused_total",
        "counter",
        "tox-block windows scored from the result of an earlier check of the same words, without a model run (inference.toxblock_windows_kept).",
    );
    let _ = writeln!(
        out,
        "modgate_toxblock_windows_reused_total {}",
        sum.toxblock_windows_reused
    );
    family(
        &mut out,
        "modgate_connections_refused_total",
        "counter",
        "Connections answered 503 busy and closed at accept (connections_per_shard_max).",
    );
    let _ = writeln!(
        out,
        "modgate_connections_refused_total {}",
        sum.connections_refused
    );
    family(
        &mut out,
        "modgate_panics_total",
        "counter",
        "Panics caught while serving a connection: each closed that connection (500 when an answer could still be sent) and the shard went on serving.",
    );
    let _ = writeln!(out, "modgate_panics_total {}", sum.panics);

    family(
        &mut out,
        "modgate_journal_commits_total",
        "counter",
        "Journal commits by outcome (a commit carries every record that waited for it).",
    );
    let _ = writeln!(
        out,
        "modgate_journal_commits_total{{outcome=\"ok\"}} {}",
        sum.journal_commits
    );
    let _ = writeln!(
        out,
        "modgate_journal_commits_total{{outcome=\"failed\"}} {}",
        sum.journal_commit_failures
    );
    family(
        &mut out,
        "modgate_journal_pruned_records_total",
        "counter",
        "Journal records deleted on this node once shipped to the fleet's table and older than cluster.local_journal_keep_minutes.",
    );
    let _ = writeln!(
        out,
        "modgate_journal_pruned_records_total {}",
        sum.journal_pruned
    );
    family(
        &mut out,
        "modgate_journal_commit_records",
        "histogram",
        "Records per journal commit.",
    );
    histogram(
        &mut out,
        "modgate_journal_commit_records",
        "",
        &sum.journal_commit_records,
        &BATCH_BOUNDS,
        Unit::Count,
    );
    family(
        &mut out,
        "modgate_journal_commit_duration_seconds",
        "histogram",
        "Time of a journal commit (with its fsync under journal.sync = \"always\").",
    );
    histogram(
        &mut out,
        "modgate_journal_commit_duration_seconds",
        "",
        &sum.journal_commit_seconds,
        &STORAGE_BOUNDS_US,
        Unit::Micros,
    );
    family(
        &mut out,
        "modgate_journal_fsync_duration_seconds",
        "histogram",
        "Time of a periodic journal fsync (journal.sync = \"interval\").",
    );
    histogram(
        &mut out,
        "modgate_journal_fsync_duration_seconds",
        "",
        &sum.journal_fsync_seconds,
        &STORAGE_BOUNDS_US,
        Unit::Micros,
    );

    family(
        &mut out,
        "modgate_download_bytes_total",
        "counter",
        "Bytes of images downloaded for url checks.",
    );
    let _ = writeln!(out, "modgate_download_bytes_total {}", sum.download_bytes);
    family(
        &mut out,
        "modgate_downloads_total",
        "counter",
        "Downloads for url checks that delivered an image.",
    );
    let _ = writeln!(out, "modgate_downloads_total {}", sum.downloads_ok);
    family(
        &mut out,
        "modgate_download_refusals_total",
        "counter",
        "Downloads for url checks refused (400 url_refused), by reason.",
    );
    for (reason, &count) in Refusal::ALL.iter().zip(&sum.download_refusals) {
        let _ = writeln!(
            out,
            "modgate_download_refusals_total{{reason=\"{}\"}} {count}",
            reason.label()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Gauges, Metrics};

    #[test]
    fn microseconds_are_written_as_exact_seconds() {
        assert_eq!(Unit::Micros.write(0), "0");
        assert_eq!(Unit::Micros.write(500), "0.0005");
        assert_eq!(Unit::Micros.write(2_462), "0.002462");
        assert_eq!(Unit::Micros.write(2_500_000), "2.5");
        assert_eq!(Unit::Micros.write(10_000_000), "10");
        assert_eq!(Unit::Count.write(512), "512");
    }

    #[test]
    fn a_render_has_help_type_and_consistent_histograms() {
        let metrics = Metrics::new(true);
        metrics.request(Some(Route::Text), 200, None, 1200);
        metrics.request(None, 404, Some(ErrorKind::NotFound), 10);
        metrics.check("we\"ird\\name", crate::content::ContentKind::Text, "review");
        metrics.journal_commit(3, 80, true);
        let snapshot = ShardSnapshot {
            shard: 0,
            counters: metrics.counters(),
            gauges: Gauges {
                open_connections: 2,
                ..Gauges::default()
            },
        };
        let text = render(
            &[snapshot],
            &ProcessInfo {
                shards: 1,
                answering: 1,
                ready: true,
                control_plane: None,
                budgets: None,
                quota_ledger: None,
            },
        );
        assert!(text.contains("modgate_requests_total{route=\"/v1/text\",status=\"200\"} 1\n"));
        assert!(text.contains("modgate_errors_total{route=\"none\",type=\"bad_request\"} 1\n"));
        assert!(text.contains(
            "modgate_request_duration_seconds_bucket{route=\"/v1/text\",le=\"0.0025\"} 1\n"
        ));
        assert!(text.contains("modgate_request_duration_seconds_sum{route=\"/v1/text\"} 0.0012\n"));
        assert!(text.contains("workflow=\"we\\\"ird\\\\name\""));
        assert!(text.contains("modgate_open_connections{shard=\"0\"} 2\n"));
        assert!(text.contains("modgate_journal_commit_records_bucket{le=\"4\"} 1\n"));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            let base = name
                .trim_end_matches("_bucket")
                .trim_end_matches("_sum")
                .trim_end_matches("_count");
            assert!(
                text.contains(&format!("# TYPE {base} "))
                    || text.contains(&format!("# TYPE {name} ")),
                "{line}"
            );
        }
    }
}
