//! The operations kit under `ops/`: the alerting rules pass `promtool check rules` and their own
//! unit tests (`promtool test rules`), the dashboard is Grafana JSON on one Prometheus data
//! source, and every metric the dashboard and the rules name is one a live server exports on
//! `/metrics` (the fleet's on a fleet node).

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use common::engines::{Postgres, Redis};
use common::fleet::*;
use common::prometheus::Exposition;
use common::*;
use serde_json::Value;

const OPS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/ops");
const RULES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/ops/prometheus/modgate-rules.yml"
);
const RULE_TESTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/ops/prometheus/modgate-rules.test.yml"
);
const DASHBOARD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/ops/grafana/modgate.json");

/// Every family modgate exports starts with this.
const PREFIX: &str = "modgate_";

/// Families only a node of a fleet exports (`[cluster]`, with `redis_url` for the budgets).
const FLEET_ONLY: [&str; 8] = [
    "modgate_control_plane_revision",
    "modgate_control_plane_staleness_seconds",
    "modgate_budget_engine_up",
    "modgate_budget_engine_round_trips_total",
    "modgate_budget_fallback_takes_total",
    "modgate_quota_ledger_up",
    "modgate_quota_ledger_round_trips_total",
    "modgate_quota_fallback_units_total",
];

/// Runs `promtool ARGS` in `ops/`; its stdout and stderr together.
fn promtool(args: &[&str]) -> String {
    let output = match Command::new("promtool")
        .args(args)
        .current_dir(OPS)
        .output()
    {
        Ok(output) => output,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => panic!(
            "promtool is not installed: `make engines` installs it (Debian's prometheus package)"
        ),
        Err(error) => panic!("promtool: {error}"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// Adds to `names` the metric names in a PromQL expression: identifiers
/// (`[a-zA-Z_:][a-zA-Z0-9_:]*`) that start with [`PREFIX`], outside quoted strings. A run of
/// identifier characters that starts with a digit (`5m`, `0.99`) is a number or a duration.
fn metric_names(expr: &str, names: &mut BTreeSet<String>) {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    // A space at the end closes the last word.
    for c in expr.chars().chain(std::iter::once(' ')) {
        if let Some(open) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == open {
                quote = None;
            }
            continue;
        }
        if is_word(c) {
            word.push(c);
            continue;
        }
        let starts_as_name = word
            .chars()
            .next()
            .is_some_and(|first| !first.is_ascii_digit());
        if starts_as_name && word.starts_with(PREFIX) {
            names.insert(word.clone());
        }
        word.clear();
        if matches!(c, '"' | '\'' | '`') {
            quote = Some(c);
        }
    }
}

/// Every string under an `expr` key of the dashboard, and the query of each template variable.
fn dashboard_queries(value: &Value, queries: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            for (key, value) in object {
                match (key.as_str(), value) {
                    ("expr" | "definition", Value::String(query)) => queries.push(query.clone()),
                    _ => dashboard_queries(value, queries),
                }
            }
        }
        Value::Array(values) => {
            for value in values {
                dashboard_queries(value, queries);
            }
        }
        _ => {}
    }
}

/// The values of the `key:` lines of a YAML file, a line scan: an inline value (quotes
/// stripped), or a block scalar (`key: |` or `key: >`) made of the lines indented deeper than
/// the key.
fn yaml_values(yaml: &str, key: &str) -> Vec<String> {
    let lines: Vec<&str> = yaml.lines().collect();
    let prefix = format!("{key}:");
    let mut values = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        at += 1;
        let trimmed = line.trim_start();
        let entry = trimmed.strip_prefix("- ").unwrap_or(trimmed);
        let Some(value) = entry.strip_prefix(&prefix) else {
            continue;
        };
        let value = value.trim();
        if value.starts_with('|') || value.starts_with('>') {
            let indent = line.len() - trimmed.len();
            let mut block = String::new();
            while at < lines.len() {
                let next = lines[at];
                let next_indent = next.len() - next.trim_start().len();
                if !next.trim().is_empty() && next_indent <= indent {
                    break;
                }
                block.push_str(next.trim());
                block.push('\n');
                at += 1;
            }
            values.push(block);
        } else {
            let unquoted = value
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .or_else(|| value.strip_prefix('"').and_then(|v| v.strip_suffix('"')))
                .unwrap_or(value);
            values.push(unquoted.to_owned());
        }
    }
    values
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD))
        .unwrap_or_else(|error| panic!("{DASHBOARD} is not JSON: {error}"))
}

