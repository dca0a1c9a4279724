//! An organization's own hash lists: images it knows it does not want (block lists) or knows
//! it does (allow lists), matched on every image check of a workflow that names them.
//!
//! A list holds entries, each one hash of one kind: PDQ (perceptual: a re-encoded, resized or
//! slightly cropped copy stays within a few bits), MD5 or SHA-256 (the file's bytes exactly,
//! for lists that come that way). The store keeps the entries ([`crate::store`]); this module
//! is what a shard matches against: a [`CompiledList`], immutable, shared by the shards, built
//! from the store by the lists follower and replaced whenever the list changes.
//!
//! A compiled list is a base (the entries when it was last built, PDQ hashes in a
//! [`pdq_index::PdqIndex`], exact hashes in maps, terms in an Aho-Corasick automaton) plus
//! the entries appended since (scanned, at most [`DELTA_MAX`]; their terms in an automaton of
//! their own) and the ids removed since (left out of matches), so adding or removing one
//! entry of a list of a million hashes or 100,000 terms costs the follower a read of that
//! entry and at most an automaton of the terms added since, not a rebuild.

pub mod csv;
pub mod pdq_index;

use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};
use serde::{Deserialize, Serialize};

use crate::hash::FastMap;
use crate::image::hashes::{ImageHashes, Pdq};
use pdq_index::PdqIndex;

/// List names: what workflows and routes name.
pub const LIST_NAME_BYTES_MAX: usize = 64;
/// Labels and caller ids of entries.
pub const ENTRY_TEXT_BYTES_MAX: usize = 256;
/// Entries of one organization's lists together (the store's map holds a few hundred bytes an
/// entry: 16 GiB, [`crate::store::STORE_MAP_BYTES`], is room for several such organizations).
pub const LIST_ENTRIES_MAX: u64 = 10_000_000;
/// Lists of one organization.
pub const LISTS_PER_ORG_MAX: usize = 100;
/// PDQ's recommended match distance (bits of 256).
pub const PDQ_DISTANCE_DEFAULT: u32 = 31;
/// Entries appended since the base was built (hashes scanned on each lookup, terms in an
/// automaton of their own, rebuilt at each change), or removed since, before a rebuild.
pub const DELTA_MAX: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListKind {
    /// A match is the category `known_image`.
    Block,
    /// A match exempts the image from review by the models.
    Allow,
}

impl ListKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ListKind::Block => "block",
            ListKind::Allow => "allow",
        }
    }

    pub fn parse(text: &str) -> Option<ListKind> {
        match text {
            "block" => Some(ListKind::Block),
            "allow" => Some(ListKind::Allow),
            _ => None,
        }
    }
}

/// What a list holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListContent {
    /// Image hashes, matched by the `hashlist` check.
    Image,
    /// Words and phrases, matched by the `termlist` check.
    Text,
}

impl ListContent {
    pub fn as_str(self) -> &'static str {
        match self {
            ListContent::Image => "image",
            ListContent::Text => "text",
        }
    }

    pub fn parse(text: &str) -> Option<ListContent> {
        match text {
            "image" => Some(ListContent::Image),
            "text" => Some(ListContent::Text),
            _ => None,
        }
    }
}

/// Bytes of a term as given.
pub const TERM_BYTES_MAX: usize = 128;
/// Bytes of a term after normalisation (NFKC expands some characters eighteenfold); keys of
/// the store hold it.
pub const TERM_NORMALISED_BYTES_MAX: usize = 256;
/// Entries of a text list (compiling one of 100,000 takes the lists follower about 0.8 s,
/// once per [`DELTA_MAX`] changes).
pub const TEXT_LIST_ENTRIES_MAX: u64 = 100_000;

/// One entry's hash, or a text list's term.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryHash {
    Pdq(Pdq),
    Md5([u8; 16]),
    Sha256([u8; 32]),
    /// A word or phrase as given; matched after normalisation.
    Term(String),
}

