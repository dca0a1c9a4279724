//! OpenCV's `resize(..., INTER_AREA)` for 3-channel images, as the MTCNN face detector was
//! run when its reference outputs were made (`models/image/faces.md`, "Resizing";
//! `faces_spec.py` checks the same arithmetic against OpenCV 4.11 on 781 cases).
//!
//! Written here rather than taken from a crate: no maintained Rust crate reproduces OpenCV's
//! area tables, and the detector's scores move with every pixel of its pyramid. Three paths,
//! chosen as OpenCV chooses them: integer factors (block means), general shrinking (area
//! tables with f32 weights) and enlarging (bilinear with "area" coefficients). Pixels are
//! `u8` for the pyramid (shrinking only) and `f64` for the face crops (either way).

/// An image of `width` x `height` x 3 values, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Planar<T> {
    pub width: usize,
    pub height: usize,
    pub values: Vec<T>,
}

/// `cv2.resize(src, (width, height), interpolation=INTER_AREA)` for 8-bit pixels, shrinking
/// only (each output side at most the input's, both at least 1).
pub fn shrink_u8(src: &Planar<u8>, width: usize, height: usize) -> Planar<u8> {
    assert!(width >= 1 && height >= 1 && width <= src.width && height <= src.height);
    if (width, height) == (src.width, src.height) {
        return src.clone();
    }
    let (scale_x, scale_y) = scales(src, width, height);
    if let Some((ix, iy)) = integer_factors(scale_x, scale_y) {
        return block_mean_u8(src, width, height, ix, iy);
    }
    let sums = area_sums(src, width, height, scale_x, scale_y, f32::from);
    Planar {
        width,
        height,
        values: sums
            .into_iter()
            .map(|v: f32| v.round_ties_even().clamp(0.0, 255.0) as u8)
            .collect(),
    }
}

/// `cv2.resize(src, (width, height), interpolation=INTER_AREA)` for `f64` pixels, either way.
pub fn resize_f64(src: &Planar<f64>, width: usize, height: usize) -> Planar<f64> {
    assert!(width >= 1 && height >= 1 && src.width >= 1 && src.height >= 1);
    if (width, height) == (src.width, src.height) {
        return src.clone();
    }
    let (scale_x, scale_y) = scales(src, width, height);
    if scale_x >= 1.0 && scale_y >= 1.0 {
        if let Some((ix, iy)) = integer_factors(scale_x, scale_y) {
            return block_mean_f64(src, width, height, ix, iy);
        }
        let values = area_sums(src, width, height, scale_x, scale_y, |p| p);
        return Planar {
            width,
            height,
            values,
        };
    }
    enlarge_f64(src, width, height)
}

/// Source pixels per output pixel along each axis (OpenCV's `1 / inv_scale`).
fn scales<T>(src: &Planar<T>, width: usize, height: usize) -> (f64, f64) {
    let inv_x = width as f64 / src.width as f64;
    let inv_y = height as f64 / src.height as f64;
    (1.0 / inv_x, 1.0 / inv_y)
}

/// Whole factors on both axes, as OpenCV tests them (its fast block path).
fn integer_factors(scale_x: f64, scale_y: f64) -> Option<(usize, usize)> {
    let (ix, iy) = (scale_x.round(), scale_y.round());
    let whole = (scale_x - ix).abs() < f64::EPSILON && (scale_y - iy).abs() < f64::EPSILON;
    (whole && ix >= 1.0 && iy >= 1.0).then_some((ix as usize, iy as usize))
}

fn block_mean_u8(
    src: &Planar<u8>,
    width: usize,
    height: usize,
    ix: usize,
    iy: usize,
) -> Planar<u8> {
    let scale = 1.0f32 / (ix * iy) as f32;
    let mut values = Vec::with_capacity(width * height * 3);
    for dy in 0..height {
        for dx in 0..width {
            for c in 0..3 {
                let mut total = 0u32;
                for sy in dy * iy..(dy + 1) * iy {
                    for sx in dx * ix..(dx + 1) * ix {
                        total += u32::from(src.values[(sy * src.width + sx) * 3 + c]);
                    }
                }
                values.push(if (ix, iy) == (2, 2) {
                    ((total + 2) >> 2) as u8
                } else {
                    (total as f32 * scale).round_ties_even().clamp(0.0, 255.0) as u8
                });
            }
        }
    }
    Planar {
        width,
        height,
        values,
    }
}

