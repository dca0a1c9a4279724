//! `profanity_svm`: alt-profanity-check 1.9.1 (MIT), TF-IDF and a calibrated linear SVM,
//! scored natively from the exported `models/text/profanity_svm.json` (embedded).
//!
//! The algorithm, exactly as scikit-learn runs it (`models/text/PIPELINE.md` section 2):
//! lower-case (Python `str.lower`, which Rust's `to_lowercase` matches); tokens are maximal
//! runs of at least two word characters (Unicode categories L* and N*, and `_`); counts of
//! vocabulary terms times idf, L2-normalised; then five calibrated folds, each
//! `1 / (1 + exp(a·(x·w + b) + c))`, averaged. Matches `predict_prob` within 1e-6 on the
//! committed reference set (a unit test).
//!
//! Per term the idf and the five fold weights (`idf · coef`) sit side by side, so scoring a
//! text is one hash look-up per token and one pass over the distinct terms.

use std::collections::HashMap;

use crate::hash::FastMap;

use serde::Deserialize;
use unicode_general_category::{get_general_category, GeneralCategory as G};

pub const PROFANITY_SVM_JSON: &str = include_str!("../../models/text/profanity_svm.json");
pub const SOURCE: &str = "profanity_svm";
pub const CATEGORY: &str = "profanity";

pub const CHECK: super::registry::Check = super::registry::Check {
    name: SOURCE,
    kind: crate::content::ContentKind::Text,
    categories: &[CATEGORY],
    languages: Some(&["en"]),
    runner: super::registry::Runner::Text {
        score: score_check,
        reads_normalised: true,
    },
};

/// The raw text is what the model was trained on; the normalised text catches spellings
/// meant to slip past it (`f.u.c.k`, `sh1t`), and is worth a second pass only when
/// normalising changed a word.
fn score_check(
    input: &super::registry::TextInput<'_>,
    models: &super::TextModels,
    board: &mut super::board::ScoreBoard,
) {
    let mut score = models.svm.score(input.raw);
    if input.disguised {
        score = score.max(models.svm.score(input.normalised));
    }
    board.add(CATEGORY, score, SOURCE);
}
const FOLDS: usize = 5;

#[derive(Deserialize)]
struct Export {
    format: String,
    vectorizer: Vectorizer,
    classifier: Classifier,
}

#[derive(Deserialize)]
struct Vectorizer {
    vocabulary: HashMap<String, usize>,
    idf: Vec<f64>,
}

#[derive(Deserialize)]
struct Classifier {
    folds: Vec<Fold>,
}

#[derive(Deserialize)]
struct Fold {
    svm_coef: Vec<f64>,
    svm_intercept: f64,
    sigmoid_a: f64,
    sigmoid_b: f64,
}

pub struct ProfanitySvm {
    vocabulary: FastMap<String, u32>,
    /// Per column: idf, then idf · coef of each fold.
    columns: Vec<[f64; FOLDS + 1]>,
    intercepts: [f64; FOLDS],
    sigmoid_a: [f64; FOLDS],
    sigmoid_b: [f64; FOLDS],
}

impl ProfanitySvm {
    pub fn embedded() -> Result<ProfanitySvm, String> {
        Self::from_json(PROFANITY_SVM_JSON)
    }

    pub fn from_json(json: &str) -> Result<ProfanitySvm, String> {
        let mut bytes = json.as_bytes().to_vec();
        let export: Export = simd_json::serde::from_slice(&mut bytes)
            .map_err(|error| format!("profanity_svm.json: {error}"))?;
        if export.format != "modgate.profanity-svm.v1" {
            return Err(format!(
                "profanity_svm.json: unknown format '{}'",
                export.format
            ));
        }
        let n = export.vectorizer.idf.len();
        if export.classifier.folds.len() != FOLDS
            || export
                .classifier
                .folds
                .iter()
                .any(|fold| fold.svm_coef.len() != n)
            || export
                .vectorizer
                .vocabulary
                .values()
                .any(|&column| column >= n)
        {
            return Err("profanity_svm.json: inconsistent shapes".into());
        }
        let mut columns = vec![[0.0; FOLDS + 1]; n];
        for (j, column) in columns.iter_mut().enumerate() {
            column[0] = export.vectorizer.idf[j];
            for (k, fold) in export.classifier.folds.iter().enumerate() {
                column[k + 1] = export.vectorizer.idf[j] * fold.svm_coef[j];
            }
        }
        let folds = &export.classifier.folds;
        Ok(ProfanitySvm {
            vocabulary: export
                .vectorizer
                .vocabulary
                .into_iter()
                .map(|(term, column)| (term, column as u32))
                .collect(),
            columns,
            intercepts: std::array::from_fn(|k| folds[k].svm_intercept),
            sigmoid_a: std::array::from_fn(|k| folds[k].sigmoid_a),
            sigmoid_b: std::array::from_fn(|k| folds[k].sigmoid_b),
        })
    }

