//! OpenCV's `resize(src, (w, h))` with its default INTER_LINEAR, for 8-bit 3-channel images,
//! as the OCR reference (rapidocr) resizes the whole image, the detector's input and every
//! text line (`models/image/ocr.md`, "resize_linear"; `ocr_spec.py check-parts` checks the
//! same arithmetic against OpenCV 4.11 on 72 size pairs).
//!
//! Written here: the `image` crate's and `fast_image_resize`'s bilinear filters compute other
//! pixels (they use float weights and another edge rule), and the recognition net's scores
//! move with every pixel. OpenCV's path: 11-bit fixed-point weights per axis, the horizontal
//! pass in integers, the vertical pass as `((b * (t >> 4)) >> 16 ... + 2) >> 2`.

use crate::image::raster::Rgb8;

/// Weights are fixed point with this many units per 1.
const WEIGHT_ONE: f32 = 2048.0;

/// Per output index: the two source indices and their weights.
struct Taps {
    first: Vec<usize>,
    second: Vec<usize>,
    weight_first: Vec<i32>,
    weight_second: Vec<i32>,
}

/// The taps of one axis; `edge_rule`: the columns' rule, which puts the whole weight on the
/// first or last source index outside the image (the rows only clamp their indices).
fn taps(source: usize, dest: usize, edge_rule: bool) -> Taps {
    let scale = 1.0 / (dest as f64 / source as f64);
    let last = source as i64 - 1;
    let mut out = Taps {
        first: Vec::with_capacity(dest),
        second: Vec::with_capacity(dest),
        weight_first: Vec::with_capacity(dest),
        weight_second: Vec::with_capacity(dest),
    };
    for d in 0..dest {
        let position = ((d as f64 + 0.5) * scale - 0.5) as f32;
        let mut index = position.floor() as i64;
        let mut fraction = position - index as f32;
        let (first, second) = if edge_rule {
            if index < 0 {
                fraction = 0.0;
                index = 0;
            }
            if index >= last {
                fraction = 0.0;
                index = last;
            }
            (index, (index + 1).min(last))
        } else {
            (index.clamp(0, last), (index + 1).clamp(0, last))
        };
        out.first.push(first as usize);
        out.second.push(second as usize);
        out.weight_first
            .push(((1.0 - fraction) * WEIGHT_ONE).round_ties_even() as i32);
        out.weight_second
            .push((fraction * WEIGHT_ONE).round_ties_even() as i32);
    }
    out
}

/// `cv2.resize(src, (width, height))` (INTER_LINEAR); both sides at least 1.
pub fn resize_linear(src: &Rgb8, width: usize, height: usize) -> Rgb8 {
    assert!(width >= 1 && height >= 1 && src.width >= 1 && src.height >= 1);
    if (width, height) == (src.width, src.height) {
        return src.clone();
    }
    let columns = taps(src.width, width, true);
    let rows = taps(src.height, height, false);
    // The horizontal pass of a source row, kept for the two rows last used (rows are visited
    // in non-decreasing order).
    let horizontal = |row: usize, out: &mut Vec<i32>| {
        out.clear();
        let line = &src.pixels[row * src.width * 3..(row + 1) * src.width * 3];
        for x in 0..width {
            let (a, b) = (columns.first[x] * 3, columns.second[x] * 3);
            let (wa, wb) = (columns.weight_first[x], columns.weight_second[x]);
            for c in 0..3 {
                out.push(i32::from(line[a + c]) * wa + i32::from(line[b + c]) * wb);
            }
        }
    };
    let mut cache: [(usize, Vec<i32>); 2] = [(usize::MAX, Vec::new()), (usize::MAX, Vec::new())];
    let mut pixels = Vec::with_capacity(width * height * 3);
    for y in 0..height {
        for (slot, row) in [rows.first[y], rows.second[y]].into_iter().enumerate() {
            if cache[slot].0 != row {
                let other = 1 - slot;
                if cache[other].0 == row {
                    let copied = cache[other].1.clone();
                    cache[slot] = (row, copied);
                } else {
                    horizontal(row, &mut cache[slot].1);
                    cache[slot].0 = row;
                }
            }
        }
        let (b0, b1) = (rows.weight_first[y], rows.weight_second[y]);
        for (t0, t1) in cache[0].1.iter().zip(&cache[1].1) {
            let v = (((b0 * (t0 >> 4)) >> 16) + ((b1 * (t1 >> 4)) >> 16) + 2) >> 2;
            pixels.push(v.clamp(0, 255) as u8);
        }
    }
    Rgb8::new(width, height, pixels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn same_size_is_a_copy_and_a_flat_image_stays_flat() {
        let image = Rgb8::new(3, 2, (0..18).collect());
        assert_eq!(resize_linear(&image, 3, 2), image);
        let flat = Rgb8::new(5, 4, vec![77; 60]);
        let out = resize_linear(&flat, 13, 3);
        assert!(out.pixels.iter().all(|&v| v == 77));
    }

    #[test]
    fn matches_opencv_on_a_small_case() {
        // cv2.resize(np.array([[[0,0,0],[255,255,255]]], np.uint8), (4, 1)) (OpenCV 4.11)
        let image = Rgb8::new(2, 1, vec![0, 0, 0, 255, 255, 255]);
        let out = resize_linear(&image, 4, 1);
        let firsts: Vec<u8> = out.pixels.chunks(3).map(|p| p[0]).collect();
        assert_eq!(firsts, vec![0, 64, 191, 255]);
        // Halving averages pairs: (10 + 20) / 2 rounds up.
        let image = Rgb8::new(2, 2, vec![10, 10, 10, 20, 20, 20, 10, 10, 10, 20, 20, 20]);
        assert_eq!(resize_linear(&image, 1, 1).pixels, vec![15, 15, 15]);
    }

    proptest! {
        #[test]
        fn any_sizes_give_the_asked_size_within_the_input_range(
            sw in 1usize..20, sh in 1usize..20, dw in 1usize..40, dh in 1usize..40, seed in any::<u8>()
        ) {
            let pixels: Vec<u8> = (0..sw * sh * 3).map(|i| (i as u8).wrapping_mul(seed | 1)).collect();
            let (lo, hi) = (*pixels.iter().min().unwrap(), *pixels.iter().max().unwrap());
            let out = resize_linear(&Rgb8::new(sw, sh, pixels), dw, dh);
            prop_assert_eq!((out.width, out.height, out.pixels.len()), (dw, dh, dw * dh * 3));
            prop_assert!(out.pixels.iter().all(|&v| v >= lo && v <= hi));
        }
    }
}