impl EntryHash {
    /// The name of the hash's kind, as the CSV formats write it (`term` for a term).
    pub fn kind(&self) -> &'static str {
        match self {
            EntryHash::Pdq(_) => "pdq",
            EntryHash::Md5(_) => "md5",
            EntryHash::Sha256(_) => "sha256",
            EntryHash::Term(_) => "term",
        }
    }

    /// The hash in hex, or the term.
    pub fn value(&self) -> String {
        use crate::image::hashes::hex;
        match self {
            EntryHash::Pdq(pdq) => pdq.to_hex(),
            EntryHash::Md5(bytes) => hex(bytes),
            EntryHash::Sha256(bytes) => hex(bytes),
            EntryHash::Term(term) => term.clone(),
        }
    }

    /// What lists of `content` hold.
    pub fn content(&self) -> ListContent {
        match self {
            EntryHash::Term(_) => ListContent::Text,
            _ => ListContent::Image,
        }
    }

    /// A text list's term: at most [`TERM_BYTES_MAX`] bytes, no control characters, and
    /// something left after normalisation.
    pub fn term(text: &str) -> Result<EntryHash, String> {
        let text = text.trim();
        if text.len() > TERM_BYTES_MAX {
            return Err(format!(
                "a term is at most {TERM_BYTES_MAX} bytes; {} is {}",
                shown(text),
                text.len()
            ));
        }
        if text.chars().any(char::is_control) {
            return Err(format!(
                "the term {} holds a control character",
                shown(text)
            ));
        }
        let normalised = normalised_term(text);
        if normalised.is_empty() {
            return Err(format!(
                "the term {} has no letters or digits to match",
                shown(text)
            ));
        }
        if normalised.len() > TERM_NORMALISED_BYTES_MAX {
            return Err(format!(
                "the term {} is {} bytes once normalised; at most {TERM_NORMALISED_BYTES_MAX}",
                shown(text),
                normalised.len()
            ));
        }
        Ok(EntryHash::Term(text.to_owned()))
    }

    /// A hash from its kind's name and hex digits.
    pub fn parse(kind: &str, hex: &str) -> Result<EntryHash, String> {
        use crate::image::hashes::parse_hex;
        let hex = hex.trim();
        let parsed = match kind.trim().to_ascii_lowercase().as_str() {
            "pdq" => parse_hex::<32>(hex).map(|bytes| EntryHash::Pdq(Pdq(bytes))),
            "md5" => parse_hex::<16>(hex).map(EntryHash::Md5),
            "sha256" | "sha-256" => parse_hex::<32>(hex).map(EntryHash::Sha256),
            other => {
                return Err(format!(
                    "unknown hash kind {} (expected pdq, md5 or sha256)",
                    shown(other)
                ))
            }
        };
        parsed.ok_or_else(|| format!("{} is not a {kind} hash in hex", shown(hex)))
    }
}

/// `text` for a message: its first 64 characters, quoted, control characters escaped.
pub fn shown(text: &str) -> String {
    let cut: String = text.chars().take(64).collect();
    format!("{cut:?}")
}

/// One entry of a list, as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Given by the store, increasing: the entry's place in its list and its id in routes.
    pub id: u64,
    pub hash: EntryHash,
    pub label: Option<String>,
    /// The caller's own id for what the entry came from.
    pub caller_id: Option<String>,
    pub added_ms: i64,
}

/// An entry to add (the store gives it its id).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewEntry {
    pub hash: EntryHash,
    pub label: Option<String>,
    pub caller_id: Option<String>,
}

/// Checks the text fields of an entry.
pub fn validate_entry_text(what: &str, text: &Option<String>) -> Result<(), String> {
    match text {
        Some(text) if text.len() > ENTRY_TEXT_BYTES_MAX => Err(format!(
            "{what} is {} bytes; at most {ENTRY_TEXT_BYTES_MAX}",
            text.len()
        )),
        Some(text) if text.chars().any(char::is_control) => {
            Err(format!("{what} holds a control character"))
        }
        _ => Ok(()),
    }
}

