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
//! text is one look-up per token and one pass over the terms found, counted as they come in a
//! small table on the stack (`CountTable`). A term of at most 16 bytes (all but 9 of the
//! 15,442) is looked up as one integer, its bytes packed (`packed`), in a flat index of its
//! own (`FlatIndex`), which spares hashing and comparing a string;
//! an ASCII text (most) is tokenised from a bit mask of its word characters, 64 bytes at a
//! time, and each token lower-cased in two registers, without a lower-cased copy, and its
//! tokens are looked up in runs (`KEYS_PER_RUN`) whose table reads all start before any is
//! waited for. Property tests hold that path to the general one.

use std::collections::HashMap;

use crate::hash::{first_slot, halves, next_slot, packed, FastMap, FlatIndex, PACKED_BYTES_MAX};

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
        // Room for a term every six bytes (an ordinary word and its space), so that the
        // vector is not regrown as a text's terms are found.
        let mut columns: Vec<u32> = Vec::with_capacity(text.len() / 6 + 16);
        if text.is_ascii() {
            self.ascii_columns(text.as_bytes(), &mut columns);
        } else {
            self.columns_of(text, &mut columns);
        }
        self.score_columns(&columns)
    }

    /// The column of each token of `text` that is a term, in order: lower-case, then
    /// [`for_each_token`].
    fn columns_of(&self, text: &str, columns: &mut Vec<u32>) {
        for_each_token(&text.to_lowercase(), |token| {
            columns.extend(self.column(token.as_bytes()));
        });
    }

    /// [`ProfanitySvm::columns_of`] of an ASCII text, without a lower-cased copy: its tokens
    /// come from [`AsciiRuns`], each is packed and lower-cased in two registers
    /// ([`folded_key`]), and one longer than any term is not looked up. Packed tokens wait in
    /// `keys` and are looked up a run at a time ([`Self::look_up_run`]); a token too long to
    /// pack first flushes the run, so the columns stay in the text's order.
    fn ascii_columns(&self, text: &[u8], columns: &mut Vec<u32>) {
        let mut keys = [[0u64; 2]; KEYS_PER_RUN];
        let mut waiting = 0;
        for (start, end) in AsciiRuns::new(text) {
            let len = end - start;
            if len < 2 || len > self.longest {
                continue;
            }
            if len <= PACKED_BYTES_MAX {
                keys[waiting] = folded_key(text, start, len);
                waiting += 1;
                if waiting == KEYS_PER_RUN {
                    self.look_up_run(&keys, columns);
                    waiting = 0;
                }
            } else {
                self.look_up_run(&keys[..waiting], columns);
                waiting = 0;
                let lowered = text[start..end].to_ascii_lowercase();
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

    /// The probability from the columns of a text's terms (one per occurrence), in one pass
    /// over them. The dot products are linear in a term's count, so each occurrence adds its
    /// weights; the squared norm is not, so each occurrence adds what it raises its term's
    /// square by, `idf² · (2n - 1)` for the `n`th, its count read from a [`CountTable`] (this
    /// took the place of sorting the columns to count them, 1.9 % of a saturated text shard).
    fn score_columns(&self, columns: &[u32]) -> f64 {
        // The rows are read ahead too, for the same reason as the slots.
        let touched = columns.iter().fold(0u64, |touched, &column| {
            touched ^ self.columns[column as usize][0].to_bits()
        });
        std::hint::black_box(touched);
        let mut on_stack = [(0u32, 0u32); COUNT_SLOTS_ON_STACK];
        let mut on_heap = Vec::new();
        let mut counts = CountTable::new(columns.len(), &mut on_stack, &mut on_heap);
        let mut dots = [0.0f64; FOLDS];
        let mut squares = 0.0f64;
        for &column in columns {
            let n = counts.add(column);
            let weights = &self.columns[column as usize];
            squares += weights[0] * weights[0] * f64::from(2 * n - 1);
            for (dot, weight) in dots.iter_mut().zip(&weights[1..]) {
                *dot += weight;
            }
        }
        self.probability(&dots, squares)
    }

    /// The folds' calibrated probabilities, averaged, from the dot products of the text's
    /// term counts with each fold's weights and from the squared norm of its idf vector.
    fn probability(&self, dots: &[f64; FOLDS], squares: f64) -> f64 {
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

/// Slots of a [`CountTable`] kept on the stack (4 KiB): enough for a text of up to half as
/// many term occurrences (a 1 KiB text has about 170). A longer text's table is on the heap.
const COUNT_SLOTS_ON_STACK: usize = 512;

/// How many times each column has been seen, in an open-addressed table (linear probing,
/// [`first_slot`] and [`next_slot`]) of `(column + 1, count)` slots, 0 marking an empty one,
/// at least twice as many slots as there can be distinct columns, so that it is at most half
/// full.
struct CountTable<'a> {
    slots: &'a mut [(u32, u32)],
}

impl<'a> CountTable<'a> {
    /// A table for up to `occurrences` columns, in `on_stack` when they fit, else in
    /// `on_heap`.
    fn new(
        occurrences: usize,
        on_stack: &'a mut [(u32, u32); COUNT_SLOTS_ON_STACK],
        on_heap: &'a mut Vec<(u32, u32)>,
    ) -> CountTable<'a> {
        let len = (occurrences * 2).next_power_of_two().max(16);
        let slots = if len <= COUNT_SLOTS_ON_STACK {
            &mut on_stack[..len]
        } else {
            on_heap.resize(len, (0, 0));
            &mut on_heap[..]
        };
        CountTable { slots }
    }

    /// Counts one more `column` and returns its count so far (1 the first time).
    fn add(&mut self, column: u32) -> u32 {
        let key = column + 1;
        let len = self.slots.len();
        let mut at = first_slot(u64::from(column), len);
        loop {
            let slot = &mut self.slots[at];
            if slot.0 == key || slot.0 == 0 {
                *slot = (key, slot.1 + 1);
                return slot.1;
            }
            at = next_slot(at, len);
        }
    }
}

/// How many packed tokens of an ASCII text are looked up together (2 KiB of keys on the
/// stack; a 1 KiB text has about 170 tokens).
const KEYS_PER_RUN: usize = 128;

/// `n` copies of the byte `b` in a word (of 8 or 16 bytes).
const fn bytes_of(b: u8) -> u128 {
    u128::from_le_bytes([b; 16])
}

/// The high bit of each byte of `word` (ASCII bytes: each below 0x80) set where the byte is
/// at least `low`: a bias added to every byte at once. An ASCII byte plus a bias below 0x80
/// never carries into the next byte.
fn at_least(word: u128, low: u8) -> u128 {
    word.wrapping_add(bytes_of(0x80 - low))
}

/// The high bit of each byte of `word` (8 ASCII bytes) that is a word character
/// ([`is_word_char`]: a letter, a digit or `_`), others 0, by the tests of [`at_least`].
fn word_bytes(word: u64) -> u64 {
    let word = u128::from(word);
    let lower = word | bytes_of(0x20);
    let letter = at_least(lower, b'a') & !at_least(lower, b'z' + 1);
    let digit = at_least(word, b'0') & !at_least(word, b'9' + 1);
    let underscore = !at_least(word ^ bytes_of(b'_'), 1);
    // The low 8 bytes (the high ones, zeros of `word`, are cut: the same warm time as tests
    // written on `u64`, `tuning/warm_time.sh`).
    ((letter | digit | underscore) & bytes_of(0x80)) as u64
}

/// The bytes `(start, end)` of every maximal run of word characters of an ASCII text, in
/// order, whatever its length. Runs are found 64 bytes at a time from a mask of which bytes
/// are word characters ([`word_bytes`], then each byte's high bit gathered into one bit by a
/// multiplication): a loop that tested each byte mispredicted a branch at every token's end
/// (with the key's bytes stored one at a time, the read after that loop held 44 % of this
/// model's samples at saturation). An iterator rather than a function taking a closure, so
/// that the caller's work per run is compiled in its loop.
struct AsciiRuns<'a> {
    text: &'a [u8],
    /// Where the current block of 64 bytes (fewer at the text's end) starts.
    block: usize,
    /// Where the next one starts.
    next_block: usize,
    /// The bits of the current block where a run starts or ends, not yet given.
    edges: u64,
    /// The current block's last bit, which the next block's first edge depends on.
    carried: u64,
    /// The start of the run in progress, if one is.
    open: Option<usize>,
}

impl<'a> AsciiRuns<'a> {
    fn new(text: &'a [u8]) -> AsciiRuns<'a> {
        AsciiRuns {
            text,
            block: 0,
            next_block: 0,
            edges: 0,
            carried: 0,
            open: None,
        }
    }

    /// The mask of the next block's word characters into `edges`. (Once in 64 bytes: kept
    /// out of line so that `next`, small, is compiled into its caller's loop.)
    #[inline(never)]
    fn read_block(&mut self) {
        // Bit k of `(high bits >> 7) * GATHER`'s top byte is byte k's bit: every product term
        // lands on its own bit, so none carries.
        const GATHER: u64 = 0x0102_0408_1020_4080;
        let gathered = |high: u64| (high >> 7).wrapping_mul(GATHER) >> 56;
        let end = self.text.len().min(self.next_block + 64);
        let block = &self.text[self.next_block..end];
        let eights = block.chunks_exact(8);
        let rest = eights.remainder();
        let mut words = 0u64;
        for (i, eight) in eights.enumerate() {
            let high = word_bytes(u64::from_le_bytes(eight.try_into().unwrap_or_default()));
            words |= gathered(high) << (8 * i);
        }
        if !rest.is_empty() {
            // The text's last bytes, padded with zeros (not word characters).
            let mut bytes = [0u8; 8];
            bytes[..rest.len()].copy_from_slice(rest);
            words |= gathered(word_bytes(u64::from_le_bytes(bytes))) << (block.len() / 8 * 8);
        }
        // A run starts where a word byte follows another byte, and ends where it is followed.
        self.edges = words ^ (words << 1 | self.carried);
        self.carried = words >> 63;
        self.block = self.next_block;
        self.next_block = end;
    }
}

impl Iterator for AsciiRuns<'_> {
    type Item = (usize, usize);

    #[inline(always)]
    fn next(&mut self) -> Option<(usize, usize)> {
        loop {
            while self.edges != 0 {
                let at = self.block + self.edges.trailing_zeros() as usize;
                self.edges &= self.edges - 1;
                match self.open.take() {
                    Some(start) => return Some((start, at)),
                    None => self.open = Some(at),
                }
            }
            if self.next_block == self.text.len() {
                return self.open.take().map(|start| (start, self.text.len()));
            }
            self.read_block();
        }
    }
}

/// The token of `len` bytes (1 to [`PACKED_BYTES_MAX`]) at `start` of the ASCII `text`,
/// lower-cased and [`packed`] (as [`halves`]): read as one 16-byte word, cut to `len`, and
/// `0x20` added to each capital at once (found by [`at_least`]).
fn folded_key(text: &[u8], start: usize, len: usize) -> [u64; 2] {
    let word = match text.get(start..start + PACKED_BYTES_MAX) {
        Some(sixteen) => u128::from_le_bytes(sixteen.try_into().unwrap_or_default()),
        None => text[start..start + len]
            .iter()
            .rev()
            .fold(0, |word, &byte| word << 8 | u128::from(byte)),
    };
    let word = word & (u128::MAX >> (8 * (PACKED_BYTES_MAX - len)));
    let capitals = at_least(word, b'A') & !at_least(word, b'Z' + 1) & bytes_of(0x80);
    halves(word | capitals >> 2)
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

    /// The runs of a text's word characters, byte by byte.
    fn runs_one_byte_at_a_time(text: &[u8]) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for (at, &byte) in text.iter().enumerate() {
            if !is_word_char(char::from(byte)) {
                continue;
            }
            match runs.last_mut() {
                Some((_, end)) if *end == at => *end += 1,
                _ => runs.push((at, at + 1)),
            }
        }
        runs
    }

    #[test]
    fn word_bytes_marks_the_word_characters_in_every_position() {
        for byte in 0u8..0x80 {
            for position in 0..8 {
                // The byte among others of each kind: none changes its answer.
                for other in [b' ', b'a', b'Z', b'_', b'9', 0, 0x7f] {
                    let mut bytes = [other; 8];
                    bytes[position] = byte;
                    let high = word_bytes(u64::from_le_bytes(bytes)).to_le_bytes();
                    for (at, &b) in bytes.iter().enumerate() {
                        let expected = if is_word_char(char::from(b)) { 0x80 } else { 0 };
                        assert_eq!(high[at], expected, "{bytes:?} at {at}");
                    }
                }
            }
        }
    }

    #[test]
    fn runs_are_found_across_blocks_and_at_the_ends() {
        let runs = |text: &[u8]| AsciiRuns::new(text).collect::<Vec<_>>();
        assert_eq!(runs(b""), []);
        assert_eq!(runs(b"a"), [(0, 1)]);
        assert_eq!(runs(b" a_1 , Bc"), [(1, 4), (7, 9)]);
        let long = [b'x'; 200];
        assert_eq!(runs(&long), [(0, 200)]);
        let mut split = [b'y'; 128];
        split[63] = b' ';
        split[64] = b'.';
        assert_eq!(runs(&split), [(0, 63), (65, 128)]);
    }

    proptest::proptest! {
        #[test]
        fn runs_and_keys_match_a_byte_by_byte_scan(
            text in "([a-zA-Z0-9_]{1,70}|[ .,'!\\-@`\\[{]{1,3}){0,12}|[\\x00-\\x7f]{0,200}"
        ) {
            let text = text.as_bytes();
            let runs: Vec<_> = AsciiRuns::new(text).collect();
            proptest::prop_assert_eq!(&runs, &runs_one_byte_at_a_time(text));
            for (start, end) in runs {
                if end - start <= PACKED_BYTES_MAX {
                    let lowered = text[start..end].to_ascii_lowercase();
                    let expected = halves(packed(&lowered).unwrap_or_default());
                    proptest::prop_assert_eq!(folded_key(text, start, end - start), expected);
                }
            }
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

    /// The probability as it was computed before [`CountTable`]: the columns sorted, each
    /// distinct one's count times its weights.
    fn score_by_sorting(model: &ProfanitySvm, mut columns: Vec<u32>) -> f64 {
        columns.sort_unstable();
        let (mut dots, mut squares) = ([0.0f64; FOLDS], 0.0f64);
        for run in columns.chunk_by(|a, b| a == b) {
            let (count, weights) = (run.len() as f64, &model.columns[run[0] as usize]);
            squares += (count * weights[0]).powi(2);
            for (dot, weight) in dots.iter_mut().zip(&weights[1..]) {
                *dot += count * weight;
            }
        }
        model.probability(&dots, squares)
    }

    proptest::proptest! {
        /// Columns drawn mostly from a few (so that terms repeat), up to 1,100 of them: the
        /// table on the stack and the one on the heap.
        #[test]
        fn counting_in_a_table_scores_as_sorting_did(
            columns in proptest::collection::vec(
                proptest::prop_oneof![3 => 0u32..24, 1 => 0u32..15_000], 0..1_100)
        ) {
            static MODEL: std::sync::LazyLock<ProfanitySvm> =
                std::sync::LazyLock::new(|| ProfanitySvm::embedded().unwrap());
            let model = &*MODEL;
            proptest::prop_assert!(model.columns.len() > 15_000);
            let counted = model.score_columns(&columns);
            let sorted = score_by_sorting(model, columns);
            proptest::prop_assert!((counted - sorted).abs() <= 1e-12, "{} vs {}", counted, sorted);
        }
    }

    #[test]
    fn the_count_table_counts_each_column() {
        let (mut on_stack, mut on_heap) = ([(0, 0); COUNT_SLOTS_ON_STACK], Vec::new());
        let mut table = CountTable::new(6, &mut on_stack, &mut on_heap);
        let counts: Vec<u32> = [7, 0, 7, 15_441, 7, 0].map(|c| table.add(c)).to_vec();
        assert_eq!(counts, [1, 1, 2, 1, 3, 2]);
        assert!(on_heap.is_empty());
        let mut table = CountTable::new(COUNT_SLOTS_ON_STACK, &mut on_stack, &mut on_heap);
        for column in 0..COUNT_SLOTS_ON_STACK as u32 {
            assert_eq!(table.add(column * 16), 1);
        }
        assert_eq!(table.add(16), 2);
        assert_eq!(on_heap.len(), 2 * COUNT_SLOTS_ON_STACK);
    }

    #[test]
    fn empty_text_scores_the_intercept_only() {
        let model = ProfanitySvm::embedded().unwrap();
        assert!((model.score("") - 0.036375752016469504).abs() < 1e-12);
        assert!((model.score("!!! ...") - 0.036375752016469504).abs() < 1e-12);
    }
}
