//! How far PDQ hashes move under the changes an uploaded copy goes through, and how near
//! unrelated images come: the table of `models/image/PDQ_STATS.md`.
//!
//! `cargo run --release --example pdq_stats > models/image/PDQ_STATS.md`
//!
//! With the safe photo sets fetched (`models/image/fetch_safe_photos.sh`, 71 photos and
//! wallpapers, not committed), it also measures false matches: those photos against a list
//! of 100,000 random PDQ hashes, and against each other.
//!
//! Every committed test photo of 200 px or more on its short side and PDQ quality 50 or more
//! is hashed as the server hashes an upload it adds to a list, then changed with the `image`
//! crate that `pdqhash` brings (JPEG re-encoding, scaling, cropping, a mirror) and hashed as
//! the server hashes an image it checks; distances are PDQ bits of 256 that differ, the
//! nearer of the check's two PDQ hashes (`modgate::image::hashes`).

use modgate::image::decode::decode;
use modgate::image::hashes::{hash, ImageHashes, Pdq, PDQ_QUALITY_MIN};
use modgate::image::probe::probe;
use pdqhash::image::{self as img, DynamicImage, GenericImageView};

/// The hashes the server makes of an upload.
fn server_hashes(bytes: &[u8]) -> Option<ImageHashes> {
    let found = probe(bytes).ok()?;
    let image = decode(
        bytes,
        &found,
        modgate::checks::registry::image_min_side_px(),
    )
    .ok()?;
    Some(hash(bytes, None, &image))
}

/// The distance a list holding `listed` (an upload's entry) matches `copy` at.
fn match_distance(listed: &Pdq, copy: &ImageHashes) -> u32 {
    copy.pdq_queries()
        .map(|query| query.distance(listed))
        .min()
        .unwrap_or(256)
}

fn jpeg(image: &DynamicImage, quality: u8) -> Vec<u8> {
    let mut out = Vec::new();
    img::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
        .encode_image(image)
        .expect("encodes");
    out
}

fn png(image: &DynamicImage) -> Vec<u8> {
    let mut out = Vec::new();
    image
        .write_to(&mut out, img::ImageOutputFormat::Png)
        .expect("encodes");
    out
}

fn crop(image: &DynamicImage, percent: u32) -> DynamicImage {
    let (w, h) = image.dimensions();
    let (dx, dy) = (w * percent / 100, h * percent / 100);
    image.crop_imm(dx, dy, w - 2 * dx, h - 2 * dy)
}

fn scale(image: &DynamicImage, factor: f64) -> DynamicImage {
    let (w, h) = image.dimensions();
    let (w, h) = ((w as f64 * factor) as u32, (h as f64 * factor) as u32);
    image.resize_exact(w, h, img::imageops::FilterType::Triangle)
}

type Change = (&'static str, fn(&DynamicImage) -> Vec<u8>);

fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/models/image/testimages");
    let mut photos = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("test images")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e != "json" && e != "md"))
        .collect();
    names.sort();
    for path in names {
        let bytes = std::fs::read(&path).expect("reads");
        let Ok(image) = img::load_from_memory(&bytes) else {
            continue;
        };
        let (w, h) = image.dimensions();
        let Some((hash, quality)) = server_hashes(&bytes).and_then(|hashes| hashes.pdq) else {
            continue;
        };
        if w.min(h) < 200 || quality < PDQ_QUALITY_MIN {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        photos.push((name, image, hash));
    }
    let changes: &[Change] = &[
        ("JPEG q90", |i| jpeg(i, 90)),
        ("JPEG q50", |i| jpeg(i, 50)),
        ("JPEG q20", |i| jpeg(i, 20)),
        ("PNG", png),
        ("scaled 1/2, JPEG q75", |i| jpeg(&scale(i, 0.5), 75)),
        ("scaled 1/4, JPEG q75", |i| jpeg(&scale(i, 0.25), 75)),
        ("scaled x2, PNG", |i| png(&scale(i, 2.0))),
        ("1 % cropped a side, PNG", |i| png(&crop(i, 1))),
        ("2 % cropped a side, PNG", |i| png(&crop(i, 2))),
        ("4 % cropped a side, PNG", |i| png(&crop(i, 4))),
        ("8 % cropped a side, PNG", |i| png(&crop(i, 8))),
        ("mirrored, PNG", |i| png(&i.fliph())),
    ];
    println!("# PDQ under changes (`cargo run --release --example pdq_stats`)\n");
    println!(
        "{} test photos (200 px or more a side, PDQ quality {PDQ_QUALITY_MIN} or more), hashed as \
         the server hashes uploads. Distances are bits of 256 that differ; lists match within 31 \
         by default (PDQ's recommendation).\n",
        photos.len()
    );
    println!("| change | median | max | within 31 |");
    println!("|---|---|---|---|");
    for (label, change) in changes {
        let mut distances: Vec<u32> = photos
            .iter()
            .map(|(_, image, hash)| {
                match_distance(hash, &server_hashes(&change(image)).expect("hashes"))
            })
            .collect();
        distances.sort_unstable();
        let within = distances.iter().filter(|d| **d <= 31).count();
        println!(
            "| {label} | {} | {} | {within}/{} |",
            distances[distances.len() / 2],
            distances[distances.len() - 1],
            distances.len()
        );
    }
    let mut nearest = u32::MAX;
    let mut pairs = 0;
    for (i, (a, _, ha)) in photos.iter().enumerate() {
        for (b, _, hb) in &photos[i + 1..] {
            // The same photo in another test file is not an unrelated pair.
            let stem = |n: &str| n.split('_').nth(2).unwrap_or("").to_owned();
            if stem(a) == stem(b) {
                continue;
            }
            pairs += 1;
            nearest = nearest.min(ha.distance(hb));
        }
    }
    println!(
        "\nUnrelated photos: the nearest of {pairs} pairs of different photos are {nearest} bits \
         apart."
    );
    false_matches();
}

