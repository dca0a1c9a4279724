//! Texts before the checks: normalisation for matching ([`normalize`]).

pub mod normalize;
