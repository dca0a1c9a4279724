//! Text checks per KiB: normalisation, the word list, the linear model and the PII scanners,
//! as the `default` workflow runs them on a shard (tox-block is a model run: see the load
//! tool and `modgate eval` for its cost).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use modgate::checks::{pii, profanity_svm::ProfanitySvm, wordlist::WordList};
use modgate::text::normalize::Normalizer;

/// About 1 KiB of ordinary comment text, with a little of everything the checks look for.
fn sample_kib() -> String {
    let sentence = "Thanks for the review! I ordered the lamp on Monday, it arrived broken, and support at help@example.com never answered. ";
    let mut text = String::new();
    while text.len() < 1024 {
        text.push_str(sentence);
    }
    text.truncate(1024);
    text
}

fn text_checks(c: &mut Criterion) {
    let wordlist = WordList::embedded().unwrap();
    let svm = ProfanitySvm::embedded().unwrap();
    let ascii = sample_kib();
    let unicode = ascii.replace('a', "á").replace("the", "ｔｈｅ");
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

criterion_group!(benches, text_checks);
criterion_main!(benches);
