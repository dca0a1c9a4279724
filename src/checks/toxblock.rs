//! `toxblock`: tox-block 0.1.2 (MIT), a BiLSTM over Keras token ids, as ONNX
//! (`models/text/toxblock_lstm.onnx`) run by ONNX Runtime on the shard's model worker.
//!
//! The file served is tf2onnx's conversion (`toxblock.onnx`) with its two LSTM loops rewritten
//! as one ONNX `LSTM` operator by `models/text/fuse_toxblock_lstm.py`: the same cell and
//! weights, outputs within 1.2e-7 of the loops', and a run of one window in about a twentieth
//! of the time (ONNX Runtime ran the loops' bodies operator by operator, 100 steps of about 60
//! small operators each).
//!
//! This module is the text side: the Keras tokenizer reimplemented (token for token equal to
//! the original on the committed reference set), the windows fed to the model, and the
//! package's output rescaling. The model run itself is [`crate::inference`]'s.
//!
//! Tokenizer (`models/text/PIPELINE.md` section 1): Unicode lower case; the 33 Keras filter
//! characters become spaces; split on U+0020 only; unknown words dropped; ids 1..19999.
//!
//! Windows: the original keeps only the last 100 known words of a text, so abuse at the start
//! of a long text went unseen. modgate scores every 100-word window (non-overlapping, aligned
//! to the end of the text so the last window is exactly what the original sees) and keeps the
//! best score per label, up to [`WINDOWS_MAX`] windows (the end of the text wins beyond).
//!
//! Context (paid plans): the last [`CONTEXT_TOKENS_MAX`] known words of `context` are put in
//! front of the text's words in every window, so each part of the text is read as a
//! continuation of where it comes from; the text then gets `100 - context` words per window.
//! The free plan ignores `context`.
//!
//! Repeats: each shard keeps the raw scores of the windows it has had scored
//! (`inference.toxblock_windows_kept`; [`Kept`] says which go when full), by the SHA-256 of the window's 100
//! ids, and sends the worker only the windows it has not seen, each distinct one once. Spam
//! and copy-pasted comments repeat their words exactly; a text whose windows are all kept does
//! not wait for the worker at all. A window's ids are all the model reads, so a kept window
//! gets what its first run gave.

use crate::hash::FastMap;
use crate::inference::repeats::Kept;

use serde::Deserialize;

pub const SOURCE: &str = "toxblock";
pub const LABELS: [&str; 6] = [
    "toxic",
    "severe_toxic",
    "obscene",
    "threat",
    "insult",
    "identity_hate",
];
pub const WINDOW_TOKENS: usize = 100;
pub const WINDOWS_MAX: usize = 64;
pub const CONTEXT_TOKENS_MAX: usize = 30;
/// sha256 of the committed files, checked at load (`models/text/SHA256SUMS`).
pub const MODEL_SHA256: &str = "8ec195052545d56f46f9fce9fe9cb3a75741aab06994cf567a8f68b421499b8f";
pub const TOKENIZER_SHA256: &str =
    "1e698887acd27bf8d88ec09f5d18d7d94355cd24d8c2b390e543a7938c8f7e3a";
pub const MODEL_FILE: &str = "text/toxblock_lstm.onnx";
pub const TOKENIZER_FILE: &str = "text/toxblock_tokenizer.json";

pub const MODEL: crate::inference::ModelSpec = crate::inference::ModelSpec {
    name: SOURCE,
    file: MODEL_FILE,
    sha256: MODEL_SHA256,
};

pub const CHECK: super::registry::Check = super::registry::Check {
    name: SOURCE,
    kind: crate::content::ContentKind::Text,
    categories: &LABELS,
    languages: Some(&["en"]),
    runner: super::registry::Runner::TextModel(MODEL),
};

/// tox-block's default output rescaling `|(p - min) / (max - min)|`, in f32 exactly as pandas
/// computes it (`min` and the f64 range rounded to f32; PIPELINE.md section 1.5).
const RESCALE_MIN_BITS: [u32; 6] = [
    0x3b0aac97, 0x37388ca4, 0x39b5ed8d, 0x3827c5ac, 0x39c38f36, 0x389b3073,
];
const RESCALE_RANGE_BITS: [u32; 6] = [
    0x3f7f6c05, 0x3f260f4d, 0x3f7f4795, 0x3f6b398f, 0x3f7c65e9, 0x3f66aac1,
];

