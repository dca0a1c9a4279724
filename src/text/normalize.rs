//! Text normalisation for matching: what a word list sees instead of the raw text.
//!
//! The goal is that the spellings people use to slip past filters meet the word list in their
//! plain form, while innocent words stay themselves. Steps, in order:
//!
//! 1. Unicode compatibility decomposition (NFKD, i.e. NFKC without recomposing), then
//!    combining marks dropped: `ｆｕｃｋ` → `fuck`, `fück` → `fuck`, `ﬁ` → `fi`.
//! 2. Invisible characters dropped (zero-width spaces and joiners, soft hyphen, bidi
//!    controls, variation selectors, BOM); other control characters become spaces.
//! 3. Lower case (full Unicode mapping), then confusable letters of other scripts mapped to
//!    the Latin letter they imitate (Cyrillic `а`, Greek `ο`, Armenian `ս` …).
//! 4. Leetspeak, inside words only: digits and `@ $ | +` that stand between or next to
//!    letters become the letter they imitate (`sh1t`, `@ss`, `$hit`); `!` only before a
//!    letter (`sh!t`, but `hello!` stays). A number alone (`2024`) is left as it is, and so
//!    is the `@` of an e-mail address (`help@example.com` → `help example com`).
//! 5. Letters spelled apart: three or more single letters separated by one separator
//!    (`f.u.c.k`, `f u c k`, `f-u-c-k`) are joined into one word, which then takes steps 4
//!    and 6 as any word does (`s h 1 t` → `shit`, `f u u u c k` → `fuck`).
//! 6. A letter repeated three or more times becomes one (`fuuuck` → `fuck`).
//!
//! The output is words of lower-case letters and digits separated by single spaces, so a
//! word-boundary match needs no Unicode tables. Matching happens on whole words, which keeps
//! `Scunthorpe`, `assess` and `classic` innocent. The models do not see this text: they get
//! the raw text, as they were trained on it.
//!
//! Cost: an ASCII text takes a path of one byte per position, without any Unicode table
//! look-up. Untracked (every check), steps 4 to 6 are one pass that writes each word straight
//! to the output and copies most words whole (`ascii_steps`); tracked, they are the code
//! written once for bytes and characters (`Words`). Property tests hold the three to the
//! same output.

use unicode_normalization::char::{decompose_compatible, is_combining_mark};

/// Normalises `text` into `out` (cleared first); see [`Normalizer::normalize`].
pub fn normalize(text: &str, out: &mut String) -> bool {
    Normalizer::default().normalize(text, out)
}

/// Scratch buffers for normalising, reused from call to call (one per shard), so that a
/// normalisation allocates nothing in the steady state.
#[derive(Default)]
pub struct Normalizer {
    /// The text after steps 1 to 3, one `char` per position.
    chars: Vec<char>,
    /// Words after step 4, back to back.
    mapped: Vec<char>,
    /// `chars` and `mapped` of an ASCII text, which takes a path of one byte per position:
    /// the same rules on a quarter of the memory, without Unicode tables.
    ascii: Vec<u8>,
    ascii_mapped: Vec<u8>,
    words: Vec<Word>,
    /// The output's bytes, validated as UTF-8 once at the end rather than word by word.
    joined: Vec<u8>,
    /// A run of spelled-apart letters while steps 4 and 6 go over it once it is joined (and
    /// whatever followed it in the output, on the untracked ASCII path).
    run: Vec<char>,
    ascii_run: Vec<u8>,
    run_from: Vec<u32>,
    /// With [`Normalizer::normalize_tracked`]: the index, in characters of the input, that
    /// each entry of `chars` and of `mapped` came from (empty otherwise).
    chars_from: Vec<u32>,
    mapped_from: Vec<u32>,
    /// An output string the shard's checks borrow and give back ([`Normalizer::lend_output`]).
    output: String,
}

/// A word of `mapped`, and what separated it from the previous one.
#[derive(Clone, Copy)]
struct Word {
    start: usize,
    end: usize,
    /// The one separator character before it ([`Scanned::gap`]; which one matters:
    /// `f.u.c.k` joins, `f.u c.k` does not); never read for the first word.
    gap: Option<char>,
}

impl Normalizer {
    /// Normalises `text` into `out` (cleared first). Returns whether the result differs from
    /// what plain lower-casing and splitting on punctuation would give (a character mapped,
    /// dropped or joined), i.e. whether a model reading words could see something new in it.
    pub fn normalize(&mut self, text: &str, out: &mut String) -> bool {
        self.run::<false>(text, out, &mut Vec::new())
    }

    /// As [`Normalizer::normalize`], and fills `from` with, for each byte of `out`, the
    /// index (in characters, from 0) of the character of `text` it came from: a match found in
    /// `out` at bytes `s..e` covers the characters `from[s]..=from[e - 1]` of `text`.
    pub fn normalize_tracked(&mut self, text: &str, out: &mut String, from: &mut Vec<u32>) -> bool {
        self.run::<true>(text, out, from)
    }

