//! The report of a run: throughput, answers by status and error type, latency percentiles per
//! request and overall; as a table for the terminal, as JSON, and as an SVG with latency over
//! time and the percentile curve.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::generator::{Load, RunResult};
use crate::prepare::Prepared;
use crate::stats::Tick;

/// Latency percentiles of one set of answers, microseconds.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub mean_us: f64,
}

impl Percentiles {
    fn of(histogram: &Histogram<u64>) -> Percentiles {
        let at = |q| {
            if histogram.is_empty() {
                0
            } else {
                histogram.value_at_quantile(q)
            }
        };
        Percentiles {
            count: histogram.len(),
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: if histogram.is_empty() {
                0
            } else {
                histogram.max()
            },
            mean_us: if histogram.is_empty() {
                0.0
            } else {
                histogram.mean()
            },
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct RequestReport {
    pub name: String,
    pub kind: String,
    pub route: String,
    pub expected_status: u16,
    pub latency: Percentiles,
    pub statuses: BTreeMap<u16, u64>,
    pub error_types: BTreeMap<String, u64>,
    pub unexpected: u64,
    pub transport_errors: u64,
}

/// A route's answers while they are added up.
struct RouteTally {
    latency: Histogram<u64>,
    statuses: BTreeMap<u16, u64>,
    errors: u64,
}

/// The answers of one route, whichever requests of the scenario went there.
#[derive(Clone, Debug, Serialize)]
pub struct RouteReport {
    pub route: String,
    pub latency: Percentiles,
    pub statuses: BTreeMap<u16, u64>,
    /// Unexpected answers and requests without one.
    pub errors: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub scenario: String,
    /// "open" or "closed".
    pub mode: String,
    /// Open loop: the arrival rate asked for, requests per second.
    pub rate: Option<f64>,
    /// Closed loop: connections.
    pub connections: Option<usize>,
    pub duration_s: f64,
    pub sent: u64,
    pub completed: u64,
    pub throughput_per_s: f64,
    pub dropped: u64,
    pub unfinished: u64,
    pub errors: u64,
    pub connections_opened: u64,
    pub latency: Percentiles,
    /// The server's CPU time over the measured window divided by the answers in it,
    /// microseconds (with `--server-pid`).
    pub server_cpu_us_per_answer: Option<f64>,
    pub requests: Vec<RequestReport>,
    /// Latency and answers per route (the requests of a route merged).
    pub routes: Vec<RouteReport>,
    /// Answers by route and status: what the server's journal should hold for check routes.
    pub by_route_status: BTreeMap<String, BTreeMap<u16, u64>>,
    pub statuses: BTreeMap<u16, u64>,
    pub error_types: BTreeMap<String, u64>,
    pub timeline: Vec<Tick>,
    /// (percentile, latency in microseconds), for the percentile curve.
    pub percentile_curve: Vec<(f64, u64)>,
    /// Closed loop hides queueing delays in its latencies.
    pub coordinated_omission: bool,
}

/// The percentiles the curve is drawn through: 0 to 99.999 %, denser towards the tail.
pub fn curve_points() -> Vec<f64> {
    let mut points = vec![0.0, 10.0, 25.0, 50.0, 75.0, 90.0];
    for nines in 2..=5 {
        let base = 100.0 - 10f64.powi(2 - nines);
        points.push(base);
        points.push(100.0 - 10f64.powi(2 - nines) / 2.0);
    }
    points.sort_by(f64::total_cmp);
    points.dedup();
    points
}

impl Report {
    pub fn new(scenario: &str, load: Load, result: &RunResult, requests: &[Prepared]) -> Report {
        let stats = &result.stats;
        let mut by_route_status: BTreeMap<String, BTreeMap<u16, u64>> = BTreeMap::new();
        let mut statuses = BTreeMap::new();
        let mut error_types = BTreeMap::new();
        let mut reports = Vec::new();
        let mut routes: BTreeMap<&str, RouteTally> = BTreeMap::new();
        for (request, kind) in requests.iter().zip(&stats.kinds) {
            let route = routes.entry(request.route).or_insert_with(|| RouteTally {
                latency: crate::stats::histogram(),
                statuses: BTreeMap::new(),
                errors: 0,
            });
            // Same bounds on both sides: adding cannot fail.
            let _ = route.latency.add(&kind.latency);
            for (&status, &count) in &kind.statuses {
                *route.statuses.entry(status).or_default() += count;
            }
            route.errors += kind.unexpected + kind.transport_errors;
            for (&status, &count) in &kind.statuses {
                *by_route_status
                    .entry(request.route.to_owned())
                    .or_default()
                    .entry(status)
                    .or_default() += count;
                *statuses.entry(status).or_default() += count;
            }
            for (error_type, &count) in &kind.error_types {
                *error_types.entry(error_type.clone()).or_default() += count;
            }
            reports.push(RequestReport {
                name: request.name.clone(),
                kind: format!("{:?}", request.kind),
                route: request.route.to_owned(),
                expected_status: request.kind.expected_status(),
                latency: Percentiles::of(&kind.latency),
                statuses: kind.statuses.clone(),
                error_types: kind.error_types.clone(),
                unexpected: kind.unexpected,
                transport_errors: kind.transport_errors,
            });
        }
        let (mode, rate, connections) = match load {
            Load::Open { rate, .. } => ("open", Some(rate), None),
            Load::Closed { connections } => ("closed", None, Some(connections)),
        };
        let window_s = result.window.as_secs_f64().max(1e-9);
        Report {
            scenario: scenario.to_owned(),
            mode: mode.to_owned(),
            rate,
            connections,
            duration_s: result.window.as_secs_f64(),
            sent: stats.sent,
            completed: stats.completed,
            throughput_per_s: stats.completed as f64 / window_s,
            dropped: stats.dropped,
            unfinished: stats.unfinished,
            errors: stats.errors(),
            connections_opened: result.connections_opened,
            latency: Percentiles::of(&stats.all),
            server_cpu_us_per_answer: result
                .server_cpu_us
                .filter(|_| stats.completed > 0)
                .map(|us| us as f64 / stats.completed as f64),
            requests: reports,
            routes: routes
                .into_iter()
                .map(|(route, tally)| RouteReport {
                    route: route.to_owned(),
                    latency: Percentiles::of(&tally.latency),
                    statuses: tally.statuses,
                    errors: tally.errors,
                })
                .collect(),
            by_route_status,
            statuses,
            error_types,
            timeline: stats.timeline.clone(),
            percentile_curve: curve_points()
                .into_iter()
                .map(|p| {
                    let value = if stats.all.is_empty() {
                        0
                    } else {
                        stats.all.value_at_quantile(p / 100.0)
                    };
                    (p, value)
                })
                .collect(),
            coordinated_omission: matches!(load, Load::Closed { .. }),
        }
    }

    /// The terminal table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let load = match (self.rate, self.connections) {
            (Some(rate), _) => format!("open loop at {rate:.1}/s"),
            (_, Some(n)) => format!("closed loop, {n} connections (latency hides queueing)"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "scenario {}: {load} for {:.0} s",
            self.scenario, self.duration_s
        );
        let _ = writeln!(
            out,
            "sent {}  completed {}  throughput {:.1}/s  errors {}  dropped {}  unfinished {}  connections opened {}",
            self.sent,
            self.completed,
            self.throughput_per_s,
            self.errors,
            self.dropped,
            self.unfinished,
            self.connections_opened
        );
        if let Some(us) = self.server_cpu_us_per_answer {
            let _ = writeln!(out, "server CPU   {us:.1} µs per answer");
        }
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(s, n)| format!("{s}: {n}"))
            .collect();
        let _ = writeln!(out, "answers      {}", statuses.join("  "));
        if !self.error_types.is_empty() {
            let types: Vec<String> = self
                .error_types
                .iter()
                .map(|(t, n)| format!("{t}: {n}"))
                .collect();
            let _ = writeln!(out, "error types  {}", types.join("  "));
        }
        let width = self
            .requests
            .iter()
            .map(|r| r.name.len())
            .chain(self.routes.iter().map(|r| r.route.len()))
            .max()
            .unwrap_or(0)
            .max(8);
        let _ = writeln!(
            out,
            "\n{:<width$} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}",
            "request", "answers", "p50", "p90", "p99", "p99.9", "max", "errors"
        );
        let row = |out: &mut String, name: &str, p: &Percentiles, errors: u64| {
            let _ = writeln!(
                out,
                "{name:<width$} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {errors:>7}",
                p.count,
                ms(p.p50_us),
                ms(p.p90_us),
                ms(p.p99_us),
                ms(p.p999_us),
                ms(p.max_us)
            );
        };
        row(&mut out, "all", &self.latency, self.errors);
        for request in &self.requests {
            row(
                &mut out,
                &request.name,
                &request.latency,
                request.unexpected + request.transport_errors,
            );
        }
        let _ = writeln!(
            out,
            "\n{:<width$} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}",
            "route", "answers", "p50", "p90", "p99", "p99.9", "max", "errors"
        );
        for route in &self.routes {
            row(&mut out, &route.route, &route.latency, route.errors);
        }
        out
    }

    /// Latency over time (p50, p99, max per second) above the percentile curve.
    pub fn svg(&self) -> String {
        const WIDTH: f64 = 900.0;
        const PANEL: f64 = 260.0;
        const LEFT: f64 = 70.0;
        const RIGHT: f64 = 20.0;
        const HEIGHT: f64 = 680.0;
        let plot_width = WIDTH - LEFT - RIGHT;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">"
        );
        let _ = writeln!(out, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
        let _ = writeln!(
            out,
            "<text x=\"{LEFT}\" y=\"20\" font-size=\"14\">{}: {:.1} answers/s, p99 {} (latency from when each request was due)</text>",
            escape(&self.scenario),
            self.throughput_per_s,
            ms(self.latency.p99_us)
        );

        // Panel 1: latency over time.
        let top = 40.0;
        let seconds = self.timeline.len().max(1) as f64;
        let y_max = self
            .timeline
            .iter()
            .map(|t| t.max_us.max(t.p99_us))
            .max()
            .unwrap_or(1)
            .max(1) as f64
            * 1.1;
        axes(
            &mut out,
            LEFT,
            top,
            plot_width,
            PANEL,
            "latency over time (s)",
            y_max,
        );
        for (label, colour, value) in [
            ("max", "#bbbbbb", (|t: &Tick| t.max_us) as fn(&Tick) -> u64),
            ("p99", "#d62728", |t| t.p99_us),
            ("p50", "#1f77b4", |t| t.p50_us),
        ] {
            let points: Vec<String> = self
                .timeline
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let x = LEFT + (i as f64 + 0.5) / seconds * plot_width;
                    let y = top + PANEL - value(t) as f64 / y_max * PANEL;
                    format!("{x:.1},{y:.1}")
                })
                .collect();
            let _ = writeln!(
                out,
                "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"><title>{label}</title></polyline>",
                points.join(" ")
            );
        }
        // Second ticks: about ten along the axis.
        let every = (seconds / 10.0).ceil().max(1.0) as usize;
        for second in (0..=self.timeline.len()).step_by(every) {
            let x = LEFT + second as f64 / seconds * plot_width;
            let _ = writeln!(
                out,
                "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#333333\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{second}</text>",
                top + PANEL,
                top + PANEL + 4.0,
                top + PANEL + 16.0
            );
        }
        legend(
            &mut out,
            LEFT + plot_width - 150.0,
            top + 12.0,
            &[("p50", "#1f77b4"), ("p99", "#d62728"), ("max", "#bbbbbb")],
        );

