//! What a refused download is: its reason (a bounded set, for metrics) and what the caller
//! is told, and the bounds every download keeps. The downloader and the resolver both refuse.

use std::time::Duration;

use crate::bounds::DOWNLOAD_TIMEOUT_MS;
use crate::error::{ApiError, ErrorKind};

/// The whole download, name lookup included ([`crate::bounds::DOWNLOAD_TIMEOUT_MS`]).
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_millis(DOWNLOAD_TIMEOUT_MS);
/// A response head longer than this is refused.
pub const RESPONSE_HEAD_BYTES_MAX: usize = 16 * 1024;
/// `url` parameters longer than this are refused before any parsing.
pub const URL_BYTES_MAX: usize = 4096;
/// What a caller is told of a host whose address is not public, or whose name does not
/// resolve or has no address, whichever it was: telling them apart would let a caller map the
/// server's network (which internal names exist, and in which address class: private,
/// loopback, carrier-grade NAT). The detail goes to the server's log.
pub const ADDRESS_REFUSED: &str =
    "the address of the url's host is not allowed or could not be resolved";

/// Why a download was refused: a bounded set, for metrics (the message gives the detail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not a valid http(s) address, or no host.
    InvalidUrl,
    /// A scheme other than http and https.
    Scheme,
    /// The host is (or resolves to) a non-public address.
    Address,
    /// The name does not resolve.
    Dns,
    Connect,
    Tls,
    /// More than [`crate::bounds::DOWNLOAD_REDIRECTS_MAX`] redirects.
    Redirects,
    /// An answer other than 200 or a redirect.
    Status,
    /// Not `Content-Type: image/*`.
    ContentType,
    /// Over the size limit.
    TooLarge,
    /// A malformed or cut-off answer.
    Protocol,
    /// Not done within [`DOWNLOAD_TIMEOUT`].
    Timeout,
}

impl Refusal {
    pub const ALL: [Refusal; 12] = [
        Refusal::InvalidUrl,
        Refusal::Scheme,
        Refusal::Address,
        Refusal::Dns,
        Refusal::Connect,
        Refusal::Tls,
        Refusal::Redirects,
        Refusal::Status,
        Refusal::ContentType,
        Refusal::TooLarge,
        Refusal::Protocol,
        Refusal::Timeout,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Refusal::InvalidUrl => "invalid_url",
            Refusal::Scheme => "scheme",
            Refusal::Address => "address",
            Refusal::Dns => "dns",
            Refusal::Connect => "connect",
            Refusal::Tls => "tls",
            Refusal::Redirects => "redirects",
            Refusal::Status => "status",
            Refusal::ContentType => "content_type",
            Refusal::TooLarge => "too_large",
            Refusal::Protocol => "protocol",
            Refusal::Timeout => "timeout",
        }
    }
}

/// A refused download: why (bounded) and what to tell the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub reason: Refusal,
    pub message: String,
}

impl From<Refused> for ApiError {
    fn from(refused: Refused) -> ApiError {
        ApiError::new(
            ErrorKind::UrlRefused,
            format!("url refused: {}", refused.message),
        )
    }
}

pub(super) fn refused(reason: Refusal, message: impl Into<String>) -> Refused {
    Refused {
        reason,
        message: message.into(),
    }
}
