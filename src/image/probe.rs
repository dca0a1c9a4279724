//! Format and dimensions of an image from its first bytes, before any pixel is decoded.
//!
//! The format is recognised from the signature, never from a content type or a file name.
//! Dimensions come from the header alone (JPEG SOF, PNG IHDR, GIF logical screen, WebP VP8,
//! VP8L or VP8X), so that an image over the limits is refused without allocating its pixels:
//! a 100-byte PNG that claims 60,000 x 60,000 px costs nothing.
//!
//! Pure functions over byte slices; every branch bounded by the input length.

use super::raster::{Format, ImageError};

/// Format and canvas size, as the header claims them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub format: Format,
    pub width: u32,
    pub height: u32,
}

/// Recognises the format by signature; `Err(Unsupported)` for anything else (BMP, TIFF,
/// text, an empty body).
pub fn sniff(bytes: &[u8]) -> Result<Format, ImageError> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Ok(Format::Jpeg)
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Ok(Format::Png)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Ok(Format::Gif)
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Ok(Format::Webp)
    } else {
        Err(ImageError::Unsupported)
    }
}

/// The format and dimensions of `bytes`. A recognised signature with a header that cannot be
/// read is `Corrupt`.
pub fn probe(bytes: &[u8]) -> Result<Probe, ImageError> {
    let format = sniff(bytes)?;
    let (width, height) = match format {
        Format::Jpeg => jpeg_size(bytes),
        Format::Png => png_size(bytes),
        Format::Gif => gif_size(bytes),
        Format::Webp => webp_size(bytes),
    }
    .ok_or_else(|| {
        ImageError::Corrupt(format!("{} header is truncated or invalid", format.name()))
    })?;
    if width == 0 || height == 0 {
        return Err(ImageError::Corrupt(format!(
            "{} header gives a zero dimension",
            format.name()
        )));
    }
    Ok(Probe {
        format,
        width,
        height,
    })
}

fn be16(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_be_bytes(
        bytes.get(at..at + 2)?.try_into().ok()?,
    )))
}

fn le16(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_le_bytes(
        bytes.get(at..at + 2)?.try_into().ok()?,
    )))
}

fn le24(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at + 3)?;
    Some(u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16)
}

/// Walks the JPEG markers to the first start-of-frame (SOF0..SOF15 but DHT, JPG, DAC).
fn jpeg_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let mut at = 2;
    loop {
        // Markers may be padded with any number of 0xFF.
        while *bytes.get(at)? == 0xFF && *bytes.get(at + 1)? == 0xFF {
            at += 1;
        }
        if *bytes.get(at)? != 0xFF {
            return None;
        }
        let marker = *bytes.get(at + 1)?;
        match marker {
            0xD8 | 0x01 | 0xD0..=0xD7 => {
                at += 2;
                continue;
            }
            0xD9 | 0xDA => return None, // end of image or start of scan before any frame
            _ => {}
        }
        let length = be16(bytes, at + 2)? as usize;
        if length < 2 {
            return None;
        }
        let is_sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if is_sof {
            // length(2) precision(1) height(2) width(2)
            let height = be16(bytes, at + 5)?;
            let width = be16(bytes, at + 7)?;
            return Some((width, height));
        }
        at += 2 + length;
    }
}

/// Whether a JPEG holds all of its image data: an end-of-image marker (FF D9) after the start
/// of the first scan. Entropy-coded data never contains FF D9 (a data byte FF is stuffed as
/// FF 00), so a file cut anywhere in its scans has none there; an EXIF thumbnail's own EOI
/// comes before the first scan and does not count. Bytes after the EOI (trailers some cameras
/// append) are allowed. A cut file would otherwise decode with its missing part filled grey
/// and be scored.
pub fn jpeg_is_complete(bytes: &[u8]) -> bool {
    let Some(scan) = jpeg_first_scan(bytes) else {
        return false;
    };
    // From the end: trailers after the EOI are short, the scan data long.
    bytes[scan..].windows(2).rev().any(|w| w == [0xFF, 0xD9])
}

