//! The real models against the outputs of their original Python packages, on the committed
//! reference sets (needs `python3 models/fetch.py` first, as `make test` does).

use modgate::checks::toxblock::{rescale, ToxTokenizer, LABELS};
use modgate::image::resize::{nsfwjs_input, opennsfw_input, INPUT_LEN};
use modgate::image::{decode::decode, probe::probe};
use modgate::inference;

const MODELS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models");

fn reference_rows() -> Vec<serde_json::Value> {
    std::fs::read_to_string(format!("{MODELS}/text/reference.jsonl"))
        .expect("reference.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect()
}

/// One ONNX Runtime environment per process: every model check lives in this one test.
#[test]
fn models_match_their_python_originals() {
    let library = format!("{MODELS}/cache/libonnxruntime.so.1.31.1");
    // This binary's only test, so no other test thread reads the environment meanwhile.
    inference::disable_runtime_telemetry();
    let environment = inference::load_runtime(std::path::Path::new(&library))
        .unwrap_or_else(|e| panic!("{e} (run `python3 models/fetch.py`)"));
    let models = std::path::Path::new(MODELS);

    // tox-block: our tokenizer feeds the ONNX model; rescaled scores within 1e-5 of
    // tox-block's `make_predictions`, one text at a time and all in one batch.
    let path = inference::verify_model(models, &modgate::checks::toxblock::MODEL).unwrap();
    let mut session = inference::open_session(&environment, &path).unwrap();
    let tokenizer = ToxTokenizer::from_json(
        &std::fs::read_to_string(format!("{MODELS}/text/toxblock_tokenizer.json")).unwrap(),
    )
    .unwrap();
    let rows = reference_rows();
    assert!(rows.len() >= 50);
    let mut batch = Vec::new();
    for row in &rows {
        batch.extend_from_slice(&tokenizer.sequence(row["text"].as_str().unwrap()));
    }
    let batched = inference::toxblock_probs(&mut session, batch).unwrap();
    let mut worst = 0.0f32;
    for (row, batched) in rows.iter().zip(&batched) {
        let single = inference::toxblock_probs(
            &mut session,
            tokenizer.sequence(row["text"].as_str().unwrap()).to_vec(),
        )
        .unwrap();
        for raw in [&single[0], batched] {
            let scaled = rescale(raw);
            for (i, label) in LABELS.iter().enumerate() {
                let expected = row["toxblock"][label].as_f64().unwrap() as f32;
                let difference = (scaled[i] - expected).abs();
                worst = worst.max(difference);
                assert!(
                    difference <= 1e-5,
                    "{} {label}: {} vs {expected}",
                    row["id"],
                    scaled[i]
                );
            }
        }
    }
    eprintln!(
        "tox-block: largest difference from Python over {} texts: {worst:e}",
        rows.len()
    );

    check_harm(&environment, models);
    check_image_models(&environment, models);
    check_faces(&environment, models);
    check_inception(&environment, models);
    check_ocr(&environment, models);
}

/// The harm classifier against its Python pipeline (`models/text/classifier/make_reference.py`:
/// the `tokenizers` package, onnxruntime and the heads in numpy) on its committed reference
/// texts: the same token ids, embeddings within 1e-4 where the file gives them, and every
/// category's probability within 1e-4, each text alone and all in one batch.
fn check_harm(environment: &ort::environment::Environment, models: &std::path::Path) {
    use modgate::checks::harm::{self, tokenizer::HarmTokenizer, Heads, CATEGORIES};
    let path = inference::verify_model(models, &harm::ENCODER.model).unwrap();
    let mut session = inference::open_session(environment, &path).unwrap();
    let tokenizer =
        HarmTokenizer::from_file(&models.join(harm::TOKENIZER_FILE)).expect("the tokenizer");
    let heads = Heads::embedded().unwrap();
    let rows: Vec<serde_json::Value> =
        std::fs::read_to_string(format!("{MODELS}/text/classifier/reference.jsonl"))
            .expect("reference.jsonl")
            .lines()
            .map(|line| serde_json::from_str(line).expect("JSON"))
            .collect();
    assert!(rows.len() >= 100, "{} reference rows", rows.len());
    let ids: Vec<Vec<i64>> = rows
        .iter()
        .map(|row| {
            let text = row["text"].as_str().unwrap();
            tokenizer.windows_of(text, harm::ROW_TOKENS_MAX).unwrap()[0].clone()
        })
        .collect();
    let all: Vec<&[i64]> = ids.iter().map(Vec::as_slice).collect();
    let batched = inference::encoder_embeddings(&mut session, &harm::ENCODER, &all).unwrap();
    let (mut worst_embedding, mut worst) = (0.0f32, 0.0f32);
    for (at, row) in rows.iter().enumerate() {
        let expected_ids: Vec<i64> = row["input_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_i64().unwrap())
            .collect();
        assert_eq!(ids[at], expected_ids, "{}", row["text"]);
        let single =
            inference::encoder_embeddings(&mut session, &harm::ENCODER, &[&ids[at]]).unwrap();
        let from_batch = &batched[at * harm::DIM..(at + 1) * harm::DIM];
        for embedding in [&single[..], from_batch] {
            if let Some(expected) = row["embedding"].as_array() {
                for (got, expected) in embedding.iter().zip(expected) {
                    let difference = (got - expected.as_f64().unwrap() as f32).abs();
                    worst_embedding = worst_embedding.max(difference);
                    assert!(difference <= 1e-4, "{}: embedding", row["text"]);
                }
            }
            let probabilities = heads.probabilities(embedding);
            for (category, name) in CATEGORIES.iter().enumerate() {
                let head = harm::HEAD_NAMES[category];
                let expected = row["probs"][head].as_f64().unwrap() as f32;
                let difference = (probabilities[category] - expected).abs();
                worst = worst.max(difference);
                assert!(
                    difference <= 1e-4,
                    "{} {name}: {} vs {expected}",
                    row["text"],
                    probabilities[category]
                );
            }
        }
    }
    eprintln!(
        "harm: largest differences from Python over {} texts: embedding {worst_embedding:e}, \
         probability {worst:e}",
        rows.len()
    );
}

/// OCR against the reference package (rapidocr 3.10.0, `models/image/ocr_reference.json`) on
/// the committed part of its test set (`models/image/ocr_testset/`: text on solid and gradient
/// backgrounds), and on the whole set when it was made here (`make_ocr_set.py`, 240 images):
/// the same strings, boxes within 1 px, scores within 0.01 (`ocr.md`: the minimum-area
/// rectangle is not OpenCV's to the bit, which moves a corner by a pixel now and then).
fn check_ocr(environment: &ort::environment::Environment, models: &std::path::Path) {
    use modgate::inference::ocr::{OcrNets, NETS};
    let worker_models =
        modgate::inference::worker::WorkerModels::verified(environment, models, NETS).unwrap();
    let mut nets = OcrNets::open(&worker_models)
        .unwrap()
        .expect("all three nets");
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{MODELS}/image/ocr_reference.json")).unwrap(),
    )
    .unwrap();
    let whole_set = format!("{MODELS}/image/build/ocr_set");
    let directory = if std::path::Path::new(&whole_set).join("truth.json").exists() {
        whole_set
    } else {
        format!("{MODELS}/image/ocr_testset")
    };
    let (mut images, mut same, mut lines) = (0, 0, 0);
    let (mut worst_box, mut worst_score) = (0.0f64, 0.0f64);
    let mut differ = Vec::new();
    for (file, expected) in reference.as_object().unwrap() {
        let Ok(bytes) = std::fs::read(format!("{directory}/{file}")) else {
            continue;
        };
        let image = decode(&bytes, &probe(&bytes).unwrap(), usize::MAX).unwrap();
        let read = nets.read(&image).unwrap();
        images += 1;
        let texts: Vec<&str> = read.iter().map(|line| line.text.as_str()).collect();
        let want: Vec<&str> = expected["txts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        if texts != want {
            differ.push(format!("{file}: {texts:?} vs {want:?}"));
            continue;
        }
        let mut box_difference = 0.0f64;
        for (line, (quad, score)) in read.iter().zip(
            expected["boxes"]
                .as_array()
                .unwrap()
                .iter()
                .zip(expected["scores"].as_array().unwrap()),
        ) {
            for (got, want) in line.quad.iter().zip(quad.as_array().unwrap()) {
                for (g, w) in got.iter().zip(want.as_array().unwrap()) {
                    box_difference =
                        box_difference.max((f64::from(*g) - w.as_f64().unwrap()).abs());
                }
            }
            worst_score = worst_score.max((line.score - score.as_f64().unwrap()).abs());
            lines += 1;
        }
        worst_box = worst_box.max(box_difference);
        if box_difference <= 1.0 {
            same += 1;
        } else {
            differ.push(format!("{file}: boxes differ by {box_difference} px"));
        }
    }
    eprintln!(
        "OCR over {images} images of {directory}: {same} read as the reference ({lines} lines); \
         largest box difference {worst_box} px, score difference {worst_score:.2e}; \
         differ: {differ:#?}"
    );
    assert!(images >= 40, "{images} OCR test images");
    assert!(
        same * 100 >= images * 98,
        "{} of {images} differ",
        images - same
    );
    assert!(worst_score <= 0.01, "OCR score difference {worst_score}");
}

/// nsfwjs's InceptionV3 through our decoders and preprocessing against its scores on
/// Pillow-decoded pixels (`models/image/make_reference_inception.py`).
fn check_inception(environment: &ort::environment::Environment, models: &std::path::Path) {
    use modgate::checks::nsfwjs_inception::{MODEL, SIDE};
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{MODELS}/image/reference_scores_inception_v3.json"))
            .unwrap(),
    )
    .unwrap();
    let path = inference::verify_model(models, &MODEL.model).unwrap();
    let mut session = inference::open_session(environment, &path).unwrap();
    let classes = ["drawing", "hentai", "neutral", "porn", "sexy"];
    let mut worst: [(&str, f32); 2] = [("", 0.0); 2]; // non-JPEG, JPEG
    for (file, expected) in reference.as_object().unwrap() {
        let bytes = std::fs::read(format!("{MODELS}/image/testimages/{file}")).unwrap();
        let image = decode(&bytes, &probe(&bytes).unwrap(), usize::MAX).unwrap();
        let mut input = vec![0.0; SIDE * SIDE * 3];
        modgate::image::resize::corner_aligned_input(&image, SIDE, &mut input);
        let got = inference::image_rows(&mut session, &MODEL, input).unwrap();
        let jpeg = file.ends_with(".jpg") as usize;
        for (i, class) in classes.iter().enumerate() {
            let difference = (got[i] - expected[class].as_f64().unwrap() as f32).abs();
            if difference > worst[jpeg].1 {
                worst[jpeg] = (file, difference);
            }
        }
    }
    eprintln!("InceptionV3, largest differences from the reference: {worst:?}");
    assert!(reference.as_object().unwrap().len() >= 20);
    assert!(worst[0].1 <= 1e-3, "InceptionV3, non-JPEG: {:?}", worst[0]);
    assert!(worst[1].1 <= 0.02, "InceptionV3, JPEG: {:?}", worst[1]);
}

