//! Which PDQ hashes of a list lie within a distance of a query: multi-index hashing.
//!
//! A hash is cut into [`CHUNKS`] chunks of 16 bits. Two hashes within distance `r` differ by at
//! most `r / CHUNKS` bits (rounded down) in at least one chunk (pigeonhole), so the index keeps,
//! per chunk, the hashes by that chunk's value, and a query reads the buckets of every chunk
//! value within that many bits of its own: for PDQ's match distance of 31, its own value and
//! the 16 one-bit neighbours, 17 buckets per chunk, 272 in all. Each candidate is then
//! compared on all 256 bits. With `n` uniformly spread hashes a bucket holds `n / 65,536`, so a
//! lookup compares about `272 n / 65,536` candidates (4,150 at a million): microseconds.
//!
//! Memory: the hash (32 bytes) and one `u32` per chunk (64 bytes), 96 bytes per hash, plus
//! 4 MiB of bucket offsets per index. Small lists are not worth those offsets: under
//! [`SCAN_BELOW`] hashes the index is a plain scan.

use crate::image::hashes::Pdq;

/// 16 chunks of 16 bits.
pub const CHUNKS: usize = 16;
const BUCKETS: usize = 1 << 16;
/// Lists with fewer hashes are scanned (4,096 comparisons is a few microseconds).
pub const SCAN_BELOW: usize = 4096;
/// The largest match distance an index answers: 63 bits means up to 3 differing bits per
/// chunk, 697 buckets per chunk.
pub const DISTANCE_MAX: u32 = 63;

/// An immutable index over hashes `0..n` (the caller keeps what each position means).
pub struct PdqIndex {
    hashes: Vec<[u64; 4]>,
    /// Per chunk, `BUCKETS + 1` offsets into that chunk's part of `positions`.
    offsets: Vec<u32>,
    /// Per chunk, the positions of the hashes, grouped by the chunk's value.
    positions: Vec<u32>,
}

fn words(hash: &Pdq) -> [u64; 4] {
    let mut out = [0u64; 4];
    for (word, bytes) in out.iter_mut().zip(hash.0.chunks_exact(8)) {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(bytes);
        *word = u64::from_be_bytes(eight);
    }
    out
}

fn chunk(words: &[u64; 4], at: usize) -> usize {
    ((words[at / 4] >> (48 - 16 * (at % 4))) & 0xffff) as usize
}

fn distance(a: &[u64; 4], b: &[u64; 4]) -> u32 {
    (a[0] ^ b[0]).count_ones()
        + (a[1] ^ b[1]).count_ones()
        + (a[2] ^ b[2]).count_ones()
        + (a[3] ^ b[3]).count_ones()
}

impl PdqIndex {
    pub fn new(hashes: &[Pdq]) -> PdqIndex {
        assert!(hashes.len() < u32::MAX as usize, "positions are u32");
        let hashes: Vec<[u64; 4]> = hashes.iter().map(words).collect();
        if hashes.len() < SCAN_BELOW {
            return PdqIndex {
                hashes,
                offsets: Vec::new(),
                positions: Vec::new(),
            };
        }
        let n = hashes.len();
        let mut offsets = vec![0u32; CHUNKS * (BUCKETS + 1)];
        for hash in &hashes {
            for at in 0..CHUNKS {
                offsets[at * (BUCKETS + 1) + chunk(hash, at) + 1] += 1;
            }
        }
        for at in 0..CHUNKS {
            let table = &mut offsets[at * (BUCKETS + 1)..(at + 1) * (BUCKETS + 1)];
            for bucket in 1..=BUCKETS {
                table[bucket] += table[bucket - 1];
            }
        }
        let mut positions = vec![0u32; CHUNKS * n];
        let mut filled = offsets.clone();
        for (position, hash) in hashes.iter().enumerate() {
            for at in 0..CHUNKS {
                let slot = &mut filled[at * (BUCKETS + 1) + chunk(hash, at)];
                positions[at * n + *slot as usize] = position as u32;
                *slot += 1;
            }
        }
        PdqIndex {
            hashes,
            offsets,
            positions,
        }
    }

    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The nearest hash within `radius` (at most [`DISTANCE_MAX`]) of `query`, as
    /// `(position, distance)`; the lowest position among equally near ones.
    pub fn nearest(&self, query: &Pdq, radius: u32) -> Option<(u32, u32)> {
        self.nearest_kept(query, radius, |_| true)
    }

    /// As [`PdqIndex::nearest`], among the positions `keep` keeps (a list's removed entries
    /// are left out this way until it is rebuilt).
    pub fn nearest_kept(
        &self,
        query: &Pdq,
        radius: u32,
        keep: impl Fn(u32) -> bool,
    ) -> Option<(u32, u32)> {
        let radius = radius.min(DISTANCE_MAX);
        let query = words(query);
        let mut best: Option<(u32, u32)> = None;
        let mut consider = |position: u32, hash: &[u64; 4]| {
            let d = distance(hash, &query);
            let better = match best {
                _ if d > radius => false,
                _ if !keep(position) => false,
                None => true,
                Some((at, bd)) => d < bd || (d == bd && position < at),
            };
            if better {
                best = Some((position, d));
            }
        };
        if self.offsets.is_empty() {
            for (position, hash) in self.hashes.iter().enumerate() {
                consider(position as u32, hash);
            }
            return best;
        }
        let n = self.hashes.len();
        let flips = radius as usize / CHUNKS;
        for at in 0..CHUNKS {
            let table = &self.offsets[at * (BUCKETS + 1)..(at + 1) * (BUCKETS + 1)];
            let column = &self.positions[at * n..(at + 1) * n];
            each_within(chunk(&query, at) as u16, flips, &mut |value| {
                let value = usize::from(value);
                let bucket = &column[table[value] as usize..table[value + 1] as usize];
                for &position in bucket {
                    consider(position, &self.hashes[position as usize]);
                }
            });
        }
        best
    }

