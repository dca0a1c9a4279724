//! Hash maps of the request path: a fast hasher, and a flat index for the models' tables; and
//! SHA-256, for keys no caller can make collide.
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
//!
//! [`FlatIndex`] is for the text models' large, read-only tables (the language's n-grams, the
//! profanity model's terms), which a check at an ordinary load finds cold: a `HashMap` keeps
//! its control bytes and its entries in two arrays, so a look-up in a cold map misses the
//! cache twice, while a flat slot holds the key and its value together, and a caller can read
//! the first slots of many keys before any look-up branches, so that their misses overlap.

/// The SHA-256 of `bytes` (ring's): the key of results kept for repeats, which no caller can
/// make collide with another's, and an image's `sha256` for the hash lists.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(bytes);
    hasher.finish()
}

/// [`sha256`] of bytes given in parts (an upload hashed a slice at a time).
pub struct Sha256(ring::digest::Context);

impl Sha256 {
    pub fn new() -> Sha256 {
        Sha256(ring::digest::Context::new(&ring::digest::SHA256))
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn finish(self) -> [u8; 32] {
        let mut sha256 = [0u8; 32];
        sha256.copy_from_slice(self.0.finish().as_ref());
        sha256
    }
}

impl Default for Sha256 {
    fn default() -> Sha256 {
        Sha256::new()
    }
}

/// A `HashMap` with foldhash's per-process random seed.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The value of `key` in `map`, inserted with `make` first if it is absent. `entry` wants an
/// owned key, which a map keyed by `String` pays as an allocation on every call, present or
/// not; here the key is copied only when it goes in (the price: a second hash on insert).
pub fn value_of<'m, V, S: std::hash::BuildHasher>(
    map: &'m mut std::collections::HashMap<String, V, S>,
    key: &str,
    make: impl FnOnce() -> V,
) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), make());
    }
    // (Returning `get_mut`'s value early, then inserting, is the one lookup the borrow
    // checker does not accept yet.)
    match map.get_mut(key) {
        Some(value) => value,
        None => unreachable!("the key was inserted above"),
    }
}

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

/// A key of a [`FlatIndex`]. Its default value marks an empty slot and is never an entry.
pub trait FlatKey: Copy + Default + Eq {
    /// The key folded to 64 bits, which the index hashes.
    fn fold(self) -> u64;
}

impl FlatKey for u64 {
    fn fold(self) -> u64 {
        self
    }
}

/// A [`packed`] word as two halves: a slot of 8-byte alignment (a `u128` would pad a slot
/// with a 4-byte value from 20 bytes to 32).
impl FlatKey for [u64; 2] {
    fn fold(self) -> u64 {
        self[0] ^ self[1].wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
    }
}

/// `key` as the two halves a [`FlatIndex`] keys on, low first.
pub fn halves(key: u128) -> [u64; 2] {
    [key as u64, (key >> 64) as u64]
}

/// The first of `slots` slots (open addressing) to look at for `key`: the key times an odd
/// constant (Fibonacci hashing; the models' keys and the profanity model's columns differ in
/// their low bits), scaled to the slot count by the product's top bits (a multiplication and
/// a shift, as for a power-of-two count, for any count).
pub fn first_slot(key: u64, slots: usize) -> usize {
    let hash = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ((u128::from(hash) * slots as u128) >> 64) as usize
}

/// The slot after `at` of `slots` (linear probing), the last followed by the first.
pub fn next_slot(at: usize, slots: usize) -> usize {
    if at + 1 == slots {
        0
    } else {
        at + 1
    }
}

/// A read-only map in one array of `(key, value)` slots: open addressing with linear probing,
/// built once with at most a given share of its slots full (see the module's doc for why).
/// The entries come from the models only: a caller's key can at worst fall into the longest
/// run of full slots, which the build fixes.
pub struct FlatIndex<K, V> {
    /// At least one slot is empty, so that a look-up ends.
    slots: Vec<(K, V)>,
}

impl<K: FlatKey, V: Copy + Default> FlatIndex<K, V> {
    /// An index of `entries`, whose keys are distinct and not the empty key, in which at most
    /// `full` of every `of` slots are taken (`0 < full < of`).
    pub fn new(entries: &[(K, V)], (full, of): (usize, usize)) -> FlatIndex<K, V> {
        assert!(0 < full && full < of, "a load of {full} in {of}");
        // More than the entries need at that load, so more than the entries.
        let size = entries.len() * of / full + 1;
        let mut index = FlatIndex {
            slots: vec![(K::default(), V::default()); size],
        };
        for &(key, value) in entries {
            debug_assert!(key != K::default(), "the empty key is not an entry");
            let mut at = index.first_slot(key);
            while index.slots[at].0 != K::default() {
                at = index.after(at);
            }
            index.slots[at] = (key, value);
        }
        index
    }

    /// The first slot to look at ([`first_slot`]).
    fn first_slot(&self, key: K) -> usize {
        first_slot(key.fold(), self.slots.len())
    }

    /// The slot after `at` ([`next_slot`]).
    fn after(&self, at: usize) -> usize {
        next_slot(at, self.slots.len())
    }

