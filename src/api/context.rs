//! What a request may touch: the narrow context of the request path.
//!
//! A handler gets a [`Context`] and nothing of the server: the store as this shard sees it,
//! the clock, the request limits of the configuration, the plans' limits (rate, concurrency,
//! quota), the check engine, the journal, the metrics, the body buffers, the downloader, the
//! count of uploads in progress, and whether the process is ready. The server (executor,
//! listeners, connection slots) builds one per shard and hands requests to it through
//! [`crate::http::conn::Handler`], implemented in [`super`].
//!
//! Everything here belongs to one shard and is used from that shard's thread only; the only
//! state shared across threads is behind [`Readiness`] and the journal's and leases' own
//! channels.

use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;

use super::buffers::{BufferPool, JsonBuffers};
use super::listings::Listings;
use crate::auth::{self, Caller};
use crate::checks::Engine;
use crate::clock::Clock;
use crate::config::LimitsConfig;
use crate::download::Downloader;
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::hash::FastMap;
use crate::http::conn::Deadline;
use crate::journal::Journal;
use crate::limits::ShardLimits;
use crate::lists::CompiledList;
use crate::metrics::Metrics;
use crate::store::lists::ListWriter;
use crate::store::lists_follower::ListsView;
use crate::store::view::{StoreView, Workflows};

/// Whether the whole process is ready to serve (every shard started, none failed, not
/// stopping): what `/health` answers.
pub trait Readiness {
    fn is_ready(&self) -> bool;
}

/// List imports and exports one shard works on at once: each takes one of the shard's blocking
/// threads (which the journal's commits share) while it parses up to 200,000 rows or reads and
/// writes up to a million (about 100 MB). An export's answer is then written like any other,
/// and held while a client is slow to read it (up to `server.write_timeout_ms`).
pub const LIST_FILES_PER_SHARD_MAX: usize = 1;

/// The share of a shard's uploads without a key in a header that one client may hold: a
/// quarter of `limits.unauthenticated_upload_bytes_max` and a quarter of
/// `limits.uploads_per_shard_max`. A client is its address, or its IPv6 network, as for
/// connections. A form's key is known only once the form is read, so a client that never
/// finishes its forms could otherwise hold every place and byte of the budget and lock out
/// every caller that sends its key in the form.
pub const UNAUTHENTICATED_SHARE_PER_CLIENT: usize = 4;

pub struct Context {
    /// The shard's index, for logs.
    /// `https` when the server terminates TLS, else `http` (for addresses of this server).
    pub scheme: &'static str,
    pub shard: usize,
    pub clock: Clock,
    /// `[limits]` of the configuration: body sizes, timeouts, uploads in progress.
    pub request_limits: LimitsConfig,
    /// Test only (`testing.panic_path`): a request to this path panics in its handler.
    pub panic_path: Option<String>,
    store: StoreView,
    /// The organizations' compiled lists, as this shard last saw them.
    lists: ListsView,
    /// Who carries out writes to the lists: the store, or a fleet's list log.
    list_writer: Arc<dyn ListWriter>,
    /// Rate, concurrency and quota of the plans, leased by this shard.
    pub limits: ShardLimits,
    pub checks: Engine,
    pub journal: Rc<Journal>,
    /// Every shard's disk journal, to read a check by id ([`crate::journal::shelf`]).
    pub journals: Arc<crate::journal::shelf::Shelf>,
    pub metrics: Rc<Metrics>,
    pub text_buffers: BufferPool,
    pub image_buffers: BufferPool,
    /// simd-json's working buffers, kept between JSON bodies.
    pub json_buffers: JsonBuffers,
    /// `GET /v1/workflows`'s answers, kept until the workflows change.
    pub listings: Listings,
    /// `POST /v1/feedback`'s writes, committed in groups.
    pub feedback_writes: Rc<super::feedback_writes::FeedbackWrites>,
    downloader: Downloader,
    /// Compatible-form uploads in progress (capped by `limits.uploads_per_shard_max`).
    pub uploads: Cell<usize>,
    /// List imports and exports in progress (capped by [`LIST_FILES_PER_SHARD_MAX`]).
    pub list_files: Cell<usize>,
    /// Bytes reserved by forms whose key is not known yet (capped by
    /// `limits.unauthenticated_upload_bytes_max`).
    pub unauthenticated_bytes: Cell<usize>,
    /// Forms without a key in a header being received, and their reserved bytes, by client.
    unauthenticated_by_client: RefCell<FastMap<IpAddr, (usize, usize)>>,
    readiness: Arc<dyn Readiness>,
}

