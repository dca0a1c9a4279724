//! Downloads for `url` checks (`docs/interface.md#decisions` and `#limits`): an HTTP/1.1 client on glommio with rustls.
//!
//! Rules, each refused with 400 `url_refused` and the reason:
//! - `http` and `https` only; at most [`DOWNLOAD_REDIRECTS_MAX`] redirects; everything (name
//!   resolution, connection, TLS, redirects, body) within [`DOWNLOAD_TIMEOUT`];
//! - at most [`crate::bounds::IMAGE_BYTES_MAX`] bytes: refused from `Content-Length` before
//!   reading, and reading stops at the limit when the length is not announced;
//! - the answer must be 200 with `Content-Type: image/*` and no content coding;
//! - public internet only ([`vet`]): the host name is resolved once, off the reactor (on the
//!   shard's blocking threads), every address it resolves to must be public, and the
//!   connection goes to that vetted address itself, so a second lookup cannot switch it (DNS
//!   rebinding). Every redirect is vetted again from scratch. A host whose address is refused
//!   and one whose name does not resolve get the same message ([`ADDRESS_REFUSED`]); which it
//!   was, and the address class, go to the server's log only.
//!
//! `testing.allow_private_urls` lets tests download from 127.0.0.1; it is off by default and
//! named for what it is.

mod refusal;
pub mod resolver;
pub mod vet;

use refusal::refused;
pub use refusal::{
    Refusal, Refused, ADDRESS_REFUSED, DOWNLOAD_TIMEOUT, RESPONSE_HEAD_BYTES_MAX, URL_BYTES_MAX,
};

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::net::TcpStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use url::Url;

use crate::bounds::DOWNLOAD_REDIRECTS_MAX;
use crate::http::chunked::{ChunkedDecoder, Step};
use crate::http::conn::until;

/// What the downloader needs, built once per process.
#[derive(Clone)]
pub struct Downloader {
    tls: futures_rustls::TlsConnector,
    /// Test only: skip the public-address vetting and the port list.
    allow_private: bool,
    bytes_max: usize,
    /// Ports a download may connect to (`limits.download_ports`).
    ports: Arc<[u16]>,
    /// Name lookups, on a thread of their own.
    resolver: resolver::Resolver,
}

