//! The model worker of a shard: a thread beside the reactor that owns the shard's ONNX
//! Runtime sessions and runs every job that takes milliseconds (model runs, and for images
//! the decoding and resizing too).
//!
//! The shard talks to it through a bounded queue; results come back on oneshot channels,
//! whose wakes reach the glommio task from this thread. The worker is pinned to the shard's
//! CPU and niced ([`WORKER_NICE`]), so the scheduler prefers the reactor whenever both can run.
//!
//! Jobs of the same kind waiting together run as one batch: tox-block windows of several
//! texts in one session run, and likewise images per model. Batching trades a little latency
//! of the first job for much better throughput under load.

use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::Instant;

use futures_channel::oneshot;
use ort::environment::Environment;
use ort::session::Session;

use super::open_session;
use super::run::{nsfwjs_probs, open_nsfw_probs, toxblock_probs};
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::image::decode::decode;
use crate::image::probe::Probe;
use crate::image::resize::{nsfwjs_input, opennsfw_input, INPUT_LEN, OPENNSFW_RESIZE};
use crate::image::{Format, ImageError};

/// Scheduling niceness of worker threads: below the reactor's 0.
pub const WORKER_NICE: i32 = 10;
/// The smallest side a decoded image needs: open-NSFW's first resize (256); nsfwjs needs 224.
pub const IMAGE_MIN_SIDE: usize = OPENNSFW_RESIZE;

/// What a shard's worker may run: the models that passed the start-up checks.
#[derive(Clone)]
pub struct WorkerModels {
    pub environment: Environment,
    pub toxblock: Option<PathBuf>,
    pub open_nsfw: Option<PathBuf>,
    pub nsfwjs: Option<PathBuf>,
}

/// Settings of workers (`[inference]` in the configuration).
#[derive(Clone, Copy, Debug)]
pub struct WorkerConfig {
    pub queue_depth_max: usize,
    pub batch_rows_max: usize,
}

/// Which image models a check wants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImageModels {
    pub open_nsfw: bool,
    pub nsfwjs: bool,
}

impl ImageModels {
    /// The image models a worker built from `models` can run.
    pub fn loaded(models: Option<&WorkerModels>) -> ImageModels {
        ImageModels {
            open_nsfw: models.is_some_and(|m| m.open_nsfw.is_some()),
            nsfwjs: models.is_some_and(|m| m.nsfwjs.is_some()),
        }
    }
}

/// Scores of one image, and where the time went.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImageScores {
    /// P(nsfw).
    pub open_nsfw: Option<f32>,
    /// [drawing, hentai, neutral, porn, sexy].
    pub nsfwjs: Option<[f32; 5]>,
    pub format: Option<Format>,
    pub decode_us: u64,
    /// Time to make each model's input (open-NSFW, nsfwjs), for the models that ran.
    pub resize_us: [Option<u64>; 2],
    /// This image's share of each model's batch run (open-NSFW, nsfwjs).
    pub model_us: [Option<u64>; 2],
}

/// An image job's answer: the scores, or why the image does not decode; and the caller's
/// buffer back for reuse.
pub struct ImageOutcome {
    pub bytes: Vec<u8>,
    pub scores: Result<ImageScores, ImageError>,
}

type Reply<T> = oneshot::Sender<Result<T, String>>;

/// tox-block's raw sigmoid outputs per window, and this job's share of the run, microseconds.
pub type ToxblockOutcome = (Vec<[f32; 6]>, u64);

struct ToxblockJob {
    /// `ids.len() / 100` windows of 100 token ids.
    ids: Vec<i32>,
    reply: Reply<ToxblockOutcome>,
}

struct ImageJob {
    bytes: Vec<u8>,
    probe: Probe,
    models: ImageModels,
    reply: oneshot::Sender<ImageOutcome>,
}

enum Job {
    Toxblock(ToxblockJob),
    Image(ImageJob),
}

/// The shard's end of its worker.
pub struct Worker {
    jobs: SyncSender<Job>,
    /// Jobs submitted and not answered yet (waiting or running).
    pending: Rc<Cell<usize>>,
    queue_depth_max: usize,
}