    /// P(offensive) of `text`, as `profanity_check.predict_prob`.
    pub fn score(&self, text: &str) -> f64 {
        let lowered;
        let text = if text.bytes().any(|b| b.is_ascii_uppercase() || b >= 0x80) {
            lowered = text.to_lowercase();
            lowered.as_str()
        } else {
            text
        };
        let mut columns: Vec<u32> = Vec::with_capacity(64);
        for_each_token(text, |token| {
            if let Some(&column) = self.vocabulary.get(token) {
                columns.push(column);
            }
        });
        columns.sort_unstable();
        let mut dots = [0.0f64; FOLDS];
        let mut squares = 0.0f64;
        let mut i = 0;
        while i < columns.len() {
            let column = columns[i];
            let mut count = 0.0;
            while i < columns.len() && columns[i] == column {
                count += 1.0;
                i += 1;
            }
            let weights = &self.columns[column as usize];
            let value = count * weights[0];
            squares += value * value;
            for (dot, weight) in dots.iter_mut().zip(&weights[1..]) {
                *dot += count * weight;
            }
        }
        let norm = if squares > 0.0 { squares.sqrt() } else { 1.0 };
        let total: f64 = (0..FOLDS)
            .map(|k| {
                let decision = dots[k] / norm + self.intercepts[k];
                1.0 / (1.0 + (self.sigmoid_a[k] * decision + self.sigmoid_b[k]).exp())
            })
            .sum();
        total / FOLDS as f64
    }
}

/// Calls `f` with every maximal run of at least two word characters (scikit-learn's
/// `(?u)\b\w\w+\b` under Python 3.11's `re`: categories L*, N* and `_`).
pub fn for_each_token(text: &str, mut f: impl FnMut(&str)) {
    let mut start: Option<usize> = None;
    let mut chars = 0usize;
    for (at, c) in text.char_indices() {
        if is_word_char(c) {
            if start.is_none() {
                start = Some(at);
                chars = 0;
            }
            chars += 1;
        } else if let Some(from) = start.take() {
            if chars >= 2 {
                f(&text[from..at]);
            }
        }
    }
    if let Some(from) = start {
        if chars >= 2 {
            f(&text[from..]);
        }
    }
}

fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || c == '_';
    }
    matches!(
        get_general_category(c),
        G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter
            | G::DecimalNumber
            | G::LetterNumber
            | G::OtherNumber
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::test_reference::reference_rows;

    #[test]
    fn matches_the_python_model_on_the_reference_set() {
        let model = ProfanitySvm::embedded().unwrap();
        let rows = reference_rows();
        assert!(rows.len() >= 50);
        for row in &rows {
            let text = row["text"].as_str().unwrap();
            let expected_tokens: Vec<&str> = row["profanity_tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap())
                .collect();
            let mut tokens = Vec::new();
            for_each_token(&text.to_lowercase(), |t| tokens.push(t.to_owned()));
            assert_eq!(tokens, expected_tokens, "tokens of {}", row["id"]);
            let expected = row["profanity_prob"].as_f64().unwrap();
            let got = model.score(text);
            assert!(
                (got - expected).abs() <= 1e-6,
                "{}: {got} vs {expected}",
                row["id"]
            );
        }
    }

    #[test]
    fn empty_text_scores_the_intercept_only() {
        let model = ProfanitySvm::embedded().unwrap();
        assert!((model.score("") - 0.036375752016469504).abs() < 1e-12);
        assert!((model.score("!!! ...") - 0.036375752016469504).abs() < 1e-12);
    }
}
