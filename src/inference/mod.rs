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
pub mod ocr;
pub mod repeats;
pub mod run;
pub mod share;
pub mod worker;

use std::path::{Path, PathBuf};

use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;

pub use run::{encoder_embeddings, image_rows, toxblock_probs};
pub use worker::{ImageJobScores, ImageOutcome, Worker, WorkerConfig, WorkerModels};

use crate::image::tensor::{Layout, TensorRecipe};
use crate::image::{ImageError, Rgb8};

/// A model file this build knows, relative to the models directory. `name` is also the
/// model's label in metrics and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelSpec {
    pub name: &'static str,
    pub file: &'static str,
    pub sha256: &'static str,
}

/// How the model worker runs an image model: what it reads from the decoded image, the tensor
/// it makes of it and the output it reads back. The check that owns the model says what the
/// output means ([`crate::checks::registry`]); the worker knows only this.
#[derive(Debug)]
pub struct ImageModelSpec {
    pub model: ModelSpec,
    /// The smallest side of the decoded image its input needs (the decoder may scale down to
    /// this, never below).
    pub min_side_px: usize,
    /// One image's input without the batch: [height, width, channels].
    pub input_hwc: [usize; 3],
    /// How the input tensor is laid out.
    pub layout: Layout,
    /// The input and output the model is run with; empty for the model's only one.
    pub input_name: &'static str,
    pub output_name: &'static str,
    /// Values per image in the output.
    pub output_columns: usize,
    /// How one image's input is made.
    pub prepare: Prepare,
    /// Declared in the configuration (`[[models.custom]]`) rather than shipped: the server
    /// does not start without it.
    pub declared: bool,
    /// Opened by a shard's worker when a job first wants it rather than at start: a large
    /// model that no shipped workflow names costs no memory until a workflow does. Its
    /// `min_side_px` raises the decoded size only for the jobs that want it.
    pub open_on_first_use: bool,
}

/// How the model worker runs a text encoder: token ids in (one row per window of a text, each
/// row already framed by its special tokens), one embedding per row out. The check that owns
/// the encoder tokenizes and reads the embeddings ([`crate::checks::harm`]); the worker knows
/// only this.
#[derive(Debug)]
pub struct TextEncoderSpec {
    pub model: ModelSpec,
    /// The id rows are padded with, on the right, where the attention mask is 0.
    pub pad_id: i64,
    /// Tokens of one row, at most: a job's rows are refused above it.
    pub row_tokens_max: usize,
    /// Values of one embedding.
    pub dim: usize,
    pub input_ids: &'static str,
    pub attention_mask: &'static str,
    /// The output read: `[rows, dim]`.
    pub output: &'static str,
}

/// How one image's input is made from the decoded image.
#[derive(Debug)]
pub enum Prepare {
    /// The shipped model's own code, matching how it was trained.
    Code(fn(&Rgb8, &mut [f32]) -> Result<(), ImageError>),
    /// A declared recipe.
    Recipe(TensorRecipe),
}

impl ImageModelSpec {
    /// Floats of one image's input.
    pub fn input_len(&self) -> usize {
        self.input_hwc.iter().product()
    }

    /// Writes one image's input (`input_len()` floats) into `out`.
    pub fn prepare(&self, image: &Rgb8, out: &mut [f32]) -> Result<(), ImageError> {
        match &self.prepare {
            Prepare::Code(prepare) => prepare(image, out),
            Prepare::Recipe(recipe) => {
                recipe.write(image, out);
                Ok(())
            }
        }
    }
}

/// The variable that keeps ONNX Runtime's uploader from starting (read by the library when it
/// sets up its telemetry, before any API call of ours could turn it off).
pub const TELEMETRY_SWITCH: &str = "ORT_DISABLE_TELEMETRY";

