//! The model files this build knows and how they are opened: their specs (file, hash, and
//! for an image model its tensor recipe and outlets), the ONNX Runtime library, the check of a
//! file against its pinned hash, and the sessions.

use std::path::{Path, PathBuf};

use ort::environment::Environment;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;

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

/// A session with no thread pools of its own: the worker thread is the only thread. Its
/// tensors come from ONNX Runtime's arena, which keeps the most a run ever needed: right for a
/// model whose input has one size (an image classifier's 224 x 224, the text encoder's
/// windows).
pub fn open_session(environment: &Environment, path: &Path) -> Result<Session, String> {
    open(environment, path, true)
}

/// [`open_session`] for a network whose input follows the image's size (the face detector
/// and the OCR's, up to 2 MP): without the arena and the memory pattern, its tensors are
/// allocated for each run and freed after it (blocks this large are their own mappings, so
/// they go back to the system), instead of the arena keeping the largest image's. Measured on
/// twelve images of 0.3 to 1.8 MP through a workflow of OCR and faces (one shard): resident
/// memory 556 MB idle, 1,176 MB after them and still 30 s later with the arena; 593 MB
/// without.
pub fn open_session_unpooled(environment: &Environment, path: &Path) -> Result<Session, String> {
    open(environment, path, false)
}

fn open(environment: &Environment, path: &Path, pooled: bool) -> Result<Session, String> {
    let build = || -> ort::Result<Session> {
        let builder = Session::builder(environment)?
            .with_intra_threads(1)?
            .with_inter_threads(1)?
            .with_parallel_execution(false)?
            .with_config_entry("session.intra_op.allow_spinning", "0")?
            .with_config_entry("session.inter_op.allow_spinning", "0")?
            .with_optimization_level(GraphOptimizationLevel::Level3)?;
        let mut builder = if pooled {
            builder
        } else {
            builder
                .with_memory_pattern(false)?
                .with_execution_providers([ort::ep::CPU::default()
                    .with_arena_allocator(false)
                    .build()])?
        };
        builder.commit_from_file(path)
    };
    build().map_err(|error| format!("loading {}: {error}", path.display()))
}

/// What a shard's worker may run: the models that passed the start-up checks, by spec.
#[derive(Clone)]
pub struct WorkerModels {
    pub environment: Environment,
    pub found: Vec<(ModelSpec, PathBuf)>,
}

impl WorkerModels {
    /// The models of `specs` under `models_dir`, each verified ([`verify_model`]): for
    /// tools, tests and benchmarks that run a set of networks outside a server.
    pub fn verified(
        environment: &Environment,
        models_dir: &std::path::Path,
        specs: &[ModelSpec],
    ) -> Result<WorkerModels, String> {
        let found = specs
            .iter()
            .map(|spec| verify_model(models_dir, spec).map(|path| (*spec, path)))
            .collect::<Result<_, _>>()?;
        Ok(WorkerModels {
            environment: environment.clone(),
            found,
        })
    }

    pub fn path_of(&self, spec: &ModelSpec) -> Option<&PathBuf> {
        self.found
            .iter()
            .find(|(found, _)| found == spec)
            .map(|(_, path)| path)
    }
}
