//! An image's hashes for hash lists: PDQ, Meta's perceptual hash, and the MD5 and SHA-256 of
//! the bytes as sent (for lists that come as exact hashes).
//!
//! **PDQ** comes from the `pdqhash` crate, a maintained port of Meta's reference that is
//! bit-for-bit with it on the same pixels (`tests` below hold it to hashes made by Meta's C++
//! through the `pdqhash` Python bindings, `models/image/pdq_reference.py`). PDQ blurs luma
//! with a window that grows with the image's size before it brings it down to 64 x 64, so the
//! same photo at two sizes hashes some bits apart (a median 16 of 256 at half size, measured
//! in `models/image/PDQ_STATS.md`). Two hashes are made:
//! - [`ImageHashes::pdq`], at one size: the image resized (Pillow's antialiased bilinear) to
//!   [`PDQ_SIDE_MAX`] px on its long side, up or down. Copies at other sizes then stay a few
//!   bits apart (a median 2 at half size). Entries made from uploads hold this one.
//! - [`ImageHashes::pdq_tool`], as Meta's Python tool hashes a file: brought within
//!   [`PDQ_SIDE_MAX`] px but never enlarged. Hash lists from elsewhere are made that way, so a
//!   lookup matches on whichever of the two is nearer. Absent when it is the same image
//!   (a long side of [`PDQ_SIDE_MAX`] px or more).
//!
//! The hash's quality (0 to 100) says how much detail it rests on: PDQ's authors treat hashes
//! under [`PDQ_QUALITY_MIN`] as unreliable (flat or nearly flat images). The crate's quality
//! is at or above the reference's (it does not round each gradient to a whole percent as
//! Meta's C++ does): 100 where the reference says 82 on one low-detail test image.

use md5::Digest;

use super::raster::Rgb8;
use super::resize::scaled_to;

/// The long side PDQ hashes at.
pub const PDQ_SIDE_MAX: usize = 512;
/// Below this quality a PDQ hash is too weak to match on (PDQ's documentation).
pub const PDQ_QUALITY_MIN: u8 = 50;
/// PDQ cannot hash an image smaller than this on a side.
pub const PDQ_SIDE_MIN: usize = 5;

/// A PDQ hash: 256 bits, in the byte order of Meta's hex form (first byte, first two hex
/// digits).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Pdq(pub [u8; 32]);

impl Pdq {
    /// Hamming distance.
    pub fn distance(&self, other: &Pdq) -> u32 {
        self.0
            .iter()
            .zip(other.0.iter())
            .map(|(a, b)| (a ^ b).count_ones())
            .sum()
    }

    /// The 64 hex digits of Meta's tools.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    pub fn from_hex(text: &str) -> Option<Pdq> {
        parse_hex::<32>(text).map(Pdq)
    }
}

/// The hashes of one image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageHashes {
    /// At [`PDQ_SIDE_MAX`] px on the long side, and its quality; `None` for an image too
    /// small to hash (under [`PDQ_SIDE_MIN`] px on a side).
    pub pdq: Option<(Pdq, u8)>,
    /// As Meta's tool hashes it (within [`PDQ_SIDE_MAX`] px, never enlarged), when that is
    /// another image than `pdq`'s.
    pub pdq_tool: Option<Pdq>,
    pub md5: [u8; 16],
    pub sha256: [u8; 32],
}

impl ImageHashes {
    /// The PDQ hashes a lookup tries, if the image has enough detail to match on.
    pub fn pdq_queries(&self) -> impl Iterator<Item = Pdq> + '_ {
        let usable = self
            .pdq
            .filter(|(_, quality)| *quality >= PDQ_QUALITY_MIN)
            .map(|(hash, _)| hash);
        usable.into_iter().chain(usable.and(self.pdq_tool))
    }
}

/// Hashes `bytes` (the file as sent; `sha256` its digest when the caller has it already) and
/// `image` (its decoded pixels).
pub fn hash(bytes: &[u8], sha256: Option<[u8; 32]>, image: &Rgb8) -> ImageHashes {
    let sha256 = sha256.unwrap_or_else(|| crate::hash::sha256(bytes));
    let (pdq, pdq_tool) = match image.width.min(image.height) >= PDQ_SIDE_MIN {
        true => (Some(pdq(image)), pdq_tool(image)),
        false => (None, None),
    };
    ImageHashes {
        pdq,
        pdq_tool,
        md5: md5::Md5::digest(bytes).into(),
        sha256,
    }
}

/// The PDQ hash and quality of `image` brought to [`PDQ_SIDE_MAX`] px on its long side (at
/// least [`PDQ_SIDE_MIN`] px a side).
pub fn pdq(image: &Rgb8) -> (Pdq, u8) {
    if image.width.max(image.height) == PDQ_SIDE_MAX {
        return pdq_full_size(image);
    }
    pdq_full_size(&scaled_to(image, PDQ_SIDE_MAX))
}

/// The PDQ hash of `image` as Meta's Python tool makes it (within [`PDQ_SIDE_MAX`] px, not
/// enlarged), unless that is the image [`pdq`] hashes (a long side of [`PDQ_SIDE_MAX`] px or
/// more: both bring it to [`PDQ_SIDE_MAX`]).
pub fn pdq_tool(image: &Rgb8) -> Option<Pdq> {
    if image.width.max(image.height) >= PDQ_SIDE_MAX {
        return None;
    }
    Some(pdq_full_size(image).0)
}

