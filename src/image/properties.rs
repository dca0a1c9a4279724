//! Image properties measured from the pixels, with no model: sharpness, brightness, contrast
//! and colours (the `properties` check; Sightengine's `properties` model).
//!
//! Everything is measured on the image as decoded for the models, resized (Pillow's
//! antialiased bilinear) so that its long side is at most [`WORK_SIDE_MAX`] px; a smaller
//! image is used as it is. Measuring at one scale keeps the figures comparable between a
//! 12 MP photo (decoded at 1/8 scale) and a small PNG.
//!
//! - **brightness**: the mean luma (Rec. 601: 0.299 R + 0.587 G + 0.114 B) over 255.
//! - **contrast**: the spread of luma between its 5th and 95th percentiles, over 255 (0 for a
//!   flat image, near 1 for black text on white).
//! - **sharpness**: the 4-neighbour Laplacian of luma, its variance in each
//!   [`TILE_SIDE`]-px tile, and the 90th percentile `v` of the tiles' variances mapped to
//!   `v / (v + SHARPNESS_HALF)`. A percentile, because a photo whose subject is in focus is
//!   sharp even when most of it is an out-of-focus background. With [`SHARPNESS_HALF`], the
//!   23 committed test photos score 0.86 to 0.99 (median 0.98: Sightengine's "very sharp" is
//!   above 0.9) and 0.19 to 0.69 under a 5-px box blur (median 0.43: its "blurry" is 0.4 to
//!   0.6); `photos::sharpness_follows_focus` below holds them to it.
//! - **colors**: pixels counted in a 8 x 8 x 8 RGB grid; each cell's colour is the mean of its
//!   pixels. `dominant` is the fullest cell; `other` (Sightengine's secondary colours) the
//!   next cells holding at least [`OTHER_SHARE_MIN`] of the pixels, at most [`OTHER_MAX`];
//!   `accent` the saturated, bright cells ([`ACCENT_SATURATION_MIN`], [`ACCENT_VALUE_MIN`])
//!   holding at least [`ACCENT_SHARE_MIN`] that are neither, at most [`ACCENT_MAX`]. A colour
//!   closer than [`DISTINCT_MIN`] (RGB distance) to one already listed is left out.

use serde::Serialize;

use super::raster::Rgb8;
use super::resize::fit_within;

