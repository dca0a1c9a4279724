//! The request path: the routes of `docs/interface.md#routes`, and the order of refusals that
//! every route shares (`docs/interface.md#decisions`): `Origin` first, then the method, then
//! the request's own size limits, then the key, then the plan's limits, then parameters and
//! content.
//!
//! A handler sees a [`Context`] (what a request may touch) and the request's
//! [`RequestNotes`], never the server. The server reaches the request path through one entry
//! point, the [`crate::http::conn::Handler`] impl of [`Context`] (in `routes.rs`).
//!
//! Each route has its own module. `routes.rs` routes, and after the route has answered it
//! does what every answer needs: the limit headers of an authenticated caller, the end of the
//! check's admission (its concurrency permit back, its quota unit spent or returned), and for
//! the check routes the journal record, committed before the answer leaves; an error takes the
//! shape of the route's API ([`error_answer`]: chosen by route, not by path). What a route
//! learns about its request is in `request.rs`; this file only declares and re-exports.

pub mod answer;
pub mod buffers;
pub mod context;
pub mod dialect;
pub mod envelope;
pub mod feedback_writes;
pub mod finish;
pub mod form;
pub mod health;
pub mod image;
pub mod judgement;
pub mod listings;
pub mod lists;
pub mod openapi;
pub mod request;
mod routes;
pub mod text;
pub mod workflows;

pub use context::Context;
pub use request::{scored, truncated, CheckSummary, RequestNotes};
pub use routes::{
    answer_panic, error_answer, handle, journal_head_refusal, refuse_head, JOURNAL_RETRY_AFTER_S,
};

#[cfg(test)]
mod tests;
