//! Checks: the tools (`source`s) that score categories of a text or an image in [0, 1].
//!
//! [`registry`] lists every check of this build, the kind of content it reads, the categories
//! it scores and how it runs; workflows name checks by these names, and an import that names
//! another, or a category none of its checks scores, is refused. The [`Engine`] runs a
//! workflow's checks from the registry; it knows no check by name.
//!
//! Text checks:
//! - [`wordlist`]: cuss word list on the normalised text (microseconds);
//! - [`profanity_svm`]: alt-profanity-check's linear model, natively (microseconds);
//! - [`pii`]: e-mail, phone, IBAN, card and IP scanners (microseconds);
//! - [`links`]: URLs and host names (microseconds);
//! - `termlist` ([`registry::TERMLIST`]): the organization's own words and phrases
//!   ([`crate::lists`]), on the normalised text (microseconds);
//! - [`toxblock`]: tox-block BiLSTM on the shard's model worker (milliseconds);
//! - [`harm`]: a multilingual sentence encoder on the shard's model worker and one linear
//!   head per category on the shard (milliseconds).
//!
//! Image checks, on the shard's model worker after the image is decoded there:
//! - [`open_nsfw`]: Yahoo's open-NSFW;
//! - [`nsfwjs`]: nsfwjs's MobileNetV2, and [`nsfwjs_inception`] its InceptionV3 (stronger,
//!   about six times the cost; named by no shipped workflow);
//! - `properties` ([`registry::PROPERTIES`]) and [`qr`]: measured from the decoded pixels
//!   there, no model (the QR codes' payloads are then checked as text on the shard);
//! - [`faces`]: MTCNN's three networks there ([`crate::inference::faces`]);
//! - `hashlist` ([`registry::HASHLIST`]): the image's PDQ, MD5 and SHA-256 made there, matched
//!   on the shard against the organization's lists ([`crate::lists`]).
//!
//! The fast checks run on the shard itself, one request's at a time in order of asking
//! ([`turns`]); model runs are awaited without blocking it. The scores of one request gather
//! on a [`board::ScoreBoard`].

pub mod board;
pub mod categories;
pub mod custom;
pub mod faces;
pub mod harm;
pub mod links;
pub mod nsfwjs;
pub mod nsfwjs_inception;
pub mod ocr;
pub mod open_nsfw;
pub mod pii;
pub mod profanity_svm;
pub mod qr;
pub mod registry;
pub mod toxblock;
pub mod turns;
pub mod wordlist;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use board::ScoreBoard;
use registry::{Check, Runner, TextInput};
use toxblock::KeptWindows;

use crate::content::ContentKind;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::image::hashes::ImageHashes;
use crate::image::probe::Probe;
use crate::image::ImageError;
use crate::inference::repeats::{Key, Repeats};
use crate::inference::share::{Pace, CHECK_QUANTUM, REQUEST_QUANTUM};
use crate::inference::{Worker, WorkerModels};
use crate::lists::{CompiledList, ListKind, ListMatch};
use crate::metrics::Metrics;
use crate::text::normalize::Normalizer;

/// What the text checks read, loaded once and shared read-only by every shard.
pub struct TextModels {
    pub wordlist: wordlist::WordList,
    pub svm: profanity_svm::ProfanitySvm,
    /// Present when the tox-block tokenizer file loaded.
    pub tox_tokenizer: Option<toxblock::ToxTokenizer>,
    /// The language of every text; present when its profiles loaded.
    pub langid: Option<crate::text::langid::LangId>,
    /// The `harm` check's tokenizer and heads; present when the tokenizer file loaded.
    pub harm: Option<harm::HarmText>,
}

/// Files of [`TextModels`] that could not be loaded (their features are then left out).
#[derive(Debug, Default)]
pub struct TextProblems {
    /// tox-block's tokenizer: the `toxblock` check cannot run.
    pub tokenizer: Option<String>,
    /// The language profiles: answers carry no `language` unless the workflow names the
    /// `language` check.
    pub langid: Option<String>,
    /// The `harm` check's tokenizer: the check cannot run.
    pub harm: Option<String>,
}

