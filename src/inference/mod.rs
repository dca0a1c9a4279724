//! Model runs off the reactor: one ONNX Runtime worker thread beside each shard.
//!
//! A model run takes milliseconds, a request parse microseconds; running models on the
//! shard's executor would freeze every connection of that core meanwhile. So each shard has a
//! worker thread, pinned to the shard's CPU and niced ([`WORKER_NICE`]) so that the
//! scheduler runs the reactor first whenever it has work: health checks and fast text checks
//! keep their latency while images are scored. The worker owns the shard's sessions (one per
//! model, `run` needs `&mut`), so sessions are never shared between threads.
//!
//! The queue between shard and worker is bounded (`inference.queue_depth_max`); a full queue
//! answers 503 `busy` with `Retry-After` at once instead of queueing without end. Jobs of the
//! same model that wait together are run as one batch (`inference.batch_rows_max`), which
//! costs far less than separate runs.
//!
//! Results come back on a oneshot channel; glommio wakes the waiting task from the worker
//! thread (a foreign wake).
//!
//! ONNX Runtime itself is loaded once per process ([`load_runtime`]) from the library the
//! README's first command fetched (`models/cache/libonnxruntime.so.1.31.1`).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};

use futures_channel::oneshot;
use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;

use crate::error::{ApiError, ApiResult, ErrorKind};

/// Scheduling niceness of worker threads: below the reactor's 0.
pub const WORKER_NICE: i32 = 10;

/// A model file this build knows, relative to the models directory.
#[derive(Clone, Copy, Debug)]
pub struct ModelSpec {
    pub name: &'static str,
    pub file: &'static str,
    pub sha256: &'static str,
}

pub const TOXBLOCK: ModelSpec = ModelSpec {
    name: "toxblock",
    file: crate::checks::toxblock::MODEL_FILE,
    sha256: crate::checks::toxblock::MODEL_SHA256,
};

/// Every model this build can load.
pub const MODELS: &[ModelSpec] = &[TOXBLOCK];

/// Loads the ONNX Runtime library and creates the process's one environment.
pub fn load_runtime(library: &Path) -> Result<Environment, String> {
    if !library.exists() {
        return Err(format!(
            "the ONNX Runtime library {} is missing: run `python3 models/fetch.py` (or `make serve`)",
            library.display()
        ));
    }
    let builder = ort::init_from(library).map_err(|error| {
        format!(
            "loading the ONNX Runtime library {}: {error}",
            library.display()
        )
    })?;
    builder
        .with_name("modgate")
        .build()
        .map_err(|error| format!("starting ONNX Runtime: {error}"))
}

/// Checks that a model file is there and is the one this build was made for.
pub fn verify_model(models_dir: &Path, spec: &ModelSpec) -> Result<PathBuf, String> {
    let path = models_dir.join(spec.file);
    let bytes = std::fs::read(&path)
        .map_err(|error| format!("model {}: reading {}: {error}", spec.name, path.display()))?;
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    if hex != spec.sha256 {
        return Err(format!(
            "model {}: {} has sha256 {hex}, expected {} (a wrong or damaged file)",
            spec.name,
            path.display(),
            spec.sha256
        ));
    }
    Ok(path)
}

/// A session with no thread pools of its own: the worker thread is the only thread.
pub fn open_session(environment: &Environment, path: &Path) -> Result<Session, String> {
    let build = || -> ort::Result<Session> {
        Session::builder(environment)?
            .with_intra_threads(1)?
            .with_inter_threads(1)?
            .with_parallel_execution(false)?
            .with_config_entry("session.intra_op.allow_spinning", "0")?
            .with_config_entry("session.inter_op.allow_spinning", "0")?
            .with_optimization_level(GraphOptimizationLevel::Level3)?
            .commit_from_file(path)
    };
    build().map_err(|error| format!("loading {}: {error}", path.display()))
}

/// What a shard's worker may run: the models that passed [`verify_model`].
#[derive(Clone)]
pub struct WorkerModels {
    pub environment: Environment,
    pub toxblock: Option<PathBuf>,
}

type Reply<T> = oneshot::Sender<Result<T, String>>;
/// The rows of one tox-block job and where its scores go.
type ToxblockJob = (Vec<i32>, Reply<Vec<[f32; 6]>>);

enum Job {
    /// `ids` holds `ids.len() / 100` windows of 100 token ids.
    Toxblock {
        ids: Vec<i32>,
        reply: Reply<Vec<[f32; 6]>>,
    },
}

/// The shard's end of its worker.
pub struct Worker {
    jobs: SyncSender<Job>,
}

/// Settings of workers (`[inference]` in the configuration).
#[derive(Clone, Copy, Debug)]
pub struct WorkerConfig {
    pub queue_depth_max: usize,
    pub batch_rows_max: usize,
}

