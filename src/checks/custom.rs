//! The operator's own image classifiers: `[[models.custom]]` in the configuration. Each is
//! an ONNX model declared with its file and sha256, its input (size, how the image is fitted
//! to it, channel order, layout, mean and scale), its labels in output order, what its output
//! is (probabilities, logits, or independent logits) and which labels are categories. It
//! becomes a check a workflow names like a shipped one, run on the shard's model worker in
//! the same batches, and its categories are scored, thresholded, reasoned and journalled like
//! the shipped ones. This is how a platform adds weapons, drugs or gore models that no registry
//! ships.
//!
//! The declarations are validated with the configuration ([`validate`], every error naming
//! its field), added to the process's registry once at start ([`register`]; a check and a
//! model spec per declaration, leaked: they live as long as the process, like the shipped
//! `const`s), and the model is refused at start unless its input and output match the
//! declaration ([`crate::inference::preflight`]). A declared model that does not load stops
//! the server whatever `models.required` says: it was asked for by name.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use serde::Deserialize;

use super::board::ScoreBoard;
use super::categories;
use super::registry::{self, Check, ImageScore, Runner};
use crate::bounds::is_name_of;
use crate::content::ContentKind;
use crate::image::hashes::parse_hex;
use crate::image::tensor::{ColourOrder, Fit, Layout, TensorRecipe};
use crate::inference::{ImageModelSpec, ModelSpec, Prepare};

/// Declared models, at most (the worker runs at most 64 image models, the shipped included).
pub const CUSTOM_MODELS_MAX: usize = 16;
/// The longest side of a declared model's input, in pixels. The worker decodes every image
/// to at least the largest model input (so a 512-px model also changes what the shipped
/// models see), and holds a batch of inputs: 32 images of 512 x 512 are 100 MB of floats.
pub const CUSTOM_INPUT_SIDE_MAX: usize = 512;
/// Labels of one declared model, at most.
pub const CUSTOM_LABELS_MAX: usize = 4096;
/// The longest check name, label or category id, in bytes.
pub const CUSTOM_NAME_BYTES_MAX: usize = 64;

/// One `[[models.custom]]` table.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CustomModel {
    /// The check's name, as workflows and reasons name it.
    pub name: String,
    /// The ONNX file: absolute, or relative to the models directory.
    pub file: PathBuf,
    /// Its SHA-256, in hex: a different file is refused.
    pub sha256: String,
    /// `[height, width]` of the model's input, in pixels.
    pub input_size: [usize; 2],
    #[serde(default)]
    pub layout: Layout,
    #[serde(default)]
    pub colour: ColourOrder,
    #[serde(default)]
    pub fit: Fit,
    /// Per channel in the model's order; each value is `(pixel - mean) * scale`, the pixel
    /// from 0 to 255.
    #[serde(default)]
    pub mean: [f32; 3],
    #[serde(default = "unit_scale")]
    pub scale: [f32; 3],
    /// The input and output to use; empty for the model's only one.
    #[serde(default)]
    pub input_name: String,
    #[serde(default)]
    pub output_name: String,
    /// The output's labels, in its order.
    pub labels: Vec<String>,
    #[serde(default)]
    pub output: Output,
    /// Label -> category: the labels that are categories, and the category each scores (a
    /// new id, or a shipped one such as `nudity`, where the best model wins).
    pub categories: BTreeMap<String, String>,
    /// The Sightengine `check.json` model this one answers, if any.
    #[serde(default)]
    pub sightengine: Option<SightengineModel>,
}

/// `sightengine`: the model of Sightengine's `/1.0/check.json` a declared model answers
/// (`weapon`, `gore-2.0`, ...), and for each field of that model's object (a dotted path,
/// `classes.firearm`) the category of this model that scores it. Fields without a category
/// are absent from the answer, never made up.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SightengineModel {
    pub model: String,
    pub fields: BTreeMap<String, String>,
}

/// Fields of one Sightengine model's answer, at most.
pub const SIGHTENGINE_FIELDS_MAX: usize = 64;
/// Levels of a field's path, at most (`firearm_action.aiming_threat` is 2).
pub const SIGHTENGINE_PATH_DEPTH_MAX: usize = 3;

