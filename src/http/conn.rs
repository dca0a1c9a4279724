//! One HTTP/1.1 connection: read heads, hand each request to the host, write answers in order.
//!
//! The connection owns one read buffer (at least `head_bytes_max` long, so a head always fits)
//! and one write buffer. Answers are appended to the write buffer and sent just before the
//! connection next reads from the socket, so answers to pipelined requests leave together.
//!
//! Timeouts, all from [`ConnConfig`]:
//! - waiting for the first byte of a request: `idle_timeout` (the first request of a
//!   connection gets `header_read_timeout` instead), then a silent close;
//! - from the first byte to the end of the head: `header_read_timeout`, then 408 and close;
//! - every write: `write_timeout`, then close.
//!
//! A timeout given as a span ([`Deadline::After`]) starts when its read or write first has
//! to wait, so the many that complete at once never read the clock. One timer per
//! connection (its `Alarm`) serves all its waits.
//!
//! A connection is closed after an answer when the client asked for it, when the request's body
//! was not read to its end (the framing of what follows is then unknown), when the answer says
//! so, or when the server is stopping. Closing after an unread body is a lingering close: our
//! side is shut for writing and the client's bytes are read and dropped for a moment, so the
//! client sees the answer instead of a reset.
//!
//! The stop signal reaches a connection only while it waits between requests: a request in
//! progress is finished and answered with `Connection: close`.
//!
//! A connection whose client pipelines and keeps its socket full never waits for it; after
//! [`RUN_WITHOUT_WAIT_MAX`] of answering it lets the shard's other tasks run, and waits for the
//! shard to poll its sockets when another connection has bytes waiting
//! ([`ConnHost::others_readable`]), so one keep-alive client cannot hold a shard.
//!
//! A panic while a request is handled is caught here: that request is answered by
//! [`Handler::answer_panic`] (a 500) and the connection is closed, since what the handler left
//! in the connection's buffers and body state is unknown. The shard goes on serving.

use std::future::{poll_fn, Future};
use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, FutureExt};
use glommio::timer::Timer;

use super::chunked::{ChunkedDecoder, Step};
use super::head::{parse_head_into, Framing, HeadError, HeadLimits, Method, RequestHead, Version};
use super::response::{ConnectionHeader, Frame, Response};
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::request_id::RequestId;

/// Bytes read and dropped at most during a lingering close.
pub const LINGER_BYTES_MAX: usize = 1 << 20;
/// Time spent at most in a lingering close.
pub const LINGER_TIMEOUT: Duration = Duration::from_secs(2);
/// The read buffer is never smaller than this, whatever `head_bytes_max` is.
pub const READ_BUFFER_BYTES_MIN: usize = 16 * 1024;
/// Answers waiting in the write buffer are sent once they pass this, even with more
/// pipelined requests to read: a client that pipelines and never reads cannot make the
/// server hold more than this (plus one answer) for it.
pub const WRITE_BUFFER_FLUSH_BYTES: usize = 64 * 1024;
/// An unread request body up to this size is read and dropped after a refusal, so the
/// connection can stay open; a larger one closes it.
pub const DRAIN_BYTES_MAX: usize = 64 * 1024;
/// How long draining an unread body may take.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);
/// A write buffer grown past this (a large answer) is shrunk back after it is sent.
pub const WRITE_BUFFER_KEEP_BYTES: usize = 16 * 1024;
/// A connection that has answered requests for this long without once waiting for its
/// socket (a client that pipelines and keeps the socket full) lets the shard's ready tasks
/// run, and, if the host says another connection has bytes waiting, lets the shard read them
/// before it goes on: one keep-alive client cannot hold the shard. A client that waits for
/// each answer waits for its socket every request and never gets here.
pub const RUN_WITHOUT_WAIT_MAX: Duration = Duration::from_micros(50);
/// The pause of such a connection: over by the time the shard next looks at its timers.
const TURN_PAUSE: Duration = Duration::from_nanos(100);

/// Limits and timeouts of connections (from `[server]` in the configuration).
#[derive(Clone, Debug)]
pub struct ConnConfig {
    pub head: HeadLimits,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub write_timeout: Duration,
}

