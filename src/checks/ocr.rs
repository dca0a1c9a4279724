//! `ocr`: the text written in an image (read on the model worker by PaddleOCR's networks,
//! [`crate::inference::ocr`]), checked as text on the shard with the checks that need no model,
//! as the QR codes' payloads are ([`super::qr`]):
//!
//! - `image_text`: the surest recognition score of a line of at least [`TEXT_CHARS_MIN`]
//!   letters or digits, 0 when the image holds none (a platform that forbids text overlays
//!   thresholds it). Shorter reads do not count: on the safe photo sets the recogniser reads
//!   single characters into textures at up to 0.94 ("8" in a coffee cup, "JN" in a pixel-art
//!   wallpaper; `models/image/OCR_STATS.md`); they are still listed in `text_lines` and
//!   checked with the rest of the text;
//! - `link` from [`super::links`] (source `ocr+links`), `profanity` from the word list
//!   (source `ocr+wordlist`) and the linear profanity model (source `ocr+profanity_svm`, on
//!   the text as read and, when normalising changed a word, as normalised), and the PII
//!   categories (source `ocr+pii`), so that a reason tells
//!   "an e-mail address written in the picture" from one in a caption, and "profanity in the
//!   picture" from nudity.
//!
//! The lines are joined with line breaks and checked as one text, so a phone number or a
//! sentence broken over two boxes of one line is still seen. tox-block is not run on it: it
//! runs on the worker between images; the word list, the linear model and the scanners cover
//! what is written in images in practice (profanity, contact details, links).
//!
//! Bounds ([`crate::image::ocr`]): the image is read at most 1,280 px on its larger side, so
//! text of about 1 % of that side and larger is read; at most 32 lines (the largest).

use super::board::ScoreBoard;
use super::categories::IMAGE_TEXT;
use super::registry::{Check, Runner};
use super::{links, pii, wordlist, FoundText, TextModels};
use crate::content::ContentKind;
use crate::image::{Measured, Measures};
use crate::inference::ocr::NETS;

pub const SOURCE: &str = "ocr";
pub const LINKS_SOURCE: &str = "ocr+links";
pub const WORDLIST_SOURCE: &str = "ocr+wordlist";
pub const SVM_SOURCE: &str = "ocr+profanity_svm";
pub const PII_SOURCE: &str = "ocr+pii";
/// Letters or digits a line needs to count for `image_text`.
pub const TEXT_CHARS_MIN: usize = 4;
pub const CATEGORIES: &[&str] = &[
    IMAGE_TEXT,
    links::CATEGORY,
    wordlist::CATEGORY,
    pii::EMAIL,
    pii::PHONE,
    pii::IBAN,
    pii::CARD,
    pii::IP,
];

pub const CHECK: Check = Check {
    name: SOURCE,
    kind: ContentKind::Image,
    categories: CATEGORIES,
    languages: None,
    runner: Runner::Measure {
        measures: Measures::OCR,
        models: NETS,
        score,
    },
};

/// The image's text as one string: its lines in reading order, one a line.
pub fn joined(measured: &Measured) -> Option<String> {
    let lines = measured.text_lines.as_ref()?;
    let texts: Vec<&str> = lines.iter().map(|line| line.text.as_str()).collect();
    Some(texts.join("\n"))
}

fn score(measured: &Measured, models: &TextModels, board: &mut ScoreBoard) {
    let (Some(lines), Some(text)) = (&measured.text_lines, joined(measured)) else {
        return;
    };
    let surest = lines
        .iter()
        .filter(|line| line.text.chars().filter(|c| c.is_alphanumeric()).count() >= TEXT_CHARS_MIN)
        .map(|line| line.score)
        .fold(0.0, f64::max);
    board.add(IMAGE_TEXT, surest, SOURCE);
    FOUND.zero(board);
    let mut normalised = String::new();
    let disguised = FOUND.score(&text, models, board, &mut normalised);
    // No text read: nothing for the model to score (it gives an empty text a small prior).
    let mut model = if text.trim().is_empty() {
        0.0
    } else {
        models.svm.score(&text)
    };
    if disguised {
        model = model.max(models.svm.score(&normalised));
    }
    board.add(wordlist::CATEGORY, model, SVM_SOURCE);
}

