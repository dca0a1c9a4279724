//! Image results kept for repeats: an image sent again, byte for byte, for the same checks,
//! gets the scores and measurements its first check computed, without another decode or model
//! run. Platforms see the same file many times (re-uploads, memes, spam runs); a repeat then
//! costs a SHA-256 of its bytes against 41 to 46 ms for the default workflow's models on a 1 MP
//! JPEG (docs/performance.md).
//!
//! Each shard keeps its own (`inference.image_results_kept` entries; 0 keeps none), so nothing
//! is shared between threads, and looks a file up before it goes to the shard's model worker
//! ([`crate::checks`]): a repeat is answered without the hop, and never waits behind the
//! images the worker is busy with. What is kept is exactly what the worker would compute
//! again: the key is the SHA-256 of the bytes with the set of models and the
//! measurements asked for (which decide the decoded size, [`super::worker`]), the models and
//! the decoder do not change while the process runs, and ONNX Runtime gives the same outputs
//! for the same input. SHA-256 because a key must not be forgeable: with a fast non-keyed hash,
//! a file made to collide with a harmless one that was checked first would take its scores.
//!
//! Only a complete result is kept: every model asked for gave its row and every measurement
//! its figures. A model run that failed, or a measurement that panicked, leaves the check
//! unchecked this time and is tried again next time. A file that does not decode is not kept
//! either. When full, the oldest entry goes, unless it was asked for again since it was kept
//! ([`Kept`]).
//!
//! [`Kept`] is that bounded store alone; the shards keep tox-block's window scores in one too
//! ([`crate::checks::toxblock`]).

use std::collections::VecDeque;
use std::hash::Hash;

use super::worker::ImageJobScores;
use crate::hash::FastMap;
use crate::image::{Measured, Measures};

/// At most `max` values by key: results kept for repeats, here of images and in
/// [`crate::checks::toxblock`] of tox-block's windows. The keys are SHA-256 digests of what was
/// sent, which no caller can aim at one bucket, so the map takes the fast hasher
/// ([`crate::hash`]).
///
/// When full, the oldest goes, unless it was asked for since it was kept or last spared: then
/// it is spared once and goes to the back of the line (the CLOCK, or second-chance, policy).
/// A file checked again and again stays while a stream of files seen once passes through it,
/// where first in, first out would drop it every `max` new files. A value asked for again is
/// the expensive case: sparing costs a flag per get and a step per spared value when full.
pub struct Kept<K, V> {
    max: usize,
    kept: FastMap<K, Entry<V>>,
    /// Keys in the order they were kept or last spared, oldest first.
    order: VecDeque<K>,
}

struct Entry<V> {
    value: V,
    /// Asked for since it was kept or last spared.
    used: bool,
}

impl<K: Copy + Eq + Hash, V> Kept<K, V> {
    pub fn new(max: usize) -> Kept<K, V> {
        Kept {
            max,
            kept: FastMap::default(),
            order: VecDeque::new(),
        }
    }

    /// Whether anything is kept at all (`max` above 0): without, no key need be computed.
    pub fn on(&self) -> bool {
        self.max > 0
    }

    /// The value kept for `key`, which is then spared once when it is the oldest.
    pub fn get(&mut self, key: &K) -> Option<&V> {
        let entry = self.kept.get_mut(key)?;
        entry.used = true;
        Some(&entry.value)
    }

    /// Keeps `value` for `key`, unless a value is kept for it already. When full, the oldest
    /// value not asked for since it was kept or last spared goes; each one passed over is
    /// spared (to the back of the line, its flag cleared), so this ends within one round.
    pub fn keep(&mut self, key: K, value: V) {
        if !self.on() || self.kept.contains_key(&key) {
            return;
        }
        while self.kept.len() >= self.max {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            match self.kept.get_mut(&oldest) {
                Some(entry) if entry.used => {
                    entry.used = false;
                    self.order.push_back(oldest);
                }
                _ => {
                    self.kept.remove(&oldest);
                }
            }
        }
        self.kept.insert(key, Entry { value, used: false });
        self.order.push_back(key);
    }

