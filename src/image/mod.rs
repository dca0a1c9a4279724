//! Images before the models: recognise ([`probe`]), decode ([`decode`]), and shape each
//! model's input tensor ([`resize`], [`jpeg`]).
//!
//! The shard only probes (format and dimensions from the header, microseconds), so that a
//! refusal (415, 413, 400) costs nothing; decoding and resizing run on the shard's model
//! worker with the inference, never on the reactor.
//!
//! Limits ([`crate::bounds`]): [`crate::bounds::IMAGE_BYTES_MAX`] of encoded bytes,
//! [`crate::bounds::IMAGE_SIDE_PX_MAX`] pixels on a side, and the plan's pixel count (50 MP, or
//! 12 MP on the free plan), all checked against the header before any pixel exists.

pub mod area;
pub mod decode;
pub mod faces;
pub mod hashes;
pub mod jpeg;
pub mod ocr;
pub mod probe;
pub mod properties;
pub mod qr;
pub mod resize;
pub mod tensor;

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

/// Measurements of the pixels a check can ask for beside the models, made on the model worker
/// from the decoded image (no model runs them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Measures {
    /// Sharpness, brightness, contrast and colours ([`properties`]).
    pub properties: bool,
    /// The QR codes and what they carry ([`qr`]).
    pub qr: bool,
    /// PDQ, MD5 and SHA-256, for hash lists ([`hashes`]).
    pub hashes: bool,
    /// The faces ([`faces`]): found by networks the worker runs, not by [`Measures::run`].
    pub faces: bool,
    /// The lines of text ([`ocr`]): read by networks the worker runs, not by [`Measures::run`].
    pub ocr: bool,
}

impl Measures {
    pub const NONE: Measures = Measures {
        properties: false,
        qr: false,
        hashes: false,
        faces: false,
        ocr: false,
    };
    pub const PROPERTIES: Measures = Measures {
        properties: true,
        ..Measures::NONE
    };
    pub const QR: Measures = Measures {
        qr: true,
        ..Measures::NONE
    };
    pub const HASHES: Measures = Measures {
        hashes: true,
        ..Measures::NONE
    };
    pub const FACES: Measures = Measures {
        faces: true,
        ..Measures::NONE
    };
    pub const OCR: Measures = Measures {
        ocr: true,
        ..Measures::NONE
    };

    pub fn any(self) -> bool {
        self.properties || self.qr || self.hashes || self.faces || self.ocr
    }

    /// The short side the image must be decoded to at least for these measurements (the face
    /// detector's and the OCR's; the others read whatever the models need).
    pub fn min_side_px(self) -> usize {
        let faces = if self.faces {
            faces::DECODE_SIDE_MIN_PX
        } else {
            0
        };
        let ocr = if self.ocr { ocr::DECODE_SIDE_MIN_PX } else { 0 };
        faces.max(ocr)
    }

    /// Whether every measurement of `other` is in this set.
    pub fn contains(self, other: Measures) -> bool {
        self.union(other) == self
    }

    pub fn union(self, other: Measures) -> Measures {
        Measures {
            properties: self.properties || other.properties,
            qr: self.qr || other.qr,
            hashes: self.hashes || other.hashes,
            faces: self.faces || other.faces,
            ocr: self.ocr || other.ocr,
        }
    }

    /// Runs the measurements asked for on `image`, decoded from `bytes` (all but the faces and
    /// the text).
    /// Makes the measurements of `image`, decoded from `bytes` (whose SHA-256 is `sha256`, when
    /// the caller has it already).
    pub fn run(self, bytes: &[u8], sha256: Option<[u8; 32]>, image: &Rgb8) -> Measured {
        Measured {
            properties: self.properties.then(|| properties::measure(image)),
            qr_codes: self.qr.then(|| qr::read(image)).flatten(),
            hashes: self.hashes.then(|| hashes::hash(bytes, sha256, image)),
            faces: None,
            text_lines: None,
        }
    }
}

/// What the measurements found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    pub properties: Option<properties::Properties>,
    pub qr_codes: Option<Vec<qr::QrCode>>,
    pub hashes: Option<hashes::ImageHashes>,
    pub faces: Option<Vec<faces::FoundFace>>,
    pub text_lines: Option<Vec<ocr::FoundLine>>,
}

impl Measured {
    /// Whether every measurement of `asked` was made. One asked for and absent was not (the QR
    /// reader's guard refused the image, a network failed, a measurement panicked): the checks
    /// that read it report their categories unchecked, never "nothing found".
    pub fn holds(&self, asked: Measures) -> bool {
        let Measures {
            properties,
            qr,
            hashes,
            faces,
            ocr,
        } = asked;
        (!properties || self.properties.is_some())
            && (!qr || self.qr_codes.is_some())
            && (!hashes || self.hashes.is_some())
            && (!faces || self.faces.is_some())
            && (!ocr || self.text_lines.is_some())
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
        let face = faces::Face {
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
}
