//! The model worker of a shard: a thread beside the reactor that owns the shard's ONNX
//! Runtime sessions and runs every job that takes milliseconds (model runs, and for images
//! the decoding and resizing too).
//!
//! The shard talks to it through a bounded queue; results come back on oneshot channels,
//! whose wakes reach the glommio task from this thread. The worker is pinned to the shard's
//! CPU; how it shares that core with the shard is [`super::share`]'s (by default it runs at
//! `SCHED_IDLE` and the shard paces its checks to leave it `inference.worker_share`).
//!
//! Jobs of the same kind waiting together run as one batch: tox-block windows of several
//! texts in one session run, and likewise images per model. Batching trades a little latency
//! of the first job for much better throughput under load.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_channel::oneshot;
use ort::environment::Environment;
use ort::session::Session;

use super::faces::FaceNets;
pub use super::models::WorkerModels;
use super::models::{open_session, ImageModelSpec, ModelSpec, TextEncoderSpec};
use super::ocr::OcrNets;
use super::run::{
    encoder_embeddings, image_rows, image_rows_one_by_one, takes_one_image, toxblock_probs,
};
use super::share::CoreSharing;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::image::decode::decode;
use crate::image::probe::Probe;
use crate::image::{Format, ImageError, Measured, Measures};

/// `inference.job_time_max_ms` of the embedded configuration: what tools and tests that start
/// a worker outside a server get.
pub const JOB_TIME_MAX_DEFAULT: Duration = Duration::from_secs(10);

/// Image models one worker can hold (a job names the ones it wants in a 64-bit set).
pub const IMAGE_MODELS_MAX: usize = 64;

/// Settings of workers (`[inference]` in the configuration), and the models it serves: the
/// text model (tox-block's token windows) and the image models, in the order jobs name them.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    pub queue_depth_max: usize,
    pub batch_rows_max: usize,
    pub text_model: Option<ModelSpec>,
    /// The text encoder (token rows to embeddings), if a check of this build has one.
    pub text_encoder: Option<&'static TextEncoderSpec>,
    pub image_models: Vec<&'static ImageModelSpec>,
    /// How the worker shares its core with its shard ([`super::share`]).
    pub sharing: CoreSharing,
    /// With [`CoreSharing::Paced`], the share of the core the shard leaves the worker while
    /// it has jobs.
    pub share: f64,
    /// The worker thread's scheduling niceness (with [`CoreSharing::Weights`]).
    pub nice: i32,
    /// The time a job may take from its submission (`inference.job_time_max_ms`): past it,
    /// the worker stops the job at its next step and the caller answers 503 `busy`.
    pub job_time_max: Duration,
}

/// One image model's answer for one image.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRow {
    /// The model's place in [`WorkerConfig::image_models`].
    pub slot: usize,
    pub values: Vec<f32>,
    /// Time to make this model's input from the decoded image.
    pub prepare_us: u64,
    /// This image's share of the model's batch run.
    pub run_us: u64,
}

/// Scores of one image, and where the time went.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImageJobScores {
    pub format: Option<Format>,
    pub decode_us: u64,
    /// One row per model that ran, in slot order.
    pub rows: Vec<ModelRow>,
    /// The measurements asked for, and their time.
    pub measured: Measured,
    pub measure_us: u64,
    /// Kept from an earlier check of the same bytes ([`super::repeats`]): nothing was decoded
    /// or run for this one, and its times are 0.
    pub reused: bool,
}

/// An image job's answer: the scores, or why the image does not decode; and the caller's
/// buffer back for reuse.
pub struct ImageOutcome {
    pub bytes: Vec<u8>,
    pub scores: Result<ImageJobScores, ImageError>,
}

/// A job's answer: its result, or `OverTime` when the worker stopped it past its time.
enum Finished<T> {
    Done(T),
    OverTime,
}

type Reply<T> = oneshot::Sender<Finished<Result<T, String>>>;

/// tox-block's raw sigmoid outputs per window, and this job's share of the run, microseconds.
pub type ToxblockOutcome = (Vec<[f32; 6]>, u64);

/// The text encoder's embeddings (`dim` values a row, in the rows' order), and this job's
/// share of the run, microseconds.
pub type EncoderOutcome = (Vec<f32>, u64);

