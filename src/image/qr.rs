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
//! The reader's work grows with the square of the finder patterns ("capstones") it finds (it
//! copies the whole working image for every pair of them it tries, and has no limit of its
//! own): a picture tiled with finder patterns would hold the worker for minutes. Before
//! reading, the capstones are counted here as the reader finds them ([`finder_candidates`]:
//! its row test on runs of dark, light, dark, light, dark, in its own integer arithmetic; the
//! outer runs one 4-connected dark region, the ring, and the middle run another, the stone;
//! the stone's area between 10 % and 70 % of the ring's), on the reader's own binarised image.
//! An image with more than [`FINDER_CANDIDATES_MAX`] is not read: its QR categories are
//! reported unchecked rather than guessed. The reader takes at most one capstone from a ring,
//! and every condition counted is one the reader requires, so the count is never below the
//! reader's (the crate does not export its own).

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

/// The reader's row test (rqrr 0.11, `detect.rs`): five runs (dark, light, dark, light,
/// dark) in the ratio 1:1:3:1:1, a unit being the mean of the four outer runs (integer
/// division) and each run within three quarters of a unit of its share.
fn finder_like(runs: &[usize; 5]) -> bool {
    let unit = (runs[0] + runs[1] + runs[3] + runs[4]) / 4;
    let slack = unit * 3 / 4;
    [1, 1, 3, 1, 1]
        .iter()
        .zip(runs)
        .all(|(&units, &run)| units * unit - slack <= run && run <= units * unit + slack)
}

/// The dark regions of a binary image: its dark runs, joined when they touch from one row to
/// the next (4-connectivity, as the reader's flood fill), with their areas.
struct Regions {
    parent: Vec<u32>,
    area: Vec<u32>,
}

impl Regions {
    fn add(&mut self, length: usize) -> u32 {
        let id = self.parent.len() as u32;
        self.parent.push(id);
        self.area.push(length as u32);
        id
    }

    fn root(&mut self, mut run: u32) -> u32 {
        while self.parent[run as usize] != run {
            let grand = self.parent[self.parent[run as usize] as usize];
            self.parent[run as usize] = grand;
            run = grand;
        }
        run
    }

    fn join(&mut self, a: u32, b: u32) {
        let (a, b) = (self.root(a), self.root(b));
        if a != b {
            let (big, small) = if self.area[a as usize] >= self.area[b as usize] {
                (a, b)
            } else {
                (b, a)
            };
            self.parent[small as usize] = big;
            self.area[big as usize] += self.area[small as usize];
        }
    }
}

