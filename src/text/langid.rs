//! The language of every text: a naive Bayes classifier over langdetect's n-gram profiles of 55
//! languages, cheap enough to run on every check (a few microseconds).
//!
//! Why not whatlang ([`super::language`]) for every text: it compares each of its 69 languages'
//! 300 most common trigrams with the text's, a cost fixed per language (50 to 100 µs a text),
//! two to three times a whole `default` check. This classifier looks up only the text's own
//! n-grams, each in one table, and adds the weights of the few languages that have it.
//! whatlang stays the detector of the `language` check, which reads more languages and gives
//! `unread_language`.
//!
//! Data: `models/cache/langdetect_profiles.json`, langdetect 1.0.9's profiles (counts of the
//! 1- to 3-character n-grams of Wikipedia per language; Apache-2.0), fetched from PyPI by
//! `models/fetch.py`. The method is langdetect's model read deterministically: where langdetect
//! multiplies the probabilities of randomly drawn n-grams over seven trials, this sums, for
//! every n-gram of the sample, `ln(α/BASE + count/words)` per language (α = 0.5, BASE =
//! 10,000: langdetect's smoothing), stored as the gain over an n-gram the language lacks so
//! that a language missing from an n-gram's list costs nothing to score.
//!
//! The gains are stored in fixed point, 16 bits each (6,600 steps per unit), and a text's
//! sums are 32-bit integers. Why: the tables are larger than a core's cache, and a dense row
//! of 64 gains is two cache lines instead of four `f32` ones, a sparse gain 4 bytes instead
//! of 8. Reads that miss a cold last-level cache per 1 KiB detection fell from 973 to 611
//! (`COLD=1 tuning/instructions.sh langid`), and the server's CPU per saturated 1 KiB text by
//! 3 to 15 % (three passes of `tuning/cpu_compare.sh`). The precision is about that of the
//! `f32` sums it replaced: a gain is rounded by at most 0.000076, where adding a gain to an
//! `f32` score of 2,048 to 4,096 (a 1 KiB sample's) rounded the sum by up to 0.000122;
//! integer sums are then exact in any order. On the 4,741 declaration paragraphs of
//! `LANGUAGE_STATS.md` every language is the same, and the largest change of a confidence is
//! 0.000066 (a text of one word).
//!
//! Only the n-grams a text can form are kept: 59,482 of the profiles' 87,598. The others hold
//! a character that normalisation never gives (mostly Hangul syllables, which it folds into
//! one), a space inside, or end in a capital after a capital.
//!
//! Steps, on the first [`SAMPLE_CHARS_MAX`] characters:
//! 1. Letters are counted by script. Scripts of one language that the profiles lack (Georgian,
//!    Armenian, Khmer, Sinhala, Myanmar, Ethiopic) name it; Chinese, Japanese and Korean are
//!    told apart by script (kana: Japanese; Hangul: Korean; Han alone: Chinese), since the
//!    profiles fold ideographs into classes this module does not have. The confidence is the
//!    script's share of the letters.
//! 2. Otherwise each character is normalised as the profiles were made: a non-letter is a
//!    space; Romanian's comma-below letters become their cedilla forms; Persian yeh becomes
//!    Arabic yeh; Vietnamese letters of Latin Extended Additional fold into one; kana and
//!    Hangul fold into one each. A text with more non-Latin letters than twice its Latin
//!    ones drops the Latin ones (names, links). The 1- to 3-grams of each word (a word padded
//!    with spaces), case kept, are scored; words in capitals after their first letter
//!    (acronyms) are skipped, as langdetect skips them.
//! 3. The best language wins; the confidence comes from the margin over the second per
//!    n-gram (`confidence`: 0.5 at no lead, 0.96 at 0.1 per n-gram).
//! 4. Below [`CONFIRM_BELOW`], whatlang compares the [`CANDIDATES`] best languages (its
//!    alphabets and trigrams tell close languages apart better on short texts), and its
//!    answer and confidence are the text's. That costs a few microseconds more, for the texts
//!    that need it only.
//!
//! The codes are ISO 639-1; the profiles' `no` is answered `nb` and `zh-cn`/`zh-tw` as `zh`,
//! as the `language` check answers them. `models/text/LANGUAGE_STATS.md` has the accuracy.

use super::language::Language;
use crate::hash::{FastMap, FlatIndex};

/// The file in the models directory, and its sha256 (as `models/fetch.py` pins it).
pub const PROFILES_FILE: &str = "cache/langdetect_profiles.json";
pub const PROFILES_SHA256: &str =
    "c4d58cb2db6d76666bcdfa34c711ad382702e3269b91ddf08889ffe1d51fca41";