/// What a [`Context`] is made of.
pub struct ContextParts {
    pub shard: usize,
    pub scheme: &'static str,
    pub clock: Clock,
    pub request_limits: LimitsConfig,
    pub panic_path: Option<String>,
    pub store: StoreView,
    pub lists: ListsView,
    pub list_writer: Arc<dyn ListWriter>,
    pub limits: ShardLimits,
    pub checks: Engine,
    pub journal: Rc<Journal>,
    pub journals: Arc<crate::journal::shelf::Shelf>,
    pub metrics: Rc<Metrics>,
    pub downloader: Downloader,
    pub readiness: Arc<dyn Readiness>,
}

impl Context {
    pub fn new(parts: ContextParts) -> Context {
        use super::buffers::*;
        let ContextParts {
            shard,
            scheme,
            clock,
            request_limits,
            panic_path,
            store,
            lists,
            list_writer,
            limits,
            checks,
            journal,
            journals,
            metrics,
            downloader,
            readiness,
        } = parts;
        Context {
            shard,
            scheme,
            clock,
            request_limits,
            panic_path,
            store,
            lists,
            list_writer,
            limits,
            checks,
            journal,
            journals,
            metrics,
            text_buffers: BufferPool::new(TEXT_BUFFERS_KEPT, TEXT_BUFFER_BYTES_KEPT),
            image_buffers: BufferPool::new(IMAGE_BUFFERS_KEPT, IMAGE_BUFFER_BYTES_KEPT),
            json_buffers: JsonBuffers::default(),
            listings: Listings::default(),
            feedback_writes: Rc::default(),
            downloader,
            uploads: Cell::new(0),
            list_files: Cell::new(0),
            unauthenticated_bytes: Cell::new(0),
            unauthenticated_by_client: RefCell::default(),
            readiness,
        }
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    pub fn is_ready(&self) -> bool {
        self.readiness.is_ready()
    }

    /// The caller presenting `key`: the store as it is now, the key's expiry and rotation
    /// grace judged at `now_ms`.
    pub fn authenticate_key(&self, key: &str, now_ms: i64) -> ApiResult<Caller> {
        self.store.sync();
        auth::authenticate(&self.store, key, now_ms)
    }

    /// The lists of `org` named `names`, as compiled now.
    pub fn lists_of(&self, org: &str, names: &[String]) -> Vec<Arc<CompiledList>> {
        self.lists.of(org, names)
    }

    /// The store, for the list routes' writes (on a blocking thread, never on the reactor).
    /// Who carries out writes to the lists.
    pub fn list_writer(&self) -> &Arc<dyn ListWriter> {
        &self.list_writer
    }

    pub fn store(&self) -> &crate::store::Store {
        self.store.store()
    }

    pub fn workflows(&self) -> ApiResult<Rc<Workflows>> {
        self.store.workflows().map_err(|error| {
            tracing::error!(%error, "reading workflows failed");
            ApiError::internal("the workflow store could not be read")
        })
    }

    /// How long a body may take to arrive (`limits.body_read_timeout_ms`), from when its
    /// read first waits: until then it reads only bytes already in.
    pub fn body_deadline(&self) -> Deadline {
        Deadline::After(std::time::Duration::from_millis(
            self.request_limits.body_read_timeout_ms,
        ))
    }

    /// 503 `busy` when the model queue is full: checked before an image body is read.
    pub fn refuse_if_busy(&self) -> ApiResult<()> {
        match &self.checks.worker {
            Some(worker) if worker.is_full() => Err(crate::inference::worker::busy()),
            _ => Ok(()),
        }
    }

    /// Downloads `url` for `caller` into `out` (the rules of [`Downloader`]), counting bytes
    /// and refusals.
    pub async fn download(&self, caller: &Caller, url: &str, out: &mut Vec<u8>) -> ApiResult<()> {
        let org = caller.org.record.name.as_str();
        match self.downloader.fetch(url, org, out).await {
            Ok(()) => {
                self.metrics.download(Ok(out.len()));
                Ok(())
            }
            Err(refused) => {
                self.metrics.download(Err(refused.reason));
                Err(refused.into())
            }
        }
    }

    /// A place among the uploads in progress, or 503 `busy` past the cap.
    pub fn upload_place(&self) -> ApiResult<Place<'_>> {
        Place::take(
            &self.uploads,
            self.request_limits.uploads_per_shard_max,
            "uploads",
        )
    }