/// A declared model's Sightengine answer, for the life of the process.
#[derive(Debug, PartialEq)]
pub struct SightengineAnswer {
    /// The model's name in `models=`.
    pub model: &'static str,
    /// The check that scores it.
    pub check: &'static str,
    /// Each field's path and the category it reads.
    pub fields: Vec<(Vec<&'static str>, &'static str)>,
}

fn unit_scale() -> [f32; 3] {
    [1.0 / 255.0; 3]
}

/// What a declared model's output holds.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Output {
    /// Probabilities summing to 1 (a softmax inside the model).
    #[default]
    Probabilities,
    /// Logits of one choice among the labels: a softmax is applied.
    Logits,
    /// Logits of independent labels (multi-label): a sigmoid is applied to each.
    Sigmoid,
}

/// How a declared model's output row becomes scores: the columns of each category.
#[derive(Debug)]
pub struct LabelScore {
    source: &'static str,
    output: Output,
    /// The categories scored, each once, in label order.
    categories: &'static [&'static str],
    /// `(column, index into categories)`.
    columns: Vec<(usize, usize)>,
}

impl LabelScore {
    /// Scores one output row. Labels of one category add up (the probability of any of
    /// them) unless they are independent (`sigmoid`), where the highest counts. A value that
    /// is not a number leaves its category unchecked rather than scored.
    pub fn score(&self, row: &[f32], board: &mut ScoreBoard) {
        let values: Vec<f64> = match self.output {
            Output::Probabilities => row.iter().map(|&v| f64::from(v)).collect(),
            Output::Logits => softmax(row),
            Output::Sigmoid => row.iter().map(|&v| sigmoid(f64::from(v))).collect(),
        };
        for (index, &category) in self.categories.iter().enumerate() {
            let mut combined = 0.0f64;
            for &(column, _) in self.columns.iter().filter(|(_, c)| *c == index) {
                let value = values.get(column).copied().unwrap_or(f64::NAN);
                combined = match self.output {
                    Output::Sigmoid => combined.max(value),
                    _ => combined + value,
                };
                if value.is_nan() {
                    combined = f64::NAN;
                    break;
                }
            }
            if combined.is_finite() {
                board.add(category, combined, self.source);
            } else {
                board.unavailable(&[category]);
            }
        }
    }
}

