//! Each model's input tensor, exactly as its reference pipeline makes it
//! (`models/image/spec_preprocess.py` is the executable specification; the unit tests and
//! `tests/models.rs` hold these functions to it).
//!
//! - nsfwjs: `pixel / 255` in f32, then TensorFlow's `resizeBilinear` with corner-aligned
//!   grids (`alignCorners = true`): each output pixel reads the 4 nearest source pixels, no
//!   antialiasing. NHWC, RGB, 224 x 224.
//! - open-NSFW: Pillow's BILINEAR resize to 256 x 256 (an antialiased, separable triangle
//!   filter in 22-bit fixed point, horizontal pass first through an 8-bit intermediate),
//!   crop of the centre 224 x 224, a JPEG round trip at quality 75 ([`super::jpeg`]), then
//!   BGR minus the means (104, 117, 123). NHWC, 224 x 224.
//!
//! The Pillow filter's weights are computed once per (source, target) size pair and the
//! inner loops are plain integer multiply-adds over contiguous rows, which the compiler
//! vectorises.

use super::jpeg;
use super::raster::{ImageError, Rgb8};

pub const MODEL_SIDE: usize = 224;
/// Pixels of one model input (224 x 224 x 3).
pub const INPUT_LEN: usize = MODEL_SIDE * MODEL_SIDE * 3;
pub const OPENNSFW_RESIZE: usize = 256;
pub const OPENNSFW_CROP: usize = 16;
pub const OPENNSFW_MEAN_BGR: [f32; 3] = [104.0, 117.0, 123.0];

/// nsfwjs's input: `out` gets 224 x 224 x 3 floats in [0, 1].
pub fn nsfwjs_input(image: &Rgb8, out: &mut [f32]) {
    corner_aligned_input(image, MODEL_SIDE, out);
}

/// nsfwjs's input at `side` x `side` (224 for its MobileNetV2, 299 for its InceptionV3): each
/// byte as `p / 255` in f32, then TensorFlow's bilinear resize with corner-aligned grids and no
/// antialiasing (`tf.image.resizeBilinear(x, [side, side], alignCorners = true)`: 2 x 2 taps
/// per output, in f64 on the f32 values). `out` gets `side * side * 3` floats.
pub fn corner_aligned_input(image: &Rgb8, side: usize, out: &mut [f32]) {
    assert_eq!(out.len(), side * side * 3);
    let scaled = |p: u8| f32::from(p) / 255.0;
    if image.width == side && image.height == side {
        for (slot, &p) in out.iter_mut().zip(&image.pixels) {
            *slot = scaled(p);
        }
        return;
    }
    // `p / 255` in f32, widened to f64, for every byte: the division once per value, not per tap.
    let table: [f64; 256] = std::array::from_fn(|p| f64::from(scaled(p as u8)));
    let ys = corner_aligned(image.height, side);
    let xs = corner_aligned(image.width, side);
    let stride = image.width * 3;
    for (row, &(y0, y1, fy)) in ys.iter().enumerate() {
        let top_row = &image.pixels[y0 * stride..(y0 + 1) * stride];
        let bottom_row = &image.pixels[y1 * stride..(y1 + 1) * stride];
        let out_row = &mut out[row * side * 3..(row + 1) * side * 3];
        for (slot, &(x0, x1, fx)) in out_row.chunks_exact_mut(3).zip(&xs) {
            for c in 0..3 {
                let tl = table[usize::from(top_row[x0 * 3 + c])];
                let tr = table[usize::from(top_row[x1 * 3 + c])];
                let bl = table[usize::from(bottom_row[x0 * 3 + c])];
                let br = table[usize::from(bottom_row[x1 * 3 + c])];
                let top = tl + (tr - tl) * fx;
                let bottom = bl + (br - bl) * fx;
                slot[c] = (top + (bottom - top) * fy) as f32;
            }
        }
    }
}

/// Source taps `(i0, i1, fraction)` of each of the `side` outputs along an axis of `n` pixels.
fn corner_aligned(n: usize, side: usize) -> Vec<(usize, usize, f64)> {
    let ratio = if n > 1 && side > 1 {
        (n - 1) as f64 / (side - 1) as f64
    } else {
        0.0
    };
    (0..side)
        .map(|i| {
            let source = ratio * i as f64;
            let i0 = source.floor() as usize;
            let i1 = (source.ceil() as usize).min(n - 1);
            (i0, i1, source - i0 as f64)
        })
        .collect()
}

/// Fixed-point precision of Pillow's 8-bit resampling.
const PRECISION_BITS: u32 = 22;

/// Pillow's triangle-filter taps along one axis: first source index and weights per output.
struct Taps {
    first: Vec<usize>,
    weights: Vec<Vec<i32>>,
}

