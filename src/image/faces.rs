//! Faces found in an image, and the geometry of the MTCNN detector that finds them (the
//! networks run in [`crate::inference::faces`]). Every step follows `models/image/faces.md`,
//! which `faces_spec.py` proves equal to the reference package on 95 images; the arithmetic
//! is kept in the same order and precision (f64 boxes, f32 network inputs).

use serde::Serialize;

use super::area::{resize_f64, Planar};

/// The smallest face looked for, in pixels of the image the detector reads.
pub const MIN_FACE_PX: f64 = 20.0;
/// Each pyramid level is this much smaller than the one before.
pub const SCALE_FACTOR: f64 = 0.709;
/// The largest side of the image the detector reads: larger images are scaled down to it
/// first, which bounds the work (about 40 ms of CPU whatever the size; 1,024 px would find
/// faces down to 2 % of the larger side instead of 3 %, for about 95 ms).
pub const SIDE_MAX_PX: usize = 640;
/// The short side a job that looks for faces decodes to at least: a large JPEG is decoded at a
/// DCT scale that keeps it (a 12 MP photo at 2/8, then fitted to [`SIDE_MAX_PX`]), so that the
/// detector reads it as it would read the same photo sent as PNG, not at the 1/8 scale the
/// nudity models are content with.
pub const DECODE_SIDE_MIN_PX: usize = 480;
/// Candidates kept from the first network, at most (best first): bounds the second
/// network's batch and memory on pathological images.
pub const CANDIDATES_MAX: usize = 2_000;

/// A face as the detector gives it: its box, its confidence and five landmarks, in pixels of
/// the image it read (x right, y down).
#[derive(Clone, Debug, PartialEq)]
pub struct Face {
    /// `[left, top, right, bottom]`.
    pub bounds: [f32; 4],
    pub score: f32,
    /// Left eye, right eye, nose, left and right corner of the mouth ("left" is the image's
    /// left), each `[x, y]`.
    pub landmarks: [[f32; 2]; 5],
}

/// A face as answers show it: box and landmarks in fractions of the image's width and height
/// (the box cut to the image), as the QR codes' boxes are.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FoundFace {
    pub x1: f64,
    pub y1: f64,
    pub x2: f64,
    pub y2: f64,
    pub score: f32,
    pub features: Features,
}

/// The five landmarks ("left" is the image's left).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Features {
    pub left_eye: Point,
    pub right_eye: Point,
    pub nose_tip: Point,
    pub left_mouth_corner: Point,
    pub right_mouth_corner: Point,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

impl Face {
    /// This face in fractions of a `width` x `height` image ([`super::raster::fraction`]).
    pub fn in_fractions(&self, width: usize, height: usize) -> FoundFace {
        let x = |value: f32| super::raster::fraction(f64::from(value), width);
        let y = |value: f32| super::raster::fraction(f64::from(value), height);
        let point = |[px, py]: [f32; 2]| Point { x: x(px), y: y(py) };
        let [x1, y1, x2, y2] = self.bounds;
        let [left_eye, right_eye, nose_tip, left_mouth_corner, right_mouth_corner] =
            self.landmarks.map(point);
        FoundFace {
            x1: x(x1),
            y1: y(y1),
            x2: x(x2),
            y2: y(y2),
            score: self.score,
            features: Features {
                left_eye,
                right_eye,
                nose_tip,
                left_mouth_corner,
                right_mouth_corner,
            },
        }
    }
}

/// A candidate box through the stages: `[x1, y1, x2, y2]`, its score and the network's box
/// regression.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub bounds: [f64; 4],
    pub score: f64,
    pub regression: [f64; 4],
}

/// How NMS measures overlap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// Intersection over union.
    Union,
    /// Intersection over the smaller box.
    Min,
}

/// The pyramid's scales for an image of `height` x `width`: from `12 / MIN_FACE_PX` down by
/// [`SCALE_FACTOR`] while the smaller side stays at least 12 px (the first network's window).
pub fn scales(height: usize, width: usize) -> Vec<f64> {
    let first = 12.0 / MIN_FACE_PX;
    let mut smaller = height.min(width) as f64 * first;
    let mut scales = Vec::new();
    let mut k = 0;
    while smaller >= 12.0 {
        scales.push(first * SCALE_FACTOR.powi(k));
        smaller *= SCALE_FACTOR;
        k += 1;
    }
    scales
}

