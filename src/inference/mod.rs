//! Model runs off the reactor: one ONNX Runtime worker thread beside each shard.
//!
//! A model run takes milliseconds, a request parse microseconds; running models on the
//! shard's executor would freeze every connection of that core meanwhile. So each shard has a
//! worker thread, pinned to the shard's CPU. How the shard's thread and its worker share that
//! core is [`share`]'s: by default the worker runs only when the shard has nothing to do, and
//! the shard pauses its checks to leave the worker `inference.worker_share` of the core while
//! it has jobs, so neither a flood of texts starves the images nor the images hold up a light
//! request. The worker owns the shard's sessions (one per model, `run` needs `&mut`), so
//! sessions are never shared between threads.
//!
//! The queue between shard and worker is bounded (`inference.queue_depth_max`); a full queue
//! answers 503 `busy` with `Retry-After` at once instead of queueing without end. Jobs of the
//! same model that wait together are run as one batch (`inference.batch_rows_max`), which
//! costs far less than separate runs.
//!
//! Results come back on a oneshot channel; glommio wakes the waiting task from the worker
//! thread (a foreign wake).
//!
//! With `inference.image_results_kept`, a shard keeps image results for files sent again byte
//! for byte ([`repeats`]), and looks a file up before it sends the worker a job.
//!
//! ONNX Runtime itself is loaded once per process ([`load_runtime`]) from the library the
//! README's first command fetched (`models/cache/libonnxruntime.so.1.31.1`).

pub mod faces;
mod models;
pub mod ocr;
mod preflight;
pub mod repeats;
pub mod run;
pub mod share;
pub mod worker;

pub use models::{
    disable_runtime_telemetry, load_runtime, open_session, verify_model, ImageModelSpec, ModelSpec,
    Prepare, TextEncoderSpec, WorkerModels, TELEMETRY_SWITCH,
};
pub use preflight::{preflight, Preflight};
pub use run::{encoder_embeddings, image_rows, toxblock_probs};
pub use worker::{ImageJobScores, ImageOutcome, Worker, WorkerConfig};
