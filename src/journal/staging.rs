//! The journal's staging area in memory-backed files (tmpfs): where a check's record is
//! committed before its answer under the interval policy, so that no answer waits for the disk.
//!
//! Why: LMDB rewrites the same pages on every commit (its meta pages, the last leaf), and the
//! interval's fsync puts those pages under writeback. While another process's bulk writes fill
//! the device's queue, a commit waits on a page under writeback for tens to hundreds of
//! milliseconds (measured: p99 93 ms, max 147 ms at 2,000 texts/s beside a 1.5 GB writer; with
//! the journal on tmpfs, p99 9 ms). A commit into an LMDB environment on tmpfs never waits for
//! the disk and keeps the interval policy's promise as it was: it survives the process (a
//! crash, SIGKILL), not a power loss or a kernel crash.
//!
//! A mover ([`move_batch`], on the shard's blocking threads) takes what is staged into the disk
//! journal in batches: the records, their charge counts and (in a fleet) their commit-order
//! numbers in one transaction, with the last staged sequence number it holds (`moved`), then
//! the delete from staging. A serving shard's mover moves in slices and fsyncs once after an
//! interval's last; a start and a stop fsync each batch. A mover cut off between the two
//! commits moves nothing twice: what is at or below `moved` is only deleted. So the disk
//! journal is what it was before staging existed, written a sync interval later, and every
//! reader of it (shipping, the quota's reconciliation, `journal prune`) is unchanged;
//! `modgate journal` also reads what is staged.
//!
//! Layout: `<root>/shard-N` is a shard's staging environment (one database, `staged`: the
//! big-endian sequence number to an [`Entry`]); `<data>/journal/staging` is a symbolic link to
//! the root, which is how `modgate journal` and the next start find it. A start moves whatever
//! a killed run left staged before any shard serves ([`recover`]); a graceful stop moves
//! everything and removes the shard's directory.
//!
//! Cost: the environment is written in its map (`WRITE_MAP`: a commit is memory writes, no
//! system call), and each write transaction first allocates the file's blocks it may need
//! ([`Staged::allocate_for`]), so a full tmpfs fails a commit (ENOSPC) where an unallocated
//! page of the map would have raised SIGBUS; the journal then commits those records into the
//! disk journal instead, and makes staging anew once the mover has emptied it. Entries are put with LMDB's append:
//! a shard's sequence numbers only grow ([`next_seq`] starts past everything staged and
//! moved), so a put needs no search and leaves full leaves behind.
//!
//! Limits: a staging environment maps at most [`STAGING_MAP_BYTES`] (less if the journal's own
//! map is smaller); if the disk cannot take records for that long, staging fills and commits
//! go to the disk journal (where they wait for the disk, or fail with 503 `busy` as a full
//! journal does), and the journal turns `/health` to 503 as soon as a move fails. Commits
//! leave [`DELETE_RESERVE_BYTES`] allocated so that the mover can always delete what it moved.

use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use heed::byteorder::BigEndian;
use heed::types::{Bytes, Str, U64};
use heed::{Database, Env, EnvFlags, EnvOpenOptions};

use super::charges::ChargeCounts;
use super::record::{open_env, shard_of_dir, stored_units};
use super::shipping::ShipIndex;

/// The largest map of a staging environment (a ceiling on tmpfs use, not an allocation).
pub const STAGING_MAP_BYTES: usize = 256 << 20;
/// Records moved to the disk journal in one transaction at most.
pub const MOVE_BATCH_RECORDS_MAX: usize = 8_192;
/// Records in one transaction of the running shard's mover at most: the mover's blocking
/// thread shares the shard's core, and a slice of this many takes it for about a millisecond.
pub const MOVE_SLICE_RECORDS: usize = 512;
/// The name of the link from the data directory's journal to the staging root.
pub const LINK_NAME: &str = "staging";
/// Where staging goes by default: the usual tmpfs of Linux.
pub const DEFAULT_TMPFS: &str = "/dev/shm";

/// One staged record: its key (the request id), the quota ledger key it is charged to, if any,
/// and the record's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    pub key: &'a str,
    pub charge: Option<&'a str>,
    pub value: &'a [u8],
}

/// No charge key (a length no key has: keys are at most `u16::MAX - 1` bytes).
const NO_CHARGE: u16 = u16::MAX;

impl<'a> Entry<'a> {
    /// `key length (u16 BE) | key | charge length (u16 BE, NO_CHARGE for none) | charge |
    /// value`. `None` for a key or charge too long to encode (request ids and ledger keys are
    /// far shorter).
    pub fn encode(&self, out: &mut Vec<u8>) -> Option<()> {
        let key_len = u16::try_from(self.key.len())
            .ok()
            .filter(|&n| n != NO_CHARGE)?;
        let charge_len = match self.charge {
            Some(charge) => u16::try_from(charge.len())
                .ok()
                .filter(|&n| n != NO_CHARGE)?,
            None => NO_CHARGE,
        };
        out.reserve(self.encoded_len());
        out.extend_from_slice(&key_len.to_be_bytes());
        out.extend_from_slice(self.key.as_bytes());
        out.extend_from_slice(&charge_len.to_be_bytes());
        out.extend_from_slice(self.charge.unwrap_or("").as_bytes());
        out.extend_from_slice(self.value);
        Some(())
    }

    /// How many bytes [`Entry::encode`] writes: the two lengths and the three fields.
    pub fn encoded_len(&self) -> usize {
        4 + self.key.len() + self.charge.map_or(0, str::len) + self.value.len()
    }