pub fn validate_name(name: &str) -> Result<(), String> {
    if crate::bounds::is_plain_name(name, LIST_NAME_BYTES_MAX) {
        Ok(())
    } else {
        Err(format!(
            "invalid list name {}: 1 to {LIST_NAME_BYTES_MAX} of [a-z0-9_-]",
            shown(name)
        ))
    }
}

/// The entries an image gives a list: its PDQ hash (unless too weak to match on), MD5 and
/// SHA-256.
pub fn image_entry_hashes(hashes: &ImageHashes) -> Vec<EntryHash> {
    let mut out = Vec::with_capacity(3);
    if let Some((pdq, quality)) = hashes.pdq {
        if quality >= crate::image::hashes::PDQ_QUALITY_MIN {
            out.push(EntryHash::Pdq(pdq));
        }
    }
    out.push(EntryHash::Md5(hashes.md5));
    out.push(EntryHash::Sha256(hashes.sha256));
    out
}

/// `term` as the text checks see it (the word list's normalisation).
pub fn normalised_term(term: &str) -> String {
    let mut out = String::new();
    crate::text::normalize::normalize(term, &mut out);
    out
}

/// What a match reports.
#[derive(Clone, Debug, PartialEq)]
pub struct ListMatch {
    pub list: Arc<str>,
    pub kind: ListKind,
    pub entry_id: u64,
    pub label: Option<String>,
    pub caller_id: Option<String>,
    /// `pdq`, `md5`, `sha256` or `term`.
    pub hash_type: &'static str,
    /// PDQ bits that differ (0 for an exact hash or a term).
    pub distance: u32,
    /// A text list's entry: its term.
    pub term: Option<String>,
}

/// The entries of a list when it was last built.
struct Base {
    entries: Vec<Entry>,
    pdq: PdqIndex,
    /// PDQ index position to entry.
    pdq_entries: Vec<u32>,
    md5: FastMap<[u8; 16], u32>,
    sha256: FastMap<[u8; 32], u32>,
    /// The terms (none in an image list).
    terms: Option<Terms>,
}

/// A list's terms, normalised, in one automaton, with the position of each pattern's entry
/// among the entries it was built from.
struct Terms {
    automaton: AhoCorasick,
    entries: Vec<u32>,
}

impl Terms {
    /// The automaton of the terms among `entries`; none if there are none.
    fn of(entries: &[Entry]) -> Option<Terms> {
        let mut patterns = Vec::new();
        let mut at_entries = Vec::new();
        for (at, entry) in entries.iter().enumerate() {
            if let EntryHash::Term(term) = &entry.hash {
                let normalised = normalised_term(term);
                if !normalised.is_empty() {
                    patterns.push(normalised);
                    at_entries.push(at as u32);
                }
            }
        }
        if patterns.is_empty() {
            return None;
        }
        match AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&patterns)
        {
            Ok(automaton) => Some(Terms {
                automaton,
                entries: at_entries,
            }),
            Err(error) => {
                // Past the automaton's own limits (not reached by the lists' bounds): the
                // list's terms match nothing, and that must not go unsaid.
                tracing::error!(%error, terms = patterns.len(), "a text list's terms could not be compiled: they match nothing");
                None
            }
        }
    }

    /// The whole-word matches in `normalised`, in the order of their ends (overlapping ones
    /// too): each range, and the position of its entry.
    fn find<'a>(
        &'a self,
        normalised: &'a str,
    ) -> impl Iterator<Item = (std::ops::Range<usize>, usize)> + 'a {
        let bytes = normalised.as_bytes();
        self.automaton
            .find_overlapping_iter(normalised)
            .filter(move |found| {
                let starts_word = found.start() == 0 || bytes[found.start() - 1] == b' ';
                let ends_word = found.end() == bytes.len() || bytes[found.end()] == b' ';
                starts_word && ends_word
            })
            .map(|found| {
                let at = self.entries[found.pattern().as_usize()];
                (found.range(), at as usize)
            })
    }
}