/// The metric names the dashboard's queries, the rules' expressions and the rules' unit tests'
/// input series use, each with where it was found.
fn names_in_the_kit() -> Vec<(String, &'static str)> {
    let mut found = Vec::new();
    let mut queries = Vec::new();
    dashboard_queries(&dashboard(), &mut queries);
    assert!(
        queries.len() >= 30,
        "only {} dashboard queries",
        queries.len()
    );
    let rules = yaml_values(&read(RULES), "expr");
    assert!(rules.len() >= 10, "only {} rule expressions", rules.len());
    let series = yaml_values(&read(RULE_TESTS), "series");
    assert!(!series.is_empty(), "no input series in {RULE_TESTS}");
    for (source, exprs) in [
        ("ops/grafana/modgate.json", queries),
        ("ops/prometheus/modgate-rules.yml", rules),
        ("ops/prometheus/modgate-rules.test.yml", series),
    ] {
        let mut names = BTreeSet::new();
        for expr in &exprs {
            metric_names(expr, &mut names);
        }
        assert!(!names.is_empty(), "no metric names in {source}");
        found.extend(names.into_iter().map(|name| (name, source)));
    }
    found
}

/// Whether `name` is a family of `exposition` (it has `# TYPE`; labelled series appear once
/// non-zero), or the `_bucket`, `_sum` or `_count` series of a histogram family.
fn exported(exposition: &Exposition, name: &str) -> bool {
    exposition.types.contains_key(name)
        || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
            name.strip_suffix(suffix).is_some_and(|family| {
                exposition.types.get(family).map(String::as_str) == Some("histogram")
            })
        })
}

/// The names of the kit (but those in `except`) that `exposition` does not export.
fn missing(exposition: &Exposition, except: &[&str]) -> Vec<String> {
    names_in_the_kit()
        .into_iter()
        .filter(|(name, _)| !except.contains(&name.as_str()) && !exported(exposition, name))
        .map(|(name, source)| format!("{name} (in {source})"))
        .collect()
}

#[test]
fn the_names_of_a_query_are_found_outside_its_strings() {
    let mut names = BTreeSet::new();
    metric_names(
        "histogram_quantile(0.99, sum by (le) (rate(modgate_a_bucket{route!=\"modgate_no\\\"pe\",x='modgate_nor'}[$__rate_interval]))) / on(instance) modgate:b + modgate_c_total[5m:1m] > 2.5",
        &mut names,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["modgate_a_bucket", "modgate_c_total"]
    );
    let yaml = "rules:\n  - alert: A\n    expr: |\n      modgate_x > 1\n        and modgate_y\n    for: 5m\n  - alert: B\n    expr: 'modgate_z == 0'\n";
    assert_eq!(
        yaml_values(yaml, "expr"),
        ["modgate_x > 1\nand modgate_y\n", "modgate_z == 0"]
    );
}

#[test]
fn the_alerting_rules_pass_promtool_check_and_their_unit_tests() {
    let checked = promtool(&["check", "rules", RULES]);
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = promtool(&["test", "rules", RULE_TESTS]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// Grafana's import needs no edit: the data source is a variable, every panel and query uses it.
#[test]
fn the_dashboard_is_grafana_json_on_a_prometheus_datasource_variable() {
    let dashboard = dashboard();
    assert_eq!(dashboard["uid"], "modgate");
    assert_eq!(dashboard["schemaVersion"], 39);
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "no Prometheus datasource variable: {variables:?}"
    );
    let panels = dashboard["panels"].as_array().unwrap();
    let mut ids = BTreeSet::new();
    for panel in panels {
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "id twice: {panel}"
        );
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{}",
            panel["title"]
        );
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "no query: {}", panel["title"]);
        for target in targets {
            assert_eq!(
                target["datasource"]["uid"], "${datasource}",
                "{}",
                panel["title"]
            );
            assert!(target["expr"].as_str().is_some_and(|e| !e.is_empty()));
        }
    }
}

/// A server on its defaults exports every name of the kit but the fleet's.
#[test]
fn every_metric_the_kit_names_is_exported_by_a_server() {
    let server = Server::start();
    let key = server.demo_key.clone().unwrap();
    let (status, _, _) = post(
        &server.url("/v1/text"),
        &[("X-Api-Key", &key), ("Content-Type", "application/json")],
        br#"{"text":"hello there"}"#,
    );
    assert_eq!(status, 200);
    let exposition = server.scrape();
    assert!(exposition
        .value(
            "modgate_requests_total",
            &[("route", "/v1/text"), ("status", "200")]
        )
        .is_some_and(|count| count >= 1.0));
    let absent = missing(&exposition, &FLEET_ONLY);
    assert!(absent.is_empty(), "not exported by a server: {absent:#?}");
    // The fleet's families are left to the fleet's test because a single node has none.
    for name in FLEET_ONLY {
        assert!(!exported(&exposition, name), "{name} on a single node");
    }
}

/// A node of a fleet with Redis exports every name of the kit, the fleet's included.
#[test]
fn every_metric_the_kit_names_is_exported_by_a_fleet_node() {
    let postgres = Postgres::start();
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    migrated(&postgres, dir.path(), ROOMY_PLANS);
    let node = Server::start_with(Options {
        cores: Some(1),
        config: format!(
            "{}redis_url = \"{}\"\n{ROOMY_PLANS}",
            cluster_config(&postgres, "node-a"),
            redis.url()
        ),
        ..Options::default()
    });
    let exposition = node.scrape();
    let absent = missing(&exposition, &[]);
    assert!(
        absent.is_empty(),
        "not exported by a fleet node: {absent:#?}"
    );
}