impl TextModels {
    /// The embedded word list and linear model, and the tox-block tokenizer and the language
    /// profiles from `models_dir` if they are there and intact.
    pub fn load(models_dir: &std::path::Path) -> Result<(TextModels, TextProblems), String> {
        let wordlist = wordlist::WordList::embedded()?;
        let svm = profanity_svm::ProfanitySvm::embedded()?;
        let tokenizer_spec = crate::inference::ModelSpec {
            name: "toxblock tokenizer",
            file: toxblock::TOKENIZER_FILE,
            sha256: toxblock::TOKENIZER_SHA256,
        };
        let (tox_tokenizer, tokenizer_problem) =
            match crate::inference::verify_model(models_dir, &tokenizer_spec)
                .and_then(|path| {
                    std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
                })
                .and_then(|json| toxblock::ToxTokenizer::from_json(&json))
            {
                Ok(tokenizer) => (Some(tokenizer), None),
                Err(error) => (None, Some(error)),
            };
        let profiles_spec = crate::inference::ModelSpec {
            name: "language profiles",
            file: crate::text::langid::PROFILES_FILE,
            sha256: crate::text::langid::PROFILES_SHA256,
        };
        let (langid, langid_problem) =
            match crate::inference::verify_model(models_dir, &profiles_spec)
                .and_then(|path| {
                    std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))
                })
                .and_then(crate::text::langid::LangId::from_json)
            {
                Ok(langid) => (Some(langid), None),
                Err(error) => (None, Some(error)),
            };
        let (harm, harm_problem) = match harm::HarmText::load(models_dir) {
            Ok(harm) => (Some(harm), None),
            Err(error) => (None, Some(error)),
        };
        Ok((
            TextModels {
                wordlist,
                svm,
                tox_tokenizer,
                langid,
                harm,
            },
            TextProblems {
                tokenizer: tokenizer_problem,
                langid: langid_problem,
                harm: harm_problem,
            },
        ))
    }
}

/// The bytes of an upload hashed in one turn at the shard's CPU (about 0.1 ms).
const SHA256_SLICE_BYTES: usize = 256 << 10;

/// A shard's checks: the shared text models and its own model worker.
pub struct Engine {
    pub text: Arc<TextModels>,
    pub worker: Option<Worker>,
    /// tox-block can run here (tokenizer and session both loaded).
    pub toxblock_ready: bool,
    /// `harm` can run here (tokenizer, heads and the encoder's session loaded).
    pub harm_ready: bool,
    /// The image models loaded on this shard's worker, as a set of worker slots.
    pub image_slots_loaded: u64,
    /// The measurements this shard's worker can make ([`registry::measures_ready`]).
    pub measures_ready: crate::image::Measures,
    /// The shard's normalisation scratch buffers.
    pub normalizer: RefCell<Normalizer>,
    /// The shard's turns at checks that run on it ([`turns`]): a light request is served
    /// between two checks instead of behind every check that was ready.
    pub turns: turns::Turns,
    /// The shard's pacing of its checks while its model worker has jobs
    /// ([`crate::inference::share`]).
    pub pace: Pace,
    /// Image results of this shard's worker, kept for repeats of the same bytes
    /// ([`crate::inference::repeats`]).
    pub images_kept: RefCell<Repeats>,
    /// tox-block windows scored on this shard, kept for repeats of the same words.
    pub toxblock_kept: RefCell<KeptWindows>,
    /// The shard's metrics (model and image stage times).
    pub metrics: Rc<Metrics>,
}

/// The image models of `models` as a set of worker slots ([`registry::image_models`] order).
pub fn image_slots_loaded(models: Option<&WorkerModels>) -> u64 {
    let Some(models) = models else {
        return 0;
    };
    registry::image_models()
        .iter()
        .enumerate()
        .filter(|(_, spec)| models.path_of(&spec.model).is_some())
        .fold(0, |set, (slot, _)| set | 1 << slot)
}

/// The measurements a worker with `models` can make (none without a worker).
pub fn measures_ready(models: Option<&WorkerModels>) -> crate::image::Measures {
    match models {
        Some(models) => {
            let found: Vec<_> = models.found.iter().map(|(spec, _)| *spec).collect();
            registry::measures_ready(&found)
        }
        None => crate::image::Measures::NONE,
    }
}