struct EncoderJob {
    /// Token rows, each framed and at most the encoder's `row_tokens_max`.
    rows: Vec<Vec<i64>>,
    deadline: Instant,
    reply: Reply<EncoderOutcome>,
}

struct ToxblockJob {
    /// `ids.len() / 100` windows of 100 token ids.
    ids: Vec<i32>,
    deadline: Instant,
    reply: Reply<ToxblockOutcome>,
}

struct ImageJob {
    bytes: Vec<u8>,
    probe: Probe,
    /// The image models wanted, as a set of slots.
    wanted: u64,
    measures: Measures,
    /// The file's SHA-256, when the shard has it already (for the hashes measurement).
    sha256: Option<[u8; 32]>,
    deadline: Instant,
    reply: oneshot::Sender<Finished<ImageOutcome>>,
}

impl ImageJob {
    /// Whether the job should stop now: past its time, or its caller gone.
    fn stopped(&self) -> bool {
        self.reply.is_canceled() || Instant::now() >= self.deadline
    }
}

enum Job {
    Toxblock(ToxblockJob),
    Encoder(EncoderJob),
    Image(ImageJob),
}

/// The shard's end of its worker.
pub struct Worker {
    jobs: SyncSender<Job>,
    /// Jobs submitted and not answered yet (waiting or running).
    pending: Rc<Cell<usize>>,
    /// Jobs submitted that the worker has not finished, whether or not their callers still
    /// wait (pacing asks this: the worker is busy with a job whose caller went away too).
    unfinished: Arc<AtomicUsize>,
    queue_depth_max: usize,
    job_time_max: Duration,
    /// The image models by slot, as the worker runs them (to name a job's rows).
    pub image_models: Vec<&'static ImageModelSpec>,
}

/// Counts a job as pending for as long as its caller waits, even if the caller goes away.
struct PendingGuard(Rc<Cell<usize>>);

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// Held by the worker thread: if it ends (the shard is gone, or a panic), no job of it is
/// left unfinished, so its shard never waits for a worker that will not run.
struct UnfinishedReset(Arc<AtomicUsize>);

impl Drop for UnfinishedReset {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

impl Worker {
    /// Starts the worker of shard `index` on `cpu`. The receiver reports once its sessions are
    /// loaded (or why they could not be).
    pub fn spawn(
        index: usize,
        cpu: Option<usize>,
        models: WorkerModels,
        config: WorkerConfig,
    ) -> std::io::Result<(Worker, oneshot::Receiver<Result<(), String>>)> {
        assert!(config.image_models.len() <= IMAGE_MODELS_MAX);
        let (jobs, queue) = mpsc::sync_channel(config.queue_depth_max);
        let (ready_tx, ready_rx) = oneshot::channel();
        let queue_depth_max = config.queue_depth_max;
        let job_time_max = config.job_time_max;
        let image_models = config.image_models.clone();
        let unfinished = Arc::new(AtomicUsize::new(0));
        let finished_by_worker = unfinished.clone();
        std::thread::Builder::new()
            .name(format!("modgate-model-{index}"))
            .spawn(move || {
                let _reset = UnfinishedReset(finished_by_worker.clone());
                pin_and_prioritise(cpu, config.sharing, config.nice);
                match Sessions::open(&models, &config) {
                    Ok(sessions) => {
                        let _ = ready_tx.send(Ok(()));
                        serve(
                            queue,
                            sessions,
                            &models.environment,
                            &config,
                            &finished_by_worker,
                        );
                    }
                    Err(error) => {
                        let _ = ready_tx.send(Err(error));
                    }
                }
            })?;
        let worker = Worker {
            jobs,
            pending: Rc::default(),
            unfinished,
            queue_depth_max,
            job_time_max,
            image_models,
        };
        Ok((worker, ready_rx))
    }

    /// Whether the queue is full now: checked before reading a large body, so that a busy
    /// shard refuses an upload before receiving it.
    pub fn is_full(&self) -> bool {
        self.pending.get() > self.queue_depth_max
    }

    /// Jobs waiting or running.
    pub fn pending(&self) -> usize {
        self.pending.get()
    }

    /// Whether the worker has jobs it has not finished (including jobs whose callers went
    /// away: it runs those too, unless it finds them abandoned before it starts them).
    pub fn busy(&self) -> bool {
        self.unfinished.load(Ordering::Relaxed) > 0
    }