impl Base {
    fn new(entries: Vec<Entry>) -> Base {
        let mut pdq_hashes = Vec::new();
        let mut pdq_entries = Vec::new();
        let mut md5 = FastMap::default();
        let mut sha256 = FastMap::default();
        for (at, entry) in entries.iter().enumerate() {
            let at = at as u32;
            match &entry.hash {
                EntryHash::Pdq(hash) => {
                    pdq_hashes.push(*hash);
                    pdq_entries.push(at);
                }
                // The last entry of a hash wins: a hash is in a list once, so an earlier one
                // was removed (and may still be among the removed ids).
                EntryHash::Md5(hash) => {
                    md5.insert(*hash, at);
                }
                EntryHash::Sha256(hash) => {
                    sha256.insert(*hash, at);
                }
                EntryHash::Term(_) => {}
            }
        }
        let terms = Terms::of(&entries);
        Base {
            pdq: PdqIndex::new(&pdq_hashes),
            pdq_entries,
            md5,
            sha256,
            terms,
            entries,
        }
    }
}

type IdSet = std::collections::HashSet<u64, foldhash::fast::RandomState>;

/// Two sequences of matches, each in the order of their ends, as one in that order (at an
/// equal end, the first's before the second's).
struct ByEnd<A: Iterator, B: Iterator> {
    first: std::iter::Peekable<A>,
    second: std::iter::Peekable<B>,
}