impl Worker {
    /// Starts the worker of shard `index` on `cpu`. The receiver reports once its sessions
    /// are loaded (or why they could not be).
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
                let sessions = match Sessions::open(&models) {
                    Ok(sessions) => {
                        let _ = ready_tx.send(Ok(()));
                        sessions
                    }
                    Err(error) => {
                        let _ = ready_tx.send(Err(error));
                        return;
                    }
                };
                serve(queue, sessions, config);
            })?;
        Ok((Worker { jobs }, ready_rx))
    }

    /// Scores `ids` (`n × 100` token ids) with tox-block: raw sigmoid outputs per window.
    pub async fn toxblock(&self, ids: Vec<i32>) -> ApiResult<Vec<[f32; 6]>> {
        let (reply, result) = oneshot::channel();
        self.submit(Job::Toxblock { ids, reply })?;
        finish(result.await)
    }

    fn submit(&self, job: Job) -> ApiResult<()> {
        self.jobs.try_send(job).map_err(|error| match error {
            TrySendError::Full(_) => ApiError::new(
                ErrorKind::Busy,
                "the model queue of this server is full; retry shortly",
            )
            .with_retry_after(1),
            TrySendError::Disconnected(_) => ApiError::internal("the model worker stopped"),
        })
    }
}

fn finish<T>(result: Result<Result<T, String>, oneshot::Canceled>) -> ApiResult<T> {
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => {
            tracing::error!(%error, "model run failed");
            Err(ApiError::internal("a model run failed"))
        }
        Err(oneshot::Canceled) => Err(ApiError::internal("the model worker stopped")),
    }
}

struct Sessions {
    toxblock: Option<Session>,
}

impl Sessions {
    fn open(models: &WorkerModels) -> Result<Sessions, String> {
        Ok(Sessions {
            toxblock: models
                .toxblock
                .as_deref()
                .map(|path| open_session(&models.environment, path))
                .transpose()?,
        })
    }
}

/// The worker's loop: take a job, gather the jobs of the same model that wait behind it (up
/// to `batch_rows_max` rows), run them as one batch, answer each.
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
            Job::Toxblock { ids, reply } => {
                let mut batch = vec![(ids, reply)];
                let mut rows = batch[0].0.len() / 100;
                while rows < config.batch_rows_max {
                    match queue.try_recv() {
                        Ok(Job::Toxblock { ids, reply }) => {
                            rows += ids.len() / 100;
                            batch.push((ids, reply));
                        }
                        Err(_) => break,
                    }
                }
                run_toxblock_batch(sessions.toxblock.as_mut(), batch);
            }
        }
    }
}

fn run_toxblock_batch(session: Option<&mut Session>, batch: Vec<ToxblockJob>) {
    let Some(session) = session else {
        for (_, reply) in batch {
            let _ = reply.send(Err("tox-block is not loaded".into()));
        }
        return;
    };
    let counts: Vec<usize> = batch.iter().map(|(ids, _)| ids.len() / 100).collect();
    let all: Vec<i32> = batch
        .iter()
        .flat_map(|(ids, _)| ids.iter().copied())
        .collect();
    let outcome = toxblock_probs(session, all);
    match outcome {
        Ok(scores) => {
            let mut at = 0;
            for ((_, reply), count) in batch.into_iter().zip(counts) {
                let _ = reply.send(Ok(scores[at..at + count].to_vec()));
                at += count;
            }
        }
        Err(error) => {
            for (_, reply) in batch {
                let _ = reply.send(Err(error.clone()));
            }
        }
    }
}

/// Runs tox-block on `ids` (`n × 100` token ids): the raw sigmoid outputs, one row per window.
pub fn toxblock_probs(session: &mut Session, ids: Vec<i32>) -> Result<Vec<[f32; 6]>, String> {
    let rows = ids.len() / 100;
    let input = Tensor::from_array(([rows, 100usize], ids)).map_err(|e| e.to_string())?;
    let outputs = session
        .run(ort::inputs!["input_ids" => input])
        .map_err(|e| e.to_string())?;
    let (_, probs) = outputs["probs"]
        .try_extract_tensor::<f32>()
        .map_err(|e| e.to_string())?;
    if probs.len() != rows * 6 {
        return Err(format!(
            "tox-block gave {} values for {rows} rows",
            probs.len()
        ));
    }
    Ok(probs
        .chunks_exact(6)
        .map(|row| std::array::from_fn(|i| row[i]))
        .collect())
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

/// The models a server loads, checked once at start-up in the main thread.
pub struct Preflight {
    pub models: Option<WorkerModels>,
    /// Why something is missing, for the start-up log (empty when everything loaded).
    pub problems: Vec<String>,
}

/// Loads the runtime and checks every model (hash, and one trial session). With `required`,
/// any problem is an error.
pub fn preflight(models_dir: &Path, library: &Path, required: bool) -> Result<Preflight, String> {
    let mut problems = Vec::new();
    let environment = match load_runtime(library) {
        Ok(environment) => Some(environment),
        Err(error) => {
            problems.push(error);
            None
        }
    };
    let mut toxblock = None;
    if let Some(environment) = &environment {
        match verify_model(models_dir, &TOXBLOCK)
            .and_then(|path| open_session(environment, &path).map(|_| path))
        {
            Ok(path) => toxblock = Some(path),
            Err(error) => problems.push(error),
        }
    }
    if required && !problems.is_empty() {
        return Err(format!(
            "{} (set models.required = false to start without it)",
            problems.join("; ")
        ));
    }
    Ok(Preflight {
        models: environment.map(|environment| WorkerModels {
            environment,
            toxblock,
        }),
        problems,
    })
}
