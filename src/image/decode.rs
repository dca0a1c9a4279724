//! Decoding the first frame of an image to 8-bit RGB.
//!
//! - JPEG: when the image is far larger than the models need, libjpeg-turbo's DCT scaling
//!   ([`super::jpeg::decode_scaled`]) decodes it at 1/8 to 7/8 of its size directly from the
//!   frequency domain, the cheapest path there is (a 12 MP photo never exists at full size).
//!   Otherwise zune-jpeg decodes it whole.
//! - PNG: zune-png, 16-bit samples reduced to 8, after its compressed metadata chunks are
//!   taken out ([`png_without_inflated_metadata`]).
//! - WebP: image-webp (the first frame of an animation).
//! - GIF: the gif crate, the first frame drawn on the logical screen.
//!
//! Colour, as both models' reference pipelines do it: alpha is dropped without compositing
//! (a transparent pixel keeps its stored colour), grey is copied to R, G and B, palette
//! entries give their colour, including the entry of a GIF's transparent index. Pixels of the
//! screen that a GIF's first frame does not cover are black. EXIF orientation is not applied.
//!
//! Memory and time: the header was checked against the pixel limits before this runs, so a
//! decoder allocates at most `width × height × 4` bytes for pixels. What a header does not
//! bound is bounded here before a decoder sees the file:
//! - a PNG's `iCCP`, `zTXt` and `iTXt` chunks are zlib streams that zune-png inflates with a
//!   bound of its own of 1 GiB each (and keeps the text): 1 MB of zeros inflates to 1 GB. No
//!   check reads a colour profile or a PNG's text, so those chunks are dropped unread. The
//!   pixel data (`IDAT`) is inflated only up to the size the header gives.
//! - a progressive JPEG is decoded scan by scan, and every scan walks every block of the
//!   image however few bytes it takes: 1,000 scans of 20 bytes each over 50 MP cost half a
//!   minute. The scans are counted first ([`super::probe::jpeg_scan_count`]) and a file with
//!   more than [`JPEG_SCANS_MAX`], or more scan-pixels than [`JPEG_SCAN_PIXELS_MAX`], is
//!   refused as corrupt, on both decoders' paths.

use std::borrow::Cow;
use std::io::Cursor;

use super::jpeg;
use super::probe::Probe;
use super::raster::{Format, ImageError, Rgb8};
use crate::bounds::IMAGE_SIDE_PX_MAX;

/// Scans of a JPEG that are decoded: more is refused. An ordinary progressive JPEG has 6 to
/// 12 (libjpeg's and mozjpeg's scripts); 100 is also zune-jpeg's own default.
pub const JPEG_SCANS_MAX: usize = 100;

/// Scans times pixels of a JPEG that are decoded: more is refused. Each scan of a progressive
/// JPEG costs about 0.7 ms a megapixel of decoder time whatever its size in bytes, so this
/// holds a decode near a second: 30 scans of a 50 MP photo, the 100 of a 15 MP one.
pub const JPEG_SCAN_PIXELS_MAX: u64 = 1_500_000_000;

/// Decodes `bytes` (already probed), at a reduced scale where the format allows it and the
/// result still has `min_side` pixels or more on each side.
pub fn decode(bytes: &[u8], probe: &Probe, min_side: usize) -> Result<Rgb8, ImageError> {
    let image = match probe.format {
        Format::Jpeg => {
            if !super::probe::jpeg_is_complete(bytes) {
                return Err(ImageError::Corrupt(
                    "the JPEG is truncated: its image data has no end-of-image marker".into(),
                ));
            }
            check_jpeg_scans(super::probe::jpeg_scan_count(bytes), probe)?;
            match jpeg::scale_for(probe.width as usize, probe.height as usize, min_side) {
                8 => decode_jpeg_full(bytes)?,
                eighths => jpeg::decode_scaled(bytes, eighths)?,
            }
        }
        Format::Png => decode_png(&png_without_inflated_metadata(bytes))?,
        Format::Webp => decode_webp(bytes)?,
        Format::Gif => decode_gif(bytes)?,
    };
    if image.width == 0 || image.height == 0 {
        return Err(ImageError::Corrupt("no pixels".into()));
    }
    Ok(image)
}

fn corrupt(error: impl std::fmt::Display) -> ImageError {
    ImageError::Corrupt(error.to_string())
}

