//! The hosted APIs modgate imitates, one module each: its routes, how its requests are read,
//! the shape of its answers and of its errors, so that a platform's unchanged integration
//! (its SDK, its code that reads the fields) works against modgate. Nothing outside `api`
//! knows these APIs; the route table names their paths, and [`super::error_answer`] gives an
//! error the shape of its route's API.
//!
//! - [`openai`]: `POST /v1/moderations`.
//! - [`perspective`]: Google's `POST /v1alpha1/comments:analyze` and its discovery document.
//! - [`sightengine`]: `/1.0/check.json`, `/1.0/text/check.json`, and the workflow routes
//!   `/1.0/check-workflow.json` and `/1.0/text/check-workflow.json`.

pub mod openai;
pub mod perspective;
pub mod sightengine;