/// Where the text's scores from the rule checks go.
const FOUND: FoundText = FoundText {
    link_category: links::CATEGORY,
    links_source: LINKS_SOURCE,
    wordlist_source: WORDLIST_SOURCE,
    pii_source: PII_SOURCE,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::ocr::FoundLine;

    fn scored(texts: &[&str]) -> ScoreBoard {
        let models = TextModels::load(std::path::Path::new("/nonexistent"))
            .unwrap()
            .0;
        let measured = Measured {
            text_lines: Some(
                texts
                    .iter()
                    .map(|text| FoundLine {
                        text: (*text).to_owned(),
                        score: 0.97,
                        corners: [[0.0, 0.0], [1.0, 0.0], [1.0, 0.1], [0.0, 0.1]],
                    })
                    .collect(),
            ),
            ..Measured::default()
        };
        let mut board = ScoreBoard::default();
        score(&measured, &models, &mut board);
        board
    }

    #[test]
    fn the_text_is_checked_with_the_ocr_as_source() {
        let board = scored(&["Call me: jane@example.com", "you shit", "www.win-prize.com"]);
        let get = |category: &str| board.get(category).map(|s| (s.score, s.source));
        assert_eq!(get(IMAGE_TEXT), Some((0.97, SOURCE)));
        assert_eq!(get(pii::EMAIL), Some((0.95, PII_SOURCE)));
        // The word list's severe term, or the linear model where it is surer.
        let (profanity, source) = get("profanity").unwrap();
        assert!(profanity >= wordlist::SEVERE_SCORE, "{profanity}");
        assert!([WORDLIST_SOURCE, SVM_SOURCE].contains(&source), "{source}");
        assert_eq!(get(links::CATEGORY).map(|(_, s)| s), Some(LINKS_SOURCE));
        assert!(get(links::CATEGORY).unwrap().0 >= links::BARE_SCORE);
        assert_eq!(get(pii::CARD), Some((0.0, PII_SOURCE)));
    }

    #[test]
    fn the_linear_model_reads_the_text_too() {
        let board = scored(&["shut up you stupid piece of trash"]);
        let profanity = board.get("profanity").unwrap();
        let svm = TextModels::load(std::path::Path::new("/nonexistent"))
            .unwrap()
            .0
            .svm
            .score("shut up you stupid piece of trash");
        assert!(profanity.score >= svm, "{profanity:?} vs {svm}");
        let calm = scored(&["Fresh bread every morning"]);
        assert!(
            calm.get("profanity").unwrap().score < 0.4,
            "{:?}",
            calm.get("profanity")
        );
    }

    #[test]
    fn a_few_characters_are_not_text_but_are_still_checked() {
        let board = scored(&["8", "JN", "fuk"]);
        assert_eq!(board.get(IMAGE_TEXT).map(|s| s.score), Some(0.0));
        assert!(board.get("profanity").unwrap().score > 0.0, "still checked");
        assert_eq!(
            scored(&["8", "Sale"]).get(IMAGE_TEXT).map(|s| s.score),
            Some(0.97)
        );
    }

    #[test]
    fn no_text_scores_zero_and_unread_text_is_not_scored() {
        let board = scored(&[]);
        for category in CATEGORIES {
            assert_eq!(
                board.get(category).map(|s| s.score),
                Some(0.0),
                "{category}"
            );
        }
        let mut untouched = ScoreBoard::default();
        score(
            &Measured::default(),
            &TextModels::load(std::path::Path::new("/nonexistent"))
                .unwrap()
                .0,
            &mut untouched,
        );
        assert!(untouched.get(IMAGE_TEXT).is_none(), "not read: not scored");
    }
}
