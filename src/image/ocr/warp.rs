//! A text line's crop: the detector's quadrilateral warped to an upright rectangle as the OCR
//! reference does it (`get_rotate_crop_image`: OpenCV 4.11's `getPerspectiveTransform`, then
//! `warpPerspective` with INTER_CUBIC and BORDER_REPLICATE; `models/image/ocr.md`, "5. Crops";
//! `ocr_spec.py check-parts` checks the same arithmetic on 300 random boxes), turned a quarter
//! counter-clockwise when it stands upright.
//!
//! Written here: OpenCV maps each output pixel to the source in 1/32 px steps and weighs 4 x 4
//! pixels with fixed-point cubic weights (A = -0.75); a float bicubic (`imageproc`'s) uses
//! another kernel and moves the recognition's scores.

use super::boxes::Quad;
use crate::image::raster::Rgb8;

/// Sub-pixel steps per pixel of the source position.
const STEPS: i64 = 32;
/// Fixed-point units of the 4 x 4 weights.
const WEIGHT_ONE: i64 = 1 << 15;

/// OpenCV's `hal::LU`: Gaussian elimination with partial pivoting on |a|; `None` when
/// singular.
fn lu_solve(mut a: [[f64; 8]; 8], mut b: [f64; 8]) -> Option<[f64; 8]> {
    let m = 8;
    for i in 0..m {
        let mut k = i;
        for j in i + 1..m {
            if a[j][i].abs() > a[k][i].abs() {
                k = j;
            }
        }
        if a[k][i].abs() < f64::EPSILON * 10.0 {
            return None;
        }
        if k != i {
            a.swap(i, k);
            b.swap(i, k);
        }
        let d = -1.0 / a[i][i];
        let pivot = a[i];
        for j in i + 1..m {
            let alpha = a[j][i] * d;
            for (value, p) in a[j].iter_mut().zip(pivot).skip(i + 1) {
                *value += alpha * p;
            }
            b[j] += alpha * b[i];
        }
    }
    for i in (0..m).rev() {
        let mut s = b[i];
        for c in i + 1..m {
            s -= a[i][c] * b[c];
        }
        b[i] = s / a[i][i];
    }
    Some(b)
}

/// `cv2.getPerspectiveTransform(from, to)`: the 3 x 3 matrix mapping `from` onto `to`.
fn perspective_transform(from: &Quad, to: &Quad) -> Option<[f64; 9]> {
    let mut a = [[0.0f64; 8]; 8];
    let mut b = [0.0f64; 8];
    for i in 0..4 {
        let ([sx, sy], [dx, dy]) = (from[i], to[i]);
        a[i][0] = f64::from(sx);
        a[i + 4][3] = f64::from(sx);
        a[i][1] = f64::from(sy);
        a[i + 4][4] = f64::from(sy);
        a[i][2] = 1.0;
        a[i + 4][5] = 1.0;
        // Products in f32, as OpenCV makes them from float points.
        a[i][6] = f64::from(-sx * dx);
        a[i][7] = f64::from(-sy * dx);
        a[i + 4][6] = f64::from(-sx * dy);
        a[i + 4][7] = f64::from(-sy * dy);
        b[i] = f64::from(dx);
        b[i + 4] = f64::from(dy);
    }
    let x = lu_solve(a, b)?;
    Some([x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], 1.0])
}

/// `cv::invert` of a 3 x 3 matrix (adjugate over the determinant); zeros when singular.
fn invert(s: [f64; 9]) -> [f64; 9] {
    let at = |r: usize, c: usize| s[r * 3 + c];
    let det = at(0, 0) * (at(1, 1) * at(2, 2) - at(1, 2) * at(2, 1))
        - at(0, 1) * (at(1, 0) * at(2, 2) - at(1, 2) * at(2, 0))
        + at(0, 2) * (at(1, 0) * at(2, 1) - at(1, 1) * at(2, 0));
    if det == 0.0 {
        return [0.0; 9];
    }
    let d = 1.0 / det;
    [
        (at(1, 1) * at(2, 2) - at(1, 2) * at(2, 1)) * d,
        (at(0, 2) * at(2, 1) - at(0, 1) * at(2, 2)) * d,
        (at(0, 1) * at(1, 2) - at(0, 2) * at(1, 1)) * d,
        (at(1, 2) * at(2, 0) - at(1, 0) * at(2, 2)) * d,
        (at(0, 0) * at(2, 2) - at(0, 2) * at(2, 0)) * d,
        (at(0, 2) * at(1, 0) - at(0, 0) * at(1, 2)) * d,
        (at(1, 0) * at(2, 1) - at(1, 1) * at(2, 0)) * d,
        (at(0, 1) * at(2, 0) - at(0, 0) * at(2, 1)) * d,
        (at(0, 0) * at(1, 1) - at(0, 1) * at(1, 0)) * d,
    ]
}