/// Refuses a JPEG of `scans` scans over [`JPEG_SCANS_MAX`] or [`JPEG_SCAN_PIXELS_MAX`].
fn check_jpeg_scans(scans: usize, probe: &Probe) -> Result<(), ImageError> {
    let pixels = u64::from(probe.width) * u64::from(probe.height);
    if scans > JPEG_SCANS_MAX {
        return Err(ImageError::Corrupt(format!(
            "the JPEG has {scans} scans; at most {JPEG_SCANS_MAX} are decoded"
        )));
    }
    if scans as u64 * pixels > JPEG_SCAN_PIXELS_MAX {
        return Err(ImageError::Corrupt(format!(
            "the JPEG has {scans} scans of {pixels} pixels; at most {JPEG_SCAN_PIXELS_MAX} \
             scan-pixels are decoded"
        )));
    }
    Ok(())
}

/// PNG chunks that zune-png inflates with no bound of ours: a colour profile and compressed
/// text. No check reads either.
pub const PNG_INFLATED_METADATA: [&[u8; 4]; 3] = [b"iCCP", b"zTXt", b"iTXt"];

/// `bytes` (a PNG) without its [`PNG_INFLATED_METADATA`] chunks, which are dropped unread;
/// borrowed, with no copy, when it has none (most files). The walk follows the chunks'
/// lengths up to `IEND`; from a chunk whose length runs past the end of the file on, the
/// bytes are kept as they are, for the decoder to refuse. Removing whole chunks keeps every
/// other chunk's CRC valid.
pub fn png_without_inflated_metadata(bytes: &[u8]) -> Cow<'_, [u8]> {
    const SIGNATURE_BYTES: usize = 8;
    // Length (4), type (4), data, CRC (4).
    const FRAMING_BYTES: usize = 12;
    let mut dropped: Vec<std::ops::Range<usize>> = Vec::new();
    let mut at = SIGNATURE_BYTES;
    while let Some(head) = bytes.get(at..at + 8) {
        let length = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let Some(end) = at
            .checked_add(FRAMING_BYTES)
            .and_then(|n| n.checked_add(length))
            .filter(|&end| end <= bytes.len())
        else {
            break;
        };
        let kind = &head[4..8];
        if PNG_INFLATED_METADATA.iter().any(|name| kind == &name[..]) {
            dropped.push(at..end);
        }
        if kind == b"IEND" {
            break;
        }
        at = end;
    }
    if dropped.is_empty() {
        return Cow::Borrowed(bytes);
    }
    let mut kept = Vec::with_capacity(bytes.len());
    let mut from = 0;
    for range in dropped {
        kept.extend_from_slice(&bytes[from..range.start]);
        from = range.end;
    }
    kept.extend_from_slice(&bytes[from..]);
    Cow::Owned(kept)
}

fn decode_jpeg_full(bytes: &[u8]) -> Result<Rgb8, ImageError> {
    use zune_jpeg::zune_core::bytestream::ZCursor;
    use zune_jpeg::zune_core::colorspace::ColorSpace;
    use zune_jpeg::zune_core::options::DecoderOptions;
    let options = DecoderOptions::default()
        .jpeg_set_out_colorspace(ColorSpace::RGB)
        .jpeg_set_max_scans(JPEG_SCANS_MAX)
        .set_max_width(IMAGE_SIDE_PX_MAX as usize)
        .set_max_height(IMAGE_SIDE_PX_MAX as usize);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    let pixels = decoder.decode().map_err(corrupt)?;
    let info = decoder.info().ok_or_else(|| corrupt("no JPEG header"))?;
    let (width, height) = (usize::from(info.width), usize::from(info.height));
    match decoder.output_colorspace() {
        Some(ColorSpace::RGB) if pixels.len() == width * height * 3 => {
            Ok(Rgb8::new(width, height, pixels))
        }
        Some(ColorSpace::Luma) if pixels.len() == width * height => {
            Ok(grey_to_rgb(width, height, &pixels, 1))
        }
        other => Err(corrupt(format!("unexpected JPEG output {other:?}"))),
    }
}