    /// A place among the list imports and exports in progress, or 503 `busy` past the cap.
    pub fn list_file_place(&self) -> ApiResult<Place<'_>> {
        Place::take(
            &self.list_files,
            LIST_FILES_PER_SHARD_MAX,
            "list imports and exports",
        )
    }
}

impl Context {
    /// Reserves `bytes` of the shard's budget for forms whose key is not known yet, and a place
    /// among its uploads, for a form from `client`; or 503 `busy` past the budget, past the
    /// places, or past the client's share of either ([`UNAUTHENTICATED_SHARE_PER_CLIENT`]).
    pub fn reserve_unauthenticated(
        &self,
        bytes: usize,
        client: Option<IpAddr>,
    ) -> ApiResult<Reservation<'_>> {
        let busy = |what: &str| {
            ApiError::new(
                ErrorKind::Busy,
                format!("too many uploads without a key in a header are being received {what}; retry shortly, or send the key in a header"),
            )
            .with_retry_after(1)
        };
        let budget = self.request_limits.unauthenticated_upload_bytes_max;
        let held = self.unauthenticated_bytes.get();
        if held.saturating_add(bytes) > budget {
            return Err(busy("on this server"));
        }
        if let Some(client) = client {
            let by_client = self.unauthenticated_by_client.borrow();
            let (forms, reserved) = by_client.get(&client).copied().unwrap_or_default();
            let places = self.request_limits.uploads_per_shard_max;
            if forms + 1 > (places / UNAUTHENTICATED_SHARE_PER_CLIENT).max(1)
                || reserved.saturating_add(bytes) > budget / UNAUTHENTICATED_SHARE_PER_CLIENT
            {
                return Err(busy("from your address"));
            }
        }
        let place = self.upload_place()?;
        self.unauthenticated_bytes.set(held + bytes);
        if let Some(client) = client {
            let mut by_client = self.unauthenticated_by_client.borrow_mut();
            let entry = by_client.entry(client).or_default();
            entry.0 += 1;
            entry.1 += bytes;
        }
        Ok(Reservation {
            cx: self,
            client,
            bytes,
            _place: place,
        })
    }
}

/// Bytes of the unauthenticated upload budget and a place among the uploads, counted for a
/// client; given back on drop.
pub struct Reservation<'c> {
    cx: &'c Context,
    client: Option<IpAddr>,
    bytes: usize,
    _place: Place<'c>,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let held = &self.cx.unauthenticated_bytes;
        held.set(held.get() - self.bytes);
        if let Some(client) = self.client {
            let mut by_client = self.cx.unauthenticated_by_client.borrow_mut();
            if let Some(entry) = by_client.get_mut(&client) {
                entry.0 -= 1;
                entry.1 -= self.bytes;
                if entry.0 == 0 {
                    by_client.remove(&client);
                }
            }
        }
    }
}

/// A place among the shard's requests of one kind in progress (uploads, list files); freed on
/// drop.
pub struct Place<'c> {
    count: &'c Cell<usize>,
}

impl<'c> Place<'c> {
    /// A place among `count` in progress, at most `max`, or 503 `busy` (naming `what`).
    fn take(count: &'c Cell<usize>, max: usize, what: &str) -> ApiResult<Place<'c>> {
        if count.get() >= max {
            return Err(ApiError::new(
                ErrorKind::Busy,
                format!("too many {what} in progress on this server; retry shortly"),
            )
            .with_retry_after(1));
        }
        count.set(count.get() + 1);
        Ok(Place { count })
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.count.set(self.count.get() - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_capped_and_given_back() {
        let count = Cell::new(0);
        let first = Place::take(&count, 1, "list exports").unwrap();
        let busy = Place::take(&count, 1, "list exports").err().unwrap();
        assert_eq!(busy.kind, ErrorKind::Busy);
        assert!(
            busy.message.contains("too many list exports"),
            "{}",
            busy.message
        );
        drop(first);
        assert_eq!(count.get(), 0);
        assert!(Place::take(&count, 1, "list exports").is_ok());
    }
}