fn softmax(row: &[f32]) -> Vec<f64> {
    let top = row
        .iter()
        .map(|&v| f64::from(v))
        .fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = row.iter().map(|&v| (f64::from(v) - top).exp()).collect();
    let sum: f64 = exps.iter().sum();
    exps.iter().map(|e| e / sum).collect()
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Checks the declarations; the error names the field (`models.custom[1].labels`).
pub fn validate(models: &[CustomModel]) -> Result<(), String> {
    if models.len() > CUSTOM_MODELS_MAX {
        return Err(format!(
            "models.custom: {} models, at most {CUSTOM_MODELS_MAX}",
            models.len()
        ));
    }
    for (at, model) in models.iter().enumerate() {
        let field = |name: &str| format!("models.custom[{at}].{name}");
        if !crate::bounds::is_plain_name(&model.name, CUSTOM_NAME_BYTES_MAX) {
            return Err(format!(
                "{}: '{}' is not 1 to {CUSTOM_NAME_BYTES_MAX} of [a-z0-9_-]",
                field("name"),
                model.name
            ));
        }
        if registry::REGISTRY
            .iter()
            .any(|check| check.name == model.name)
            || models[..at]
                .iter()
                .any(|earlier| earlier.name == model.name)
        {
            return Err(format!(
                "{}: a check named '{}' exists already",
                field("name"),
                model.name
            ));
        }
        if model.file.as_os_str().is_empty() || model.file.to_str().is_none() {
            return Err(format!("{}: a UTF-8 path is needed", field("file")));
        }
        // Lowercase: the file's digest is compared as text (`inference::verify_model`).
        let hex = parse_hex::<32>(&model.sha256).is_some()
            && !model.sha256.bytes().any(|b| b.is_ascii_uppercase());
        if !hex {
            return Err(format!(
                "{}: 64 lowercase hex digits are needed",
                field("sha256")
            ));
        }
        if model
            .input_size
            .iter()
            .any(|&side| side == 0 || side > CUSTOM_INPUT_SIDE_MAX)
        {
            return Err(format!(
                "{}: each side from 1 to {CUSTOM_INPUT_SIDE_MAX} px",
                field("input_size")
            ));
        }
        if model.mean.iter().any(|v| !v.is_finite()) {
            return Err(format!("{}: finite numbers are needed", field("mean")));
        }
        if model.scale.iter().any(|v| !v.is_finite() || *v == 0.0) {
            return Err(format!(
                "{}: finite numbers other than 0 are needed",
                field("scale")
            ));
        }
        if model.labels.is_empty() || model.labels.len() > CUSTOM_LABELS_MAX {
            return Err(format!(
                "{}: 1 to {CUSTOM_LABELS_MAX} labels, in the output's order",
                field("labels")
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, label) in model.labels.iter().enumerate() {
            if label.is_empty() || label.len() > CUSTOM_NAME_BYTES_MAX {
                return Err(format!(
                    "{}: label {i} is empty or over {CUSTOM_NAME_BYTES_MAX} bytes",
                    field("labels")
                ));
            }
            if !seen.insert(label) {
                return Err(format!("{}: '{label}' twice", field("labels")));
            }
        }
        if model.categories.is_empty() {
            return Err(format!(
                "{}: name at least one label and the category it scores",
                field("categories")
            ));
        }
        for (label, category) in &model.categories {
            if !model.labels.contains(label) {
                return Err(format!(
                    "{}: '{label}' is not one of the labels",
                    field("categories")
                ));
            }
            if !is_name_of(category, CUSTOM_NAME_BYTES_MAX, b"_") {
                return Err(format!(
                    "{}: category '{category}' is not 1 to {CUSTOM_NAME_BYTES_MAX} of [a-z0-9_]",
                    field("categories")
                ));
            }
            // A shipped id means what the shipped checks score: only the image models' own
            // may be scored by another model too (`known_image` exempts from allow lists,
            // `qr_link` is a QR code's link, and so on).
            if categories::is_shipped(category) && !shipped_model_category(category) {
                return Err(format!(
                    "{}: '{category}' is a category of another kind of check; name a new one, or one the shipped image models score ({})",
                    field("categories"),
                    shipped_model_categories().join(", ")
                ));
            }
        }
        if let Some(answer) = &model.sightengine {
            validate_sightengine(answer, model, &models[..at])
                .map_err(|error| format!("{}: {error}", field("sightengine")))?;
        }
    }
    Ok(())
}

fn validate_sightengine(
    answer: &SightengineModel,
    model: &CustomModel,
    earlier: &[CustomModel],
) -> Result<(), String> {
    if !is_name_of(&answer.model, CUSTOM_NAME_BYTES_MAX, b"_-.") {
        return Err(format!(
            "model '{}' is not 1 to {CUSTOM_NAME_BYTES_MAX} of [a-z0-9_.-]",
            answer.model
        ));
    }
    let taken = earlier
        .iter()
        .filter_map(|other| other.sightengine.as_ref())
        .any(|other| other.model == answer.model);
    if taken {
        return Err(format!(
            "model '{}' is answered by an earlier model",
            answer.model
        ));
    }
    if answer.fields.is_empty() || answer.fields.len() > SIGHTENGINE_FIELDS_MAX {
        return Err(format!("fields: 1 to {SIGHTENGINE_FIELDS_MAX}"));
    }
    for (path, category) in &answer.fields {
        let segments: Vec<&str> = path.split('.').collect();
        let plain = segments.len() <= SIGHTENGINE_PATH_DEPTH_MAX
            && segments
                .iter()
                .all(|segment| is_name_of(segment, CUSTOM_NAME_BYTES_MAX, b"_"));
        if !plain {
            return Err(format!(
                "field '{path}' is not 1 to {SIGHTENGINE_PATH_DEPTH_MAX} dotted names of [a-z0-9_]"
            ));
        }
        // `classes` and `classes.knife` cannot both be: one is a number, the other an object.
        let nested = answer.fields.keys().any(|other| {
            other.len() > path.len()
                && other.starts_with(path.as_str())
                && other.as_bytes()[path.len()] == b'.'
        });
        if nested {
            return Err(format!("field '{path}' is both a score and an object"));
        }
        if !model.categories.values().any(|scored| scored == category) {
            return Err(format!(
                "field '{path}': '{category}' is not one of this model's categories"
            ));
        }
    }
    Ok(())
}

/// The Sightengine models the declared models answer.
static SIGHTENGINE: OnceLock<Vec<SightengineAnswer>> = OnceLock::new();

/// The declared model that answers Sightengine's `model`, if any.
pub fn sightengine_answer(model: &str) -> Option<&'static SightengineAnswer> {
    SIGHTENGINE
        .get()?
        .iter()
        .find(|answer| answer.model == model)
}

/// The Sightengine models the declared models answer, by name.
pub fn sightengine_models() -> impl Iterator<Item = &'static str> {
    SIGHTENGINE
        .get()
        .into_iter()
        .flatten()
        .map(|answer| answer.model)
}

/// The categories the shipped image models score, which a declared model may score too.
fn shipped_model_categories() -> Vec<&'static str> {
    let mut ids: Vec<&'static str> = registry::REGISTRY
        .iter()
        .filter(|check| matches!(check.runner, Runner::Image { .. }))
        .flat_map(|check| check.categories.iter().copied())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn shipped_model_category(id: &str) -> bool {
    shipped_model_categories().contains(&id)
}

/// The declarations this process registered.
static REGISTERED: OnceLock<Vec<CustomModel>> = OnceLock::new();

/// Validates the declarations and adds their checks and categories to this process, once;
/// called again (a reload, an admin command), it accepts the same declarations only.
pub fn register(models: &[CustomModel]) -> Result<(), String> {
    validate(models)?;
    if let Some(registered) = REGISTERED.get() {
        return if registered == models {
            Ok(())
        } else {
            Err(
                "models.custom changed: declared models are read at start; restart to change them"
                    .into(),
            )
        };
    }
    let _ = REGISTERED.set(models.to_vec());
    let mut described = Vec::new();
    let checks: Vec<&'static Check> = models
        .iter()
        .map(|model| leak_check(model, &mut described))
        .collect();
    let answers = models
        .iter()
        .zip(&checks)
        .filter_map(|(model, check)| {
            let answer = model.sightengine.as_ref()?;
            let fields = answer
                .fields
                .iter()
                .filter_map(|(path, category)| {
                    // Validated: the category is one of the check's.
                    let category = check.categories.iter().find(|id| *id == category)?;
                    Some((path.split('.').map(leak).collect(), *category))
                })
                .collect();
            Some(SightengineAnswer {
                model: leak(&answer.model),
                check: check.name,
                fields,
            })
        })
        .collect();
    let _ = SIGHTENGINE.set(answers);
    categories::declare(described);
    registry::declare(checks);
    Ok(())
}

fn leak(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

/// The check of a validated declaration, for the life of the process; its new categories'
/// titles and messages go to `described`.
fn leak_check(
    model: &CustomModel,
    described: &mut Vec<(&'static str, &'static str, &'static str)>,
) -> &'static Check {
    let name = leak(&model.name);
    let [height, width] = model.input_size;
    let spec: &'static ImageModelSpec = Box::leak(Box::new(ImageModelSpec {
        model: ModelSpec {
            name,
            file: leak(model.file.to_str().unwrap_or_default()),
            sha256: leak(&model.sha256),
        },
        min_side_px: height.max(width),
        input_hwc: [height, width, 3],
        layout: model.layout,
        input_name: leak(&model.input_name),
        output_name: leak(&model.output_name),
        output_columns: model.labels.len(),
        prepare: Prepare::Recipe(TensorRecipe {
            height,
            width,
            layout: model.layout,
            colour: model.colour,
            fit: model.fit,
            mean: model.mean,
            scale: model.scale,
        }),
        declared: true,
        open_on_first_use: false,
    }));
    let mut ids: Vec<&'static str> = Vec::new();
    let mut columns = Vec::new();
    for (column, label) in model.labels.iter().enumerate() {
        let Some(category) = model.categories.get(label) else {
            continue;
        };
        let index = match ids.iter().position(|id| id == category) {
            Some(index) => index,
            None => {
                let id = leak(category);
                if !categories::is_shipped(id) && !described.iter().any(|(d, _, _)| *d == id) {
                    let title = leak(&title_of(id));
                    let message = leak(&format!(
                        "This image was rated {} by the {name} model of this service.",
                        title.to_lowercase()
                    ));
                    described.push((id, title, message));
                }
                ids.push(id);
                ids.len() - 1
            }
        };
        columns.push((column, index));
    }
    let categories: &'static [&'static str] = Box::leak(ids.into_boxed_slice());
    let score: &'static LabelScore = Box::leak(Box::new(LabelScore {
        source: name,
        output: model.output,
        categories,
        columns,
    }));
    Box::leak(Box::new(Check {
        name,
        kind: ContentKind::Image,
        categories,
        languages: None,
        runner: Runner::Image {
            model: spec,
            score: ImageScore::Labels(score),
        },
    }))
}

