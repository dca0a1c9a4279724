//! Text checks per KiB: normalisation, the word list, the linear model and the PII scanners,
//! as the `default` workflow runs them on a shard, and the two language detectors (also on a
//! short message, and with cold caches, as a check at an ordinary load finds them); and
//! tox-block's model run (the `advanced` workflow).

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkGroup, Criterion, Throughput,
};
use modgate::checks::{pii, profanity_svm::ProfanitySvm, wordlist::WordList};
use modgate::text::normalize::Normalizer;

#[path = "common/text_sample.rs"]
mod text_sample;
use text_sample::sample_kib;

fn text_checks(c: &mut Criterion) {
    let wordlist = WordList::embedded().unwrap();
    let svm = ProfanitySvm::embedded().unwrap();
    let ascii = sample_kib();
    let unicode = ascii.replace('a', "á").replace("the", "ｔｈｅ");
    let models = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/models"));
    let profiles = std::fs::read(models.join(modgate::text::langid::PROFILES_FILE))
        .expect("models/cache/langdetect_profiles.json (run `make fetch`)");
    let langid = modgate::text::langid::LangId::from_json(profiles).unwrap();
    // A short message: the language detectors' cost on what most texts are.
    let mut short = c.benchmark_group("text_short");
    let message = "Thanks, see you at three tomorrow!";
    short.bench_function("language", |b| {
        b.iter(|| modgate::text::language::detect(std::hint::black_box(message)))
    });
    short.bench_function("langid", |b| {
        b.iter(|| langid.detect(std::hint::black_box(message)))
    });
    // One the classifier is unsure of (Russian or Ukrainian?): whatlang compares the best few.
    let unsure = "Спасибо за новости, я буду там завтра в три часа.";
    short.bench_function("langid_unsure", |b| {
        b.iter(|| langid.detect(std::hint::black_box(unsure)))
    });
    short.finish();
    // At an ordinary load the caches are cold when a check starts (other work and idle time
    // came between two checks): the same detection after 64 MB were written.
    let mut cold = c.benchmark_group("text_cold");
    let mut flood = vec![0u8; 64 << 20];
    let mut normalizer = Normalizer::default();
    let mut normalised = String::new();
    bench_cold(&mut cold, "langid/ascii", &mut flood, || {
        std::hint::black_box(langid.detect(&ascii));
    });
    bench_cold(&mut cold, "normalize/ascii", &mut flood, || {
        std::hint::black_box(normalizer.normalize(&ascii, &mut normalised));
    });
    bench_cold(&mut cold, "wordlist/ascii", &mut flood, || {
        std::hint::black_box(wordlist.score(&normalised));
    });
    bench_cold(&mut cold, "profanity_svm/ascii", &mut flood, || {
        std::hint::black_box(svm.score(&ascii));
    });
    bench_cold(&mut cold, "pii/ascii", &mut flood, || {
        std::hint::black_box(pii::scan(&ascii));
    });
    cold.finish();
    let mut group = c.benchmark_group("text_per_kib");
    for (name, text) in [("ascii", &ascii), ("unicode", &unicode)] {
        group.throughput(Throughput::Bytes(text.len() as u64));
        let mut normalised = String::new();
        let mut normalizer = Normalizer::default();
        group.bench_function(format!("normalize/{name}"), |b| {
            b.iter(|| normalizer.normalize(std::hint::black_box(text), &mut normalised))
        });
        normalizer.normalize(text, &mut normalised);
        group.bench_function(format!("wordlist/{name}"), |b| {
            b.iter(|| wordlist.score(std::hint::black_box(&normalised)))
        });
        group.bench_function(format!("profanity_svm/{name}"), |b| {
            b.iter(|| svm.score(std::hint::black_box(text)))
        });
        group.bench_function(format!("pii/{name}"), |b| {
            b.iter(|| pii::scan(std::hint::black_box(text)))
        });
        group.bench_function(format!("language/{name}"), |b| {
            b.iter(|| modgate::text::language::detect(std::hint::black_box(text)))
        });
        group.bench_function(format!("langid/{name}"), |b| {
            b.iter(|| langid.detect(std::hint::black_box(text)))
        });
        group.bench_function(format!("default_workflow/{name}"), |b| {
            b.iter(|| {
                let disguised = normalizer.normalize(text, &mut normalised);
                let words = wordlist.score(&normalised);
                let mut model = svm.score(text);
                if disguised {
                    model = model.max(svm.score(&normalised));
                }
                let found = pii::scan(text);
                (words, model, found)
            })
        });
    }
    group.finish();
}

/// Benchmarks `routine` with cold caches: `flood` (larger than the caches) is written before
/// each run.
fn bench_cold(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    flood: &mut [u8],
    mut routine: impl FnMut(),
) {
    let mut round = 0u8;
    group.bench_function(name, |b| {
        b.iter_batched(
            || {
                round = round.wrapping_add(1);
                flood.iter_mut().step_by(64).for_each(|byte| *byte = round);
            },
            |()| routine(),
            BatchSize::PerIteration,
        )
    });
}

/// One tox-block run (the `advanced` workflow's model): one 100-token window, and the 8
/// windows of a long text in one batch.
fn toxblock_runs(c: &mut Criterion) {
    use modgate::inference;
    let models = concat!(env!("CARGO_MANIFEST_DIR"), "/models");
    let library = format!("{models}/cache/libonnxruntime.so.1.31.1");
    // Criterion runs the benches on the main thread, with no other thread yet.
    inference::disable_runtime_telemetry();
    let environment = match inference::load_runtime(std::path::Path::new(&library)) {
        Ok(environment) => environment,
        Err(error) => {
            eprintln!("tox-block benches skipped: {error} (run `python3 models/fetch.py` first)");
            return;
        }
    };
    let dir = std::path::Path::new(models);
    let mut session = inference::open_session(
        &environment,
        &inference::verify_model(dir, &modgate::checks::toxblock::MODEL).unwrap(),
    )
    .unwrap();
    let (text_models, _) = modgate::checks::TextModels::load(dir).unwrap();
    let tokenizer = text_models.tox_tokenizer.unwrap();
    let mut ids = Vec::new();
    tokenizer.ids(&sample_kib().repeat(4), &mut ids);
    let windows = modgate::checks::toxblock::windows(&ids, &[]);
    let one: Vec<i32> = windows[..100].to_vec();
    let eight: Vec<i32> = windows.iter().copied().cycle().take(800).collect();
    let mut group = c.benchmark_group("model");
    group.sample_size(30);
    group.bench_function("toxblock_1_window", |b| {
        b.iter(|| inference::toxblock_probs(&mut session, one.clone()).unwrap())
    });
    group.throughput(Throughput::Elements(8));
    group.bench_function("toxblock_batch_of_8_windows", |b| {
        b.iter(|| inference::toxblock_probs(&mut session, eight.clone()).unwrap())
    });
    group.finish();
}

criterion_group!(benches, text_checks, toxblock_runs);
criterion_main!(benches);
