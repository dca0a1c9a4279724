//! Hash maps of the request path, with a fast hasher.
//!
//! std's default SipHash costs about 20 ns per short key, and a text check looks up hundreds of
//! tokens (the profanity model's vocabulary, tox-block's word index) and a few keys and
//! organizations (limits, the store's cache): SipHash was about 6 % of a 1 KiB text check.
//! `foldhash` (the hasher hashbrown itself defaults to; maintained, no unsafe in our use) is
//! several times faster on short strings. SipHash's strength is resisting a caller who
//! chooses keys to collide in a map that caller fills: these maps are filled from the models
//! and the store only (and a per-shard table of peer addresses of bounded size), while callers
//! only look up in them, which no choice of key slows down; the seed is random per process all
//! the same.

/// A `HashMap` with foldhash's per-process random seed.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Words of at most this many bytes can be [`packed`].
pub const PACKED_BYTES_MAX: usize = 16;

/// `word`'s bytes as one integer, zero-padded, if it has at most [`PACKED_BYTES_MAX`]: a key
/// that costs no string hash or comparison. Distinct words get distinct keys as long as no
/// word holds a zero byte (the tokens and normalised words of the text checks never do).
pub fn packed(word: &[u8]) -> Option<u128> {
    let mut bytes = [0u8; PACKED_BYTES_MAX];
    bytes.get_mut(..word.len())?.copy_from_slice(word);
    Some(u128::from_le_bytes(bytes))
}