/// The safe photo sets against 100,000 random hashes and against each other.
fn false_matches() {
    use modgate::lists::{CompiledList, Entry, EntryHash, ListKind};
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/models/image/safe");
    let mut safe = Vec::new();
    for set in ["skimage", "gnome-backgrounds", "mate-backgrounds"] {
        let Ok(files) = std::fs::read_dir(format!("{dir}/{set}")) else {
            continue;
        };
        let mut paths: Vec<_> = files.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let Some(hashes) = server_hashes(&bytes) else {
                continue;
            };
            if hashes.pdq_queries().next().is_none() {
                continue; // too flat to match on
            }
            let name = format!("{set}/{}", path.file_name().unwrap().to_string_lossy());
            safe.push((name, hashes));
        }
    }
    if safe.is_empty() {
        println!("\n(The safe photo sets are not fetched: no false-match figures.)");
        return;
    }
    let mut rng = fastrand::Rng::with_seed(31);
    let random: Vec<Entry> = (0..100_000u64)
        .map(|id| {
            let mut bytes = [0u8; 32];
            rng.fill(&mut bytes);
            Entry {
                id: id + 1,
                hash: EntryHash::Pdq(Pdq(bytes)),
                label: None,
                caller_id: None,
                added_ms: 0,
            }
        })
        .collect();
    let strict = CompiledList::new("random", ListKind::Block, 31, random.clone());
    let loose = CompiledList::new("random", ListKind::Block, 63, random);
    let matched = safe
        .iter()
        .filter(|(_, hashes)| strict.lookup(hashes).is_some())
        .count();
    let nearest = safe
        .iter()
        .filter_map(|(_, hashes)| loose.lookup(hashes).map(|found| found.distance))
        .min();
    println!(
        "\nSafe photo sets (`fetch_safe_photos.sh`: scikit-image, gnome-backgrounds, \
         mate-backgrounds; {} images with enough detail) against a list of 100,000 random PDQ \
         hashes: {matched} matched within 31 bits; the nearest was {}.",
        safe.len(),
        nearest.map_or("over 63 bits away".to_owned(), |d| format!("{d} bits away"))
    );
    let mut close = Vec::new();
    let mut pairs = 0;
    for (i, (a, ha)) in safe.iter().enumerate() {
        for (b, hb) in &safe[i + 1..] {
            pairs += 1;
            let distance = ha
                .pdq_queries()
                .flat_map(|qa| hb.pdq_queries().map(move |qb| qa.distance(&qb)))
                .min()
                .unwrap_or(256);
            if distance <= 31 {
                close.push(format!("{a} and {b} ({distance} bits)"));
            }
        }
    }
    println!(
        "\nThe same images against each other: {} of {pairs} pairs within 31 bits{}",
        close.len(),
        if close.is_empty() {
            ".".to_owned()
        } else {
            format!(": {}.", close.join("; "))
        }
    );
}