    /// An empty string to normalise into, kept from the last check that gave one back
    /// ([`Normalizer::give_back`]); a new one if another check holds it.
    pub fn lend_output(&mut self) -> String {
        std::mem::take(&mut self.output)
    }

    /// Keeps `output`'s memory for the next [`Normalizer::lend_output`].
    pub fn give_back(&mut self, mut output: String) {
        output.clear();
        self.output = output;
    }

    /// `TRACK` is a constant so that the untracked run, on every request's path, carries no
    /// trace of the tracking (measured: branches on a field cost it 8 to 15 %).
    fn run<const TRACK: bool>(
        &mut self,
        text: &str,
        out: &mut String,
        from: &mut Vec<u32>,
    ) -> bool {
        out.clear();
        from.clear();
        self.chars.clear();
        self.mapped.clear();
        self.ascii.clear();
        self.ascii_mapped.clear();
        self.words.clear();
        self.joined.clear();
        self.chars_from.clear();
        self.mapped_from.clear();
        if text.is_ascii() {
            // Steps 1 to 3 change nothing in ASCII but the case.
            self.ascii.extend_from_slice(text.as_bytes());
            self.ascii.make_ascii_lowercase();
            if !TRACK {
                let changed = ascii_steps(&self.ascii, &mut self.joined, &mut self.ascii_run);
                push_utf8(&self.joined, out);
                return changed;
            }
            // Texts are bounded far below 4 G characters (the plans' limits).
            self.chars_from.extend(0..text.len() as u32);
            let words = Words {
                units: &self.ascii,
                units_from: &self.chars_from,
                mapped: &mut self.ascii_mapped,
                mapped_from: &mut self.mapped_from,
                words: &mut self.words,
                joined: &mut self.joined,
                run: &mut self.ascii_run,
                run_from: &mut self.run_from,
            };
            return words.steps::<TRACK>(out, from);
        }
        // Character by character, to know which ones compatibility decomposition changed
        // (`ｆ` → `f` is a disguise even though the result is plain ASCII). Combining marks
        // are dropped, so the canonical reordering a whole-string NFKD would do among them
        // changes nothing here.
        let mut changed = false;
        let chars = &mut self.chars;
        let chars_from = &mut self.chars_from;
        for (index, original) in text.chars().enumerate() {
            let mut only_itself = true;
            decompose_compatible(original, |c| {
                only_itself &= c == original;
                if is_combining_mark(c) || is_invisible(c) {
                    changed = true;
                    return;
                }
                for lower in c.to_lowercase() {
                    let mapped = confusable(lower);
                    changed |= mapped != lower || !lower.is_ascii();
                    chars.push(mapped);
                    if TRACK {
                        chars_from.push(index as u32);
                    }
                }
            });
            changed |= !only_itself;
        }
        let words = Words {
            units: &self.chars,
            units_from: &self.chars_from,
            mapped: &mut self.mapped,
            mapped_from: &mut self.mapped_from,
            words: &mut self.words,
            joined: &mut self.joined,
            run: &mut self.run,
            run_from: &mut self.run_from,
        };
        changed | words.steps::<TRACK>(out, from)
    }
}

/// A position of the text after steps 1 to 3: a `char`, or a byte of an ASCII text. Steps 4
/// to 6 are written once, over this.
trait Unit: Copy + PartialEq {
    /// What it is to the steps: [`LETTER`], [`DIGIT`], [`LEET`], or- ed.
    fn class(self) -> u8;
    fn is_letter(self) -> bool {
        self.class() & LETTER != 0
    }
    fn is_letter_or_digit(self) -> bool {
        self.class() & (LETTER | DIGIT) != 0
    }
    /// The letter a leet symbol imitates.
    fn leet(self) -> Option<Self>;
    fn as_char(self) -> char;
    /// Appends `units` to `out`, UTF-8 encoded.
    fn append(units: &[Self], out: &mut Vec<u8>);
}

impl Unit for char {
    fn class(self) -> u8 {
        if self.is_ascii() {
            return (self as u8).class();
        }
        let kind = if self.is_alphabetic() {
            LETTER
        } else if self.is_alphanumeric() {
            DIGIT
        } else {
            0
        };
        kind | if leet(self).is_some() { LEET } else { 0 }
    }

    fn leet(self) -> Option<char> {
        leet(self)
    }

    fn as_char(self) -> char {
        self
    }

    fn append(units: &[char], out: &mut Vec<u8>) {
        for &c in units {
            out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        }
    }
}

impl Unit for u8 {
    fn class(self) -> u8 {
        BYTE_CLASS[usize::from(self)]
    }