/// OpenCV's `interpolateCubic` (A = -0.75) at fraction `x`, in f32.
fn cubic(x: f32) -> [f32; 4] {
    let a = -0.75f32;
    let c0 = ((a * (x + 1.0) - 5.0 * a) * (x + 1.0) + 8.0 * a) * (x + 1.0) - 4.0 * a;
    let c1 = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    let c2 = ((a + 2.0) * (1.0 - x) - (a + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0;
    [c0, c1, c2, 1.0 - c0 - c1 - c2]
}

/// OpenCV's fixed-point 4 x 4 cubic weights for each of the 32 x 32 fractions, each set
/// summing to exactly [`WEIGHT_ONE`].
fn cubic_table() -> Vec<[i64; 16]> {
    let one_d: Vec<[f32; 4]> = (0..STEPS).map(|i| cubic(i as f32 * (1.0 / 32.0))).collect();
    let mut table = Vec::with_capacity((STEPS * STEPS) as usize);
    for vy in &one_d {
        for vx in &one_d {
            let mut w = [0i64; 16];
            for k1 in 0..4 {
                for k2 in 0..4 {
                    w[k1 * 4 + k2] =
                        ((vy[k1] * vx[k2]) * WEIGHT_ONE as f32).round_ties_even() as i64;
                }
            }
            let diff: i64 = w.iter().sum::<i64>() - WEIGHT_ONE;
            if diff != 0 {
                let (mut smallest, mut largest) = (2 * 4 + 2, 2 * 4 + 2);
                for k1 in 2..4 {
                    for k2 in 2..4 {
                        let at = k1 * 4 + k2;
                        if w[at] < w[smallest] {
                            smallest = at;
                        } else if w[at] > w[largest] {
                            largest = at;
                        }
                    }
                }
                if diff < 0 {
                    w[largest] -= diff;
                } else {
                    w[smallest] -= diff;
                }
            }
            table.push(w);
        }
    }
    table
}

fn weights() -> &'static [[i64; 16]] {
    static TABLE: std::sync::OnceLock<Vec<[i64; 16]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(cubic_table)
}

/// `cv2.warpPerspective(image, matrix, (width, height), INTER_CUBIC, BORDER_REPLICATE)`.
fn warp_cubic(image: &Rgb8, matrix: [f64; 9], width: usize, height: usize) -> Rgb8 {
    let m = invert(matrix);
    let table = weights();
    let (sw, sh) = (image.width as i64, image.height as i64);
    let mut pixels = vec![0u8; width * height * 3];
    // OpenCV walks the output in blocks, and starts each block row from the block's first
    // column: the sums below are made in that order.
    let mut block_h = height.min(16);
    let block_w = (1024 / block_h).min(width);
    block_h = (1024 / block_w).min(height);
    for y in (0..height).step_by(block_h) {
        for x in (0..width).step_by(block_w) {
            let (bw, bh) = (block_w.min(width - x), block_h.min(height - y));
            for row in y..y + bh {
                let (xf, yf) = (x as f64, row as f64);
                let x0 = m[0] * xf + m[1] * yf + m[2];
                let y0 = m[3] * xf + m[4] * yf + m[5];
                let w0 = m[6] * xf + m[7] * yf + m[8];
                for column in 0..bw {
                    let c = column as f64;
                    let w = w0 + m[6] * c;
                    let w = if w != 0.0 { STEPS as f64 / w } else { 0.0 };
                    let fx = ((x0 + m[0] * c) * w).clamp(i32::MIN as f64, i32::MAX as f64);
                    let fy = ((y0 + m[3] * c) * w).clamp(i32::MIN as f64, i32::MAX as f64);
                    let (px, py) = (fx.round_ties_even() as i64, fy.round_ties_even() as i64);
                    let (ix, iy) = (
                        (px >> 5).clamp(-32768, 32767),
                        (py >> 5).clamp(-32768, 32767),
                    );
                    let weights = &table[((py & 31) * 32 + (px & 31)) as usize];
                    let mut sums = [0i64; 3];
                    for k1 in 0..4 {
                        let sy = (iy - 1 + k1 as i64).clamp(0, sh - 1) as usize;
                        for k2 in 0..4 {
                            let sx = (ix - 1 + k2 as i64).clamp(0, sw - 1) as usize;
                            let at = (sy * image.width + sx) * 3;
                            let weight = weights[k1 * 4 + k2];
                            for (sum, &v) in sums.iter_mut().zip(&image.pixels[at..at + 3]) {
                                *sum += i64::from(v) * weight;
                            }
                        }
                    }
                    let out = (row * width + x + column) * 3;
                    for (c, sum) in sums.into_iter().enumerate() {
                        pixels[out + c] = ((sum + (1 << 14)) >> 15).clamp(0, 255) as u8;
                    }
                }
            }
        }
    }
    Rgb8::new(width, height, pixels)
}

/// numpy's `rot90`: a quarter turn counter-clockwise.
fn quarter_turn(image: &Rgb8) -> Rgb8 {
    let (w, h) = (image.width, image.height);
    let mut pixels = Vec::with_capacity(w * h * 3);
    for i in 0..w {
        for j in 0..h {
            let at = (j * w + (w - 1 - i)) * 3;
            pixels.extend_from_slice(&image.pixels[at..at + 3]);
        }
    }
    Rgb8::new(h, w, pixels)
}

/// A half turn (`cv2.rotate(ROTATE_180)`).
pub fn half_turn(image: &Rgb8) -> Rgb8 {
    let pixels = image
        .pixels
        .chunks_exact(3)
        .rev()
        .flatten()
        .copied()
        .collect();
    Rgb8::new(image.width, image.height, pixels)
}

/// The quadrilateral `quad` of `image` as an upright rectangle (`None` when it has no area);
/// turned a quarter counter-clockwise when it is at least 1.5 times as tall as wide.
pub fn crop(image: &Rgb8, quad: &Quad) -> Option<Rgb8> {
    let norm = |a: [f32; 2], b: [f32; 2]| {
        let (dx, dy) = (a[0] - b[0], a[1] - b[1]);
        (dx * dx + dy * dy).sqrt()
    };
    let [tl, tr, br, bl] = *quad;
    let width = norm(tl, tr).max(norm(br, bl)) as usize;
    let height = norm(tl, bl).max(norm(tr, br)) as usize;
    if width == 0 || height == 0 {
        return None;
    }
    let (w, h) = (width as f32, height as f32);
    let matrix = perspective_transform(quad, &[[0.0, 0.0], [w, 0.0], [w, h], [0.0, h]])?;
    let out = warp_cubic(image, matrix, width, height);
    Some(if height as f64 / width as f64 >= 1.5 {
        quarter_turn(&out)
    } else {
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_weights_sum_to_one_and_the_zero_fraction_is_the_pixel_itself() {
        let table = cubic_table();
        assert!(table.iter().all(|w| w.iter().sum::<i64>() == WEIGHT_ONE));
        let mut only_centre = [0i64; 16];
        only_centre[5] = WEIGHT_ONE;
        assert_eq!(table[0], only_centre);
    }

    #[test]
    fn an_axis_aligned_box_is_copied_exactly() {
        let pixels: Vec<u8> = (0..10 * 6 * 3).map(|i| (i * 7 % 256) as u8).collect();
        let image = Rgb8::new(10, 6, pixels);
        let out = crop(&image, &[[2.0, 1.0], [8.0, 1.0], [8.0, 4.0], [2.0, 4.0]]).unwrap();
        assert_eq!((out.width, out.height), (6, 3));
        for y in 0..3 {
            for x in 0..6 {
                let a = &out.pixels[(y * 6 + x) * 3..][..3];
                let b = &image.pixels[((y + 1) * 10 + x + 2) * 3..][..3];
                assert_eq!(a, b, "{x},{y}");
            }
        }
    }

    #[test]
    fn a_tall_crop_is_turned_and_turns_compose() {
        let image = Rgb8::new(2, 3, (0..18).collect());
        let turned = quarter_turn(&image);
        assert_eq!((turned.width, turned.height), (3, 2));
        // numpy: np.rot90(a)[0] is the last column of a, top to bottom.
        assert_eq!(&turned.pixels[..9], &[3, 4, 5, 9, 10, 11, 15, 16, 17]);
        assert_eq!(half_turn(&half_turn(&image)), image);
        let tall = Rgb8::new(4, 12, vec![9; 4 * 12 * 3]);
        let out = crop(&tall, &[[0.0, 0.0], [3.0, 0.0], [3.0, 11.0], [0.0, 11.0]]).unwrap();
        assert_eq!((out.width, out.height), (11, 3));
    }

    proptest! {
        #[test]
        fn any_quad_crops_without_panicking(
            corners in proptest::collection::vec((-20.0f32..60.0, -20.0f32..60.0), 4),
        ) {
            let image = Rgb8::new(16, 9, vec![128; 16 * 9 * 3]);
            let quad = [0, 1, 2, 3].map(|i| [corners[i].0.trunc(), corners[i].1.trunc()]);
            if let Some(out) = crop(&image, &quad) {
                prop_assert!(out.width >= 1 && out.height >= 1);
            }
        }
    }
}