/// Greedy non-maximum suppression: indices of the candidates kept, best first. Areas count
/// the edge pixels (`+ 1`); of tied scores the later candidate is taken first.
pub fn nms(candidates: &[Candidate], threshold: f64, overlap: Overlap) -> Vec<usize> {
    let area = |c: &Candidate| {
        let [x1, y1, x2, y2] = c.bounds;
        (x2 - x1 + 1.0) * (y2 - y1 + 1.0)
    };
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by(|&a, &b| candidates[a].score.total_cmp(&candidates[b].score));
    let mut picked = Vec::new();
    while let Some(best) = order.pop() {
        picked.push(best);
        let [x1, y1, x2, y2] = candidates[best].bounds;
        let best_area = area(&candidates[best]);
        order.retain(|&other| {
            let [ox1, oy1, ox2, oy2] = candidates[other].bounds;
            let w = (x2.min(ox2) - x1.max(ox1) + 1.0).max(0.0);
            let h = (y2.min(oy2) - y1.max(oy1) + 1.0).max(0.0);
            let inter = w * h;
            let ratio = match overlap {
                Overlap::Min => inter / best_area.min(area(&candidates[other])),
                Overlap::Union => inter / (best_area + area(&candidates[other]) - inter),
            };
            ratio <= threshold
        });
    }
    picked
}

/// The box made square around its centre (side: the larger of width and height, no `+ 1`).
pub fn squared(bounds: [f64; 4]) -> [f64; 4] {
    let [x1, y1, x2, y2] = bounds;
    let (w, h) = (x2 - x1, y2 - y1);
    let side = w.max(h);
    let left = x1 + w * 0.5 - side * 0.5;
    let top = y1 + h * 0.5 - side * 0.5;
    [left, top, left + side, top + side]
}

/// The box moved by a later network's regression, scaled by its `+ 1` width and height.
pub fn regressed(bounds: [f64; 4], regression: [f64; 4]) -> [f64; 4] {
    let [x1, y1, x2, y2] = bounds;
    let (w, h) = (x2 - x1 + 1.0, y2 - y1 + 1.0);
    [
        x1 + regression[0] * w,
        y1 + regression[1] * h,
        x2 + regression[2] * w,
        y2 + regression[3] * h,
    ]
}

/// A network's input from `side` x `side` pixels: `(v - 127.5) / 128` in f64, rounded to f32,
/// laid out column first (`[x][y][c]`: the networks were trained on transposed images),
/// appended to `out`.
pub fn append_input<T: Copy + Into<f64>>(pixels: &Planar<T>, out: &mut Vec<f32>) {
    for x in 0..pixels.width {
        for y in 0..pixels.height {
            let at = (y * pixels.width + x) * 3;
            for c in 0..3 {
                out.push(((pixels.values[at + c].into() - 127.5) * 0.0078125) as f32);
            }
        }
    }
}

