//! `wordlist`: npm `cuss@2.2.0` (MIT, 1,795 English words and phrases rated 0 to 2), matched
//! on whole words of the normalised text.
//!
//! cuss rates how likely a term is meant as profanity: 2 likely, 1 either way, 0 unlikely.
//! Measured on 4,150 normal e-mails (`models/THRESHOLDS.md`), its ratings mix profanity with
//! topical words ("god", "drug", "welfare" are rated 1 or 2), so a rating alone cannot send
//! content to review. Scores here:
//! - [`SEVERE`] terms (and their cuss inflections), the unambiguous English profanities and
//!   slurs: [`SEVERE_SCORE`], at the shipped review threshold;
//! - other terms rated 2: [`RATING_2_SCORE`], a signal below the review threshold;
//! - terms rated 1 or 0: not scored.
//!
//! A word list cannot read intent, so even severe terms stay below the reject thresholds: on
//! its own the list sends content to review; the linear model decides rejections.
//!
//! Patterns go through the same [`normalize`] as the text (`pi55` in the list meets `piss`
//! in the text), and a match counts only between word boundaries (spaces or the ends of the
//! normalised text), which keeps `Scunthorpe`, `assess` and `classic` clean.
//!
//! Matching: the normalised text is words separated by spaces, and every term begins and ends
//! at a word's edge, so each word is looked up once among the terms' first words, packed into
//! one integer ([`packed`]) when it has at most 16 bytes, after a 1 KB bit filter has turned
//! most words away; a word that begins a phrase (69 of the terms) is compared with the text
//! that follows it. The map is about 60 KB. An Aho-Corasick automaton (the `aho-corasick`
//! crate) did this before: its DFA is 620 KB and reads a table entry per byte, which a check
//! on cold caches, as at an ordinary load, paid for (17 µs against 1.7 µs warm in
//! `cargo bench --bench text -- text_cold`). On the bench's 1 KiB text the look-ups take
//! 8,873 instructions against the automaton's 21,118, and 40 reads that miss a cold
//! last-level cache against 99 (`tuning/instructions.sh`, and with `COLD=1`).

use crate::hash::{packed, FastMap, PACKED_BYTES_MAX};
use crate::text::normalize::normalize;

/// The list, embedded: `models/text/cuss.json` (see `models/text/README.md`).
pub const CUSS_JSON: &str = include_str!("../../models/text/cuss.json");
pub const SEVERE_SCORE: f64 = 0.8;
pub const RATING_2_SCORE: f64 = 0.45;

/// What kind of term a word is, in the terms of Sightengine's rule-based profanity types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TermKind {
    /// Sexual acts, organs, or a sexual slur.
    Sexual,
    /// A slur against people for who they are.
    Discriminatory,
    /// A word aimed at a person.
    Insult,
    /// Swearing, and every cuss term rated 2 that [`SEVERE`] does not classify.
    Inappropriate,
}

impl TermKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TermKind::Sexual => "sexual",
            TermKind::Discriminatory => "discriminatory",
            TermKind::Insult => "insult",
            TermKind::Inappropriate => "inappropriate",
        }
    }
}

/// Unambiguous profanities and slurs (normalised forms), scored [`SEVERE_SCORE`] whatever
/// cuss rates them, with their kind. Chosen and classified by hand for this project.
pub const SEVERE: &[(&str, TermKind)] = {
    use TermKind::{Discriminatory as D, Inappropriate as X, Insult as I, Sexual as S};
    &[
        ("arsehole", I),
        ("asshole", I),
        ("bastard", I),
        ("bitch", I),
        ("bitches", I),
        ("bollocks", X),
        ("bullshit", X),
        ("chink", D),
        ("cock", S),
        ("cocksucker", S),
        ("cunt", S),
        ("cunts", S),
        ("dickhead", I),
        ("douchebag", I),
        ("dyke", D),
        ("fag", D),
        ("faggot", D),
        ("fuck", X),
        ("fucked", X),
        ("fucker", I),
        ("fuckers", I),
        ("fucking", X),
        ("fucks", X),
        ("jackass", I),
        ("kike", D),
        ("motherfucker", I),
        ("nigga", D),
        ("nigger", D),
        ("niggers", D),
        ("prick", I),
        ("pussy", S),
        ("retard", D),
        ("shit", X),
        ("shits", X),
        ("shitty", X),
        ("slut", S),
        ("spic", D),
        ("tosser", I),
        ("twat", S),
        ("wank", S),
        ("wanker", I),
        ("whore", S),
    ]
};
pub const SOURCE: &str = "wordlist";
pub const CATEGORY: &str = "profanity";

