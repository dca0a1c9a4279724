//! The check registry: every check of this build, declared once by the file that implements
//! it (`pub const CHECK: Check`), and listed here; then the image models the configuration
//! declares (`[[models.custom]]`, [`super::custom`]), added once at start ([`all`]).
//!
//! A check declares its name (the `source` a workflow names and a reason carries), the kind
//! of content it reads, the categories it scores and how it runs. Everything else is driven
//! from this list: workflow validation ([`crate::workflow`]), `unchecked` (the categories of
//! a check that cannot run here), the models the server verifies and loads at start
//! ([`models`]), the image models the shard's worker runs ([`image_models`]) and the model
//! labels of the metrics (the model's own name).
//!
//! Adding an image model is one new file under `checks/` (its [`ImageModelSpec`]: file,
//! sha256, input and output; and its `score` function: what the output means) plus its line
//! in [`REGISTRY`] and its entry in `models/fetch.py`. A check with no model (a scanner over
//! the text) is a [`Runner::Text`] function.

use super::board::ScoreBoard;
use std::sync::OnceLock;

use super::{
    faces, harm, links, nsfwjs, nsfwjs_inception, ocr, open_nsfw, pii, profanity_svm, qr, toxblock,
    wordlist, TextModels,
};
use crate::content::ContentKind;
use crate::image::{Measured, Measures};
use crate::inference::share::CoreSharing;
use crate::inference::{ImageModelSpec, ModelSpec, TextEncoderSpec, WorkerConfig};

/// A check of this build.
#[derive(Debug)]
pub struct Check {
    pub name: &'static str,
    pub kind: ContentKind,
    pub categories: &'static [&'static str],
    /// The languages (ISO 639-1) whose words the check judges; `None` for one that does not
    /// judge words (a scanner for e-mail addresses or links reads every language alike, as
    /// does an image model). The `language` check scores texts in none of a workflow's.
    pub languages: Option<&'static [&'static str]>,
    pub runner: Runner,
}

/// What a text check reads: the text as sent, and as normalised against disguises.
pub struct TextInput<'a> {
    pub raw: &'a str,
    /// Lower case, leetspeak and confusables folded, spacing undone (empty unless a check
    /// of the workflow reads it: [`Check::reads_normalised`]).
    pub normalised: &'a str,
    /// Whether normalising changed a word (a disguise was seen).
    pub disguised: bool,
}

