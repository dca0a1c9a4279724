//! The journal: one LMDB environment per shard (`<data>/journal/shard-N`), one record per
//! check and per refused check request, keyed by request id (ids sort by time, so a key range
//! is a time range).
//!
//! Durability contract: a check is answered only after its record is committed, so killing
//! the process (even with SIGKILL) loses no answered check. Commits are grouped: the committer
//! lets every check that the same poll of the reactor woke append first, and records appended
//! while a commit runs go in the next one, so under load one commit carries many records and at
//! rest a record commits at once. Without an fsync at commit (`interval`) the commit runs on
//! the shard's own thread: it is a write into the page cache, cheaper than a hand-off to a
//! blocking thread and back, which at an ordinary load cost a park and a wake-up of the shard
//! per check. A commit into the disk journal that takes longer than [`INLINE_COMMIT_SLOW`] (a
//! slow disk) sends the next ones to the shard's blocking threads for [`INLINE_PAUSE`] (a
//! commit into staging waits for no disk and never does), and with `always` (an fsync
//! each) they always go there, so the shard serves on while a commit waits for the disk.
//!
//! Sync policy (`journal.sync`):
//! - `always`: each commit is fsynced before its checks are answered. Nothing answered is
//!   lost, even on power loss. Costs an fsync (milliseconds) per commit.
//! - `interval`: commits reach the operating system at once (a process crash or SIGKILL loses
//!   nothing) and are fsynced every `journal.sync_interval_ms`. A power loss or kernel crash
//!   can lose the checks answered within that last interval. Where a tmpfs is at hand
//!   (`journal.staging`), the commits before the answers go to a staging environment on it and
//!   a mover takes them to the disk journal, fsynced, every interval ([`staging`]): the same
//!   promise, and no answer waits for a slow disk.
//!
//! Records are bincode; `modgate journal` ([`query`]) reads and merges the shards' journals.

pub mod charges;
pub mod query;
mod record;
pub mod shelf;
pub mod shipping;
pub mod staging;
mod writer;

pub use record::*;
pub use shipping::PRUNE_UNSHIPPED_READ_MAX;
pub use writer::*;