pub const CHECK: super::registry::Check = super::registry::Check {
    name: SOURCE,
    kind: crate::content::ContentKind::Text,
    categories: &[CATEGORY],
    languages: Some(&["en"]),
    runner: super::registry::Runner::Text {
        score: |input, models, board| {
            board.add(CATEGORY, models.wordlist.score(input.normalised), SOURCE)
        },
        reads_normalised: true,
    },
};

pub struct WordList {
    /// Each term's first word, [`packed`] if it fits, to its entry in `starts`.
    short_words: FastMap<u128, u32>,
    /// First words longer than [`PACKED_BYTES_MAX`] bytes.
    long_words: FastMap<Box<[u8]>, u32>,
    /// A bit per [`filter_place`] of each key of `short_words`: a word whose bit is clear
    /// begins no term and is not looked up (most words: 1 KB, where the map is 60).
    filter: Box<[u64; FILTER_WORDS]>,
    starts: Vec<Start>,
}

/// The terms that begin with one word.
#[derive(Default)]
struct Start {
    /// The term that is this word alone, if there is one.
    word: Option<Rating>,
    /// The terms of several words that begin with it: their whole normalised text, shortest
    /// first.
    phrases: Vec<(Box<[u8]>, Rating)>,
}

#[derive(Clone, Copy)]
struct Rating {
    score: f64,
    kind: TermKind,
}

/// A whole-word match in a normalised text: its bytes there, its score and kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Term {
    pub start: usize,
    pub end: usize,
    pub score: f64,
    pub kind: TermKind,
}

impl WordList {
    pub fn embedded() -> Result<WordList, String> {
        Self::from_json(CUSS_JSON)
    }

    pub fn from_json(json: &str) -> Result<WordList, String> {
        let mut bytes = json.as_bytes().to_vec();
        let ratings: std::collections::BTreeMap<String, u8> =
            simd_json::serde::from_slice(&mut bytes)
                .map_err(|error| format!("cuss.json: {error}"))?;
        let mut by_pattern: std::collections::BTreeMap<String, Rating> = Default::default();
        let mut normalised = String::new();
        let severe = SEVERE.iter().map(|&(word, kind)| {
            let rating = Rating {
                score: SEVERE_SCORE,
                kind,
            };
            (word.to_owned(), rating)
        });
        let rated = ratings.into_iter().filter_map(|(word, rating)| {
            let scored = Rating {
                score: RATING_2_SCORE,
                kind: TermKind::Inappropriate,
            };
            (rating == 2).then_some((word, scored))
        });
        for (word, rating) in severe.chain(rated) {
            normalize(&word, &mut normalised);
            if normalised.is_empty() {
                continue;
            }
            // The severe entries come first and win: their kind was chosen by hand.
            by_pattern.entry(normalised.clone()).or_insert(rating);
        }
        let mut list = WordList {
            short_words: FastMap::default(),
            long_words: FastMap::default(),
            filter: Box::new([0; FILTER_WORDS]),
            starts: Vec::new(),
        };
        for (pattern, rating) in by_pattern {
            let first = pattern.split(' ').next().unwrap_or_default().as_bytes();
            let index = match list.start_index(first) {
                Some(index) => index,
                None => {
                    let index = u32::try_from(list.starts.len())
                        .map_err(|_| "the word list has too many terms".to_owned())?;
                    match packed(first) {
                        Some(key) => {
                            let (word, bit) = filter_place(key);
                            list.filter[word] |= bit;
                            list.short_words.insert(key, index)
                        }
                        None => list.long_words.insert(first.into(), index),
                    };
                    list.starts.push(Start::default());
                    index
                }
            };
            let start = &mut list.starts[index as usize];
            if pattern.len() == first.len() {
                start.word = Some(rating);
            } else {
                start.phrases.push((pattern.into_bytes().into(), rating));
            }
        }
        for start in &mut list.starts {
            start.phrases.sort_by_key(|(phrase, _)| phrase.len());
        }
        Ok(list)
    }

