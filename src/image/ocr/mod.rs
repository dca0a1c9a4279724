//! Text in images: the pixel work around the three OCR networks (detector, orientation,
//! recognition), as rapidocr 3.10.0 runs PaddleOCR's PP-OCRv6 models
//! (`models/image/ocr.md` describes the pipeline step by step; `ocr_spec.py` is it as code).
//! The networks run on the shard's model worker ([`crate::inference::ocr`]); this module is
//! everything before and after them, without a model:
//!
//! - [`fit`]: the whole image within [`SIDE_MAX_PX`], flat images padded with black rows,
//!   its sizes planned first from the image's sides ([`FitPlan`]);
//! - [`detector_input`]: the short side brought up to 736 px (the reference's rule), within
//!   [`DETECTOR_PIXELS_MAX`];
//! - [`boxes::text_boxes`]: the detector's map to boxes in reading order;
//! - [`warp::crop`]: each box as an upright line;
//! - [`line_input`]: a line as the orientation and recognition networks read it;
//! - [`ctc_decode`]: the recognition's output to a string and a score.
//!
//! Bounds (the work of one image, whatever it holds): the fitted image is at most
//! [`SIDE_MAX_PX`] a side (the reference: 2,000 on the larger side, and any length after it
//! raises a short side to 30 px: [`FitPlan::new`]), and the detector reads at most 4/3 of
//! [`DETECTOR_PIXELS_MAX`] pixels (rounding included); at most [`LINES_MAX`] lines are read
//! (the largest); a line is read at most [`LINE_WIDTH_MAX_PX`] wide. Every size is computed
//! from the image's sides before anything is allocated. An image within these bounds, and no
//! more than about 43 times as long as it is wide or high, is read exactly as the reference
//! reads it.

pub mod boxes;
pub mod fill;
pub mod linear;
pub mod warp;

use crate::image::raster::Rgb8;
pub use boxes::Quad;
use linear::resize_linear;

/// The short side a JPEG is decoded to at least for the OCR (at a reduced DCT scale): a 4:3
/// photo then has at least [`SIDE_MAX_PX`] on its larger side.
pub const DECODE_SIDE_MIN_PX: usize = 960;
/// The larger side the image is brought down to before detection (the reference: 2,000 px).
/// Text of about 1 % of the larger side is still read (`models/image/ocr.md`, "Cost").
pub const SIDE_MAX_PX: usize = 1280;
/// A side shorter than this is brought up to it (the reference's `min_side_len`).
const SIDE_MIN_PX: usize = 30;
/// The short side the detector reads at least (the reference's `limit_side_len`, "min").
const DETECTOR_SIDE_MIN_PX: usize = 736;
/// The detector's input, at most, before its sides are rounded to 32 px (which adds a few %,
/// up to a third for a thin image: [`detector_size`]); about 0.8 s of one core: a long banner
/// brought up to a 736 px short side would be far more. Not in the reference, which reads any
/// size.
pub const DETECTOR_PIXELS_MAX: usize = 2_000_000;
/// Lines read per image, at most: the largest boxes (about 40 ms each). Not in the reference.
pub const LINES_MAX: usize = 32;
/// The widest a line is fed to the recognition network (the network's height is 48 px): the
/// output is 18,710 floats per 8 px of width. Not in the reference.
pub const LINE_WIDTH_MAX_PX: usize = 2048;
/// A flat image (wider than this many heights, or low) gets black rows above and below.
const FLAT_RATIO: f64 = 8.0;
const LOW_PX: usize = 30;
/// The line networks' input height.
pub const LINE_HEIGHT_PX: usize = 48;
/// The orientation network's input width.
pub const ORIENTATION_WIDTH_PX: usize = 192;
/// The recognition network's narrowest batch width.
pub const RECOGNITION_WIDTH_MIN_PX: usize = 320;
/// Lines run together through a line network (the reference's batch; the batch's widest line
/// sets every line's padding, which moves the scores slightly).
pub const LINE_BATCH: usize = 6;
/// A line turned upside down with a probability above this is turned back.
pub const UPSIDE_DOWN_MIN: f32 = 0.9;
/// Lines read with a lower mean probability are dropped.
pub const LINE_SCORE_MIN: f64 = 0.5;

/// Python's `int(round(v / 32) * 32)` (halves to even: 2,000 / 32 = 62.5 gives 1,984).
fn round32(v: f64) -> usize {
    ((v / 32.0).round_ties_even() * 32.0).max(0.0) as usize
}

