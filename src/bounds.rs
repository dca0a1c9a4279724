//! The limits the interface promises, in one place, with their units in their names.
//!
//! These are the outer bounds of the contract (`docs/interface.md` and the OpenAPI document
//! state them to callers): a configuration or a plan may tighten them, never widen them, and
//! `Config::validate` refuses one that tries. MB and megapixels are decimal; KiB is binary.
//! Limits that only protect the server (head sizes, buffer sizes) live beside the code they
//! bound, not here.

/// Encoded image bytes, uploaded or downloaded: 15 MB.
pub const IMAGE_BYTES_MAX: usize = 15_000_000;
/// Pixels on either side of an image.
pub const IMAGE_SIDE_PX_MAX: u32 = 16_384;
/// Pixels of an image on the largest plan (50 MP): the most any plan may allow.
pub const IMAGE_PIXELS_MAX: u64 = 50_000_000;
/// Characters (Unicode scalar values) of `text` on the largest plan: the most any plan may
/// allow.
pub const TEXT_CHARS_MAX: u32 = 20_000;
/// Characters of a text's `context`, on every plan.
pub const CONTEXT_CHARS_MAX: usize = 2_000;
/// Characters of a `ref`; at least one, none a control character.
pub const REF_CHARS_MAX: usize = 128;
/// Bytes of a compatible form's field other than the payload (`media`, `text`): 64 KiB.
pub const FORM_FIELD_BYTES_MAX: usize = 64 * 1024;
/// Time for a compatible form to arrive, from the end of the request head.
pub const FORM_TIMEOUT_MS: u64 = 10_000;
/// Redirects a `url` download follows.
pub const DOWNLOAD_REDIRECTS_MAX: u32 = 3;
/// Time for a whole `url` download (name lookup, connection, redirects and body).
pub const DOWNLOAD_TIMEOUT_MS: u64 = 10_000;
/// Grace delay of a rotated key, at most 24 hours.
pub const ROTATION_GRACE_MS_MAX: i64 = 24 * 3600 * 1000;

/// Whether `name` is 1 to `bytes_max` of `[a-z0-9_-]`: the names of workflows and lists.
pub fn is_plain_name(name: &str, bytes_max: usize) -> bool {
    is_name_of(name, bytes_max, b"_-")
}

/// Whether `name` is 1 to `bytes_max` of lowercase ASCII letters, digits and `punctuation`.
pub fn is_name_of(name: &str, bytes_max: usize, punctuation: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= bytes_max
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || punctuation.contains(&b))
}