    /// How many terms there are.
    pub fn len(&self) -> usize {
        let terms = |start: &Start| usize::from(start.word.is_some()) + start.phrases.len();
        self.starts.iter().map(terms).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The best score of a whole-word match in `normalised` (output of [`normalize`]), or 0.
    pub fn score(&self, normalised: &str) -> f64 {
        let mut best = 0.0f64;
        for term in self.terms(normalised) {
            best = best.max(term.score);
            if best >= SEVERE_SCORE {
                break;
            }
        }
        best
    }

    /// The whole-word matches in `normalised` (output of [`normalize`]), in order of their
    /// starts, then of their ends; overlapping ones too (`camel jockey` and a term inside it).
    pub fn terms<'a>(&'a self, normalised: &'a str) -> impl Iterator<Item = Term> + 'a {
        let text = normalised.as_bytes();
        self.starts_in(text).flat_map(move |(start, end, found)| {
            let word = found.word.map(|rating| Term::at(start, end, rating));
            let phrases = found.phrases.iter().filter_map(move |(phrase, rating)| {
                let after = start + phrase.len();
                let whole = text[start..].starts_with(phrase)
                    && text.get(after).is_none_or(|&byte| byte == b' ');
                whole.then(|| Term::at(start, after, *rating))
            });
            word.into_iter().chain(phrases)
        })
    }

    /// The words of `text` that begin a term (their bytes there), in order.
    fn starts_in<'a>(&'a self, text: &'a [u8]) -> StartsIn<'a> {
        StartsIn {
            list: self,
            text,
            at: 0,
        }
    }

    /// The entry of the first word `word`, if a term begins with it.
    fn start_index(&self, word: &[u8]) -> Option<u32> {
        match packed(word) {
            Some(key) => self.short_words.get(&key),
            None => self.long_words.get(word),
        }
        .copied()
    }
}

impl Term {
    fn at(start: usize, end: usize, rating: Rating) -> Term {
        Term {
            start,
            end,
            score: rating.score,
            kind: rating.kind,
        }
    }
}

/// The words of a text that begin a term, as [`WordList::starts_in`] finds them.
struct StartsIn<'a> {
    list: &'a WordList,
    text: &'a [u8],
    /// Where the next word starts.
    at: usize,
}

impl<'a> Iterator for StartsIn<'a> {
    type Item = (usize, usize, &'a Start);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let list = self.list;
        while self.at <= self.text.len() {
            let start = self.at;
            let (end, key) = word_at(self.text, start);
            self.at = end + 1;
            let index = match key {
                Some(key) => {
                    let (word, bit) = filter_place(key);
                    if list.filter[word] & bit == 0 {
                        continue;
                    }
                    list.short_words.get(&key)
                }
                None => list.long_words.get(&self.text[start..end]),
            };
            if let Some(&index) = index {
                return Some((start, end, &list.starts[index as usize]));
            }
        }
        None
    }
}

/// [`WordList::filter`] has `1 << FILTER_BITS` bits, in `FILTER_WORDS` integers.
const FILTER_BITS: u32 = 13;
const FILTER_WORDS: usize = (1 << FILTER_BITS) / 64;

/// The integer of [`WordList::filter`] and the bit in it of a packed word: a multiplicative
/// hash of its bytes.
#[inline(always)]
fn filter_place(key: u128) -> (usize, u64) {
    let folded = key as u64 ^ ((key >> 64) as u64).rotate_left(29);
    let bit = (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FILTER_BITS)) as usize;
    (bit / 64, 1 << (bit % 64))
}

