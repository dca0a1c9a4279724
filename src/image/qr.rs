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
//!
//! The reader's work grows with the square of the finder-like patterns it sees (it copies the
//! whole working image for every pair of candidates it tries, and has no limit of its own): a
//! picture tiled with finder patterns would hold the worker for minutes. Before reading, the
//! patterns are counted here ([`finder_candidates`]: runs of dark, light, dark, light, dark in
//! the ratio 1:1:3:1:1 along the rows of the reader's own binarised image, stacked into
//! candidates), and an image with more than [`FINDER_CANDIDATES_MAX`] is not read: its QR
//! categories are reported unchecked rather than guessed. The count is looser than the
//! reader's own test (no ring check), so it over-counts, never under-counts, what the reader
//! will try.

use serde::Serialize;

use super::raster::Rgb8;
use super::resize::fit_within;

/// The long side the reader works at, at most. The reader's cost grows with the square of
/// the finder-like patterns it sees times the image's area (rqrr copies the whole working
/// image for every pair of candidates it tries): a 4,096 px patterned wallpaper took 86 s of
/// CPU at 2,048 px and 0.7 s at 1,024 (`models/image/NEW_CHECKS_STATS.md`'s set). A large
/// JPEG is decoded below this anyway, so only large PNG, WebP and GIF files lose detail.
pub const READ_SIDE_MAX: usize = 1024;
/// Codes read per image, at most.
pub const CODES_MAX: usize = 8;
/// Finder-like patterns an image may hold and still be read: eight codes have 24; 64 tried
/// pairwise cost the reader well under a second at [`READ_SIDE_MAX`].
pub const FINDER_CANDIDATES_MAX: usize = 64;

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

/// The QR codes of `image` that decode, in the order the reader found them; `None` when the
/// image holds more than [`FINDER_CANDIDATES_MAX`] finder-like patterns (not read).
pub fn read(image: &Rgb8) -> Option<Vec<QrCode>> {
    let work = fit_within(image, READ_SIDE_MAX);
    let work = work.as_ref();
    let (width, height) = (work.width, work.height);
    let mut prepared = rqrr::PreparedImage::prepare_from_greyscale(width, height, |x, y| {
        let p = &work.pixels[(y * width + x) * 3..][..3];
        ((u32::from(p[0]) * 299 + u32::from(p[1]) * 587 + u32::from(p[2]) * 114) / 1000) as u8
    });
    // The crate does not export its pixel type: a 1 x 1 bitmap of one light pixel gives the
    // value to compare with.
    let light = rqrr::PreparedImage::prepare_from_bitmap(1, 1, |_, _| false).get_pixel_at(0, 0);
    let dark = |x: usize, y: usize| prepared.get_pixel_at(x, y) != light;
    if finder_candidates(width, height, dark, FINDER_CANDIDATES_MAX + 1) > FINDER_CANDIDATES_MAX {
        return None;
    }
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
        let fraction = |value: i32, side: usize| super::raster::fraction(f64::from(value), side);
        codes.push(QrCode {
            payload,
            x1: fraction(xs.clone().min().unwrap_or(0), width),
            y1: fraction(ys.clone().min().unwrap_or(0), height),
            x2: fraction(xs.max().unwrap_or(0), width),
            y2: fraction(ys.max().unwrap_or(0), height),
        });
    }
    Some(codes)
}

/// Whether five runs (dark, light, dark, light, dark) are in the ratio 1:1:3:1:1, each within
/// half a unit (a unit is a seventh of their total).
fn finder_like(runs: &[usize; 5]) -> bool {
    let total: usize = runs.iter().sum();
    if total < 7 {
        return false;
    }
    let unit = total as f64 / 7.0;
    let near =
        |run: usize, units: f64| (run as f64 - units * unit).abs() <= unit * 0.5 * units.max(1.0);
    near(runs[0], 1.0)
        && near(runs[1], 1.0)
        && near(runs[2], 3.0)
        && near(runs[3], 1.0)
        && near(runs[4], 1.0)
}

/// A stack of row hits: where its centre is and how wide its core, and its first and last
/// rows.
struct Stack {
    centre: f64,
    core: usize,
    first_row: usize,
    last_row: usize,
}

impl Stack {
    /// A finder's core is as tall as it is wide: a stack at least [`STACK_HEIGHT_MIN`] of its
    /// core tall is one. (Data modules make 1:1:3:1:1 runs on a row or two, not on a core's
    /// height.)
    fn is_finder_like(&self) -> bool {
        (self.last_row - self.first_row + 1) as f64 >= self.core as f64 * STACK_HEIGHT_MIN
    }
}

/// How tall a stack must be, in cores, to count.
const STACK_HEIGHT_MIN: f64 = 0.6;

