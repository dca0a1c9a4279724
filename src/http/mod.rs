//! HTTP/1.1 on glommio streams, with no framework: heads parsed by httparse ([`head`]),
//! chunked bodies decoded in place ([`chunked`]), answers serialised by hand ([`response`]),
//! and the per-connection loop with its buffers, timeouts and keep-alive ([`conn`]).
//! Parsers here do no I/O; [`conn`] is the only module that touches a socket.

pub mod chunked;
pub mod conn;
pub mod head;
pub mod multipart;
pub mod query;
pub mod response;
