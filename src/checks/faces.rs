//! `faces`: the human faces of an image, found on the shard's model worker by MTCNN
//! ([`crate::inference::faces`]; boxes, five landmarks and a confidence each, in the answer's
//! `faces`, in fractions of the image's width and height, with `face_count`).
//!
//! `face` is the confidence of the surest face found, 0 when there is none: a platform that
//! forbids faces (or requires one, for a profile photo) thresholds it. The detector keeps faces
//! above 0.7; on the safe photo sets its false positives scored 0.70 to 0.85 on three
//! patterned wallpapers of 4096 px and more, and every real face scored at least 0.997
//! (`models/image/faces.md`), so a review threshold of 0.9 separates them there.
//!
//! The detector reads the image decoded to at least 480 px on its short side (a large JPEG at a
//! reduced DCT scale: [`crate::image::faces::DECODE_SIDE_MIN_PX`]) and scaled down to at most
//! 640 px a side: the smallest face it finds is 20 px there, about 3 % of the image's larger
//! side, whatever its format.

use super::board::ScoreBoard;
use super::categories::FACE;
use super::registry::{Check, Runner};
use super::TextModels;
use crate::content::ContentKind;
use crate::image::{Measured, Measures};
use crate::inference::faces::NETS;

pub const SOURCE: &str = "faces";
pub const CATEGORIES: &[&str] = &[FACE];

pub const CHECK: Check = Check {
    name: SOURCE,
    kind: ContentKind::Image,
    categories: CATEGORIES,
    languages: None,
    runner: Runner::Measure {
        measures: Measures::FACES,
        models: NETS,
        score,
    },
};

fn score(measured: &Measured, _: &TextModels, board: &mut ScoreBoard) {
    if let Some(faces) = &measured.faces {
        let surest = faces.iter().map(|face| face.score).fold(0.0f32, f32::max);
        board.add(FACE, f64::from(surest), SOURCE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::faces::{Face, FoundFace};

    fn face(score: f32) -> FoundFace {
        Face {
            bounds: [0.0, 0.0, 10.0, 10.0],
            score,
            landmarks: [[0.0; 2]; 5],
        }
        .in_fractions(20, 20)
    }

    #[test]
    fn the_surest_face_scores_and_none_scores_zero() {
        let mut board = ScoreBoard::default();
        let measured = Measured {
            faces: Some(vec![face(0.8), face(0.99)]),
            ..Measured::default()
        };
        score(
            &measured,
            &TextModels::load(std::path::Path::new("/nonexistent"))
                .unwrap()
                .0,
            &mut board,
        );
        assert!((board.get(FACE).unwrap().score - 0.99).abs() < 1e-6);
        let mut empty = ScoreBoard::default();
        let none = Measured {
            faces: Some(Vec::new()),
            ..Measured::default()
        };
        score(
            &none,
            &TextModels::load(std::path::Path::new("/nonexistent"))
                .unwrap()
                .0,
            &mut empty,
        );
        assert_eq!(board.get(FACE).map(|s| s.source), Some(SOURCE));
        assert_eq!(empty.get(FACE).unwrap().score, 0.0);
    }
}