    /// Bytes held: what the memory figure of the module documentation counts.
    pub fn heap_bytes(&self) -> usize {
        self.hashes.len() * 32 + self.offsets.len() * 4 + self.positions.len() * 4
    }
}

/// Calls `visit` with every 16-bit value within `flips` bits of `value` (each once).
fn each_within(value: u16, flips: usize, visit: &mut impl FnMut(u16)) {
    fn flip_from(value: u16, from: u32, left: usize, visit: &mut impl FnMut(u16)) {
        visit(value);
        if left == 0 {
            return;
        }
        for bit in from..16 {
            flip_from(value ^ (1 << bit), bit + 1, left - 1, visit);
        }
    }
    flip_from(value, 0, flips, visit);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn random_hash(rng: &mut fastrand::Rng) -> Pdq {
        let mut bytes = [0u8; 32];
        rng.fill(&mut bytes);
        Pdq(bytes)
    }

    fn flip_bits(hash: &Pdq, bits: &[usize]) -> Pdq {
        let mut out = *hash;
        for &bit in bits {
            out.0[bit / 8] ^= 1 << (bit % 8);
        }
        out
    }

    fn brute(hashes: &[Pdq], query: &Pdq, radius: u32) -> Option<(u32, u32)> {
        hashes
            .iter()
            .enumerate()
            .map(|(at, hash)| (at as u32, hash.distance(query)))
            .filter(|(_, d)| *d <= radius)
            .min_by_key(|(at, d)| (*d, *at))
    }

    #[test]
    fn neighbours_are_enumerated_once() {
        for flips in 0..=3 {
            let mut seen = std::collections::HashSet::new();
            each_within(0xa5a5, flips, &mut |value| {
                assert!(seen.insert(value), "{value:#x} twice");
                assert!((value ^ 0xa5a5).count_ones() as usize <= flips);
            });
            let expected: usize = (0..=flips)
                .map(|k| (0..k).fold(1usize, |c, i| c * (16 - i) / (i + 1)))
                .sum();
            assert_eq!(seen.len(), expected);
        }
    }

    #[test]
    fn finds_what_a_scan_finds_at_every_radius() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut hashes: Vec<Pdq> = (0..SCAN_BELOW * 3).map(|_| random_hash(&mut rng)).collect();
        // Near copies at known distances.
        let planted = hashes[100];
        for (at, distance) in [(200, 5usize), (300, 31), (400, 32), (500, 47)] {
            let bits: Vec<usize> = (0..distance).map(|i| (i * 37 + 11) % 256).collect();
            hashes[at] = flip_bits(&planted, &bits);
        }
        let index = PdqIndex::new(&hashes);
        assert!(!index.offsets.is_empty(), "an index, not a scan");
        for radius in [0, 15, 16, 31, 32, 47, 63] {
            for probe in [planted, flip_bits(&planted, &[3, 90, 200])] {
                assert_eq!(
                    index.nearest(&probe, radius),
                    brute(&hashes, &probe, radius),
                    "radius {radius}"
                );
            }
        }
        // A query at distance 31 from a hash whose 16 chunks each differ by 1 or 2 bits:
        // the hardest case the pigeonhole still covers.
        let spread: Vec<usize> = (0..31).map(|i| (i % 16) * 16 + i / 16).collect();
        let far = flip_bits(&hashes[7], &spread);
        assert_eq!(index.nearest(&far, 31), Some((7, 31)));
        assert_eq!(index.nearest(&far, 30), brute(&hashes, &far, 30));
    }

    #[test]
    fn small_lists_are_scanned() {
        let mut rng = fastrand::Rng::with_seed(1);
        let hashes: Vec<Pdq> = (0..10).map(|_| random_hash(&mut rng)).collect();
        let index = PdqIndex::new(&hashes);
        assert!(index.offsets.is_empty());
        assert_eq!(index.nearest(&hashes[4], 0), Some((4, 0)));
        assert_eq!(PdqIndex::new(&[]).nearest(&hashes[0], 31), None);
        // Left out, the exact hash gives way to none (the others are far).
        assert_eq!(index.nearest_kept(&hashes[4], 31, |at| at != 4), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn agrees_with_a_scan(seed in any::<u64>(), radius in 0u32..=63, flips in 0usize..=40) {
            let mut rng = fastrand::Rng::with_seed(seed);
            let hashes: Vec<Pdq> =
                (0..SCAN_BELOW + 50).map(|_| random_hash(&mut rng)).collect();
            let target = rng.usize(..hashes.len());
            let bits: Vec<usize> = (0..flips).map(|_| rng.usize(..256)).collect();
            let query = flip_bits(&hashes[target], &bits);
            let index = PdqIndex::new(&hashes);
            prop_assert_eq!(index.nearest(&query, radius), brute(&hashes, &query, radius));
        }
    }
}