impl Downloader {
    /// `extra_roots`: test only, a PEM file of further trusted authorities.
    pub fn new(
        allow_private: bool,
        extra_roots: Option<&Path>,
        bytes_max: usize,
        ports: &[u16],
        dns_servers: Option<&[SocketAddr]>,
    ) -> anyhow::Result<Downloader> {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(path) = extra_roots {
            for cert in CertificateDer::pem_file_iter(path)
                .with_context(|| format!("reading {}", path.display()))?
            {
                let cert = cert.with_context(|| format!("reading {}", path.display()))?;
                roots
                    .add(cert)
                    .with_context(|| format!("a certificate in {}", path.display()))?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map(|builder| builder.with_root_certificates(roots).with_no_client_auth());
        let mut config = match config {
            Ok(config) => config,
            // The ring provider supports the default versions; this cannot fail.
            Err(error) => panic!("TLS client configuration: {error}"),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Downloader {
            tls: futures_rustls::TlsConnector::from(Arc::new(config)),
            allow_private,
            bytes_max,
            ports: ports.into(),
            resolver: resolver::Resolver::spawn(dns_servers)?,
        })
    }

    /// Downloads `url` under the rules above, into `out`, for a caller of organization `org`
    /// (whose name lookups have a share of their own, [`resolver`]).
    pub async fn fetch(&self, url: &str, org: &str, out: &mut Vec<u8>) -> Result<(), Refused> {
        if url.len() > URL_BYTES_MAX {
            return Err(refused(
                Refusal::InvalidUrl,
                format!("the address is longer than {URL_BYTES_MAX} bytes"),
            ));
        }
        let deadline = Instant::now() + DOWNLOAD_TIMEOUT;
        match until(deadline, self.follow(url, org, out, deadline)).await {
            Some(result) => result,
            None => Err(refused(
                Refusal::Timeout,
                format!(
                    "the download did not finish within {} s",
                    DOWNLOAD_TIMEOUT.as_secs()
                ),
            )),
        }
    }

    async fn follow(
        &self,
        url: &str,
        org: &str,
        out: &mut Vec<u8>,
        deadline: Instant,
    ) -> Result<(), Refused> {
        let mut current = Url::parse(url).map_err(|error| {
            refused(
                Refusal::InvalidUrl,
                format!("not a valid address ({error})"),
            )
        })?;
        for hop in 0..=DOWNLOAD_REDIRECTS_MAX {
            out.clear();
            match self.get(&current, org, out, deadline).await? {
                Fetched::Body => return Ok(()),
                Fetched::Redirect(location) => {
                    if hop == DOWNLOAD_REDIRECTS_MAX {
                        return Err(refused(
                            Refusal::Redirects,
                            format!("more than {DOWNLOAD_REDIRECTS_MAX} redirects"),
                        ));
                    }
                    current = current.join(&location).map_err(|_| {
                        refused(Refusal::InvalidUrl, "a redirect to an invalid address")
                    })?;
                }
            }
        }
        Err(refused(
            Refusal::Redirects,
            format!("more than {DOWNLOAD_REDIRECTS_MAX} redirects"),
        ))
    }

    /// One request to one vetted address.
    async fn get(
        &self,
        url: &Url,
        org: &str,
        out: &mut Vec<u8>,
        deadline: Instant,
    ) -> Result<Fetched, Refused> {
        let https = match url.scheme() {
            "http" => false,
            "https" => true,
            other => {
                return Err(refused(
                    Refusal::Scheme,
                    format!("the scheme '{other}' is not http or https"),
                ))
            }
        };
        let host = url
            .host()
            .ok_or_else(|| refused(Refusal::InvalidUrl, "the address has no host"))?;
        let port = url
            .port_or_known_default()
            .unwrap_or(if https { 443 } else { 80 });
        if !self.allow_private && !self.ports.contains(&port) {
            return Err(refused(
                Refusal::Address,
                format!("the address's port {port} is not one downloads may use"),
            ));
        }
        let addresses = match &host {
            url::Host::Ipv4(v4) => vec![SocketAddr::new(IpAddr::V4(*v4), port)],
            url::Host::Ipv6(v6) => vec![SocketAddr::new(IpAddr::V6(*v6), port)],
            url::Host::Domain(domain) => self.resolver.lookup(domain, port, org, deadline).await?,
        };
        if !self.allow_private {
            for address in &addresses {
                if let Some(why) = vet::refusal(address.ip()) {
                    // The address and its class stay in the log ([`ADDRESS_REFUSED`]).
                    tracing::info!(host = %host, ip = %address.ip(), why, "download refused: not a public address");
                    return Err(refused(Refusal::Address, ADDRESS_REFUSED));
                }
            }
        }
        let stream = connect(&addresses, deadline).await?;
        let host_header = match (url.host_str(), url.port()) {
            (Some(name), Some(port)) => format!("{name}:{port}"),
            (Some(name), None) => name.to_owned(),
            (None, _) => return Err(refused(Refusal::InvalidUrl, "the address has no host")),
        };
        let target = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        let request = format!(
            "GET {target} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: modgate/{}\r\nAccept: image/*\r\nConnection: close\r\n\r\n",
            env!("CARGO_PKG_VERSION")
        );
        if https {
            let name = match &host {
                url::Host::Domain(domain) => {
                    rustls::pki_types::ServerName::try_from(domain.to_string())
                        .map_err(|_| refused(Refusal::InvalidUrl, "an invalid host name for TLS"))?
                }
                url::Host::Ipv4(v4) => {
                    rustls::pki_types::ServerName::IpAddress(IpAddr::V4(*v4).into())
                }
                url::Host::Ipv6(v6) => {
                    rustls::pki_types::ServerName::IpAddress(IpAddr::V6(*v6).into())
                }
            };
            let stream = self.tls.connect(name, stream).await.map_err(|error| {
                tracing::info!(%error, "download refused: TLS handshake");
                refused(Refusal::Tls, "the TLS handshake failed")
            })?;
            exchange(stream, request.as_bytes(), out, self.bytes_max).await
        } else {
            exchange(stream, request.as_bytes(), out, self.bytes_max).await
        }
    }
}

enum Fetched {
    Body,
    Redirect(String),
}

async fn connect(addresses: &[SocketAddr], deadline: Instant) -> Result<TcpStream, Refused> {
    for address in addresses {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match TcpStream::connect_timeout(*address, remaining.max(Duration::from_millis(1))).await {
            Ok(stream) => return Ok(stream),
            // Details for the operator only: which address refused and why.
            Err(error) => tracing::info!(%address, %error, "download: connection failed"),
        }
    }
    Err(refused(Refusal::Connect, "the connection failed"))
}

/// Sends `request`, reads the answer: the body into `out`, or a redirect.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    request: &[u8],
    out: &mut Vec<u8>,
    bytes_max: usize,
) -> Result<Fetched, Refused> {
    let io = |error: std::io::Error| {
        tracing::info!(%error, "download: connection failed");
        refused(Refusal::Connect, "the connection failed")
    };
    stream.write_all(request).await.map_err(io)?;
    stream.flush().await.map_err(io)?;
    let mut buffer = vec![0u8; 16 * 1024];
    let mut filled = 0;
    let (head_len, status, location, content_type, framing) = loop {
        let n = stream.read(&mut buffer[filled..]).await.map_err(io)?;
        if n == 0 {
            return Err(refused(
                Refusal::Protocol,
                "the server closed the connection before answering",
            ));
        }
        filled += n;
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut response = httparse::Response::new(&mut fields);
        match response.parse(&buffer[..filled]) {
            Ok(httparse::Status::Complete(len)) => {
                let header = |name: &str| {
                    response
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .and_then(|h| std::str::from_utf8(h.value).ok())
                        .map(|v| v.trim().to_owned())
                };
                let framing = body_framing(response.headers)?;
                if header("content-encoding").is_some_and(|c| !c.eq_ignore_ascii_case("identity")) {
                    return Err(refused(
                        Refusal::Protocol,
                        "the image is sent with a content coding",
                    ));
                }
                break (
                    len,
                    response.code.unwrap_or(0),
                    header("location"),
                    header("content-type"),
                    framing,
                );
            }
            Ok(httparse::Status::Partial) if filled < RESPONSE_HEAD_BYTES_MAX => {
                if filled == buffer.len() {
                    buffer.resize(RESPONSE_HEAD_BYTES_MAX, 0);
                }
            }
            Ok(httparse::Status::Partial) => {
                return Err(refused(Refusal::Protocol, "the response head is too large"))
            }
            Err(error) => {
                return Err(refused(
                    Refusal::Protocol,
                    format!("the server's answer is not HTTP ({error})"),
                ))
            }
        }
    };
    match status {
        200 => {}
        301 | 302 | 303 | 307 | 308 => {
            let location = location.ok_or_else(|| {
                refused(
                    Refusal::Protocol,
                    format!("a {status} redirect without Location"),
                )
            })?;
            return Ok(Fetched::Redirect(location));
        }
        other => {
            return Err(refused(
                Refusal::Status,
                format!("the server answered {other}"),
            ))
        }
    }
    let image_type = content_type
        .as_deref()
        .and_then(|value| value.split(';').next())
        .is_some_and(|media| media.trim().to_ascii_lowercase().starts_with("image/"));
    if !image_type {
        return Err(refused(
            Refusal::ContentType,
            format!(
                "the content type is {}, not image/*",
                content_type.as_deref().unwrap_or("missing")
            ),
        ));
    }
    let too_large = || {
        refused(
            Refusal::TooLarge,
            format!("the image is over {bytes_max} bytes"),
        )
    };
    let leftover = buffer[head_len..filled].to_vec();
    match framing {
        BodyFraming::Length(length) => {
            if length > bytes_max as u64 {
                return Err(too_large());
            }
            out.reserve(length as usize);
            out.extend_from_slice(&leftover[..leftover.len().min(length as usize)]);
            while out.len() < length as usize {
                let n = stream.read(&mut buffer).await.map_err(io)?;
                if n == 0 {
                    return Err(refused(
                        Refusal::Protocol,
                        "the download ended before its Content-Length",
                    ));
                }
                let take = n.min(length as usize - out.len());
                out.extend_from_slice(&buffer[..take]);
            }
        }
        BodyFraming::Chunked => {
            let mut decoder = ChunkedDecoder::new();
            let mut pending = leftover;
            loop {
                let mut at = 0;
                while at < pending.len() {
                    let (used, step) = decoder.step(&pending[at..]).map_err(|error| {
                        refused(Refusal::Protocol, format!("a bad chunked body ({error})"))
                    })?;
                    if let Step::Data { start, end } = step {
                        if out.len() + (end - start) > bytes_max {
                            return Err(too_large());
                        }
                        out.extend_from_slice(&pending[at + start..at + end]);
                    }
                    at += used;
                    if step == Step::Done {
                        return Ok(Fetched::Body);
                    }
                }
                let n = stream.read(&mut buffer).await.map_err(io)?;
                if n == 0 {
                    return Err(refused(
                        Refusal::Protocol,
                        "the download ended inside a chunked body",
                    ));
                }
                pending = buffer[..n].to_vec();
            }
        }
        BodyFraming::UntilClose => {
            out.extend_from_slice(&leftover);
            loop {
                if out.len() > bytes_max {
                    return Err(too_large());
                }
                // Over TLS only the server's close_notify tells the body's end from a cut:
                // rustls reports a close without it as an unexpected end, and such a body is
                // refused for what it is, not as a failed connection.
                let n = stream.read(&mut buffer).await.map_err(|error| {
                    if error.kind() == std::io::ErrorKind::UnexpectedEof {
                        refused(
                            Refusal::Protocol,
                            "the server closed the connection without ending TLS (no \
                             close_notify) before a body of unannounced length: it may be cut off",
                        )
                    } else {
                        io(error)
                    }
                })?;
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buffer[..n.min(bytes_max + 1 - out.len())]);
            }
        }
    }
    Ok(Fetched::Body)
}

enum BodyFraming {
    Length(u64),
    Chunked,
    UntilClose,
}

fn body_framing(headers: &[httparse::Header<'_>]) -> Result<BodyFraming, Refused> {
    let mut length = None;
    let mut chunked = false;
    for header in headers {
        let value = std::str::from_utf8(header.value).unwrap_or("").trim();
        if header.name.eq_ignore_ascii_case("content-length") {
            let parsed: u64 = value
                .parse()
                .map_err(|_| refused(Refusal::Protocol, "an invalid Content-Length"))?;
            if length.is_some_and(|seen| seen != parsed) {
                return Err(refused(Refusal::Protocol, "conflicting Content-Length"));
            }
            length = Some(parsed);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            if !value.eq_ignore_ascii_case("chunked") {
                return Err(refused(
                    Refusal::Protocol,
                    format!("an unsupported transfer coding '{value}'"),
                ));
            }
            chunked = true;
        }
    }
    Ok(match (chunked, length) {
        (true, _) => BodyFraming::Chunked,
        (false, Some(length)) => BodyFraming::Length(length),
        (false, None) => BodyFraming::UntilClose,
    })
}