/// Keeps ONNX Runtime from phoning home (issue 14, defect 4). Microsoft's Linux builds (the
/// wheel's library is one) start a 1DS uploader to `mobile.events.data.microsoft.com` when the
/// environment is created, and `DisableTelemetryEvents` afterwards does not stop the events
/// already queued (a test in a network namespace saw `CONNECT` through a proxy with it). Only
/// the variable set before the library initializes keeps the uploader from starting; it is
/// set whatever the caller's environment says.
///
/// Call it at the start of `main`, before any thread is spawned: changing the environment
/// while another thread reads it (C's `getenv` takes no lock) is a data race.
pub fn disable_runtime_telemetry() {
    std::env::set_var(TELEMETRY_SWITCH, "1");
}

/// Loads the ONNX Runtime library and creates the process's one environment. Refused unless
/// [`disable_runtime_telemetry`] ran first, so that no path reaches the runtime with its
/// uploader on.
pub fn load_runtime(library: &Path) -> Result<Environment, String> {
    if std::env::var_os(TELEMETRY_SWITCH).as_deref() != Some("1".as_ref()) {
        return Err(format!(
            "{TELEMETRY_SWITCH} is not 1: call inference::disable_runtime_telemetry() at the start of main"
        ));
    }
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
    // Off here too, for builds that honour only the API.
    builder
        .with_name("modgate")
        .with_telemetry(false)
        .build()
        .map_err(|error| format!("starting ONNX Runtime: {error}"))
}

/// Checks that a model file is there and is the one this build was made for.
pub fn verify_model(models_dir: &Path, spec: &ModelSpec) -> Result<PathBuf, String> {
    let path = models_dir.join(spec.file);
    let bytes = std::fs::read(&path)
        .map_err(|error| format!("model {}: reading {}: {error}", spec.name, path.display()))?;
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    let hex = crate::image::hashes::hex(digest.as_ref());
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

/// The models a server loads, checked once at start-up in the main thread.
pub struct Preflight {
    pub models: Option<WorkerModels>,
    /// Why something is missing, for the start-up log (empty when everything loaded).
    pub problems: Vec<String>,
}

/// Loads the runtime and checks every model of `specs` (hash, and one trial session whose
/// input and output must match the model's entry in `images`, for an image model). With
/// `required`, any problem is an error; a problem with a declared model (`[[models.custom]]`)
/// always is.
pub fn preflight(
    models_dir: &Path,
    library: &Path,
    specs: &[ModelSpec],
    images: &[&ImageModelSpec],
    required: bool,
) -> Result<Preflight, String> {
    let mut problems = Vec::new();
    let mut fatal = Vec::new();
    let environment = match load_runtime(library) {
        Ok(environment) => Some(environment),
        Err(error) => {
            problems.push(error);
            None
        }
    };
    let mut found = Vec::new();
    for spec in specs {
        let image = images.iter().find(|image| image.model == *spec);
        let checked = match &environment {
            None => Err(format!("model {}: no ONNX Runtime to load it", spec.name)),
            Some(environment) => verify_model(models_dir, spec).and_then(|path| {
                let mut session = open_session(environment, &path)?;
                if let Some(image) = image {
                    run::check_outlets(&mut session, image).map_err(|error| {
                        format!("model {} ({}): {error}", spec.name, path.display())
                    })?;
                }
                Ok(path)
            }),
        };
        match checked {
            Ok(path) => found.push((*spec, path)),
            Err(error) if image.is_some_and(|image| image.declared) => fatal.push(error),
            // Without a runtime every model is missing; the runtime's problem says why.
            Err(_) if environment.is_none() => {}
            Err(error) => problems.push(error),
        }
    }
    if !fatal.is_empty() {
        return Err(format!(
            "{} (a model of models.custom must load: fix its declaration or remove it)",
            fatal.join("; ")
        ));
    }
    if required && !problems.is_empty() {
        return Err(format!(
            "{} (set models.required = false to start without it)",
            problems.join("; ")
        ));
    }
    Ok(Preflight {
        models: environment.map(|environment| WorkerModels { environment, found }),
        problems,
    })
}