/// The image as the detector sees it: bounded, padded; and how to map its boxes back.
pub struct Fitted {
    pub image: Rgb8,
    /// Rows of black padding added above.
    pub top: usize,
    /// Original pixels per fitted pixel, horizontally and vertically.
    pub ratio_x: f64,
    pub ratio_y: f64,
}

/// The sides of a `width` x `height` image scaled by `ratio`, each rounded as the reference
/// rounds it ([`round32`], at least 1).
fn scaled_sides(width: usize, height: usize, ratio: f64) -> (usize, usize) {
    let side = |n: usize| round32((n as f64 * ratio).trunc()).max(1);
    (side(width), side(height))
}

/// What [`fit`] makes of an image, computed from its sides alone before any pixel is
/// allocated: every size here is at most [`SIDE_MAX_PX`] a side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FitPlan {
    /// The sides after the larger one is brought within [`SIDE_MAX_PX`], if it was larger.
    pub bounded: Option<(usize, usize)>,
    /// The sides after the smaller one is brought up towards `SIDE_MIN_PX`, if it was
    /// smaller.
    pub raised: Option<(usize, usize)>,
    /// Rows of black padding added above and below.
    pub top: usize,
    /// The sides before padding (the last of the image's own, `bounded` and `raised`).
    pub width: usize,
    pub height: usize,
}

impl FitPlan {
    /// The reference's `resize_image_within_bounds` and `apply_vertical_padding` for a
    /// `width` x `height` image (both at least 1), with one difference: the short side is
    /// raised only as far as the long side stays within [`SIDE_MAX_PX`]. The reference raises
    /// it to 30 px whatever that does to the long side: a 38,400 x 1 strip became 38,400 x 32,
    /// padded to 38,400 x 9,600 (1.1 GB of pixels, about 20 s of resizing) before the
    /// detector's pixel cap applied. Only images more than 1,280 / 30 (about 43) times as long
    /// as they are wide or high read differently from the reference.
    pub fn new(width: usize, height: usize) -> FitPlan {
        assert!(width >= 1 && height >= 1, "an image of {width}x{height}");
        let (mut w, mut h) = (width, height);
        let mut bounded = None;
        let larger = w.max(h);
        if larger > SIDE_MAX_PX {
            (w, h) = scaled_sides(w, h, SIDE_MAX_PX as f64 / larger as f64);
            bounded = Some((w, h));
        }
        let mut raised = None;
        let smaller = w.min(h);
        if smaller < SIDE_MIN_PX {
            let ratio =
                (SIDE_MIN_PX as f64 / smaller as f64).min(SIDE_MAX_PX as f64 / w.max(h) as f64);
            if ratio > 1.0 {
                (w, h) = scaled_sides(w, h, ratio);
                raised = Some((w, h));
            }
        }
        let mut top = 0;
        if h <= LOW_PX || w as f64 / h as f64 > FLAT_RATIO {
            let padded_h = ((w as f64 / FLAT_RATIO) as usize).max(LOW_PX) * 2;
            top = padded_h.abs_diff(h) / 2;
        }
        FitPlan {
            bounded,
            raised,
            top,
            width: w,
            height: h,
        }
    }

    /// The fitted image's sides, padding included.
    pub fn size(&self) -> (usize, usize) {
        (self.width, self.height + 2 * self.top)
    }
}

/// The reference's `resize_image_within_bounds` (with [`SIDE_MAX_PX`]) and
/// `apply_vertical_padding`, as [`FitPlan`] plans them; `None` for an image without pixels.
pub fn fit(image: &Rgb8) -> Option<Fitted> {
    if image.width == 0 || image.height == 0 {
        return None;
    }
    let plan = FitPlan::new(image.width, image.height);
    let (mut ratio_x, mut ratio_y) = (1.0, 1.0);
    let mut current = std::borrow::Cow::Borrowed(image);
    // Each step resizes what the one before made, as the reference does (one resize from the
    // image to the last size would give other pixels); it replaces the ratios rather than
    // composing them.
    for (w, h) in [plan.bounded, plan.raised].into_iter().flatten() {
        ratio_x = current.width as f64 / w as f64;
        ratio_y = current.height as f64 / h as f64;
        current = std::borrow::Cow::Owned(resize_linear(&current, w, h));
    }
    let (w, h, top) = (current.width, current.height, plan.top);
    if top > 0 {
        let mut pixels = vec![0u8; (h + 2 * top) * w * 3];
        pixels[top * w * 3..(top + h) * w * 3].copy_from_slice(&current.pixels);
        current = std::borrow::Cow::Owned(Rgb8::new(w, h + 2 * top, pixels));
    }
    Some(Fitted {
        image: current.into_owned(),
        top,
        ratio_x,
        ratio_y,
    })
}