/// What a connection needs from the shard that runs it.
pub trait ConnHost {
    fn conn_config(&self) -> &ConnConfig;
    fn next_request_id(&self) -> RequestId;
    /// The current `Date` header value.
    fn date(&self) -> std::cell::Ref<'_, String>;
    fn is_stopping(&self) -> bool;
    /// Ready once the server stops; registers `cx`'s waker under `slot` otherwise.
    fn poll_stop(&self, slot: usize, cx: &mut Context<'_>) -> Poll<()>;
    /// A request head arrived on the connection in `slot`: it is no longer idle.
    fn request_started(&self, _slot: usize) {}
    /// The client of the connection in `slot` (its address, or its IPv6 network), if known.
    fn client(&self, _slot: usize) -> Option<std::net::IpAddr> {
        None
    }
    /// Whether a connection other than the one in `slot` has bytes waiting to be read
    /// ([`RUN_WITHOUT_WAIT_MAX`]). A host that cannot tell says yes.
    fn others_readable(&self, _slot: usize) -> bool {
        true
    }
}

/// The request path, as a connection sees it: the one entry point from the server into the
/// routes ([`crate::api`] implements it).
pub trait Handler {
    /// The answer to a head refused before routing (`error`), in the envelope of the route at
    /// `path` (empty when the path is not known). A refused request to a check route is
    /// journaled like any other refused check before it is answered.
    fn refuse_head(
        &self,
        error: &ApiError,
        path: &str,
        request_id: &RequestId,
    ) -> impl Future<Output = Response>;
    /// The answer to a request whose handler panicked (counted and logged by the handler;
    /// the connection closes after it).
    fn answer_panic(&self, path: &str, request_id: &RequestId) -> Response;
    /// Answers one request. The handler reads as much of the body as it needs.
    fn handle<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        exchange: &mut Exchange<'_, S>,
    ) -> impl Future<Output = Response>;
}

/// The socket with its buffers.
pub struct ConnIo<S> {
    stream: S,
    rbuf: Box<[u8]>,
    /// Unconsumed bytes are `rbuf[rstart..rend]`.
    rstart: usize,
    rend: usize,
    wbuf: Vec<u8>,
    /// The string of the connection's last head, emptied, for its next one.
    head_text: String,
    write_timeout: Duration,
    /// Answers since the connection last waited for its socket to read.
    run: Run,
    alarm: Alarm,
}

/// When a read or a write must be over.
#[derive(Clone, Copy, Debug)]
pub enum Deadline {
    At(Instant),
    /// This long from the first time it is waited on; it then becomes [`Deadline::At`], so a
    /// deadline kept across several reads (a body's) bounds them all.
    After(Duration),
}

impl Deadline {
    fn fix(&mut self, now: Instant) -> Instant {
        match *self {
            Deadline::At(at) => at,
            Deadline::After(span) => {
                let at = now + span;
                *self = Deadline::At(at);
                at
            }
        }
    }
}

/// A timer kept across waits: a connection's one timer (and [`until`]'s). A glommio
/// [`Timer`] is entered into the reactor's map when first polled and taken out when dropped:
/// a timer per wait would cost both for every request of a keep-alive connection. The alarm
/// stays armed at the earliest deadline it was given; a wait whose deadline is no earlier
/// leaves it alone, and when it fires before that deadline the wait re-arms it.
///
/// The timer holds the waker of the task that last armed it, so an alarm is polled by one
/// task only (the connection's). When it fires while that task waits for something else (a
/// model, the journal), the task is woken once for nothing, which futures allow.
struct Alarm {
    /// The timer and when it fires (that may be past).
    armed: Option<(Timer, Instant)>,
}

impl Alarm {
    fn new() -> Self {
        Alarm { armed: None }
    }

    /// Ready once `deadline` has passed; until then, makes sure this task is woken by it.
    fn poll(&mut self, deadline: &mut Deadline, cx: &mut Context<'_>) -> Poll<()> {
        let now = Instant::now();
        let at = deadline.fix(now);
        if now >= at {
            return Poll::Ready(());
        }
        let timer = match &mut self.armed {
            Some((_, fires)) if now < *fires && *fires <= at => return Poll::Pending,
            Some((timer, fires)) => {
                timer.reset(at - now);
                *fires = at;
                timer
            }
            None => &mut self.armed.insert((Timer::new(at - now), at)).0,
        };
        Pin::new(timer).poll(cx).map(|_| ())
    }
}

/// A connection's answers since it last waited for its socket.
#[derive(Clone, Copy)]
enum Run {
    None,
    /// One: a client that waits for each answer never gets further, and costs no clock read.
    One,
    /// More, since the second was sent.
    Since(Instant),
}

#[derive(Debug)]
enum ReadFailure {
    Eof,
    Timeout,
    Stopped,
    Io(#[allow(dead_code)] io::Error),
}

impl<S: AsyncRead + AsyncWrite + Unpin> ConnIo<S> {
    fn new(stream: S, config: &ConnConfig) -> Self {
        let size = config.head.head_bytes_max.max(READ_BUFFER_BYTES_MIN);
        ConnIo {
            stream,
            rbuf: vec![0; size].into_boxed_slice(),
            rstart: 0,
            rend: 0,
            wbuf: Vec::with_capacity(4096),
            head_text: String::new(),
            write_timeout: config.write_timeout,
            run: Run::None,
            alarm: Alarm::new(),
        }
    }