/// Refuses a workflow that names a check this process does not have: one declared in another
/// node's configuration (`[[models.custom]]`), or by a configuration since changed. Its
/// categories are unknown here, so an answer without them would be a decision made up.
/// Text found in an image (a QR code's payload, the words written on it), scored by the rule
/// checks that need no model run: where its scores go (the link category and each check's
/// source), so that a reason tells text in an image from a caption.
pub struct FoundText {
    pub link_category: &'static str,
    pub links_source: &'static str,
    pub wordlist_source: &'static str,
    pub pii_source: &'static str,
}

impl FoundText {
    /// Every category scored 0: checked, and nothing found yet (the board keeps the best score
    /// per category, so the texts' scores replace these).
    pub fn zero(&self, board: &mut ScoreBoard) {
        board.add(self.link_category, 0.0, self.links_source);
        board.add(wordlist::CATEGORY, 0.0, self.wordlist_source);
        for category in pii::CATEGORIES {
            board.add(category, 0.0, self.pii_source);
        }
    }

    /// Scores `text` by the link check, the word list (on `normalised`, which this fills) and
    /// the PII scanners; whether normalising changed a word.
    pub fn score(
        &self,
        text: &str,
        models: &TextModels,
        board: &mut ScoreBoard,
        normalised: &mut String,
    ) -> bool {
        board.add(self.link_category, links::score(text), self.links_source);
        let disguised = crate::text::normalize::normalize(text, normalised);
        let profanity = models.wordlist.score(normalised);
        board.add(wordlist::CATEGORY, profanity, self.wordlist_source);
        for (category, score) in pii::scan(text).by_category() {
            board.add(category, score, self.pii_source);
        }
        disguised
    }
}

fn undeclared(checks: &[String]) -> ApiResult<()> {
    match checks.iter().find(|name| registry::find(name).is_none()) {
        None => Ok(()),
        Some(name) => Err(ApiError::new(
            ErrorKind::WorkflowUnavailable,
            format!("this workflow names the check '{name}', which this server does not have (a model of models.custom declared elsewhere?)"),
        )
        .with_retry_after(60)),
    }
}

/// The registered checks of `kind` among the names a workflow lists, in its order.
fn checks_of<'a>(
    names: &'a [String],
    kind: ContentKind,
) -> impl Iterator<Item = &'static Check> + 'a {
    names
        .iter()
        .filter_map(|name| registry::find(name))
        .filter(move |check| check.kind == kind)
}

