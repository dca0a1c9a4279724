//! Image hot paths: each decoder path, each resize, each model run, and the whole
//! "12 MP JPEG to both models' inputs" path that `benches/jpeg_vs_pillow.sh` compares with
//! libjpeg-turbo's DCT-scaled decode in Pillow.
//!
//! The 12 MP baseline JPEG is made here, deterministically (a test photo upscaled with the
//! Pillow filter and encoded by libjpeg at quality 90, 4:2:0), and written to
//! `target/bench-12mp.jpg` for the Python side of the comparison.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use modgate::image::decode::decode;
use modgate::image::probe::probe;
use modgate::image::resize::{nsfwjs_input, opennsfw_input, INPUT_LEN};
use modgate::image::tensor::{ColourOrder, Fit, Layout, TensorRecipe};
use modgate::image::Rgb8;
use modgate::inference;

mod common;
use common::{jpeg_12mp, testimage, MODELS};

/// The 12 MP JPEG ([`jpeg_12mp`]), also written for `benches/jpeg_vs_pillow.sh`.
pub fn large_jpeg() -> Vec<u8> {
    let bytes = jpeg_12mp();
    // For the Python side of `benches/jpeg_vs_pillow.sh`; a bench run without a writable
    // `target/` (CARGO_TARGET_DIR elsewhere) still runs.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/target");
    if std::fs::create_dir_all(dir).is_ok() {
        let _ = std::fs::write(format!("{dir}/bench-12mp.jpg"), &bytes);
    }
    bytes
}

fn decoding(c: &mut Criterion) {
    let large = large_jpeg();
    let one_mp = testimage("jpeg_baseline_retina_1152x864_1mp.jpg");
    let mut group = c.benchmark_group("decode");
    group.sample_size(10);
    for (name, bytes, min_side) in [
        ("jpeg_12mp_full_zune", &large, usize::MAX),
        ("jpeg_12mp_dct_scaled", &large, 256),
        ("jpeg_1mp_full_zune", &one_mp, usize::MAX),
        ("jpeg_1mp_dct_scaled", &one_mp, 256),
    ] {
        let found = probe(bytes).unwrap();
        group.throughput(Throughput::Elements(
            u64::from(found.width) * u64::from(found.height),
        ));
        group.bench_function(name, |b| {
            b.iter(|| decode(black_box(bytes), &found, min_side).unwrap())
        });
    }
    for name in [
        "png_rgb_hubble_320x240.png",
        "webp_lossy_rocket_640x427.webp",
        "gif_animated_2frames_chelsea_200x150.gif",
    ] {
        let bytes = testimage(name);
        let found = probe(&bytes).unwrap();
        group.throughput(Throughput::Elements(
            u64::from(found.width) * u64::from(found.height),
        ));
        group.bench_function(name, |b| {
            b.iter(|| decode(black_box(&bytes), &found, 256).unwrap())
        });
    }
    group.finish();
}

fn resizing(c: &mut Criterion) {
    let large = large_jpeg();
    let scaled = decode(&large, &probe(&large).unwrap(), 256).unwrap();
    let mut group = c.benchmark_group("resize");
    let mut input = vec![0.0f32; INPUT_LEN];
    group.bench_function(
        format!("nsfwjs_from_{}x{}", scaled.width, scaled.height),
        |b| b.iter(|| nsfwjs_input(black_box(&scaled), &mut input)),
    );
    group.bench_function(
        format!(
            "opennsfw_from_{}x{}_with_jpeg_round_trip",
            scaled.width, scaled.height
        ),
        |b| b.iter(|| opennsfw_input(black_box(&scaled), &mut input).unwrap()),
    );
    // A declared model's recipe (`[[models.custom]]`): both fits, NCHW with ImageNet's
    // mean and scale.
    for fit in [Fit::Stretch, Fit::CenterCrop] {
        let recipe = TensorRecipe {
            height: 224,
            width: 224,
            layout: Layout::Nchw,
            colour: ColourOrder::Rgb,
            fit,
            mean: [123.675, 116.28, 103.53],
            scale: [1.0 / 58.395, 1.0 / 57.12, 1.0 / 57.375],
        };
        group.bench_function(
            format!("declared_{fit:?}_from_{}x{}", scaled.width, scaled.height).to_lowercase(),
            |b| b.iter(|| recipe.write(black_box(&scaled), &mut input)),
        );
    }
    group.finish();
}

/// What the worker does to a 12 MP JPEG before the models run.
fn to_inputs(bytes: &[u8]) -> (Rgb8, Vec<f32>, Vec<f32>) {
    let image = decode(
        bytes,
        &probe(bytes).unwrap(),
        modgate::checks::registry::image_min_side_px(),
    )
    .unwrap();
    let mut a = vec![0.0f32; INPUT_LEN];
    let mut b = vec![0.0f32; INPUT_LEN];
    opennsfw_input(&image, &mut a).unwrap();
    nsfwjs_input(&image, &mut b);
    (image, a, b)
}