    /// Counts an answer. Once the connection has answered for [`RUN_WITHOUT_WAIT_MAX`]
    /// without a wait for its socket, it lets the shard's ready tasks run (a yield), and if
    /// another connection has bytes waiting, it waits once for the shard to poll its sockets.
    /// A yield alone would not do then: the executor polls for I/O only when no task is
    /// ready, so a task that is always ready keeps the other sockets unread; a timer is
    /// served only by that poll, which costs a turn of the reactor (tens of microseconds).
    async fn take_turns<H: ConnHost>(&mut self, host: &H, slot: usize) {
        match self.run {
            Run::None => self.run = Run::One,
            Run::One => self.run = Run::Since(Instant::now()),
            Run::Since(since) => {
                if since.elapsed() >= RUN_WITHOUT_WAIT_MAX {
                    self.run = Run::None;
                    futures_lite::future::yield_now().await;
                    if host.others_readable(slot) {
                        // Made after the yield, so that it is not yet due when first polled
                        // (a timer found due at once does not pause).
                        Timer::new(TURN_PAUSE).await;
                    }
                }
            }
        }
    }

    fn buffered(&self) -> &[u8] {
        &self.rbuf[self.rstart..self.rend]
    }

    /// Drops the empty lines buffered before a request line: RFC 9112 2.2 has them ignored
    /// (some clients end a body with CRLF), so they do not start a request, its deadline or
    /// its 408.
    fn skip_empty_lines(&mut self) {
        while self.rstart < self.rend && matches!(self.rbuf[self.rstart], b'\r' | b'\n') {
            self.rstart += 1;
        }
    }

    /// Sends what the write buffer holds.
    async fn flush(&mut self) -> io::Result<()> {
        if self.wbuf.is_empty() {
            return Ok(());
        }
        let ConnIo {
            stream,
            wbuf,
            alarm,
            ..
        } = self;
        let mut write = std::pin::pin!(async {
            stream.write_all(wbuf).await?;
            stream.flush().await
        });
        let mut deadline = Deadline::After(self.write_timeout);
        let result = poll_fn(|cx| {
            if let Poll::Ready(result) = write.as_mut().poll(cx) {
                return Poll::Ready(result);
            }
            alarm
                .poll(&mut deadline, cx)
                .map(|()| Err(io::Error::new(io::ErrorKind::TimedOut, "write timeout")))
        })
        .await;
        self.wbuf.clear();
        if self.wbuf.capacity() > WRITE_BUFFER_KEEP_BYTES {
            self.wbuf.shrink_to(WRITE_BUFFER_KEEP_BYTES);
        }
        result
    }

    /// Makes room at the end of the read buffer: drops consumed bytes.
    fn compact(&mut self) {
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        } else if self.rend == self.rbuf.len() && self.rstart > 0 {
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        }
    }

    /// Flushes pending answers, then reads more bytes, racing the deadline and (if given) the
    /// host's stop signal.
    async fn fill<H: ConnHost>(
        &mut self,
        deadline: &mut Deadline,
        stop: Option<(&H, usize)>,
    ) -> Result<usize, ReadFailure> {
        self.flush().await.map_err(ReadFailure::Io)?;
        self.compact();
        debug_assert!(self.rend < self.rbuf.len(), "fill called on a full buffer");
        let ConnIo {
            stream,
            rbuf,
            rend,
            run,
            alarm,
            ..
        } = self;
        let mut read = std::pin::pin!(stream.read(&mut rbuf[*rend..]));
        let outcome = poll_fn(|cx| {
            if let Poll::Ready(result) = read.as_mut().poll(cx) {
                return Poll::Ready(match result {
                    Ok(0) => Err(ReadFailure::Eof),
                    Ok(n) => Ok(n),
                    Err(error) => Err(ReadFailure::Io(error)),
                });
            }
            *run = Run::None;
            if let Some((host, slot)) = stop {
                if host.poll_stop(slot, cx).is_ready() {
                    return Poll::Ready(Err(ReadFailure::Stopped));
                }
            }
            alarm.poll(deadline, cx).map(|()| Err(ReadFailure::Timeout))
        })
        .await;
        if let Ok(n) = outcome {
            *rend += n;
        }
        outcome
    }
}

/// Runs `future` until `deadline`; `None` if the deadline came first. Its timer is made only
/// if the future has to wait: most complete before any is needed.
pub async fn until<F: Future>(deadline: Instant, future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let (mut alarm, mut deadline) = (Alarm::new(), Deadline::At(deadline));
    poll_fn(|cx| {
        if let Poll::Ready(value) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(value));
        }
        alarm.poll(&mut deadline, cx).map(|()| None)
    })
    .await
}

/// How a body's end is found.
enum BodyReader {
    /// `Content-Length`: bytes still to read (never 0: a finished body is `Done`).
    Length {
        remaining: u64,
    },
    Chunked(ChunkedDecoder),
}