    /// Scores `ids` (`n × 100` token ids) with tox-block: raw sigmoid outputs per window.
    pub async fn toxblock(&self, ids: Vec<i32>) -> ApiResult<ToxblockOutcome> {
        let (reply, result) = oneshot::channel();
        let deadline = self.deadline();
        let _pending = self.submit(Job::Toxblock(ToxblockJob {
            ids,
            deadline,
            reply,
        }))?;
        match result.await {
            Ok(Finished::Done(Ok(scores))) => Ok(scores),
            Ok(Finished::OverTime) => Err(over_time()),
            Ok(Finished::Done(Err(error))) => {
                tracing::error!(%error, "tox-block run failed");
                Err(ApiError::internal("a model run failed"))
            }
            Err(oneshot::Canceled) => Err(ApiError::internal("the model worker stopped")),
        }
    }

    /// The text encoder's embeddings of `rows` (token ids, framed, each at most the
    /// encoder's `row_tokens_max`), `dim` values a row.
    pub async fn encode(&self, rows: Vec<Vec<i64>>) -> ApiResult<EncoderOutcome> {
        let (reply, result) = oneshot::channel();
        let deadline = self.deadline();
        let _pending = self.submit(Job::Encoder(EncoderJob {
            rows,
            deadline,
            reply,
        }))?;
        match result.await {
            Ok(Finished::Done(Ok(embeddings))) => Ok(embeddings),
            Ok(Finished::OverTime) => Err(over_time()),
            Ok(Finished::Done(Err(error))) => {
                tracing::error!(%error, "text encoder run failed");
                Err(ApiError::internal("a model run failed"))
            }
            Err(oneshot::Canceled) => Err(ApiError::internal("the model worker stopped")),
        }
    }

    /// Decodes and scores an image with the image models of the slots in `wanted`, and makes
    /// the `measures` (`sha256`: the file's, if the caller has it); the buffer comes back with
    /// the outcome.
    pub async fn image(
        &self,
        bytes: Vec<u8>,
        probe: Probe,
        wanted: u64,
        measures: Measures,
        sha256: Option<[u8; 32]>,
    ) -> ApiResult<ImageOutcome> {
        let (reply, result) = oneshot::channel();
        let deadline = self.deadline();
        let _pending = self.submit(Job::Image(ImageJob {
            bytes,
            probe,
            wanted,
            measures,
            sha256,
            deadline,
            reply,
        }))?;
        match result.await {
            Ok(Finished::Done(outcome)) => Ok(outcome),
            Ok(Finished::OverTime) => Err(over_time()),
            Err(oneshot::Canceled) => Err(ApiError::internal("the model worker stopped")),
        }
    }

    /// When a job submitted now must be done.
    fn deadline(&self) -> Instant {
        Instant::now() + self.job_time_max
    }