/// `weapon_visible` -> `Weapon visible`.
fn title_of(id: &str) -> String {
    let words = id.replace('_', " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared() -> CustomModel {
        toml::from_str(
            r#"
            name = "weapons"
            file = "custom/weapons.onnx"
            sha256 = "7db379eeb4c5c42fd428055ce4abbd9b80036c1a6c3f1fa3375ee9a41d622cb0"
            input_size = [224, 224]
            labels = ["none", "knife", "gun"]
            categories = { knife = "weapon", gun = "weapon" }
            "#,
        )
        .expect("a declaration")
    }

    #[test]
    fn defaults_are_rgb_nhwc_stretched_to_zero_one() {
        let model = declared();
        assert_eq!(model.layout, Layout::Nhwc);
        assert_eq!(model.colour, ColourOrder::Rgb);
        assert_eq!(model.fit, Fit::Stretch);
        assert_eq!(model.mean, [0.0; 3]);
        assert_eq!(model.scale, [1.0 / 255.0; 3]);
        assert_eq!(model.output, Output::Probabilities);
        validate(&[model]).expect("valid");
    }

    #[test]
    fn every_error_names_its_field() {
        type Spoil = fn(&mut CustomModel);
        let cases: Vec<(&str, Spoil)> = vec![
            ("name", |m| m.name = "Weapons!".into()),
            ("name", |m| m.name = "nsfwjs".into()),
            ("file", |m| m.file = PathBuf::new()),
            ("sha256", |m| m.sha256 = "abc".into()),
            ("sha256", |m| m.sha256 = m.sha256.to_uppercase()),
            ("input_size", |m| m.input_size = [0, 224]),
            ("input_size", |m| m.input_size = [224, 513]),
            ("mean", |m| m.mean[1] = f32::NAN),
            ("scale", |m| m.scale[2] = 0.0),
            ("labels", |m| m.labels.clear()),
            ("labels", |m| m.labels[2] = "knife".into()),
            ("labels", |m| m.labels[0] = String::new()),
            ("categories", |m| m.categories.clear()),
            ("categories", |m| {
                m.categories.insert("sword".into(), "weapon".into());
            }),
            ("categories", |m| {
                m.categories.insert("gun".into(), "Guns".into());
            }),
            ("categories", |m| {
                m.categories.insert("gun".into(), "known_image".into());
            }),
            ("sightengine", |m| {
                m.sightengine = Some(answers("Weapon!", &[("classes.knife", "weapon")]))
            }),
            ("sightengine", |m| {
                m.sightengine = Some(answers("weapon", &[]))
            }),
            ("sightengine", |m| {
                m.sightengine = Some(answers("weapon", &[("classes..knife", "weapon")]))
            }),
            ("sightengine", |m| {
                m.sightengine = Some(answers("weapon", &[("a.b.c.d", "weapon")]))
            }),
            ("sightengine", |m| {
                m.sightengine = Some(answers("weapon", &[("classes.knife", "gore")]))
            }),
            ("sightengine", |m| {
                m.sightengine = Some(answers(
                    "weapon",
                    &[("classes", "weapon"), ("classes.knife", "weapon")],
                ))
            }),
        ];
        for (field, spoil) in cases {
            let mut model = declared();
            spoil(&mut model);
            let error = validate(&[model]).expect_err(field);
            assert!(
                error.starts_with(&format!("models.custom[0].{field}:")),
                "{field}: {error}"
            );
        }
        let error = validate(&[declared(), declared()]).expect_err("twice");
        assert!(error.starts_with("models.custom[1].name:"), "{error}");
        let many = vec![declared(); CUSTOM_MODELS_MAX + 1];
        assert!(validate(&many)
            .expect_err("too many")
            .starts_with("models.custom:"));
    }

    fn answers(model: &str, fields: &[(&str, &str)]) -> SightengineModel {
        SightengineModel {
            model: model.into(),
            fields: fields
                .iter()
                .map(|(path, category)| ((*path).into(), (*category).into()))
                .collect(),
        }
    }

    #[test]
    fn a_sightengine_model_is_answered_once() {
        let mut first = declared();
        first.sightengine = Some(answers(
            "weapon",
            &[("classes.knife", "weapon"), ("classes.firearm", "weapon")],
        ));
        validate(std::slice::from_ref(&first)).expect("valid");
        let mut second = declared();
        second.name = "weapons_2".into();
        second.sightengine = first.sightengine.clone();
        let error = validate(&[first, second]).expect_err("twice");
        assert!(
            error.starts_with("models.custom[1].sightengine:"),
            "{error}"
        );
    }

    fn label_score(output: Output) -> LabelScore {
        LabelScore {
            source: "weapons",
            output,
            categories: &["weapon", "blood"],
            columns: vec![(1, 0), (2, 0), (3, 1)],
        }
    }

    #[test]
    fn labels_of_a_category_add_up_unless_independent() {
        let mut board = ScoreBoard::default();
        label_score(Output::Probabilities).score(&[0.5, 0.2, 0.1, 0.2], &mut board);
        assert!((board.get("weapon").expect("scored").score - 0.3).abs() < 1e-6);
        assert_eq!(board.get("weapon").expect("scored").source, "weapons");
        assert!((board.get("blood").expect("scored").score - 0.2).abs() < 1e-6);

        let mut board = ScoreBoard::default();
        label_score(Output::Sigmoid).score(&[0.0, 0.0, 2.0, -40.0], &mut board);
        assert!((board.get("weapon").expect("scored").score - sigmoid(2.0)).abs() < 1e-9);
        assert!(board.get("blood").expect("scored").score < 1e-9);

        let mut board = ScoreBoard::default();
        label_score(Output::Logits).score(&[0.0, 0.0, 0.0, 0.0], &mut board);
        assert!((board.get("weapon").expect("scored").score - 0.5).abs() < 1e-9);
        assert!((board.get("blood").expect("scored").score - 0.25).abs() < 1e-9);
    }

    #[test]
    fn a_value_that_is_not_a_number_leaves_its_category_unchecked() {
        let mut board = ScoreBoard::default();
        label_score(Output::Probabilities).score(&[0.5, f32::NAN, 0.1, 0.2], &mut board);
        assert!(board.get("weapon").is_none());
        assert_eq!(board.is_unavailable("weapon"), Some("weapon"));
        assert!(board.get("blood").is_some());
        // A short row (a model that changed under us) is not a score either.
        let mut board = ScoreBoard::default();
        label_score(Output::Probabilities).score(&[0.5, 0.1], &mut board);
        assert_eq!(board.is_unavailable("blood"), Some("blood"));
    }

    #[test]
    fn titles_are_the_id_in_words() {
        assert_eq!(title_of("weapon_visible"), "Weapon visible");
        assert_eq!(title_of("gore"), "Gore");
    }
}