fn decode_png(bytes: &[u8]) -> Result<Rgb8, ImageError> {
    use zune_png::zune_core::bytestream::ZCursor;
    use zune_png::zune_core::colorspace::ColorSpace;
    use zune_png::zune_core::options::DecoderOptions;
    let options = DecoderOptions::default()
        .png_set_strip_to_8bit(true)
        .set_max_width(IMAGE_SIDE_PX_MAX as usize)
        .set_max_height(IMAGE_SIDE_PX_MAX as usize);
    let mut decoder = zune_png::PngDecoder::new_with_options(ZCursor::new(bytes), options);
    let pixels = match decoder.decode().map_err(corrupt)? {
        zune_png::zune_core::result::DecodingResult::U8(pixels) => pixels,
        _ => return Err(corrupt("PNG samples are not 8-bit")),
    };
    let (width, height) = decoder
        .dimensions()
        .ok_or_else(|| corrupt("no PNG header"))?;
    let channels = match decoder.colorspace() {
        Some(ColorSpace::RGB) => 3,
        Some(ColorSpace::RGBA) => 4,
        Some(ColorSpace::Luma) => 1,
        Some(ColorSpace::LumaA) => 2,
        other => return Err(corrupt(format!("unexpected PNG colour {other:?}"))),
    };
    if pixels.len() != width * height * channels {
        return Err(corrupt("PNG data does not fill the image"));
    }
    Ok(match channels {
        3 => Rgb8::new(width, height, pixels),
        4 => drop_alpha(width, height, &pixels),
        _ => grey_to_rgb(width, height, &pixels, channels),
    })
}

fn decode_webp(bytes: &[u8]) -> Result<Rgb8, ImageError> {
    let mut decoder = image_webp::WebPDecoder::new(Cursor::new(bytes)).map_err(corrupt)?;
    let (width, height) = decoder.dimensions();
    let (width, height) = (width as usize, height as usize);
    let size = decoder
        .output_buffer_size()
        .ok_or_else(|| corrupt("WebP too large"))?;
    let mut pixels = vec![0u8; size];
    decoder.read_image(&mut pixels).map_err(corrupt)?;
    match size {
        n if n == width * height * 3 => Ok(Rgb8::new(width, height, pixels)),
        n if n == width * height * 4 => Ok(drop_alpha(width, height, &pixels)),
        _ => Err(corrupt("unexpected WebP buffer size")),
    }
}

fn decode_gif(bytes: &[u8]) -> Result<Rgb8, ImageError> {
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::Indexed);
    let mut decoder = options.read_info(Cursor::new(bytes)).map_err(corrupt)?;
    let (width, height) = (usize::from(decoder.width()), usize::from(decoder.height()));
    let global = decoder.global_palette().map(<[u8]>::to_vec);
    // The frame's own size comes first, before its pixels. A first frame larger than its
    // logical screen is common (encoders get the screen wrong) and is clipped to the screen,
    // as browsers do; but the limits were checked on the screen, so the frame is bounded here
    // by the largest image any plan accepts before its indices are allocated.
    let frame = decoder
        .next_frame_info()
        .map_err(corrupt)?
        .ok_or_else(|| corrupt("a GIF without a frame"))?;
    let (left, top) = (usize::from(frame.left), usize::from(frame.top));
    let (frame_width, frame_height) = (usize::from(frame.width), usize::from(frame.height));
    let frame_pixels = frame_width as u64 * frame_height as u64;
    if frame_pixels > crate::bounds::IMAGE_PIXELS_MAX {
        return Err(ImageError::Corrupt(format!(
            "a GIF frame of {frame_width}x{frame_height} is over {} pixels",
            crate::bounds::IMAGE_PIXELS_MAX
        )));
    }
    let local = frame.palette.clone();
    let palette = local
        .as_deref()
        .or(global.as_deref())
        .ok_or_else(|| corrupt("a GIF frame without a palette"))?
        .to_vec();
    let mut indices = vec![0u8; decoder.buffer_size()];
    decoder.read_into_buffer(&mut indices).map_err(corrupt)?;
    let mut pixels = vec![0u8; width * height * 3];
    for (row, line) in indices.chunks(frame_width.max(1)).enumerate() {
        let y = top + row;
        if y >= height {
            break;
        }
        for (column, &index) in line.iter().enumerate() {
            let x = left + column;
            if x >= width {
                break;
            }
            let entry = usize::from(index) * 3;
            if let Some(rgb) = palette.get(entry..entry + 3) {
                let at = (y * width + x) * 3;
                pixels[at..at + 3].copy_from_slice(rgb);
            }
        }
    }
    Ok(Rgb8::new(width, height, pixels))
}

