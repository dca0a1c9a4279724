//! Texts before the checks: normalisation for matching ([`normalize`]) and the language a
//! text is written in ([`language`]).

pub mod language;
pub mod normalize;
