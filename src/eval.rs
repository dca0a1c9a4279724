//! `modgate eval`: runs a workflow's checks over a file of texts or a directory of images,
//! offline, and reports how it would decide: the counts of each action, how often each
//! category reaches its thresholds, and the distribution of each category's scores. This is
//! how the shipped thresholds were chosen (`models/THRESHOLDS.md`), and how an operator checks
//! them against their own traffic before deploying.
//!
//! It runs the server's own code: the same [`Engine`], the same model worker, the same
//! decision rule; only the HTTP layer is left out.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{BufRead, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context};

use crate::checks::registry;
use crate::checks::toxblock::KeptWindows;
use crate::checks::{Engine, TextModels};
use crate::decision::{decide, Action, Decision};
use crate::image::probe::probe;
use crate::inference::repeats::Repeats;
use crate::inference::share::{CoreSharing, Pace};
use crate::inference::{self, Worker};
use crate::workflow::WorkflowDef;

/// What to evaluate.
pub enum Input<'a> {
    /// JSON lines with a `text` field (and `context`, used with `with_context`).
    Texts(&'a Path),
    /// Every file of a directory (not recursive), as images.
    Images(&'a Path),
}

pub struct EvalOptions<'a> {
    pub input: Input<'a>,
    pub workflow_name: &'a str,
    pub workflow: WorkflowDef,
    pub models_dir: &'a Path,
    pub library: &'a Path,
    pub with_context: bool,
    /// Stop after this many items (0: all).
    pub limit: usize,
    /// Write one JSON line per item (its index or file, action and reasons) here.
    pub decisions: Option<&'a Path>,
}

enum Item {
    Text {
        text: String,
        context: Option<String>,
    },
    Image {
        name: String,
        bytes: Vec<u8>,
    },
}

#[derive(Default)]
struct Tally {
    items: usize,
    actions: [usize; 3],
    /// Items refused before any check (an image that does not decode, over the limits).
    refused: usize,
    /// Per category: items at or over review, at or over reject, and all scores.
    categories: BTreeMap<&'static str, (usize, usize, Vec<f64>)>,
}

impl Tally {
    fn add(&mut self, workflow: &WorkflowDef, decision: &Decision) {
        self.items += 1;
        self.actions[decision.action as usize] += 1;
        for (category, score) in &decision.scores {
            let thresholds = &workflow.categories[*category];
            let entry = self.categories.entry(category).or_default();
            entry.0 += usize::from(*score >= thresholds.review);
            entry.1 += usize::from(*score >= thresholds.reject);
            entry.2.push(*score);
        }
    }
}

fn load_items(input: &Input<'_>, with_context: bool, limit: usize) -> anyhow::Result<Vec<Item>> {
    let mut items = Vec::new();
    let full = |items: &Vec<Item>| limit > 0 && items.len() >= limit;
    match input {
        Input::Texts(path) => {
            let file =
                std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
            for line in std::io::BufReader::new(file).lines() {
                let line = line?;
                if line.trim().is_empty() {
                    continue;
                }
                let mut bytes = line.into_bytes();
                if crate::api::text::nesting_exceeds(&bytes, crate::api::text::JSON_DEPTH_MAX) {
                    anyhow::bail!("a line nests its JSON too deep");
                }
                let value: simd_json::OwnedValue = simd_json::to_owned_value(&mut bytes)
                    .map_err(|e| anyhow!("a line is not JSON: {e}"))?;
                use simd_json::prelude::*;
                let text = value
                    .get("text")
                    .and_then(|t| t.as_str())
                    .ok_or_else(|| anyhow!("a line has no `text`"))?;
                let context = with_context
                    .then(|| {
                        value
                            .get("context")
                            .and_then(|c| c.as_str())
                            .map(str::to_owned)
                    })
                    .flatten();
                items.push(Item::Text {
                    text: text.to_owned(),
                    context,
                });
                if full(&items) {
                    break;
                }
            }
        }
        Input::Images(dir) => {
            let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
                .with_context(|| format!("reading {}", dir.display()))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|path| path.is_file())
                .collect();
            paths.sort();
            for path in paths {
                let bytes =
                    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                items.push(Item::Image { name, bytes });
                if full(&items) {
                    break;
                }
            }
        }
    }
    Ok(items)
}