/// How far the body of the current request has been read.
enum BodyState {
    /// Nothing read yet, and the client waits for `100 Continue` before it sends the body
    /// (`Expect: 100-continue` on HTTP/1.1): sent with the first read, not before, so a
    /// request refused without its body never has it sent.
    AwaitingContinue(BodyReader),
    Reading(BodyReader),
    /// Read to its end, or there was none.
    Done,
}

impl BodyState {
    fn new(head: &RequestHead) -> Self {
        let reader = match head.framing {
            Framing::Empty | Framing::Length(0) => return BodyState::Done,
            Framing::Length(n) => BodyReader::Length { remaining: n },
            Framing::Chunked => BodyReader::Chunked(ChunkedDecoder::new()),
        };
        if head.expect_continue && head.version == Version::Http11 {
            BodyState::AwaitingContinue(reader)
        } else {
            BodyState::Reading(reader)
        }
    }
}

/// One request in progress: its head, its id and access to its body.
pub struct Exchange<'c, S> {
    pub head: RequestHead,
    pub request_id: RequestId,
    /// The client the connection came from ([`ConnHost::client`]).
    pub client: Option<std::net::IpAddr>,
    io: &'c mut ConnIo<S>,
    body: BodyState,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Exchange<'_, S> {
    pub fn framing(&self) -> Framing {
        self.head.framing
    }

    /// Whether the body has been read to its end.
    pub fn body_done(&self) -> bool {
        matches!(self.body, BodyState::Done)
    }

    /// The next piece of the body, borrowed from the connection's buffer; `None` at its end.
    pub async fn body_piece(&mut self, deadline: &mut Deadline) -> ApiResult<Option<&[u8]>> {
        let range = self.next_body_range(deadline).await?;
        Ok(range.map(|range| &self.io.rbuf[range]))
    }

    /// Reads the whole body into `out`; 413 `body_too_large` as soon as it is known to pass
    /// `max_bytes` (from `Content-Length` before reading anything, else while streaming).
    pub async fn read_body(
        &mut self,
        out: &mut Vec<u8>,
        max_bytes: usize,
        mut deadline: Deadline,
    ) -> ApiResult<()> {
        if let Framing::Length(n) = self.head.framing {
            if n > max_bytes as u64 {
                return Err(body_too_large(max_bytes));
            }
            out.reserve(n as usize);
        }
        while let Some(range) = self.next_body_range(&mut deadline).await? {
            if out.len() + range.len() > max_bytes {
                return Err(body_too_large(max_bytes));
            }
            out.extend_from_slice(&self.io.rbuf[range]);
        }
        Ok(())
    }

    /// Reads and drops the rest of an unread body, when that is cheap: at most
    /// [`DRAIN_BYTES_MAX`] within [`DRAIN_TIMEOUT`], and never when the client is waiting for
    /// a `100 Continue` it will not get. Returns whether the body is now fully read.
    async fn drain_body(&mut self) -> bool {
        let small = match &self.body {
            BodyState::Done => return true,
            // The client sends nothing until it gets a `100 Continue` it will not get.
            BodyState::AwaitingContinue(_) => return false,
            BodyState::Reading(BodyReader::Length { remaining }) => {
                *remaining <= DRAIN_BYTES_MAX as u64
            }
            BodyState::Reading(BodyReader::Chunked(_)) => true,
        };
        if !small {
            return false;
        }
        let mut deadline = Deadline::After(DRAIN_TIMEOUT);
        let mut dropped = 0usize;
        while let Ok(Some(range)) = self.next_body_range(&mut deadline).await {
            dropped += range.len();
            if dropped > DRAIN_BYTES_MAX {
                return false;
            }
        }
        self.body_done()
    }

    async fn next_body_range(
        &mut self,
        deadline: &mut Deadline,
    ) -> ApiResult<Option<Range<usize>>> {
        loop {
            let reader = match &mut self.body {
                BodyState::Done => return Ok(None),
                BodyState::AwaitingContinue(reader) | BodyState::Reading(reader) => reader,
            };
            let available = self.io.rend - self.io.rstart;
            if available > 0 {
                let start = self.io.rstart;
                match reader {
                    BodyReader::Length { remaining } => {
                        let take = ((*remaining).min(available as u64)) as usize;
                        self.io.rstart += take;
                        *remaining -= take as u64;
                        if *remaining == 0 {
                            self.body = BodyState::Done;
                        }
                        return Ok(Some(start..start + take));
                    }
                    BodyReader::Chunked(decoder) => {
                        let (used, step) = decoder
                            .step(&self.io.rbuf[start..self.io.rend])
                            .map_err(|error| {
                                ApiError::bad_request(format!("bad chunked body: {error}"))
                            })?;
                        self.io.rstart += used;
                        match step {
                            Step::Data {
                                start: from,
                                end: to,
                            } => return Ok(Some(start + from..start + to)),
                            Step::NeedMore => {}
                            Step::Done => {
                                self.body = BodyState::Done;
                                return Ok(None);
                            }
                        }
                        if self.io.rstart < self.io.rend {
                            continue;
                        }
                    }
                }
            }
            if matches!(self.body, BodyState::AwaitingContinue(_)) {
                if let BodyState::AwaitingContinue(reader) =
                    std::mem::replace(&mut self.body, BodyState::Done)
                {
                    self.body = BodyState::Reading(reader);
                }
                self.io
                    .wbuf
                    .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            }
            match self.io.fill::<NoHost>(deadline, None).await {
                Ok(_) => {}
                Err(ReadFailure::Timeout) => {
                    return Err(ApiError::new(
                        ErrorKind::RequestTimeout,
                        "the request body did not arrive in time",
                    ))
                }
                Err(_) => {
                    return Err(ApiError::bad_request(
                        "the connection ended before the request body was complete",
                    ))
                }
            }
        }
    }
}