fn pillow_taps(input: usize, output: usize) -> Taps {
    let scale = input as f64 / output as f64;
    let filter_scale = scale.max(1.0);
    let support = filter_scale; // the bilinear filter's support is 1, stretched when shrinking
    let mut first = Vec::with_capacity(output);
    let mut weights = Vec::with_capacity(output);
    for i in 0..output {
        let center = (i as f64 + 0.5) * scale;
        // C's (int) cast truncates toward zero; these are never negative after the clamp.
        let min = ((center - support + 0.5) as i64).max(0) as usize;
        let max = ((center + support + 0.5) as i64).min(input as i64) as usize;
        let count = max.saturating_sub(min);
        let raw: Vec<f64> = (0..count)
            .map(|k| {
                let t = ((k + min) as f64 - center + 0.5) / filter_scale;
                (1.0 - t.abs()).max(0.0)
            })
            .collect();
        let total: f64 = raw.iter().sum();
        let fixed = raw
            .iter()
            .map(|&w| {
                let normalised = if total != 0.0 { w / total } else { w };
                (0.5 + normalised * f64::from(1u32 << PRECISION_BITS)) as i32
            })
            .collect();
        first.push(min);
        weights.push(fixed);
    }
    Taps { first, weights }
}

fn clamp_round(accumulator: i32) -> u8 {
    (accumulator >> PRECISION_BITS).clamp(0, 255) as u8
}

/// `Image.resize((width, height), BILINEAR)` for an RGB image: horizontal pass, then
/// vertical; a pass is skipped when its dimension does not change. Sums are 32-bit as in
/// Pillow: the weights sum to 2^22 and pixels are at most 255, so they stay below 2^30.
pub fn pillow_bilinear(image: &Rgb8, width: usize, height: usize) -> Rgb8 {
    let horizontal = if image.width == width {
        image.clone()
    } else {
        let taps = pillow_taps(image.width, width);
        let mut out = vec![0u8; width * image.height * 3];
        for (row, out_row) in image
            .pixels
            .chunks_exact(image.width * 3)
            .zip(out.chunks_exact_mut(width * 3))
        {
            for ((&first, weights), slot) in taps
                .first
                .iter()
                .zip(&taps.weights)
                .zip(out_row.chunks_exact_mut(3))
            {
                let mut sums = [1i32 << (PRECISION_BITS - 1); 3];
                let window = &row[first * 3..(first + weights.len()) * 3];
                for (p, &w) in window.chunks_exact(3).zip(weights) {
                    sums[0] += i32::from(p[0]) * w;
                    sums[1] += i32::from(p[1]) * w;
                    sums[2] += i32::from(p[2]) * w;
                }
                for c in 0..3 {
                    slot[c] = clamp_round(sums[c]);
                }
            }
        }
        Rgb8::new(width, image.height, out)
    };
    if horizontal.height == height {
        return horizontal;
    }
    let taps = pillow_taps(horizontal.height, height);
    let stride = width * 3;
    let mut out = vec![0u8; width * height * 3];
    let mut sums = vec![0i32; stride];
    for ((&first, weights), out_row) in taps
        .first
        .iter()
        .zip(&taps.weights)
        .zip(out.chunks_exact_mut(stride))
    {
        sums.fill(1i32 << (PRECISION_BITS - 1));
        for (k, &w) in weights.iter().enumerate() {
            let row = &horizontal.pixels[(first + k) * stride..(first + k + 1) * stride];
            for (sum, &p) in sums.iter_mut().zip(row) {
                *sum += i32::from(p) * w;
            }
        }
        for (slot, &sum) in out_row.iter_mut().zip(&sums) {
            *slot = clamp_round(sum);
        }
    }
    Rgb8::new(width, height, out)
}

/// `image` scaled down (Pillow's bilinear, antialiased) so that its long side is at most
/// `side_max` px, keeping its aspect ratio; a smaller image as it is.
pub fn fit_within(image: &Rgb8, side_max: usize) -> std::borrow::Cow<'_, Rgb8> {
    if image.width.max(image.height) <= side_max {
        return std::borrow::Cow::Borrowed(image);
    }
    std::borrow::Cow::Owned(scaled_to(image, side_max))
}

/// `image` scaled (Pillow's bilinear, antialiased when smaller) so that its long side is
/// `long_side` px, up or down, keeping its aspect ratio.
pub fn scaled_to(image: &Rgb8, long_side: usize) -> Rgb8 {
    let scale = long_side as f64 / image.width.max(image.height) as f64;
    let side = |n: usize| ((n as f64 * scale).round() as usize).clamp(1, long_side);
    pillow_bilinear(image, side(image.width), side(image.height))
}