/// The end of the word that starts at `start` in `text` (at the next space, or the end), and
/// the word [`packed`] if it fits. Where 16 bytes of the text remain, they are read as two
/// integers and the first space is found in them a word at a time (most words).
#[inline]
fn word_at(text: &[u8], start: usize) -> (usize, Option<u128>) {
    if let Some(window) = text.get(start..start + PACKED_BYTES_MAX) {
        let (low, high) = window.split_at(8);
        let low = u64::from_le_bytes(low.try_into().unwrap_or_default());
        if let Some(len) = first_space(low) {
            return (start + len, Some(u128::from(low & low_bytes(len))));
        }
        let high = u64::from_le_bytes(high.try_into().unwrap_or_default());
        if let Some(len) = first_space(high) {
            let key = u128::from(low) | u128::from(high & low_bytes(len)) << 64;
            return (start + 8 + len, Some(key));
        }
    }
    let end = memchr::memchr(b' ', &text[start..]).map_or(text.len(), |len| start + len);
    (end, packed(&text[start..end]))
}

/// The index of the first space among the 8 bytes of `bytes` (little-endian), if one is there.
#[inline(always)]
fn first_space(bytes: u64) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    // Zero bytes where `bytes` has spaces; the lowest high bit of `found` marks the first of
    // them exactly (a borrow can only mark bytes above a zero byte).
    let spaced = bytes ^ (ONES * u64::from(b' '));
    let found = spaced.wrapping_sub(ONES) & !spaced & (ONES << 7);
    (found != 0).then(|| found.trailing_zeros() as usize / 8)
}

