//! `wordlist`: npm `cuss@2.2.0` (MIT, 1,795 English words and phrases rated 0 to 2), matched
//! on whole words of the normalised text with one Aho-Corasick automaton.
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

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

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
    automaton: AhoCorasick,
    /// Score and kind of each pattern, by pattern id.
    scores: Vec<f64>,
    kinds: Vec<TermKind>,
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
        let mut by_pattern: std::collections::BTreeMap<String, (f64, TermKind)> =
            Default::default();
        let mut normalised = String::new();
        let severe = SEVERE
            .iter()
            .map(|&(word, kind)| (word.to_owned(), SEVERE_SCORE, kind));
        let rated = ratings.into_iter().filter_map(|(word, rating)| {
            (rating == 2).then_some((word, RATING_2_SCORE, TermKind::Inappropriate))
        });
        for (word, score, kind) in severe.chain(rated) {
            normalize(&word, &mut normalised);
            if normalised.is_empty() {
                continue;
            }
            // The severe entries come first and win: their kind was chosen by hand.
            by_pattern
                .entry(normalised.clone())
                .or_insert((score, kind));
        }
        let (patterns, rated): (Vec<String>, Vec<(f64, TermKind)>) = by_pattern.into_iter().unzip();
        let (scores, kinds) = rated.into_iter().unzip();
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            // A DFA: one table look-up per byte, half the time of the default contiguous NFA
            // on a KiB of text (1.7 against 3.1 µs, `cargo bench --bench text -- wordlist`),
            // for 620 KB instead of 90 KB.
            .kind(Some(AhoCorasickKind::DFA))
            .build(&patterns)
            .map_err(|error| format!("building the word automaton: {error}"))?;
        Ok(WordList {
            automaton,
            scores,
            kinds,
        })
    }

    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
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
    /// ends; overlapping ones too (`camel jockey` and a term inside it).
    pub fn terms<'a>(&'a self, normalised: &'a str) -> impl Iterator<Item = Term> + 'a {
        let bytes = normalised.as_bytes();
        self.automaton
            .find_overlapping_iter(normalised)
            .filter_map(move |found| {
                let starts_word = found.start() == 0 || bytes[found.start() - 1] == b' ';
                let ends_word = found.end() == bytes.len() || bytes[found.end()] == b' ';
                let pattern = found.pattern().as_usize();
                (starts_word && ends_word).then(|| Term {
                    start: found.start(),
                    end: found.end(),
                    score: self.scores[pattern],
                    kind: self.kinds[pattern],
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