/// How a check runs.
#[derive(Debug)]
pub enum Runner {
    /// On the shard itself, in microseconds: a word list, a linear model, a scanner.
    /// `reads_normalised` asks for the normalised text.
    Text {
        score: fn(&TextInput<'_>, &TextModels, &mut ScoreBoard),
        reads_normalised: bool,
    },
    /// A text model over token windows on the shard's model worker (tox-block: its
    /// tokenizer is loaded with the text models).
    TextModel(ModelSpec),
    /// A text encoder on the shard's model worker, token windows to embeddings, scored by the
    /// check's heads on the shard (`harm`: its tokenizer and heads are loaded with the text
    /// models).
    TextEncoder(&'static TextEncoderSpec),
    /// An image model on the shard's model worker; `score` reads one image's output row.
    Image {
        model: &'static ImageModelSpec,
        score: ImageScore,
    },
    /// Measurements of an image's pixels on the model worker, no model. They come back on the
    /// board ([`ScoreBoard::measured`]); `score` reads them into categories, if the check has
    /// any (the QR codes' payloads are checked as text).
    Measure {
        measures: Measures,
        /// The model files the measurement needs (the face detector's networks), if any.
        models: &'static [ModelSpec],
        score: fn(&Measured, &TextModels, &mut ScoreBoard),
    },
}

/// What an image model's output row means.
#[derive(Debug)]
pub enum ImageScore {
    /// The shipped model's own code.
    Code(fn(&[f32], &mut ScoreBoard)),
    /// A declared model's labels ([`super::custom`]).
    Labels(&'static super::custom::LabelScore),
}

impl ImageScore {
    pub fn score(&self, row: &[f32], board: &mut ScoreBoard) {
        match self {
            ImageScore::Code(score) => score(row, board),
            ImageScore::Labels(labels) => labels.score(row, board),
        }
    }
}

impl Check {
    /// The model files this check needs.
    pub fn models(&'static self) -> &'static [ModelSpec] {
        match &self.runner {
            Runner::Text { .. } => &[],
            Runner::Measure { models, .. } => models,
            Runner::TextModel(spec) => std::slice::from_ref(spec),
            Runner::TextEncoder(encoder) => std::slice::from_ref(&encoder.model),
            Runner::Image { model, .. } => std::slice::from_ref(&model.model),
        }
    }

    pub fn reads_normalised(&self) -> bool {
        matches!(
            self.runner,
            Runner::Text {
                reads_normalised: true,
                ..
            }
        )
    }
}

/// Every check of this build. Order matters only for image models: a model's place among
/// the image models is its slot on the model worker.
pub const REGISTRY: &[&Check] = &[
    &wordlist::CHECK,
    &profanity_svm::CHECK,
    &pii::CHECK,
    &links::CHECK,
    &toxblock::CHECK,
    &harm::CHECK,
    &open_nsfw::CHECK,
    &nsfwjs::CHECK,
    &nsfwjs_inception::CHECK,
    &PROPERTIES,
    &qr::CHECK,
    &faces::CHECK,
    &ocr::CHECK,
    &LANGUAGE,
    &HASHLIST,
    &TERMLIST,
];

/// `termlist`: `listed_term`, 1 when the normalised text holds a whole-word match of a term of
/// one of the organization's block lists the workflow names (text lists: the word list's
/// normalisation undoes leetspeak, confusables and spacing on both sides). The terms of its
/// allow lists are hidden from the checks that read the normalised text (the word list and
/// the block lists). Scored by the engine, which is given the caller's lists
/// ([`super::Engine::check_text`]).
pub const TERMLIST: Check = Check {
    name: "termlist",
    kind: ContentKind::Text,
    categories: &[super::categories::LISTED_TERM],
    languages: None,
    runner: Runner::Text {
        score: |_, _, _| {},
        reads_normalised: true,
    },
};

/// `hashlist`: `known_image`, 1 when the image matches an entry of one of the organization's
/// block lists the workflow names (PDQ within the list's distance, or MD5 / SHA-256 exactly);
/// an allow-list match exempts the image from review ([`crate::decision`]). The hashes are
/// made on the model worker; the lists are matched by the engine, which is given the
/// caller's lists ([`super::Engine::check_image`]).
pub const HASHLIST: Check = Check {
    name: "hashlist",
    kind: ContentKind::Image,
    categories: &[super::categories::KNOWN_IMAGE],
    languages: None,
    runner: Runner::Measure {
        measures: Measures::HASHES,
        models: &[],
        score: |_, _, _| {},
    },
};

/// `language`: `unread_language`, the confidence that a text is in a language none of the
/// workflow's word-judging checks reads (0 when one does, or when no check judges words).
/// Scored by the engine, which knows the workflow's other checks ([`unread_language`]).
pub const LANGUAGE: Check = Check {
    name: "language",
    kind: ContentKind::Text,
    categories: &[super::categories::UNREAD_LANGUAGE],
    languages: None,
    runner: Runner::Text {
        score: |_, _, _| {},
        reads_normalised: false,
    },
};

/// The `unread_language` score of a text in `language` for the checks named `names`: its
/// confidence when the checks that judge words read none of it, else 0.
pub fn unread_language(
    names: &[String],
    language: Option<&crate::text::language::Language>,
) -> f64 {
    let mut judged = names
        .iter()
        .filter_map(|name| find(name))
        .filter(|check| check.kind == ContentKind::Text)
        .filter_map(|check| check.languages)
        .peekable();
    match language {
        Some(language) if language.reliable && judged.peek().is_some() => {
            if judged.any(|languages| languages.contains(&language.code)) {
                0.0
            } else {
                language.confidence
            }
        }
        _ => 0.0,
    }
}

/// `properties`: sharpness, brightness, contrast and colours of an image
/// ([`crate::image::properties`]).
pub const PROPERTIES: Check = Check {
    name: "properties",
    kind: ContentKind::Image,
    categories: &[],
    languages: None,
    runner: Runner::Measure {
        measures: Measures::PROPERTIES,
        models: &[],
        score: |_, _, _| {},
    },
};

/// The measurements a worker with `found` models can make: each measuring check's, where its
/// models are all there.
pub fn measures_ready(found: &[ModelSpec]) -> Measures {
    all().fold(Measures::NONE, |ready, check| match check.runner {
        Runner::Measure {
            measures, models, ..
        } if models.iter().all(|model| found.contains(model)) => ready.union(measures),
        _ => ready,
    })
}

/// The checks the configuration declares (`[[models.custom]]`), set once at start.
static DECLARED: OnceLock<Vec<&'static Check>> = OnceLock::new();

/// Adds the configuration's checks to this process's registry, once: they live as long as
/// the process ([`super::custom::register`] makes them, and refuses a different set later).
pub fn declare(checks: Vec<&'static Check>) {
    let _ = DECLARED.set(checks);
}

/// Every check: this build's, then the declared ones.
pub fn all() -> impl Iterator<Item = &'static Check> {
    REGISTRY
        .iter()
        .copied()
        .chain(DECLARED.get().into_iter().flatten().copied())
}

/// The check named `name`.
pub fn find(name: &str) -> Option<&'static Check> {
    all().find(|check| check.name == name)
}

/// Every model file of this build and the configuration, verified and loaded at start.
pub fn models() -> Vec<ModelSpec> {
    all()
        .flat_map(|check| check.models().iter().copied())
        .collect()
}

/// The text model the shard's worker runs (tox-block), if this build has one.
pub fn text_model() -> Option<ModelSpec> {
    all().find_map(|check| match check.runner {
        Runner::TextModel(spec) => Some(spec),
        _ => None,
    })
}

/// The text encoder of this build's checks, if one has it.
pub fn text_encoder() -> Option<&'static TextEncoderSpec> {
    all().find_map(|check| match check.runner {
        Runner::TextEncoder(spec) => Some(spec),
        _ => None,
    })
}

/// The image models, in worker slot order.
pub fn image_models() -> Vec<&'static ImageModelSpec> {
    image_models_iter().collect()
}