fn pipeline(c: &mut Criterion) {
    let large = large_jpeg();
    let mut group = c.benchmark_group("pipeline");
    group.sample_size(20);
    group.bench_function("jpeg_12mp_to_both_model_inputs", |b| {
        b.iter(|| to_inputs(black_box(&large)))
    });
    group.finish();
}

fn models(c: &mut Criterion) {
    let library = format!("{MODELS}/cache/libonnxruntime.so.1.31.1");
    // Criterion runs the benches on the main thread, with no other thread yet.
    inference::disable_runtime_telemetry();
    let environment = match inference::load_runtime(std::path::Path::new(&library)) {
        Ok(environment) => environment,
        Err(error) => {
            eprintln!("model benches skipped: {error} (run `python3 models/fetch.py` first)");
            return;
        }
    };
    let large = large_jpeg();
    let (_, open_input, nsfwjs_in) = to_inputs(&large);
    let dir = std::path::Path::new(MODELS);
    let mut open_nsfw = inference::open_session(
        &environment,
        &inference::verify_model(dir, &modgate::checks::open_nsfw::MODEL.model).unwrap(),
    )
    .unwrap();
    let mut nsfwjs = inference::open_session(
        &environment,
        &inference::verify_model(dir, &modgate::checks::nsfwjs::MODEL.model).unwrap(),
    )
    .unwrap();
    let mut group = c.benchmark_group("model");
    group.sample_size(20);
    group.bench_function("open_nsfw_1_image", |b| {
        b.iter(|| modgate::checks::open_nsfw::probs(&mut open_nsfw, open_input.clone()).unwrap())
    });
    group.bench_function("nsfwjs_1_image", |b| {
        b.iter(|| modgate::checks::nsfwjs::probs(&mut nsfwjs, nsfwjs_in.clone()).unwrap())
    });
    let batch: Vec<f32> = (0..8).flat_map(|_| nsfwjs_in.iter().copied()).collect();
    group.throughput(Throughput::Elements(8));
    group.bench_function("nsfwjs_batch_of_8", |b| {
        b.iter(|| modgate::checks::nsfwjs::probs(&mut nsfwjs, batch.clone()).unwrap())
    });
    group.throughput(Throughput::Elements(1));
    let inception = &modgate::checks::nsfwjs_inception::MODEL;
    if let Ok(path) = inference::verify_model(dir, &inception.model) {
        let mut session = inference::open_session(&environment, &path).unwrap();
        let (decoded, _, _) = to_inputs(&large);
        let mut input = vec![0.0; inception.input_len()];
        inception.prepare(&decoded, &mut input).unwrap();
        group.bench_function("nsfwjs_inception_1_image", |b| {
            b.iter(|| inference::image_rows(&mut session, inception, input.clone()).unwrap())
        });
    }
    group.finish();
    faces(c, &environment, dir);
    ocr(c, &environment, dir);
}

/// The `ocr` check on what the worker decodes for it: the 1 MP and 12 MP JPEGs (a few words of
/// text each, if any) and a picture of four lines from the OCR test set (774 x 776 PNG).
fn ocr(c: &mut Criterion, environment: &ort::environment::Environment, dir: &std::path::Path) {
    use modgate::inference::ocr::{OcrNets, NETS};
    let Ok(models) = inference::WorkerModels::verified(environment, dir, NETS) else {
        eprintln!("OCR benches skipped: run `python3 models/fetch.py` first");
        return;
    };
    let Ok(Some(mut nets)) = OcrNets::open(&models) else {
        return;
    };
    let side = modgate::image::Measures::OCR.min_side_px();
    let lines = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/image/ocr_testset/082.png"
    ))
    .unwrap();
    let mut group = c.benchmark_group("measure");
    group.sample_size(10);
    for (name, bytes) in [
        (
            "jpeg_1mp",
            testimage("jpeg_baseline_retina_1152x864_1mp.jpg"),
        ),
        ("jpeg_12mp", large_jpeg()),
        ("png_4_lines", lines),
    ] {
        let found = probe(&bytes).unwrap();
        let decoded = decode(&bytes, &found, side).unwrap();
        group.bench_function(format!("ocr/{name}"), |b| {
            b.iter(|| nets.read(black_box(&decoded)).unwrap())
        });
        group.bench_function(format!("decode_for_ocr/{name}"), |b| {
            b.iter(|| decode(black_box(&bytes), &found, side).unwrap())
        });
    }
    group.finish();
}