    pub fn contains(&self, key: &K) -> bool {
        self.kept.contains_key(key)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.kept.len()
    }
}

/// What an image result is kept under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    sha256: [u8; 32],
    /// The image models that run for it, as a set of slots.
    models: u64,
    measures: Measures,
}

impl Key {
    /// The key of a file whose SHA-256 is `sha256`.
    pub fn new(sha256: [u8; 32], models: u64, measures: Measures) -> Key {
        Key {
            sha256,
            models,
            measures,
        }
    }

    /// The file's SHA-256 (the hashes measurement takes it instead of hashing the file again).
    pub fn sha256(&self) -> [u8; 32] {
        self.sha256
    }
}

/// A shard's kept image results.
pub struct Repeats(Kept<Key, ImageJobScores>);

impl Repeats {
    pub fn new(max: usize) -> Repeats {
        Repeats(Kept::new(max))
    }

    pub fn on(&self) -> bool {
        self.0.on()
    }

    /// The result kept for `key`, marked as reused, with no time of its own: nothing was
    /// decoded or run for it.
    pub fn get(&mut self, key: &Key) -> Option<ImageJobScores> {
        let mut scores = self.0.get(key)?.clone();
        scores.reused = true;
        scores.decode_us = 0;
        scores.measure_us = 0;
        for row in &mut scores.rows {
            row.prepare_us = 0;
            row.run_us = 0;
        }
        Some(scores)
    }