/// Characters read, at most: accuracy on the declarations of `LANGUAGE_STATS.md` is the same
/// from 120 characters up, and the cost grows with the sample.
pub const SAMPLE_CHARS_MAX: usize = 120;
/// langdetect's smoothing: an n-gram a language lacks has this probability.
const ALPHA: f64 = 0.5;
const BASE_FREQ: f64 = 10_000.0;
/// Languages at most: the width of a dense row and of the scores.
const LANGUAGES_MAX: usize = 64;
/// An n-gram that this many languages or more have gets a dense row: the 3,834 commonest
/// n-grams of the profiles (0.5 MB), which are most of what a text hits, are then added with
/// vector instructions instead of one language at a time.
const DENSE_FROM: usize = 8;
/// N-grams of a sample at most: one, two and three characters ending at each character.
const GRAMS_MAX: usize = 3 * SAMPLE_CHARS_MAX;
/// Gains of a dense row in one cache line.
const GAINS_PER_LINE: usize = 64 / std::mem::size_of::<u16>();
/// Steps of a stored gain per unit of `ln`: the largest gain, `ln(1 + BASE_FREQ / ALPHA)` =
/// 9.9035 (an n-gram that is every n-gram of its length in a language), is 65,363 of a
/// `u16`'s 65,535. A text's score is at most [`GRAMS_MAX`] of them, far inside a `u32`.
const GAIN_SCALE: f64 = 6_600.0;

/// Below this confidence, the classifier's [`CANDIDATES`] best languages are compared again
/// by whatlang (the profiles alone are weak between close languages on short texts: Russian
/// read as Ukrainian, as langdetect itself reads it).
pub const CONFIRM_BELOW: f64 = 0.9;
/// The languages whatlang compares then.
pub const CANDIDATES: usize = 4;

/// The classifier: per n-gram, the languages that have it and their gains.
pub struct LangId {
    codes: Vec<&'static str>,
    /// whatlang's language of each code, where it has it.
    whatlang: Vec<Option<whatlang::Lang>>,
    /// Each n-gram's [`Gains`] (as [`Gains::to_slot`]), in a flat index at most
    /// [`INDEX_LOAD_MAX`] full: the key and where its gains are share one 16-byte slot (the
    /// 59,482 n-grams that are read take 1.4 MB; all 87,598 of the profiles took 2 MB in a
    /// power-of-two table, 3.1 in a `HashMap`). No n-gram's [`key`] is 0, the empty key.
    index: FlatIndex<u64, (u32, u32)>,
    /// The gains of the n-grams of few languages, each with its language.
    sparse: Vec<SparseGain>,
    /// Every language's gain (0 where it lacks the n-gram) of the n-grams of many.
    dense: Vec<DenseRow>,
}

/// A dense row, on whole cache lines: a row at any 2-byte boundary spans one line more, and
/// one more missed line a row was 15 % of a cold detection's misses (`COLD=1
/// tuning/instructions.sh`, when rows were `f32`).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct DenseRow([u16; LANGUAGES_MAX]);

/// One language's gain of an n-gram of few languages (4 bytes).
#[derive(Clone, Copy)]
struct SparseGain {
    language: u8,
    gain: u16,
}

/// A gain in fixed point ([`GAIN_SCALE`]), or `None` past what 16 bits hold: a count more than
/// 2.6 % over the total of its n-gram length, which no well-formed profile has.
fn fixed_gain(gain: f64) -> Option<u16> {
    let steps = (gain * GAIN_SCALE).round();
    (0.0..=f64::from(u16::MAX))
        .contains(&steps)
        .then_some(steps as u16)
}

/// Where an n-gram's gains are.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Gains {
    /// A range of [`LangId::sparse`].
    Sparse(u32, u32),
    /// A row of [`LangId::dense`].
    Dense(u32),
}

/// An index holds at most this share of its slots full: a lookup then reads two slots on
/// average, five for an n-gram it lacks (four slots share a cache line).
const INDEX_LOAD_MAX: (usize, usize) = (7, 10);
/// The second number of a dense row's slot (a sparse range never ends there).
const DENSE_MARK: u32 = u32::MAX;

impl Gains {
    /// The gains as an index slot's value: [`Gains::Sparse`]`(a, b)` as `(a, b)`,
    /// [`Gains::Dense`]`(a)` as `(a, DENSE_MARK)`.
    fn to_slot(self) -> (u32, u32) {
        match self {
            Gains::Dense(row) => (row, DENSE_MARK),
            Gains::Sparse(start, end) => (start, end),
        }
    }

    fn from_slot((a, b): (u32, u32)) -> Gains {
        if b == DENSE_MARK {
            Gains::Dense(a)
        } else {
            Gains::Sparse(a, b)
        }
    }
}

