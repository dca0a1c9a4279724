//! `modgate feedback import`, `modgate calibrate` and `modgate replay` ([`crate::judgement`]):
//! on this node's journal and store, while the server runs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};

use super::store_args::{now_ms, parse_rfc3339_ms, resolve, StoreArgs};
use crate::journal::query::Filter;
use crate::judgement::{self, calibrate, labels, replay};
use crate::store::feedback::Given;
use crate::store::Store;
use crate::workflow::{self, WorkflowDef};

#[derive(Subcommand)]
pub(super) enum FeedbackCommand {
    /// Import feedback from a review tool: a CSV of request_id,label,value rows (label: a
    /// category, with true or false; or `action`, with accept, review or reject).
    Import {
        file: PathBuf,
        /// The organization whose checks the rows are about (rows of other checks are refused).
        #[arg(long, value_name = "NAME")]
        org: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// What `calibrate` and `replay` read.
#[derive(Args)]
pub(super) struct JudgedChecks {
    /// The workflow whose checks to read.
    #[arg(long)]
    workflow: String,
    /// Only checks of this organization.
    #[arg(long, value_name = "NAME")]
    org: Option<String>,
    /// Checks at or after this time (RFC 3339).
    #[arg(long, value_name = "RFC3339")]
    since: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also write the report as one self-contained HTML page (plots inline, nothing fetched).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Args)]
pub(super) struct CalibrateArgs {
    #[command(flatten)]
    checks: JudgedChecks,
    /// The precision the suggested review thresholds reach.
    #[arg(long, default_value_t = 0.8)]
    precision: f64,
    /// The precision the suggested reject thresholds reach.
    #[arg(long, default_value_t = 0.95)]
    reject_precision: f64,
    /// Write the workflow with the suggested thresholds to FILE (for `workflow import`, or
    /// `replay --thresholds`).
    #[arg(long, value_name = "FILE")]
    write: Option<PathBuf>,
}

#[derive(Args)]
pub(super) struct ReplayArgs {
    #[command(flatten)]
    checks: JudgedChecks,
    /// A workflow file (as `workflow import` reads) holding the workflow with the thresholds
    /// to replay.
    #[arg(long, value_name = "FILE")]
    thresholds: PathBuf,
}

pub(super) fn feedback(command: FeedbackCommand) -> anyhow::Result<()> {
    let FeedbackCommand::Import { file, org, store } = command;
    let (dir, config) = resolve(&store)?;
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let parsed = labels::parse(&text).map_err(|error| anyhow!("{}: {error}", file.display()))?;
    if parsed.is_empty() {
        bail!("{}: no rows", file.display());
    }
    // The checks named, found in the journal: the time span of their ids, then by id.
    let ids: BTreeSet<&str> = parsed.keys().map(String::as_str).collect();
    let times: Vec<i64> = ids
        .iter()
        .filter_map(|id| crate::request_id::unix_ms_of(id))
        .collect();
    let filter = Filter {
        org: Some(org.clone()),
        since_ms: times.iter().min().copied(),
        until_ms: times.iter().max().map(|ms| ms + 1),
        ..Filter::default()
    };
    let mut found = BTreeSet::new();
    crate::journal::query::for_each(&dir, config.journal.map_bytes, &filter, |record| {
        if ids.contains(record.request_id.as_ref()) && record.action.is_some() {
            found.insert(record.request_id.to_string());
        }
        Ok(())
    })?;
    let missing: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| !found.contains(*id))
        .collect();
    if let Some(first) = missing.first() {
        bail!(
            "{} of the {} request ids are not checks of '{org}' in this node's journal (the first: {first}); nothing imported",
            missing.len(),
            ids.len()
        );
    }
    let store = Store::open(&dir)?;
    let now_ms = now_ms();
    let given: Vec<Given> = parsed
        .into_iter()
        .map(|(request_id, feedback)| Given {
            request_id,
            org: org.clone(),
            feedback,
            given_by: "import".to_owned(),
            now_ms,
        })
        .collect();
    let count = given.len();
    let new = store.import_feedback(given)?;
    say!("feedback on {count} checks imported ({new} had none)");
    Ok(())
}

/// The workflow in force, by name, from the store.
fn workflow_in_force(store: &Store, name: &str) -> anyhow::Result<(u64, WorkflowDef)> {
    let record = store
        .workflows()?
        .into_iter()
        .find(|record| record.name == name)
        .ok_or_else(|| anyhow!("no workflow '{name}' in the store"))?;
    Ok((record.version, record.definition))
}

/// What calibrate and replay read: the data directory, its journal's map size, the store, and
/// the workflow in force (its version and definition).
struct Judged {
    dir: PathBuf,
    map_bytes: usize,
    store: Store,
    version: u64,
    workflow: WorkflowDef,
}