pub fn run(options: EvalOptions<'_>) -> anyhow::Result<()> {
    let (text_models, problems) = TextModels::load(options.models_dir).map_err(|e| anyhow!(e))?;
    let images = matches!(options.input, Input::Images(_));
    let needs_worker = images || registry::any_on_worker(&options.workflow.text_checks);
    if let (false, true) = (images, needs_worker) {
        if let Some(problem) = problems.tokenizer.or(problems.harm) {
            anyhow::bail!(problem);
        }
    }
    let worker_models = if needs_worker {
        inference::preflight(
            options.models_dir,
            options.library,
            &registry::models(),
            &registry::image_models(),
            true,
        )
        .map_err(|e| anyhow!(e))?
        .models
    } else {
        None
    };
    let text_models = Arc::new(text_models);
    let items = load_items(&options.input, options.with_context, options.limit)?;
    let workflow = options.workflow.clone();
    let mut decisions_out = match options.decisions {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    let tally = glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let image_slots_loaded = crate::checks::image_slots_loaded(worker_models.as_ref());
            let measures_ready = crate::checks::measures_ready(worker_models.as_ref());
            let worker = match worker_models {
                Some(models) => {
                    let config = registry::worker_config(4, 64, CoreSharing::Weights, 0.0, 0);
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
                harm_ready: worker.is_some() && text_models.harm.is_some(),
                image_slots_loaded,
                measures_ready,
                text: text_models,
                worker,
                normalizer: Default::default(),
                turns: Default::default(),
                pace: Pace::off(),
                // Every image and window through the models: the evaluation is of them.
                images_kept: RefCell::new(Repeats::new(0)),
                toxblock_kept: RefCell::new(KeptWindows::new(0)),
                metrics: crate::metrics::Metrics::new(false),
            };
            let mut tally = Tally::default();
            for (index, item) in items.into_iter().enumerate() {
                let (label, decision, board) = match item {
                    Item::Text { text, context } => {
                        let mut board = engine
                            .check_text(&workflow.text_checks, &[], &text, context.as_deref())
                            .await
                            .map_err(|e| e.to_string())?;
                        engine.add_language(&mut board, &text);
                        (index.to_string(), decide(&workflow, &board), board)
                    }
                    Item::Image { name, bytes } => {
                        let Ok(found) = probe(&bytes) else {
                            tally.refused += 1;
                            continue;
                        };
                        let (_, scored) = engine
                            .check_image(&workflow.image_checks, &[], bytes, found)
                            .await;
                        match scored {
                            Ok(board) => (name, decide(&workflow, &board), board),
                            Err(_) => {
                                tally.refused += 1;
                                continue;
                            }
                        }
                    }
                };
                if let Some(out) = decisions_out.as_mut() {
                    let line = decision_line(&label, &decision, &board);
                    writeln!(out, "{line}").map_err(|e| e.to_string())?;
                }
                tally.add(&workflow, &decision);
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

/// One item's line of `--decisions`: the item, the action, the reasons' categories, every
/// category's score, and what the measuring checks found that a threshold study needs (the
/// text's language and its confidence, the image's face count, the text read in the image)
/// when they were measured (a text's language always, the rest when the workflow names their
/// checks). The confidence lets two builds' languages be compared beyond the code.
#[derive(serde::Serialize)]
struct DecisionLine<'a> {
    item: &'a str,
    action: &'static str,
    reasons: Vec<&'static str>,
    scores: std::collections::BTreeMap<&'static str, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    language: Option<Option<&'static str>>,
    /// The found language's confidence, when one was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    language_confidence: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    face_count: Option<usize>,
    /// The image's lines of text, joined one a line.
    #[serde(skip_serializing_if = "Option::is_none")]
    image_text: Option<String>,
}

fn decision_line(
    label: &str,
    decision: &crate::decision::Decision,
    board: &crate::checks::board::ScoreBoard,
) -> String {
    let line = DecisionLine {
        item: label,
        action: decision.action.as_str(),
        reasons: decision
            .reject_reason
            .iter()
            .chain(&decision.review_reason)
            .map(|reason| reason.id)
            .collect(),
        scores: decision.scores.iter().copied().collect(),
        language: board
            .language
            .map(|language| language.map(|found| found.code)),
        language_confidence: board.language.flatten().map(|found| found.confidence),
        face_count: board.measured.faces.as_ref().map(Vec::len),
        image_text: crate::checks::ocr::joined(&board.measured),
    };
    // Plain strings, numbers and maps: serialising cannot fail.
    simd_json::to_string(&line).unwrap_or_default()
}

fn report(options: &EvalOptions<'_>, mut tally: Tally) {
    let mut out = std::io::stdout().lock();
    let n = tally.items.max(1) as f64;
    let percent = |count: usize| 100.0 * count as f64 / n;
    let source = match &options.input {
        Input::Texts(path) | Input::Images(path) => path.display().to_string(),
    };
    let _ = writeln!(
        out,
        "workflow {} on {} items of {source}",
        options.workflow_name, tally.items
    );
    if tally.refused > 0 {
        let _ = writeln!(
            out,
            "  ({} more refused before any check: not decodable or over the limits)",
            tally.refused
        );
    }
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