impl Engine {
    /// Waits for the shard's turn at a check, then for the pause the shard owes its model
    /// worker, if any (held with the turn, so no other check runs meanwhile).
    async fn take_turn(&self) -> turns::Turn<'_> {
        let turn = self.turns.take().await;
        self.pace
            .pause_if_owed(|| self.worker_busy(), CHECK_QUANTUM)
            .await;
        turn
    }

    /// Before any request is handled: pauses if the shard owes its model worker more than
    /// checks would let it owe ([`crate::inference::share::REQUEST_QUANTUM`]), so that a
    /// flood of light requests cannot take the worker's share of the core either.
    pub async fn pace_request(&self) {
        self.pace
            .pause_if_owed(|| self.worker_busy(), REQUEST_QUANTUM)
            .await;
    }

    /// Whether the model worker has jobs it has not finished ([`Worker::busy`]).
    fn worker_busy(&self) -> bool {
        self.worker.as_ref().is_some_and(Worker::busy)
    }

    /// Runs the text checks of a workflow; `lists` are the caller's lists the workflow names,
    /// for the `termlist` check. `context` is `None` unless the plan uses it.
    pub async fn check_text(
        &self,
        checks: &[String],
        lists: &[Arc<CompiledList>],
        text: &str,
        context: Option<&str>,
    ) -> ApiResult<ScoreBoard> {
        undeclared(checks)?;
        // Held while this check uses the shard's CPU; given back while a model runs on the
        // worker.
        let mut turn = self.take_turn().await;
        let mut board = ScoreBoard::default();
        // Lent by the normalizer (a check waiting on the worker may hold it across an await,
        // so it is not a borrow of the cell) and given back at the end.
        let mut normalised = self.normalizer.borrow_mut().lend_output();
        let mut disguised = false;
        if checks_of(checks, ContentKind::Text).any(Check::reads_normalised) {
            disguised = self
                .normalizer
                .borrow_mut()
                .normalize(text, &mut normalised);
        }
        let terms = checks.iter().any(|name| name == registry::TERMLIST.name);
        if terms {
            // Hidden from the checks that read the normalised text (the word list, the
            // block lists); each allow list's first match goes on the board.
            blank_allowed_terms(lists, &mut normalised, |found| {
                board.list_matches.push(found)
            });
        }
        let input = TextInput {
            raw: text,
            normalised: &normalised,
            disguised,
        };
        let mut ran = false;
        for check in checks_of(checks, ContentKind::Text) {
            match &check.runner {
                Runner::Text { score, .. } => {
                    score(&input, &self.text, &mut board);
                    ran = true;
                }
                Runner::TextModel(_) => {
                    drop(turn);
                    let ran_model = self.run_toxblock(text, context, &mut board).await?;
                    turn = self.take_turn().await;
                    if ran_model {
                        ran = true;
                    } else {
                        board.unavailable(check.categories);
                    }
                }
                Runner::TextEncoder(_) => {
                    let windows = self.harm_windows(text)?;
                    drop(turn);
                    let embeddings = match windows {
                        Some(windows) => Some(self.harm_embeddings(windows).await?),
                        None => None,
                    };
                    turn = self.take_turn().await;
                    match (embeddings, &self.text.harm) {
                        (Some(embeddings), Some(harm)) => {
                            let best = harm.heads.best(&embeddings);
                            for (category, score) in harm::CATEGORIES.iter().zip(best) {
                                board.add(category, f64::from(score), harm::SOURCE);
                            }
                            ran = true;
                        }
                        _ => board.unavailable(check.categories),
                    }
                }
                Runner::Image { .. } | Runner::Measure { .. } => {}
            }
        }
        if !ran {
            return Err(ApiError::new(
                ErrorKind::WorkflowUnavailable,
                "none of this workflow's text checks can run on this server",
            )
            .with_retry_after(60));
        }
        if terms {
            match_terms(lists, &normalised, &mut board);
        }
        // whatlang's language for a workflow naming the `language` check (69 languages and
        // `unread_language`, 50 to 100 µs); answers that carry a language take the cheap
        // classifier's otherwise ([`Self::add_language`]).
        if checks.iter().any(|name| name == registry::LANGUAGE.name) {
            let language = crate::text::language::detect(text);
            let unread = registry::unread_language(checks, language.as_ref());
            board.add(categories::UNREAD_LANGUAGE, unread, registry::LANGUAGE.name);
            board.language = Some(language);
        }
        drop(turn);
        self.normalizer.borrow_mut().give_back(normalised);
        Ok(board)
    }

    /// Gives `board`, a check of `text`, its language when the workflow's checks did not
    /// (from [`crate::text::langid`]; none without its profiles). Only the answers that carry
    /// a language ask: the compatible APIs' routes, whose answers have no such field, and
    /// Perspective's per-sentence checks do not pay for it.
    pub fn add_language(&self, board: &mut ScoreBoard, text: &str) {
        if board.language.is_none() {
            board.language = self.language_of(text);
        }
    }

    /// `text`'s language by [`crate::text::langid`]: `None` without its profiles, `Some(None)`
    /// for a text with no letters.
    pub fn language_of(&self, text: &str) -> Option<Option<crate::text::language::Language>> {
        self.text.langid.as_ref().map(|langid| langid.detect(text))
    }

    /// Runs the image checks of a workflow on the shard's model worker, or takes their result
    /// kept from an earlier check of the same bytes; `lists` are the caller's lists the
    /// workflow names, for the `hashlist` check. The caller's buffer comes back (for reuse)
    /// with the scores, whatever the outcome.
    pub async fn check_image(
        &self,
        checks: &[String],
        lists: &[Arc<CompiledList>],
        bytes: Vec<u8>,
        probe: Probe,
    ) -> (Vec<u8>, ApiResult<ScoreBoard>) {
        if let Err(error) = undeclared(checks) {
            return (bytes, Err(error));
        }
        let mut board = ScoreBoard::default();
        let mut wanted = 0u64;
        let mut measures = crate::image::Measures::NONE;
        for check in checks_of(checks, ContentKind::Image) {
            match (registry::image_slot(check), &check.runner) {
                (Some(slot), _) if self.image_slots_loaded & (1 << slot) != 0 => {
                    wanted |= 1 << slot
                }
                (
                    None,
                    Runner::Measure {
                        measures: asked, ..
                    },
                ) if self.measures_ready.contains(*asked) => measures = measures.union(*asked),
                _ => board.unavailable(check.categories),
            }
        }
        let worker = match (&self.worker, wanted != 0 || measures.any()) {
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
        // Not borrowed across the hashing's awaits: other checks of the shard look up meanwhile.
        let keeps = self.images_kept.borrow().on();
        let key = match keeps {
            true => Some(Key::new(
                self.sha256_in_turns(&bytes).await,
                wanted,
                measures,
            )),
            false => None,
        };
        let kept = key.and_then(|key| self.images_kept.borrow_mut().get(&key));
        let (bytes, mut scores) = match kept {
            Some(scores) => (bytes, scores),
            None => {
                let sha256 = key.as_ref().map(Key::sha256);
                let outcome = match worker.image(bytes, probe, wanted, measures, sha256).await {
                    Ok(outcome) => outcome,
                    Err(error) => return (Vec::new(), Err(error)),
                };
                match outcome.scores {
                    Ok(scores) => {
                        if let Some(key) = key {
                            self.images_kept.borrow_mut().keep(key, &scores);
                        }
                        (outcome.bytes, scores)
                    }
                    Err(error) => return (outcome.bytes, Err(image_error(error))),
                }
            }
        };
        for check in checks_of(checks, ContentKind::Image) {
            score_measured(check, &scores.measured, &self.text, &mut board);
        }
        if let Some(hashes) = &scores.measured.hashes {
            match_lists(hashes, lists, &mut board);
        }
        board.measured = std::mem::take(&mut scores.measured);
        let models = &worker.image_models;
        if scores.reused {
            self.metrics.image_result_reused();
        } else {
            if let Some(format) = scores.format {
                let prepared = scores
                    .rows
                    .iter()
                    .map(|row| (models[row.slot].model.name, row.prepare_us));
                self.metrics
                    .image_stages(format, scores.decode_us, prepared);
            }
            for row in &scores.rows {
                self.metrics
                    .model_run(models[row.slot].model.name, row.run_us);
            }
        }
        for check in checks_of(checks, ContentKind::Image) {
            let Runner::Image { score, .. } = &check.runner else {
                continue;
            };
            let Some(slot) = registry::image_slot(check).filter(|&slot| wanted & (1 << slot) != 0)
            else {
                continue;
            };
            // No row: the model failed on the worker (logged there), a fault of this server
            // and not of the image; its categories are unchecked.
            match scores.rows.iter().find(|row| row.slot == slot) {
                Some(row) => score.score(&row.values, &mut board),
                None => board.unavailable(check.categories),
            }
        }
        (bytes, Ok(board))
    }

    /// The SHA-256 of an upload, hashed a slice at a time, each slice in a turn at the shard's
    /// CPU ([`turns`]): a 15 MB file at about 2 GB/s would hold the shard for 7 ms at once.
    async fn sha256_in_turns(&self, bytes: &[u8]) -> [u8; 32] {
        let mut hasher = crate::hash::Sha256::new();
        for slice in bytes.chunks(SHA256_SLICE_BYTES) {
            let _turn = self.take_turn().await;
            hasher.update(slice);
        }
        hasher.finish()
    }

    /// The `harm` check's token windows of `text`; `None` if the check cannot run here.
    fn harm_windows(&self, text: &str) -> ApiResult<Option<Vec<Vec<i64>>>> {
        let (Some(harm), true) = (&self.text.harm, self.harm_ready) else {
            return Ok(None);
        };
        harm.tokenizer.windows(text).map(Some).map_err(|error| {
            tracing::error!(%error, "the harm tokenizer failed");
            ApiError::internal("the text could not be tokenized")
        })
    }

    /// The encoder's embeddings of `windows`, from the shard's worker.
    async fn harm_embeddings(&self, windows: Vec<Vec<i64>>) -> ApiResult<Vec<f32>> {
        let worker = self
            .worker
            .as_ref()
            .ok_or_else(|| ApiError::internal("no model worker"))?;
        let rows = windows.len();
        let (embeddings, run_us) = worker.encode(windows).await?;
        self.metrics.model_run(harm::ENCODER.model.name, run_us);
        if embeddings.len() != rows * harm::DIM {
            return Err(ApiError::internal("a model run failed"));
        }
        Ok(embeddings)
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
        let raw = self.toxblock_windows(worker, windows).await?;
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

    /// tox-block's raw outputs for each window of `windows` (`n × 100` ids), in order: those
    /// kept from an earlier check of the same words, and the others from one model run, each
    /// distinct window once; those are kept in turn. A text whose windows are all kept never
    /// goes to the worker.
    async fn toxblock_windows(
        &self,
        worker: &Worker,
        windows: Vec<i32>,
    ) -> ApiResult<Vec<[f32; 6]>> {
        if !self.toxblock_kept.borrow().on() {
            let (raw, run_us) = worker.toxblock(windows).await?;
            self.metrics.model_run(toxblock::SOURCE, run_us);
            return Ok(raw);
        }
        let keys: Vec<toxblock::WindowKey> = windows
            .chunks_exact(toxblock::WINDOW_TOKENS)
            .map(toxblock::window_key)
            .collect();
        let mut raw: Vec<Option<[f32; 6]>> = {
            let mut kept = self.toxblock_kept.borrow_mut();
            keys.iter().map(|key| kept.get(key).copied()).collect()
        };
        // The windows to run, each distinct one once (a text can repeat its words).
        let mut to_run: Vec<toxblock::WindowKey> = Vec::new();
        let mut ids = Vec::new();
        let chunks = windows.chunks_exact(toxblock::WINDOW_TOKENS);
        for ((window, key), kept) in chunks.zip(&keys).zip(&raw) {
            if kept.is_some() || to_run.contains(key) {
                continue;
            }
            to_run.push(*key);
            ids.extend_from_slice(window);
        }
        self.metrics
            .toxblock_windows_reused(raw.iter().filter(|window| window.is_some()).count());
        if !to_run.is_empty() {
            let (scores, run_us) = worker.toxblock(ids).await?;
            self.metrics.model_run(toxblock::SOURCE, run_us);
            if scores.len() != to_run.len() {
                return Err(ApiError::internal("a model run failed"));
            }
            let mut kept = self.toxblock_kept.borrow_mut();
            for (key, window) in to_run.iter().zip(&scores) {
                kept.keep(*key, *window);
            }
            for (slot, key) in raw.iter_mut().zip(&keys) {
                if slot.is_none() {
                    *slot = to_run
                        .iter()
                        .position(|run| run == key)
                        .map(|at| scores[at]);
                }
            }
        }
        Ok(raw.into_iter().flatten().collect())
    }
}

/// Replaces with spaces, byte for byte, the terms of the allow lists among `lists` found in
/// `normalised` (so offsets into it stay valid), giving each list's first match to `found`.
pub fn blank_allowed_terms(
    lists: &[Arc<CompiledList>],
    normalised: &mut String,
    mut found: impl FnMut(ListMatch),
) {
    // Merged as they come (matches end in order, but overlapping ones can start earlier), so
    // a text full of overlapping allowed terms blanks a few ranges, not one per match.
    let mut hidden: Vec<std::ops::Range<usize>> = Vec::new();
    for list in lists.iter().filter(|list| list.kind == ListKind::Allow) {
        let mut first = true;
        for (range, matched) in list.terms_in(normalised) {
            if std::mem::take(&mut first) {
                found(matched);
            }
            match hidden.last_mut() {
                Some(last) if range.start <= last.end && range.end >= last.start => {
                    last.start = last.start.min(range.start);
                    last.end = last.end.max(range.end);
                }
                _ => hidden.push(range),
            }
        }
    }
    // Matches of patterns that are whole UTF-8 strings, found in one: on character
    // boundaries.
    for range in hidden {
        let spaces = " ".repeat(range.len());
        normalised.replace_range(range, &spaces);
    }
}

/// Scores a measuring check from what the worker measured; one whose measurement was not
/// made (absent from `measured`) has its categories reported unchecked: its score function
/// would see no measurement and score nothing, and an answer without the categories in
/// `unchecked` reads as an image that was checked and passed.
fn score_measured(
    check: &Check,
    measured: &crate::image::Measured,
    text: &TextModels,
    board: &mut ScoreBoard,
) {
    let Runner::Measure {
        measures, score, ..
    } = check.runner
    else {
        return;
    };
    if measured.holds(measures) {
        score(measured, text, board);
    } else {
        board.unavailable(check.categories);
    }
}

/// Scores `listed_term` from the block lists among `lists`: 1 when one of their terms is in
/// `normalised`, else 0; the first match of each list goes on the board.
fn match_terms(lists: &[Arc<CompiledList>], normalised: &str, board: &mut ScoreBoard) {
    let mut blocked = false;
    for list in lists.iter().filter(|list| list.kind == ListKind::Block) {
        if let Some((_, found)) = list.terms_in(normalised).next() {
            blocked = true;
            board.list_matches.push(found);
        }
    }
    let score = if blocked { 1.0 } else { 0.0 };
    board.add(categories::LISTED_TERM, score, registry::TERMLIST.name);
    board.lists_consulted = true;
}

/// Scores `known_image` from the lists' matches of an image's hashes (1 for a block list's
/// match, else 0) and keeps the matches on the board.
fn match_lists(hashes: &ImageHashes, lists: &[Arc<CompiledList>], board: &mut ScoreBoard) {
    let mut blocked = false;
    for list in lists {
        if let Some(found) = list.lookup(hashes) {
            blocked |= found.kind == ListKind::Block;
            board.list_matches.push(found);
        }
    }
    let score = if blocked { 1.0 } else { 0.0 };
    board.add(categories::KNOWN_IMAGE, score, registry::HASHLIST.name);
    board.lists_consulted = true;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{Measured, Measures, Rgb8};

    fn text_models() -> TextModels {
        TextModels::load(std::path::Path::new("/nonexistent"))
            .unwrap()
            .0
    }

    /// Every measuring check of the registry, whatever it measures: a measurement not made
    /// leaves all its categories unchecked and none scored; one made leaves none unchecked.
    #[test]
    fn a_measurement_not_made_leaves_its_checks_categories_unchecked() {
        let models = text_models();
        let image = Rgb8::new(32, 24, vec![200; 32 * 24 * 3]);
        let every = Measures {
            properties: true,
            qr: true,
            hashes: true,
            faces: true,
            ocr: true,
        };
        let made = Measured {
            faces: Some(Vec::new()),
            text_lines: Some(Vec::new()),
            ..every.run(&image.pixels, None, &image)
        };
        assert!(made.holds(every), "{made:?}");
        let measuring: Vec<&Check> = registry::all()
            .filter(|check| matches!(check.runner, Runner::Measure { .. }))
            .collect();
        assert!(measuring.len() >= 5, "{}", measuring.len());
        for check in measuring {
            let mut board = ScoreBoard::default();
            score_measured(check, &Measured::default(), &models, &mut board);
            for category in check.categories {
                assert_eq!(
                    board.is_unavailable(category),
                    Some(*category),
                    "{}: {category}",
                    check.name
                );
                assert!(board.get(category).is_none(), "{}: {category}", check.name);
            }
            let mut board = ScoreBoard::default();
            score_measured(check, &made, &models, &mut board);
            for category in check.categories {
                assert_eq!(board.is_unavailable(category), None, "{}", check.name);
            }
        }
    }

    #[test]
    fn only_the_measurements_asked_for_are_needed() {
        let qr_only = Measured {
            qr_codes: Some(Vec::new()),
            ..Measured::default()
        };
        assert!(qr_only.holds(Measures::QR));
        assert!(qr_only.holds(Measures::NONE));
        assert!(!qr_only.holds(Measures::QR.union(Measures::FACES)));
        assert!(!Measured::default().holds(Measures::QR));
    }
}