fn image_models_iter() -> impl Iterator<Item = &'static ImageModelSpec> {
    all().filter_map(|check| match check.runner {
        Runner::Image { model, .. } => Some(model),
        _ => None,
    })
}

/// The side an image is decoded to at least: the largest any image model loaded at start needs
/// (a job that wants a model opened on first use decodes to at least its side too).
pub fn image_min_side_px() -> usize {
    image_models()
        .iter()
        .filter(|spec| !spec.open_on_first_use)
        .map(|spec| spec.min_side_px)
        .max()
        .unwrap_or(0)
}

/// The model worker's settings, with the models of this build.
pub fn worker_config(
    queue_depth_max: usize,
    batch_rows_max: usize,
    sharing: CoreSharing,
    share: f64,
    nice: i32,
) -> WorkerConfig {
    WorkerConfig {
        queue_depth_max,
        batch_rows_max,
        text_model: text_model(),
        text_encoder: text_encoder(),
        image_models: image_models(),
        sharing,
        share,
        nice,
        job_time_max: crate::inference::worker::JOB_TIME_MAX_DEFAULT,
    }
}

/// Whether the checks named run a model on the worker.
pub fn any_on_worker(names: &[String]) -> bool {
    names
        .iter()
        .filter_map(|name| find(name))
        .any(|check| !check.models().is_empty())
}

/// The worker slot of an image check's model.
pub fn image_slot(check: &Check) -> Option<usize> {
    let Runner::Image { model, .. } = check.runner else {
        return None;
    };
    // By name: a `const` spec has no one address to compare. No allocation: this runs per
    // image check.
    image_models_iter().position(|candidate| candidate.model.name == model.model.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_categories_described() {
        let mut seen = std::collections::HashSet::new();
        for check in REGISTRY {
            assert!(seen.insert(check.name), "{} twice", check.name);
            let measures = matches!(check.runner, Runner::Measure { .. });
            assert!(measures || !check.categories.is_empty(), "{}", check.name);
            for category in check.categories {
                assert!(
                    super::super::categories::CATEGORIES
                        .iter()
                        .any(|(id, _, _)| id == category),
                    "{category} of {} has no title",
                    check.name
                );
            }
        }
    }

    #[test]
    fn unread_language_counts_only_the_checks_that_judge_words() {
        use crate::text::language::Language;
        let names = |list: &[&str]| list.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let french = Language {
            code: "fr",
            confidence: 0.97,
            reliable: true,
        };
        let english = Language {
            code: "en",
            ..french
        };
        let english_checks = names(&["wordlist", "pii", "language"]);
        assert_eq!(unread_language(&english_checks, Some(&french)), 0.97);
        assert_eq!(unread_language(&english_checks, Some(&english)), 0.0);
        assert_eq!(unread_language(&english_checks, None), 0.0);
        let unsure = Language {
            reliable: false,
            ..french
        };
        assert_eq!(unread_language(&english_checks, Some(&unsure)), 0.0);
        // Scanners read every language alike: nothing judges words, nothing is unread.
        assert_eq!(
            unread_language(&names(&["pii", "links"]), Some(&french)),
            0.0
        );
    }

    #[test]
    fn image_checks_have_slots_and_the_others_none() {
        for check in REGISTRY {
            let model = matches!(check.runner, Runner::Image { .. });
            assert_eq!(image_slot(check).is_some(), model, "{}", check.name);
        }
        assert!(image_models().len() <= crate::inference::worker::IMAGE_MODELS_MAX);
        let mut names: Vec<_> = models().iter().map(|spec| spec.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), models().len(), "model names are unique");
    }
}