        // Panel 2: the percentile curve, x = log10(1 / (1 - p)).
        let top = 370.0;
        let x_of = |p: f64| (1.0 / (1.0 - p / 100.0)).log10().min(5.0) / 5.0 * plot_width + LEFT;
        let y_max = self
            .percentile_curve
            .iter()
            .map(|&(_, v)| v)
            .max()
            .unwrap_or(1)
            .max(1) as f64
            * 1.1;
        axes(&mut out, LEFT, top, plot_width, PANEL, "percentile", y_max);
        for (p, label) in [
            (0.0, "0"),
            (90.0, "90"),
            (99.0, "99"),
            (99.9, "99.9"),
            (99.99, "99.99"),
            (99.999, "99.999"),
        ] {
            let x = x_of(p);
            let _ = writeln!(
                out,
                "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#eeeeee\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
                top + PANEL,
                top + PANEL + 14.0
            );
        }
        let points: Vec<String> = self
            .percentile_curve
            .iter()
            .map(|&(p, v)| {
                format!(
                    "{:.1},{:.1}",
                    x_of(p),
                    top + PANEL - v as f64 / y_max * PANEL
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"#2ca02c\" stroke-width=\"2\" points=\"{}\"/>",
            points.join(" ")
        );
        out.push_str("</svg>\n");
        out
    }
}

fn axes(
    out: &mut String,
    left: f64,
    top: f64,
    width: f64,
    height: f64,
    x_label: &str,
    y_max_us: f64,
) {
    let _ = writeln!(
        out,
        "<rect x=\"{left}\" y=\"{top}\" width=\"{width}\" height=\"{height}\" fill=\"none\" stroke=\"#333333\"/>"
    );
    for step in 0..=4 {
        let value = y_max_us * f64::from(step) / 4.0;
        let y = top + height - height * f64::from(step) / 4.0;
        let _ = writeln!(
            out,
            "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#eeeeee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + width,
            left - 6.0,
            y + 4.0,
            ms(value as u64)
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{x_label}</text>",
        left + width / 2.0,
        top + height + 30.0
    );
}

fn legend(out: &mut String, x: f64, y: f64, entries: &[(&str, &str)]) {
    for (i, (label, colour)) in entries.iter().enumerate() {
        let x = x + i as f64 * 50.0;
        let _ = writeln!(
            out,
            "<rect x=\"{x}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{colour}\"/><text x=\"{}\" y=\"{y}\">{label}</text>",
            y - 9.0,
            x + 14.0
        );
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Microseconds as milliseconds with a unit, for people.
pub fn ms(us: u64) -> String {
    if us >= 10_000 {
        format!("{:.0} ms", us as f64 / 1000.0)
    } else {
        format!("{:.2} ms", us as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::Arrivals;
    use crate::scenario::Kind;
    use crate::stats::Stats;
    use std::time::Duration;

    #[test]
    fn a_report_adds_up_and_renders() {
        let requests = vec![
            Prepared {
                name: "text".into(),
                kind: Kind::Text,
                weight: 1,
                route: "/v1/text",
                bytes: Default::default(),
                stamps: Vec::new(),
            },
            Prepared {
                name: "bad-key".into(),
                kind: Kind::BadKey,
                weight: 1,
                route: "/v1/text",
                bytes: Default::default(),
                stamps: Vec::new(),
            },
        ];
        let mut stats = Stats::new(2);
        for i in 0..100 {
            stats.sent();
            stats.answered(0, 200, 200, None, 1000 + i * 10);
        }
        stats.sent();
        stats.answered(1, 401, 401, Some("unauthorized".into()), 500);
        stats.tick(1);
        let result = RunResult {
            stats,
            window: Duration::from_secs(1),
            connections_opened: 2,
            server_cpu_us: Some(5050),
        };
        let report = Report::new(
            "t",
            Load::Open {
                rate: 101.0,
                arrivals: Arrivals::Uniform,
            },
            &result,
            &requests,
        );
        assert_eq!(report.by_route_status["/v1/text"][&200], 100);
        assert_eq!(report.by_route_status["/v1/text"][&401], 1);
        assert_eq!(report.routes.len(), 1);
        assert_eq!(report.routes[0].latency.count, 101);
        assert_eq!(report.routes[0].latency.max_us, report.latency.max_us);
        assert_eq!(report.server_cpu_us_per_answer, Some(50.0));
        assert_eq!(report.errors, 0);
        assert_eq!(report.latency.count, 101);
        assert!(report.latency.p50_us >= 1000 && report.latency.p99_us <= 2000);
        let table = report.table();
        assert!(table.contains("answers      200: 100  401: 1"), "{table}");
        assert!(table.contains("error types  unauthorized: 1"));
        assert!(table.contains("server CPU   50.0 µs per answer"), "{table}");
        assert!(table.contains("\nroute "), "{table}");
        let svg = report.svg();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 4);
        let json = serde_json::to_string(&report).unwrap();
        assert!(json.contains("\"throughput_per_s\":101.0"));
        let curve = curve_points();
        assert!(curve.windows(2).all(|w| w[0] < w[1]) && *curve.last().unwrap() < 100.0);
    }
}
