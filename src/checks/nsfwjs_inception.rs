//! `nsfwjs_inception`: the InceptionV3 model of nsfwjs (MIT), the optional stronger nudity
//! check a workflow can name beside or instead of the MobileNetV2 ([`super::nsfwjs`]). It is
//! built from the npm package by `models/fetch.py` (`models/image/convert_tfjs.py`, numpy and
//! onnx only; `models/image/inception_v3.md`) and run on the shard's model worker.
//!
//! Its input is the MobileNetV2's at 299 x 299 ([`crate::image::resize::corner_aligned_input`]);
//! its output has the same five classes in the same order, and scores the same categories the
//! same way. It costs about six times the MobileNetV2 (`benches/`), which is why no shipped
//! workflow names it.

use super::nsfwjs::score;
use super::registry::{Check, ImageScore, Runner};
use crate::content::ContentKind;
use crate::image::resize::corner_aligned_input;
use crate::image::tensor::Layout;
use crate::image::{ImageError, Rgb8};
use crate::inference::{ImageModelSpec, ModelSpec, Prepare};

pub const SOURCE: &str = "nsfwjs_inception";

/// The side of its square input.
pub const SIDE: usize = 299;

pub const MODEL: ImageModelSpec = ImageModelSpec {
    model: ModelSpec {
        name: SOURCE,
        file: "cache/nsfwjs_inception_v3.onnx",
        sha256: "a9f4bb111385f90598420a594d0281c6194bb4c8b972e4875599a6f807cc8046",
    },
    min_side_px: SIDE,
    input_hwc: [SIDE, SIDE, 3],
    layout: Layout::Nhwc,
    input_name: "input",
    output_name: "probabilities",
    output_columns: 5,
    prepare: Prepare::Code(prepare),
    declared: false,
    open_on_first_use: true,
};

pub const CHECK: Check = Check {
    name: SOURCE,
    kind: ContentKind::Image,
    categories: super::nsfwjs::CATEGORIES,
    languages: None,
    runner: Runner::Image {
        model: &MODEL,
        score: ImageScore::Code(score),
    },
};

fn prepare(image: &Rgb8, out: &mut [f32]) -> Result<(), ImageError> {
    corner_aligned_input(image, SIDE, out);
    Ok(())
}