    fn leet(self) -> Option<u8> {
        match BYTE_LEET[usize::from(self)] {
            0 => None,
            letter => Some(letter),
        }
    }

    fn as_char(self) -> char {
        char::from(self)
    }

    fn append(units: &[u8], out: &mut Vec<u8>) {
        // ASCII: each byte is its own UTF-8 encoding.
        out.extend_from_slice(units);
    }
}

/// A [`Unit::class`]: a letter (alphabetic).
const LETTER: u8 = 1;
/// A digit, or another numeric character that is not a letter.
const DIGIT: u8 = 2;
/// A leet symbol ([`leet`]), digits included.
const LEET: u8 = 4;

/// [`Unit::class`] of each byte, as a table (bytes from 0x80 are never units of their own).
const BYTE_CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 128 {
        let c = byte as u8;
        table[byte] = if c.is_ascii_alphabetic() {
            LETTER
        } else if c.is_ascii_digit() {
            DIGIT
        } else {
            0
        } | if leet(c as char).is_some() { LEET } else { 0 };
        byte += 1;
    }
    table
};

/// [`leet`] of each byte, as a table (0: not a leet symbol).
const BYTE_LEET: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 128 {
        if let Some(letter) = leet(byte as u8 as char) {
            table[byte] = letter as u8;
        }
        byte += 1;
    }
    table
};

/// Steps 4 to 6 over the units of one text.
struct Words<'a, T> {
    units: &'a [T],
    /// With tracking: the input character each unit came from.
    units_from: &'a [u32],
    /// Words after step 4, back to back.
    mapped: &'a mut Vec<T>,
    mapped_from: &'a mut Vec<u32>,
    words: &'a mut Vec<Word>,
    /// The output's bytes (see [`Normalizer::joined`]).
    joined: &'a mut Vec<u8>,
    /// A joined run after steps 4 and 6 (see [`Normalizer::run`]).
    run: &'a mut Vec<T>,
    run_from: &'a mut Vec<u32>,
}

impl<T: Unit> Words<'_, T> {
    /// Steps 4 to 6 into `out` (and `from`, with `TRACK`); whether they changed anything.
    fn steps<const TRACK: bool>(mut self, out: &mut String, from: &mut Vec<u32>) -> bool {
        let changed = self.split::<TRACK>();
        changed | self.join::<TRACK>(out, from)
    }

    /// Step 4 and 6: words of letters, digits and leet symbols, de-leeted, with repeated
    /// letters collapsed, into `mapped`.
    fn split<const TRACK: bool>(&mut self) -> bool {
        let units = self.units;
        let mut changed = false;
        let mut i = 0;
        while let Some(Scanned {
            gap,
            start,
            end,
            has_letter,
            plain,
        }) = next_word(units, i)
        {
            i = end;
            let word = &units[start..end];
            let word_from = if TRACK {
                &self.units_from[start..end]
            } else {
                &[]
            };
            let from = self.mapped.len();
            if plain {
                // Nothing to map, and no run a letter could collapse: most words.
                self.mapped.extend_from_slice(word);
                self.mapped_from.extend_from_slice(word_from);
            } else {
                changed |= map_word::<T, TRACK>(
                    word,
                    word_from,
                    has_letter,
                    self.mapped,
                    self.mapped_from,
                );
            }
            self.words.push(Word {
                start: from,
                end: self.mapped.len(),
                gap: gap.map(Unit::as_char),
            });
        }
        changed
    }

    /// Step 5: words joined by single spaces, runs of spelled-apart single letters joined.
    fn join<const TRACK: bool>(self, out: &mut String, from: &mut Vec<u32>) -> bool {
        let Words {
            mapped,
            mapped_from,
            words,
            joined,
            run,
            run_from,
            ..
        } = self;
        let mut changed = false;
        let mut i = 0;
        while i < words.len() {
            let run_end = spelled_run_end(words, i);
            if !joined.is_empty() {
                joined.push(b' ');
                if TRACK {
                    from.push(mapped_from[words[i].start]);
                }
            }
            // A run of three or more is joined: its one-unit words are back to back in
            // `mapped`, and they take steps 4 and 6 as one word.
            let joins = run_end - i >= 3;
            let last = if joins { run_end - 1 } else { i };
            let (start, end) = (words[i].start, words[last].end);
            let units = &mapped[start..end];
            let units_from = if TRACK { &mapped_from[start..end] } else { &[] };
            if !joins {
                append::<T, TRACK>(units, units_from, joined, from);
                i += 1;
                continue;
            }
            changed = true;
            run.clear();
            run_from.clear();
            let has_letter = units.iter().any(|c| c.is_letter());
            map_word::<T, TRACK>(units, units_from, has_letter, run, run_from);
            append::<T, TRACK>(run, run_from, joined, from);
            i = run_end;
        }
        push_utf8(joined, out);
        changed
    }
}