fn block_mean_f64(
    src: &Planar<f64>,
    width: usize,
    height: usize,
    ix: usize,
    iy: usize,
) -> Planar<f64> {
    let scale = f64::from(1.0f32 / (ix * iy) as f32);
    let mut values = Vec::with_capacity(width * height * 3);
    for dy in 0..height {
        for dx in 0..width {
            for c in 0..3 {
                let mut total = 0.0;
                for sy in 0..iy {
                    for sx in 0..ix {
                        total += src.values[((dy * iy + sy) * src.width + dx * ix + sx) * 3 + c];
                    }
                }
                values.push(total * scale);
            }
        }
    }
    Planar {
        width,
        height,
        values,
    }
}

/// OpenCV's `computeResizeAreaTab`: for each output index, the source indices it covers and
/// their f32 weights, in order.
fn area_taps(source: usize, output: usize, scale: f64) -> Vec<Vec<(usize, f32)>> {
    (0..output)
        .map(|d| {
            let f1 = d as f64 * scale;
            let f2 = f1 + scale;
            let cell = scale.min(source as f64 - f1);
            let s2 = (f2.floor() as i64).min(source as i64 - 1);
            let s1 = (f1.ceil() as i64).min(s2);
            let mut taps = Vec::new();
            if s1 as f64 - f1 > 1e-3 {
                taps.push(((s1 - 1) as usize, ((s1 as f64 - f1) / cell) as f32));
            }
            for s in s1..s2 {
                taps.push((s as usize, (1.0 / cell) as f32));
            }
            if f2 - s2 as f64 > 1e-3 {
                let part = (f2 - s2 as f64).min(1.0).min(cell);
                taps.push((s2 as usize, (part / cell) as f32));
            }
            taps
        })
        .collect()
}

/// The general shrinking path: each source row summed across by the column taps, then the
/// rows of each output row summed by the row taps, in table order, in `T` (f32 for 8-bit
/// pixels, f64 for f64).
fn area_sums<P: Copy, T>(
    src: &Planar<P>,
    width: usize,
    height: usize,
    scale_x: f64,
    scale_y: f64,
    widen: impl Fn(P) -> T,
) -> Vec<T>
where
    T: Copy + Default + std::ops::Add<Output = T> + std::ops::Mul<Output = T> + From<f32>,
{
    let columns = area_taps(src.width, width, scale_x);
    let rows = area_taps(src.height, height, scale_y);
    let mut across = vec![T::default(); src.height * width * 3];
    for sy in 0..src.height {
        let row = &src.values[sy * src.width * 3..(sy + 1) * src.width * 3];
        for (dx, taps) in columns.iter().enumerate() {
            for c in 0..3 {
                let mut sum = T::default();
                for &(sx, weight) in taps {
                    sum = sum + widen(row[sx * 3 + c]) * T::from(weight);
                }
                across[(sy * width + dx) * 3 + c] = sum;
            }
        }
    }
    let mut out = vec![T::default(); width * height * 3];
    for (dy, taps) in rows.iter().enumerate() {
        for (i, slot) in out[dy * width * 3..(dy + 1) * width * 3]
            .iter_mut()
            .enumerate()
        {
            let mut sum = T::default();
            for &(sy, weight) in taps {
                sum = sum + T::from(weight) * across[sy * width * 3 + i];
            }
            *slot = sum;
        }
    }
    out
}

