//! modgate: a self-hosted content moderation gateway.
//!
//! Callers send an image or a text from their own servers, name a workflow, and get back
//! `accept`, `review` or `reject` with per-category scores and reasons (`docs/interface.md` and
//! the OpenAPI document are the contract). modgate also answers the legacy `/1.0/...` routes of a hosted moderation API.
//!
//! # Shape
//!
//! One process, one shard per CPU, nothing shared on the hot path. Each shard is a glommio
//! executor pinned to its CPU with its own SO_REUSEPORT listener, connections, buffers and
//! cached view of the store. The store (LMDB, written by the admin CLI) is read through a
//! per-shard cache that is dropped whenever LMDB's last transaction id moves, so a revoked key
//! fails on its very next request without any cross-shard message.
//!
//! # Request path
//!
//! From accept to the journal, each hop in its own module:
//!
//! 1. [`server::shard`] accepts a connection on the shard's SO_REUSEPORT listener (capped per
//!    shard) and runs it in a task of its own; a panic in it closes that connection alone.
//! 2. [`http::conn`] reads a head ([`http::head`] parses it; a head refused here goes to
//!    [`api::refuse_head`]) and hands the request to the [`http::conn::Handler`], which is
//!    [`api::Context`].
//! 3. [`api::handle`] finds the [`route::Route`], refuses `Origin`, wrong methods and oversized
//!    bodies, then calls the route's module ([`api::text`], [`api::image`], ...).
//! 4. The route authenticates the key ([`auth`], against the [`store::view`] cache), admits the
//!    check under the plan ([`limits`]: rate, concurrency, quota leases), reads the body
//!    ([`http::conn::Exchange`], forms through [`http::multipart`]) into a pooled buffer.
//! 5. [`checks::Engine`] runs the workflow's checks from [`checks::registry`] (the shipped
//!    ones and the configuration's own models, [`checks::custom`]): text checks on
//!    the shard, one at a time in order of asking ([`checks::turns`]), models on the shard's
//!    worker ([`inference::worker`]); images are probed on the shard and decoded on the worker
//!    ([`image`]).
//! 6. [`api::finish`] decides ([`decision`]) and shapes the answer; [`api::handle`] appends the
//!    journal record ([`journal`], group-committed) before the answer leaves, settles the
//!    admission and counts the request ([`metrics`]).
//!
//! Imports run one way (`tests/layers.rs` checks it): `server` over `api`, `api` over `auth`,
//! `limits`, `store`, `journal`, `checks`, and those over the leaf modules ([`route`],
//! [`content`], [`bounds`], [`error`], [`clock`], [`request_id`]).
//!
//! # Layout
//!
//! Read in this order:
//!
//! - [`cli`]: the command line (`serve` and the admin commands, the dashboard's stand-in).
//! - [`config`]: the TOML configuration; defaults in `src/defaults/modgate.toml`.
//! - [`server`]: start-up, listeners, signals, and [`server::shard`], the per-CPU executor.
//! - [`http`]: HTTP/1.1 without a framework: [`http::head`] parses heads, [`http::chunked`]
//!   decodes bodies, [`http::multipart`] streams forms, [`http::response`] writes answers,
//!   [`http::conn`] runs a connection.
//! - [`api`]: the request path: the routes, the order of refusals they share, and
//!   [`api::Context`], what a request may touch.
//! - [`route`], [`content`], [`bounds`]: the routes, the two kinds of content, and the
//!   interface's limits, named once.
//! - [`auth`]: API keys from the request, checked against the store.
//! - [`fleet`]: a fleet of nodes on PostgreSQL: the control plane's schema, the admin CLI's
//!   transactions and each node's follower.
//! - [`store`]: organizations, plans, keys, workflows (every version) and feedback on checks
//!   in LMDB; [`store::view`] is the per-shard cache.
//! - [`workflow`]: workflow definitions and their versions.
//! - [`checks`]: the tools that score content; [`text`] and [`image`] prepare content for them.
//! - [`inference`]: ONNX Runtime sessions on a model worker beside each shard.
//! - [`decision`]: scores and thresholds to accept, review or reject.
//! - [`eval`]: `modgate eval`, a workflow run offline over a file of texts.
//! - [`client`]: `modgate check`, one check against a running server, printed for people.
//! - [`download`]: the `url` downloader and its public-internet-only vetting.
//! - [`limits`]: rate, concurrency and quota per shard, leased from [`limits::lease`].
//! - [`journal`]: one LMDB journal per shard, group-committed before answers leave.
//! - [`judgement`]: the journaled scores joined with the organizations' feedback: calibration
//!   of thresholds and replay of decisions under others.
//! - [`metrics`]: per-shard counters, summed by the `/metrics` listener when it is scraped.
//! - [`logging`]: tracing to stderr (text or JSON), its level reloadable on SIGHUP.
//! - [`clock`]: the wall clock (injectable for tests).
//! - [`codec`]: stored records that grew a last field, readable by every version.
//! - [`error`]: the one error type of the request path and its mapping to the wire.
//! - [`request_id`]: ids unique across shards and restarts.

pub mod api;
pub mod auth;
pub mod bounds;
pub mod checks;
pub mod cli;
pub mod client;
pub mod clock;
pub mod codec;
pub mod config;
pub mod content;
pub mod decision;
pub mod download;
pub mod error;
pub mod eval;
pub mod fleet;
pub mod hash;
pub mod http;
pub mod image;
pub mod inference;
pub mod journal;
pub mod judgement;
pub mod limits;
pub mod lists;
pub mod logging;
pub mod metrics;
pub mod request_id;
pub mod route;
pub mod server;
pub mod store;
pub mod text;
pub mod workflow;
