//! What every part of `image` shares: decoded pixels ([`Rgb8`]), the formats, the decoding
//! error, and positions as fractions of a side.

use std::fmt;

/// Decimals of the fractions answers give for positions in an image (QR codes', faces' and
/// text lines' boxes, landmarks): a tenth of a pixel on a 1,000 px side, and no long tail of
/// binary digits (an f32's `0.0421875` printed as `0.04218750074505806`).
pub const FRACTION_DECIMALS: i32 = 4;

/// `value`, a position on a side of `side` pixels, as a fraction of it: cut to [0, 1] and
/// rounded to [`FRACTION_DECIMALS`].
pub fn fraction(value: f64, side: usize) -> f64 {
    let scale = 10f64.powi(FRACTION_DECIMALS);
    ((value / side.max(1) as f64).clamp(0.0, 1.0) * scale).round() / scale
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    Jpeg,
    Png,
    Webp,
    Gif,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Jpeg, Format::Png, Format::Webp, Format::Gif];

    pub fn name(self) -> &'static str {
        match self {
            Format::Jpeg => "JPEG",
            Format::Png => "PNG",
            Format::Webp => "WebP",
            Format::Gif => "GIF",
        }
    }

    /// Lower-case, for metrics labels.
    pub fn label(self) -> &'static str {
        match self {
            Format::Jpeg => "jpeg",
            Format::Png => "png",
            Format::Webp => "webp",
            Format::Gif => "gif",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageError {
    /// Not JPEG, PNG, WebP or GIF (415 `unsupported_media`).
    Unsupported,
    /// A supported signature that does not decode (400 `corrupt_media`).
    Corrupt(String),
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageError::Unsupported => f.write_str("not a JPEG, PNG, WebP or GIF image"),
            ImageError::Corrupt(why) => write!(f, "the image does not decode: {why}"),
        }
    }
}

/// Decoded pixels: 8-bit RGB, row-major, no padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rgb8 {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

impl Rgb8 {
    pub fn new(width: usize, height: usize, pixels: Vec<u8>) -> Rgb8 {
        assert_eq!(
            pixels.len(),
            width * height * 3,
            "RGB buffer of the wrong size"
        );
        Rgb8 {
            width,
            height,
            pixels,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_are_cut_to_the_image_and_keep_four_decimals() {
        assert_eq!(fraction(27.0, 640), 0.0422);
        assert_eq!(fraction(f64::from(0.0421875f32 * 640.0), 640), 0.0422);
        assert_eq!(fraction(-3.0, 640), 0.0);
        assert_eq!(fraction(700.0, 640), 1.0);
        assert_eq!(fraction(5.0, 0), 1.0, "a side of 0 counts as 1 pixel");
    }
}