/// OpenCV's INTER_AREA where an axis grows: bilinear taps with "area" coefficients (f32
/// weights, f64 arithmetic). Columns past the last source pixel take it whole; rows keep
/// their weights, with the next row clamped to the last.
fn enlarge_f64(src: &Planar<f64>, width: usize, height: usize) -> Planar<f64> {
    let taps = |output: usize, source: usize, clamp: bool| {
        // OpenCV keeps both `inv = output / source` and `scale = 1 / inv`.
        let inv = output as f64 / source as f64;
        let scale = 1.0 / inv;
        (0..output)
            .map(|d| {
                let mut s = (d as f64 * scale).floor() as usize;
                let f = ((d + 1) as f64 - (s + 1) as f64 * inv) as f32;
                let mut f = if f <= 0.0 { 0.0 } else { f - f.floor() };
                if clamp && s + 1 >= source {
                    f = 0.0;
                    s = source - 1;
                }
                (s, 1.0 - f, f)
            })
            .collect::<Vec<(usize, f32, f32)>>()
    };
    let columns = taps(width, src.width, true);
    let rows = taps(height, src.height, false);
    let mut across = vec![0.0f64; src.height * width * 3];
    for sy in 0..src.height {
        let row = &src.values[sy * src.width * 3..(sy + 1) * src.width * 3];
        for (dx, &(sx, a0, a1)) in columns.iter().enumerate() {
            let right = (sx + 1).min(src.width - 1);
            for c in 0..3 {
                across[(sy * width + dx) * 3 + c] = if sx + 1 >= src.width {
                    row[sx * 3 + c]
                } else {
                    row[sx * 3 + c] * f64::from(a0) + row[right * 3 + c] * f64::from(a1)
                };
            }
        }
    }
    let mut values = vec![0.0f64; width * height * 3];
    for (dy, &(sy, b0, b1)) in rows.iter().enumerate() {
        let top = sy.min(src.height - 1);
        let bottom = (sy + 1).min(src.height - 1);
        for i in 0..width * 3 {
            values[dy * width * 3 + i] = across[top * width * 3 + i] * f64::from(b0)
                + across[bottom * width * 3 + i] * f64::from(b1);
        }
    }
    Planar {
        width,
        height,
        values,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn gradient(width: usize, height: usize) -> Planar<u8> {
        let values = (0..width * height * 3)
            .map(|i| (i * 7 % 256) as u8)
            .collect();
        Planar {
            width,
            height,
            values,
        }
    }

    #[test]
    fn halving_averages_two_by_two_blocks_rounding_half_up() {
        let src = Planar {
            width: 2,
            height: 2,
            values: vec![0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1],
        };
        // (0 + 1 + 0 + 1 + 2) >> 2 = 1: OpenCV's 2 x 2 path rounds half up.
        assert_eq!(shrink_u8(&src, 1, 1).values, vec![1, 1, 1]);
    }

    #[test]
    fn a_third_of_a_pixel_is_weighted_by_its_area() {
        // 3 pixels to 2: each output covers 1.5 source pixels.
        let src = Planar {
            width: 3,
            height: 1,
            values: vec![0, 0, 0, 90, 90, 90, 30, 30, 30],
        };
        // out[0] = (0 + 90 / 2) / 1.5 = 30; out[1] = (90 / 2 + 30) / 1.5 = 50.
        assert_eq!(shrink_u8(&src, 2, 1).values, vec![30, 30, 30, 50, 50, 50]);
    }

    #[test]
    fn enlarging_a_crop_interpolates_between_pixels() {
        let src = Planar {
            width: 2,
            height: 1,
            values: vec![0.0, 0.0, 0.0, 100.0, 100.0, 100.0],
        };
        // OpenCV 4.11 gives these (`cv2.resize(a, (n, 1), interpolation=cv2.INTER_AREA)`):
        // whole output pixels inside one source pixel take it; a straddling one blends.
        let reds = |n: usize| -> Vec<f64> {
            resize_f64(&src, n, 1)
                .values
                .chunks(3)
                .map(|p| p[0])
                .collect()
        };
        assert_eq!(reds(3), vec![0.0, 50.0, 100.0]);
        assert_eq!(reds(4), vec![0.0, 0.0, 100.0, 100.0]);
        assert_eq!(reds(5), vec![0.0, 0.0, 50.0, 100.0, 100.0]);
    }

    proptest! {
        #[test]
        fn a_flat_image_stays_flat(
            width in 1usize..40, height in 1usize..40,
            to_w in 1usize..50, to_h in 1usize..50, value in 0u8..=255,
        ) {
            let flat = Planar { width, height, values: vec![value; width * height * 3] };
            if to_w <= width && to_h <= height {
                let out = shrink_u8(&flat, to_w, to_h);
                prop_assert_eq!(out.values.len(), to_w * to_h * 3);
                prop_assert!(out.values.iter().all(|&v| v == value));
            }
            let wide = Planar { width, height, values: vec![f64::from(value); width * height * 3] };
            let out = resize_f64(&wide, to_w, to_h);
            prop_assert_eq!(out.values.len(), to_w * to_h * 3);
            prop_assert!(out.values.iter().all(|&v| (v - f64::from(value)).abs() < 1e-3));
        }

        #[test]
        fn shrinking_stays_within_the_source_range(
            width in 2usize..60, height in 2usize..60, to_w in 1usize..60, to_h in 1usize..60,
        ) {
            let src = gradient(width, height);
            let out = shrink_u8(&src, to_w.min(width), to_h.min(height));
            prop_assert_eq!(out.values.len(), to_w.min(width) * to_h.min(height) * 3);
        }
    }
}