fn body_too_large(max_bytes: usize) -> ApiError {
    ApiError::new(
        ErrorKind::BodyTooLarge,
        format!("request body over the limit of {max_bytes} bytes for this route"),
    )
}

enum HeadRead {
    Head(RequestHead),
    /// End of the connection without an answer (EOF, idle timeout, stop, I/O error).
    Close,
    /// Answer with this error, then close. What the request line said, as far as it was read.
    Refuse(ApiError, LineHint),
}

/// Serves requests on one connection until it closes, handing each to `handler`. `slot`
/// identifies the connection to the host's stop registry. `first_deadline` is when the first
/// head must be in (from the accept, so that a TLS handshake and the first head share one
/// header timeout).
pub async fn serve_connection<S, H, A>(
    stream: S,
    host: &H,
    handler: &A,
    slot: usize,
    first_deadline: Instant,
) where
    S: AsyncRead + AsyncWrite + Unpin,
    H: ConnHost,
    A: Handler,
{
    let config = host.conn_config().clone();
    let mut io = ConnIo::new(stream, &config);
    let mut first = Some(first_deadline);
    loop {
        let head = match read_head(&mut io, host, slot, &config, first.take()).await {
            HeadRead::Head(head) => head,
            HeadRead::Close => break,
            HeadRead::Refuse(error, hint) => {
                let request_id = host.next_request_id();
                let response = handler.refuse_head(&error, &hint.path, &request_id).await;
                // A HEAD request's answer has no content, refused or not (RFC 9110 9.3.2).
                write_response(
                    &mut io,
                    host,
                    &response,
                    &request_id,
                    ConnectionHeader::Close,
                    hint.head,
                );
                if io.flush().await.is_ok() {
                    linger(&mut io).await;
                }
                return;
            }
        };
        host.request_started(slot);
        let request_id = host.next_request_id();
        let body = BodyState::new(&head);
        let mut exchange = Exchange {
            head,
            request_id,
            client: host.client(slot),
            io: &mut io,
            body,
        };
        // `AssertUnwindSafe`: after a panic nothing the handler touched in this connection is
        // used again (no drain, the connection closes); the host's own state is restored by
        // drop guards on unwind.
        let handled = std::panic::AssertUnwindSafe(handler.handle(&mut exchange))
            .catch_unwind()
            .await;
        let response = match handled {
            Ok(response) => {
                exchange.drain_body().await;
                response
            }
            Err(_) => {
                let mut response = handler.answer_panic(exchange.head.path(), &exchange.request_id);
                response.close = true;
                response
            }
        };
        let Exchange {
            head,
            request_id,
            body,
            ..
        } = exchange;
        let body_done = matches!(body, BodyState::Done);
        let keep_alive = head.keep_alive && body_done && !response.close && !host.is_stopping();
        let connection = match (keep_alive, head.version) {
            (false, _) => ConnectionHeader::Close,
            (true, Version::Http10) => ConnectionHeader::KeepAlive,
            (true, Version::Http11) => ConnectionHeader::None,
        };
        let head_only = head.method == Method::Head;
        io.head_text = head.into_text();
        write_response(&mut io, host, &response, &request_id, connection, head_only);
        if !keep_alive {
            // Bytes the client sent that we will not read (a body, pipelined requests) would
            // turn the close into a reset that can discard the answer: linger over them.
            let unread = !body_done || io.rstart < io.rend;
            if io.flush().await.is_ok() && unread {
                linger(&mut io).await;
            }
            return;
        }
        if io.wbuf.len() >= WRITE_BUFFER_FLUSH_BYTES && io.flush().await.is_err() {
            return;
        }
        io.take_turns(host, slot).await;
    }
    let _ = io.flush().await;
}