/// The offset of the first start-of-scan marker, walking the segments by their lengths.
/// Stray bytes between segments are skipped to the next marker, as libjpeg does.
fn jpeg_first_scan(bytes: &[u8]) -> Option<usize> {
    let mut at = 2;
    loop {
        while *bytes.get(at)? != 0xFF {
            at += 1;
        }
        while *bytes.get(at + 1)? == 0xFF {
            at += 1;
        }
        match *bytes.get(at + 1)? {
            0xDA => return Some(at),
            0xD9 => return None,
            0xD8 | 0x01 | 0xD0..=0xD7 => at += 2,
            _ => {
                let length = be16(bytes, at + 2)? as usize;
                if length < 2 {
                    return None;
                }
                at += 2 + length;
            }
        }
    }
}

/// How many scans a JPEG holds: its start-of-scan markers up to the end-of-image marker (or
/// the end of the bytes). Segments are walked by their lengths, and a scan's entropy-coded
/// data is searched for the next marker, passing over stuffed bytes (FF 00), fill bytes
/// (FF FF) and restart markers (FF D0 to FF D7), which are data, not segments. One pass over
/// the bytes, to bound what a decoder is given before it starts ([`super::decode`]).
pub fn jpeg_scan_count(bytes: &[u8]) -> usize {
    let Some(mut at) = jpeg_first_scan(bytes) else {
        return 0;
    };
    let mut scans = 0;
    // `at` is the FF of a marker.
    loop {
        let Some(&marker) = bytes.get(at + 1) else {
            return scans;
        };
        match marker {
            0xD9 => return scans,
            0xD8 | 0x01 | 0xD0..=0xD7 => at += 2,
            _ => {
                let Some(length) = be16(bytes, at + 2) else {
                    return scans;
                };
                if marker == 0xDA {
                    scans += 1;
                }
                at += 2 + length as usize;
            }
        }
        let Some(next) = next_marker(bytes, at) else {
            return scans;
        };
        at = next;
    }
}

/// The offset of the next marker's FF from `from` on: an FF followed by a byte that is not
/// 00 (a stuffed data byte), FF (fill) or D0 to D7 (a restart inside a scan's data).
fn next_marker(bytes: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let at = from + memchr::memchr(0xFF, bytes.get(from..)?)?;
        match *bytes.get(at + 1)? {
            0x00 | 0xFF | 0xD0..=0xD7 => from = at + 1,
            _ => return Some(at),
        }
    }
}

fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    // Signature (8), then the IHDR chunk: length (4) "IHDR" (4) width (4) height (4).
    if bytes.get(12..16)? != b"IHDR" {
        return None;
    }
    let width = u32::from_be_bytes(bytes.get(16..20)?.try_into().ok()?);
    let height = u32::from_be_bytes(bytes.get(20..24)?.try_into().ok()?);
    // PNG dimensions are at most 2^31 - 1.
    (width <= i32::MAX as u32 && height <= i32::MAX as u32).then_some((width, height))
}

fn gif_size(bytes: &[u8]) -> Option<(u32, u32)> {
    // The logical screen: what the decoded first frame is drawn on.
    Some((le16(bytes, 6)?, le16(bytes, 8)?))
}

