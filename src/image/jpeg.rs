//! libjpeg-turbo's code paths, through the `mozjpeg` crate (built from source, no system
//! library): DCT-scaled decoding of large JPEGs, and the JPEG round trip of open-NSFW's
//! reference preprocessing.
//!
//! The crate's `nasm_simd` assembles libjpeg-turbo's SIMD code (AVX2 and SSE2, chosen at run
//! time), whose islow DCTs, colour conversion and upsampling give the same bytes as its C code:
//! every score of the 95 reference and safe images came out identical to the last digit
//! (`modgate eval --images ... --decisions`, both builds). Measured with criterion
//! (`cargo bench --bench image`, 2026-11-26): the round trip 1.99 → 1.18 ms, a 12 MP photo's
//! DCT-scaled decode 10.9 → 9.6 ms, a 1 MP one's 1.84 → 1.73 ms. Without nasm the build falls
//! back to the C code.
//!
//! - [`decode_scaled`]: libjpeg decodes at M/8 of the size straight from the DCT
//!   coefficients (`scale_num = M`, `scale_denom = 8`), with its default islow IDCT and fancy
//!   upsampling. For a 12 MP photo at 1/8 this is a fraction of a full decode.
//! - [`round_trip`]: encodes at quality 75 with 4:2:0 chroma, standard (Annex K) tables,
//!   baseline, islow FDCT and no Huffman optimisation (`set_fastest_defaults`: mozjpeg's own
//!   trellis and tables off), then decodes with the defaults: what Pillow does with
//!   libjpeg-turbo, which the open-NSFW model was calibrated with.
//!
//! libjpeg reports errors by unwinding out of its error handler; every call is wrapped in
//! `catch_unwind` so that a corrupt file is an error for its request, not a dead worker.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::raster::{ImageError, Rgb8};

/// The smallest scale, in eighths, that keeps `min_side` pixels on both sides (8: no scaling).
pub fn scale_for(width: usize, height: usize, min_side: usize) -> u8 {
    (1..=8u8)
        .find(|&eighths| {
            let scaled = |n: usize| (n * usize::from(eighths)).div_ceil(8);
            scaled(width) >= min_side && scaled(height) >= min_side
        })
        .unwrap_or(8)
}

fn unwound(what: &str) -> ImageError {
    ImageError::Corrupt(format!("libjpeg could not {what} it"))
}

/// Decodes `bytes` at `eighths`/8 of its size.
pub fn decode_scaled(bytes: &[u8], eighths: u8) -> Result<Rgb8, ImageError> {
    let decoded = catch_unwind(AssertUnwindSafe(|| -> std::io::Result<Rgb8> {
        let mut decompress = mozjpeg::Decompress::new_mem(bytes)?;
        decompress.scale(eighths);
        let mut started = decompress.rgb()?;
        let (width, height) = (started.width(), started.height());
        let pixels: Vec<u8> = started.read_scanlines()?;
        started.finish()?;
        if pixels.len() != width * height * 3 {
            return Err(std::io::Error::other("short scanlines"));
        }
        Ok(Rgb8::new(width, height, pixels))
    }));
    match decoded {
        Ok(Ok(image)) => Ok(image),
        Ok(Err(error)) => Err(ImageError::Corrupt(error.to_string())),
        Err(_) => Err(unwound("decode")),
    }
}

/// JPEG-encodes `image` at quality 75, 4:2:0, and decodes it again (see the module).
pub fn round_trip(image: &Rgb8) -> Result<Rgb8, ImageError> {
    let encoded = catch_unwind(AssertUnwindSafe(|| -> std::io::Result<Vec<u8>> {
        let mut compress = mozjpeg::Compress::new(mozjpeg::ColorSpace::JCS_RGB);
        compress.set_size(image.width, image.height);
        compress.set_fastest_defaults();
        compress.set_quality(75.0);
        compress.set_chroma_sampling_pixel_sizes((2, 2), (2, 2));
        let mut started = compress.start_compress(Vec::new())?;
        started.write_scanlines(&image.pixels)?;
        started.finish()
    }));
    let encoded = match encoded {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(error)) => return Err(ImageError::Corrupt(error.to_string())),
        Err(_) => return Err(unwound("encode")),
    };
    decode_scaled(&encoded, 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales() {
        assert_eq!(scale_for(4000, 3000, 256), 1); // 500 x 375
        assert_eq!(scale_for(1152, 864, 256), 3); // 432 x 324
        assert_eq!(scale_for(300, 200, 256), 8);
        assert_eq!(scale_for(2048, 2048, 256), 1);
        assert_eq!(scale_for(2047, 2047, 256), 1); // ceil(2047 / 8) = 256
        assert_eq!(scale_for(2040, 2040, 256), 2);
    }

    #[test]
    fn garbage_is_an_error_not_a_crash() {
        assert!(decode_scaled(b"\xFF\xD8\xFF\xE0 not a jpeg at all", 1).is_err());
        assert!(decode_scaled(b"", 8).is_err());
    }

    #[test]
    fn round_trip_keeps_size_and_roughly_the_colours() {
        let pixels: Vec<u8> = (0..64 * 48)
            .flat_map(|i| [((i % 64) * 4) as u8, ((i / 64) * 5) as u8, 128])
            .collect();
        let image = Rgb8::new(64, 48, pixels);
        let back = round_trip(&image).unwrap();
        assert_eq!((back.width, back.height), (64, 48));
        let mean_error: f64 = image
            .pixels
            .iter()
            .zip(&back.pixels)
            .map(|(&a, &b)| f64::from(a.abs_diff(b)))
            .sum::<f64>()
            / image.pixels.len() as f64;
        assert!(mean_error < 3.0, "{mean_error}");
    }
}
