//! What several benches share.

use modgate::image::decode::decode;
use modgate::image::probe::probe;
use modgate::image::resize::pillow_bilinear;

pub const MODELS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models");

pub fn testimage(name: &str) -> Vec<u8> {
    std::fs::read(format!("{MODELS}/image/testimages/{name}")).unwrap()
}

/// A 4000 x 3000 baseline JPEG, the same bytes every run: a test photo upscaled with the
/// Pillow filter and encoded by libjpeg at quality 90, 4:2:0.
pub fn jpeg_12mp() -> Vec<u8> {
    let source = testimage("jpeg_baseline_astronaut_512x384.jpg");
    let small = decode(&source, &probe(&source).unwrap(), usize::MAX).unwrap();
    let large = pillow_bilinear(&small, 4000, 3000);
    let mut compress = mozjpeg::Compress::new(mozjpeg::ColorSpace::JCS_RGB);
    compress.set_size(large.width, large.height);
    compress.set_fastest_defaults();
    compress.set_quality(90.0);
    compress.set_chroma_sampling_pixel_sizes((2, 2), (2, 2));
    let mut started = compress.start_compress(Vec::new()).unwrap();
    started.write_scanlines(&large.pixels).unwrap();
    started.finish().unwrap()
}
