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

use aho_corasick::{AhoCorasick, MatchKind};

use crate::text::normalize::normalize;

/// The list, embedded: `models/text/cuss.json` (see `models/text/README.md`).
pub const CUSS_JSON: &str = include_str!("../../models/text/cuss.json");
pub const SEVERE_SCORE: f64 = 0.8;
pub const RATING_2_SCORE: f64 = 0.45;

/// Unambiguous profanities and slurs (normalised forms), scored [`SEVERE_SCORE`] whatever
/// cuss rates them. Chosen by hand for this project.
pub const SEVERE: &[&str] = &[
    "arsehole",
    "asshole",
    "bastard",
    "bitch",
    "bitches",
    "bollocks",
    "bullshit",
    "chink",
    "cock",
    "cocksucker",
    "cunt",
    "cunts",
    "dickhead",
    "douchebag",
    "dyke",
    "fag",
    "faggot",
    "fuck",
    "fucked",
    "fucker",
    "fuckers",
    "fucking",
    "fucks",
    "jackass",
    "kike",
    "motherfucker",
    "nigga",
    "nigger",
    "niggers",
    "prick",
    "pussy",
    "retard",
    "shit",
    "shits",
    "shitty",
    "slut",
    "spic",
    "tosser",
    "twat",
    "wank",
    "wanker",
    "whore",
];
pub const SOURCE: &str = "wordlist";
pub const CATEGORY: &str = "profanity";

pub const CHECK: super::registry::Check = super::registry::Check {
    name: SOURCE,
    kind: crate::content::ContentKind::Text,
    categories: &[CATEGORY],
    runner: super::registry::Runner::Text {
        score: |input, models, board| {
            board.add(CATEGORY, models.wordlist.score(input.normalised), SOURCE)
        },
        reads_normalised: true,
    },
};

pub struct WordList {
    automaton: AhoCorasick,
    /// Score of each pattern, by pattern id.
    scores: Vec<f64>,
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
        let mut by_pattern: std::collections::BTreeMap<String, f64> = Default::default();
        let mut normalised = String::new();
        let severe = SEVERE.iter().map(|&word| (word.to_owned(), SEVERE_SCORE));
        let rated = ratings
            .into_iter()
            .filter_map(|(word, rating)| (rating == 2).then_some((word, RATING_2_SCORE)));
        for (word, score) in severe.chain(rated) {
            normalize(&word, &mut normalised);
            if normalised.is_empty() {
                continue;
            }
            let entry = by_pattern.entry(normalised.clone()).or_insert(0.0);
            *entry = entry.max(score);
        }
        let (patterns, scores): (Vec<String>, Vec<f64>) = by_pattern.into_iter().unzip();
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&patterns)
            .map_err(|error| format!("building the word automaton: {error}"))?;
        Ok(WordList { automaton, scores })
    }

    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// The best score of a whole-word match in `normalised` (output of [`normalize`]), or 0.
    pub fn score(&self, normalised: &str) -> f64 {
        let bytes = normalised.as_bytes();
        let mut best = 0.0f64;
        for found in self.automaton.find_overlapping_iter(normalised) {
            let starts_word = found.start() == 0 || bytes[found.start() - 1] == b' ';
            let ends_word = found.end() == bytes.len() || bytes[found.end()] == b' ';
            if starts_word && ends_word {
                best = best.max(self.scores[found.pattern().as_usize()]);
                if best >= SEVERE_SCORE {
                    break;
                }
            }
        }
        best
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
    fn phrases_match_across_words_only_whole() {
        let list = WordList::embedded().unwrap();
        assert!(score(&list, "a camel jockey") > 0.0); // rated 2
        assert_eq!(score(&list, "camel jockeyship"), 0.0);
    }
}