fn drop_alpha(width: usize, height: usize, rgba: &[u8]) -> Rgb8 {
    let mut pixels = Vec::with_capacity(width * height * 3);
    for pixel in rgba.chunks_exact(4) {
        pixels.extend_from_slice(&pixel[..3]);
    }
    Rgb8::new(width, height, pixels)
}

fn grey_to_rgb(width: usize, height: usize, grey: &[u8], channels: usize) -> Rgb8 {
    let mut pixels = Vec::with_capacity(width * height * 3);
    for pixel in grey.chunks_exact(channels) {
        pixels.extend_from_slice(&[pixel[0]; 3]);
    }
    Rgb8::new(width, height, pixels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::probe::probe;
    use proptest::prelude::*;

    fn testimage(name: &str) -> Vec<u8> {
        std::fs::read(format!(
            "{}/models/image/testimages/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn every_test_image_decodes_at_its_size() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/models/image/testimages");
        let mut count = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            if !["jpg", "png", "webp", "gif"]
                .iter()
                .any(|ext| name.ends_with(ext))
            {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let found = probe(&bytes).unwrap();
            let image = decode(&bytes, &found, 1).unwrap_or_else(|e| panic!("{name}: {e}"));
            if found.format != Format::Jpeg || found.width < 16 {
                assert_eq!(
                    (image.width, image.height),
                    (found.width as usize, found.height as usize),
                    "{name}"
                );
            }
            count += 1;
        }
        assert!(count >= 20);
    }

    #[test]
    fn large_jpegs_decode_scaled_and_small_ones_whole() {
        let bytes = testimage("jpeg_baseline_retina_1152x864_1mp.jpg");
        let found = probe(&bytes).unwrap();
        let scaled = decode(&bytes, &found, 256).unwrap();
        // 3/8 is the smallest scale keeping 256 px on the short side.
        assert_eq!((scaled.width, scaled.height), (432, 324));
        let whole = decode(&bytes, &found, 2000).unwrap();
        assert_eq!((whole.width, whole.height), (1152, 864));
    }

    #[test]
    fn truncated_files_are_corrupt_not_panics() {
        for name in [
            "jpeg_baseline_chelsea_451x300.jpg",
            "jpeg_progressive_coffee_600x400.jpg",
            "jpeg_baseline_retina_1152x864_1mp.jpg",
            "png_rgb_hubble_320x240.png",
            "webp_lossy_rocket_640x427.webp",
            "gif_animated_2frames_chelsea_200x150.gif",
        ] {
            let bytes = testimage(name);
            let found = probe(&bytes).unwrap();
            for cut in [bytes.len() / 2, 64] {
                // At full size and at a reduced scale alike.
                for min_side in [1, 64] {
                    let result = decode(&bytes[..cut], &found, min_side);
                    assert!(result.is_err(), "{name} cut at {cut}");
                }
            }
        }
    }

    #[test]
    fn a_gif_frame_larger_than_its_screen_is_clipped_or_refused() {
        // A 10x10 screen whose first frame is 20x20: decoded, clipped to the screen.
        let mut bytes = Vec::new();
        {
            let mut encoder = gif::Encoder::new(&mut bytes, 10, 10, &[0, 0, 0, 255, 0, 0]).unwrap();
            let frame = gif::Frame {
                width: 20,
                height: 20,
                buffer: std::borrow::Cow::Owned(vec![1; 400]),
                ..gif::Frame::default()
            };
            encoder.write_frame(&frame).unwrap();
        }
        let found = probe(&bytes).unwrap();
        let image = decode(&bytes, &found, 1).unwrap();
        assert_eq!((image.width, image.height), (10, 10));
        assert!(image.pixels.chunks(3).all(|rgb| rgb == [255, 0, 0]));

        // A frame claiming 16000x4000 (64 MP) is refused before its indices are allocated.
        let mut gif = b"GIF89a".to_vec();
        gif.extend_from_slice(&10u16.to_le_bytes());
        gif.extend_from_slice(&10u16.to_le_bytes());
        gif.extend_from_slice(&[0x80, 0, 0, 0, 0, 0, 255, 255, 255]);
        gif.push(0x2C);
        for value in [0u16, 0, 16_000, 4_000] {
            gif.extend_from_slice(&value.to_le_bytes());
        }
        gif.extend_from_slice(&[0, 2, 2, 0x4C, 0x01, 0, 0x3B]);
        let found = probe(&gif).unwrap();
        match decode(&gif, &found, 1) {
            Err(ImageError::Corrupt(why)) => assert!(why.contains("pixels"), "{why}"),
            other => panic!("{:?}", other.map(|image| (image.width, image.height))),
        }
    }

    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    /// A chunk of `kind` around `data`, its CRC left zero (the walk reads no CRC).
    fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut chunk = (data.len() as u32).to_be_bytes().to_vec();
        chunk.extend_from_slice(kind);
        chunk.extend_from_slice(data);
        chunk.extend_from_slice(&[0; 4]);
        chunk
    }

    #[test]
    fn png_metadata_chunks_are_dropped_unread_and_the_rest_kept() {
        let signature = b"\x89PNG\r\n\x1a\n".to_vec();
        let ihdr = chunk(b"IHDR", &[0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0]);
        let (idat, iend) = (chunk(b"IDAT", b"\x78\x01"), chunk(b"IEND", b""));
        let text = chunk(b"tEXt", b"Title\0coffee");
        let [iccp, ztxt, itxt] = [b"iCCP", b"zTXt", b"iTXt"].map(|kind| chunk(kind, b"x\0\0\x78"));
        let plain = cat(&[&signature, &ihdr, &text, &idat, &iend]);
        // Nothing to drop: borrowed as it is.
        assert!(matches!(
            png_without_inflated_metadata(&plain),
            Cow::Borrowed(_)
        ));
        let full = cat(&[&signature, &ihdr, &iccp, &text, &ztxt, &idat, &itxt, &iend]);
        assert_eq!(&png_without_inflated_metadata(&full)[..], &plain[..]);
        // Bytes after IEND are not chunks: kept, whatever they look like.
        let trailer = [&full[..], &ztxt].concat();
        assert_eq!(
            &png_without_inflated_metadata(&trailer)[..],
            &[&plain[..], &ztxt].concat()[..]
        );
        // A chunk whose length runs past the end stops the walk: what follows stays as it is.
        let cut = &full[..full.len() - iend.len() - 3];
        let expected = [&signature, &ihdr, &text, &idat, &itxt[..itxt.len() - 3]].concat();
        assert_eq!(&png_without_inflated_metadata(cut)[..], &expected[..]);
        let mut lying = cat(&[&signature, &ihdr]);
        lying.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF]);
        lying.extend_from_slice(b"zTXt");
        assert_eq!(&png_without_inflated_metadata(&lying)[..], &lying[..]);
        // The signature alone, or less.
        assert_eq!(
            &png_without_inflated_metadata(&signature)[..],
            &signature[..]
        );
        assert_eq!(&png_without_inflated_metadata(b"\x89P")[..], b"\x89P");
    }

    #[test]
    fn jpeg_scans_are_bounded_by_count_and_by_scan_pixels() {
        let probe = |width, height| Probe {
            format: Format::Jpeg,
            width,
            height,
        };
        assert!(check_jpeg_scans(10, &probe(8_000, 6_000)).is_ok());
        assert!(check_jpeg_scans(JPEG_SCANS_MAX, &probe(64, 64)).is_ok());
        assert!(check_jpeg_scans(JPEG_SCANS_MAX + 1, &probe(64, 64)).is_err());
        // 31 scans of 48 MP, 100 of 15 MP: 1.49 and 1.5 billion scan-pixels.
        assert!(check_jpeg_scans(31, &probe(8_000, 6_000)).is_ok());
        assert!(check_jpeg_scans(32, &probe(8_000, 6_000)).is_err());
        assert!(check_jpeg_scans(100, &probe(5_000, 3_000)).is_ok());
        assert!(check_jpeg_scans(100, &probe(5_000, 3_001)).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn damaged_images_never_panic(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16), which in 0usize..4) {
            let name = ["jpeg_baseline_chelsea_64x48.jpg", "png_rgb_coffee_16x12.png", "webp_lossless_rgba_chelsea_150x100.webp", "gif_transparent_coffee_120x90.gif"][which];
            let mut bytes = testimage(name);
            for (index, value) in flips {
                let at = index.index(bytes.len());
                bytes[at] = value;
            }
            if let Ok(found) = probe(&bytes) {
                if found.width as u64 * found.height as u64 <= 4_000_000 {
                    let _ = decode(&bytes, &found, 1);
                }
            }
        }
    }
}