    fn submit(&self, job: Job) -> ApiResult<PendingGuard> {
        // Counted before it is sent, so the worker never finishes a job not yet counted.
        self.unfinished.fetch_add(1, Ordering::Relaxed);
        if let Err(error) = self.jobs.try_send(job) {
            self.unfinished.fetch_sub(1, Ordering::Relaxed);
            return Err(match error {
                TrySendError::Full(_) => busy(),
                TrySendError::Disconnected(_) => ApiError::internal("the model worker stopped"),
            });
        }
        self.pending.set(self.pending.get() + 1);
        Ok(PendingGuard(self.pending.clone()))
    }
}

/// 503 `busy`: the job ran past `inference.job_time_max_ms` and the worker stopped it.
fn over_time() -> ApiError {
    ApiError::new(
        ErrorKind::Busy,
        "the model worker could not finish this check in time; retry shortly",
    )
    .with_retry_after(1)
}

/// 503 `busy`: the shard's model queue is full.
pub fn busy() -> ApiError {
    ApiError::new(
        ErrorKind::Busy,
        "the model queue of this server is full; retry shortly",
    )
    .with_retry_after(1)
}

/// The worker's sessions: the text model's and one per image model that loaded (by slot).
struct Sessions {
    toxblock: Option<Session>,
    /// The text encoder's session, with its spec.
    encoder: Option<(Session, &'static TextEncoderSpec)>,
    images: Vec<ImageSession>,
    /// The face detector's networks, when all three are installed.
    faces: Option<FaceNets>,
    /// The OCR's networks.
    ocr: OcrSession,
}

/// The OCR's networks on this worker: opened when a job first reads text (31 MB of weights
/// that no shipped workflow names), as [`ImageModelSpec::open_on_first_use`] models are.
enum OcrSession {
    /// All three installed and checked at start; not open yet.
    Later(WorkerModels),
    Open(OcrNets),
    /// Not installed here, or they failed to open.
    Absent,
}

impl OcrSession {
    /// The networks for a job that `wants` them, opened on first use; `None` when the job
    /// does not want them or they cannot open (the check then reports its categories
    /// unchecked).
    fn nets(&mut self, wants: bool) -> Option<&mut OcrNets> {
        if !wants {
            return None;
        }
        if let OcrSession::Later(models) = self {
            let started = Instant::now();
            *self = match OcrNets::open(models) {
                Ok(Some(nets)) => {
                    tracing::info!(
                        ms = started.elapsed().as_millis() as u64,
                        "OCR models opened on first use"
                    );
                    OcrSession::Open(nets)
                }
                Ok(None) => OcrSession::Absent,
                Err(error) => {
                    tracing::error!(%error, "the OCR models failed to open");
                    OcrSession::Absent
                }
            };
        }
        match self {
            OcrSession::Open(nets) => Some(nets),
            _ => None,
        }
    }
}

/// An image model's session on this worker.
enum ImageSession {
    /// Open; `one_by_one` when the model's batch is fixed at 1 (it runs one image at a time).
    Open { session: Session, one_by_one: bool },
    /// Checked at start, opened when a job first wants it
    /// ([`ImageModelSpec::open_on_first_use`]).
    Later(PathBuf),
    /// Not installed here, or it failed to open.
    Absent,
}

impl ImageSession {
    fn open(environment: &Environment, path: &Path, spec: &ImageModelSpec) -> Result<Self, String> {
        let session = open_session(environment, path)?;
        let one_by_one = takes_one_image(&session, spec);
        Ok(ImageSession::Open {
            session,
            one_by_one,
        })
    }
}

impl Sessions {
    fn open(models: &WorkerModels, config: &WorkerConfig) -> Result<Sessions, String> {
        let images = config
            .image_models
            .iter()
            .map(|spec| match models.path_of(&spec.model) {
                None => Ok(ImageSession::Absent),
                Some(path) if spec.open_on_first_use => Ok(ImageSession::Later(path.clone())),
                Some(path) => ImageSession::open(&models.environment, path, spec),
            })
            .collect::<Result<_, _>>()?;
        let toxblock = match config
            .text_model
            .as_ref()
            .and_then(|spec| models.path_of(spec))
        {
            Some(path) => Some(open_session(&models.environment, path)?),
            None => None,
        };
        let encoder = match config
            .text_encoder
            .and_then(|spec| Some((spec, models.path_of(&spec.model)?)))
        {
            Some((spec, path)) => Some((open_session(&models.environment, path)?, spec)),
            None => None,
        };
        Ok(Sessions {
            toxblock,
            encoder,
            images,
            faces: FaceNets::open(models)?,
            ocr: if super::ocr::NETS
                .iter()
                .all(|spec| models.path_of(spec).is_some())
            {
                OcrSession::Later(models.clone())
            } else {
                OcrSession::Absent
            },
        })
    }