/// Appends `units` to `joined` and, with `TRACK`, where each of its bytes came from
/// (`units_from`, one entry per unit) to `from`.
fn append<T: Unit, const TRACK: bool>(
    units: &[T],
    units_from: &[u32],
    joined: &mut Vec<u8>,
    from: &mut Vec<u32>,
) {
    T::append(units, joined);
    if TRACK {
        for (unit, &index) in units.iter().zip(units_from) {
            from.extend(std::iter::repeat_n(index, unit.as_char().len_utf8()));
        }
    }
}

/// A word of step 4 as [`next_word`] finds it.
struct Scanned<T> {
    /// The separator before it, if exactly one came before it and it is not a line break.
    gap: Option<T>,
    start: usize,
    end: usize,
    has_letter: bool,
    /// Whether it goes to the output as it is: no letter beside a leet symbol to map, no
    /// letter three times in a row to collapse (most words).
    plain: bool,
}

/// The next word of `units` from `at` (a maximal run of [`in_word`] units), if one is left.
#[inline(always)]
fn next_word<T: Unit>(units: &[T], at: usize) -> Option<Scanned<T>> {
    let mut start = at;
    while start < units.len() && !in_word(units, start) {
        start += 1;
    }
    if start == units.len() {
        return None;
    }
    let gap = (start == at + 1)
        .then(|| units[at])
        .filter(|c| !matches!(c.as_char(), '\n' | '\r'));
    let mut end = start;
    // The classes seen, and the length of the run of one unit that ends at `end`.
    let (mut seen, mut has_triple) = (0, false);
    let (mut last, mut run) = (units[start], 0u32);
    while end < units.len() {
        let c = units[end];
        let class = c.class();
        if !in_word_as(units, end, class) {
            break;
        }
        seen |= class;
        run = if c == last { run + 1 } else { 1 };
        last = c;
        has_triple |= run >= 3;
        end += 1;
    }
    let has_letter = seen & LETTER != 0;
    Some(Scanned {
        gap,
        start,
        end,
        has_letter,
        plain: !has_letter || !(seen & LEET != 0 || has_triple),
    })
}

/// Appends `bytes`, which the steps wrote as UTF-8 unit by unit, to `out`: validated once
/// (the fallback, which cannot happen, only keeps the function total).
fn push_utf8(bytes: &[u8], out: &mut String) {
    match std::str::from_utf8(bytes) {
        Ok(text) => out.push_str(text),
        Err(_) => out.push_str(&String::from_utf8_lossy(bytes)),
    }
}

/// Steps 4 to 6 of a lower-cased ASCII text without tracking (the path of every check), in
/// one pass into `out`: the rules of [`Words::steps`] (a property test holds the two to the
/// same output), but a word goes straight to the output, and a run of spelled-apart letters is
/// joined once its third letter arrives instead of being looked ahead for, and takes steps 4
/// and 6 once it ends ([`settle_run`]; `scratch` is its buffer). Most words hold nothing to
/// map and are copied whole.
fn ascii_steps(units: &[u8], out: &mut Vec<u8>, scratch: &mut Vec<u8>) -> bool {
    out.reserve(units.len());
    let mut changed = false;
    // The run of one-letter words being read: how many, their separator once a second one
    // set it, and where its first word and the last word start in `out`.
    let (mut run_len, mut run_sep, mut run_start) = (0usize, None::<u8>, 0usize);
    let mut last_start = 0usize;
    let mut i = 0;
    while let Some(Scanned {
        gap,
        start,
        end,
        has_letter,
        plain,
    }) = next_word(units, i)
    {
        i = end;
        // The first word has no separator before it.
        let gap = gap.filter(|_| !out.is_empty());
        // Joined to a run of three or more: no space before it (undone below if it is not a
        // one-letter word after all).
        let joining = run_len >= 3 && gap.is_some() && gap == run_sep;
        let before = out.len();
        if !out.is_empty() {
            out.push(b' ');
        }
        let mut word_start = out.len();
        let word = &units[start..end];
        if plain {
            out.extend_from_slice(word);
        } else {
            changed |= map_word::<u8, false>(word, &[], has_letter, out, &mut Vec::new());
        }
        let single = out.len() - word_start == 1;
        if run_len >= 3 && !(joining && single) {
            // The run has ended before this word.
            word_start -= settle_run(out, run_start, run_start + run_len, scratch);
            run_len = 0;
        }
        if !single {
            run_len = 0;
        } else if joining {
            // The space before it goes.
            out[before] = out[word_start];
            out.truncate(before + 1);
            run_len += 1;
            changed = true;
            last_start = before;
            continue;
        } else if run_len > 0 && gap.is_some() && (run_sep.is_none() || gap == run_sep) {
            run_len += 1;
            run_sep = gap;
            if run_len == 3 {
                // "x y z" becomes "xyz".
                out[run_start + 1] = out[run_start + 2];
                out[run_start + 2] = out[run_start + 4];
                out.truncate(run_start + 3);
                changed = true;
                last_start = run_start + 2;
                continue;
            }
        } else if run_len == 2 && gap.is_some() {
            // Another separator: the run starts again at the previous letter (two long).
            run_sep = gap;
            run_start = last_start;
        } else {
            (run_len, run_sep, run_start) = (1, None, word_start);
        }
        last_start = word_start;
    }
    if run_len >= 3 {
        settle_run(out, run_start, run_start + run_len, scratch);
    }
    changed
}