    /// The entry in `bytes`, or `None` if they are not one.
    pub fn decode(bytes: &'a [u8]) -> Option<Entry<'a>> {
        let (key, rest) = take_str(bytes)?;
        let key = key?;
        let (charge, value) = take_str(rest)?;
        Some(Entry { key, charge, value })
    }
}

/// A length-prefixed string (`None` inside for [`NO_CHARGE`]) and what follows it.
fn take_str(bytes: &[u8]) -> Option<(Option<&str>, &[u8])> {
    let len = u16::from_be_bytes([*bytes.first()?, *bytes.get(1)?]);
    let rest = bytes.get(2..)?;
    if len == NO_CHARGE {
        return Some((None, rest));
    }
    let text = rest.get(..usize::from(len))?;
    Some((
        Some(std::str::from_utf8(text).ok()?),
        rest.get(usize::from(len)..)?,
    ))
}

/// A shard's staging environment.
#[derive(Clone)]
pub struct Staged {
    pub env: Env,
    pub db: Database<U64<BigEndian>, Bytes>,
    /// The file's blocks allocated ahead of the pages LMDB writes in the map.
    blocks: std::sync::Arc<Blocks>,
}

/// The staging file and how much of it is allocated. The environment writes its pages in the
/// map (`WRITE_MAP`), and LMDB makes the file as long as the map without allocating it: on
/// tmpfs, a page written in a hole when the filesystem is full would raise SIGBUS and kill the
/// process where a `pwrite` would have returned ENOSPC. So every write transaction first
/// allocates ([`Staged::allocate_for`]) more than it can write past the last page in use, and
/// a full filesystem fails that transaction (checks get 503 `busy`) instead.
struct Blocks {
    file: std::fs::File,
    allocated: std::sync::atomic::AtomicU64,
    /// LMDB's page size for this environment (read once: it never changes).
    page: u64,
}

/// Allocated past what a transaction needs, when the filesystem has it, so that allocations
/// are few (bytes).
const ALLOCATE_AHEAD_BYTES: u64 = 8 << 20;
/// Room a staged commit leaves allocated past its own need (bytes): what deletes of a few
/// entries need. A delete writes pages (copies of the leaves it changes, the free list) before
/// the pages it frees can be used, so without this, commits that filled the tmpfs while the
/// disk stalled would leave the mover no room to delete what it moved once the disk is back:
/// staging would stay full, and every check 503, for good. A delete of one entry needs about
/// 72 pages by [`Staged::allocate_for`]'s bound, and the pages each delete frees serve the
/// next ones.
pub const DELETE_RESERVE_BYTES: u64 = 1 << 20;
/// Staged entries one delete transaction takes at most; halved, down to one, while the
/// filesystem has no room for it ([`delete_through`]).
const DELETE_SLICE_RECORDS: usize = MOVE_SLICE_RECORDS;
/// The lock file's blocks allocated before LMDB maps it (its 126 reader slots of 64 bytes and
/// a header take about 8 KiB).
const LOCK_FILE_BYTES: libc::off_t = 64 << 10;
/// Allocated when the environment opens, before its first transaction (bytes: 64 pages).
const OPEN_BYTES: u64 = 64 << 12;

/// Opens (creating) the staging environment in `dir`.
pub fn open(dir: &Path, journal_map_bytes: usize) -> anyhow::Result<Staged> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // LMDB sizes its lock file and writes it through a map too: its blocks first, so that a
    // full tmpfs fails this open instead of raising SIGBUS at the first reader.
    {
        use std::os::fd::AsRawFd;
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("lock.mdb"))
            .with_context(|| format!("creating the lock file in {}", dir.display()))?;
        // SAFETY: an FFI call on a descriptor owned by `lock`, open for the call, with two
        // integers; no memory is passed.
        let error = unsafe { libc::posix_fallocate(lock.as_raw_fd(), 0, LOCK_FILE_BYTES) };
        if error != 0 {
            return Err(std::io::Error::from_raw_os_error(error))
                .with_context(|| format!("allocating the lock file in {}", dir.display()));
        }
    }
    let mut options = EnvOpenOptions::new();
    options
        .map_size(journal_map_bytes.min(STAGING_MAP_BYTES))
        .max_dbs(2);
    // SAFETY: NO_SYNC only skips an fsync that tmpfs does not need; it changes nothing of the
    // map's memory safety. WRITE_MAP has LMDB write its pages in the map instead of `pwrite`
    // them at commit: at an ordinary load a check's commit is a transaction of its own, and
    // this saves its 5 to 6 system calls (measured at 1,000 texts/s: the commits' share of
    // the shard's time 11.4 % -> 5.7 %). The map is then writable, but nothing here writes
    // it: heed hands out shared slices of it, valid for their transaction, and LMDB's
    // copy-on-write never changes a page a live reader sees. The one new hazard, SIGBUS on a
    // hole of a full filesystem, is closed by [`Staged::allocate_for`] before every write
    // transaction. Otherwise as for the journal: written only through LMDB, opened once per
    // process (one directory per shard), on a local filesystem.
    unsafe {
        options.flags(EnvFlags::NO_SYNC | EnvFlags::WRITE_MAP);
    }
    // SAFETY: see above.
    let env = unsafe { options.open(dir) }
        .with_context(|| format!("opening the journal's staging {}", dir.display()))?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("data.mdb"))
        .with_context(|| format!("opening the journal's staging file in {}", dir.display()))?;
    let mut blocks = Blocks {
        file,
        allocated: std::sync::atomic::AtomicU64::new(0),
        page: 0,
    };
    // The first pages, before the first transaction writes any.
    let map_size = env.info().map_size as u64;
    blocks.allocate(OPEN_BYTES.min(map_size), map_size)?;
    let mut txn = env.write_txn()?;
    let db = env.create_database(&mut txn, Some("staged"))?;
    blocks.page = db.stat(&txn)?.page_size as u64;
    txn.commit()?;
    Ok(Staged {
        env,
        db,
        blocks: std::sync::Arc::new(blocks),
    })
}

