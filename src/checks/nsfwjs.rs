//! `nsfwjs`: the MobileNetV2 "mid" model of nsfwjs (MIT), converted to ONNX by
//! `models/image/convert_nsfwjs.py`, run on the shard's model worker after the image is
//! decoded there.
//!
//! Its input is TensorFlow's corner-aligned bilinear resize
//! ([`crate::image::resize::nsfwjs_input`]); its output is [drawing, hentai, neutral, porn,
//! sexy]. `nudity` is Porn, `suggestive` is Sexy, `drawn_nudity` is Hentai, and
//! `illustration` (a drawing rather than a photo) is Drawing plus Hentai. Where open-NSFW
//! scores `nudity` too, the board keeps the best, and a reason names the model that gave it.

use super::board::ScoreBoard;
use super::categories::{DRAWN_NUDITY, ILLUSTRATION, NUDITY, SUGGESTIVE};
use super::registry::{Check, ImageScore, Runner};
use crate::content::ContentKind;
use crate::image::resize::{nsfwjs_input, MODEL_SIDE};
use crate::image::tensor::Layout;
use crate::image::{ImageError, Rgb8};
use crate::inference::{ImageModelSpec, ModelSpec, Prepare};

pub const SOURCE: &str = "nsfwjs";
pub const CATEGORIES: &[&str] = &[NUDITY, SUGGESTIVE, DRAWN_NUDITY, ILLUSTRATION];

/// The classes, in the output's order.
const DRAWING: usize = 0;
const HENTAI: usize = 1;
const PORN: usize = 3;
const SEXY: usize = 4;

pub const MODEL: ImageModelSpec = ImageModelSpec {
    model: ModelSpec {
        name: SOURCE,
        file: "image/nsfwjs_mid.onnx",
        sha256: "7db379eeb4c5c42fd428055ce4abbd9b80036c1a6c3f1fa3375ee9a41d622cb0",
    },
    min_side_px: MODEL_SIDE,
    input_hwc: [MODEL_SIDE, MODEL_SIDE, 3],
    layout: Layout::Nhwc,
    input_name: "input",
    output_name: "probabilities",
    output_columns: 5,
    prepare: Prepare::Code(prepare),
    declared: false,
    open_on_first_use: false,
};

pub const CHECK: Check = Check {
    name: SOURCE,
    kind: ContentKind::Image,
    categories: CATEGORIES,
    languages: None,
    runner: Runner::Image {
        model: &MODEL,
        score: ImageScore::Code(score),
    },
};

fn prepare(image: &Rgb8, out: &mut [f32]) -> Result<(), ImageError> {
    nsfwjs_input(image, out);
    Ok(())
}

/// The categories of one output row (the InceptionV3 has the same classes).
pub(super) fn score(row: &[f32], board: &mut ScoreBoard) {
    board.add(NUDITY, f64::from(row[PORN]), SOURCE);
    board.add(SUGGESTIVE, f64::from(row[SEXY]), SOURCE);
    board.add(DRAWN_NUDITY, f64::from(row[HENTAI]), SOURCE);
    board.add(ILLUSTRATION, f64::from(row[DRAWING] + row[HENTAI]), SOURCE);
}

/// Runs the model over `inputs` (whole images): the five classes per image.
pub fn probs(
    session: &mut ort::session::Session,
    inputs: Vec<f32>,
) -> Result<Vec<[f32; 5]>, String> {
    let rows = crate::inference::image_rows(session, &MODEL, inputs)?;
    Ok(rows
        .chunks_exact(5)
        .map(|row| std::array::from_fn(|i| row[i]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_model_wins_each_category() {
        let mut board = ScoreBoard::default();
        (super::super::open_nsfw::CHECK_SCORE)(&[0.3, 0.7], &mut board);
        score(&[0.0, 0.2, 0.1, 0.6, 0.9], &mut board);
        let nudity = board.get(NUDITY).unwrap();
        assert_eq!(
            (nudity.source, (nudity.score * 10.0).round()),
            (super::super::open_nsfw::SOURCE, 7.0)
        );
        assert_eq!(board.get(SUGGESTIVE).unwrap().source, SOURCE);
        assert!((board.get(DRAWN_NUDITY).unwrap().score - 0.2).abs() < 1e-6);
    }
}
