//! `modgate eval`: runs a workflow's text checks over a file of texts, offline, and reports
//! how it would decide: the counts of each action, how often each category reaches its
//! thresholds, and the distribution of each category's scores. This is how the shipped
//! thresholds were chosen (`models/THRESHOLDS.md`), and how an operator checks them against
//! their own traffic before deploying.
//!
//! It runs the server's own code: the same [`Engine`], the same model worker, the same
//! decision rule; only the HTTP layer is left out.

use std::collections::BTreeMap;
use std::io::{BufRead, Write as _};
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context};

use crate::checks::{Engine, TextModels};
use crate::decision::{decide, Action};
use crate::inference::{self, Worker, WorkerConfig};
use crate::workflow::WorkflowDef;

pub struct EvalOptions<'a> {
    /// JSON lines with a `text` field (and `context` if `with_context`).
    pub texts: &'a Path,
    pub workflow_name: &'a str,
    pub workflow: WorkflowDef,
    pub models_dir: &'a Path,
    pub library: &'a Path,
    pub with_context: bool,
    /// Stop after this many texts (0: all).
    pub limit: usize,
    /// Write one JSON line per text (its index, action and reasons) here.
    pub decisions: Option<&'a Path>,
}

#[derive(Default)]
struct Tally {
    texts: usize,
    actions: [usize; 3],
    /// Per category: texts at or over review, at or over reject, and all scores.
    categories: BTreeMap<&'static str, (usize, usize, Vec<f64>)>,
}

pub fn run(options: EvalOptions<'_>) -> anyhow::Result<()> {
    let (text_models, problem) = TextModels::load(options.models_dir).map_err(|e| anyhow!(e))?;
    let needs_model = options.workflow.text_checks.iter().any(|c| c == "toxblock");
    if let (true, Some(problem)) = (needs_model, problem) {
        anyhow::bail!(problem);
    }
    let worker_models = if needs_model {
        let preflight = inference::preflight(options.models_dir, options.library, true)
            .map_err(|e| anyhow!(e))?;
        preflight.models
    } else {
        None
    };
    let text_models = Arc::new(text_models);
    let file = std::fs::File::open(options.texts)
        .with_context(|| format!("opening {}", options.texts.display()))?;
    let mut lines = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        if !line.trim().is_empty() {
            lines.push(line);
        }
        if options.limit > 0 && lines.len() >= options.limit {
            break;
        }
    }
    let workflow = options.workflow.clone();
    let with_context = options.with_context;
    let mut decisions_out = match options.decisions {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    let tally = glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let worker = match worker_models {
                Some(models) => {
                    let config = WorkerConfig {
                        queue_depth_max: 4,
                        batch_rows_max: 64,
                    };
                    let (worker, ready) =
                        Worker::spawn(0, None, models, config).map_err(|e| e.to_string())?;
                    ready
                        .await
                        .map_err(|_| "the model worker stopped".to_owned())??;
                    Some(worker)
                }
                None => None,
            };
            let engine = Engine {
                toxblock_ready: worker.is_some() && text_models.tox_tokenizer.is_some(),
                image_models: Default::default(),
                text: text_models,
                worker,
                normalizer: Default::default(),
            };
            let mut tally = Tally::default();
            for line in lines {
                let mut bytes = line.into_bytes();
                if crate::api::text::nesting_exceeds(&bytes, crate::api::text::JSON_DEPTH_MAX) {
                    return Err("a line nests its JSON too deep".to_owned());
                }
                let value: simd_json::OwnedValue = simd_json::to_owned_value(&mut bytes)
                    .map_err(|e| format!("a line is not JSON: {e}"))?;
                use simd_json::prelude::*;
                let text = value
                    .get("text")
                    .and_then(|t| t.as_str())
                    .ok_or("a line has no `text`")?;
                let context = if with_context {
                    value.get("context").and_then(|c| c.as_str())
                } else {
                    None
                };
                let board = engine
                    .check_text(&workflow.text_checks, text, context)
                    .await
                    .map_err(|e| e.to_string())?;
                let decision = decide(&workflow, &board);
                if let Some(out) = decisions_out.as_mut() {
                    let reasons: Vec<String> = decision
                        .reject_reason
                        .iter()
                        .chain(&decision.review_reason)
                        .map(|r| format!("\"{}\"", r.id))
                        .collect();
                    writeln!(
                        out,
                        "{{\"line\":{},\"action\":\"{}\",\"reasons\":[{}]}}",
                        tally.texts,
                        decision.action.as_str(),
                        reasons.join(",")
                    )
                    .map_err(|e| e.to_string())?;
                }
                tally.texts += 1;
                tally.actions[decision.action as usize] += 1;
                for (category, score) in &decision.scores {
                    let thresholds = &workflow.categories[*category];
                    let entry = tally.categories.entry(category).or_default();
                    entry.0 += usize::from(*score >= thresholds.review);
                    entry.1 += usize::from(*score >= thresholds.reject);
                    entry.2.push(*score);
                }
            }
            Ok::<Tally, String>(tally)
        })
        .map_err(|e| anyhow!("starting the executor: {e}"))?
        .join()
        .map_err(|e| anyhow!("the executor failed: {e}"))?
        .map_err(|e| anyhow!(e))?;
    report(&options, tally);
    Ok(())
}

fn report(options: &EvalOptions<'_>, mut tally: Tally) {
    let mut out = std::io::stdout().lock();
    let n = tally.texts.max(1) as f64;
    let percent = |count: usize| 100.0 * count as f64 / n;
    let _ = writeln!(
        out,
        "workflow {} on {} texts of {}",
        options.workflow_name,
        tally.texts,
        options.texts.display()
    );
    for (action, count) in [Action::Accept, Action::Review, Action::Reject]
        .iter()
        .zip(tally.actions)
    {
        let _ = writeln!(
            out,
            "  {:<7} {count:>6} ({:.2} %)",
            action.as_str(),
            percent(count)
        );
    }
    let _ = writeln!(
        out,
        "\n  {:<14} {:>14} {:>14} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "category", ">= review", ">= reject", "p50", "p90", "p99", "p99.9", "max"
    );
    for (category, (review, reject, scores)) in &mut tally.categories {
        scores.sort_by(f64::total_cmp);
        let at = |q: f64| {
            scores
                .get(((scores.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        let _ = writeln!(
            out,
            "  {category:<14} {review:>6} {:>6.2}% {reject:>6} {:>6.2}% {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>9.4}",
            percent(*review),
            percent(*reject),
            at(0.5),
            at(0.9),
            at(0.99),
            at(0.999),
            at(1.0)
        );
    }
}