/// Finder-like patterns of a `width` x `height` binary image (`dark(x, y)`): row hits of
/// 1:1:3:1:1 runs (`finder_like`), stacked when a hit's centre lies within its core of a stack's centre
/// one or two rows below that stack's last hit, counted when the stack is about as tall as
/// its core is wide. Returns early, with a count of at least `stop`, once it reaches it.
pub fn finder_candidates(
    width: usize,
    height: usize,
    dark: impl Fn(usize, usize) -> bool,
    stop: usize,
) -> usize {
    let mut open: Vec<Stack> = Vec::new();
    let mut count = 0;
    let mut runs: Vec<(bool, usize, usize)> = Vec::new(); // (dark, start, length)
    for y in 0..height {
        runs.clear();
        for x in 0..width {
            let d = dark(x, y);
            match runs.last_mut() {
                Some(run) if run.0 == d => run.2 += 1,
                _ => runs.push((d, x, 1)),
            }
        }
        let mut closed = 0;
        open.retain(|stack| {
            let done = y - stack.last_row > 2;
            closed += usize::from(done && stack.is_finder_like());
            !done
        });
        count += closed;
        if count >= stop {
            return count;
        }
        for window in runs.windows(5) {
            if !window[0].0 {
                continue;
            }
            let lengths = [
                window[0].2,
                window[1].2,
                window[2].2,
                window[3].2,
                window[4].2,
            ];
            if !finder_like(&lengths) {
                continue;
            }
            let core = window[2].2;
            let centre = window[2].1 as f64 + core as f64 / 2.0;
            match open
                .iter_mut()
                .find(|stack| (stack.centre - centre).abs() <= stack.core.max(core) as f64 / 2.0)
            {
                Some(stack) if stack.last_row < y => stack.last_row = y,
                Some(_) => {}
                None => open.push(Stack {
                    centre,
                    core,
                    first_row: y,
                    last_row: y,
                }),
            }
        }
    }
    count + open.iter().filter(|stack| stack.is_finder_like()).count()
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

    /// Finder patterns (7 x 7 modules of `module` px) tiled over a white image, `n` a side.
    fn finder_tiles(n: usize, module: usize) -> Rgb8 {
        let cell = 9 * module;
        let side = n * cell;
        let mut pixels = vec![255u8; side * side * 3];
        for ty in 0..n {
            for tx in 0..n {
                for my in 0..7 {
                    for mx in 0..7 {
                        let ring = mx == 0 || my == 0 || mx == 6 || my == 6;
                        let core = (2..=4).contains(&mx) && (2..=4).contains(&my);
                        if !(ring || core) {
                            continue;
                        }
                        for y in 0..module {
                            let row = ty * cell + module + my * module + y;
                            let x0 = tx * cell + module + mx * module;
                            pixels[(row * side + x0) * 3..(row * side + x0 + module) * 3].fill(0);
                        }
                    }
                }
            }
        }
        Rgb8::new(side, side, pixels)
    }

    #[test]
    fn finder_patterns_are_counted_once_each() {
        let dark_of = |image: &Rgb8| {
            let image = image.clone();
            move |x: usize, y: usize| image.pixels[(y * image.width + x) * 3] < 128
        };
        let code = drawn("https://spam.example/win", 6, 100, 50, 600, 400);
        assert_eq!(finder_candidates(600, 400, dark_of(&code), 100), 3);
        let tiles = finder_tiles(12, 4);
        let side = tiles.width;
        assert_eq!(finder_candidates(side, side, dark_of(&tiles), 1000), 144);
        let early = finder_candidates(side, side, dark_of(&tiles), 10);
        assert!((10..144).contains(&early), "stops early: {early}");
        assert_eq!(finder_candidates(5, 5, |_, _| false, 10), 0);
    }

    #[test]
    fn an_image_tiled_with_finder_patterns_is_not_read() {
        // 144 finder patterns: the reader would try thousands of pairs, each copying the image.
        assert_eq!(read(&finder_tiles(12, 4)), None);
        // 36 are read (and hold no code).
        assert_eq!(read(&finder_tiles(6, 4)), Some(Vec::new()));
    }

    #[test]
    fn a_drawn_code_is_read_with_its_box() {
        let image = drawn("https://spam.example/win", 6, 100, 50, 600, 400);
        let codes = read(&image).unwrap();
        assert_eq!(codes.len(), 1, "{codes:?}");
        assert_eq!(codes[0].payload, "https://spam.example/win");
        assert!(codes[0].x1 > 0.15 && codes[0].x2 < 0.6, "{codes:?}");
        assert!(codes[0].y1 > 0.1 && codes[0].y2 < 0.8, "{codes:?}");
    }

    #[test]
    fn a_large_image_is_read_at_the_working_size() {
        let image = drawn("call +44 20 7946 0958", 12, 0, 0, 3000, 1000);
        assert_eq!(read(&image).unwrap()[0].payload, "call +44 20 7946 0958");
    }

    #[test]
    fn images_without_codes_give_none() {
        assert_eq!(
            read(&Rgb8::new(64, 48, vec![255; 64 * 48 * 3])),
            Some(Vec::new())
        );
        assert_eq!(read(&Rgb8::new(1, 1, vec![0; 3])), Some(Vec::new()));
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
            let codes = read(&Rgb8::new(width, height, pixels)).unwrap_or_default();
            prop_assert!(codes.len() <= CODES_MAX);
        }
    }
}