/// Steps 4 and 6 on the joined run `out[start..end]`, as on any word (`sh1t` → `shit`),
/// with whatever follows it in `out` moved up behind it; how many bytes `out` lost. Runs are
/// rare and short, so this copies them through `scratch`.
fn settle_run(out: &mut Vec<u8>, start: usize, end: usize, scratch: &mut Vec<u8>) -> usize {
    let len = out.len();
    scratch.clear();
    scratch.extend(out.drain(start..));
    let (run, rest) = scratch.split_at(end - start);
    let has_letter = run.iter().any(u8::is_ascii_alphabetic);
    map_word::<u8, false>(run, &[], has_letter, out, &mut Vec::new());
    out.extend_from_slice(rest);
    len - out.len()
}

/// Step 4 and 6 on one word that is not plain ([`Scanned::plain`]): leet symbols mapped (in a
/// word with a letter), letters three or more times in a row made one, into `mapped` (and,
/// with `TRACK`, where each came from, `word_from`, into `mapped_from`). Whether it changed.
fn map_word<T: Unit, const TRACK: bool>(
    word: &[T],
    word_from: &[u32],
    has_letter: bool,
    mapped: &mut Vec<T>,
    mapped_from: &mut Vec<u32>,
) -> bool {
    let mut changed = false;
    let (mut run, mut last) = (0, None);
    for (k, &c) in word.iter().enumerate() {
        let c = match (has_letter, c.leet()) {
            (true, Some(letter)) => {
                changed = true;
                letter
            }
            _ => c,
        };
        if Some(c) == last {
            run += 1;
        } else {
            (last, run) = (Some(c), 1);
        }
        // A letter repeated three or more times becomes one.
        if run >= 3 && c.is_letter() {
            if run == 3 {
                mapped.pop();
                if TRACK {
                    mapped_from.pop();
                }
            }
            changed = true;
            continue;
        }
        mapped.push(c);
        if TRACK {
            mapped_from.push(word_from[k]);
        }
    }
    changed
}

/// The end of a run of one-character words starting at `start`, all separated by the same
/// single separator.
fn spelled_run_end(words: &[Word], start: usize) -> usize {
    let single = |word: &Word| word.end - word.start == 1;
    if !single(&words[start]) {
        return start + 1;
    }
    let mut end = start + 1;
    let mut separator: Option<char> = None;
    while end < words.len() && single(&words[end]) {
        match (words[end].gap, separator) {
            (Some(c), None) => separator = Some(c),
            (Some(c), Some(s)) if c == s => {}
            _ => break,
        }
        end += 1;
    }
    end
}

/// Characters that render as nothing and can hide inside a word.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{E0000}'..='\u{E007F}')
}

/// Letters of other scripts that look like a Latin lower-case letter.
fn confusable(c: char) -> char {
    match c {
        // Cyrillic
        'а' => 'a',
        'в' => 'b',
        'е' | 'ё' => 'e',
        'к' => 'k',
        'м' => 'm',
        'н' => 'h',
        'о' => 'o',
        'р' => 'p',
        'с' => 'c',
        'т' => 't',
        'у' => 'y',
        'х' => 'x',
        'ѕ' => 's',
        'і' | 'ї' => 'i',
        'ј' => 'j',
        'ԁ' => 'd',
        'ԛ' => 'q',
        'ԝ' => 'w',
        'һ' => 'h',
        'ӏ' => 'l',
        'ь' => 'b',
        // Greek
        'α' => 'a',
        'β' => 'b',
        'ε' => 'e',
        'η' => 'n',
        'ι' => 'i',
        'κ' => 'k',
        'ν' => 'v',
        'ο' => 'o',
        'ρ' => 'p',
        'τ' => 't',
        'υ' => 'u',
        'χ' => 'x',
        'γ' => 'y',
        'ω' => 'w',
        // Armenian
        'ա' => 'w',
        'գ' => 'q',
        'հ' => 'h',
        'ո' => 'n',
        'ս' => 'u',
        'օ' => 'o',
        'ց' => 'g',
        'լ' => 'l',
        'զ' => 'q',
        // Latin look-alikes
        'ı' => 'i',
        'ſ' => 's',
        'ƒ' => 'f',
        'ɑ' => 'a',
        'ɡ' => 'g',
        'ꞵ' => 'b',
        other => other,
    }
}