pub const WORK_SIDE_MAX: usize = 512;
pub const TILE_SIDE: usize = 32;
pub const SHARPNESS_HALF: f64 = 60.0;
pub const OTHER_SHARE_MIN: f64 = 0.03;
pub const OTHER_MAX: usize = 5;
pub const ACCENT_SHARE_MIN: f64 = 0.002;
pub const ACCENT_SATURATION_MIN: f64 = 0.5;
pub const ACCENT_VALUE_MIN: f64 = 0.35;
pub const ACCENT_MAX: usize = 3;
pub const DISTINCT_MIN: f64 = 48.0;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Properties {
    pub sharpness: f64,
    pub brightness: f64,
    pub contrast: f64,
    pub colors: Colors,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Colors {
    pub dominant: Color,
    pub accent: Vec<Color>,
    pub other: Vec<Color>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Color {
    pub r: u8,
    pub g: u8,
    pub b: u8,
    /// `#rrggbb`.
    pub hex: String,
}

impl Color {
    fn new(r: u8, g: u8, b: u8) -> Color {
        Color {
            r,
            g,
            b,
            hex: format!("#{r:02x}{g:02x}{b:02x}"),
        }
    }

    fn distance(&self, other: &Color) -> f64 {
        let d = |a: u8, b: u8| f64::from(a) - f64::from(b);
        (d(self.r, other.r).powi(2) + d(self.g, other.g).powi(2) + d(self.b, other.b).powi(2))
            .sqrt()
    }

    /// HSV saturation and value, in [0, 1].
    fn saturation_value(&self) -> (f64, f64) {
        let max = self.r.max(self.g).max(self.b);
        let min = self.r.min(self.g).min(self.b);
        let saturation = if max == 0 {
            0.0
        } else {
            f64::from(max - min) / f64::from(max)
        };
        (saturation, f64::from(max) / 255.0)
    }
}

/// The properties of a decoded image (at least one pixel).
pub fn measure(image: &Rgb8) -> Properties {
    let work = fit_within(image, WORK_SIDE_MAX);
    let work = work.as_ref();
    let luma: Vec<f32> = work
        .pixels
        .chunks_exact(3)
        .map(|p| 0.299 * f32::from(p[0]) + 0.587 * f32::from(p[1]) + 0.114 * f32::from(p[2]))
        .collect();
    Properties {
        sharpness: sharpness(&luma, work.width, work.height),
        brightness: luma.iter().map(|&y| f64::from(y)).sum::<f64>() / luma.len() as f64 / 255.0,
        contrast: contrast(&luma),
        colors: colors(work),
    }
}

fn contrast(luma: &[f32]) -> f64 {
    let mut histogram = [0usize; 256];
    for &y in luma {
        histogram[(y.round() as usize).min(255)] += 1;
    }
    let percentile = |share: f64| {
        let target = (share * luma.len() as f64).ceil().max(1.0) as usize;
        let mut seen = 0;
        histogram
            .iter()
            .position(|&count| {
                seen += count;
                seen >= target
            })
            .unwrap_or(255)
    };
    (percentile(0.95) as f64 - percentile(0.05) as f64) / 255.0
}

fn sharpness(luma: &[f32], width: usize, height: usize) -> f64 {
    if width < 3 || height < 3 {
        return 0.0;
    }
    let at = |x: usize, y: usize| luma[y * width + x];
    let mut variances = Vec::new();
    for tile_y in (1..height - 1).step_by(TILE_SIDE) {
        for tile_x in (1..width - 1).step_by(TILE_SIDE) {
            let (mut sum, mut squares, mut count) = (0f64, 0f64, 0usize);
            for y in tile_y..(tile_y + TILE_SIDE).min(height - 1) {
                for x in tile_x..(tile_x + TILE_SIDE).min(width - 1) {
                    let laplacian =
                        at(x - 1, y) + at(x + 1, y) + at(x, y - 1) + at(x, y + 1) - 4.0 * at(x, y);
                    sum += f64::from(laplacian);
                    squares += f64::from(laplacian) * f64::from(laplacian);
                    count += 1;
                }
            }
            // Tiles cut short by the image's edge count when they hold a fair share.
            if count * 4 >= TILE_SIDE * TILE_SIDE || variances.is_empty() {
                let mean = sum / count as f64;
                variances.push((squares / count as f64 - mean * mean).max(0.0));
            }
        }
    }
    variances.sort_by(f64::total_cmp);
    let p90 = variances[(variances.len() * 9 / 10).min(variances.len() - 1)];
    p90 / (p90 + SHARPNESS_HALF)
}

fn colors(image: &Rgb8) -> Colors {
    // Per cell of the 8 x 8 x 8 grid: pixel count and channel sums.
    let mut cells = vec![[0u64; 4]; 512];
    for p in image.pixels.chunks_exact(3) {
        let cell =
            usize::from(p[0] >> 5) << 6 | usize::from(p[1] >> 5) << 3 | usize::from(p[2] >> 5);
        let slot = &mut cells[cell];
        slot[0] += 1;
        slot[1] += u64::from(p[0]);
        slot[2] += u64::from(p[1]);
        slot[3] += u64::from(p[2]);
    }
    let total = (image.pixels.len() / 3).max(1) as f64;
    let mut filled: Vec<(f64, Color)> = cells
        .iter()
        .filter(|cell| cell[0] > 0)
        .map(|&[count, r, g, b]| {
            let mean = |sum: u64| (sum as f64 / count as f64).round() as u8;
            (count as f64 / total, Color::new(mean(r), mean(g), mean(b)))
        })
        .collect();
    // Fullest first; ties by colour, so that the order never depends on the sort.
    filled.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.hex.cmp(&b.1.hex)));
    let dominant = filled[0].1.clone();
    let mut listed = vec![dominant.clone()];
    let distinct = |color: &Color, listed: &[Color]| {
        listed
            .iter()
            .all(|seen| seen.distance(color) >= DISTINCT_MIN)
    };
    let mut other = Vec::new();
    for (share, color) in &filled[1..] {
        if other.len() == OTHER_MAX || *share < OTHER_SHARE_MIN {
            break;
        }
        if distinct(color, &listed) {
            listed.push(color.clone());
            other.push(color.clone());
        }
    }
    let mut accent = Vec::new();
    for (share, color) in &filled[1..] {
        if accent.len() == ACCENT_MAX || *share < ACCENT_SHARE_MIN {
            break;
        }
        let (saturation, value) = color.saturation_value();
        if saturation >= ACCENT_SATURATION_MIN
            && value >= ACCENT_VALUE_MIN
            && distinct(color, &listed)
        {
            listed.push(color.clone());
            accent.push(color.clone());
        }
    }
    Colors {
        dominant,
        accent,
        other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn image(width: usize, height: usize, mut pixel: impl FnMut(usize, usize) -> [u8; 3]) -> Rgb8 {
        let mut pixels = Vec::with_capacity(width * height * 3);
        for y in 0..height {
            for x in 0..width {
                pixels.extend_from_slice(&pixel(x, y));
            }
        }
        Rgb8::new(width, height, pixels)
    }

    #[test]
    fn flat_images_have_no_contrast_or_sharpness() {
        for (value, brightness) in [(0u8, 0.0), (255, 1.0)] {
            let measured = measure(&image(100, 80, |_, _| [value; 3]));
            assert!(
                (measured.brightness - brightness).abs() < 1e-3,
                "{measured:?}"
            );
            assert_eq!((measured.contrast, measured.sharpness), (0.0, 0.0));
            assert_eq!(measured.colors.dominant, Color::new(value, value, value));
            assert!(measured.colors.accent.is_empty() && measured.colors.other.is_empty());
        }
    }

    #[test]
    fn edges_are_sharp_and_contrasted() {
        let checkers = measure(&image(256, 256, |x, y| {
            if (x / 4 + y / 4) % 2 == 0 {
                [0; 3]
            } else {
                [255; 3]
            }
        }));
        assert!(checkers.sharpness > 0.99, "{checkers:?}");
        assert_eq!(checkers.contrast, 1.0);
        assert!((checkers.brightness - 0.5).abs() < 0.01);
        let gradient = measure(&image(256, 256, |x, _| [x as u8; 3]));
        assert!(gradient.sharpness < 0.05, "{gradient:?}");
    }

    #[test]
    fn colours_are_dominant_other_and_accent() {
        // Mostly grey-blue, a fifth dark brown, a small red patch.
        let measured = measure(&image(200, 100, |x, y| {
            if x < 10 && y < 10 {
                [220, 20, 30]
            } else if x >= 160 {
                [60, 40, 20]
            } else {
                [110, 140, 190]
            }
        }));
        let colors = measured.colors;
        assert_eq!(colors.dominant.hex, "#6e8cbe");
        assert_eq!(colors.other, [Color::new(60, 40, 20)]);
        assert_eq!(colors.accent, [Color::new(220, 20, 30)]);
    }

    #[test]
    fn large_images_are_measured_at_the_working_size() {
        let big = image(2048, 1024, |x, y| [(x % 256) as u8, (y % 256) as u8, 128]);
        let measured = measure(&big);
        assert!((0.0..=1.0).contains(&measured.sharpness));
        assert!((measured.brightness - 0.5).abs() < 0.05, "{measured:?}");
    }

    proptest! {
        #[test]
        fn any_pixels_give_figures_in_range(
            width in 1usize..40, height in 1usize..40, seed in any::<u64>(),
        ) {
            let mut state = seed | 1;
            let measured = measure(&image(width, height, |_, _| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                [state as u8, (state >> 8) as u8, (state >> 16) as u8]
            }));
            for figure in [measured.sharpness, measured.brightness, measured.contrast] {
                prop_assert!((0.0..=1.0).contains(&figure));
            }
            prop_assert!(measured.colors.other.len() <= OTHER_MAX);
            prop_assert!(measured.colors.accent.len() <= ACCENT_MAX);
        }
    }
}

#[cfg(test)]
mod photos {
    /// The committed test photos (`models/image/testimages`, all but the flat synthetic one):
    /// in focus, then under a 5-px box blur.
    #[test]
    fn sharpness_follows_focus() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/models/image/testimages");
        let (mut sharp, mut blurred) = (Vec::new(), Vec::new());
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            let Ok(probe) = crate::image::probe::probe(&bytes) else {
                continue; // the manifest and the licences
            };
            let image = crate::image::decode::decode(&bytes, &probe, 256).unwrap();
            let before = super::measure(&image).sharpness;
            if before == 0.0 {
                continue; // the flat synthetic image
            }
            let after = super::measure(&crate::image::resize::box_blur(&image, 2)).sharpness;
            assert!(
                after < before - 0.2,
                "{}: {before} then {after}",
                path.display()
            );
            sharp.push(before);
            blurred.push(after);
        }
        let median = |values: &mut Vec<f64>| {
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        assert!(sharp.len() >= 20);
        let (sharp, blurred) = (median(&mut sharp), median(&mut blurred));
        assert!(
            sharp > 0.9 && blurred < 0.5,
            "medians {sharp} and {blurred}"
        );
    }
}
