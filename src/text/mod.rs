//! Texts before the checks: normalisation for matching ([`normalize`]) and the language a
//! text is written in: [`langid`] for every text, [`language`] (whatlang, more languages) for
//! the `language` check.

pub mod langid;
pub mod language;
pub mod normalize;