/// The face detector against the reference package's faces (`models/image/faces_reference.json`,
/// made by `faces_reference.py` on Pillow-decoded pixels) on every reference image: the same
/// faces, boxes, scores and landmarks. Other files than JPEG decode alike, so they match
/// closely; JPEG decoders differ by a few levels per pixel.
fn check_faces(environment: &ort::environment::Environment, models: &std::path::Path) {
    use modgate::inference::faces::{FaceNets, NETS};
    let worker_models =
        modgate::inference::worker::WorkerModels::verified(environment, models, NETS).unwrap();
    let mut nets = FaceNets::open(&worker_models)
        .unwrap()
        .expect("all three nets");
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{MODELS}/image/faces_reference.json")).unwrap(),
    )
    .unwrap();
    // Non-JPEG, JPEG: the largest difference and where.
    let mut worst: [(String, f64); 2] = Default::default();
    let mut images = 0;
    let mut with_faces = 0;
    for (key, expected) in reference.as_object().unwrap() {
        let Some(file) = key.strip_prefix("testimages/") else {
            continue;
        };
        let bytes = std::fs::read(format!("{MODELS}/image/testimages/{file}")).unwrap();
        let image = decode(&bytes, &probe(&bytes).unwrap(), usize::MAX).unwrap();
        let faces = nets.detect_within(&image, usize::MAX).unwrap();
        let expected = expected.as_array().unwrap();
        assert_eq!(faces.len(), expected.len(), "{file}: {faces:?}");
        let jpeg = file.ends_with(".jpg") as usize;
        for (face, want) in faces.iter().zip(expected) {
            let number = |v: &serde_json::Value| v.as_f64().unwrap();
            let mut difference = (f64::from(face.score) - number(&want["score"])).abs();
            for (got, want) in face.bounds.iter().zip(want["box"].as_array().unwrap()) {
                difference = difference.max((f64::from(*got) - number(want)).abs() / 100.0);
            }
            for (got, want) in face
                .landmarks
                .iter()
                .zip(want["landmarks"].as_array().unwrap())
            {
                for (got, want) in got.iter().zip(want.as_array().unwrap()) {
                    difference = difference.max((f64::from(*got) - number(want)).abs() / 100.0);
                }
            }
            if difference > worst[jpeg].1 {
                worst[jpeg] = (file.to_owned(), difference);
            }
        }
        images += 1;
        with_faces += usize::from(!faces.is_empty());
    }
    eprintln!(
        "faces over {images} images ({with_faces} with a face): largest difference \
         (score, or pixels / 100) non-JPEG {:?}, JPEG {:?}",
        worst[0], worst[1]
    );
    assert!(images >= 20 && with_faces >= 5);
    assert!(worst[0].1 <= 1e-3, "faces, non-JPEG: {:?}", worst[0]);
    assert!(worst[1].1 <= 0.03, "faces, JPEG: {:?}", worst[1]);
}

