//! Instructions per call of each text check's own code, counted by valgrind's callgrind: on a
//! machine without hardware counters and with noisy wall times (this VM's criterion figures
//! swing by a third from run to run), a count of instructions is the steady measure of a
//! change to a check's code. `tuning/instructions.sh OLD NEW` runs two builds of this program
//! and prints both counts per part.
//!
//! `text_instructions PART CALLS` runs one part on the 1 KiB text of `benches/text.rs` (or a
//! short message), once to warm up and then `CALLS` times inside [`measured`], the function
//! callgrind is told to count (`--toggle-collect`). Parts: `normalize`, `wordlist`,
//! `profanity_svm`, `pii`, `langid`, `langid_short`, `default` (the `default` workflow's
//! checks, as the bench runs them). With `COLD` set (not empty) in the environment, every call
//! finds the caches cold (64 MB are written between calls, outside [`measured`]).

use modgate::checks::{pii, profanity_svm::ProfanitySvm, wordlist::WordList};
use modgate::text::langid::LangId;
use modgate::text::normalize::Normalizer;

#[path = "../benches/common/text_sample.rs"]
mod text_sample;
use text_sample::sample_kib;

/// Runs `part` `calls` times; the only code callgrind counts.
#[inline(never)]
fn measured(calls: u64, part: &mut dyn FnMut()) {
    for _ in 0..calls {
        part();
    }
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: text_instructions PART CALLS";
    let name = args.next().ok_or(usage)?;
    let calls: u64 = args
        .next()
        .and_then(|calls| calls.parse().ok())
        .ok_or(usage)?;
    let text = sample_kib();
    let models = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/models"));
    let profiles =
        std::fs::read(models.join(modgate::text::langid::PROFILES_FILE)).map_err(|error| {
            let file = modgate::text::langid::PROFILES_FILE;
            format!("models/{file} (run `make fetch`): {error}")
        })?;
    let langid = LangId::from_json(profiles)?;
    let wordlist = WordList::embedded()?;
    let svm = ProfanitySvm::embedded()?;
    let mut normalizer = Normalizer::default();
    let mut normalised = String::new();
    normalizer.normalize(&text, &mut normalised);
    let text = text.as_str();
    let mut part: Box<dyn FnMut()> = match name.as_str() {
        "normalize" => Box::new(|| {
            std::hint::black_box(normalizer.normalize(std::hint::black_box(text), &mut normalised));
        }),
        "wordlist" => Box::new(|| {
            std::hint::black_box(wordlist.score(std::hint::black_box(&normalised)));
        }),
        "profanity_svm" => Box::new(|| {
            std::hint::black_box(svm.score(std::hint::black_box(text)));
        }),
        "pii" => Box::new(|| {
            std::hint::black_box(pii::scan(std::hint::black_box(text)));
        }),
        "langid" => Box::new(|| {
            std::hint::black_box(langid.detect(std::hint::black_box(text)));
        }),
        "langid_short" => Box::new(|| {
            let message = "Thanks, see you at three tomorrow!";
            std::hint::black_box(langid.detect(std::hint::black_box(message)));
        }),
        "default" => Box::new(|| {
            let disguised = normalizer.normalize(std::hint::black_box(text), &mut normalised);
            let words = wordlist.score(&normalised);
            let mut model = svm.score(text);
            if disguised {
                model = model.max(svm.score(&normalised));
            }
            std::hint::black_box((words, model, pii::scan(text)));
        }),
        other => return Err(format!("unknown part {other}; {usage}")),
    };
    part();
    if std::env::var_os("COLD").is_some_and(|cold| !cold.is_empty()) {
        // Every call on cold caches, as a check at an ordinary load finds them: 64 MB written
        // between calls, outside `measured` (what `text_cold/*` in `benches/text.rs` does).
        let mut flood = vec![0u8; 64 << 20];
        for round in 0..calls {
            flood
                .iter_mut()
                .step_by(64)
                .for_each(|byte| *byte = round as u8);
            std::hint::black_box(&flood);
            measured(1, &mut part);
        }
    } else {
        measured(calls, &mut part);
    }
    Ok(())
}
