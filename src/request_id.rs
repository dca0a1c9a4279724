//! Request ids: unique across shards and restarts, ordered by time, made without coordination.
//!
//! An id is 128 bits written as 26 Crockford base-32 characters (the ULID layout):
//! 48 bits of Unix milliseconds, 8 bits of shard number, 72 bits of a per-shard counter that
//! starts at a random value drawn from the OS at start-up. Two shards never share the shard
//! bits; two runs of the same shard would need the same millisecond and counters within 2^72
//! of each other to collide. Ids from one shard sort in issue order within a millisecond.

use std::cell::Cell;

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
pub const REQUEST_ID_LEN: usize = 26;
const COUNTER_BITS: u32 = 72;
const COUNTER_MASK: u128 = (1 << COUNTER_BITS) - 1;

/// An id, ready to be written: always 26 ASCII characters. It keeps the milliseconds it was
/// stamped with (they are also its first 48 bits, so equality and order are the text's).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId {
    text: [u8; REQUEST_ID_LEN],
    unix_ms: u64,
}

impl RequestId {
    pub fn as_str(&self) -> &str {
        // The bytes come from ALPHABET only.
        std::str::from_utf8(&self.text).unwrap_or("")
    }

    pub fn from_bits(bits: u128) -> Self {
        let mut text = [0u8; REQUEST_ID_LEN];
        for (i, slot) in text.iter_mut().enumerate() {
            let shift = 5 * (REQUEST_ID_LEN - 1 - i);
            *slot = ALPHABET[((bits >> shift) & 31) as usize];
        }
        RequestId {
            text,
            unix_ms: (bits >> 80) as u64,
        }
    }

    /// The Unix milliseconds the id was stamped with: when its request began, read from the
    /// server's clock once for everything the request decides by time.
    pub fn unix_ms(&self) -> i64 {
        self.unix_ms as i64
    }
}

/// Whether `text` is written as an id: 26 characters of the id's alphabet.
pub fn is_written_id(text: &str) -> bool {
    text.len() == REQUEST_ID_LEN && text.bytes().all(|b| ALPHABET.contains(&b))
}

/// The Unix milliseconds a written id was stamped with (its first ten characters), if `text`
/// starts like an id.
pub fn unix_ms_of(text: &str) -> Option<i64> {
    let head = text.as_bytes().get(..10)?;
    head.iter().try_fold(0i64, |ms, &b| {
        let digit = ALPHABET.iter().position(|&a| a == b)?;
        Some(ms * 32 + digit as i64)
    })
}

impl std::fmt::Debug for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The per-shard generator. Not `Sync`: each shard owns one.
pub struct RequestIdGen {
    shard: u8,
    counter: Cell<u128>,
}

impl RequestIdGen {
    /// `seed` should come from the OS random source; see [`RequestIdGen::from_os`].
    pub fn new(shard: u8, seed: u128) -> Self {
        RequestIdGen {
            shard,
            counter: Cell::new(seed & COUNTER_MASK),
        }
    }

    pub fn from_os(shard: u8) -> std::io::Result<Self> {
        let mut seed = [0u8; 16];
        getrandom::fill(&mut seed).map_err(|error| std::io::Error::other(error.to_string()))?;
        Ok(Self::new(shard, u128::from_le_bytes(seed)))
    }

    /// The next id, stamped with `unix_ms`.
    pub fn next(&self, unix_ms: u64) -> RequestId {
        let counter = (self.counter.get() + 1) & COUNTER_MASK;
        self.counter.set(counter);
        let bits = (u128::from(unix_ms & ((1 << 48) - 1)) << 80)
            | (u128::from(self.shard) << COUNTER_BITS)
            | counter;
        RequestId::from_bits(bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_across_shards_and_ordered_within_one() {
        let a = RequestIdGen::new(0, 5);
        let b = RequestIdGen::new(1, 5);
        let mut seen = HashSet::new();
        let mut last = None;
        for _ in 0..1000 {
            let id = a.next(1_700_000_000_000);
            assert!(seen.insert(id));
            assert!(seen.insert(b.next(1_700_000_000_000)));
            if let Some(previous) = last {
                assert!(id > previous);
            }
            last = Some(id);
        }
    }

    #[test]
    fn format() {
        let id = RequestIdGen::new(3, 0).next(1);
        assert_eq!(id.as_str().len(), REQUEST_ID_LEN);
        assert!(id.as_str().bytes().all(|b| ALPHABET.contains(&b)));
        assert_eq!(RequestId::from_bits(0).as_str(), "0".repeat(26));
        assert_eq!(
            RequestId::from_bits(u128::MAX).as_str(),
            format!("7{}", "Z".repeat(25))
        );
    }

    #[test]
    fn an_id_keeps_its_milliseconds() {
        let generator = RequestIdGen::new(7, u128::MAX);
        let id = generator.next(1_700_000_000_123);
        assert_eq!(id.unix_ms(), 1_700_000_000_123);
        // The first ten characters hold them: the id as written says the same.
        let from_text = unix_ms_of(id.as_str()).unwrap();
        assert_eq!(from_text, 1_700_000_000_123);
        assert_eq!(unix_ms_of("0000000001"), Some(1));
        assert_eq!(unix_ms_of("~probe"), None);
        assert_eq!(unix_ms_of("000000000U"), None, "not in the alphabet");
        assert_eq!(unix_ms_of(""), None);
    }

    #[test]
    fn counter_wraps_without_panicking() {
        let generator = RequestIdGen::new(0, COUNTER_MASK);
        let first = generator.next(0);
        assert!(first.as_str().ends_with("000000"));
    }
}
