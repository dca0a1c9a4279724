//! 12 MP JPEG to both models' inputs, against libjpeg-turbo's DCT-scaled decode in Pillow,
//! interleaved in rounds so that both sides see the same machine (this host is noisy: compare
//! the ratios, not the absolute times). Run by `benches/jpeg_vs_pillow.sh`, which prepares the
//! pinned Pillow; `cargo bench --bench jpeg_pipeline` alone measures modgate's side only.

use std::time::Instant;

mod common;

use modgate::image::decode::decode;
use modgate::image::probe::probe;
use modgate::image::resize::{nsfwjs_input, opennsfw_input, INPUT_LEN};

const ROUNDS: usize = 5;
const RUNS: usize = 20;

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let root = env!("CARGO_MANIFEST_DIR");
    let bytes = common::jpeg_12mp();
    let file = format!("{root}/target/bench-12mp.jpg");
    std::fs::write(&file, &bytes).unwrap();
    let python = format!("{root}/target/pillow-venv/bin/python");
    let with_pillow = std::path::Path::new(&python).exists();
    let mut ratios = Vec::new();
    for round in 0..ROUNDS {
        let ours = median(
            (0..RUNS)
                .map(|_| {
                    let start = Instant::now();
                    let found = probe(&bytes).unwrap();
                    let image = decode(
                        &bytes,
                        &found,
                        modgate::checks::registry::image_min_side_px(),
                    )
                    .unwrap();
                    let mut a = vec![0.0f32; INPUT_LEN];
                    let mut b = vec![0.0f32; INPUT_LEN];
                    opennsfw_input(&image, &mut a).unwrap();
                    nsfwjs_input(&image, &mut b);
                    std::hint::black_box((a, b));
                    start.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        );
        if !with_pillow {
            println!("round {round}: modgate decode + both model inputs {ours:.2} ms (Pillow not set up)");
            continue;
        }
        let output = std::process::Command::new(&python)
            .arg(format!("{root}/models/image/bench_pillow_draft.py"))
            .arg(&file)
            .args(["-n", &RUNS.to_string()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        let pillow: f64 = text
            .lines()
            .find(|line| line.starts_with("(b)"))
            .and_then(|line| line.split("median").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|number| number.parse().ok())
            .unwrap_or(f64::NAN);
        ratios.push(ours / pillow);
        println!("round {round}: modgate {ours:.2} ms, Pillow draft + resize {pillow:.2} ms, ratio {:.2}", ours / pillow);
    }
    if !ratios.is_empty() {
        println!(
            "median ratio over {ROUNDS} rounds: {:.2} (target: at most 1.20)",
            median(ratios)
        );
    }
}