fn open_judged(checks: &JudgedChecks) -> anyhow::Result<Judged> {
    let (dir, config) = resolve(&checks.store)?;
    let store = Store::open(&dir)?;
    let (version, workflow) = workflow_in_force(&store, &checks.workflow)?;
    Ok(Judged {
        dir,
        map_bytes: config.journal.map_bytes,
        store,
        version,
        workflow,
    })
}

fn filter_of(checks: &JudgedChecks) -> anyhow::Result<Filter> {
    Ok(Filter {
        org: checks.org.clone(),
        since_ms: checks.since.as_deref().map(parse_rfc3339_ms).transpose()?,
        ..Filter::default()
    })
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = simd_json::to_string_pretty(value).map_err(|e| anyhow!("{e}"))?;
    say!("{text}");
    Ok(())
}

pub(super) fn calibrate(args: CalibrateArgs) -> anyhow::Result<()> {
    let asked = calibrate::Asked {
        precision: args.precision,
        reject_precision: args.reject_precision,
    };
    for precision in [asked.precision, asked.reject_precision] {
        if !(precision > 0.0 && precision <= 1.0) {
            bail!("a precision is over 0 and at most 1, not {precision}");
        }
    }
    let checks = &args.checks;
    let Judged {
        dir,
        map_bytes,
        store,
        version,
        workflow,
    } = open_judged(checks)?;
    let feedback = store.feedback_all(checks.org.as_deref())?;
    let mut read = calibrate::Read::default();
    let mut labelled: BTreeMap<String, calibrate::Labelled> = BTreeMap::new();
    judgement::each_decided(
        &dir,
        map_bytes,
        &checks.workflow,
        &filter_of(checks)?,
        |decided| {
            read.checks += 1;
            let Some(given) = feedback.get(&decided.request_id) else {
                return;
            };
            read.with_feedback += 1;
            for (category, score) in decided.scores {
                if let Some(label) = judgement::label_of(given, &category) {
                    labelled.entry(category).or_default().push(score, label);
                }
            }
        },
    )?;
    let report = calibrate::report(&checks.workflow, version, &workflow, labelled, read, asked);
    if let Some(path) = &args.write {
        let suggested = report.suggested(&workflow);
        let file = BTreeMap::from([(
            "workflows",
            BTreeMap::from([(checks.workflow.as_str(), &suggested)]),
        )]);
        let text = format!(
            "# The workflow {} with the thresholds `modgate calibrate` suggested (review at precision {}, reject at {}).\n{}",
            checks.workflow,
            asked.precision,
            asked.reject_precision,
            toml::to_string(&file)?
        );
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    write_html(checks, || crate::judgement::html::calibration(&report))?;
    if checks.json {
        print_json(&report)
    } else {
        say!("{}", report.render_text().trim_end());
        Ok(())
    }
}

fn write_html(checks: &JudgedChecks, page: impl FnOnce() -> String) -> anyhow::Result<()> {
    if let Some(path) = &checks.html {
        std::fs::write(path, page()).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

pub(super) fn replay(args: ReplayArgs) -> anyhow::Result<()> {
    let checks = &args.checks;
    // Opened first: the configuration's own models are checks the file may name.
    let Judged {
        dir,
        map_bytes,
        store,
        version: current_version,
        workflow: current,
    } = open_judged(checks)?;
    let text = std::fs::read_to_string(&args.thresholds)
        .with_context(|| format!("reading {}", args.thresholds.display()))?;
    let mut defs = workflow::parse_workflows(&text)
        .map_err(|error| anyhow!("{}: {error}", args.thresholds.display()))?;
    let candidate = defs.remove(&checks.workflow).ok_or_else(|| {
        anyhow!(
            "{} has no workflow '{}'",
            args.thresholds.display(),
            checks.workflow
        )
    })?;
    // The thresholds of each version checks were decided under (the one in force when a
    // version is no longer kept).
    let mut versions: BTreeMap<u64, WorkflowDef> = BTreeMap::from([(current_version, current)]);
    let mut runner = replay::Replay::new(&checks.workflow, &candidate);
    let mut failed = None;
    judgement::each_decided(
        &dir,
        map_bytes,
        &checks.workflow,
        &filter_of(checks)?,
        |decided| {
            if !versions.contains_key(&decided.version) {
                match store.workflow_version(&checks.workflow, decided.version) {
                    Ok(Some(record)) => {
                        versions.insert(decided.version, record.definition);
                    }
                    Ok(None) => {
                        let current = versions[&current_version].clone();
                        versions.insert(decided.version, current);
                    }
                    Err(error) => {
                        failed.get_or_insert(error);
                        return;
                    }
                }
            }
            runner.add(
                &decided.request_id,
                &decided.action,
                &decided.scores,
                &versions[&decided.version],
            );
        },
    )?;
    if let Some(error) = failed {
        return Err(error.context("reading the workflow's versions"));
    }
    let report = runner.finish();
    write_html(checks, || crate::judgement::html::replay(&report))?;
    if checks.json {
        print_json(&report)
    } else {
        say!("{}", report.render_text().trim_end());
        Ok(())
    }
}