impl Staged {
    /// Allocates the file's blocks for what `_txn` (a write transaction of this environment,
    /// which holds LMDB's writer lock, so no other transaction grows the file meanwhile; taken
    /// as proof of that lock, not read) may write: `records` entries of `bytes` in all,
    /// written or deleted. Call it before the transaction writes anything.
    ///
    /// The bound: a transaction writes its changed pages to new pages, taken from the free
    /// list (inside the file's used part, allocated already) or past the last page in use.
    /// Writing or deleting `records` entries of `bytes` changes at most twice the pages their
    /// bytes fill (leaves at least half full) plus one a record (large values' overflow
    /// pages, a partial leaf each), branch pages fewer than the leaves, and a free list
    /// growing by 8 bytes a page freed; four times that, plus 64 pages, is past all of it.
    pub fn allocate_for(
        &self,
        txn: &heed::RwTxn<'_>,
        records: usize,
        bytes: usize,
    ) -> heed::Result<()> {
        self.allocate_with_room(txn, records, bytes, 0)
    }

    /// [`Staged::allocate_for`] a commit of records to stage: with [`DELETE_RESERVE_BYTES`]
    /// more, so that commits never take the room the mover needs to delete what it moved.
    pub fn allocate_for_commit(
        &self,
        txn: &heed::RwTxn<'_>,
        records: usize,
        bytes: usize,
    ) -> heed::Result<()> {
        self.allocate_with_room(txn, records, bytes, DELETE_RESERVE_BYTES)
    }

    fn allocate_with_room(
        &self,
        _txn: &heed::RwTxn<'_>,
        records: usize,
        bytes: usize,
        room: u64,
    ) -> heed::Result<()> {
        let info = self.env.info();
        let map_size = info.map_size as u64;
        let page = self.blocks.page;
        let pages = 4 * ((bytes as u64).div_ceil(page) + records as u64) + 64;
        let needed = (info.last_page_number as u64 + 1 + pages) * page;
        // The room is kept in the map too (an eighth of it at most, for small maps): a commit
        // that would leave less of it is refused as a full map is, so that deletes always
        // find pages.
        let room = room.min(map_size / 8);
        if room > 0 && needed + room > map_size {
            return Err(heed::Error::Mdb(heed::MdbError::MapFull));
        }
        self.blocks
            .allocate((needed + room).min(map_size), map_size)
    }
}

impl Blocks {
    /// Allocates the file's blocks up to `needed` bytes, and [`ALLOCATE_AHEAD_BYTES`] more
    /// (up to `map_size`) if the filesystem has them; a filesystem without `needed`: ENOSPC.
    fn allocate(&self, needed: u64, map_size: u64) -> heed::Result<()> {
        use std::os::fd::AsRawFd;
        use std::sync::atomic::Ordering;
        let allocated = self.allocated.load(Ordering::Acquire);
        if needed <= allocated {
            return Ok(());
        }
        let ahead = (needed + ALLOCATE_AHEAD_BYTES).min(map_size).max(needed);
        let mut error = 0;
        for upto in [ahead, needed] {
            // SAFETY: an FFI call on a descriptor this struct owns (open until it drops) with
            // two integers; no memory is passed.
            error = unsafe {
                libc::posix_fallocate(
                    self.file.as_raw_fd(),
                    allocated as libc::off_t,
                    (upto - allocated) as libc::off_t,
                )
            };
            if error == 0 {
                self.allocated.fetch_max(upto, Ordering::AcqRel);
                return Ok(());
            }
        }
        Err(heed::Error::Io(std::io::Error::from_raw_os_error(error)))
    }
}

/// The disk journal's side of a move: where the records, their charges, their commit order
/// and the `moved` mark go.
pub struct DiskJournal<'a> {
    pub env: &'a Env,
    pub records: Database<Str, Bytes>,
    pub charges: ChargeCounts,
    /// In a fleet: the commit-order index (numbered on from its last entry, in the move's own
    /// transaction, so that two moves never give one number twice).
    pub order: Option<ShipIndex>,
    pub marks: Database<Str, U64<BigEndian>>,
}

/// What a move did: records moved, staged entries taken (the records and any that did not
/// decode; a batch that took its `max` may have left more behind), and (in a fleet) the next
/// commit-order number after them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moved {
    pub records: usize,
    pub taken: usize,
    pub next_order: Option<u64>,
}

/// The key of the last staged sequence number the disk journal holds.
const MOVED_KEY: &str = "moved";

/// Opens (creating) the disk journal's database of staging marks.
pub fn open_marks(env: &Env) -> heed::Result<Database<Str, U64<BigEndian>>> {
    let mut txn = env.write_txn()?;
    let marks = env.create_database(&mut txn, Some("staging"))?;
    txn.commit()?;
    Ok(marks)
}

/// The last staged sequence number the disk journal holds (0: none).
pub fn moved(env: &Env, marks: Database<Str, U64<BigEndian>>) -> heed::Result<u64> {
    let txn = env.read_txn()?;
    Ok(marks.get(&txn, MOVED_KEY)?.unwrap_or(0))
}

/// The next sequence number to stage under: past what is staged and what was moved.
pub fn next_seq(staged: &Staged, moved: u64) -> heed::Result<u64> {
    let txn = staged.env.read_txn()?;
    let last = staged.db.last(&txn)?.map_or(0, |(seq, _)| seq);
    Ok(last.max(moved) + 1)
}