/// The detector's input sides for a `width` x `height` image: the short side brought up to
/// `DETECTOR_SIDE_MIN_PX`, the whole within [`DETECTOR_PIXELS_MAX`], each side rounded to
/// 32 px (which adds up to a third for a thin image: a fitted image at most [`SIDE_MAX_PX`]
/// a side gives at most 4/3 of the cap); `None` when a side rounds to 0.
pub fn detector_size(width: usize, height: usize) -> Option<(usize, usize)> {
    let (h, w) = (height, width);
    let mut ratio = if h.min(w) < DETECTOR_SIDE_MIN_PX {
        if h < w {
            DETECTOR_SIDE_MIN_PX as f64 / h as f64
        } else {
            DETECTOR_SIDE_MIN_PX as f64 / w as f64
        }
    } else {
        1.0
    };
    let pixels = (h as f64 * ratio) * (w as f64 * ratio);
    if pixels > DETECTOR_PIXELS_MAX as f64 {
        ratio *= (DETECTOR_PIXELS_MAX as f64 / pixels).sqrt();
    }
    let (rh, rw) = (
        round32((h as f64 * ratio).trunc()),
        round32((w as f64 * ratio).trunc()),
    );
    (rh != 0 && rw != 0).then_some((rw, rh))
}

/// The detector's input for `image` (NCHW values, blue, green, red planes, each
/// `(v / 255 - 0.5) / 0.5`) and its width and height; `None` when it has no pixels.
pub fn detector_input(image: &Rgb8) -> Option<(Vec<f32>, usize, usize)> {
    if image.width == 0 || image.height == 0 {
        return None;
    }
    let (rw, rh) = detector_size(image.width, image.height)?;
    let resized = resize_linear(image, rw, rh);
    let plane = rw * rh;
    let mut values = vec![0.0f32; plane * 3];
    for (i, pixel) in resized.pixels.chunks_exact(3).enumerate() {
        for (c, &v) in pixel.iter().rev().enumerate() {
            // f32 product, then f64 arithmetic, as the reference's numpy does.
            let scaled = f32::from(v) * (1.0f32 / 255.0);
            values[c * plane + i] = ((f64::from(scaled) - 0.5) / 0.5) as f32;
        }
    }
    Some((values, rw, rh))
}

/// Appends a line's input for the orientation or recognition network: resized to `width`
/// (at most `padded_width`) x [`LINE_HEIGHT_PX`], blue, green, red planes of
/// `(v / 255 - 0.5) / 0.5` in f32, zero on the right up to `padded_width`.
pub fn line_input(line: &Rgb8, width: usize, padded_width: usize, out: &mut Vec<f32>) {
    assert!(width >= 1 && width <= padded_width);
    let resized = resize_linear(line, width, LINE_HEIGHT_PX);
    let at = out.len();
    out.resize(at + 3 * LINE_HEIGHT_PX * padded_width, 0.0);
    let planes = &mut out[at..];
    for y in 0..LINE_HEIGHT_PX {
        for x in 0..width {
            let pixel = &resized.pixels[(y * width + x) * 3..][..3];
            for (c, &v) in pixel.iter().rev().enumerate() {
                let scaled = f32::from(v) / 255.0;
                planes[(c * LINE_HEIGHT_PX + y) * padded_width + x] = (scaled - 0.5) / 0.5;
            }
        }
    }
}

/// The width a line of `width` x `height` is resized to for a network whose batch is
/// `batch_width` wide: its aspect kept at [`LINE_HEIGHT_PX`] high, at most `batch_width`.
pub fn line_width(width: usize, height: usize, batch_width: usize) -> usize {
    let wanted = (LINE_HEIGHT_PX as f64 * (width as f64 / height as f64)).ceil();
    if wanted > batch_width as f64 {
        batch_width
    } else {
        (wanted as usize).max(1)
    }
}

