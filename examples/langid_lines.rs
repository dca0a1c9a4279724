//! The language [`LangId`] finds for each line of standard input, one line out per line in:
//! `code<TAB>confidence<TAB>reliable<TAB>text` (`-` for a line without letters). What
//! `models/text/perspective_language_study.py` reads to count the English comments that
//! Perspective's route would refuse as another language (`models/text/LANGUAGE_STATS.md`).

use std::io::{BufRead, Write};

use modgate::text::langid::LangId;

fn main() -> Result<(), String> {
    let models = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/models"));
    let file = modgate::text::langid::PROFILES_FILE;
    let profiles = std::fs::read(models.join(file))
        .map_err(|error| format!("models/{file} (run `make fetch`): {error}"))?;
    let langid = LangId::from_json(profiles)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|error| error.to_string())?;
        let written = match langid.detect(&line) {
            Some(language) => writeln!(
                out,
                "{}\t{:.4}\t{}\t{line}",
                language.code, language.confidence, language.reliable
            ),
            None => writeln!(out, "-\t0\tfalse\t{line}"),
        };
        written.map_err(|error| error.to_string())?;
    }
    out.flush().map_err(|error| error.to_string())
}
