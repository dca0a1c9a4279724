//! QR codes in an image, read with `rqrr` (a maintained pure-Rust port of quirc, MIT or
//! Apache-2.0): chosen because it needs no system library and reads a grey buffer we already
//! have, with no image crate in between.
//!
//! Codes are read from the image as decoded for the models (a large JPEG is decoded at a
//! reduced DCT scale that keeps at least 256 px on its short side; PNG, WebP and GIF at full
//! size), scaled down first to at most [`READ_SIDE_MAX`] px on the long side, so the work is
//! bounded whatever the upload. A code must therefore span roughly a quarter of a large
//! JPEG's short side to be read (about 3 px per module at the decoded scale). At most
//! [`CODES_MAX`] codes are read; a payload that is not UTF-8 text is read as Latin-1 by the
//! crate, as QR byte mode allows.

use serde::Serialize;

use super::resize::fit_within;
use super::Rgb8;

/// The long side the reader works at, at most. The reader's cost grows with the square of
/// the finder-like patterns it sees times the image's area (rqrr copies the whole working
/// image for every pair of candidates it tries): a 4,096 px patterned wallpaper took 86 s of
/// CPU at 2,048 px and 0.7 s at 1,024 (`models/image/NEW_CHECKS_STATS.md`'s set). A large
/// JPEG is decoded below this anyway, so only large PNG, WebP and GIF files lose detail.
pub const READ_SIDE_MAX: usize = 1024;
/// Codes read per image, at most.
pub const CODES_MAX: usize = 8;

/// A QR code found and decoded.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QrCode {
    /// What it carries.
    pub payload: String,
    /// Its bounding box, as fractions of the image's width and height (0 to 1).
    pub x1: f64,
    pub y1: f64,
    pub x2: f64,
    pub y2: f64,
}

/// The QR codes of `image` that decode, in the order the reader found them.
pub fn read(image: &Rgb8) -> Vec<QrCode> {
    let work = fit_within(image, READ_SIDE_MAX);
    let work = work.as_ref();
    let (width, height) = (work.width, work.height);
    let mut prepared = rqrr::PreparedImage::prepare_from_greyscale(width, height, |x, y| {
        let p = &work.pixels[(y * width + x) * 3..][..3];
        ((u32::from(p[0]) * 299 + u32::from(p[1]) * 587 + u32::from(p[2]) * 114) / 1000) as u8
    });
    let mut codes = Vec::new();
    for grid in prepared.detect_grids() {
        if codes.len() == CODES_MAX {
            break;
        }
        let Ok((_, payload)) = grid.decode() else {
            continue;
        };
        let xs = grid.bounds.iter().map(|point| point.x);
        let ys = grid.bounds.iter().map(|point| point.y);
        let fraction = |value: i32, side: usize| (f64::from(value) / side as f64).clamp(0.0, 1.0);
        codes.push(QrCode {
            payload,
            x1: fraction(xs.clone().min().unwrap_or(0), width),
            y1: fraction(ys.clone().min().unwrap_or(0), height),
            x2: fraction(xs.max().unwrap_or(0), width),
            y2: fraction(ys.max().unwrap_or(0), height),
        });
    }
    codes
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `payload` as a QR code drawn `module` px per module with a 4-module quiet zone, at
    /// (`left`, `top`) of a white `width` x `height` image.
    pub fn drawn(
        payload: &str,
        module: usize,
        left: usize,
        top: usize,
        width: usize,
        height: usize,
    ) -> Rgb8 {
        let code = qrcode::QrCode::new(payload.as_bytes()).unwrap();
        let side = code.width();
        let colors = code.to_colors();
        let mut pixels = vec![255u8; width * height * 3];
        for (index, color) in colors.iter().enumerate() {
            if *color != qrcode::Color::Dark {
                continue;
            }
            let (mx, my) = (index % side, index / side);
            for y in 0..module {
                for x in 0..module {
                    let (px, py) = (left + (mx + 4) * module + x, top + (my + 4) * module + y);
                    if px < width && py < height {
                        pixels[(py * width + px) * 3..][..3].fill(0);
                    }
                }
            }
        }
        Rgb8::new(width, height, pixels)
    }

    #[test]
    fn a_drawn_code_is_read_with_its_box() {
        let image = drawn("https://spam.example/win", 6, 100, 50, 600, 400);
        let codes = read(&image);
        assert_eq!(codes.len(), 1, "{codes:?}");
        assert_eq!(codes[0].payload, "https://spam.example/win");
        assert!(codes[0].x1 > 0.15 && codes[0].x2 < 0.6, "{codes:?}");
        assert!(codes[0].y1 > 0.1 && codes[0].y2 < 0.8, "{codes:?}");
    }

    #[test]
    fn a_large_image_is_read_at_the_working_size() {
        let image = drawn("call +44 20 7946 0958", 12, 0, 0, 3000, 1000);
        assert_eq!(read(&image)[0].payload, "call +44 20 7946 0958");
    }

    #[test]
    fn images_without_codes_give_none() {
        assert!(read(&Rgb8::new(64, 48, vec![255; 64 * 48 * 3])).is_empty());
        assert!(read(&Rgb8::new(1, 1, vec![0; 3])).is_empty());
    }

    proptest! {
        #[test]
        fn any_pixels_are_read_or_left(width in 1usize..80, height in 1usize..80, seed in any::<u64>()) {
            let mut state = seed | 1;
            let pixels = (0..width * height * 3)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    if state & 1 == 0 { 0 } else { 255 }
                })
                .collect();
            prop_assert!(read(&Rgb8::new(width, height, pixels)).len() <= CODES_MAX);
        }
    }
}