/// The recognition batch's width for lines of these aspect ratios (width over height): the
/// widest, at least [`RECOGNITION_WIDTH_MIN_PX`], at most [`LINE_WIDTH_MAX_PX`].
pub fn recognition_width(ratios: impl Iterator<Item = f64>) -> usize {
    let widest = ratios.fold(
        RECOGNITION_WIDTH_MIN_PX as f64 / LINE_HEIGHT_PX as f64,
        f64::max,
    );
    ((LINE_HEIGHT_PX as f64 * widest) as usize).min(LINE_WIDTH_MAX_PX)
}

/// Python's `round(v, 5)`: to 5 decimals, halves to even on the exact decimal value.
fn round5(v: f64) -> f64 {
    format!("{v:.5}").parse().unwrap_or(v)
}

/// Greedy CTC decoding of one line's output (`steps` rows of `classes` probabilities): per
/// step the first most likely class; repeats and blanks (class 0) dropped; class `i` is
/// `characters[i - 1]`. The score is the mean of the kept steps' probabilities (each rounded
/// to 5 decimals, as the reference does), 0 when none is kept.
pub fn ctc_decode(output: &[f32], classes: usize, characters: &[String]) -> (String, f64) {
    let mut text = String::new();
    let mut sum = 0.0;
    let mut kept = 0usize;
    let mut previous = usize::MAX;
    for step in output.chunks_exact(classes) {
        let (mut best, mut probability) = (0, f32::NEG_INFINITY);
        for (class, &p) in step.iter().enumerate() {
            if p > probability {
                (best, probability) = (class, p);
            }
        }
        if best != 0 && best != previous {
            if let Some(character) = characters.get(best - 1) {
                text.push_str(character);
                sum += round5(f64::from(probability));
                kept += 1;
            }
        }
        previous = best;
    }
    let score = if kept == 0 {
        0.0
    } else {
        round5(sum / kept as f64)
    };
    (text, score)
}

/// A line of text found in an image.
#[derive(Clone, Debug, PartialEq)]
pub struct TextLine {
    pub text: String,
    /// The recognition's mean probability.
    pub score: f64,
    /// Corners (top-left, top-right, bottom-right, bottom-left) in pixels of the image as
    /// sent.
    pub quad: Quad,
}

/// A line as answers show it: its corners in fractions of the image's width and height.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FoundLine {
    pub text: String,
    pub score: f64,
    /// Top-left, top-right, bottom-right, bottom-left, each `[x, y]`.
    #[serde(rename = "box")]
    pub corners: [[f64; 2]; 4],
}

impl TextLine {
    /// The line with its corners in fractions of a `width` x `height` image.
    pub fn in_fractions(self, width: usize, height: usize) -> FoundLine {
        let fraction = |v: f32, side: usize| crate::image::raster::fraction(f64::from(v), side);
        FoundLine {
            text: self.text,
            score: self.score,
            corners: self
                .quad
                .map(|[x, y]| [fraction(x, width), fraction(y, height)]),
        }
    }
}

/// A box of the fitted image mapped back to the image as sent (`width` x `height`).
pub fn box_in_image(quad: &Quad, fitted: &Fitted, width: usize, height: usize) -> Quad {
    quad.map(|[x, y]| {
        let x = x * fitted.ratio_x as f32;
        let y = (y - fitted.top as f32) * fitted.ratio_y as f32;
        [x.max(0.0).min(width as f32), y.max(0.0).min(height as f32)]
    })
}