impl<'e, A, B> Iterator for ByEnd<A, B>
where
    A: Iterator<Item = (std::ops::Range<usize>, &'e Entry)>,
    B: Iterator<Item = (std::ops::Range<usize>, &'e Entry)>,
{
    type Item = (std::ops::Range<usize>, &'e Entry);

    fn next(&mut self) -> Option<Self::Item> {
        match (self.first.peek(), self.second.peek()) {
            (Some((a, _)), Some((b, _))) if b.end < a.end => self.second.next(),
            (Some(_), _) => self.first.next(),
            (None, _) => self.second.next(),
        }
    }
}

/// A list as the shards match against it.
pub struct CompiledList {
    pub name: Arc<str>,
    pub kind: ListKind,
    pub distance_max: u32,
    base: Arc<Base>,
    /// Entries appended since `base` was built, in order.
    delta: Vec<Entry>,
    /// The terms among `delta`.
    delta_terms: Option<Arc<Terms>>,
    /// Ids of `base`'s entries removed since it was built.
    removed: Arc<IdSet>,
    /// The highest id read, removed or not.
    read_to: Option<u64>,
}

impl CompiledList {
    /// A list of `entries` (image hashes or terms, as its content is).
    pub fn new(name: &str, kind: ListKind, distance_max: u32, entries: Vec<Entry>) -> Self {
        CompiledList {
            name: name.into(),
            kind,
            distance_max,
            read_to: entries.iter().map(|entry| entry.id).max(),
            base: Arc::new(Base::new(entries)),
            delta: Vec::new(),
            delta_terms: None,
            removed: Arc::default(),
        }
    }

    /// Every entry (removed ones left out), in order.
    fn live_entries(&self) -> impl Iterator<Item = &Entry> {
        self.base
            .entries
            .iter()
            .filter(|entry| !self.removed.contains(&entry.id))
            .chain(&self.delta)
    }

    /// This list without the entries `ids`: left out of `base` by id, rebuilt whole once
    /// more than [`DELTA_MAX`] are.
    pub fn without(&self, ids: &[u64]) -> CompiledList {
        let gone: IdSet = ids.iter().copied().collect();
        let mut removed = (*self.removed).clone();
        // The base's entries are in id order (as the store lists them).
        let in_base = |id: &&u64| {
            self.base
                .entries
                .binary_search_by_key(*id, |entry| entry.id)
                .is_ok()
        };
        removed.extend(ids.iter().filter(in_base).copied());
        if removed.len() > DELTA_MAX {
            let entries = self
                .live_entries()
                .filter(|entry| !gone.contains(&entry.id))
                .cloned()
                .collect();
            let rebuilt = CompiledList::new(&self.name, self.kind, self.distance_max, entries);
            return CompiledList {
                read_to: self.read_to,
                ..rebuilt
            };
        }
        let delta: Vec<Entry> = self
            .delta
            .iter()
            .filter(|entry| !gone.contains(&entry.id))
            .cloned()
            .collect();
        let delta_terms = if delta.len() == self.delta.len() {
            self.delta_terms.clone()
        } else {
            Terms::of(&delta).map(Arc::new)
        };
        CompiledList {
            name: self.name.clone(),
            kind: self.kind,
            distance_max: self.distance_max,
            base: self.base.clone(),
            delta,
            delta_terms,
            removed: Arc::new(removed),
            read_to: self.read_to,
        }
    }

    /// This list with `appended` added (entries with ids above every entry's); rebuilt whole
    /// once the appended entries pass [`DELTA_MAX`].
    pub fn appended(&self, appended: Vec<Entry>) -> CompiledList {
        let read_to = appended
            .iter()
            .map(|entry| entry.id)
            .max()
            .max(self.read_to);
        let terms = appended
            .iter()
            .any(|entry| entry.hash.content() == ListContent::Text);
        if self.delta.len() + appended.len() > DELTA_MAX {
            let entries = self.live_entries().cloned().chain(appended).collect();
            let rebuilt = CompiledList::new(&self.name, self.kind, self.distance_max, entries);
            return CompiledList { read_to, ..rebuilt };
        }
        let mut delta = self.delta.clone();
        delta.extend(appended);
        let delta_terms = if terms {
            Terms::of(&delta).map(Arc::new)
        } else {
            self.delta_terms.clone()
        };
        CompiledList {
            name: self.name.clone(),
            kind: self.kind,
            distance_max: self.distance_max,
            base: self.base.clone(),
            delta,
            delta_terms,
            removed: self.removed.clone(),
            read_to,
        }
    }

    pub fn len(&self) -> usize {
        self.base.entries.len() - self.removed.len() + self.delta.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The highest id of the entries this list was made from (removed ones included), if
    /// any: where reading what was appended since starts.
    pub fn last_id(&self) -> Option<u64> {
        self.read_to
    }

    /// The best match of an image: an exact hash first (SHA-256, then MD5), else the nearest
    /// PDQ hash within the list's distance to either of the image's PDQ hashes
    /// ([`ImageHashes::pdq_queries`]: none for an image of too little detail).
    pub fn lookup(&self, hashes: &ImageHashes) -> Option<ListMatch> {
        let base = &self.base;
        let live = |at: &u32| {
            let entry = &base.entries[*at as usize];
            (!self.removed.contains(&entry.id)).then_some((entry, 0))
        };
        let in_delta = |wanted: EntryHash| {
            self.delta
                .iter()
                .find(|entry| entry.hash == wanted)
                .map(|entry| (entry, 0))
        };
        let exact = base
            .sha256
            .get(&hashes.sha256)
            .and_then(live)
            .or_else(|| in_delta(EntryHash::Sha256(hashes.sha256)))
            .or_else(|| base.md5.get(&hashes.md5).and_then(live))
            .or_else(|| in_delta(EntryHash::Md5(hashes.md5)));
        let found = exact.or_else(|| {
            hashes
                .pdq_queries()
                .filter_map(|query| self.nearest_pdq(&query))
                .min_by_key(|(entry, d)| (*d, entry.id))
        });
        found.map(|(entry, distance)| self.reported(entry, distance))
    }

    fn reported(&self, entry: &Entry, distance: u32) -> ListMatch {
        ListMatch {
            list: self.name.clone(),
            kind: self.kind,
            entry_id: entry.id,
            label: entry.label.clone(),
            caller_id: entry.caller_id.clone(),
            hash_type: entry.hash.kind(),
            distance,
            term: match &entry.hash {
                EntryHash::Term(term) => Some(term.clone()),
                _ => None,
            },
        }
    }

    /// The whole-word matches of the list's terms in `normalised` (a text after the word
    /// list's normalisation), as byte ranges there, with what each reports; in the order of
    /// their ends, overlapping ones too, however the list was built (in the base, or added
    /// since: at an equal end, the base's first).
    pub fn terms_in<'a>(
        &'a self,
        normalised: &'a str,
    ) -> impl Iterator<Item = (std::ops::Range<usize>, ListMatch)> + 'a {
        let in_base = self.base.terms.iter().flat_map(move |terms| {
            terms.find(normalised).filter_map(move |(range, at)| {
                let entry = &self.base.entries[at];
                (!self.removed.contains(&entry.id)).then_some((range, entry))
            })
        });
        let in_delta = self.delta_terms.iter().flat_map(move |terms| {
            terms
                .find(normalised)
                .map(move |(range, at)| (range, &self.delta[at]))
        });
        ByEnd {
            first: in_base.peekable(),
            second: in_delta.peekable(),
        }
        .map(move |(range, entry)| (range, self.reported(entry, 0)))
    }

    /// The entry whose PDQ hash is nearest `query` within the list's distance.
    fn nearest_pdq(&self, query: &Pdq) -> Option<(&Entry, u32)> {
        let base = &self.base;
        let entry_at = |at: u32| &base.entries[base.pdq_entries[at as usize] as usize];
        let in_base = base
            .pdq
            .nearest_kept(query, self.distance_max, |at| {
                !self.removed.contains(&entry_at(at).id)
            })
            .map(|(at, d)| (entry_at(at), d));
        let in_delta = self
            .delta
            .iter()
            .filter_map(|entry| match &entry.hash {
                EntryHash::Pdq(hash) => Some((entry, hash.distance(query))),
                _ => None,
            })
            .filter(|(_, d)| *d <= self.distance_max)
            .min_by_key(|(entry, d)| (*d, entry.id));
        match (in_base, in_delta) {
            (Some(a), Some(b)) => Some(if b.1 < a.1 { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// Bytes of the PDQ index (the entries' own fields aside).
    pub fn index_bytes(&self) -> usize {
        self.base.pdq.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, hash: EntryHash) -> Entry {
        Entry {
            id,
            hash,
            label: Some(format!("label {id}")),
            caller_id: None,
            added_ms: 0,
        }
    }

    fn hashes(pdq: Pdq, quality: u8) -> ImageHashes {
        ImageHashes {
            pdq: Some((pdq, quality)),
            pdq_tool: None,
            md5: [0xee; 16],
            sha256: [0xee; 32],
        }
    }

    #[test]
    fn exact_hashes_win_then_the_nearest_pdq() {
        let near = Pdq([0; 32]);
        let mut far = near;
        far.0[0] = 0xff;
        let list = CompiledList::new(
            "known",
            ListKind::Block,
            31,
            vec![
                entry(1, EntryHash::Pdq(far)),
                entry(2, EntryHash::Pdq(near)),
                entry(3, EntryHash::Md5([9; 16])),
            ],
        );
        let found = list.lookup(&hashes(near, 100)).unwrap();
        assert_eq!((found.entry_id, found.distance), (2, 0));
        assert_eq!(found.label.as_deref(), Some("label 2"));
        let mut other = near;
        other.0[5] = 0x0f;
        assert_eq!(list.lookup(&hashes(other, 100)).unwrap().distance, 4);
        // Too weak a hash matches nothing.
        assert_eq!(list.lookup(&hashes(near, 20)), None);
        let mut exact = hashes(Pdq([0xaa; 32]), 100);
        exact.md5 = [9; 16];
        let found = list.lookup(&exact).unwrap();
        assert_eq!((found.entry_id, found.hash_type), (3, "md5"));
    }

    #[test]
    fn appended_entries_match_and_fold_into_the_base() {
        let list = CompiledList::new("l", ListKind::Allow, 31, Vec::new());
        assert_eq!(list.lookup(&hashes(Pdq([3; 32]), 100)), None);
        let list = list.appended(vec![entry(1, EntryHash::Pdq(Pdq([3; 32])))]);
        assert_eq!(list.lookup(&hashes(Pdq([3; 32]), 100)).unwrap().entry_id, 1);
        let many: Vec<Entry> = (2..DELTA_MAX as u64 + 10)
            .map(|id| {
                let mut hash = [0u8; 32];
                hash[..8].copy_from_slice(&id.to_be_bytes());
                entry(id, EntryHash::Sha256(hash))
            })
            .collect();
        let list = list.appended(many);
        assert!(list.delta.is_empty(), "rebuilt");
        assert_eq!(list.len(), DELTA_MAX + 9);
        assert_eq!(list.last_id(), Some(DELTA_MAX as u64 + 9));
        assert_eq!(list.lookup(&hashes(Pdq([3; 32]), 100)).unwrap().entry_id, 1);
    }

    #[test]
    fn removed_entries_stop_matching_before_a_rebuild() {
        let near = Pdq([0; 32]);
        let mut second = near;
        second.0[0] = 0x0f;
        let list = CompiledList::new(
            "l",
            ListKind::Block,
            31,
            vec![
                entry(1, EntryHash::Pdq(near)),
                entry(2, EntryHash::Pdq(second)),
                entry(3, EntryHash::Md5([0xee; 16])),
            ],
        )
        .appended(vec![entry(4, EntryHash::Sha256([0xee; 32]))]);
        assert_eq!(
            list.lookup(&hashes(near, 100)).unwrap().entry_id,
            4,
            "exact"
        );
        let list = list.without(&[4]);
        assert_eq!(list.lookup(&hashes(near, 100)).unwrap().entry_id, 3);
        let list = list.without(&[3]);
        assert_eq!(list.lookup(&hashes(near, 100)).unwrap().entry_id, 1);
        let list = list.without(&[1]);
        let found = list.lookup(&hashes(near, 100)).unwrap();
        assert_eq!((found.entry_id, found.distance), (2, 4));
        assert_eq!(list.len(), 1);
        assert!(
            Arc::ptr_eq(&list.base, &list.without(&[]).base),
            "not rebuilt"
        );
        let list = list.without(&[2]);
        assert_eq!(list.lookup(&hashes(near, 100)), None);
        assert_eq!(list.live_entries().count(), 0);
        assert_eq!(list.last_id(), Some(4), "removed entries were read");
    }

    #[test]
    fn terms_match_whole_words_after_normalisation() {
        let term = |id: u64, text: &str| entry(id, EntryHash::term(text).unwrap());
        let list = CompiledList::new(
            "slang",
            ListKind::Block,
            0,
            vec![term(1, "grapefruit"), term(2, "Two Words")],
        );
        let found = |text: &str| -> Vec<(String, u64)> {
            let normalised = normalised_term(text);
            list.terms_in(&normalised)
                .map(|(range, m)| (normalised[range].to_owned(), m.entry_id))
                .collect()
        };
        assert_eq!(
            found("I love GR4PEFRUIT, and tw0 w o r d s!"),
            [("grapefruit".to_owned(), 1), ("two words".to_owned(), 2)]
        );
        assert!(found("grapefruits and twowords").is_empty());
        let first = list
            .terms_in(&normalised_term("gr@pefruit"))
            .next()
            .unwrap()
            .1;
        assert_eq!(
            (first.hash_type, first.term.as_deref()),
            ("term", Some("grapefruit"))
        );
        // An image's hashes match nothing in a text list, and terms appended are matched.
        assert_eq!(list.lookup(&hashes(Pdq([0; 32]), 100)), None);
        let list = list.appended(vec![term(3, "melon")]);
        assert_eq!(list.terms_in("a melon").count(), 1);
    }

    #[test]
    fn terms_added_and_removed_since_the_base_match_without_a_rebuild() {
        let term = |id: u64, text: &str| entry(id, EntryHash::term(text).unwrap());
        let list = CompiledList::new(
            "l",
            ListKind::Block,
            0,
            vec![term(1, "grapefruit"), term(2, "melon")],
        );
        let ids = |list: &CompiledList, text: &str| -> Vec<u64> {
            list.terms_in(&normalised_term(text))
                .map(|(_, found)| found.entry_id)
                .collect()
        };
        let text = "grapefruit melon kiwi";
        let fewer = list.without(&[2]);
        assert!(Arc::ptr_eq(&list.base, &fewer.base), "not rebuilt");
        assert_eq!(ids(&fewer, text), [1]);
        let more = fewer.appended(vec![term(3, "kiwi"), term(4, "melon")]);
        assert!(Arc::ptr_eq(&list.base, &more.base), "not rebuilt");
        // Added since: in the order of their ends among the base's.
        assert_eq!(ids(&more, text), [1, 4, 3]);
        let early = list.appended(vec![term(5, "kiwi")]);
        assert_eq!(ids(&early, "kiwi melon grapefruit"), [5, 2, 1]);
        assert_eq!(ids(&more.without(&[3]), text), [1, 4]);
    }

    proptest::proptest! {
        #[test]
        fn terms_changed_in_steps_match_as_the_list_built_whole(
            changes in proptest::collection::vec((proptest::bool::ANY, 0usize..6), 1..40)
        ) {
            const TERMS: [&str; 6] = ["apple", "pear", "plum pie", "fig", "apple pear", "kiwi"];
            let text = normalised_term("apple pear plum pie, fig kiwi apple");
            let hash = |at: usize| EntryHash::term(TERMS[at]).unwrap();
            let mut live: Vec<Entry> = (0..TERMS.len())
                .map(|at| entry(at as u64 + 1, hash(at)))
                .collect();
            let mut list = CompiledList::new("l", ListKind::Allow, 0, live.clone());
            let mut next_id = live.len() as u64 + 1;
            let found = |list: &CompiledList| {
                let mut found: Vec<(usize, usize, u64)> = list
                    .terms_in(&text)
                    .map(|(range, m)| (range.start, range.end, m.entry_id))
                    .collect();
                // In the order of their ends either way; at an equal end, any order.
                let ends: Vec<usize> = found.iter().map(|(_, end, _)| *end).collect();
                assert!(ends.windows(2).all(|pair| pair[0] <= pair[1]), "{found:?}");
                found.sort_unstable();
                found
            };
            for (add, at) in changes {
                if add {
                    let added = entry(next_id, hash(at));
                    next_id += 1;
                    live.push(added.clone());
                    list = list.appended(vec![added]);
                } else if let Some(gone) = live.iter().position(|e| e.hash == hash(at)) {
                    let gone = live.remove(gone);
                    list = list.without(&[gone.id]);
                }
                let whole = CompiledList::new("l", ListKind::Allow, 0, live.clone());
                proptest::prop_assert_eq!(found(&list), found(&whole));
            }
        }
    }

    #[test]
    fn hashes_parse_by_kind() {
        assert!(matches!(
            EntryHash::parse("PDQ", &"ab".repeat(32)),
            Ok(EntryHash::Pdq(_))
        ));
        assert!(matches!(
            EntryHash::parse("md5", &"ab".repeat(16)),
            Ok(EntryHash::Md5(_))
        ));
        assert!(EntryHash::parse("md5", &"ab".repeat(32)).is_err());
        assert!(EntryHash::parse("sha1", &"ab".repeat(20)).is_err());
        // SHA-256 by either name, as the CSV import reads it.
        for kind in ["sha256", "SHA-256"] {
            assert!(matches!(
                EntryHash::parse(kind, &"ab".repeat(32)),
                Ok(EntryHash::Sha256(_))
            ));
        }
        assert!(validate_name("known-bad_2").is_ok());
        assert!(validate_name("Known").is_err());
        assert!(validate_entry_text("label", &Some("a\nb".into())).is_err());
        // U+FDFA normalises to 18 characters: 42 of them are within the given bytes, not the
        // normalised ones.
        let long = "\u{FDFA}".repeat(42);
        assert!(long.len() <= TERM_BYTES_MAX);
        assert!(EntryHash::term(&long).is_err());
    }
}