fn write_response<S, H: ConnHost>(
    io: &mut ConnIo<S>,
    host: &H,
    response: &Response,
    request_id: &RequestId,
    connection: ConnectionHeader,
    head_only: bool,
) {
    let date = host.date();
    response.write_to(
        &mut io.wbuf,
        &Frame {
            request_id: request_id.as_str(),
            date: &date,
            connection,
            head_only,
        },
    );
}

async fn read_head<S, H>(
    io: &mut ConnIo<S>,
    host: &H,
    slot: usize,
    config: &ConnConfig,
    first_deadline: Option<Instant>,
) -> HeadRead
where
    S: AsyncRead + AsyncWrite + Unpin,
    H: ConnHost,
{
    // The head timer runs from the first byte of the request (from its first wait after it:
    // until then the head is being parsed), and from the accept for the first request: a
    // client that connects and sends nothing is a slow client too.
    let head_timeout = Deadline::After(config.header_read_timeout);
    io.skip_empty_lines();
    let mut head_deadline = first_deadline
        .map(Deadline::At)
        .or_else(|| (io.rstart < io.rend).then_some(head_timeout));
    let mut idle_deadline = Deadline::After(config.idle_timeout);
    loop {
        io.skip_empty_lines();
        if io.rstart < io.rend {
            let buffered = &io.rbuf[io.rstart..io.rend];
            match parse_head_into(buffered, &config.head, &mut io.head_text) {
                Ok(Some((head, len))) => {
                    io.rstart += len;
                    return HeadRead::Head(head);
                }
                Ok(None) => {}
                Err(error) => return HeadRead::Refuse(head_error(error), line_hint(io.buffered())),
            }
            // Part of a head is in: the connection is no longer idle (and no longer sees a
            // stop or an eviction until this request is answered).
            host.request_started(slot);
            head_deadline.get_or_insert(head_timeout);
        }
        let (deadline, idle) = match &mut head_deadline {
            Some(deadline) => (deadline, false),
            None => (&mut idle_deadline, true),
        };
        // Between requests the stop signal ends the connection; within a head it does not.
        let stop = (idle || io.rstart == io.rend).then_some((host, slot));
        if stop.is_some() && host.is_stopping() {
            return HeadRead::Close;
        }
        match io.fill(deadline, stop).await {
            Ok(_) => {}
            Err(ReadFailure::Timeout) if !idle && io.rstart < io.rend => {
                return HeadRead::Refuse(
                    ApiError::new(
                        ErrorKind::RequestTimeout,
                        "the request head did not arrive in time",
                    ),
                    line_hint(io.buffered()),
                )
            }
            Err(_) => return HeadRead::Close,
        }
    }
}

/// What a request line that may be incomplete says: its path, to pick the error envelope, and
/// whether its method is HEAD, whose answer carries no content.
#[derive(Debug, Default, PartialEq, Eq)]
struct LineHint {
    path: String,
    head: bool,
}

fn line_hint(buf: &[u8]) -> LineHint {
    let Some(line) = buf
        .split(|&b| b == b'\n')
        .find(|line| !line.is_empty() && *line != b"\r")
    else {
        return LineHint::default();
    };
    let mut words = line.split(|&b| b == b' ');
    let head = words.next() == Some(b"HEAD");
    let path = words
        .next()
        .map(|target| {
            let path = target.split(|&b| b == b'?').next().unwrap_or(target);
            String::from_utf8_lossy(&path[..path.len().min(64)]).into_owned()
        })
        .unwrap_or_default();
    LineHint { path, head }
}

/// The only mapping of head errors to answers.
fn head_error(error: HeadError) -> ApiError {
    let kind = match error {
        HeadError::TooLarge | HeadError::TooManyHeaders => ErrorKind::HeadTooLarge,
        HeadError::UriTooLong => ErrorKind::UriTooLong,
        HeadError::Malformed(_) | HeadError::Framing(_) => ErrorKind::BadRequest,
        HeadError::UnsupportedExpectation => ErrorKind::ExpectationFailed,
        HeadError::Origin => ErrorKind::Forbidden,
    };
    ApiError::new(kind, error.to_string())
}

/// After the last answer: stop sending, then read and drop what the client still sends for a
/// moment, so that closing does not reset the connection under the answer.
async fn linger<S: AsyncRead + AsyncWrite + Unpin>(io: &mut ConnIo<S>) {
    if io.stream.close().await.is_err() {
        return;
    }
    let mut deadline = Deadline::After(LINGER_TIMEOUT);
    let mut dropped = 0;
    while dropped < LINGER_BYTES_MAX {
        io.rstart = 0;
        io.rend = 0;
        match io.fill::<NoHost>(&mut deadline, None).await {
            Ok(n) => dropped += n,
            Err(_) => break,
        }
    }
}