/// Counts a job as pending for as long as its caller waits, even if the caller goes away.
struct PendingGuard(Rc<Cell<usize>>);

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
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
        let (jobs, queue) = mpsc::sync_channel(config.queue_depth_max);
        let (ready_tx, ready_rx) = oneshot::channel();
        std::thread::Builder::new()
            .name(format!("modgate-model-{index}"))
            .spawn(move || {
                lower_priority_and_pin(cpu);
                match Sessions::open(&models) {
                    Ok(sessions) => {
                        let _ = ready_tx.send(Ok(()));
                        serve(queue, sessions, config);
                    }
                    Err(error) => {
                        let _ = ready_tx.send(Err(error));
                    }
                }
            })?;
        let worker = Worker {
            jobs,
            pending: Rc::default(),
            queue_depth_max: config.queue_depth_max,
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

    /// Scores `ids` (`n × 100` token ids) with tox-block: raw sigmoid outputs per window.
    pub async fn toxblock(&self, ids: Vec<i32>) -> ApiResult<ToxblockOutcome> {
        let (reply, result) = oneshot::channel();
        let _pending = self.submit(Job::Toxblock(ToxblockJob { ids, reply }))?;
        match result.await {
            Ok(Ok(scores)) => Ok(scores),
            Ok(Err(error)) => {
                tracing::error!(%error, "tox-block run failed");
                Err(ApiError::internal("a model run failed"))
            }
            Err(oneshot::Canceled) => Err(ApiError::internal("the model worker stopped")),
        }
    }

    /// Decodes and scores an image; the buffer comes back with the outcome.
    pub async fn image(
        &self,
        bytes: Vec<u8>,
        probe: Probe,
        models: ImageModels,
    ) -> ApiResult<ImageOutcome> {
        let (reply, result) = oneshot::channel();
        let _pending = self.submit(Job::Image(ImageJob {
            bytes,
            probe,
            models,
            reply,
        }))?;
        result
            .await
            .map_err(|_| ApiError::internal("the model worker stopped"))
    }

    fn submit(&self, job: Job) -> ApiResult<PendingGuard> {
        self.jobs.try_send(job).map_err(|error| match error {
            TrySendError::Full(_) => busy(),
            TrySendError::Disconnected(_) => ApiError::internal("the model worker stopped"),
        })?;
        self.pending.set(self.pending.get() + 1);
        Ok(PendingGuard(self.pending.clone()))
    }
}

/// 503 `busy`: the shard's model queue is full.
pub fn busy() -> ApiError {
    ApiError::new(
        ErrorKind::Busy,
        "the model queue of this server is full; retry shortly",
    )
    .with_retry_after(1)
}

struct Sessions {
    toxblock: Option<Session>,
    open_nsfw: Option<Session>,
    nsfwjs: Option<Session>,
}

impl Sessions {
    fn open(models: &WorkerModels) -> Result<Sessions, String> {
        let open = |path: &Option<PathBuf>| {
            path.as_deref()
                .map(|path| open_session(&models.environment, path))
                .transpose()
        };
        Ok(Sessions {
            toxblock: open(&models.toxblock)?,
            open_nsfw: open(&models.open_nsfw)?,
            nsfwjs: open(&models.nsfwjs)?,
        })
    }
}