/// Whether a move fsyncs the disk journal before it deletes what it moved from staging.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    Now,
    /// The caller fsyncs after its last move. Staging is a tmpfs, lost on a power loss as the
    /// unsynced pages are, and a crash of the process loses neither: the moved records are
    /// committed to the disk journal's file before staging lets them go.
    Later,
}

/// Moves up to `max` (at most [`MOVE_BATCH_RECORDS_MAX`]) staged records into the disk
/// journal, fsyncs it (with [`Fsync::Now`]), and deletes them from staging (nothing
/// [`Moved::taken`]: nothing was staged). An entry that does not decode is logged and left out (only its record
/// is lost, never the batch).
///
/// A batch that does not fit (`MDB_MAP_FULL`) should be tried again smaller, down to one
/// record ([`smaller_after`]): LMDB reuses the pages a transaction freed (a `journal prune`
/// in another process) only two transactions later, and failed moves commit none, so
/// without a small move that fits, a journal that was full would stay full after a prune.
pub fn move_batch(
    staged: &Staged,
    disk: &DiskJournal<'_>,
    max: usize,
    fsync: Fsync,
) -> heed::Result<Moved> {
    let max = max.clamp(1, MOVE_BATCH_RECORDS_MAX);
    let mut txn = disk.env.write_txn()?;
    let moved = disk.marks.get(&txn, MOVED_KEY)?.unwrap_or(0);
    let mut entries: Vec<(u64, Vec<u8>)> = Vec::new();
    {
        let read = staged.env.read_txn()?;
        for entry in staged.db.range(&read, &(moved + 1..))? {
            let (seq, bytes) = entry?;
            entries.push((seq, bytes.to_vec()));
            if entries.len() == max {
                break;
            }
        }
    }
    let Some(&(last, _)) = entries.last() else {
        drop(txn);
        delete_through(staged, moved)?;
        return Ok(Moved::default());
    };
    let decoded: Vec<Entry<'_>> = entries
        .iter()
        .filter_map(|(seq, bytes)| {
            let entry = Entry::decode(bytes);
            if entry.is_none() {
                tracing::error!(seq, "a staged journal entry does not decode: left out");
            }
            entry
        })
        .collect();
    for entry in &decoded {
        disk.records.put(&mut txn, entry.key, entry.value)?;
    }
    let mut next_order = None;
    if let Some(index) = disk.order {
        let first = index.next_in(&txn)?;
        let keys: Vec<&str> = decoded.iter().map(|entry| entry.key).collect();
        index.append(&mut txn, first, &keys)?;
        next_order = Some(first + keys.len() as u64);
    }
    let charged: Vec<(&str, u32)> = decoded
        .iter()
        .filter_map(|entry| Some((entry.charge?, stored_units(entry.value))))
        .collect();
    if !charged.is_empty() {
        disk.charges.add(&mut txn, charged)?;
    }
    disk.marks.put(&mut txn, MOVED_KEY, &last)?;
    txn.commit()?;
    if fsync == Fsync::Now {
        disk.env.force_sync()?;
    }
    delete_through(staged, last)?;
    Ok(Moved {
        records: decoded.len(),
        taken: entries.len(),
        next_order,
    })
}

/// After a move of `max` records failed with `error`: the smaller batch to try at once, if
/// the journal's map was full and a smaller batch is left to try.
pub fn smaller_after(error: &heed::Error, max: usize) -> Option<usize> {
    let full = matches!(error, heed::Error::Mdb(heed::MdbError::MapFull));
    (full && max > 1).then_some(max / 2)
}

/// Deletes the staged entries up to `seq` (moved already), in transactions of at most
/// [`DELETE_SLICE_RECORDS`], halved down to one while the filesystem or the map has no room
/// for a slice (a full staging: see [`DELETE_RESERVE_BYTES`]).
fn delete_through(staged: &Staged, seq: u64) -> heed::Result<()> {
    if seq == 0 {
        return Ok(());
    }
    let mut max = DELETE_SLICE_RECORDS;
    loop {
        match delete_slice(staged, seq, max) {
            Ok(deleted) if deleted < max => return Ok(()),
            Ok(_) => {}
            Err(error) if is_full(&error) && max > 1 => max /= 2,
            Err(error) => return Err(error),
        }
    }
}

/// Deletes the first `max` staged entries at or before `seq`; returns how many there were.
fn delete_slice(staged: &Staged, seq: u64, max: usize) -> heed::Result<usize> {
    let mut txn = staged.env.write_txn()?;
    let (mut records, mut bytes, mut last) = (0, 0, 0);
    for entry in staged.db.range(&txn, &(..=seq))? {
        let (at, value) = entry?;
        (records, bytes, last) = (records + 1, bytes + value.len(), at);
        if records == max {
            break;
        }
    }
    if records == 0 {
        return Ok(0);
    }
    staged.allocate_for(&txn, records, bytes)?;
    staged.db.delete_range(&mut txn, &(..=last))?;
    txn.commit()?;
    Ok(records)
}

/// Whether `error` is a filesystem without room (a staging tmpfs that is full).
pub fn is_no_space(error: &heed::Error) -> bool {
    matches!(error, heed::Error::Io(io) if io.raw_os_error() == Some(libc::ENOSPC))
}

/// Whether a commit into staging failed for want of room: the tmpfs, or the staging map
/// ([`STAGING_MAP_BYTES`]), is full.
pub fn is_full(error: &heed::Error) -> bool {
    is_no_space(error) || matches!(error, heed::Error::Mdb(heed::MdbError::MapFull))
}