/// Both image models through our decoders and preprocessing against the original pipelines'
/// scores (`models/image/reference_scores*.json`), decoding at full size as they do.
///
/// nsfwjs on JPEG files is compared with the reference made from libjpeg-turbo-decoded
/// pixels: its own pipeline decodes with jpeg-js, which no other decoder reproduces
/// (`models/image/README.md`). zune-jpeg's IDCT is not libjpeg's either: the differences on
/// JPEG files are bounded separately below.
fn check_image_models(environment: &ort::environment::Environment, models: &std::path::Path) {
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{MODELS}/image/reference_scores_libjpeg_turbo_decode.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let path = inference::verify_model(models, &modgate::checks::open_nsfw::MODEL.model).unwrap();
    let mut open_nsfw = inference::open_session(environment, &path).unwrap();
    let path = inference::verify_model(models, &modgate::checks::nsfwjs::MODEL.model).unwrap();
    let mut nsfwjs = inference::open_session(environment, &path).unwrap();
    let mut worst = [("", 0.0f32); 4]; // open-NSFW non-JPEG, JPEG; nsfwjs non-JPEG, JPEG
    let classes = ["drawing", "hentai", "neutral", "porn", "sexy"];
    let mut count = 0;
    for (file, expected) in reference.as_object().unwrap() {
        let bytes = std::fs::read(format!("{MODELS}/image/testimages/{file}")).unwrap();
        let found = probe(&bytes).unwrap();
        let image = decode(&bytes, &found, usize::MAX).unwrap();
        let jpeg = file.ends_with(".jpg") as usize;
        let mut input = vec![0.0; INPUT_LEN];
        opennsfw_input(&image, &mut input).unwrap();
        let got = modgate::checks::open_nsfw::probs(&mut open_nsfw, input).unwrap()[0];
        let difference = (got - expected["opennsfw"].as_f64().unwrap() as f32).abs();
        if difference > worst[jpeg].1 {
            worst[jpeg] = (file, difference);
        }
        let mut input = vec![0.0; INPUT_LEN];
        nsfwjs_input(&image, &mut input);
        let got = modgate::checks::nsfwjs::probs(&mut nsfwjs, input).unwrap()[0];
        for (i, class) in classes.iter().enumerate() {
            let difference = (got[i] - expected["nsfwjs"][class].as_f64().unwrap() as f32).abs();
            if difference > worst[2 + jpeg].1 {
                worst[2 + jpeg] = (file, difference);
            }
        }
        count += 1;
    }
    assert!(count >= 20);
    eprintln!(
        "image models, largest differences from the originals over {count} images: {worst:?}"
    );
    // The serving path decodes large JPEGs at a reduced DCT scale (at least 256 px a side):
    // how far that moves the scores from a full decode.
    let mut scaled_worst = [0.0f32; 2];
    for file in [
        "jpeg_baseline_retina_1152x864_1mp.jpg",
        "jpeg_444_rocket_640x427.jpg",
        "jpeg_baseline_astronaut_512x384.jpg",
    ] {
        let bytes = std::fs::read(format!("{MODELS}/image/testimages/{file}")).unwrap();
        let found = probe(&bytes).unwrap();
        let full = decode(&bytes, &found, usize::MAX).unwrap();
        let scaled = decode(&bytes, &found, 256).unwrap();
        let scores = |image: &modgate::image::Rgb8,
                      open_nsfw: &mut ort::session::Session,
                      nsfwjs: &mut ort::session::Session| {
            let mut input = vec![0.0; INPUT_LEN];
            opennsfw_input(image, &mut input).unwrap();
            let a = modgate::checks::open_nsfw::probs(open_nsfw, input).unwrap()[0];
            let mut input = vec![0.0; INPUT_LEN];
            nsfwjs_input(image, &mut input);
            (a, modgate::checks::nsfwjs::probs(nsfwjs, input).unwrap()[0])
        };
        let (full_a, full_b) = scores(&full, &mut open_nsfw, &mut nsfwjs);
        let (scaled_a, scaled_b) = scores(&scaled, &mut open_nsfw, &mut nsfwjs);
        scaled_worst[0] = scaled_worst[0].max((full_a - scaled_a).abs());
        // Only hentai, porn and sexy feed modgate's categories.
        for i in [1, 3, 4] {
            scaled_worst[1] = scaled_worst[1].max((full_b[i] - scaled_b[i]).abs());
        }
        eprintln!("  full {full_b:?}\n  scaled {scaled_b:?}");
        eprintln!(
            "{file}: decoded {}x{} instead of {}x{}",
            scaled.width, scaled.height, full.width, full.height
        );
    }
    eprintln!(
        "DCT-scaled decode vs full decode: open-NSFW {:e}, nsfwjs {:e}",
        scaled_worst[0], scaled_worst[1]
    );
    // PNG, WebP and GIF decode like the references: the pipelines match within 1e-3.
    assert!(worst[0].1 <= 1e-3, "open-NSFW, non-JPEG: {:?}", worst[0]);
    assert!(worst[2].1 <= 1e-3, "nsfwjs, non-JPEG: {:?}", worst[2]);
    // JPEG: decoder differences, bounded and documented.
    assert!(worst[1].1 <= 0.02, "open-NSFW, JPEG: {:?}", worst[1]);
    assert!(worst[3].1 <= 0.02, "nsfwjs, JPEG: {:?}", worst[3]);
}
