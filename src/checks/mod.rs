//! Checks: the tools (`source`s) that score categories of a text or an image in [0, 1].
//!
//! [`CHECKS`] lists every check of this build, the kind of content it reads and the
//! categories it scores; workflows name checks by these names, and an import that names
//! another, or a category none of its checks scores, is refused.
//!
//! Text checks, in the order a workflow lists them:
//! - [`wordlist`]: cuss word list on the normalised text (microseconds);
//! - [`profanity_svm`]: alt-profanity-check's linear model, natively (microseconds);
//! - [`pii`]: e-mail, phone, IBAN, card and IP scanners (microseconds);
//! - [`toxblock`]: tox-block BiLSTM on the shard's model worker (milliseconds).
//!
//! The fast checks run on the shard itself; the model run is awaited without blocking it.

pub mod categories;
pub mod nsfw;
pub mod pii;
pub mod profanity_svm;
pub mod toxblock;
pub mod wordlist;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::decision::ScoreBoard;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::image::probe::Probe;
use crate::image::ImageError;
use crate::inference::{ImageModels, ImageScores, Worker};
use crate::metrics::{Metrics, Model};
use crate::text::normalize::Normalizer;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Text,
    Image,
}

/// A check of this build.
#[derive(Debug)]
pub struct CheckInfo {
    pub name: &'static str,
    pub kind: Kind,
    pub categories: &'static [&'static str],
}

pub const CHECKS: &[CheckInfo] = &[
    CheckInfo {
        name: wordlist::SOURCE,
        kind: Kind::Text,
        categories: &[wordlist::CATEGORY],
    },
    CheckInfo {
        name: profanity_svm::SOURCE,
        kind: Kind::Text,
        categories: &[profanity_svm::CATEGORY],
    },
    CheckInfo {
        name: pii::SOURCE,
        kind: Kind::Text,
        categories: pii::CATEGORIES,
    },
    CheckInfo {
        name: toxblock::SOURCE,
        kind: Kind::Text,
        categories: &toxblock::LABELS,
    },
    CheckInfo {
        name: nsfw::OPEN_NSFW,
        kind: Kind::Image,
        categories: nsfw::OPEN_NSFW_CATEGORIES,
    },
    CheckInfo {
        name: nsfw::NSFWJS,
        kind: Kind::Image,
        categories: nsfw::NSFWJS_CATEGORIES,
    },
];

pub fn check_info(name: &str) -> Option<&'static CheckInfo> {
    CHECKS.iter().find(|check| check.name == name)
}

/// What the text checks read, loaded once and shared read-only by every shard.
pub struct TextModels {
    pub wordlist: wordlist::WordList,
    pub svm: profanity_svm::ProfanitySvm,
    /// Present when the tox-block tokenizer file loaded.
    pub tox_tokenizer: Option<toxblock::ToxTokenizer>,
}

impl TextModels {
    /// The embedded word list and linear model, and the tox-block tokenizer from
    /// `models_dir` if it is there and intact.
    pub fn load(models_dir: &std::path::Path) -> Result<(TextModels, Option<String>), String> {
        let wordlist = wordlist::WordList::embedded()?;
        let svm = profanity_svm::ProfanitySvm::embedded()?;
        let tokenizer_spec = crate::inference::ModelSpec {
            name: "toxblock tokenizer",
            file: toxblock::TOKENIZER_FILE,
            sha256: toxblock::TOKENIZER_SHA256,
        };
        let (tox_tokenizer, problem) =
            match crate::inference::verify_model(models_dir, &tokenizer_spec)
                .and_then(|path| {
                    std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
                })
                .and_then(|json| toxblock::ToxTokenizer::from_json(&json))
            {
                Ok(tokenizer) => (Some(tokenizer), None),
                Err(error) => (None, Some(error)),
            };
        Ok((
            TextModels {
                wordlist,
                svm,
                tox_tokenizer,
            },
            problem,
        ))
    }
}

/// A shard's checks: the shared text models and its own model worker.
pub struct Engine {
    pub text: Arc<TextModels>,
    pub worker: Option<Worker>,
    /// tox-block can run here (tokenizer and session both loaded).
    pub toxblock_ready: bool,
    /// The image models loaded on this shard's worker.
    pub image_models: ImageModels,
    /// The shard's normalisation scratch buffers.
    pub normalizer: RefCell<Normalizer>,
    /// The shard's metrics (model run times).
    pub metrics: Rc<Metrics>,
}