pub fn rescale(raw: &[f32; 6]) -> [f32; 6] {
    std::array::from_fn(|i| {
        ((raw[i] - f32::from_bits(RESCALE_MIN_BITS[i])) / f32::from_bits(RESCALE_RANGE_BITS[i]))
            .abs()
    })
}

#[derive(Deserialize)]
struct TokenizerFile {
    format: String,
    tokenizer: TokenizerSettings,
    word_index: FastMap<String, i32>,
}

#[derive(Deserialize)]
struct TokenizerSettings {
    filters: String,
    lower: bool,
    split: String,
    num_words: i32,
}

pub struct ToxTokenizer {
    word_index: FastMap<String, i32>,
    /// ASCII characters replaced by a space (all 33 filters are ASCII).
    filters: [bool; 128],
}

impl ToxTokenizer {
    pub fn from_json(json: &str) -> Result<ToxTokenizer, String> {
        let mut bytes = json.as_bytes().to_vec();
        let file: TokenizerFile = simd_json::serde::from_slice(&mut bytes)
            .map_err(|error| format!("toxblock_tokenizer.json: {error}"))?;
        if file.format != "modgate.toxblock-tokenizer.v1"
            || !file.tokenizer.lower
            || file.tokenizer.split != " "
        {
            return Err("toxblock_tokenizer.json: unexpected format or settings".into());
        }
        let mut filters = [false; 128];
        for c in file.tokenizer.filters.chars() {
            if !c.is_ascii() {
                return Err("toxblock_tokenizer.json: non-ASCII filter".into());
            }
            filters[c as usize] = true;
        }
        if file
            .word_index
            .values()
            .any(|&id| id < 1 || id >= file.tokenizer.num_words)
        {
            return Err("toxblock_tokenizer.json: id out of range".into());
        }
        Ok(ToxTokenizer {
            word_index: file.word_index,
            filters,
        })
    }

    /// The ids of the known words of `text`, in order (no truncation, no padding).
    pub fn ids(&self, text: &str, out: &mut Vec<i32>) {
        let lowered = text.to_lowercase();
        let mut word = String::new();
        let flush = |word: &mut String, out: &mut Vec<i32>| {
            if !word.is_empty() {
                if let Some(&id) = self.word_index.get(word.as_str()) {
                    out.push(id);
                }
                word.clear();
            }
        };
        for c in lowered.chars() {
            if c == ' ' || (c.is_ascii() && self.filters[c as usize]) {
                flush(&mut word, out);
            } else {
                word.push(c);
            }
        }
        flush(&mut word, out);
    }

    /// What the original feeds its model: the last 100 ids, zeros on the left.
    pub fn sequence(&self, text: &str) -> [i32; WINDOW_TOKENS] {
        let mut ids = Vec::new();
        self.ids(text, &mut ids);
        let mut out = [0i32; WINDOW_TOKENS];
        let tail = &ids[ids.len().saturating_sub(WINDOW_TOKENS)..];
        out[WINDOW_TOKENS - tail.len()..].copy_from_slice(tail);
        out
    }
}

/// What a window's scores are kept under: the SHA-256 of its 100 ids.
pub type WindowKey = [u8; 32];

/// A shard's kept window scores (raw sigmoid outputs), for repeats of the same words.
pub type KeptWindows = Kept<WindowKey, [f32; 6]>;

/// The key of `window` (100 ids). SHA-256 and not a fast hash: a text made to collide with
/// another's window would take its scores.
pub fn window_key(window: &[i32]) -> WindowKey {
    let mut bytes = [0u8; WINDOW_TOKENS * 4];
    for (out, id) in bytes.chunks_exact_mut(4).zip(window) {
        out.copy_from_slice(&id.to_le_bytes());
    }
    crate::hash::sha256(&bytes)
}