/// What a text's letters are written in, as far as the classifier cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Script {
    /// Scored by the profiles.
    Profiled,
    Latin,
    Han,
    Kana,
    Hangul,
    /// A script of one language the profiles lack: its index in [`ONE_SCRIPT_LANGUAGES`].
    OneLanguage(usize),
}

/// The languages of [`Script::OneLanguage`]: Georgian, Armenian, Khmer, Sinhala, Burmese and
/// Amharic (Ethiopic).
const ONE_SCRIPT_LANGUAGES: [&str; 6] = ["ka", "hy", "km", "si", "my", "am"];

fn script_of(c: char) -> Script {
    match u32::from(c) {
        0x41..=0x5a | 0x61..=0x7a | 0xc0..=0x24f | 0x1e00..=0x1eff => Script::Latin,
        0x10a0..=0x10ff => Script::OneLanguage(0),
        0x0530..=0x058f => Script::OneLanguage(1),
        0x1780..=0x17ff => Script::OneLanguage(2),
        0x0d80..=0x0dff => Script::OneLanguage(3),
        0x1000..=0x109f => Script::OneLanguage(4),
        0x1200..=0x139f => Script::OneLanguage(5),
        0x3040..=0x30ff | 0x31f0..=0x31ff | 0xff66..=0xff9d => Script::Kana,
        0xac00..=0xd7af | 0x1100..=0x11ff | 0x3130..=0x318f => Script::Hangul,
        0x3400..=0x4dbf | 0x4e00..=0x9fff | 0xf900..=0xfaff | 0x20000..=0x2ffff => Script::Han,
        _ => Script::Profiled,
    }
}

/// A character as the profiles were made (see the module's steps); a space for what is not a
/// letter.
fn normalise(c: char) -> char {
    match u32::from(c) {
        0..=0x7f if c.is_ascii_alphabetic() => c,
        0..=0x7f => ' ',
        0x219 => '\u{15f}',
        0x21b => '\u{163}',
        0x6cc => '\u{64a}',
        0x1ea0..=0x1eff => '\u{1ec3}',
        0x2000..=0x206f => ' ',
        0x3040..=0x309f => '\u{3042}',
        0x30a0..=0x30ff => '\u{30a2}',
        0xac00..=0xd7af => '\u{ac00}',
        _ if c.is_alphabetic() => c,
        _ => ' ',
    }
}

/// The [`key`]s of the n-grams of `sample` (at most [`SAMPLE_CHARS_MAX`] characters), in
/// order, into `keys`; returns their count. Step 2 of the module's.
fn sample_keys(sample: &str, drop_latin: bool, keys: &mut [u64; GRAMS_MAX]) -> usize {
    // The n-grams that end at a character are those of the last three characters of its
    // word, padded with a space before (a window slid by one character). The window is kept
    // as its last two characters before the new one, in registers: `last`, a space at a
    // word's start, and `before` it. (As an array indexed by how full it was, each n-gram
    // read back what the step before had just stored, and its loops mispredicted.)
    let mut count = 0;
    let (mut before, mut last) = (' ', ' ');
    let mut push = |key: u64| {
        keys[count] = key;
        count += 1;
    };
    for c in sample.chars() {
        let c = if drop_latin && script_of(c) == Script::Latin {
            ' '
        } else {
            normalise(c)
        };
        // A new word starts after a space (the window is its leading space); spaces run on.
        if last == ' ' && c == ' ' {
            continue;
        }
        let (a, b) = (before, last);
        (before, last) = (last, c);
        // A capital after a capital: an acronym's, or a word in capitals.
        if c.is_uppercase() && b.is_uppercase() {
            continue;
        }
        // A lone space is no n-gram, nor is a trigram across a word's start.
        if c != ' ' {
            push(key(&[c]));
        }
        push(key(&[b, c]));
        if b != ' ' {
            push(key(&[a, b, c]));
        }
    }
    count
}

/// Whether [`LangId::detect`] ever looks `gram` up: each of its characters is one that
/// [`normalise`] gives, a space only first or last (a word's padding) and not alone, and it
/// does not end in a capital after a capital (an acronym's, skipped). The profiles hold n-grams
/// that it never does, mostly of Hangul syllables, which the classifier reads as one
/// character: left out, they change no score.
fn is_read(gram: &[char]) -> bool {
    let interior = gram.len().saturating_sub(1);
    gram.iter().all(|&c| normalise(c) == c)
        && gram.iter().any(|&c| c != ' ')
        && !gram.iter().take(interior).skip(1).any(|&c| c == ' ')
        && !matches!(gram, [.., before, last] if before.is_uppercase() && last.is_uppercase())
}

/// An n-gram of one to three characters as one number (each character plus one, 21 bits).
#[inline(always)]
fn key(gram: &[char]) -> u64 {
    gram.iter()
        .enumerate()
        .fold(0, |key, (at, &c)| key | (u64::from(c) + 1) << (21 * at))
}