/// Which of `quads` are read: all of them when there are at most [`LINES_MAX`], else the
/// largest (by area), in their reading order.
pub fn lines_to_read(quads: &[Quad]) -> Vec<usize> {
    let mut chosen: Vec<usize> = (0..quads.len()).collect();
    if quads.len() > LINES_MAX {
        let area = |q: &Quad| {
            let [tl, tr, _, bl] = *q;
            (tr[0] - tl[0]).hypot(tr[1] - tl[1]) * (bl[0] - tl[0]).hypot(bl[1] - tl[1])
        };
        chosen.sort_by(|&a, &b| area(&quads[b]).total_cmp(&area(&quads[a])));
        chosen.truncate(LINES_MAX);
        chosen.sort_unstable();
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_show_corners_in_fractions_with_four_decimals() {
        let line = TextLine {
            text: "Sale".into(),
            score: 0.99,
            quad: [[27.0, 29.0], [482.0, 30.0], [482.0, 64.0], [26.0, 63.0]],
        };
        let found = line.in_fractions(640, 300);
        assert_eq!(found.corners[0], [0.0422, 0.0967]);
        assert_eq!(found.corners[2], [0.7531, 0.2133]);
        assert_eq!((found.text.as_str(), found.score), ("Sale", 0.99));
    }

    #[test]
    fn round32_halves_to_even() {
        assert_eq!(round32(2000.0), 1984);
        assert_eq!(round32(1500.0), 1504);
        assert_eq!(round32(736.0), 736);
        assert_eq!(round32(15.0), 0);
    }

    #[test]
    fn large_images_are_bounded_and_flat_ones_padded() {
        let big = Rgb8::new(4000, 3000, vec![0; 4000 * 3000 * 3]);
        let fitted = fit(&big).unwrap();
        assert_eq!((fitted.image.width, fitted.image.height), (1280, 960));
        assert_eq!(fitted.ratio_x, 4000.0 / 1280.0);
        let banner = Rgb8::new(1000, 50, vec![200; 1000 * 50 * 3]);
        let fitted = fit(&banner).unwrap();
        // max(1000 / 8, 30) * 2 = 250 rows: 100 above and below.
        assert_eq!((fitted.top, fitted.image.height), (100, 250));
        assert_eq!(fitted.image.pixels[0], 0);
        assert_eq!(fitted.image.pixels[100 * 1000 * 3], 200);
        let back = box_in_image(&[[10.0, 110.0]; 4], &fitted, 1000, 50);
        assert_eq!(back[0], [10.0, 10.0]);
    }

    /// Hardening round 3, item 5: a 38,400 x 1 strip was raised to 38,400 x 32 and padded to
    /// 38,400 x 9,600 (1.1 GB) before the detector's cap applied.
    #[test]
    fn degenerate_strips_are_fitted_within_the_side_max() {
        for (width, height) in [(38_400, 1), (1, 38_400), (5_000, 3), (1, 1), (2_000, 40)] {
            let plan = FitPlan::new(width, height);
            let (w, h) = plan.size();
            assert!(
                w <= SIDE_MAX_PX && h <= SIDE_MAX_PX,
                "{width}x{height}: {plan:?}"
            );
        }
        let strip = Rgb8::new(38_400, 1, vec![255; 38_400 * 3]);
        let fitted = fit(&strip).unwrap();
        assert_eq!(fitted.image.width, SIDE_MAX_PX);
        assert!(fitted.image.height <= 320, "{}", fitted.image.height);
        let column = Rgb8::new(1, 38_400, vec![255; 38_400 * 3]);
        let fitted = fit(&column).unwrap();
        assert_eq!((fitted.image.width, fitted.image.height), (1, SIDE_MAX_PX));
        let (_, w, h) = detector_input(&fitted.image).unwrap();
        assert!(w * h <= DETECTOR_PIXELS_MAX * 4 / 3, "{w}x{h}");
        assert!(fit(&Rgb8::new(0, 0, Vec::new())).is_none());
        assert!(detector_input(&Rgb8::new(0, 5, Vec::new())).is_none());
    }

    /// Images up to about 43 times as long as they are wide or high are fitted as the
    /// reference fits them: its sizes, composed by hand.
    #[test]
    fn ordinary_shapes_are_planned_as_the_reference_plans_them() {
        // 4,000 x 3,000: the larger side to 1,280 (1,280 x 960).
        assert_eq!(
            FitPlan::new(4000, 3000),
            FitPlan {
                bounded: Some((1280, 960)),
                raised: None,
                top: 0,
                width: 1280,
                height: 960
            }
        );
        // 20 x 600: the short side to 30 (round32: 32 x 896); not flat.
        let plan = FitPlan::new(20, 600);
        assert_eq!(
            (plan.bounded, plan.raised, plan.top),
            (None, Some((32, 896)), 0)
        );
        // 1,000 x 50: flat, padded to 250 rows.
        let plan = FitPlan::new(1000, 50);
        assert_eq!(
            (plan.raised, plan.top, plan.size()),
            (None, 100, (1000, 250))
        );
    }

    proptest::proptest! {
        /// Whatever the image's sides, every size the OCR allocates before its networks is
        /// bounded: the fitted image (at most [`SIDE_MAX_PX`] a side, so its steps' too) and
        /// the detector's input (at most 4/3 of [`DETECTOR_PIXELS_MAX`]).
        #[test]
        fn every_size_planned_is_bounded(
            width in 1usize..200_000,
            height in 1usize..200_000,
            thin in 1usize..64,
            which in 0u8..3,
        ) {
            let (width, height) = match which {
                0 => (width, height),
                1 => (width, thin),
                _ => (thin, height),
            };
            let plan = FitPlan::new(width, height);
            for (w, h) in [plan.bounded, plan.raised].into_iter().flatten() {
                proptest::prop_assert!(w <= SIDE_MAX_PX && h <= SIDE_MAX_PX, "{:?}", plan);
            }
            let (w, h) = plan.size();
            proptest::prop_assert!(w >= 1 && h >= 1);
            proptest::prop_assert!(w <= SIDE_MAX_PX && h <= SIDE_MAX_PX, "{width}x{height}: {plan:?}");
            if let Some((dw, dh)) = detector_size(w, h) {
                proptest::prop_assert!(dw * dh <= DETECTOR_PIXELS_MAX * 4 / 3, "{w}x{h}: {dw}x{dh}");
            }
        }
    }

    /// The detector's bound over every fitted size (at most [`SIDE_MAX_PX`] a side), checked
    /// exhaustively: its sizes are pure arithmetic.
    #[test]
    fn the_detector_input_is_bounded_for_every_fitted_size() {
        let mut largest = 0;
        for w in 1..=SIDE_MAX_PX {
            for h in 1..=SIDE_MAX_PX {
                if let Some((dw, dh)) = detector_size(w, h) {
                    largest = largest.max(dw * dh);
                }
            }
        }
        assert!(largest <= DETECTOR_PIXELS_MAX * 4 / 3, "{largest}");
    }

    #[test]
    fn the_detector_reads_small_images_enlarged_and_long_ones_bounded() {
        let small = Rgb8::new(320, 240, vec![255; 320 * 240 * 3]);
        let (values, w, h) = detector_input(&small).unwrap();
        assert_eq!((w, h), (992, 736));
        assert!(values.iter().all(|&v| v == 1.0));
        let long = Rgb8::new(1280, 160, vec![0; 1280 * 160 * 3]);
        let (_, w, h) = detector_input(&long).unwrap();
        // Rounding each side to 32 px can add a little.
        assert!(w * h <= DETECTOR_PIXELS_MAX * 21 / 20, "{w}x{h}");
        assert!(w > 3000 && h > 300);
    }

    #[test]
    fn ctc_drops_blanks_and_repeats() {
        let characters: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        // Steps: a, a, blank, a, b; probabilities 0.9 each for the winners.
        let steps = [
            [0.05, 0.9, 0.05],
            [0.05, 0.9, 0.05],
            [0.9, 0.05, 0.05],
            [0.05, 0.9, 0.05],
            [0.05, 0.05, 0.9],
        ];
        let output: Vec<f32> = steps.iter().flatten().copied().collect();
        let (text, score) = ctc_decode(&output, 3, &characters);
        assert_eq!(text, "aab");
        assert_eq!(score, 0.9);
        assert_eq!(
            ctc_decode(&[1.0, 0.0, 0.0], 3, &characters),
            (String::new(), 0.0)
        );
    }

    #[test]
    fn line_inputs_keep_the_aspect_and_pad_with_zero() {
        assert_eq!(line_width(100, 20, 320), 240);
        assert_eq!(line_width(1000, 20, 320), 320);
        assert_eq!(recognition_width([2.0, 10.0].into_iter()), 480);
        assert_eq!(recognition_width([1000.0].into_iter()), LINE_WIDTH_MAX_PX);
        let white = Rgb8::new(10, 10, vec![255; 300]);
        let mut out = Vec::new();
        line_input(&white, 48, 50, &mut out);
        assert_eq!(out.len(), 3 * 48 * 50);
        assert_eq!((out[0], out[47], out[48]), (1.0, 1.0, 0.0));
    }

    #[test]
    fn only_the_largest_lines_are_read_and_in_reading_order() {
        let quad = |size: f32| [[0.0, 0.0], [size, 0.0], [size, size], [0.0, size]];
        let quads: Vec<Quad> = (0..LINES_MAX + 3)
            .map(|i| quad(if i % 2 == 0 { 10.0 } else { 5.0 }))
            .collect();
        let chosen = lines_to_read(&quads);
        assert_eq!(chosen.len(), LINES_MAX);
        assert!(chosen.windows(2).all(|w| w[0] < w[1]));
        assert!(
            (0..quads.len()).step_by(2).all(|i| chosen.contains(&i)),
            "{chosen:?}"
        );
    }
}
