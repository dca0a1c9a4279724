//! The decoders' bounds on memory and work, on images built to attack them
//! (`tests/common/images.rs`): PNGs whose metadata chunks inflate to gigabytes, progressive
//! JPEGs of hundreds of scans. Memory is counted by this binary's allocator, per thread, so
//! the bound holds for one decode whatever else runs.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::images::*;
use modgate::image::decode::{decode, JPEG_SCANS_MAX};
use modgate::image::probe::probe;
use modgate::image::ImageError;
use proptest::prelude::*;

/// The system allocator, counting this thread's live bytes and their peak.
struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn counted(grow: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get().saturating_add_signed(grow);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is passed to the system allocator unchanged; the counting touches only
// this thread's `Cell`s (const-initialised thread-locals, which allocate nothing).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        counted(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        counted(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        counted(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What `run` allocated at most above what was live when it started, bytes.
fn peak_bytes_of<T>(run: impl FnOnce() -> T) -> (T, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|peak| peak.set(start));
    let out = run();
    (out, PEAK.with(Cell::get) - start)
}

fn testimage(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/image/testimages/{name}", common::MODELS)).unwrap()
}

/// The zlib stream of 8 MB of zeros, made once.
fn bomb_stream() -> &'static [u8] {
    static STREAM: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    STREAM.get_or_init(|| zlib_zeros(8 << 20))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any number of metadata bombs anywhere between IHDR and IEND: the pixels are those of
    /// the file without them, and the decode allocates what the pixels need, not what the
    /// chunks inflate to (8 MB each).
    #[test]
    fn png_metadata_bombs_cost_no_memory(
        layout in proptest::collection::vec((0usize..3, 0usize..4), 1..6),
    ) {
        let png = testimage("png_palette_coffee_300x200.png");
        let mut bombed = png.clone();
        for (kind, after) in layout {
            let chunk = png_metadata_chunk([b"iCCP", b"zTXt", b"iTXt"][kind], bomb_stream());
            bombed = png_with_chunks(&bombed, after, &[chunk]);
        }
        let found = probe(&bombed).unwrap();
        let (decoded, peak) = peak_bytes_of(|| decode(&bombed, &found, 1));
        prop_assert_eq!(decoded.unwrap(), decode(&png, &found, 1).unwrap());
        let pixels = found.width as usize * found.height as usize;
        let bound = 2 * 4 * pixels + 2 * bombed.len() + (1 << 20);
        prop_assert!(peak <= bound, "{} bytes at the peak, bound {}", peak, bound);
    }

    /// A progressive JPEG decodes with up to JPEG_SCANS_MAX scans and is refused, before any
    /// decoding, with one more, on both decoders' paths (scaled and whole).
    #[test]
    fn jpeg_scans_over_the_bound_are_refused(scans in 0usize..(JPEG_SCANS_MAX + 40), whole: bool) {
        let jpeg = progressive_grey_jpeg(96, 64, scans);
        let found = probe(&jpeg).unwrap();
        let min_side = if whole { 64 } else { 1 };
        match decode(&jpeg, &found, min_side) {
            Ok(image) => {
                prop_assert!(scans < JPEG_SCANS_MAX, "{} scans decoded", scans + 1);
                prop_assert_eq!(image.width, if whole { 96 } else { 12 });
                prop_assert!(image.pixels.iter().all(|&p| p.abs_diff(128) <= 1));
            }
            Err(ImageError::Corrupt(why)) => {
                prop_assert!(scans >= JPEG_SCANS_MAX, "{} scans refused: {}", scans + 1, why);
                prop_assert!(why.contains("scans"), "{}", why);
            }
            Err(other) => prop_assert!(false, "{other}"),
        }
    }
}

/// A 48 MP progressive JPEG of 40 scans is under 100 KB, and over the scan-pixels bound.
#[test]
fn a_large_jpeg_of_a_few_dozen_scans_is_refused_by_its_scan_pixels() {
    let jpeg = progressive_grey_jpeg(8_000, 6_000, 39);
    assert!(jpeg.len() < 100_000, "{}", jpeg.len());
    let found = probe(&jpeg).unwrap();
    match decode(&jpeg, &found, 256) {
        Err(ImageError::Corrupt(why)) => assert!(why.contains("scan-pixels"), "{why}"),
        other => panic!("{:?}", other.map(|image| image.width)),
    }
}