const fn leet(c: char) -> Option<char> {
    Some(match c {
        '0' => 'o',
        '1' => 'i',
        '3' => 'e',
        '4' => 'a',
        '5' => 's',
        '7' => 't',
        '8' => 'b',
        '@' => 'a',
        '$' => 's',
        '|' => 'l',
        '+' => 't',
        '!' => 'i',
        '€' => 'e',
        _ => return None,
    })
}

#[inline]
fn in_word<T: Unit>(units: &[T], i: usize) -> bool {
    in_word_as(units, i, units[i].class())
}

/// [`in_word`] of the unit at `i`, of class `class`.
#[inline(always)]
fn in_word_as<T: Unit>(units: &[T], i: usize, class: u8) -> bool {
    class & (LETTER | DIGIT) != 0 || (class & LEET != 0 && touches_letter(units, i))
}

/// A leet symbol counts as part of a word when a letter (or another leet symbol next to a
/// letter) is beside it; `!` only when a letter follows, and `@` not when it is the sign of an
/// e-mail address ([`at_sign_of_address`]).
fn touches_letter<T: Unit>(units: &[T], i: usize) -> bool {
    let letter_at = |j: usize| units.get(j).is_some_and(|c| c.is_letter());
    let leet_letter_at = |j: usize| {
        units.get(j).is_some_and(|&c| {
            // (Never an `@` of an address: its neighbours are letters, digits or `-`, and
            // none of them asks.)
            c.leet().is_some() && (j.checked_sub(1).is_some_and(letter_at) || letter_at(j + 1))
        })
    };
    let after = letter_at(i + 1) || leet_letter_at(i + 1);
    if units[i].as_char() == '!' {
        return after;
    }
    let before = i
        .checked_sub(1)
        .is_some_and(|j| letter_at(j) || leet_letter_at(j));
    (before || after) && !at_sign_of_address(units, i)
}

