//! The start-up check of the models a server loads: the runtime, each file's hash, and one
//! trial session of each image model whose inputs and outputs must match its spec.

use std::path::Path;

use super::models::{
    load_runtime, open_session, verify_model, ImageModelSpec, ModelSpec, WorkerModels,
};
use super::run;

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