    /// Keeps `scores` for `key` if the result is complete.
    pub fn keep(&mut self, key: Key, scores: &ImageJobScores) {
        if self.on() && !self.0.contains(&key) && complete(&key, scores) {
            self.0.keep(key, scores.clone());
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// Every model of the key gave its row of values, and every measurement asked for has its
/// figures.
fn complete(key: &Key, scores: &ImageJobScores) -> bool {
    let rows = scores
        .rows
        .iter()
        .filter(|row| !row.values.is_empty())
        .fold(0u64, |set, row| set | 1 << row.slot);
    rows == key.models && measured_all(key.measures, &scores.measured)
}

fn measured_all(asked: Measures, measured: &Measured) -> bool {
    (!asked.properties || measured.properties.is_some())
        && (!asked.qr || measured.qr_codes.is_some())
        && (!asked.hashes || measured.hashes.is_some())
        && (!asked.faces || measured.faces.is_some())
        && (!asked.ocr || measured.text_lines.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::sha256;
    use crate::inference::worker::ModelRow;

    fn scores(slots: &[usize]) -> ImageJobScores {
        ImageJobScores {
            decode_us: 3_000,
            rows: slots
                .iter()
                .map(|&slot| ModelRow {
                    slot,
                    values: vec![0.25, 0.75],
                    prepare_us: 500,
                    run_us: 20_000,
                })
                .collect(),
            ..ImageJobScores::default()
        }
    }

    #[test]
    fn a_repeat_gets_the_kept_scores_without_their_times() {
        let mut repeats = Repeats::new(4);
        let key = Key::new(sha256(b"\xFF\xD8\xFF one file"), 0b11, Measures::NONE);
        repeats.keep(key, &scores(&[0, 1]));
        let again = repeats.get(&key).expect("kept");
        assert!(again.reused);
        assert_eq!(again.decode_us, 0);
        assert_eq!(
            again
                .rows
                .iter()
                .map(|r| (r.slot, r.values.clone(), r.run_us, r.prepare_us))
                .collect::<Vec<_>>(),
            vec![(0, vec![0.25, 0.75], 0, 0), (1, vec![0.25, 0.75], 0, 0)]
        );
    }

    #[test]
    fn other_bytes_models_or_measures_are_other_keys() {
        let mut repeats = Repeats::new(4);
        let key = Key::new(sha256(b"one file"), 0b1, Measures::NONE);
        repeats.keep(key, &scores(&[0]));
        assert!(repeats
            .get(&Key::new(sha256(b"one file!"), 0b1, Measures::NONE))
            .is_none());
        assert!(repeats
            .get(&Key::new(sha256(b"one file"), 0b11, Measures::NONE))
            .is_none());
        let hashes = Measures {
            hashes: true,
            ..Measures::NONE
        };
        assert!(repeats
            .get(&Key::new(sha256(b"one file"), 0b1, hashes))
            .is_none());
        assert!(repeats
            .get(&Key::new(sha256(b"one file"), 0b1, Measures::NONE))
            .is_some());
    }

    #[test]
    fn an_incomplete_result_is_not_kept() {
        let mut repeats = Repeats::new(4);
        // A model's run failed: its row is missing.
        let key = Key::new(sha256(b"file"), 0b11, Measures::NONE);
        repeats.keep(key, &scores(&[0]));
        assert!(repeats.get(&key).is_none());
        // A model did not run: its row has no values.
        let mut unrun = scores(&[0, 1]);
        unrun.rows[1].values.clear();
        repeats.keep(key, &unrun);
        assert!(repeats.get(&key).is_none());
        // A measurement asked for has no figures (it panicked, or its networks failed).
        let faces = Measures {
            faces: true,
            ..Measures::NONE
        };
        let key = Key::new(sha256(b"file"), 0b1, faces);
        repeats.keep(key, &scores(&[0]));
        assert!(repeats.get(&key).is_none());
        let mut with_faces = scores(&[0]);
        with_faces.measured.faces = Some(Vec::new());
        repeats.keep(key, &with_faces);
        assert!(repeats.get(&key).is_some());
    }

    #[test]
    fn a_value_asked_for_again_is_spared_once_when_it_is_the_oldest() {
        let mut kept: Kept<u8, u32> = Kept::new(3);
        for key in 0..3 {
            kept.keep(key, key.into());
        }
        assert_eq!(kept.get(&0), Some(&0));
        kept.keep(3, 3);
        // 0 was asked for: spared; 1, the oldest not asked for, went.
        assert!(kept.contains(&0) && !kept.contains(&1));
        // Spared once: 2 goes next, then 0 in its turn, not asked for since.
        kept.keep(4, 4);
        assert!(!kept.contains(&2) && kept.contains(&0));
        kept.keep(5, 5);
        assert!(!kept.contains(&0));
        assert_eq!(kept.len(), 3);
    }

    #[test]
    fn a_file_asked_for_often_outlives_a_stream_of_new_ones() {
        // Asked for after every fifth new key, 8 kept: first in, first out would drop it
        // every 8 new keys.
        let mut kept: Kept<u32, ()> = Kept::new(8);
        kept.keep(0, ());
        let mut missed = 0;
        for new in 1..1_000u32 {
            kept.keep(new, ());
            if new % 5 == 0 && kept.get(&0).is_none() {
                missed += 1;
                kept.keep(0, ());
            }
        }
        assert_eq!(missed, 0);
        // Every value asked for: keeping one more still ends, after one round.
        let mut full: Kept<u8, ()> = Kept::new(4);
        for key in 0..4 {
            full.keep(key, ());
            assert!(full.get(&key).is_some());
        }
        full.keep(9, ());
        assert_eq!(full.len(), 4);
        assert!(full.contains(&9) && !full.contains(&0));
    }

    #[test]
    fn the_oldest_goes_when_full_and_none_is_kept_at_zero() {
        let mut repeats = Repeats::new(3);
        let keys: Vec<Key> = (0u8..5)
            .map(|i| Key::new(sha256(&[i]), 0b1, Measures::NONE))
            .collect();
        for key in &keys {
            repeats.keep(*key, &scores(&[0]));
            assert!(repeats.len() <= 3);
        }
        assert!(repeats.get(&keys[0]).is_none());
        assert!(repeats.get(&keys[1]).is_none());
        assert!(keys[2..].iter().all(|key| repeats.get(key).is_some()));
        // Keeping one already kept does not count it twice.
        repeats.keep(keys[4], &scores(&[0]));
        assert_eq!(repeats.len(), 3);
        assert!(repeats.get(&keys[2]).is_some());

        let mut off = Repeats::new(0);
        assert!(!off.on());
        off.keep(keys[0], &scores(&[0]));
        assert_eq!(off.len(), 0);
    }
}