fn webp_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let chunk = bytes.get(12..16)?;
    match chunk {
        b"VP8 " => {
            // Frame tag (3), start code 9d 01 2a (3), then 14-bit width and height.
            if bytes.get(23..26)? != [0x9d, 0x01, 0x2a] {
                return None;
            }
            Some((le16(bytes, 26)? & 0x3FFF, le16(bytes, 28)? & 0x3FFF))
        }
        b"VP8L" => {
            if *bytes.get(20)? != 0x2F {
                return None;
            }
            let bits = u32::from_le_bytes(bytes.get(21..25)?.try_into().ok()?);
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        b"VP8X" => Some((le24(bytes, 24)? + 1, le24(bytes, 27)? + 1)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut out = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        out.extend_from_slice(&width.to_be_bytes());
        out.extend_from_slice(&height.to_be_bytes());
        out.extend_from_slice(&[8, 2, 0, 0, 0, 0, 0, 0, 0]);
        out
    }

    #[test]
    fn png_claims_are_read_without_pixels() {
        let bomb = png(60_000, 60_000);
        assert!(bomb.len() < 100);
        assert_eq!(
            probe(&bomb).unwrap(),
            Probe {
                format: Format::Png,
                width: 60_000,
                height: 60_000
            }
        );
        assert!(matches!(probe(&bomb[..20]), Err(ImageError::Corrupt(_))));
    }

    #[test]
    fn a_jpeg_is_complete_with_its_end_of_image_marker() {
        // SOI, a segment with a thumbnail's EOI inside, SOS, scan data with a stuffed FF, EOI.
        let whole: &[u8] = &[
            0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x06, 0xFF, 0xD9, 0x00, 0x00, 0xFF, 0xDA, 0x00, 0x02,
            0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD9,
        ];
        assert!(jpeg_is_complete(whole));
        // A trailer after the EOI is fine.
        assert!(jpeg_is_complete(&[whole, b"TRAILER"].concat()));
        // Stray bytes between segments are skipped, as libjpeg does.
        let stray = [&whole[..10], b"\x00\x00junk", &whole[10..]].concat();
        assert!(jpeg_is_complete(&stray));
        // Cut anywhere before the EOI: incomplete, though the thumbnail's EOI is there.
        for cut in 0..whole.len() - 1 {
            assert!(!jpeg_is_complete(&whole[..cut]), "cut at {cut}");
        }
        // No scan at all.
        assert!(!jpeg_is_complete(&[0xFF, 0xD8, 0xFF, 0xD9]));
        assert!(!jpeg_is_complete(b""));
    }

    #[test]
    fn jpeg_scans_are_counted_past_their_data() {
        // SOI, a DHT between scans whose table holds FF DA, three scans whose data holds a
        // stuffed FF 00, fill bytes, a restart marker and an FF DA only as stuffed data.
        let mut jpeg = vec![0xFF, 0xD8];
        let scan = [
            0xFF, 0xDA, 0x00, 0x03, 0x01, 0x12, 0xFF, 0x00, 0xDA, 0xFF, 0xD3, 0x34,
        ];
        jpeg.extend_from_slice(&scan);
        jpeg.extend_from_slice(&[0xFF, 0xC4, 0x00, 0x06, 0xFF, 0xDA, 0xFF, 0xDA]);
        jpeg.extend_from_slice(&scan);
        jpeg.extend_from_slice(&[0xFF, 0xFF]);
        jpeg.extend_from_slice(&scan);
        jpeg.extend_from_slice(&[0xFF, 0xD9]);
        assert_eq!(jpeg_scan_count(&jpeg), 3);
        // Bytes after the end-of-image marker are not scans.
        assert_eq!(jpeg_scan_count(&[jpeg.as_slice(), &scan].concat()), 3);
        // Cut anywhere: the scans whose marker is there.
        assert_eq!(jpeg_scan_count(&jpeg[..13]), 1);
        assert_eq!(jpeg_scan_count(&jpeg[..2]), 0);
        assert_eq!(jpeg_scan_count(b""), 0);
        // A real progressive file: libjpeg's script for colour, 10 scans; a baseline one, 1.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/models/image/testimages");
        let read = |name: &str| std::fs::read(format!("{dir}/{name}")).unwrap();
        assert_eq!(
            jpeg_scan_count(&read("jpeg_progressive_coffee_600x400.jpg")),
            10
        );
        assert_eq!(
            jpeg_scan_count(&read("jpeg_baseline_chelsea_451x300.jpg")),
            1
        );
    }

    #[test]
    fn jpeg_skips_segments_to_the_frame() {
        // SOI, APP0 (length 16), fill bytes, SOF2 (progressive) 480 x 640.
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10];
        jpeg.extend_from_slice(&[0; 14]);
        jpeg.extend_from_slice(&[
            0xFF, 0xFF, 0xC2, 0x00, 0x11, 0x08, 0x01, 0xE0, 0x02, 0x80, 0x03,
        ]);
        assert_eq!(
            probe(&jpeg).unwrap(),
            Probe {
                format: Format::Jpeg,
                width: 640,
                height: 480
            }
        );
        // A DHT (0xC4) is not a frame; a scan before any frame is corrupt.
        let no_frame = [0xFF, 0xD8, 0xFF, 0xC4, 0x00, 0x02, 0xFF, 0xDA, 0x00, 0x02];
        assert!(matches!(probe(&no_frame), Err(ImageError::Corrupt(_))));
    }

    #[test]
    fn gif_and_webp() {
        let gif = b"GIF89a\x40\x01\xf0\x00\x80\x00\x00";
        assert_eq!(
            probe(gif).unwrap(),
            Probe {
                format: Format::Gif,
                width: 320,
                height: 240
            }
        );
        let mut vp8x = b"RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x10\x00\x00\x00".to_vec();
        vp8x.extend_from_slice(&[0x5F, 0xEA, 0x00, 0x5F, 0xEA, 0x00]); // 59,999 + 1 each
        assert_eq!(probe(&vp8x).unwrap().width, 60_000);
        let vp8l = b"RIFF\x00\x00\x00\x00WEBPVP8L\x00\x00\x00\x00\x2f\x3f\x80\x0f\x00";
        let size = probe(vp8l).unwrap();
        assert_eq!((size.width, size.height), (64, 63));
    }

    #[test]
    fn other_formats_are_unsupported() {
        for bytes in [
            &b""[..],
            b"BM\x00\x00",
            b"II*\x00",
            b"hello",
            b"RIFF\x00\x00\x00\x00WAVE",
        ] {
            assert_eq!(probe(bytes), Err(ImageError::Unsupported));
        }
    }

    #[test]
    fn real_files() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/models/image/testimages");
        for (file, width, height) in [
            ("jpeg_baseline_chelsea_451x300.jpg", 451, 300),
            ("jpeg_progressive_coffee_600x400.jpg", 600, 400),
            ("png_palette_coffee_300x200.png", 300, 200),
            ("webp_lossy_rocket_640x427.webp", 640, 427),
            ("webp_lossless_chelsea_240x160.webp", 240, 160),
            ("webp_animated_2frames_coffee_320x240.webp", 320, 240),
            ("gif_animated_2frames_chelsea_200x150.gif", 200, 150),
        ] {
            let bytes = std::fs::read(format!("{dir}/{file}")).unwrap();
            let found = probe(&bytes).unwrap();
            assert_eq!((found.width, found.height), (width, height), "{file}");
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = probe(&bytes);
        }

        #[test]
        fn scan_counts_never_panic_and_never_exceed_the_markers(
            tail in proptest::collection::vec(prop_oneof![Just(0xFFu8), Just(0xDA), Just(0xD9), Just(0x00), any::<u8>()], 0..512),
        ) {
            let bytes = [&[0xFF, 0xD8][..], &tail].concat();
            let sos = bytes.windows(2).filter(|w| w == &[0xFF, 0xDA]).count();
            prop_assert!(jpeg_scan_count(&bytes) <= sos);
        }

        #[test]
        fn random_tails_after_signatures_never_panic(
            signature in prop_oneof![
                Just(b"\xFF\xD8\xFF".to_vec()), Just(b"\x89PNG\r\n\x1a\n".to_vec()),
                Just(b"GIF89a".to_vec()), Just(b"RIFF\0\0\0\0WEBPVP8X".to_vec()),
                Just(b"RIFF\0\0\0\0WEBPVP8 ".to_vec()), Just(b"RIFF\0\0\0\0WEBPVP8L".to_vec()),
            ],
            tail in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let bytes = [signature, tail].concat();
            match probe(&bytes) {
                Ok(found) => prop_assert!(found.width > 0 && found.height > 0),
                Err(error) => prop_assert!(matches!(error, ImageError::Corrupt(_))),
            }
        }
    }
}