/// Stands in for a host where no stop signal is wanted.
enum NoHost {}

impl ConnHost for NoHost {
    fn conn_config(&self) -> &ConnConfig {
        match *self {}
    }
    fn next_request_id(&self) -> RequestId {
        match *self {}
    }
    fn date(&self) -> std::cell::Ref<'_, String> {
        match *self {}
    }
    fn is_stopping(&self) -> bool {
        match *self {}
    }
    fn poll_stop(&self, _: usize, _: &mut Context<'_>) -> Poll<()> {
        match *self {}
    }
}

/// Requests answered without a socket, for unit tests of handlers.
#[cfg(test)]
pub mod testing {
    use super::*;
    use crate::http::head::parse_head;

    /// A stream that reads from bytes given up front and keeps what is written.
    pub struct MemoryStream {
        input: Vec<u8>,
        at: usize,
        output: Vec<u8>,
    }

    impl MemoryStream {
        pub fn new(input: Vec<u8>) -> MemoryStream {
            MemoryStream {
                input,
                at: 0,
                output: Vec::new(),
            }
        }
    }

    impl AsyncRead for MemoryStream {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            let me = self.get_mut();
            let n = buf.len().min(me.input.len() - me.at);
            buf[..n].copy_from_slice(&me.input[me.at..me.at + n]);
            me.at += n;
            Poll::Ready(Ok(n))
        }
    }

    impl AsyncWrite for MemoryStream {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.get_mut().output.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Parses `request` (a whole head and its body) and hands it to `handler`: its answer.
    pub async fn answer<A: Handler>(handler: &A, request: &[u8]) -> Response {
        let limits = HeadLimits {
            head_bytes_max: 64 * 1024,
            uri_bytes_max: 8 * 1024,
        };
        let (head, len) = match parse_head(request, &limits) {
            Ok(Some(parsed)) => parsed,
            other => panic!("not a whole request head: {other:?}"),
        };
        let config = ConnConfig {
            head: limits,
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(5),
        };
        let stream = MemoryStream {
            input: request[len..].to_vec(),
            at: 0,
            output: Vec::new(),
        };
        let mut io = ConnIo::new(stream, &config);
        let body = BodyState::new(&head);
        // Stamped now, as a shard stamps its requests: the time they are judged at.
        let now_ms = crate::clock::Clock::System.now_ms();
        let request_id = crate::request_id::RequestIdGen::new(0, 7).next(now_ms as u64);
        let mut exchange = Exchange {
            head,
            request_id,
            client: None,
            io: &mut io,
            body,
        };
        handler.handle(&mut exchange).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    /// A host whose connections see `others` as the answer to whether another connection has
    /// bytes waiting.
    struct Host {
        config: ConnConfig,
        date: RefCell<String>,
        others: bool,
    }

    impl ConnHost for Host {
        fn conn_config(&self) -> &ConnConfig {
            &self.config
        }
        fn next_request_id(&self) -> RequestId {
            crate::request_id::RequestIdGen::new(0, 7).next(0)
        }
        fn date(&self) -> std::cell::Ref<'_, String> {
            self.date.borrow()
        }
        fn is_stopping(&self) -> bool {
            false
        }
        fn poll_stop(&self, _: usize, _: &mut Context<'_>) -> Poll<()> {
            Poll::Pending
        }
        fn others_readable(&self, _: usize) -> bool {
            self.others
        }
    }

    /// Answers every request at once, counting them.
    struct Counting(Rc<Cell<usize>>);

    impl Handler for Counting {
        async fn refuse_head(&self, _: &ApiError, _: &str, _: &RequestId) -> Response {
            Response::json(400, b"{}".to_vec())
        }
        fn answer_panic(&self, _: &str, _: &RequestId) -> Response {
            Response::json(500, b"{}".to_vec())
        }
        async fn handle<S: AsyncRead + AsyncWrite + Unpin>(
            &self,
            _: &mut Exchange<'_, S>,
        ) -> Response {
            self.0.set(self.0.get() + 1);
            Response::json(200, b"{}".to_vec())
        }
    }

    /// How many of `requests` pipelined requests a connection that never waits for its socket
    /// had answered when another task of the executor first ran.
    fn answered_before_another_task_ran(requests: usize, others: bool) -> usize {
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let host = Rc::new(Host {
                    config: ConnConfig {
                        head: HeadLimits {
                            head_bytes_max: 8 * 1024,
                            uri_bytes_max: 1024,
                        },
                        header_read_timeout: Duration::from_secs(5),
                        idle_timeout: Duration::from_secs(5),
                        write_timeout: Duration::from_secs(5),
                    },
                    date: RefCell::new("Thu, 26 Nov 2026 00:00:00 GMT".into()),
                    others,
                });
                let answered = Rc::new(Cell::new(0));
                let input = b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n".repeat(requests);
                let connection = glommio::spawn_local({
                    let (host, answered) = (host.clone(), answered.clone());
                    async move {
                        let handler = Counting(answered);
                        let stream = testing::MemoryStream::new(input);
                        serve_connection(
                            stream,
                            &*host,
                            &handler,
                            0,
                            Instant::now() + Duration::from_secs(5),
                        )
                        .await;
                    }
                });
                let other = glommio::spawn_local({
                    let answered = answered.clone();
                    async move { answered.get() }
                });
                let seen = other.await;
                connection.await;
                assert_eq!(answered.get(), requests);
                seen
            })
            .expect("executor")
            .join()
            .expect("executor thread")
    }

    #[test]
    fn a_client_that_never_waits_lets_the_shard_run_its_other_tasks() {
        for others in [false, true] {
            let seen = answered_before_another_task_ran(5_000, others);
            assert!(
                seen < 5_000,
                "others readable {others}: the other task waited for all {seen} answers"
            );
        }
    }

    /// Waits for `deadline` on `alarm`, or for `other` if it comes first; whether the
    /// deadline came first, and when.
    async fn race(
        alarm: &mut Alarm,
        mut deadline: Deadline,
        other: impl Future<Output = ()>,
    ) -> (bool, Instant) {
        let mut other = std::pin::pin!(other);
        let timed_out = poll_fn(|cx| {
            if other.as_mut().poll(cx).is_ready() {
                return Poll::Ready(false);
            }
            alarm.poll(&mut deadline, cx).map(|()| true)
        })
        .await;
        (timed_out, Instant::now())
    }

    #[test]
    fn the_alarm_wakes_each_wait_at_its_own_deadline() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let pause = |ms| async move {
                    Timer::new(Duration::from_millis(ms)).await;
                };
                // Stands in for a wait that never ends, but ends the test if the alarm
                // never wakes it.
                let watchdog = || pause(10_000);
                let mut alarm = Alarm::new();
                // Armed for a late deadline, then a wait with an earlier one: re-armed.
                let (timed_out, _) = race(
                    &mut alarm,
                    Deadline::After(Duration::from_secs(30)),
                    pause(5),
                )
                .await;
                assert!(!timed_out);
                let started = Instant::now();
                let (timed_out, at) = race(
                    &mut alarm,
                    Deadline::After(Duration::from_millis(50)),
                    watchdog(),
                )
                .await;
                assert!(timed_out);
                let waited = at - started;
                assert!(
                    waited >= Duration::from_millis(50) && waited < Duration::from_secs(5),
                    "{waited:?}"
                );

                // Armed for an early deadline, then a wait with a later one: the alarm fires
                // first, and the wait goes on to its own deadline.
                let (timed_out, _) = race(
                    &mut alarm,
                    Deadline::After(Duration::from_millis(20)),
                    pause(1),
                )
                .await;
                assert!(!timed_out);
                let started = Instant::now();
                let deadline = started + Duration::from_millis(200);
                let (timed_out, at) = race(&mut alarm, Deadline::At(deadline), watchdog()).await;
                assert!(timed_out);
                assert!(at >= deadline, "{:?} early", deadline - at);
                assert!(at - started < Duration::from_secs(5), "{:?}", at - started);

                // A deadline already past is over at once.
                let (timed_out, _) =
                    race(&mut alarm, Deadline::At(Instant::now()), watchdog()).await;
                assert!(timed_out);
            })
            .expect("executor")
            .join()
            .expect("executor thread");
    }

    #[test]
    fn a_span_becomes_an_instant_at_its_first_wait_and_stays_one() {
        let mut deadline = Deadline::After(Duration::from_secs(2));
        let now = Instant::now();
        let at = deadline.fix(now);
        assert_eq!(at, now + Duration::from_secs(2));
        assert_eq!(deadline.fix(now + Duration::from_secs(1)), at);
        assert!(matches!(deadline, Deadline::At(fixed) if fixed == at));
    }

    #[test]
    fn line_hints() {
        let hint = |path: &str, head| LineHint {
            path: path.to_owned(),
            head,
        };
        assert_eq!(
            line_hint(b"POST /1.0/check-workflow.json?x HTTP/1.1\r\n"),
            hint("/1.0/check-workflow.json", false)
        );
        assert_eq!(line_hint(b"\r\nGET /v1/text"), hint("/v1/text", false));
        assert_eq!(
            line_hint(b"HEAD /health HTTP/1.1\r\nX: \x01"),
            hint("/health", true)
        );
        assert_eq!(line_hint(b"HEAD"), hint("", true));
        assert_eq!(line_hint(b"head /health"), hint("/health", false));
        assert_eq!(line_hint(b"GARBAGE"), hint("", false));
        assert_eq!(line_hint(b""), hint("", false));
    }
}