/// The confidence of a best language that leads the second by `margin` per n-gram scored:
/// 0.5 at no margin, 0.86 at 0.05, 0.96 at 0.1, 0.997 at 0.2. On the declarations of
/// `LANGUAGE_STATS.md` the best language was right for 66 % of the texts with a margin under
/// 0.05, 95 % from 0.05 to 0.1 and over 99 % from 0.1.
fn confidence(margin: f64) -> f64 {
    1.0 - 0.5 * (-margin / 0.04).exp()
}

impl LangId {
    /// Reads the profiles (the combined JSON object of `models/fetch.py`).
    pub fn from_json(mut json: Vec<u8>) -> Result<LangId, String> {
        use simd_json::prelude::*;
        let bad = |what: &str| format!("language profiles: {what}");
        // Read in place (names and n-grams borrowed from the buffer): this runs at every start,
        // and 184,000 owned keys cost a debug build most of a second.
        let value =
            simd_json::to_borrowed_value(&mut json).map_err(|error| bad(&error.to_string()))?;
        let profiles = value.as_object().ok_or_else(|| bad("not an object"))?;
        if profiles.is_empty() || profiles.len() > LANGUAGES_MAX {
            return Err(bad(&format!(
                "{} languages, expected 1 to {LANGUAGES_MAX}",
                profiles.len()
            )));
        }
        // In name order, so that a language's index does not depend on the map's.
        let mut names: Vec<&str> = profiles.keys().map(|name| name.as_ref()).collect();
        names.sort_unstable();
        let floor = (ALPHA / BASE_FREQ).ln();
        let mut by_gram: FastMap<u64, Vec<SparseGain>> = FastMap::default();
        let mut codes = Vec::with_capacity(names.len());
        for (language, name) in names.into_iter().enumerate() {
            codes.push(iso_639_1(name)?);
            let profile = &profiles[name];
            let freq = profile
                .get("freq")
                .and_then(|freq| freq.as_object())
                .ok_or_else(|| bad(&format!("`{name}` has no `freq` object")))?;
            let words: Vec<u64> = profile
                .get("n_words")
                .and_then(|words| words.as_array())
                .map(|words| words.iter().filter_map(|n| n.as_u64()).collect())
                .filter(|words: &Vec<u64>| words.len() == 3)
                .ok_or_else(|| bad(&format!("`{name}` has no `n_words` of three counts")))?;
            for (gram, count) in freq.iter() {
                let count = count
                    .as_u64()
                    .ok_or_else(|| bad(&format!("`{name}`: a count is not a whole number")))?;
                let mut chars = ['\0'; 3];
                let mut len = 0;
                for c in gram.chars() {
                    if len == 3 {
                        len = 4; // longer than a trigram
                        break;
                    }
                    chars[len] = c;
                    len += 1;
                }
                let Some(&counted) = len.checked_sub(1).and_then(|n| words.get(n)) else {
                    continue; // not a 1- to 3-gram
                };
                if counted == 0 || count == 0 || !is_read(&chars[..len]) {
                    continue;
                }
                let gain = (ALPHA / BASE_FREQ + count as f64 / counted as f64).ln() - floor;
                let gain = fixed_gain(gain).ok_or_else(|| {
                    bad(&format!(
                        "`{name}`: `{gram}` counts more than its length's {counted} n-grams"
                    ))
                })?;
                by_gram
                    .entry(key(&chars[..len]))
                    .or_default()
                    .push(SparseGain {
                        language: language as u8,
                        gain,
                    });
            }
        }
        let mut index = Vec::with_capacity(by_gram.len());
        let (mut sparse, mut dense) = (Vec::new(), Vec::new());
        for (gram, languages) in by_gram {
            let gains = if languages.len() >= DENSE_FROM {
                let mut row = [0u16; LANGUAGES_MAX];
                for SparseGain { language, gain } in languages {
                    row[usize::from(language)] = gain;
                }
                dense.push(DenseRow(row));
                Gains::Dense(dense.len() as u32 - 1)
            } else {
                let start = sparse.len() as u32;
                sparse.extend(languages);
                Gains::Sparse(start, sparse.len() as u32)
            };
            index.push((gram, gains.to_slot()));
        }
        // In key order, so that where each n-gram lands does not depend on the map's order.
        index.sort_unstable_by_key(|&(gram, _)| gram);
        let whatlang = codes
            .iter()
            .map(|code| super::language::whatlang_of(code))
            .collect();
        Ok(LangId {
            codes,
            whatlang,
            index: FlatIndex::new(&index, INDEX_LOAD_MAX),
            sparse,
            dense,
        })
    }