/// The worker's loop: take a job, gather the jobs of the same kind waiting behind it (up to
/// `batch_rows_max` rows), run them as one batch, answer each.
fn serve(queue: Receiver<Job>, mut sessions: Sessions, config: WorkerConfig) {
    let mut held: Option<Job> = None;
    loop {
        let first = match held.take() {
            Some(job) => job,
            None => match queue.recv() {
                Ok(job) => job,
                Err(_) => return, // the shard is gone
            },
        };
        match first {
            Job::Toxblock(job) => {
                let mut rows = job.ids.len() / 100;
                let mut batch = vec![job];
                while rows < config.batch_rows_max {
                    match queue.try_recv() {
                        Ok(Job::Toxblock(job)) => {
                            rows += job.ids.len() / 100;
                            batch.push(job);
                        }
                        Ok(other) => {
                            held = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                run_toxblock_batch(sessions.toxblock.as_mut(), batch);
            }
            Job::Image(job) => {
                let mut batch = vec![job];
                while batch.len() < config.batch_rows_max {
                    match queue.try_recv() {
                        Ok(Job::Image(job)) => batch.push(job),
                        Ok(other) => {
                            held = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                run_image_batch(&mut sessions, batch);
            }
        }
    }
}

fn run_toxblock_batch(session: Option<&mut Session>, batch: Vec<ToxblockJob>) {
    let Some(session) = session else {
        for job in batch {
            let _ = job.reply.send(Err("tox-block is not loaded".into()));
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
                let _ = job
                    .reply
                    .send(Ok((scores[at..at + count].to_vec(), share_us)));
                at += count;
            }
        }
        Err(error) => {
            for job in batch {
                let _ = job.reply.send(Err(error.clone()));
            }
        }
    }
}

/// One image's state through a batch.
struct Prepared {
    job: ImageJob,
    scores: Result<ImageScores, ImageError>,
}

/// Decodes and preprocesses each image, runs each model once over all of them, answers each.
/// A decoder that panics costs its request, not the worker.
fn run_image_batch(sessions: &mut Sessions, batch: Vec<ImageJob>) {
    let mut prepared = Vec::with_capacity(batch.len());
    let mut open_nsfw_inputs = Vec::new();
    let mut nsfwjs_inputs = Vec::new();
    let mut open_nsfw_rows = Vec::new();
    let mut nsfwjs_rows = Vec::new();
    for job in batch {
        let index = prepared.len();
        let scores = prepare(&job, sessions, &mut open_nsfw_inputs, &mut nsfwjs_inputs).map(
            |(scores, a, b)| {
                if a {
                    open_nsfw_rows.push(index);
                }
                if b {
                    nsfwjs_rows.push(index);
                }
                scores
            },
        );
        prepared.push(Prepared { job, scores });
    }
    let images = prepared.len().max(1) as u64;
    if let (false, Some(session)) = (open_nsfw_rows.is_empty(), sessions.open_nsfw.as_mut()) {
        let started = Instant::now();
        let result = open_nsfw_probs(session, open_nsfw_inputs);
        let share = started.elapsed().as_micros() as u64 / images;
        for (row, &index) in open_nsfw_rows.iter().enumerate() {
            set_score(&mut prepared[index], &result, "open-NSFW", |scores, all| {
                scores.open_nsfw = all.get(row).copied();
                scores.model_us[0] = Some(share);
            });
        }
    }
    if let (false, Some(session)) = (nsfwjs_rows.is_empty(), sessions.nsfwjs.as_mut()) {
        let started = Instant::now();
        let result = nsfwjs_probs(session, nsfwjs_inputs);
        let share = started.elapsed().as_micros() as u64 / images;
        for (row, &index) in nsfwjs_rows.iter().enumerate() {
            set_score(&mut prepared[index], &result, "nsfwjs", |scores, all| {
                scores.nsfwjs = all.get(row).copied();
                scores.model_us[1] = Some(share);
            });
        }
    }
    for Prepared { job, scores } in prepared {
        let _ = job.reply.send(ImageOutcome {
            bytes: job.bytes,
            scores,
        });
    }
}

fn set_score<T>(
    prepared: &mut Prepared,
    result: &Result<Vec<T>, String>,
    model: &str,
    set: impl FnOnce(&mut ImageScores, &Vec<T>),
) {
    match (result, prepared.scores.as_mut()) {
        (Ok(all), Ok(scores)) => set(scores, all),
        (Err(error), Ok(_)) => {
            tracing::error!(%error, model, "image model run failed");
            prepared.scores = Err(ImageError::Corrupt(format!("{model} could not score it")));
        }
        (_, Err(_)) => {}
    }
}

/// Decodes one image and appends each wanted model's input; says which models got a row.
fn prepare(
    job: &ImageJob,
    sessions: &Sessions,
    open_nsfw_inputs: &mut Vec<f32>,
    nsfwjs_inputs: &mut Vec<f32>,
) -> Result<(ImageScores, bool, bool), ImageError> {
    let started = Instant::now();
    let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        decode(&job.bytes, &job.probe, IMAGE_MIN_SIDE)
    }));
    let image = decoded.unwrap_or_else(|_| {
        Err(ImageError::Corrupt(
            "the decoder failed on this file".into(),
        ))
    })?;
    let mut scores = ImageScores {
        format: Some(job.probe.format),
        decode_us: started.elapsed().as_micros() as u64,
        ..ImageScores::default()
    };
    let open_nsfw = job.models.open_nsfw && sessions.open_nsfw.is_some();
    if open_nsfw {
        let started = Instant::now();
        let at = open_nsfw_inputs.len();
        open_nsfw_inputs.resize(at + INPUT_LEN, 0.0);
        if let Err(error) = opennsfw_input(&image, &mut open_nsfw_inputs[at..]) {
            open_nsfw_inputs.truncate(at);
            return Err(error);
        }
        scores.resize_us[0] = Some(started.elapsed().as_micros() as u64);
    }
    let nsfwjs = job.models.nsfwjs && sessions.nsfwjs.is_some();
    if nsfwjs {
        let started = Instant::now();
        let at = nsfwjs_inputs.len();
        nsfwjs_inputs.resize(at + INPUT_LEN, 0.0);
        nsfwjs_input(&image, &mut nsfwjs_inputs[at..]);
        scores.resize_us[1] = Some(started.elapsed().as_micros() as u64);
    }
    Ok((scores, open_nsfw, nsfwjs))
}

/// Pins the calling thread to `cpu` and lowers its priority below the reactor's.
fn lower_priority_and_pin(cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        let mut set = nix::sched::CpuSet::new();
        if set.set(cpu).is_ok() {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
        }
    }
    // SAFETY: setpriority(2) takes plain integers and touches no memory of ours; on Linux
    // PRIO_PROCESS with who = 0 applies to the calling thread only.
    let result = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, WORKER_NICE) };
    if result != 0 {
        tracing::warn!("could not lower the model worker's priority");
    }
}
