//! The language a text is written in, with `whatlang` (trigram profiles of 70 languages),
//! reported as an ISO 639-1 code and a confidence in [0, 1]: the detector of the `language`
//! check. Every other text's language comes from [`super::langid`].
//!
//! Only the first [`SAMPLE_CHARS_MAX`] characters are read, so the cost is bounded whatever the
//! text's length. It is not small: whatlang compares each language's profile with the text,
//! 34 µs for a short message and 94 µs for 1 KiB (`cargo bench --bench text -- language`), six
//! times a `default` check's own work, so only a workflow that names the `language` check pays
//! it. A detection whatlang itself calls unreliable (short or mixed texts) keeps its confidence
//! but is [`Language::reliable`] false; a text with no letters has no language.

use serde::Serialize;

/// Characters read, at most.
pub const SAMPLE_CHARS_MAX: usize = 400;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Language {
    /// ISO 639-1.
    pub code: &'static str,
    pub confidence: f64,
    #[serde(skip)]
    pub reliable: bool,
}

impl Language {
    /// A finding of [`super::langid`]: reliable from a confidence of 0.9.
    pub fn fast(code: &'static str, confidence: f64) -> Language {
        let confidence = confidence.clamp(0.0, 1.0);
        Language {
            code,
            confidence,
            reliable: confidence >= 0.9,
        }
    }
}

/// The language of `text`, if it has one.
pub fn detect(text: &str) -> Option<Language> {
    let sample = super::first_chars(text, SAMPLE_CHARS_MAX);
    let info = whatlang::detect(sample)?;
    Some(Language {
        code: iso_639_1(info.lang()),
        confidence: info.confidence().clamp(0.0, 1.0),
        reliable: info.is_reliable(),
    })
}

/// The whatlang language of an ISO 639-1 code, if whatlang has it.
pub(super) fn whatlang_of(code: &str) -> Option<whatlang::Lang> {
    whatlang::Lang::all()
        .iter()
        .copied()
        .find(|&lang| iso_639_1(lang) == code)
}

/// `text`'s language among `candidates` only, by whatlang (see [`super::langid`]).
pub(super) fn detect_among(text: &str, candidates: Vec<whatlang::Lang>) -> Option<Language> {
    let info = whatlang::Detector::with_allowlist(candidates).detect(text)?;
    Some(Language {
        code: iso_639_1(info.lang()),
        confidence: info.confidence().clamp(0.0, 1.0),
        reliable: info.is_reliable(),
    })
}

/// ISO 639-1 for each language whatlang knows (its own codes are ISO 639-3).
fn iso_639_1(lang: whatlang::Lang) -> &'static str {
    use whatlang::Lang::*;
    match lang {
        Afr => "af",
        Aka => "ak",
        Amh => "am",
        Ara => "ar",
        Aze => "az",
        Bel => "be",
        Ben => "bn",
        Bul => "bg",
        Cat => "ca",
        Ces => "cs",
        Cmn => "zh",
        Cym => "cy",
        Dan => "da",
        Deu => "de",
        Ell => "el",
        Eng => "en",
        Epo => "eo",
        Est => "et",
        Fin => "fi",
        Fra => "fr",
        Guj => "gu",
        Heb => "he",
        Hin => "hi",
        Hrv => "hr",
        Hun => "hu",
        Hye => "hy",
        Ind => "id",
        Ita => "it",
        Jav => "jv",
        Jpn => "ja",
        Kan => "kn",
        Kat => "ka",
        Khm => "km",
        Kor => "ko",
        Lat => "la",
        Lav => "lv",
        Lit => "lt",
        Mal => "ml",
        Mar => "mr",
        Mkd => "mk",
        Mya => "my",
        Nep => "ne",
        Nld => "nl",
        Nob => "nb",
        Ori => "or",
        Pan => "pa",
        Pes => "fa",
        Pol => "pl",
        Por => "pt",
        Ron => "ro",
        Rus => "ru",
        Sin => "si",
        Slk => "sk",
        Slv => "sl",
        Sna => "sn",
        Spa => "es",
        Srp => "sr",
        Swe => "sv",
        Tam => "ta",
        Tel => "te",
        Tgl => "tl",
        Tha => "th",
        Tuk => "tk",
        Tur => "tr",
        Ukr => "uk",
        Urd => "ur",
        Uzb => "uz",
        Vie => "vi",
        Yid => "yi",
        Zul => "zu",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn languages_are_told_apart() {
        for &(text, code) in &super::super::tests::SENTENCES {
            let found = detect(text).unwrap();
            assert_eq!(found.code, code, "{text}");
            assert!(
                found.reliable && found.confidence > 0.5,
                "{text}: {found:?}"
            );
        }
    }

    #[test]
    fn texts_without_letters_have_none() {
        assert_eq!(detect(""), None);
        assert_eq!(detect("12345 !!! 678"), None);
    }

    #[test]
    fn every_whatlang_language_has_a_two_letter_code() {
        for lang in whatlang::Lang::all() {
            let code = iso_639_1(*lang);
            assert!(
                code.len() == 2 && code.bytes().all(|b| b.is_ascii_lowercase()),
                "{lang:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_text_is_read_or_left(text in "\\PC{0,600}") {
            if let Some(found) = detect(&text) {
                prop_assert!((0.0..=1.0).contains(&found.confidence));
            }
        }
    }
}