    /// Adds the gains of `found` (as [`Gains::to_slot`] keeps them) to `scores`, with AVX2's
    /// additions of 8 lanes where the CPU has them (a dense row is 8 of them instead of 16 of
    /// 4).
    fn add_gains(&self, found: &[(u32, u32)], scores: &mut [u32; LANGUAGES_MAX]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: calling a function compiled with `target_feature(enable = "avx2")` is
            // sound on a CPU that has AVX2, which was checked just above; the function has no
            // other requirement (it is safe code).
            unsafe { self.add_gains_avx2(found, scores) };
            return;
        }
        self.add_gains_in_order(found, scores);
    }

    /// [`LangId::add_gains`] compiled for AVX2 (integer sums: the same with it or without, as
    /// a test holds).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn add_gains_avx2(&self, found: &[(u32, u32)], scores: &mut [u32; LANGUAGES_MAX]) {
        self.add_gains_in_order(found, scores);
    }

    /// The additions of [`LangId::add_gains`]: the dense rows summed apart (in registers:
    /// eight lanes of eight), then the sparse gains one at a time. The sums are of integers,
    /// so their order changes nothing. Taken in the text's order instead, a dense row's wide
    /// reads of the scores waited on the narrow stores of the sparse gains before it (a read
    /// cannot take its bytes from several stores in flight): 70 % of this function's samples.
    #[inline(always)]
    fn add_gains_in_order(&self, found: &[(u32, u32)], scores: &mut [u32; LANGUAGES_MAX]) {
        let mut dense = [0u32; LANGUAGES_MAX];
        for &gains in found {
            if let Gains::Dense(row) = Gains::from_slot(gains) {
                for (sum, &gain) in dense.iter_mut().zip(&self.dense[row as usize].0) {
                    *sum += u32::from(gain);
                }
            }
        }
        for (score, sum) in scores.iter_mut().zip(dense) {
            *score += sum;
        }
        for &gains in found {
            if let Gains::Sparse(start, end) = Gains::from_slot(gains) {
                for sparse in &self.sparse[start as usize..end as usize] {
                    scores[usize::from(sparse.language)] += u32::from(sparse.gain);
                }
            }
        }
    }

    /// The language of `text`, if it has letters.
    pub fn detect(&self, text: &str) -> Option<Language> {
        let sample = super::first_chars(text, SAMPLE_CHARS_MAX);
        // 1. Scripts.
        let (mut letters, mut latin, mut han, mut kana, mut hangul) = (0u32, 0u32, 0, 0, 0);
        let mut one = [0u32; ONE_SCRIPT_LANGUAGES.len()];
        for c in sample.chars().filter(|c| c.is_alphabetic()) {
            letters += 1;
            match script_of(c) {
                Script::Latin => latin += 1,
                Script::Han => han += 1,
                Script::Kana => kana += 1,
                Script::Hangul => hangul += 1,
                Script::OneLanguage(language) => one[language] += 1,
                Script::Profiled => {}
            }
        }
        if letters == 0 {
            return None;
        }
        let share = |count: u32| f64::from(count) / f64::from(letters);
        let cjk = han + kana + hangul;
        for (code, &count) in ONE_SCRIPT_LANGUAGES.iter().zip(&one) {
            if 2 * count > letters {
                return Some(Language::fast(code, share(count)));
            }
        }
        if 2 * cjk > letters {
            let code = if kana > 0 {
                "ja"
            } else if hangul >= han {
                "ko"
            } else {
                "zh"
            };
            return Some(Language::fast(code, share(cjk)));
        }
        // 2. N-grams.
        let drop_latin = 2 * latin < letters - latin;
        let mut keys = [0u64; GRAMS_MAX];
        let count = sample_keys(sample, drop_latin, &mut keys);
        // Every n-gram is looked up before any is scored, and every dense row read once before
        // the rows are added: at an ordinary load the tables are cold when a check starts, and
        // loads that do not wait on each other miss the cache together instead of one at a time.
        self.index.touch_first_slots(&keys[..count]);
        let mut found = [(0, 0); GRAMS_MAX];
        let mut grams = 0;
        for &key in &keys[..count] {
            if let Some(gains) = self.index.get(key) {
                found[grams] = gains;
                grams += 1;
            }
        }
        let mut touched = 0u16;
        for &gains in &found[..grams] {
            if let Gains::Dense(row) = Gains::from_slot(gains) {
                for line in self.dense[row as usize].0.chunks(GAINS_PER_LINE) {
                    touched ^= line[0];
                }
            }
        }
        std::hint::black_box(touched);
        let mut scores = [0u32; LANGUAGES_MAX];
        self.add_gains(&found[..grams], &mut scores);
        let grams = grams as u32;
        if grams == 0 {
            return None;
        }
        // 3. The best, and its lead.
        let (mut best, mut second) = (0, None::<usize>);
        for language in 1..self.codes.len() {
            if scores[language] > scores[best] {
                second = Some(best);
                best = language;
            } else if second.is_none_or(|second| scores[language] > scores[second]) {
                second = Some(language);
            }
        }
        let margin = second.map_or(f64::INFINITY, |second| {
            f64::from(scores[best] - scores[second]) / GAIN_SCALE / f64::from(grams)
        });
        let found = Language::fast(self.codes[best], confidence(margin));
        if found.confidence >= CONFIRM_BELOW {
            return Some(found);
        }
        // 4. Unsure: whatlang decides among the best few.
        let mut ranked: Vec<usize> = (0..self.codes.len()).collect();
        // Highest first; equal scores in the languages' order (a stable sort).
        ranked.sort_by_key(|&language| std::cmp::Reverse(scores[language]));
        let mut candidates = Vec::with_capacity(CANDIDATES);
        for lang in ranked
            .iter()
            .filter_map(|&language| self.whatlang[language])
        {
            if !candidates.contains(&lang) {
                candidates.push(lang);
                if candidates.len() == CANDIDATES {
                    break;
                }
            }
        }
        if candidates.len() < 2 {
            return Some(found);
        }
        Some(super::language::detect_among(sample, candidates).unwrap_or(found))
    }
}