/// The `faces` check on what the worker decodes for the models (1 MP and 12 MP JPEGs).
fn faces(c: &mut Criterion, environment: &ort::environment::Environment, dir: &std::path::Path) {
    use modgate::inference::faces::{FaceNets, NETS};
    let Ok(models) = inference::WorkerModels::verified(environment, dir, NETS) else {
        eprintln!("face benches skipped: run `python3 models/fetch.py` first");
        return;
    };
    let Ok(Some(mut nets)) = FaceNets::open(&models) else {
        return;
    };
    // What the worker decodes for a job that looks for faces.
    let side = modgate::image::Measures::FACES.min_side_px();
    let mut group = c.benchmark_group("measure");
    group.sample_size(10);
    for (name, bytes) in [
        (
            "jpeg_1mp",
            testimage("jpeg_baseline_retina_1152x864_1mp.jpg"),
        ),
        ("jpeg_12mp", large_jpeg()),
    ] {
        let found = probe(&bytes).unwrap();
        let decoded = decode(&bytes, &found, side).unwrap();
        group.bench_function(format!("faces/{name}"), |b| {
            b.iter(|| nets.detect(black_box(&decoded)).unwrap())
        });
        // The decode a faces job adds: at the detector's side instead of the models'.
        let models_side = modgate::checks::registry::image_min_side_px();
        group.bench_function(format!("decode_for_faces/{name}"), |b| {
            b.iter(|| decode(black_box(&bytes), &found, side).unwrap())
        });
        group.bench_function(format!("decode_for_models/{name}"), |b| {
            b.iter(|| decode(black_box(&bytes), &found, models_side).unwrap())
        });
    }
    group.finish();
}

/// The measurements of the `properties`, `qr` and `hashlist` checks, on what the worker
/// decodes: the 1 MP
/// JPEG at the DCT scale the models need, and the 12 MP one likewise.
fn measuring(c: &mut Criterion) {
    let mut group = c.benchmark_group("measure");
    for (name, bytes) in [
        (
            "jpeg_1mp",
            testimage("jpeg_baseline_retina_1152x864_1mp.jpg"),
        ),
        ("jpeg_12mp", large_jpeg()),
    ] {
        let found = probe(&bytes).unwrap();
        let decoded = decode(&bytes, &found, 256).unwrap();
        group.bench_function(format!("properties/{name}"), |b| {
            b.iter(|| modgate::image::properties::measure(black_box(&decoded)))
        });
        group.bench_function(format!("qr/{name}"), |b| {
            b.iter(|| modgate::image::qr::read(black_box(&decoded)))
        });
        // PDQ at one size and as Meta's tool makes it, MD5 and SHA-256 of the file: what
        // the `hashlist` check costs on the worker.
        // One PDQ hash at 512 px on the long side (the resize included): most of the above.
        group.bench_function(format!("pdq_512/{name}"), |b| {
            b.iter(|| modgate::image::hashes::pdq(black_box(&decoded)))
        });
        group.bench_function(format!("hashes/{name}"), |b| {
            b.iter(|| modgate::image::hashes::hash(black_box(&bytes), None, black_box(&decoded)))
        });
    }
    group.finish();
}

/// A white picture with `n` x `n` QR finder patterns of 4 px modules: what the QR reader's
/// guard is for (`modgate::image::qr::FINDER_CANDIDATES_MAX`).
fn finder_tiles(n: usize) -> Rgb8 {
    let (module, cell) = (4, 36);
    let side = n * cell;
    let mut pixels = vec![255u8; side * side * 3];
    for ty in 0..n {
        for tx in 0..n {
            for my in 0..7 {
                for mx in 0..7 {
                    let ring = mx == 0 || my == 0 || mx == 6 || my == 6;
                    let core = (2..=4).contains(&mx) && (2..=4).contains(&my);
                    if ring || core {
                        for y in 0..module {
                            let row = ty * cell + module + my * module + y;
                            let x0 = tx * cell + module + mx * module;
                            pixels[(row * side + x0) * 3..(row * side + x0 + module) * 3].fill(0);
                        }
                    }
                }
            }
        }
    }
    Rgb8::new(side, side, pixels)
}

/// The QR reader on pictures of finder patterns: 64 (8 x 8, read: the guard's limit) and 144
/// (12 x 12, refused by the guard's count).
fn qr_guard(c: &mut Criterion) {
    let mut group = c.benchmark_group("measure");
    group.sample_size(10);
    for n in [8, 12] {
        let image = finder_tiles(n);
        group.bench_function(format!("qr/finder_tiles_{}", n * n), |b| {
            b.iter(|| modgate::image::qr::read(black_box(&image)))
        });
    }
    group.finish();
}

criterion_group!(benches, decoding, resizing, pipeline, models, measuring, qr_guard);
criterion_main!(benches);