/// PDQ over every pixel of `image`, as Meta's reference does.
pub fn pdq_full_size(image: &Rgb8) -> (Pdq, u8) {
    let buffer = pdqhash::image::RgbImage::from_raw(
        image.width as u32,
        image.height as u32,
        image.pixels.clone(),
    )
    .expect("an Rgb8 holds width x height x 3 bytes");
    let (bits, quality) =
        pdqhash::generate_pdq_full_size(&pdqhash::image::DynamicImage::ImageRgb8(buffer));
    // The crate's quality is Meta's over 100 (gradient sum / 90, at most 1); Meta's tools
    // print it as a whole percentage, rounded down.
    (Pdq(bits), (quality.clamp(0.0, 1.0) * 100.0) as u8)
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[usize::from(byte >> 4)] as char);
        out.push(DIGITS[usize::from(byte & 15)] as char);
    }
    out
}

/// `N` bytes from exactly `2 N` hex digits (either case).
pub fn parse_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let value = |digit: u8| (digit as char).to_digit(16).map(|v| v as u8);
    let mut out = [0u8; N];
    for (at, pair) in digits.chunks_exact(2).enumerate() {
        out[at] = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::decode::decode;
    use crate::image::probe::probe;

    fn testimage(name: &str) -> (Vec<u8>, Rgb8) {
        let path = format!(
            "{}/models/image/testimages/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).expect("test image");
        let found = probe(&bytes).expect("probes");
        let image = decode(&bytes, &found, usize::MAX).expect("decodes");
        (bytes, image)
    }

    #[test]
    fn hex_round_trips_and_refuses() {
        let bytes: [u8; 4] = [0x00, 0xab, 0x7f, 0xff];
        assert_eq!(hex(&bytes), "00ab7fff");
        assert_eq!(parse_hex::<4>("00AB7fff"), Some(bytes));
        for bad in [
            "00ab7ff",
            "00ab7fff0",
            "00ab7fgf",
            "",
            "+0ab7fff",
            "00ab7ff\u{e9}",
        ] {
            assert_eq!(parse_hex::<4>(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn distance_counts_bits() {
        let a = Pdq([0; 32]);
        let mut b = a;
        b.0[0] = 0b1011;
        b.0[31] = 0x80;
        assert_eq!(a.distance(&b), 4);
        assert_eq!(b.distance(&b), 0);
        assert_eq!(a.distance(&Pdq([0xff; 32])), 256);
    }

    #[test]
    fn exact_hashes_are_of_the_bytes() {
        let image = Rgb8::new(8, 8, vec![0; 192]);
        let hashes = hash(b"abc", None, &image);
        assert_eq!(
            hash(b"abc", Some(crate::hash::sha256(b"abc")), &image),
            hashes
        );
        assert_eq!(hex(&hashes.md5), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            hex(&hashes.sha256),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn too_small_and_flat_images() {
        let thin = hash(b"x", None, &Rgb8::new(4, 100, vec![9; 4 * 100 * 3]));
        assert_eq!((thin.pdq, thin.pdq_tool), (None, None));
        assert_eq!(thin.pdq_queries().count(), 0);
        let flat = hash(b"x", None, &Rgb8::new(64, 64, vec![128; 64 * 64 * 3]));
        let (_, quality) = flat.pdq.unwrap();
        assert!(quality < PDQ_QUALITY_MIN, "a flat image: {quality}");
        assert_eq!(flat.pdq_queries().count(), 0, "too weak to match on");
    }

    /// Hashes made by Meta's C++ (the `pdqhash` Python bindings) over the same pixels as our
    /// decoders give (`models/image/pdq_reference.py` writes `pdq_reference.json`).
    #[test]
    fn pdq_equals_the_reference_implementation() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/models/image/pdq_reference.json"
        );
        let reference: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("reference")).unwrap();
        let rows = reference["images"].as_array().expect("images");
        assert!(rows.len() >= 10);
        let mut exact = 0;
        let mut worst_tool = 0;
        for row in rows {
            let name = row["file"].as_str().unwrap();
            let (_, image) = testimage(name);
            let reference_quality = row["quality"].as_u64().unwrap() as u8;
            if reference_quality < PDQ_QUALITY_MIN {
                continue; // a flat image: its hash means nothing (the synthetic one)
            }
            let (full, quality) = pdq_full_size(&image);
            let expected = Pdq::from_hex(row["pdq"].as_str().unwrap()).unwrap();
            // Bit for bit, but on images smaller than PDQ's 64 x 64 grid, where the crate
            // decimates differently (2 and 8 bits on the 64 x 48 and 16 x 12 files).
            let small = image.width < 64 || image.height < 64;
            let allowed = if small { 10 } else { 0 };
            let distance = full.distance(&expected);
            assert!(distance <= allowed, "{name}: distance {distance}");
            exact += usize::from(distance == 0);
            // The crate sums the gradients in floating point where Meta's C++ rounds each to
            // a whole percent first, so it rates low-detail images higher (100 for one the
            // reference rates 82), never lower.
            assert!(quality >= reference_quality, "{name}: {quality}");
            // As Meta's Python tool hashes the file (within 512 px): PDQ's own standard for an
            // implementation is 10 bits at quality 80 and over.
            let tool = Pdq::from_hex(row["pdq_512"].as_str().unwrap()).unwrap();
            let ours = pdq_tool(&image).unwrap_or_else(|| pdq(&image).0);
            let distance = ours.distance(&tool);
            assert!(distance <= allowed.max(10), "{name}: {distance}");
            worst_tool = worst_tool.max(distance);
            // The one-size hash, what uploads' entries hold: within the match distance (24
            // bits at most, on the 102 x 102 image enlarged five times).
            let (sized, _) = pdq(&image);
            assert!(
                sized.distance(&tool) <= 31,
                "{name}: {}",
                sized.distance(&tool)
            );
        }
        assert!(exact >= 15, "{exact} bit-for-bit");
        assert!(worst_tool <= 10, "{worst_tool}");
    }
}