impl Engine {
    /// Runs the text checks of a workflow. `context` is `None` unless the plan uses it.
    pub async fn check_text(
        &self,
        checks: &[String],
        text: &str,
        context: Option<&str>,
    ) -> ApiResult<ScoreBoard> {
        let mut board = ScoreBoard::default();
        let mut normalised = String::new();
        let mut disguised = false;
        if checks
            .iter()
            .any(|c| c == wordlist::SOURCE || c == profanity_svm::SOURCE)
        {
            disguised = self
                .normalizer
                .borrow_mut()
                .normalize(text, &mut normalised);
        }
        let mut ran = false;
        for check in checks {
            match check.as_str() {
                wordlist::SOURCE => {
                    board.add(
                        wordlist::CATEGORY,
                        self.text.wordlist.score(&normalised),
                        wordlist::SOURCE,
                    );
                    ran = true;
                }
                profanity_svm::SOURCE => {
                    // The raw text is what the model was trained on; the normalised text
                    // catches spellings meant to slip past it (`f.u.c.k`, `sh1t`), and is
                    // worth a second pass only when normalising changed a word.
                    let mut score = self.text.svm.score(text);
                    if disguised {
                        score = score.max(self.text.svm.score(&normalised));
                    }
                    board.add(profanity_svm::CATEGORY, score, profanity_svm::SOURCE);
                    ran = true;
                }
                pii::SOURCE => {
                    for (category, score) in pii::scan(text).by_category() {
                        board.add(category, score, pii::SOURCE);
                    }
                    ran = true;
                }
                toxblock::SOURCE => {
                    if self.run_toxblock(text, context, &mut board).await? {
                        ran = true;
                    } else {
                        board.unavailable(&toxblock::LABELS);
                    }
                }
                _ => {} // image checks of the same workflow
            }
        }
        if !ran {
            return Err(ApiError::new(
                ErrorKind::WorkflowUnavailable,
                "none of this workflow's text checks can run on this server",
            )
            .with_retry_after(60));
        }
        Ok(board)
    }

    /// Runs the image checks of a workflow on the shard's model worker. The caller's buffer
    /// comes back (for reuse) with the scores, whatever the outcome.
    pub async fn check_image(
        &self,
        checks: &[String],
        bytes: Vec<u8>,
        probe: Probe,
    ) -> (Vec<u8>, ApiResult<(ScoreBoard, ImageScores)>) {
        let mut board = ScoreBoard::default();
        let wanted = ImageModels {
            open_nsfw: checks.iter().any(|c| c == nsfw::OPEN_NSFW),
            nsfwjs: checks.iter().any(|c| c == nsfw::NSFWJS),
        };
        let runnable = ImageModels {
            open_nsfw: wanted.open_nsfw && self.image_models.open_nsfw,
            nsfwjs: wanted.nsfwjs && self.image_models.nsfwjs,
        };
        if wanted.open_nsfw && !runnable.open_nsfw {
            board.unavailable(nsfw::OPEN_NSFW_CATEGORIES);
        }
        if wanted.nsfwjs && !runnable.nsfwjs {
            board.unavailable(nsfw::NSFWJS_CATEGORIES);
        }
        let worker = match (&self.worker, runnable.open_nsfw || runnable.nsfwjs) {
            (Some(worker), true) => worker,
            _ => {
                let error = ApiError::new(
                    ErrorKind::WorkflowUnavailable,
                    "none of this workflow's image checks can run on this server",
                )
                .with_retry_after(60);
                return (bytes, Err(error));
            }
        };
        let outcome = match worker.image(bytes, probe, runnable).await {
            Ok(outcome) => outcome,
            Err(error) => return (Vec::new(), Err(error)),
        };
        let result = match outcome.scores {
            Ok(scores) => {
                nsfw::add_scores(&scores, &mut board);
                Ok((board, scores))
            }
            Err(error) => Err(image_error(error)),
        };
        (outcome.bytes, result)
    }

    /// Scores with tox-block; `false` if it is not available here.
    async fn run_toxblock(
        &self,
        text: &str,
        context: Option<&str>,
        board: &mut ScoreBoard,
    ) -> ApiResult<bool> {
        let (Some(worker), Some(tokenizer), true) =
            (&self.worker, &self.text.tox_tokenizer, self.toxblock_ready)
        else {
            return Ok(false);
        };
        let mut text_ids = Vec::new();
        tokenizer.ids(text, &mut text_ids);
        let mut context_ids = Vec::new();
        if let Some(context) = context {
            tokenizer.ids(context, &mut context_ids);
        }
        let windows = toxblock::windows(&text_ids, &context_ids);
        let (raw, run_us) = worker.toxblock(windows).await?;
        self.metrics.model_run(Model::Toxblock, run_us);
        let mut best = [0.0f32; 6];
        for window in &raw {
            let scaled = toxblock::rescale(window);
            for i in 0..6 {
                best[i] = best[i].max(scaled[i]);
            }
        }
        for (i, label) in toxblock::LABELS.iter().enumerate() {
            board.add(label, f64::from(best[i]), toxblock::SOURCE);
        }
        Ok(true)
    }
}

/// The answer for an image that cannot be used.
pub fn image_error(error: ImageError) -> ApiError {
    match error {
        ImageError::Unsupported => ApiError::new(
            ErrorKind::UnsupportedMedia,
            "not a JPEG, PNG, WebP or GIF image (the format is read from the bytes)",
        ),
        ImageError::Corrupt(why) => ApiError::new(
            ErrorKind::CorruptMedia,
            format!("the image does not decode: {why}"),
        ),
    }
}

#[cfg(test)]
pub(crate) mod test_reference {
    //! The committed reference set of the text models (`models/text/reference.jsonl`).

    pub fn reference_rows() -> Vec<serde_json::Value> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/models/text/reference.jsonl");
        std::fs::read_to_string(path)
            .expect("models/text/reference.jsonl")
            .lines()
            .map(|line| serde_json::from_str(line).expect("JSON line"))
            .collect()
    }
}