    /// Opens the models of `wanted` that wait for their first use; one that fails is logged
    /// and stays absent (its check reports its categories unchecked).
    fn open_wanted(
        &mut self,
        environment: &Environment,
        models: &[&'static ImageModelSpec],
        wanted: u64,
    ) {
        for (slot, spec) in models.iter().enumerate() {
            let Some(ImageSession::Later(path)) = self.images.get(slot) else {
                continue;
            };
            if !wants(wanted, slot) {
                continue;
            }
            let started = Instant::now();
            self.images[slot] = match ImageSession::open(environment, path, spec) {
                Ok(opened) => {
                    tracing::info!(
                        model = spec.model.name,
                        ms = started.elapsed().as_millis() as u64,
                        "model opened on first use"
                    );
                    opened
                }
                Err(error) => {
                    tracing::error!(%error, model = spec.model.name, "a model failed to open on first use");
                    ImageSession::Absent
                }
            };
        }
    }

    /// The set of slots whose model can run (open, or to be opened on first use).
    fn runnable(&self) -> u64 {
        self.images
            .iter()
            .enumerate()
            .filter(|(_, session)| !matches!(session, ImageSession::Absent))
            .fold(0, |set, (slot, _)| set | 1 << slot)
    }
}

/// The worker's loop: take a job, gather the jobs of the same kind waiting behind it (up to
/// `batch_rows_max` rows), run them as one batch, answer each.
fn serve(
    queue: Receiver<Job>,
    mut sessions: Sessions,
    environment: &Environment,
    config: &WorkerConfig,
    unfinished: &AtomicUsize,
) {
    let mut held: Option<Job> = None;
    loop {
        let first = match held.take() {
            Some(job) => job,
            None => match queue.recv() {
                Ok(job) => job,
                Err(_) => return, // the shard is gone
            },
        };
        let taken =
            match first {
                Job::Toxblock(job) => {
                    let rows = |job: &ToxblockJob| job.ids.len() / 100;
                    let batch = gather(
                        job,
                        &queue,
                        &mut held,
                        config.batch_rows_max,
                        rows,
                        |job| match job {
                            Job::Toxblock(job) => Ok(job),
                            other => Err(other),
                        },
                    );
                    let taken = batch.len();
                    // A job whose caller went away is not run, nor one past its time.
                    let batch = runnable(batch, |job| (&job.reply, job.deadline));
                    if !batch.is_empty() {
                        run_toxblock_batch(sessions.toxblock.as_mut(), batch);
                    }
                    taken
                }
                Job::Encoder(job) => {
                    let rows = |job: &EncoderJob| job.rows.len();
                    let batch = gather(
                        job,
                        &queue,
                        &mut held,
                        config.batch_rows_max,
                        rows,
                        |job| match job {
                            Job::Encoder(job) => Ok(job),
                            other => Err(other),
                        },
                    );
                    let taken = batch.len();
                    let batch = runnable(batch, |job| (&job.reply, job.deadline));
                    if !batch.is_empty() {
                        run_encoder_batch(sessions.encoder.as_mut(), batch);
                    }
                    taken
                }
                Job::Image(job) => {
                    let batch = gather(
                        job,
                        &queue,
                        &mut held,
                        config.batch_rows_max,
                        |_| 1,
                        |job| match job {
                            Job::Image(job) => Ok(job),
                            other => Err(other),
                        },
                    );
                    let taken = batch.len();
                    let batch = runnable(batch, |job| (&job.reply, job.deadline));
                    if !batch.is_empty() {
                        let wanted = batch.iter().fold(0, |set, job| set | job.wanted);
                        sessions.open_wanted(environment, &config.image_models, wanted);
                        run_image_batch(&mut sessions, &config.image_models, batch);
                    }
                    taken
                }
            };
        unfinished.fetch_sub(taken, Ordering::Relaxed);
    }
}

/// The jobs of `batch` to run: those whose caller went away are dropped, and those past their
/// deadline answered [`Finished::OverTime`] without running.
fn runnable<J, T>(
    batch: Vec<J>,
    parts: impl Fn(&J) -> (&oneshot::Sender<Finished<T>>, Instant),
) -> Vec<J>
where
    J: IntoReply<T>,
{
    let now = Instant::now();
    let mut kept = Vec::with_capacity(batch.len());
    for job in batch {
        let (reply, deadline) = parts(&job);
        if reply.is_canceled() {
            continue;
        }
        if now >= deadline {
            tracing::debug!("a model job waited past inference.job_time_max_ms and was not run");
            let _ = job.into_reply().send(Finished::OverTime);
            continue;
        }
        kept.push(job);
    }
    kept
}

/// A job's reply, taken from the job.
trait IntoReply<T> {
    fn into_reply(self) -> oneshot::Sender<Finished<T>>;
}

impl IntoReply<Result<ToxblockOutcome, String>> for ToxblockJob {
    fn into_reply(self) -> oneshot::Sender<Finished<Result<ToxblockOutcome, String>>> {
        self.reply
    }
}

impl IntoReply<Result<EncoderOutcome, String>> for EncoderJob {
    fn into_reply(self) -> oneshot::Sender<Finished<Result<EncoderOutcome, String>>> {
        self.reply
    }
}

impl IntoReply<ImageOutcome> for ImageJob {
    fn into_reply(self) -> oneshot::Sender<Finished<ImageOutcome>> {
        self.reply
    }
}

/// `first` and the jobs of its kind waiting behind it, up to `rows_max` rows (`rows` counts a
/// job's); a job of another kind ends the batch and is `held` for the next one.
fn gather<T>(
    first: T,
    queue: &Receiver<Job>,
    held: &mut Option<Job>,
    rows_max: usize,
    rows: impl Fn(&T) -> usize,
    same_kind: impl Fn(Job) -> Result<T, Job>,
) -> Vec<T> {
    let mut count = rows(&first);
    let mut batch = vec![first];
    while count < rows_max {
        let Ok(job) = queue.try_recv() else { break };
        match same_kind(job) {
            Ok(job) => {
                count += rows(&job);
                batch.push(job);
            }
            Err(other) => {
                *held = Some(other);
                break;
            }
        }
    }
    batch
}

fn run_toxblock_batch(session: Option<&mut Session>, batch: Vec<ToxblockJob>) {
    let Some(session) = session else {
        for job in batch {
            let _ = job
                .reply
                .send(Finished::Done(Err("tox-block is not loaded".into())));
        }
        return;
    };
    let counts: Vec<usize> = batch.iter().map(|job| job.ids.len() / 100).collect();
    let all: Vec<i32> = batch
        .iter()
        .flat_map(|job| job.ids.iter().copied())
        .collect();
    let started = Instant::now();
    let result = toxblock_probs(session, all);
    let share_us = started.elapsed().as_micros() as u64 / batch.len().max(1) as u64;
    match result {
        Ok(scores) => {
            let mut at = 0;
            for (job, count) in batch.into_iter().zip(counts) {
                let _ = job.reply.send(Finished::Done(Ok((
                    scores[at..at + count].to_vec(),
                    share_us,
                ))));
                at += count;
            }
        }
        Err(error) => {
            for job in batch {
                let _ = job.reply.send(Finished::Done(Err(error.clone())));
            }
        }
    }
}

fn run_encoder_batch(
    encoder: Option<&mut (Session, &'static TextEncoderSpec)>,
    batch: Vec<EncoderJob>,
) {
    let Some((session, spec)) = encoder else {
        for job in batch {
            let _ = job
                .reply
                .send(Finished::Done(Err("the text encoder is not loaded".into())));
        }
        return;
    };
    let rows: Vec<&[i64]> = batch
        .iter()
        .flat_map(|job| job.rows.iter().map(Vec::as_slice))
        .collect();
    let started = Instant::now();
    let result = encoder_embeddings(session, spec, &rows);
    let tokens = rows.iter().map(|row| row.len()).sum::<usize>().max(1) as u64;
    let run_us = started.elapsed().as_micros() as u64;
    match result {
        Ok(values) => {
            let mut at = 0;
            for job in batch {
                let len = job.rows.len() * spec.dim;
                // Each job's share of the run, by its tokens.
                let job_tokens = job.rows.iter().map(Vec::len).sum::<usize>() as u64;
                let share_us = run_us * job_tokens / tokens;
                let _ = job.reply.send(Finished::Done(Ok((
                    values[at..at + len].to_vec(),
                    share_us,
                ))));
                at += len;
            }
        }
        Err(error) => {
            for job in batch {
                let _ = job.reply.send(Finished::Done(Err(error.clone())));
            }
        }
    }
}

/// One image's state through a batch.
struct Prepared {
    job: ImageJob,
    /// `None`: stopped, past its time or its caller gone.
    scores: Option<Result<ImageJobScores, ImageError>>,
}

/// Why [`prepare`] gave no scores: the image does not decode or its models' inputs cannot be
/// made, or the job stopped between two steps ([`ImageJob::stopped`]).
enum Unprepared {
    Image(ImageError),
    Stopped,
}

impl From<ImageError> for Unprepared {
    fn from(error: ImageError) -> Unprepared {
        Unprepared::Image(error)
    }
}

/// Whether slot `slot` is in the set `wanted`.
fn wants(wanted: u64, slot: usize) -> bool {
    slot < IMAGE_MODELS_MAX && wanted & (1 << slot) != 0
}

/// Decodes each image once, prepares the input of every model it wants, runs each model once
/// over all the images that want it, answers each. A decoder that panics costs its request,
/// not the worker.
fn run_image_batch(
    sessions: &mut Sessions,
    models: &[&'static ImageModelSpec],
    batch: Vec<ImageJob>,
) {
    let runnable = sessions.runnable();
    // Per model: the inputs of the images that want it, and which images they are.
    let mut inputs: Vec<Vec<f32>> = vec![Vec::new(); models.len()];
    let mut images_of: Vec<Vec<usize>> = vec![Vec::new(); models.len()];
    let mut prepared = Vec::with_capacity(batch.len());
    for job in batch {
        let index = prepared.len();
        let wanted = job.wanted & runnable;
        let nets = Nets {
            faces: sessions.faces.as_mut(),
            ocr: sessions.ocr.nets(job.measures.ocr),
        };
        let scores = match prepare(&job, wanted, models, &mut inputs, nets) {
            Ok(scores) => Some(Ok(scores)),
            Err(Unprepared::Image(error)) => Some(Err(error)),
            Err(Unprepared::Stopped) => None,
        };
        if let Some(Ok(scores)) = &scores {
            for row in &scores.rows {
                images_of[row.slot].push(index);
            }
        }
        prepared.push(Prepared { job, scores });
    }
    let images = prepared.len().max(1) as u64;
    for (slot, spec) in models.iter().enumerate() {
        let (
            Some(ImageSession::Open {
                session,
                one_by_one,
            }),
            false,
        ) = (sessions.images.get_mut(slot), images_of[slot].is_empty())
        else {
            continue;
        };
        let started = Instant::now();
        let run = if *one_by_one {
            image_rows_one_by_one
        } else {
            image_rows
        };
        let result = run(session, spec, std::mem::take(&mut inputs[slot]));
        let share_us = started.elapsed().as_micros() as u64 / images;
        for (row, &index) in images_of[slot].iter().enumerate() {
            let target = &mut prepared[index];
            let Some(scores) = target.scores.as_mut() else {
                continue;
            };
            match (&result, scores.as_mut()) {
                (Ok(values), Ok(scores)) => {
                    let columns = spec.output_columns;
                    if let Some(model_row) = scores.rows.iter_mut().find(|r| r.slot == slot) {
                        model_row.values = values[row * columns..(row + 1) * columns].to_vec();
                        model_row.run_us = share_us;
                    }
                }
                (Err(error), Ok(scores)) => {
                    // The model's fault, not the image's: its row goes, and the check that
                    // wanted it reports its categories unchecked.
                    tracing::error!(%error, model = spec.model.name, "image model run failed");
                    scores.rows.retain(|r| r.slot != slot);
                }
                (_, Err(_)) => {}
            }
        }
    }
    for Prepared { job, scores } in prepared {
        let answer = match scores {
            Some(scores) => Finished::Done(ImageOutcome {
                bytes: job.bytes,
                scores,
            }),
            None => {
                tracing::warn!("an image job ran past inference.job_time_max_ms and was stopped");
                Finished::OverTime
            }
        };
        let _ = job.reply.send(answer);
    }
}

/// The networks behind measurements (not image models of the registry's slots).
struct Nets<'a> {
    faces: Option<&'a mut FaceNets>,
    ocr: Option<&'a mut OcrNets>,
}

/// Decodes one image and appends the input of each model in `wanted` to that model's inputs.
/// Between its steps (the decoding, the measurements, the OCR, the faces) it stops if the job
/// is past its time or its caller went away: each step is bounded by its own limits, so a job
/// ends within one step of its deadline.
fn prepare(
    job: &ImageJob,
    wanted: u64,
    models: &[&'static ImageModelSpec],
    inputs: &mut [Vec<f32>],
    nets: Nets<'_>,
) -> Result<ImageJobScores, Unprepared> {
    let step = || {
        if job.stopped() {
            Err(Unprepared::Stopped)
        } else {
            Ok(())
        }
    };
    let started = Instant::now();
    // The side every image model loaded at start can work from, whichever a job wants: a
    // model's score must not depend on which other models a workflow names. A model opened on
    // first use (a larger input no shipped workflow needs), the face detector and the OCR raise it only
    // for the jobs that want them, so that they do not change what every other workflow
    // decodes and scores.
    let min_side = models
        .iter()
        .enumerate()
        .filter(|(slot, spec)| !spec.open_on_first_use || wants(wanted, *slot))
        .map(|(_, spec)| spec.min_side_px)
        .chain([job.measures.min_side_px()])
        .max()
        .unwrap_or(0);
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        decode(&job.bytes, &job.probe, min_side)
    }));
    let image = decoded.unwrap_or_else(|_| {
        Err(ImageError::Corrupt(
            "the decoder failed on this file".into(),
        ))
    })?;
    let decode_us = started.elapsed().as_micros() as u64;
    step()?;
    let started = Instant::now();
    // Measurements are this crate's own code over bounded buffers; a bug in one must still
    // cost only its figures, not the worker.
    let mut measured = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        job.measures.run(&job.bytes, job.sha256, &image)
    }))
    .unwrap_or_else(|_| {
        tracing::error!("an image measurement panicked");
        Measured::default()
    });
    step()?;
    if let (true, Some(ocr)) = (job.measures.ocr, nets.ocr) {
        // As for the faces: a failed run leaves the text unread, and the check unchecked.
        // The pixel work around the networks is this crate's own code: a bug in it costs the
        // text, not the worker.
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ocr.read(&image)))
            .unwrap_or_else(|_| Err("the OCR panicked".into()));
        measured.text_lines = match read {
            Ok(lines) => Some(
                lines
                    .into_iter()
                    .map(|line| line.in_fractions(image.width, image.height))
                    .collect(),
            ),
            Err(error) => {
                tracing::error!(%error, "the OCR failed");
                None
            }
        };
    }
    step()?;
    if let (true, Some(nets)) = (job.measures.faces, nets.faces) {
        // A failed run is this server's fault, not the image's: no faces figure, and the
        // check reports its category unchecked.
        measured.faces = match nets.detect(&image) {
            Ok(found) => Some(
                found
                    .iter()
                    .map(|face| face.in_fractions(image.width, image.height))
                    .collect(),
            ),
            Err(error) => {
                tracing::error!(%error, "the face detector failed");
                None
            }
        };
    }
    step()?;
    let mut scores = ImageJobScores {
        format: Some(job.probe.format),
        decode_us,
        rows: Vec::new(),
        measured,
        measure_us: started.elapsed().as_micros() as u64,
        reused: false,
    };
    let mut added: Vec<usize> = Vec::new();
    for (slot, spec) in models.iter().enumerate() {
        if !wants(wanted, slot) {
            continue;
        }
        let started = Instant::now();
        let at = inputs[slot].len();
        inputs[slot].resize(at + spec.input_len(), 0.0);
        if let Err(error) = spec.prepare(&image, &mut inputs[slot][at..]) {
            inputs[slot].truncate(at);
            // Inputs already added for this image are taken back: it runs in no model.
            for &earlier in &added {
                let len = inputs[earlier].len() - models[earlier].input_len();
                inputs[earlier].truncate(len);
            }
            return Err(error.into());
        }
        added.push(slot);
        scores.rows.push(ModelRow {
            slot,
            values: Vec::new(),
            prepare_us: started.elapsed().as_micros() as u64,
            run_us: 0,
        });
    }
    Ok(scores)
}

/// Sets the calling thread's scheduling niceness (a worker's, and a shard's own: they share a
/// core by these weights); whether it took.
pub fn set_thread_nice(nice: i32) -> bool {
    // SAFETY: setpriority(2) takes plain integers and touches no memory of ours; on Linux
    // PRIO_PROCESS with who = 0 applies to the calling thread only.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) == 0 }
}

/// Pins the calling thread to `cpu` and sets its scheduling: `SCHED_IDLE` when paced, its
/// niceness when sharing by weights.
fn pin_and_prioritise(cpu: Option<usize>, sharing: CoreSharing, nice: i32) {
    if let Some(cpu) = cpu {
        let mut set = nix::sched::CpuSet::new();
        if set.set(cpu).is_ok() {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
        }
    }
    if sharing == CoreSharing::Paced {
        if super::share::set_thread_idle() {
            return;
        }
        // An ordinary worker still gets its share from the pauses; only a request arriving
        // while it runs waits for the kernel's next switch.
        tracing::warn!(
            nice,
            "could not put the model worker at SCHED_IDLE; it runs at its niceness"
        );
    }
    if !set_thread_nice(nice) {
        tracing::warn!(nice, "could not set the model worker's niceness");
    }
}