/// Capstones the reader can find in a `width` x `height` binary image (`dark(x, y)`), counted
/// as it finds them: a row whose five runs pass the reader's row test (`finder_like`), the
/// outer two one dark region (the ring) and the middle one another (the stone), with the
/// stone's area over 10 % and under 70 % of the ring's; each ring once (the reader claims a
/// ring with its first capstone). One pass over the pixels; returns early, with a count of at
/// least `stop`, once the count reaches it.
pub fn finder_candidates(
    width: usize,
    height: usize,
    dark: impl Fn(usize, usize) -> bool,
    stop: usize,
) -> usize {
    let mut regions = Regions {
        parent: Vec::new(),
        area: Vec::new(),
    };
    // (left ring run, stone run, right ring run) of each row hit.
    let mut hits: Vec<[u32; 3]> = Vec::new();
    let mut runs: Vec<(bool, usize, usize, u32)> = Vec::new(); // (dark, start, length, id)
    let mut above: Vec<(usize, usize, u32)> = Vec::new(); // dark runs of the row above
    for y in 0..height {
        runs.clear();
        for x in 0..width {
            let d = dark(x, y);
            match runs.last_mut() {
                Some(run) if run.0 == d => run.2 += 1,
                _ => runs.push((d, x, 1, 0)),
            }
        }
        let mut first = 0;
        for run in runs.iter_mut().filter(|run| run.0) {
            run.3 = regions.add(run.2);
            let (start, end) = (run.1, run.1 + run.2);
            while first < above.len() && above[first].1 <= start {
                first += 1;
            }
            for &(_, _, id) in above[first..].iter().take_while(|a| a.0 < end) {
                regions.join(id, run.3);
            }
        }
        for window in runs.windows(5) {
            let lengths = [
                window[0].2,
                window[1].2,
                window[2].2,
                window[3].2,
                window[4].2,
            ];
            if window[0].0 && finder_like(&lengths) {
                hits.push([window[0].3, window[2].3, window[4].3]);
            }
        }
        above.clear();
        above.extend(
            runs.iter()
                .filter(|run| run.0)
                .map(|run| (run.1, run.1 + run.2, run.3)),
        );
    }
    let mut counted = vec![false; regions.parent.len()];
    let mut count = 0;
    for [left, stone, right] in hits {
        let ring = regions.root(right);
        let stone = regions.root(stone);
        if regions.root(left) != ring || stone == ring {
            continue;
        }
        let ratio = regions.area[stone as usize] as usize * 100
            / regions.area[ring as usize].max(1) as usize;
        if ratio <= 10 || ratio >= 70 || std::mem::replace(&mut counted[ring as usize], true) {
            continue;
        }
        count += 1;
        if count >= stop {
            return count;
        }
    }
    count
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

    /// Targets tiled over a white image, `n` a side: squares `2 * ring + 2 * light + core` px
    /// wide, `gap` px of white around each, a dark outer ring `ring` px wide and a dark core
    /// `core` px wide and `core_rows` tall in the middle. `(1, 3, 5, 5)` gives rows of runs
    /// 1:3:5:3:1, a finder pattern with a thin outer ring, which the reader takes as one.
    fn target_tiles(
        n: usize,
        ring: usize,
        light: usize,
        core: usize,
        core_rows: usize,
        gap: usize,
    ) -> Rgb8 {
        let span = 2 * ring + 2 * light + core;
        let cell = span + 2 * gap;
        let side = n * cell;
        let top = (span - core_rows) / 2;
        let mut pixels = vec![255u8; side * side * 3];
        for y in 0..side {
            for x in 0..side {
                let (u, v) = (x % cell, y % cell);
                if u < gap || v < gap || u >= gap + span || v >= gap + span {
                    continue;
                }
                let (u, v) = (u - gap, v - gap);
                let depth = u.min(v).min(span - 1 - u).min(span - 1 - v);
                let in_core = (ring + light..ring + light + core).contains(&u)
                    && (top..top + core_rows).contains(&v);
                if depth < ring || in_core {
                    pixels[(y * side + x) * 3..][..3].fill(0);
                }
            }
        }
        Rgb8::new(side, side, pixels)
    }

    /// Pairs of three-sided rings, `n` x `n`: one open at the bottom over one open at the top,
    /// one light row apart, each around a core 5 px wide and 2 rows tall (runs 1:3:5:3:1 on
    /// two rows): two capstones for the reader, each ring found from one row.
    fn ring_pairs(n: usize) -> Rgb8 {
        const W: usize = 13;
        const GAP: usize = 2;
        let (cell_w, cell_h) = (W + 2 * GAP, 11 + 2 * GAP + 1);
        let (width, height) = (n * cell_w, n * cell_h);
        let mut pixels = vec![255u8; width * height * 3];
        for ty in 0..n {
            for tx in 0..n {
                let (ox, oy) = (tx * cell_w + GAP, ty * cell_h + GAP);
                let mut set =
                    |x: usize, y: usize| pixels[((oy + y) * width + ox + x) * 3..][..3].fill(0);
                for x in 0..W {
                    set(x, 0);
                    set(x, 10);
                }
                for y in (0..5).chain(6..11) {
                    set(0, y);
                    set(W - 1, y);
                }
                for y in [3, 4, 6, 7] {
                    for x in 4..9 {
                        set(x, y);
                    }
                }
            }
        }
        Rgb8::new(width, height, pixels)
    }

    fn dark_of(image: &Rgb8) -> impl Fn(usize, usize) -> bool + '_ {
        move |x: usize, y: usize| image.pixels[(y * image.width + x) * 3] < 128
    }

    #[test]
    fn the_readers_row_test_is_the_guards() {
        // Runs 1:3:5:3:1 (a thin outer ring): the reader's unit is 2, its slack 1.
        assert!(finder_like(&[1, 3, 5, 3, 1]));
        assert!(finder_like(&[4, 4, 12, 4, 4]));
        assert!(finder_like(&[2, 2, 5, 2, 2]));
        // A unit of 1 leaves no slack: only 1:1:3:1:1 itself.
        assert!(finder_like(&[1, 1, 3, 1, 1]));
        assert!(!finder_like(&[1, 1, 4, 1, 1]));
        assert!(!finder_like(&[4, 4, 4, 4, 4]));
        assert!(!finder_like(&[1, 1, 1, 1, 1]));
    }

    #[test]
    fn capstones_are_counted_as_the_reader_finds_them() {
        for (image, expected) in [
            (target_tiles(12, 1, 3, 5, 5, 2), 144),
            (target_tiles(6, 1, 3, 5, 5, 2), 36),
            // A core two rows tall: one row is enough for the reader.
            (target_tiles(12, 1, 3, 5, 2, 2), 144),
            (target_tiles(12, 2, 5, 8, 8, 2), 144),
            // The size of an image that held a worker for 108 s: 784 targets in 420 px.
            (target_tiles(28, 1, 3, 5, 5, 1), 784),
            (ring_pairs(8), 128),
        ] {
            let (width, height) = (image.width, image.height);
            assert_eq!(
                finder_candidates(width, height, dark_of(&image), 10_000),
                expected
            );
        }
        // Rings without a stone, or with one too large for them, are no capstones.
        let solid = target_tiles(6, 2, 0, 8, 8, 2);
        assert_eq!(
            finder_candidates(solid.width, solid.height, dark_of(&solid), 100),
            0
        );
        let hollow = target_tiles(6, 1, 3, 5, 0, 2);
        assert_eq!(
            finder_candidates(hollow.width, hollow.height, dark_of(&hollow), 100),
            0
        );
    }

    #[test]
    fn images_of_thin_ringed_targets_are_not_read() {
        for image in [
            target_tiles(12, 1, 3, 5, 5, 2),
            target_tiles(12, 1, 3, 5, 2, 2),
            target_tiles(28, 1, 3, 5, 5, 1),
            ring_pairs(8),
        ] {
            assert_eq!(read(&image), None);
        }
        assert_eq!(read(&target_tiles(6, 1, 3, 5, 5, 2)), Some(Vec::new()));
    }

    #[test]
    fn finder_patterns_are_counted_once_each() {
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