/// The ISO 639-1 code of a profile's name.
fn iso_639_1(name: &str) -> Result<&'static str, String> {
    const CODES: [&str; 53] = [
        "af", "ar", "bg", "bn", "ca", "cs", "cy", "da", "de", "el", "en", "es", "et", "fa", "fi",
        "fr", "gu", "he", "hi", "hr", "hu", "id", "it", "ja", "kn", "ko", "lt", "lv", "mk", "ml",
        "mr", "ne", "nl", "pa", "pl", "pt", "ro", "ru", "sk", "sl", "so", "sq", "sv", "sw", "ta",
        "te", "th", "tl", "tr", "uk", "ur", "vi", "zh",
    ];
    match name {
        "no" => Ok("nb"),
        "zh-cn" | "zh-tw" => Ok("zh"),
        _ => CODES
            .iter()
            .find(|&&code| code == name)
            .copied()
            .ok_or_else(|| format!("language profiles: unknown language `{name}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shipped() -> &'static LangId {
        static LOADED: std::sync::OnceLock<LangId> = std::sync::OnceLock::new();
        LOADED.get_or_init(|| {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/models/");
            let bytes = std::fs::read(std::path::Path::new(path).join(PROFILES_FILE))
                .expect("models/cache/langdetect_profiles.json (run `make fetch`)");
            LangId::from_json(bytes).expect("profiles")
        })
    }

    #[test]
    fn languages_are_told_apart() {
        let more = [
            ("Obrigado pela atualização. Estarei lá às três e levarei os documentos de que falamos ontem.", "pt"),
            ("Bedankt voor de update. Ik ben er om drie uur en ik neem de documenten mee waar we gisteren over spraken.", "nl"),
            ("Дякую за новини. Я буду там о третій і принесу документи, про які ми говорили вчора.", "uk"),
            ("شكرا على التحديث. سأكون هناك في الساعة الثالثة وسأحضر المستندات التي تحدثنا عنها أمس.", "ar"),
            ("अपडेट के लिए धन्यवाद। मैं तीन बजे वहाँ रहूँगा और कल जिन दस्तावेज़ों की बात हुई थी, उन्हें लाऊँगा।", "hi"),
            ("更新ありがとうございます。三時にそこに行きます。", "ja"),
            ("谢谢你的更新。我三点钟会到那里，并带上我们昨天谈到的文件。", "zh"),
            ("업데이트 감사합니다. 세 시에 거기 있을게요.", "ko"),
            ("გმადლობთ განახლებისთვის. სამ საათზე იქ ვიქნები.", "ka"),
        ];
        for &(text, code) in super::super::tests::SENTENCES.iter().chain(&more) {
            let found = shipped().detect(text).unwrap();
            assert_eq!(found.code, code, "{text}: {found:?}");
            assert!(found.confidence > 0.9, "{text}: {found:?}");
        }
    }

    /// Every n-gram's gains added in the index's order, twice over: with and without AVX2, the
    /// same sums to the bit.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn wider_additions_give_the_same_scores() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let langid = shipped();
        let found: Vec<(u32, u32)> = kept_keys(langid)
            .filter_map(|key| langid.index.get(key))
            .collect();
        assert!(found.len() > 50_000);
        let found = [&found[..], &found[..]].concat();
        let (mut wide, mut plain) = ([0u32; LANGUAGES_MAX], [0u32; LANGUAGES_MAX]);
        // SAFETY: the CPU has AVX2 (checked above).
        unsafe { langid.add_gains_avx2(&found, &mut wide) };
        langid.add_gains_in_order(&found, &mut plain);
        assert_eq!(wide, plain);
        assert!(plain.iter().any(|&score| score != 0));
    }

    #[test]
    fn close_languages_on_short_texts_are_compared_again() {
        for (text, code) in [
            (
                "Спасибо за новости. Я буду там в три часа и принесу документы.",
                "ru",
            ),
            ("Дякую, побачимося завтра о третій.", "uk"),
            ("Tak, vi ses i morgen klokken tre.", "nb"),
            ("Dziękuję, do zobaczenia jutro o trzeciej.", "pl"),
        ] {
            let found = shipped().detect(text).unwrap();
            assert_eq!(found.code, code, "{text}: {found:?}");
        }
    }

    #[test]
    fn texts_without_letters_have_none() {
        assert_eq!(shipped().detect(""), None);
        assert_eq!(shipped().detect("12345 !!! 678 :-)"), None);
    }

    #[test]
    fn only_the_sample_is_read() {
        let english = "the weather is nice today and we will walk to the river ".repeat(4);
        let text = format!(
            "{english}{}",
            "Le temps est beau aujourd'hui et nous irons à la rivière. ".repeat(50)
        );
        assert_eq!(shipped().detect(&text).unwrap().code, "en");
    }

    /// [`sample_keys`] as it was written before its window moved to registers: the window
    /// an array of three characters and how many of them are filled.
    fn sample_keys_by_window(sample: &str, drop_latin: bool, keys: &mut [u64; GRAMS_MAX]) -> usize {
        let mut count = 0;
        let mut window: [char; 3] = [' '; 3];
        let mut filled = 1; // the word's leading space
        for c in sample.chars() {
            let c = if drop_latin && script_of(c) == Script::Latin {
                ' '
            } else {
                normalise(c)
            };
            let last = window[filled - 1];
            if last == ' ' {
                // A new word starts (or spaces run on).
                window[0] = ' ';
                filled = 1;
                if c == ' ' {
                    continue;
                }
            } else if filled == 3 {
                // By hand: `rotate_left` on three `char`s is a call to `memmove` (measured: 2 %
                // of a text check).
                window = [window[1], window[2], window[2]];
                filled = 2;
            }
            window[filled] = c;
            filled += 1;
            // A capital after a capital: an acronym's, or a word in capitals.
            if c.is_uppercase() && last.is_uppercase() {
                continue;
            }
            for n in 1..=filled {
                let gram = &window[filled - n..filled];
                if n == 1 && gram[0] == ' ' {
                    continue;
                }
                keys[count] = key(gram);
                count += 1;
            }
        }
        count
    }

    proptest::proptest! {
        #[test]
        fn sample_keys_are_those_of_a_sliding_window(
            text in "([a-zA-Z]{1,6}|[A-Z]{2,4}|[ .,0-9]{1,3}|\\PC{1,4}){0,40}",
            drop_latin in proptest::bool::ANY,
        ) {
            let sample = crate::text::first_chars(&text, SAMPLE_CHARS_MAX);
            let (mut keys, mut expected) = ([0u64; GRAMS_MAX], [0u64; GRAMS_MAX]);
            let count = sample_keys(sample, drop_latin, &mut keys);
            let expected_count = sample_keys_by_window(sample, drop_latin, &mut expected);
            proptest::prop_assert_eq!(&keys[..count], &expected[..expected_count]);
        }
    }

    #[test]
    fn n_grams_are_the_words_padded_with_spaces() {
        // `en` has the n-grams of the word "ab" (" a", "a", "ab", "b", " ab") and a capital
        // "A"; `fr` has "zz" and, far more often, a capital "B".
        let json = br#"{"en":{"freq":{"a":5," a":5,"ab":5," ab":5,"b":5,"A":5},"n_words":[10,10,10],"name":"en"},
                        "fr":{"freq":{"zz":5,"B":9},"n_words":[10,10,10],"name":"fr"}}"#;
        let langid = LangId::from_json(json.to_vec()).unwrap();
        let found = langid.detect("ab ab").unwrap();
        assert_eq!(found.code, "en");
        assert!(found.confidence > 0.99);
        // In "AB" the second capital after a capital is an acronym's: skipped, as langdetect
        // skips it, so only "A" counts.
        assert_eq!(langid.detect("AB").unwrap().code, "en");
        assert_eq!(langid.detect("B").unwrap().code, "fr");
        assert_eq!(langid.detect("qq"), None, "no n-gram of any profile");
    }

    #[test]
    fn malformed_profiles_are_refused() {
        for bad in [
            &b""[..],
            b"[]",
            b"{}",
            br#"{"en":{"freq":{"a":1}}}"#,
            br#"{"xx":{"freq":{"a":1},"n_words":[1,1,1],"name":"xx"}}"#,
            br#"{"en":{"freq":{"a":-1},"n_words":[1,1,1],"name":"en"}}"#,
            // More of one n-gram than of all n-grams of its length: past a stored gain.
            br#"{"en":{"freq":{"a":5},"n_words":[2,1,1],"name":"en"}}"#,
        ] {
            assert!(LangId::from_json(bad.to_vec()).is_err(), "{bad:?}");
        }
        // N-grams longer than three characters, and empty counts, are left out.
        let odd = br#"{"en":{"freq":{"abcd":1,"":3,"a":0,"b":2},"n_words":[2,0,0],"name":"en"}}"#;
        let langid = LangId::from_json(odd.to_vec()).unwrap();
        assert_eq!(langid.detect("b").unwrap().code, "en");
        assert_eq!(langid.detect("abcd"), langid.detect("b"));
    }

    proptest! {
        #[test]
        fn any_text_is_read_or_left(text in "\\PC{0,400}") {
            if let Some(found) = shipped().detect(&text) {
                prop_assert!((0.0..=1.0).contains(&found.confidence));
                prop_assert_eq!(found.code.len(), 2);
            }
        }

        /// Leaving out the n-grams [`is_read`] refuses changes no score: no text forms one.
        /// The texts: any, and texts dense in what normalisation changes and in capitals.
        #[test]
        fn every_n_gram_a_text_forms_is_read(
            text in prop_oneof![
                "\\PC{0,200}",
                "[ a-zA-Z0-9.,'ÀÉăắșțж\u{3044}\u{30a2}\u{d55c}\u{ac00}\u{4e00}\u{643}\u{6cc}-]{0,200}",
            ],
            drop_latin in any::<bool>(),
        ) {
            let mut keys = [0u64; GRAMS_MAX];
            let sample = super::super::first_chars(&text, SAMPLE_CHARS_MAX);
            let count = sample_keys(sample, drop_latin, &mut keys);
            for &key in &keys[..count] {
                let gram: Vec<char> = (0..3)
                    .map(|at| (key >> (21 * at)) & 0x1f_ffff)
                    .take_while(|&code| code != 0)
                    .map(|code| char::from_u32(code as u32 - 1).unwrap())
                    .collect();
                prop_assert!(is_read(&gram), "{:?} of {:?}", gram, sample);
            }
        }

        #[test]
        fn any_bytes_are_profiles_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = LangId::from_json(bytes);
        }

        /// Gains keep what they are through an index slot.
        #[test]
        fn gains_survive_a_slot(a in any::<u32>(), b in 0u32..DENSE_MARK) {
            prop_assert_eq!(Gains::from_slot(Gains::Dense(a).to_slot()), Gains::Dense(a));
            prop_assert_eq!(Gains::from_slot(Gains::Sparse(a, b).to_slot()), Gains::Sparse(a, b));
        }
    }

    /// The module's figure: of the profiles' 87,598 n-grams, those a text can form.
    #[test]
    fn only_the_n_grams_a_text_forms_are_kept() {
        assert_eq!(kept_keys(shipped()).count(), 59_482);
    }

    /// The keys of the n-grams in `langid`'s index (its full slots).
    fn kept_keys(langid: &LangId) -> impl Iterator<Item = u64> + '_ {
        langid.index.entries().map(|(key, _)| key)
    }

    #[test]
    fn the_n_grams_no_text_forms_are_told() {
        let read = |gram: &str| is_read(&gram.chars().collect::<Vec<char>>());
        for gram in [
            "a", " a", "ab", "a ", " ab", "ab ", " a ", "abc", "ABc", "Ab", " A", "A ", "가", "ă",
            "ж",
        ] {
            assert!(read(gram), "{gram:?}");
        }
        for gram in [
            " ", "  ", "a b", "  a", "a  ", "1", "a1", "-", "AB", "xAB", " AB", "한", "ș",
            "\u{3044}",
        ] {
            assert!(!read(gram), "{gram:?}");
        }
    }

    #[test]
    fn gains_are_stored_in_sixteen_bits() {
        let largest = (1.0 + BASE_FREQ / ALPHA).ln();
        assert_eq!(fixed_gain(0.0), Some(0));
        assert_eq!(fixed_gain(1.0), Some(6_600));
        assert_eq!(fixed_gain(largest), Some(65_363));
        assert_eq!(fixed_gain(f64::from(u16::MAX) / GAIN_SCALE), Some(u16::MAX));
        assert_eq!(fixed_gain(largest * 1.01), None);
        assert_eq!(fixed_gain(-1.0), None);
        assert_eq!(fixed_gain(f64::NAN), None);
    }
}