/// All ones over the `len` low bytes of a `u64`, `len` below 8.
#[inline(always)]
fn low_bytes(len: usize) -> u64 {
    (1u64 << (8 * len)) - 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn score(list: &WordList, text: &str) -> f64 {
        let mut normalised = String::new();
        normalize(text, &mut normalised);
        list.score(&normalised)
    }

    #[test]
    fn catches_obfuscations_and_spares_innocent_words() {
        let list = WordList::embedded().unwrap();
        assert!(list.len() > 1000);
        for bad in [
            "fuck",
            "FUCK",
            "f.u.c.k",
            "f\u{057D}ck",
            "f\u{200B}uck",
            "you cunt",
            "CUNT!",
            "$hit",
        ] {
            assert_eq!(score(&list, bad), SEVERE_SCORE, "{bad}");
        }
        assert_eq!(score(&list, "p1ss off"), RATING_2_SCORE);
        // Rated 1 in cuss: not a hit.
        assert_eq!(score(&list, "oh my god"), 0.0);
        for clean in [
            "Scunthorpe",
            "assess",
            "classic",
            "Hello, how are you?",
            "cocktail",
            "passion",
            "",
        ] {
            assert_eq!(score(&list, clean), 0.0, "{clean}");
        }
    }

    #[test]
    fn terms_carry_their_place_score_and_kind() {
        let list = WordList::embedded().unwrap();
        let mut normalised = String::new();
        normalize("you f.u.c.k.e.r and a nigger", &mut normalised);
        let terms: Vec<_> = list
            .terms(&normalised)
            .map(|term| (&normalised[term.start..term.end], term.score, term.kind))
            .collect();
        assert_eq!(
            terms,
            [
                ("fucker", SEVERE_SCORE, TermKind::Insult),
                ("nigger", SEVERE_SCORE, TermKind::Discriminatory),
            ]
        );
        normalize("p1ss off", &mut normalised);
        let term = list.terms(&normalised).next().unwrap();
        assert_eq!(
            (term.score, term.kind),
            (RATING_2_SCORE, TermKind::Inappropriate)
        );
    }

    #[test]
    fn phrases_match_across_words_only_whole() {
        let list = WordList::embedded().unwrap();
        assert!(score(&list, "a camel jockey") > 0.0); // rated 2
        assert_eq!(score(&list, "camel jockeyship"), 0.0);
        let places = |text: &str| -> Vec<(usize, usize)> {
            list.terms(text)
                .map(|term| (term.start, term.end))
                .collect()
        };
        // Two spaces (where an allowed term was blanked) break a phrase.
        assert_eq!(places("camel  jockey"), []);
        // Overlapping phrases, and a phrase that begins with the word it repeats.
        assert_eq!(places("mau mau mau"), [(0, 7), (4, 11)]);
        assert_eq!(places("camel jockeys"), [(0, 13)]);
        assert_eq!(places("cheese eating surrender monkey"), [(0, 30)]);
    }

    #[test]
    fn words_longer_than_a_packed_key_are_found() {
        let list = WordList::embedded().unwrap();
        for text in ["gaymuthafuckinwhore", "you goddamnmuthafucker!"] {
            assert_eq!(score(&list, text), RATING_2_SCORE, "{text}");
        }
        assert_eq!(score(&list, "goddamnmuthafuckers"), 0.0);
    }

    #[test]
    fn a_word_is_read_alike_in_a_long_text_and_at_its_end() {
        let text = "ab cdefghijklmnop qrstuvwxyzabcdefg é s".as_bytes();
        assert_eq!(word_at(text, 0), (2, packed(b"ab")));
        assert_eq!(word_at(text, 3), (17, packed(b"cdefghijklmnop")));
        assert_eq!(word_at(text, 18), (35, None));
        assert_eq!(word_at(text, 36), (38, packed("é".as_bytes())));
        assert_eq!(word_at(text, 39), (40, packed(b"s")));
        assert_eq!(word_at(b"a  b", 2), (2, Some(0)));
        assert_eq!(word_at(b"", 0), (0, Some(0)));
        // A space right after 16 bytes, and none in them.
        let text = b"abcdefghijklmnop qrstuvwxyzabcdefgh";
        assert_eq!(word_at(text, 0), (16, packed(b"abcdefghijklmnop")));
        assert_eq!(word_at(text, 17), (35, None));
    }

    /// Every term of `list` with its rating, spelled out again from the index.
    fn patterns(list: &WordList) -> Vec<(Vec<u8>, Rating)> {
        let firsts = list.short_words.iter().map(|(key, &index)| {
            let bytes = key.to_le_bytes();
            let len = bytes.iter().position(|&byte| byte == 0).unwrap_or(16);
            (bytes[..len].to_vec(), index)
        });
        let firsts = firsts.chain(
            list.long_words
                .iter()
                .map(|(word, &index)| (word.to_vec(), index)),
        );
        let mut patterns = Vec::new();
        for (first, index) in firsts {
            let start = &list.starts[index as usize];
            patterns.extend(start.word.map(|rating| (first.clone(), rating)));
            for (phrase, rating) in &start.phrases {
                assert!(phrase.starts_with(&first) && phrase[first.len()] == b' ');
                patterns.push((phrase.to_vec(), *rating));
            }
        }
        patterns
    }

    /// Whole-word matches of every pattern, found one pattern at a time.
    fn found_naively(list: &WordList, text: &str) -> Vec<(usize, usize, f64)> {
        let text = text.as_bytes();
        let edge = |at: usize| at == 0 || at == text.len() || text[at] == b' ';
        let mut found = Vec::new();
        for (pattern, rating) in patterns(list) {
            for start in 0..text.len() {
                let end = start + pattern.len();
                if text[start..].starts_with(&pattern)
                    && (start == 0 || text[start - 1] == b' ')
                    && edge(end)
                {
                    found.push((start, end, rating.score));
                }
            }
        }
        found.sort_by_key(|&(start, end, _)| (start, end));
        found
    }

    proptest! {
        #[test]
        fn terms_are_every_whole_word_match_in_order(
            words in proptest::collection::vec(
                prop_oneof![
                    proptest::sample::select(vec![
                        "fuck", "shit", "camel", "jockey", "jockeys", "mau", "chi", "man",
                        "cheese", "eating", "surrender", "monkey", "piss", "off",
                        "gaymuthafuckinwhore", "goddamnmuthafucker", "",
                    ]).prop_map(str::to_owned),
                    "[a-zé]{1,20}",
                ],
                0..30,
            )
        ) {
            let text = words.join(" ");
            let list = WordList::embedded().unwrap();
            let terms: Vec<_> = list
                .terms(&text)
                .map(|term| (term.start, term.end, term.score))
                .collect();
            prop_assert_eq!(&terms, &found_naively(&list, &text));
            let best = terms.iter().map(|&(_, _, score)| score).fold(0.0, f64::max);
            prop_assert_eq!(list.score(&text), best);
        }
    }
}