    /// Reads the first slot of every key of `keys`, before any look-up branches on what a
    /// slot holds: in a cold index these reads then miss the cache together, not one after
    /// another, and the look-ups that follow find their slots in the cache.
    pub fn touch_first_slots(&self, keys: &[K]) {
        let touched = keys.iter().fold(0, |touched, &key| {
            touched ^ self.slots[self.first_slot(key)].0.fold()
        });
        std::hint::black_box(touched);
    }

    pub fn get(&self, key: K) -> Option<V> {
        if key == K::default() {
            // It would match an empty slot.
            return None;
        }
        let mut at = self.first_slot(key);
        loop {
            let (found, value) = self.slots[at];
            if found == key {
                return Some(value);
            }
            if found == K::default() {
                return None;
            }
            at = self.after(at);
        }
    }

    /// How many slots the index has, full and empty.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The entries, in the index's order.
    pub fn entries(&self) -> impl Iterator<Item = (K, V)> + '_ {
        let full = self.slots.iter().filter(|(key, _)| *key != K::default());
        full.copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn value_of_inserts_once_and_finds_after() {
        let mut map: FastMap<String, u32> = FastMap::default();
        let mut made = 0;
        for _ in 0..3 {
            *value_of(&mut map, "org", || {
                made += 1;
                10
            }) += 1;
        }
        assert_eq!(made, 1, "made only when absent");
        assert_eq!(map.get("org"), Some(&13));
        *value_of(&mut map, "other", || 0) += 5;
        assert_eq!(map.len(), 2);
        assert_eq!(map.get("other"), Some(&5));
    }

    #[test]
    fn an_empty_index_finds_nothing() {
        let index = FlatIndex::<u64, u32>::new(&[], (1, 2));
        assert_eq!(index.slot_count(), 1);
        assert_eq!(index.get(0), None);
        assert_eq!(index.get(1), None);
        assert_eq!(index.get(u64::MAX), None);
    }

    #[test]
    fn the_empty_key_is_never_found() {
        let index = FlatIndex::new(&[([1, 0], 7u32), ([0, 1], 8)], (1, 2));
        assert_eq!(index.get([1, 0]), Some(7));
        assert_eq!(index.get([0, 1]), Some(8));
        assert_eq!(index.get([0, 0]), None);
        assert_eq!(index.get([1, 1]), None);
    }

    /// Keys that all want the last slot wrap to the first.
    #[test]
    fn a_run_of_full_slots_wraps_around() {
        let entries: Vec<(u64, u32)> = (1..=5).map(|k| (u64::MAX - k, k as u32)).collect();
        let index = FlatIndex::new(&entries, (5, 6));
        assert_eq!(index.slot_count(), 7);
        for &(key, value) in &entries {
            assert_eq!(index.get(key), Some(value));
        }
        assert_eq!(index.get(u64::MAX), None);
        assert_eq!(index.entries().count(), 5);
    }

    #[test]
    fn the_sizes_of_the_models_slots() {
        assert_eq!(std::mem::size_of::<(u64, (u32, u32))>(), 16);
        assert_eq!(std::mem::size_of::<([u64; 2], u32)>(), 24);
        assert_eq!(halves(packed(b"ab").unwrap()), [0x6261, 0]);
        assert_eq!(halves(1 << 64 | 2), [2, 1]);
    }

    proptest! {
        /// The index answers as a map of the same entries, for its keys and for others (small
        /// keys crowd the same first slots), after their first slots were touched.
        #[test]
        fn the_index_finds_what_a_map_holds(
            map in proptest::collection::hash_map(1u64..5_000, any::<u32>(), 0..600),
            asked in proptest::collection::vec(0u64..6_000, 0..200),
            load in (1usize..9, 1usize..9),
        ) {
            let (full, of) = (load.0.min(load.1), load.0.max(load.1) + 1);
            let entries: Vec<(u64, u32)> = map.iter().map(|(&k, &v)| (k, v)).collect();
            let index = FlatIndex::new(&entries, (full, of));
            prop_assert!(entries.len() * of < index.slot_count() * full);
            let keys: Vec<u64> = map.keys().chain(&asked).copied().collect();
            index.touch_first_slots(&keys);
            for key in keys {
                prop_assert_eq!(index.get(key), map.get(&key).copied());
            }
            let held: HashMap<u64, u32> = index.entries().collect();
            prop_assert_eq!(held, map);
        }

        #[test]
        fn two_halved_keys_are_found_as_one(
            map in proptest::collection::hash_map(
                (any::<u64>(), 0u64..4).prop_filter("not empty", |&(a, b)| (a, b) != (0, 0)),
                any::<u32>(),
                0..300,
            ),
        ) {
            let entries: Vec<([u64; 2], u32)> = map.iter().map(|(&(a, b), &v)| ([a, b], v)).collect();
            let index = FlatIndex::new(&entries, (1, 2));
            for (&(a, b), &value) in &map {
                prop_assert_eq!(index.get([a, b]), Some(value));
                if !map.contains_key(&(b, a)) && (b, a) != (0, 0) {
                    prop_assert_eq!(index.get([b, a]), None);
                }
            }
        }
    }
}