/// The crop the later networks read for an integer box: image columns `x1 - 1 ..= x2 - 1` and
/// rows `y1 - 1 ..= y2 - 1`, zero outside the image, resized (area) to `side` x `side`.
/// `None` for a box with no area, or one more than half as large again as the image's larger
/// side (no face is larger than the image; the networks' regressions are not bounded, and
/// such a box would cost memory for nothing).
pub fn crop(image: &Planar<u8>, bounds: [i64; 4], side: usize) -> Option<Planar<f64>> {
    let [x1, y1, x2, y2] = bounds;
    let width = x2.saturating_sub(x1).saturating_add(1);
    let height = y2.saturating_sub(y1).saturating_add(1);
    let largest = (image.width.max(image.height) * 3 / 2 + 2) as i64;
    if width < 1 || height < 1 || width > largest || height > largest {
        return None;
    }
    let (width, height) = (width as usize, height as usize);
    let mut patch = vec![0.0f64; width * height * 3];
    let (iw, ih) = (image.width as i64, image.height as i64);
    for row in 0..height as i64 {
        let sy = y1.saturating_sub(1).saturating_add(row);
        if sy < 0 || sy >= ih {
            continue;
        }
        for column in 0..width as i64 {
            let sx = x1.saturating_sub(1).saturating_add(column);
            if sx < 0 || sx >= iw {
                continue;
            }
            let from = ((sy * iw + sx) * 3) as usize;
            let to = ((row * width as i64 + column) * 3) as usize;
            for c in 0..3 {
                patch[to + c] = f64::from(image.values[from + c]);
            }
        }
    }
    let patch = Planar {
        width,
        height,
        values: patch,
    };
    Some(resize_f64(&patch, side, side))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_face_in_fractions_is_cut_to_the_image_with_four_decimals() {
        let face = Face {
            bounds: [27.0, 29.0, 482.0, 64.0],
            score: 0.5,
            landmarks: [[100.5, 40.25]; 5],
        }
        .in_fractions(640, 300);
        assert_eq!(
            (face.x1, face.y1, face.x2, face.y2),
            (0.0422, 0.0967, 0.7531, 0.2133)
        );
        assert_eq!(
            (face.features.nose_tip.x, face.features.nose_tip.y),
            (0.157, 0.1342)
        );
    }

    fn candidate(bounds: [f64; 4], score: f64) -> Candidate {
        Candidate {
            bounds,
            score,
            regression: [0.0; 4],
        }
    }

    #[test]
    fn the_pyramid_starts_at_the_smallest_face_and_stops_at_the_window() {
        let scales = scales(100, 200);
        assert_eq!(scales[0], 0.6);
        assert!((scales[1] - 0.6 * 0.709).abs() < 1e-12);
        // 100 px * 0.6 = 60 px, shrunk by 0.709 while at least 12: 60, 42.5, 30.2, 21.4, 15.2.
        assert_eq!(scales.len(), 5);
        assert!(super::scales(19, 400).is_empty());
    }

    #[test]
    fn nms_keeps_the_best_of_overlapping_boxes() {
        let boxes = [
            candidate([0.0, 0.0, 9.0, 9.0], 0.8),
            candidate([1.0, 1.0, 10.0, 10.0], 0.9),
            candidate([50.0, 50.0, 59.0, 59.0], 0.7),
        ];
        assert_eq!(nms(&boxes, 0.5, Overlap::Union), vec![1, 2]);
        // A small box inside a large one overlaps it entirely by the smaller area.
        let nested = [
            candidate([0.0, 0.0, 99.0, 99.0], 0.9),
            candidate([10.0, 10.0, 19.0, 19.0], 0.8),
        ];
        assert_eq!(nms(&nested, 0.7, Overlap::Union), vec![0, 1]);
        assert_eq!(nms(&nested, 0.7, Overlap::Min), vec![0]);
        assert!(nms(&[], 0.5, Overlap::Union).is_empty());
    }

    #[test]
    fn boxes_square_around_their_centre_and_move_by_their_size() {
        assert_eq!(squared([10.0, 20.0, 30.0, 30.0]), [10.0, 15.0, 30.0, 35.0]);
        assert_eq!(
            regressed([0.0, 0.0, 9.0, 19.0], [0.1, 0.1, -0.1, 0.0]),
            [1.0, 2.0, 8.0, 19.0]
        );
    }

    #[test]
    fn a_crop_outside_the_image_is_zero_and_an_empty_box_is_none() {
        let image = Planar {
            width: 2,
            height: 2,
            values: vec![255; 12],
        };
        // Box (1, 1)-(2, 2) reads pixels (0, 0)-(1, 1): the whole image.
        let inside = crop(&image, [1, 1, 2, 2], 2).unwrap();
        assert!(inside.values.iter().all(|&v| v == 255.0));
        let outside = crop(&image, [10, 10, 11, 11], 2).unwrap();
        assert!(outside.values.iter().all(|&v| v == 0.0));
        assert!(crop(&image, [5, 5, 4, 9], 24).is_none());
        // A box far larger than the image (a runaway regression) is not cropped.
        assert!(crop(&image, [0, 0, 1_000_000, 1_000_000], 24).is_none());
        assert!(crop(&image, [i64::MIN, 0, i64::MAX, 1], 24).is_none());
        assert!(crop(&image, [i64::MIN, i64::MIN, i64::MIN + 3, i64::MIN + 3], 2).is_some());
    }

    proptest::proptest! {
        #[test]
        fn a_crop_of_any_box_is_bounded_or_refused(
            x1 in proptest::num::i64::ANY, y1 in -50i64..50, w in -5i64..80, h in -5i64..80,
        ) {
            let image = Planar { width: 30, height: 20, values: vec![7; 30 * 20 * 3] };
            let bounds = [x1, y1, x1.saturating_add(w), y1 + h];
            if let Some(patch) = crop(&image, bounds, 24) {
                proptest::prop_assert_eq!((patch.width, patch.height), (24, 24));
            }
        }
    }

    #[test]
    fn the_network_input_is_centred_and_transposed() {
        let pixels = Planar {
            width: 2,
            height: 1,
            values: vec![127.5, 255.0, 0.0, 0.0, 0.0, 0.0],
        };
        let mut out = Vec::new();
        append_input(&pixels, &mut out);
        assert_eq!(out[..3], [0.0, 0.99609375, -0.99609375]);
    }
}