/// The windows to score for `text_ids` after `context_ids`, flattened (`n × 100` ids).
pub fn windows(text_ids: &[i32], context_ids: &[i32]) -> Vec<i32> {
    let context = &context_ids[context_ids.len().saturating_sub(CONTEXT_TOKENS_MAX)..];
    let per_window = WINDOW_TOKENS - context.len();
    let mut out = Vec::new();
    let mut end = text_ids.len();
    let mut count = 0;
    loop {
        let start = end.saturating_sub(per_window);
        let mut window = [0i32; WINDOW_TOKENS];
        let used = context.len() + (end - start);
        window[WINDOW_TOKENS - used..WINDOW_TOKENS - (end - start)].copy_from_slice(context);
        window[WINDOW_TOKENS - (end - start)..].copy_from_slice(&text_ids[start..end]);
        out.extend_from_slice(&window);
        count += 1;
        end = start;
        if end == 0 || count == WINDOWS_MAX {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::test_reference::reference_rows;

    fn tokenizer() -> ToxTokenizer {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/models/text/toxblock_tokenizer.json"
        );
        ToxTokenizer::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn tokenizer_matches_keras_on_the_reference_set() {
        let tokenizer = tokenizer();
        let rows = reference_rows();
        assert!(rows.len() >= 50);
        for row in rows {
            let expected: Vec<i32> = row["toxblock_tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap() as i32)
                .collect();
            let got = tokenizer.sequence(row["text"].as_str().unwrap());
            assert_eq!(got.as_slice(), expected.as_slice(), "row {}", row["id"]);
        }
    }

    #[test]
    fn rescale_matches_the_package() {
        for row in reference_rows() {
            let raw: [f32; 6] =
                std::array::from_fn(|i| row["toxblock_raw"][LABELS[i]].as_f64().unwrap() as f32);
            let rescaled = rescale(&raw);
            for (i, label) in LABELS.iter().enumerate() {
                let expected = row["toxblock"][label].as_f64().unwrap() as f32;
                assert_eq!(
                    rescaled[i].to_bits(),
                    expected.to_bits(),
                    "{} {label}",
                    row["id"]
                );
            }
        }
    }

    #[test]
    fn window_keys_are_of_the_ids_in_their_places() {
        let one = windows(&[5, 6, 7], &[]);
        assert_eq!(window_key(&one), window_key(&windows(&[5, 6, 7], &[])));
        assert_ne!(window_key(&one), window_key(&windows(&[5, 6, 8], &[])));
        assert_ne!(
            window_key(&windows(&[5, 6], &[])),
            window_key(&windows(&[6, 5], &[]))
        );
        // Context words make another window of the same text.
        assert_ne!(window_key(&one), window_key(&windows(&[5, 6, 7], &[9])));
    }

    #[test]
    fn windows_cover_long_texts_from_the_end() {
        let ids: Vec<i32> = (1..=250).collect();
        let flat = windows(&ids, &[]);
        assert_eq!(flat.len(), 3 * WINDOW_TOKENS);
        // The first window is what the original sees: the last 100 ids.
        assert_eq!(&flat[..100], &ids[150..]);
        assert_eq!(&flat[100..200], &ids[50..150]);
        // The last window holds the first 50 ids, padded with zeros on the left.
        assert!(flat[200..250].iter().all(|&id| id == 0));
        assert_eq!(&flat[250..300], &ids[..50]);
        // A short text is one window; an empty one is all zeros.
        assert_eq!(windows(&[7, 8], &[]).len(), 100);
        assert!(windows(&[], &[]).iter().all(|&id| id == 0));
        // The number of windows is bounded.
        let huge: Vec<i32> = vec![1; 100 * (WINDOWS_MAX + 5)];
        assert_eq!(windows(&huge, &[]).len(), WINDOWS_MAX * WINDOW_TOKENS);
    }

    #[test]
    fn context_prefixes_every_window() {
        let context: Vec<i32> = (1000..1040).collect();
        let text: Vec<i32> = (1..=100).collect();
        let flat = windows(&text, &context);
        // 30 context ids + 70 text ids per window: 2 windows for 100 text ids.
        assert_eq!(flat.len(), 200);
        assert_eq!(&flat[..30], &context[10..]);
        assert_eq!(&flat[30..100], &text[30..]);
        assert_eq!(&flat[170..200], &text[..30]);
        assert_eq!(&flat[140..170], &context[10..]);
    }
}