/// Whether the unit at `i` is the `@` of an e-mail address: a letter or digit before it, and
/// after it a domain (letters, digits and hyphens, a dot, a letter), as in `help@example.com`.
/// Such an `@` separates words instead of standing for `a`, so an address is not read as a
/// disguise (`helpaexample`); `@ss`, `gr@pefruit` and `b@d.` stay leet.
/// (Out of line: inlined into the word scan with its test first, it made a 1 KiB text's
/// normalisation 10 % dearer in instructions.)
#[inline(never)]
fn at_sign_of_address<T: Unit>(units: &[T], i: usize) -> bool {
    let before = i.checked_sub(1).map(|j| units[j]);
    if units[i].as_char() != '@' || !before.is_some_and(Unit::is_letter_or_digit) {
        return false;
    }
    let label = units[i + 1..]
        .iter()
        .take_while(|&&c| c.is_letter_or_digit() || c.as_char() == '-')
        .count();
    let dot = i + 1 + label;
    label > 0
        && units.get(dot).is_some_and(|c| c.as_char() == '.')
        && units.get(dot + 1).is_some_and(|c| c.is_letter())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn norm(text: &str) -> String {
        let mut out = String::new();
        normalize(text, &mut out);
        out
    }

    fn changed(text: &str) -> bool {
        normalize(text, &mut String::new())
    }

    #[test]
    fn reports_whether_anything_beyond_case_changed() {
        assert!(!changed("Hello, World! It's 2024."));
        assert!(changed("sh1t"));
        assert!(changed("f.u.c.k"));
        assert!(changed("f\u{200B}uck"));
        assert!(changed("fuuuuck"));
        assert!(changed("café"));
        // Compatibility forms whose plain form is ASCII are disguises too.
        for disguised in [
            "ｆｕｃｋ",
            "\u{1D41F}\u{1D42E}\u{1D41C}\u{1D424}",
            "ⓕⓤⓒⓚ",
            "ƒuck",
        ] {
            assert!(changed(disguised), "{disguised}");
            assert_eq!(norm(disguised), "fuck", "{disguised}");
        }
        assert!(!changed("plain words only"));
    }

    #[test]
    fn a_reused_normalizer_gives_the_same_results() {
        let mut normalizer = Normalizer::default();
        let mut out = String::new();
        for text in ["f.u.c.k", "Hello there", "", "sh1t happens", "ｆｕｃｋ"] {
            normalizer.normalize(text, &mut out);
            assert_eq!(out, norm(text));
        }
        // Its lent output comes back empty, with its memory, for the next check.
        let mut lent = normalizer.lend_output();
        assert!(lent.is_empty());
        normalizer.normalize("a longer text than the ones before it", &mut lent);
        let capacity = lent.capacity();
        normalizer.give_back(lent);
        let again = normalizer.lend_output();
        assert!(again.is_empty());
        assert_eq!(again.capacity(), capacity);
        assert_eq!(
            normalizer.lend_output().capacity(),
            0,
            "while one check holds it, another gets a new string"
        );
    }

    #[test]
    fn obfuscations_become_plain() {
        assert_eq!(norm("FUCK"), "fuck");
        assert_eq!(norm("f.u.c.k"), "fuck");
        assert_eq!(norm("f u c k you"), "fuck you");
        assert_eq!(norm("f-u-c-k"), "fuck");
        assert_eq!(norm("f\u{057D}ck"), "fuck"); // Armenian small letter seh
        assert_eq!(norm("f\u{200B}uck"), "fuck");
        assert_eq!(norm("ｆｕｃｋ"), "fuck");
        assert_eq!(norm("fück"), "fuck");
        assert_eq!(norm("sh1t"), "shit");
        assert_eq!(norm("$hit"), "shit");
        assert_eq!(norm("sh!t"), "shit");
        assert_eq!(norm("@ss"), "ass");
        assert_eq!(norm("a$$hole"), "asshole");
        assert_eq!(norm("fuuuuuck"), "fuck");
        assert_eq!(norm("ѕhіt"), "shit"); // Cyrillic dze and i
    }

    #[test]
    fn innocent_text_stays() {
        assert_eq!(norm("Scunthorpe"), "scunthorpe");
        assert_eq!(norm("assess the classic"), "assess the classic");
        assert_eq!(norm("Hello! It's 2024."), "hello it s 2024");
        assert_eq!(norm("I am a b"), "i am a b");
        assert_eq!(norm("call 555-1234"), "call 555 1234");
        assert_eq!(norm("bookkeeper"), "bookkeeper");
        assert_eq!(norm(""), "");
        assert_eq!(norm("...!!!"), "");
    }

    #[test]
    fn the_sign_of_an_address_is_not_leet() {
        assert_eq!(norm("help@example.com"), "help example com");
        assert!(!changed("Write to Help@Example.com today."));
        assert_eq!(
            norm("a.b-c@mail-1.example.co.uk"),
            "a b c mail 1 example co uk"
        );
        assert_eq!(norm("x9@1.io"), "x9 1 io");
        assert_eq!(norm("sh1t@example.com"), "shit example com");
        // Not an address: the `@` stands for `a`.
        assert_eq!(norm("gr@pefruit"), "grapefruit");
        assert_eq!(norm("you're b@d."), "you re bad");
        assert_eq!(norm("b@d.9"), "bad 9");
        assert_eq!(norm("@example.com"), "aexample com");
        assert_eq!(norm("b@.com"), "ba com");
        assert_eq!(norm("b@d"), "bad");
        assert_eq!(norm("$@example.com"), "saexample com");
    }

    #[test]
    fn spelled_runs_need_one_kind_of_separator() {
        assert_eq!(norm("a.b c.d"), "a b c d");
        assert_eq!(norm("x y z"), "xyz");
        assert_eq!(norm("x\ny\nz"), "x y z");
        // A run starts again at the letter before a change of separator.
        assert_eq!(norm("a.b c d"), "a bcd");
        assert_eq!(norm("a b c.d"), "abc d");
        assert_eq!(norm("w x y z"), "wxyz");
        assert_eq!(norm("x y zz w v u"), "x y zz wvu");
        assert_eq!(norm("x y  z"), "x y z");
        // A letter repeated and collapsed is one letter too.
        assert_eq!(norm("f uuu c k"), "fuck");
        // A joined run is a word: leet symbols mapped when it has a letter, a letter three
        // times in a row made one.
        assert_eq!(norm("s h 1 t"), "shit");
        assert_eq!(norm("S.H.1.T happens"), "shit happens");
        assert_eq!(norm("5 3 x"), "sex");
        assert_eq!(norm("f u u u c k off"), "fuck off");
        assert_eq!(norm("s h 1 t, x y z"), "shit xyz");
        // Without a letter, digits stay digits.
        assert_eq!(norm("call 5 5 5 1"), "call 5551");
    }

    /// The characters of `text` that the bytes `start..end` of its normalised form came from.
    fn traced(text: &str, start: usize, end: usize) -> String {
        let (mut out, mut from) = (String::new(), Vec::new());
        Normalizer::default().normalize_tracked(text, &mut out, &mut from);
        assert_eq!(from.len(), out.len());
        let (first, last) = (from[start] as usize, from[end - 1] as usize);
        text.chars().skip(first).take(last - first + 1).collect()
    }

    #[test]
    fn tracking_maps_normalised_bytes_back_to_characters() {
        assert_eq!(traced("oh F.U.C.K off", 3, 7), "F.U.C.K");
        assert_eq!(traced("you $h1t!", 4, 8), "$h1t");
        assert_eq!(traced("a s-h-1-t b", 2, 6), "s-h-1-t");
        assert_eq!(traced("oh f u u u c k", 3, 7), "f u u u c k");
        assert_eq!(traced("ça fuuuuck", 3, 7), "fuuuuck");
        assert_eq!(traced("ｆｕｃｋ it", 0, 4), "ｆｕｃｋ");
        assert_eq!(traced("a f\u{200B}uck b", 2, 6), "f\u{200B}uck");
        // The tracked output is the untracked one.
        let mut normalizer = Normalizer::default();
        let (mut tracked, mut plain, mut from) = (String::new(), String::new(), Vec::new());
        normalizer.normalize_tracked("Ünïcode f.u.c.k", &mut tracked, &mut from);
        normalizer.normalize("Ünïcode f.u.c.k", &mut plain);
        assert_eq!(tracked, plain);
    }

    /// Steps 4 to 6 of an ASCII text on the `char` path, which the byte path must match.
    fn on_chars(text: &str) -> (String, bool) {
        let chars: Vec<char> = text.chars().map(|c| c.to_ascii_lowercase()).collect();
        let (mut mapped, mut mapped_from, mut words) = (Vec::new(), Vec::new(), Vec::new());
        let steps = Words {
            units: &chars,
            units_from: &[],
            mapped: &mut mapped,
            mapped_from: &mut mapped_from,
            words: &mut words,
            joined: &mut Vec::new(),
            run: &mut Vec::new(),
            run_from: &mut Vec::new(),
        };
        let mut out = String::new();
        let changed = steps.steps::<false>(&mut out, &mut Vec::new());
        (out, changed)
    }

    #[test]
    fn the_byte_tables_are_the_char_functions() {
        for byte in 0u8..128 {
            let c = char::from(byte);
            assert_eq!(byte.leet().map(char::from), leet(c), "{byte}");
            assert_eq!(byte.is_letter(), c.is_alphabetic(), "{byte}");
            assert_eq!(byte.is_letter_or_digit(), c.is_alphanumeric(), "{byte}");
        }
        // A non-ASCII character's class.
        assert_eq!('é'.class(), LETTER);
        assert_eq!('٣'.class(), DIGIT);
        assert_eq!('€'.class(), LEET);
        assert_eq!('·'.class(), 0);
    }

    /// The untracked byte path, the tracked one (steps written once for bytes and characters)
    /// and the character path give one result for an ASCII `text`.
    fn same_on_both_paths(text: &str) -> Result<(), TestCaseError> {
        let mut normalizer = Normalizer::default();
        let (mut out, mut tracked, mut from) = (String::new(), String::new(), Vec::new());
        let changed = normalizer.normalize(text, &mut out);
        let tracked_changed = normalizer.normalize_tracked(text, &mut tracked, &mut from);
        prop_assert_eq!((&tracked, tracked_changed), (&out, changed));
        prop_assert_eq!((out, changed), on_chars(text));
        Ok(())
    }

    proptest! {
        #[test]
        fn ascii_takes_the_byte_path_to_the_same_result(
            text in "[a-zA-Z0-9@$|+!. \\-\n]{0,200}|[\\x00-\\x7f]{0,200}|([a-z1$]{0,3}[@.-]){0,30}"
        ) {
            same_on_both_paths(&text)?;
        }

        #[test]
        fn spelled_runs_take_the_byte_path_to_the_same_result(
            // Mostly one-letter words and one-character gaps of a few kinds: runs of
            // spelled-apart letters, cut by a change of separator or a longer word.
            parts in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["a", "b", "A", "1", "3", "aaa", "aa", "b4", "@"]),
                    proptest::sample::select(vec![" ", ".", "-", "\n", "  "]),
                ),
                0..40,
            )
        ) {
            let text: String = parts.iter().flat_map(|(word, gap)| [*word, *gap]).collect();
            same_on_both_paths(&text)?;
        }

        #[test]
        fn tracking_covers_every_byte_in_order(text in "\\PC{0,120}") {
            let (mut out, mut from) = (String::new(), Vec::new());
            Normalizer::default().normalize_tracked(&text, &mut out, &mut from);
            prop_assert_eq!(from.len(), out.len());
            prop_assert!(from.windows(2).all(|pair| pair[0] <= pair[1]));
            let chars = text.chars().count() as u32;
            prop_assert!(from.iter().all(|&index| index < chars));
        }

        #[test]
        fn output_is_words_and_single_spaces(text in "\\PC{0,200}") {
            let out = norm(&text);
            prop_assert!(!out.starts_with(' ') && !out.ends_with(' '));
            prop_assert!(!out.contains("  "));
        }
    }
}
