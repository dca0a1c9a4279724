//! Checks: the tools (`source`s) that score categories of a text or an image in [0, 1].
//!
//! Workflows name checks by these source names; an import that names another is refused.

/// The check sources this build has.
pub const CHECK_NAMES: &[&str] = &[];
