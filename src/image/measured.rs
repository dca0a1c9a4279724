//! The measurements of the pixels a check can ask for beside the models, and what they
//! found.

use super::raster::Rgb8;
use super::{faces, hashes, ocr, properties, qr};

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