/// `image` under a box blur of `radius` px (each channel the mean of the
/// `(2 radius + 1)`-px square around it, cut at the edges): how the tests and
/// `examples/qr_stats.rs` make a photo out of focus. Not on any request's path.
pub fn box_blur(image: &Rgb8, radius: usize) -> Rgb8 {
    let (width, height) = (image.width, image.height);
    let mut out = image.pixels.clone();
    for y in 0..height {
        for x in 0..width {
            for c in 0..3 {
                let (mut sum, mut n) = (0u32, 0u32);
                for yy in y.saturating_sub(radius)..(y + radius + 1).min(height) {
                    for xx in x.saturating_sub(radius)..(x + radius + 1).min(width) {
                        sum += u32::from(image.pixels[(yy * width + xx) * 3 + c]);
                        n += 1;
                    }
                }
                out[(y * width + x) * 3 + c] = (sum / n) as u8;
            }
        }
    }
    Rgb8::new(width, height, out)
}

/// A `width` x `height` window of `image` at (`left`, `top`).
pub fn crop(image: &Rgb8, left: usize, top: usize, width: usize, height: usize) -> Rgb8 {
    assert!(
        left + width <= image.width && top + height <= image.height,
        "crop outside the image"
    );
    let mut pixels = Vec::with_capacity(width * height * 3);
    for y in top..top + height {
        let start = (y * image.width + left) * 3;
        pixels.extend_from_slice(&image.pixels[start..start + width * 3]);
    }
    Rgb8::new(width, height, pixels)
}

/// open-NSFW's input: `out` gets 224 x 224 x 3 floats, BGR minus the means.
pub fn opennsfw_input(image: &Rgb8, out: &mut [f32]) -> Result<(), ImageError> {
    assert_eq!(out.len(), INPUT_LEN);
    let resized = pillow_bilinear(image, OPENNSFW_RESIZE, OPENNSFW_RESIZE);
    let cropped = crop(
        &resized,
        OPENNSFW_CROP,
        OPENNSFW_CROP,
        MODEL_SIDE,
        MODEL_SIDE,
    );
    let round_tripped = jpeg::round_trip(&cropped)?;
    for (slot, rgb) in out
        .chunks_exact_mut(3)
        .zip(round_tripped.pixels.chunks_exact(3))
    {
        for c in 0..3 {
            slot[c] = f32::from(rgb[2 - c]) - OPENNSFW_MEAN_BGR[c];
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(width: usize, height: usize) -> Rgb8 {
        let pixels = (0..width * height)
            .flat_map(|i| {
                let (x, y) = (i % width, i / width);
                [
                    (x * 255 / width.max(1)) as u8,
                    (y * 255 / height.max(1)) as u8,
                    ((x + y) % 256) as u8,
                ]
            })
            .collect();
        Rgb8::new(width, height, pixels)
    }

    #[test]
    fn nsfwjs_resize_corners_are_the_source_corners() {
        let image = gradient(451, 300);
        let mut out = vec![0.0; INPUT_LEN];
        nsfwjs_input(&image, &mut out);
        let source =
            |x: usize, y: usize, c: usize| f32::from(image.pixels[(y * 451 + x) * 3 + c]) / 255.0;
        for c in 0..3 {
            assert_eq!(out[c], source(0, 0, c));
            assert_eq!(out[(223 * 224 + 223) * 3 + c], source(450, 299, c));
        }
        assert!(out.iter().all(|v| (0.0..=1.0).contains(v)));
    }

    #[test]
    fn pillow_resize_keeps_flat_colours_and_size() {
        let flat = Rgb8::new(300, 200, [10u8, 200, 77].repeat(300 * 200));
        for (w, h) in [(256, 256), (16, 12), (600, 400)] {
            let resized = pillow_bilinear(&flat, w, h);
            assert_eq!((resized.width, resized.height), (w, h));
            assert!(
                resized.pixels.chunks(3).all(|p| p == [10, 200, 77]),
                "{w}x{h}"
            );
        }
        // Same size: a copy.
        let image = gradient(256, 256);
        assert_eq!(pillow_bilinear(&image, 256, 256), image);
    }

    #[test]
    fn pillow_weights_sum_to_one_in_fixed_point() {
        for (input, output) in [(4000, 256), (451, 256), (16, 256), (256, 255)] {
            let taps = pillow_taps(input, output);
            for weights in &taps.weights {
                let sum: i64 = weights.iter().map(|&w| i64::from(w)).sum();
                assert!(
                    (sum - (1 << PRECISION_BITS)).abs() <= weights.len() as i64,
                    "{input}->{output}: {sum}"
                );
            }
        }
    }

    #[test]
    fn crops() {
        let image = gradient(10, 8);
        let window = crop(&image, 2, 3, 4, 2);
        assert_eq!(
            &window.pixels[..3],
            &image.pixels[(3 * 10 + 2) * 3..(3 * 10 + 2) * 3 + 3]
        );
    }
}
