//! The real models against the outputs of their original Python packages, on the committed
//! reference sets (needs `python3 models/fetch.py` first, as `make test` does).

use modgate::checks::toxblock::{rescale, ToxTokenizer, LABELS};
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
    let environment = inference::load_runtime(std::path::Path::new(&library))
        .unwrap_or_else(|e| panic!("{e} (run `python3 models/fetch.py`)"));
    let models = std::path::Path::new(MODELS);

    // tox-block: our tokenizer feeds the ONNX model; rescaled scores within 1e-5 of
    // tox-block's `make_predictions`, one text at a time and all in one batch.
    let path = inference::verify_model(models, &inference::TOXBLOCK).unwrap();
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
}
