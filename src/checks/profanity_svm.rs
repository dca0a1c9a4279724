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
//! text is one look-up per token and one pass over the distinct terms. A term of at most 16
//! bytes (all but 9 of the 15,442) is looked up as one integer, its bytes packed (`packed`),
//! in a flat index of its own (`FlatIndex`), which spares hashing and comparing a string;
//! an ASCII text (most) is tokenised and lower-cased byte by byte on the way, without a
//! lower-cased copy, and its tokens are looked up in runs (`KEYS_PER_RUN`) whose table
//! reads all start before any is waited for. A property test holds that path to the general
//! one.

use std::collections::HashMap;

use crate::hash::{halves, packed, FastMap, FlatIndex, PACKED_BYTES_MAX};

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
    /// The vocabulary's terms of at most [`PACKED_BYTES_MAX`] bytes, [`packed`] (as
    /// [`halves`]), to their column, in an index at most half full: 24-byte slots, 741 KB for
    /// the 15,433 terms (a `HashMap<u128, u32>` took 1 MB of 32-byte entries, and a second
    /// array of control bytes that a cold look-up missed first).
    short_terms: FlatIndex<[u64; 2], u32>,
    /// The longer ones.
    long_terms: FastMap<Box<[u8]>, u32>,
    /// The longest term's length in bytes: a longer token is not looked up.
    longest: usize,
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
        let (mut short_terms, mut long_terms) = (Vec::new(), FastMap::default());
        let mut longest = 0;
        for (term, column) in export.vectorizer.vocabulary {
            longest = longest.max(term.len());
            match packed(term.as_bytes()) {
                // An empty term would pack to the empty slot's key; scikit-learn's tokens
                // have at least two characters.
                Some(0) => return Err("profanity_svm.json: an empty term".into()),
                Some(key) => short_terms.push((halves(key), column as u32)),
                None => {
                    long_terms.insert(term.into_bytes().into_boxed_slice(), column as u32);
                }
            }
        }
        // In key order, so that where each term lands does not depend on the map's order.
        short_terms.sort_unstable();
        let short_terms = FlatIndex::new(&short_terms, (1, 2));
        Ok(ProfanitySvm {
            short_terms,
            long_terms,
            longest,
            columns,
            intercepts: std::array::from_fn(|k| folds[k].svm_intercept),
            sigmoid_a: std::array::from_fn(|k| folds[k].sigmoid_a),
            sigmoid_b: std::array::from_fn(|k| folds[k].sigmoid_b),
        })
    }

    /// P(offensive) of `text`, as `profanity_check.predict_prob`.
    pub fn score(&self, text: &str) -> f64 {
        let mut columns: Vec<u32> = Vec::with_capacity(64);
        if text.is_ascii() {
            self.ascii_columns(text.as_bytes(), &mut columns);
        } else {
            self.columns_of(text, &mut columns);
        }
        self.score_columns(columns)
    }

    /// The column of each token of `text` that is a term, in order: lower-case, then
    /// [`for_each_token`].
    fn columns_of(&self, text: &str, columns: &mut Vec<u32>) {
        for_each_token(&text.to_lowercase(), |token| {
            columns.extend(self.column(token.as_bytes()));
        });
    }

    /// [`ProfanitySvm::columns_of`] of an ASCII text, in one pass over its bytes: a token is
    /// lower-cased as it is packed, and one longer than any term is not looked up. Packed
    /// tokens wait in `keys` and are looked up a run at a time ([`Self::look_up_run`]); a
    /// longer token first flushes the run, so the columns stay in the text's order.
    fn ascii_columns(&self, text: &[u8], columns: &mut Vec<u32>) {
        let folded = |at: usize| WORD_FOLDED[usize::from(text[at])];
        let mut lowered = Vec::new();
        let mut keys = [[0u64; 2]; KEYS_PER_RUN];
        let mut waiting = 0;
        let mut at = 0;
        while at < text.len() {
            if folded(at) == 0 {
                at += 1;
                continue;
            }
            // A token: packed as it is read, while it fits.
            let start = at;
            let mut bytes = [0u8; PACKED_BYTES_MAX];
            while at < text.len() && folded(at) != 0 {
                if let Some(byte) = bytes.get_mut(at - start) {
                    *byte = folded(at);
                }
                at += 1;
            }
            let len = at - start;
            if len < 2 || len > self.longest {
                continue;
            }
            if len <= PACKED_BYTES_MAX {
                keys[waiting] = halves(u128::from_le_bytes(bytes));
                waiting += 1;
                if waiting == KEYS_PER_RUN {
                    self.look_up_run(&keys, columns);
                    waiting = 0;
                }
            } else {
                self.look_up_run(&keys[..waiting], columns);
                waiting = 0;
                lowered.clear();
                lowered.extend(text[start..at].iter().map(u8::to_ascii_lowercase));
                columns.extend(self.column(&lowered));
            }
        }
        self.look_up_run(&keys[..waiting], columns);
    }

    /// The columns of the packed tokens `keys` that are terms, in order, their first slots
    /// read before any look-up waits on one ([`FlatIndex::touch_first_slots`]).
    fn look_up_run(&self, keys: &[[u64; 2]], columns: &mut Vec<u32>) {
        self.short_terms.touch_first_slots(keys);
        columns.extend(keys.iter().filter_map(|&key| self.short_terms.get(key)));
    }

    /// The column of the (lower-cased) token, if it is a term.
    fn column(&self, token: &[u8]) -> Option<u32> {
        if token.len() > self.longest {
            return None;
        }
        match packed(token) {
            Some(key) => self.short_terms.get(halves(key)),
            None => self.long_terms.get(token).copied(),
        }
    }

    /// The probability from the columns of a text's terms (one per occurrence).
    fn score_columns(&self, mut columns: Vec<u32>) -> f64 {
        // The rows are read ahead too, for the same reason as the slots.
        let touched = columns.iter().fold(0u64, |touched, &column| {
            touched ^ self.columns[column as usize][0].to_bits()
        });
        std::hint::black_box(touched);
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

/// How many packed tokens of an ASCII text are looked up together (2 KiB of keys on the
/// stack; a 1 KiB text has about 170 tokens).
const KEYS_PER_RUN: usize = 128;

/// Each byte lower-cased if it is an ASCII word character ([`is_word_char`]), else 0.
const WORD_FOLDED: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 128 {
        let c = byte as u8;
        if c.is_ascii_alphanumeric() || c == b'_' {
            table[byte] = c.to_ascii_lowercase();
        }
        byte += 1;
    }
    table
};

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

    /// A term longer than [`PACKED_BYTES_MAX`], in upper case, in an ASCII text and in one
    /// that is not.
    #[test]
    fn long_terms_are_found_on_both_paths() {
        let model = ProfanitySvm::embedded().unwrap();
        let long = model
            .long_terms
            .keys()
            .find(|term| term.is_ascii())
            .map(|term| String::from_utf8_lossy(term).to_uppercase())
            .unwrap();
        let (mut ascii, mut other) = (Vec::new(), Vec::new());
        model.ascii_columns(format!("a {long}!").as_bytes(), &mut ascii);
        model.columns_of(&format!("é {long}!"), &mut other);
        assert_eq!(ascii.len(), 1);
        assert_eq!(ascii, other);
        assert!(model.column(b"fuck").is_some());
        assert_eq!(
            packed(b"fuck"),
            Some(u128::from_le_bytes(*b"fuck\0\0\0\0\0\0\0\0\0\0\0\0"))
        );
        assert_eq!(packed(&[b'a'; 17]), None);
    }

    proptest::proptest! {
        #[test]
        fn ascii_texts_take_the_byte_path_to_the_same_columns(
            text in "([a-zA-Z0-9_]{1,20}|[ .,'!\\-]{1,3}|FUCK|shit|Idiot|stupid){0,60}|[\\x00-\\x7f]{0,300}"
        ) {
            static MODEL: std::sync::LazyLock<ProfanitySvm> =
                std::sync::LazyLock::new(|| ProfanitySvm::embedded().unwrap());
            let model = &*MODEL;
            let (mut ascii, mut general) = (Vec::new(), Vec::new());
            model.ascii_columns(text.as_bytes(), &mut ascii);
            model.columns_of(&text, &mut general);
            proptest::prop_assert_eq!(ascii, general);
        }
    }

    /// Every term of the vocabulary is found at its column, and words that are not terms
    /// (the empty word among them) are not.
    #[test]
    fn every_term_is_found_at_its_column() {
        let model = ProfanitySvm::embedded().unwrap();
        let mut bytes = PROFANITY_SVM_JSON.as_bytes().to_vec();
        let export: Export = simd_json::serde::from_slice(&mut bytes).unwrap();
        assert_eq!(export.vectorizer.vocabulary.len(), 15_442);
        for (term, column) in &export.vectorizer.vocabulary {
            assert_eq!(
                model.column(term.as_bytes()),
                Some(*column as u32),
                "{term}"
            );
        }
        let full = model.short_terms.entries().count();
        assert_eq!(full, 15_433);
        assert!(2 * full < model.short_terms.slot_count());
        for word in ["", "zzqx", "fuckfuckfuckfuck", "0123456789abcdef"] {
            assert_eq!(model.column(word.as_bytes()), None, "{word}");
        }
    }

    #[test]
    fn a_run_of_keys_finds_what_single_look_ups_find() {
        let model = ProfanitySvm::embedded().unwrap();
        // "the" and "of" are stop words, not terms.
        let words = ["the", "fuck", "zzqx", "idiot", "of", "stupid", "qqqqqqqq"];
        let keys: Vec<[u64; 2]> = words
            .iter()
            .map(|w| halves(packed(w.as_bytes()).unwrap()))
            .collect();
        let mut run = Vec::new();
        model.look_up_run(&keys, &mut run);
        let single: Vec<u32> = words
            .iter()
            .filter_map(|w| model.column(w.as_bytes()))
            .collect();
        assert_eq!(run, single);
        assert_eq!(run.len(), 3, "{run:?}");
    }

    #[test]
    fn empty_text_scores_the_intercept_only() {
        let model = ProfanitySvm::embedded().unwrap();
        assert!((model.score("") - 0.036375752016469504).abs() < 1e-12);
        assert!((model.score("!!! ...") - 0.036375752016469504).abs() < 1e-12);
    }
}