/// Every staged record of the staging root `root` (all shards), decoded to (key, record
/// bytes), sorted by key: for `modgate journal`, which merges them with the disk journals.
/// Records also in the disk journal (moved, not deleted yet) come twice; the merge drops the
/// second.
pub fn read_all(root: &Path, journal_map_bytes: usize) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut all = Vec::new();
    for dir in shard_dirs(root)? {
        let staged = open(&dir, journal_map_bytes)?;
        let txn = staged.env.read_txn()?;
        for entry in staged.db.iter(&txn)? {
            let (_, bytes) = entry?;
            if let Some(entry) = Entry::decode(bytes) {
                all.push((entry.key.to_owned(), entry.value.to_vec()));
            }
        }
    }
    all.sort();
    Ok(all)
}

/// The `shard-N` directories under `root`.
fn shard_dirs(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return Ok(dirs);
    };
    for entry in entries {
        let path = entry?.path();
        if shard_of_dir(&path).is_some() && path.is_dir() {
            dirs.push(path);
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// The staging root the data directory's link points to, if there is one.
pub fn linked_root(data_dir: &Path) -> Option<PathBuf> {
    std::fs::read_link(data_dir.join("journal").join(LINK_NAME)).ok()
}

/// The staging root for `data_dir` by default: a directory of its own on `/dev/shm` when that
/// is a tmpfs (named from the data directory's absolute path, so two servers on one machine do
/// not share it); `None` elsewhere (commits then go to the disk journal directly).
pub fn default_root(data_dir: &Path) -> Option<PathBuf> {
    if !is_tmpfs(Path::new(DEFAULT_TMPFS)) {
        return None;
    }
    let absolute = std::path::absolute(data_dir).ok()?;
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        absolute.as_os_str().as_encoded_bytes(),
    );
    let name = crate::image::hashes::hex(&digest.as_ref()[..8]);
    Some(Path::new(DEFAULT_TMPFS).join(format!("{DEFAULT_ROOT_PREFIX}{name}")))
}

/// Whether `path` is on a tmpfs (its mount's filesystem type, from `/proc/self/mounts`).
fn is_tmpfs(path: &Path) -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    let mut best: Option<(usize, bool)> = None;
    for line in mounts.lines() {
        let mut fields = line.split_whitespace();
        let (Some(_), Some(mount), Some(kind)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if path.starts_with(mount) && best.is_none_or(|(len, _)| mount.len() >= len) {
            best = Some((mount.len(), kind == "tmpfs"));
        }
    }
    best.is_some_and(|(_, tmpfs)| tmpfs)
}

/// At start, before any shard serves: moves what a killed run left staged (under the link the
/// data directory holds) into the disk journals, then removes that staging; then, with a
/// `root` to stage under, makes it and links the data directory to it.
pub fn recover(
    data_dir: &Path,
    root: Option<&Path>,
    journal_map_bytes: usize,
    ship: bool,
) -> anyhow::Result<usize> {
    let link = data_dir.join("journal").join(LINK_NAME);
    let mut recovered = 0;
    if let Some(old) = linked_root(data_dir) {
        for dir in shard_dirs(&old)? {
            let Some(name) = dir.file_name() else {
                continue;
            };
            let disk_dir = data_dir.join("journal").join(name);
            recovered += drain(&dir, &disk_dir, journal_map_bytes, ship)
                .with_context(|| format!("moving the staged records of {}", dir.display()))?;
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        let _ = std::fs::remove_file(&link);
    }
    collect_orphans();
    if let Some(root) = root {
        std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
        std::fs::create_dir_all(data_dir.join("journal"))?;
        let owner = std::path::absolute(data_dir)?;
        std::fs::write(root.join(OWNER_FILE), owner.as_os_str().as_encoded_bytes())
            .with_context(|| format!("writing {}", root.join(OWNER_FILE).display()))?;
        std::os::unix::fs::symlink(root, &link)
            .with_context(|| format!("linking {} to {}", link.display(), root.display()))?;
    }
    Ok(recovered)
}

/// The file in a staging root that names the data directory it belongs to.
const OWNER_FILE: &str = "owner";
/// The names of staging roots made by default under [`DEFAULT_TMPFS`].
const DEFAULT_ROOT_PREFIX: &str = "modgate-journal-";

/// Removes the default staging roots whose data directory is gone (a server killed, then its
/// data directory deleted): nothing would ever move what they hold.
fn collect_orphans() {
    let Ok(entries) = std::fs::read_dir(DEFAULT_TMPFS) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with(DEFAULT_ROOT_PREFIX));
        if !ours {
            continue;
        }
        let Ok(owner) = std::fs::read(path.join(OWNER_FILE)) else {
            continue;
        };
        let owner = PathBuf::from(std::ffi::OsString::from_vec(owner));
        if !owner.exists() {
            tracing::info!(staging = %path.display(), data_dir = %owner.display(), "removing the journal staging of a data directory that is gone");
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// At a graceful stop, once every shard moved its staging and removed its directory: the root
/// and the data directory's link go too.
pub fn release(data_dir: &Path, root: &Path) {
    let _ = std::fs::remove_file(root.join(OWNER_FILE));
    if std::fs::remove_dir(root).is_ok() {
        let _ = std::fs::remove_file(data_dir.join("journal").join(LINK_NAME));
    }
}

/// Moves everything staged in `staging_dir` into the disk journal `disk_dir`.
fn drain(
    staging_dir: &Path,
    disk_dir: &Path,
    map_bytes: usize,
    ship: bool,
) -> anyhow::Result<usize> {
    let staged = open(staging_dir, map_bytes)?;
    let (env, records) = open_env(disk_dir, map_bytes, true)?;
    let charges = ChargeCounts::open(&env, records, crate::clock::Clock::System.now_ms())?;
    let marks = open_marks(&env)?;
    let order = match ship {
        true => Some(ShipIndex::open(&env, records, crate::clock::Clock::System.now_ms())?.0),
        false => None,
    };
    let disk = DiskJournal {
        env: &env,
        records,
        charges,
        order,
        marks,
    };
    Ok(move_all(&staged, &disk)?)
}

/// Moves everything staged into the disk journal, in batches halved where one does not fit
/// ([`smaller_after`]); answers how many records were moved. Blocking: for a start, a stop
/// and a recovery, where nothing else is served meanwhile.
pub fn move_all(staged: &Staged, disk: &DiskJournal<'_>) -> heed::Result<usize> {
    let (mut total, mut max) = (0, MOVE_BATCH_RECORDS_MAX);
    loop {
        match move_batch(staged, disk, max, Fsync::Now) {
            // Nothing taken, not nothing moved: a batch of undecodable entries moves none.
            Ok(moved) if moved.taken == 0 => return Ok(total),
            Ok(moved) => total += moved.records,
            Err(error) => max = smaller_after(&error, max).ok_or(error)?,
        }
    }
}

/// Commits `records` to staging under sequence numbers from `first`.
pub(super) fn stage<'r>(
    staged: &Staged,
    first: u64,
    records: &'r [(String, Vec<u8>, Option<String>)],
) -> heed::Result<()> {
    let mut txn = staged.env.write_txn()?;
    let entry = |(key, value, charge): &'r (String, Vec<u8>, Option<String>)| Entry {
        key,
        charge: charge.as_deref(),
        value,
    };
    // An entry's bytes, LMDB's node header and the 8-byte key.
    let payload = records
        .iter()
        .map(|record| entry(record).encoded_len() + 28)
        .sum();
    staged.allocate_for_commit(&txn, records.len(), payload)?;
    // Sequence numbers only grow (a shard's next one is past all it staged and all that was
    // moved), so each entry goes after the last: LMDB appends it without a search, and a full
    // leaf splits at its end, which leaves it full instead of half empty. A number behind the
    // last fails the commit instead of overwriting a record not yet moved. The key is written
    // as the bytes `U64<BigEndian>` would make of it, without their allocation.
    let db = staged.db.remap_key_type::<Bytes>();
    let mut bytes = Vec::new();
    for (offset, record) in records.iter().enumerate() {
        bytes.clear();
        if entry(record).encode(&mut bytes).is_none() {
            return Err(heed::Error::Mdb(heed::MdbError::BadValSize));
        }
        let seq = (first + offset as u64).to_be_bytes();
        db.put_with_flags(&mut txn, heed::PutFlags::APPEND, &seq, &bytes)?;
    }
    txn.commit()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A tmpfs of `bytes` mounted on a temporary directory, unmounted when dropped (root).
    pub(crate) struct SmallTmpfs {
        pub(crate) dir: tempfile::TempDir,
    }

    impl SmallTmpfs {
        pub(crate) fn mount(bytes: usize) -> SmallTmpfs {
            let dir = tempfile::tempdir().expect("dir");
            let mounted = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
                .arg(dir.path())
                .status()
                .expect("mount runs");
            assert!(
                mounted.success(),
                "mounting a tmpfs failed (the test needs root)"
            );
            SmallTmpfs { dir }
        }
    }

    impl Drop for SmallTmpfs {
        fn drop(&mut self) {
            // Lazily: an environment a test leaves open (a journal its executor's tasks
            // hold) keeps the filesystem busy; it goes once that closes.
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }

    #[test]
    fn a_full_tmpfs_fails_a_staged_commit_instead_of_killing_the_process() {
        // A 2 MB filesystem under a 64 MB map: with the map written in place, a page in a
        // hole past 2 MB would raise SIGBUS (this test process would die); allocated first,
        // the commit that does not fit fails with an error.
        let tmpfs = SmallTmpfs::mount(2 << 20);
        let staged = open(&tmpfs.dir.path().join("shard-0"), 64 << 20).expect("opens");
        let value = vec![7u8; 16 << 10];
        let mut failed = None;
        for seq in 1..1_000u64 {
            let key = format!("r{seq}");
            let records = [(key, value.clone(), None)];
            if let Err(error) = super::stage(&staged, seq, &records) {
                failed = Some((seq, error));
                break;
            }
        }
        let (seq, error) = failed.expect("2 MB cannot take 16 MB of records");
        assert!(seq > 10, "the first records fit ({seq})");
        assert!(is_no_space(&error), "{error}");
        // What was committed reads back.
        let txn = staged.env.read_txn().expect("txn");
        assert_eq!(staged.db.len(&txn).expect("len"), seq - 1);
    }

    /// The disk was stalled until staged commits filled the tmpfs: once it takes records
    /// again, the move empties staging (its deletes fit in the room commits left). Without the
    /// room, every delete failed with ENOSPC, at every pass and after a restart.
    #[test]
    fn a_tmpfs_filled_by_staged_commits_is_emptied_by_the_move() {
        // A full tmpfs (2 MB under a 64 MB map), twice, and a full map (2 MB and 1 MB on a
        // roomy filesystem), where the room for deletes is kept in the map.
        for (tmpfs_bytes, map_bytes, value_bytes) in [
            (Some(2 << 20), 64 << 20, 600),
            (Some(2 << 20), 64 << 20, 16 << 10),
            (None, 2 << 20, 600),
            // The smallest map a configuration may have: the room is an eighth of it.
            (None, 1 << 20, 600),
        ] {
            let tmpfs = tmpfs_bytes.map(SmallTmpfs::mount);
            let plain = tempfile::tempdir().expect("tempdir");
            let root = tmpfs
                .as_ref()
                .map_or(plain.path(), |tmpfs| tmpfs.dir.path());
            let staged = open(&root.join("shard-0"), map_bytes).expect("opens");
            let value = vec![7u8; value_bytes];
            let stage_one = |seq: u64| {
                let records = [(format!("r{seq:06}"), value.clone(), Some("acme".to_owned()))];
                super::stage(&staged, seq, &records)
            };
            let mut seq = 1;
            let error = loop {
                match stage_one(seq) {
                    Ok(()) => seq += 1,
                    Err(error) => break error,
                }
            };
            assert_eq!(is_no_space(&error), tmpfs.is_some(), "{error}");
            assert!(is_full(&error), "{error}");
            assert!(
                seq > 10,
                "the first records fit ({seq} of {value_bytes} bytes)"
            );
            let disk_dir = tempfile::tempdir().expect("tempdir");
            let (env, records) = super::open_env(disk_dir.path(), 64 << 20, true).expect("disk");
            let disk = DiskJournal {
                env: &env,
                records,
                charges: ChargeCounts::open(&env, records, 0).expect("charges"),
                order: None,
                marks: open_marks(&env).expect("marks"),
            };
            assert_eq!(
                move_all(&staged, &disk).expect("moves"),
                (seq - 1) as usize,
                "{value_bytes} bytes a record"
            );
            let txn = staged.env.read_txn().expect("txn");
            assert_eq!(staged.db.len(&txn).expect("len"), 0);
            drop(txn);
            let txn = env.read_txn().expect("txn");
            assert_eq!(records.len(&txn).expect("len"), seq - 1);
        }
    }

    #[test]
    fn entries_round_trip_and_bad_bytes_are_refused() {
        let entry = Entry {
            key: "0193abc",
            charge: Some("24322/acme"),
            value: b"\x01\x02record",
        };
        let mut bytes = Vec::new();
        entry.encode(&mut bytes).expect("encodes");
        assert_eq!(
            bytes,
            b"\x00\x070193abc\x00\x0a24322/acme\x01\x02record".to_vec()
        );
        assert_eq!(Entry::decode(&bytes), Some(entry));
        let uncharged = Entry {
            key: "k",
            charge: None,
            value: b"",
        };
        let mut bytes = Vec::new();
        uncharged.encode(&mut bytes).expect("encodes");
        assert_eq!(bytes, b"\x00\x01k\xff\xff".to_vec());
        assert_eq!(Entry::decode(&bytes), Some(uncharged));
        for bad in [
            &b""[..],
            b"\x00",
            b"\x00\x05abc",
            b"\x00\x01k",
            b"\x00\x01k\x00\x09short",
            b"\x00\x02\xff\xfe\xff\xff",
            b"\xff\xff\x00\x00",
        ] {
            assert_eq!(Entry::decode(bad), None, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_not_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Entry::decode(&bytes);
        }

        #[test]
        fn every_entry_round_trips(
            key in "[0-9a-z]{1,40}",
            charge in proptest::option::of("[0-9a-z/]{0,40}"),
            value in proptest::collection::vec(any::<u8>(), 0..100),
        ) {
            let entry = Entry { key: &key, charge: charge.as_deref(), value: &value };
            let mut bytes = Vec::new();
            entry.encode(&mut bytes).expect("encodes");
            prop_assert_eq!(Entry::decode(&bytes), Some(entry));
        }
    }

    #[test]
    fn a_batch_that_does_not_fit_is_tried_again_halved_down_to_one() {
        let full = heed::Error::Mdb(heed::MdbError::MapFull);
        assert_eq!(smaller_after(&full, MOVE_BATCH_RECORDS_MAX), Some(4_096));
        assert_eq!(smaller_after(&full, 2), Some(1));
        assert_eq!(smaller_after(&full, 1), None);
        let other = heed::Error::Mdb(heed::MdbError::Corrupted);
        assert_eq!(smaller_after(&other, 64), None);
    }

    /// A staging environment and a disk journal in a temporary directory.
    struct Pair {
        _dir: tempfile::TempDir,
        staged: Staged,
        env: Env,
        records: Database<Str, Bytes>,
        charges: ChargeCounts,
        marks: Database<Str, U64<BigEndian>>,
    }

    impl Pair {
        fn new() -> Pair {
            let dir = tempfile::tempdir().expect("tempdir");
            let staged = open(&dir.path().join("staging"), 64 << 20).expect("staging");
            let (env, records) =
                super::open_env(&dir.path().join("disk"), 64 << 20, true).expect("disk");
            let charges = ChargeCounts::open(&env, records, 0).expect("charges");
            let marks = open_marks(&env).expect("marks");
            Pair {
                _dir: dir,
                staged,
                env,
                records,
                charges,
                marks,
            }
        }

        fn stage(&self, seq: u64, key: &str, charge: Option<&str>) {
            let mut bytes = Vec::new();
            Entry {
                key,
                charge,
                value: key.as_bytes(),
            }
            .encode(&mut bytes)
            .expect("encodes");
            let mut txn = self.staged.env.write_txn().expect("txn");
            self.staged.db.put(&mut txn, &seq, &bytes).expect("put");
            txn.commit().expect("commit");
        }

        fn disk(&self) -> DiskJournal<'_> {
            DiskJournal {
                env: &self.env,
                records: self.records,
                charges: self.charges,
                order: None,
                marks: self.marks,
            }
        }
    }

    /// The journal stages with LMDB's append (no search, full leaves): that holds because the
    /// next sequence number is past everything staged and moved, and a number behind the last
    /// is refused rather than put out of order.
    #[test]
    fn staging_appends_past_the_last_entry_and_refuses_a_number_behind_it() {
        let pair = Pair::new();
        let records = |keys: &[&str]| -> Vec<(String, Vec<u8>, Option<String>)> {
            let record = |key: &&str| (key.to_string(), key.as_bytes().to_vec(), None);
            keys.iter().map(record).collect()
        };
        let stage = |first, keys: &[&str]| super::stage(&pair.staged, first, &records(keys));
        stage(1, &["a", "b", "c"]).expect("stage");
        let taken = move_batch(&pair.staged, &pair.disk(), 2, Fsync::Later).expect("move");
        assert_eq!(taken.taken, 2);
        let next = next_seq(&pair.staged, moved(&pair.env, pair.marks).expect("moved"));
        assert_eq!(next.expect("next"), 4);
        stage(4, &["d", "e"]).expect("stage");
        let staged_keys = || -> Vec<(u64, String)> {
            let txn = pair.staged.env.read_txn().expect("txn");
            let entries = pair.staged.db.iter(&txn).expect("iter");
            let entry = |item: heed::Result<(u64, &[u8])>| {
                let (seq, bytes) = item.expect("entry");
                (seq, Entry::decode(bytes).expect("decodes").key.to_owned())
            };
            entries.map(entry).collect()
        };
        let expected = [(3, "c"), (4, "d"), (5, "e")].map(|(seq, key)| (seq, key.to_owned()));
        assert_eq!(staged_keys(), expected);
        for behind in [5, 2] {
            let refused = stage(behind, &["f"]);
            assert!(
                matches!(refused, Err(heed::Error::Mdb(heed::MdbError::KeyExist))),
                "{behind}: {refused:?}"
            );
        }
        assert_eq!(staged_keys(), expected, "a refused commit wrote nothing");
        // Once everything is moved, numbering goes on past the moved ones.
        move_all(&pair.staged, &pair.disk()).expect("move");
        let next = next_seq(&pair.staged, moved(&pair.env, pair.marks).expect("moved"));
        assert_eq!(next.expect("next"), 6);
    }

    #[test]
    fn a_move_in_slices_commits_each_and_leaves_staging_empty() {
        let pair = Pair::new();
        for seq in 1..=5u64 {
            pair.stage(seq, &format!("k{seq}"), None);
        }
        let disk = pair.disk();
        let slice = |max| move_batch(&pair.staged, &disk, max, Fsync::Later).expect("move");
        assert_eq!((slice(2).taken, slice(2).taken, slice(2).taken), (2, 2, 1));
        assert_eq!(slice(2).taken, 0);
        assert_eq!(moved(&pair.env, pair.marks).expect("moved"), 5);
        let txn = pair.env.read_txn().expect("txn");
        assert_eq!(pair.records.len(&txn).expect("len"), 5);
        let txn = pair.staged.env.read_txn().expect("txn");
        assert!(pair.staged.db.is_empty(&txn).expect("empty"), "all deleted");
    }

    #[test]
    fn a_whole_batch_of_undecodable_entries_does_not_end_a_move_of_everything() {
        let pair = Pair::new();
        let garbage = MOVE_BATCH_RECORDS_MAX as u64;
        {
            let mut txn = pair.staged.env.write_txn().expect("txn");
            for seq in 1..=garbage {
                pair.staged.db.put(&mut txn, &seq, &[0xff]).expect("put");
            }
            txn.commit().expect("commit");
        }
        assert!(
            Entry::decode(&[0xff]).is_none(),
            "the filler does not decode"
        );
        pair.stage(garbage + 1, "after", None);
        assert_eq!(move_all(&pair.staged, &pair.disk()).expect("move"), 1);
        assert_eq!(moved(&pair.env, pair.marks).expect("moved"), garbage + 1);
        let txn = pair.env.read_txn().expect("txn");
        assert!(pair.records.get(&txn, "after").expect("get").is_some());
        let txn = pair.staged.env.read_txn().expect("txn");
        assert!(pair.staged.db.is_empty(&txn).expect("empty"), "all deleted");
    }

    #[test]
    fn a_move_cut_off_before_its_delete_moves_nothing_twice() {
        let pair = Pair::new();
        let (staged, env, marks, charges) = (&pair.staged, &pair.env, pair.marks, pair.charges);
        let stage = |seq: u64, key: &str| pair.stage(seq, key, Some("24322/acme"));
        stage(1, "a");
        stage(2, "b");
        let disk = pair.disk();
        assert_eq!(
            move_batch(staged, &disk, 1000, Fsync::Now)
                .expect("move")
                .records,
            2
        );
        assert_eq!(moved(env, marks).expect("moved"), 2);
        // As if the delete from staging had not happened: the entries are put back.
        stage(1, "a");
        stage(2, "b");
        stage(3, "c");
        assert_eq!(next_seq(staged, 2).expect("next"), 4);
        assert_eq!(
            move_batch(staged, &disk, 1000, Fsync::Now)
                .expect("move")
                .records,
            1,
            "only c is new"
        );
        assert_eq!(
            move_batch(staged, &disk, 1000, Fsync::Now)
                .expect("move")
                .records,
            0
        );
        let counts = charges.read(env).expect("charges");
        assert_eq!(counts.counts, vec![("24322/acme".to_owned(), 3)]);
        let txn = staged.env.read_txn().expect("txn");
        assert!(staged.db.is_empty(&txn).expect("empty"), "all deleted");
    }
}
