//! `qr`: the QR codes of an image ([`crate::image::qr`], read on the model worker from the
//! decoded pixels), and what they carry checked as text on the shard:
//!
//! - `qr_code`: 1 when the image holds a QR code that decodes, 0 when it holds none;
//! - `qr_link`: the best [`super::links`] score of a payload (a QR code that sends people
//!   elsewhere), source `qr+links`;
//! - `profanity` from the word list (source `qr+wordlist`) and the PII categories from the
//!   PII scanners (source `qr+pii`), so a reason tells "an e-mail address in a QR code" from
//!   one in a caption.
//!
//! An image with no QR code scores 0 in every category: it was checked, and nothing was found.
//! An image the reader did not read (its guard against finder-pattern tilings,
//! [`crate::image::qr`], or any failure of the measurement) scores nothing, and the engine
//! lists every category here in the answer's `unchecked` (`score_measured` in [`super`]).

use super::board::ScoreBoard;
use super::categories::{QR_CODE, QR_LINK};
use super::registry::{Check, Runner};
use super::{pii, wordlist, FoundText, TextModels};
use crate::content::ContentKind;
use crate::image::{Measured, Measures};

pub const SOURCE: &str = "qr";
pub const LINKS_SOURCE: &str = "qr+links";
pub const WORDLIST_SOURCE: &str = "qr+wordlist";
pub const PII_SOURCE: &str = "qr+pii";
pub const CATEGORIES: &[&str] = &[
    QR_CODE,
    QR_LINK,
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
        measures: Measures::QR,
        models: &[],
        score,
    },
};

fn score(measured: &Measured, models: &TextModels, board: &mut ScoreBoard) {
    // Not read: the engine reports the categories unchecked and does not call this.
    let Some(codes) = &measured.qr_codes else {
        return;
    };
    // Checked: every category is scored, 0 unless a payload says otherwise (the board keeps
    // the best score per category).
    board.add(QR_CODE, if codes.is_empty() { 0.0 } else { 1.0 }, SOURCE);
    FOUND.zero(board);
    let mut normalised = String::new();
    for code in codes {
        FOUND.score(&code.payload, models, board, &mut normalised);
    }
}

/// Where the payloads' scores go.
const FOUND: FoundText = FoundText {
    link_category: QR_LINK,
    links_source: LINKS_SOURCE,
    wordlist_source: WORDLIST_SOURCE,
    pii_source: PII_SOURCE,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::links;
    use crate::image::qr::QrCode;

    fn scored(payloads: &[&str]) -> ScoreBoard {
        let models = TextModels::load(std::path::Path::new("/nonexistent"))
            .unwrap()
            .0;
        let measured = Measured {
            qr_codes: Some(
                payloads
                    .iter()
                    .map(|payload| QrCode {
                        payload: (*payload).to_owned(),
                        x1: 0.0,
                        y1: 0.0,
                        x2: 1.0,
                        y2: 1.0,
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
    fn payloads_are_checked_as_text_with_the_qr_as_source() {
        let board = scored(&[
            "https://win.example/prize",
            "mail me: jane@example.com you shit",
        ]);
        let get = |category: &str| board.get(category).map(|s| (s.score, s.source));
        assert_eq!(get(QR_CODE), Some((1.0, SOURCE)));
        assert_eq!(get(QR_LINK), Some((links::SCHEME_SCORE, LINKS_SOURCE)));
        assert_eq!(get(pii::EMAIL), Some((0.95, PII_SOURCE)));
        assert_eq!(
            get("profanity"),
            Some((wordlist::SEVERE_SCORE, WORDLIST_SOURCE))
        );
        assert_eq!(get(pii::CARD), Some((0.0, PII_SOURCE)));
    }

    #[test]
    fn no_code_scores_zero_everywhere() {
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
        assert!(untouched.get(QR_CODE).is_none(), "not measured: not scored");
    }
}
