//! Name lookups for `url` downloads, on a thread of their own.
//!
//! Lookups must never share threads with the durability path: a name server that does not
//! answer once held the shard's blocking threads (getaddrinfo blocks) and with them every
//! journal commit of the shard. So lookups run on one process-wide thread with hickory-resolver,
//! a maintained async DNS stub resolver (tokio, reading `/etc/resolv.conf` and `/etc/hosts`),
//! and the shards only await a reply:
//! - bounded in time: each lookup gives up after [`LOOKUP_TIMEOUT`], and the download's own
//!   10 s deadline (which covers the lookup) cancels the shard's wait at once;
//! - bounded in number: at most [`LOOKUPS_IN_FLIGHT_MAX`] lookups run at once in the process,
//!   counting those whose caller has given up; past that a lookup is refused at once.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_channel::oneshot;
use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;

use super::{refused, Refusal, Refused};
use crate::http::conn::until;

/// Lookups running at once in the process, at most.
pub const LOOKUPS_IN_FLIGHT_MAX: usize = 64;
/// One lookup, at most (all of its name servers and attempts).
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

struct Lookup {
    name: String,
    reply: oneshot::Sender<Result<Vec<IpAddr>, String>>,
}

/// The shards' handle on the resolver thread.
#[derive(Clone)]
pub struct Resolver {
    lookups: tokio::sync::mpsc::UnboundedSender<Lookup>,
    in_flight: Arc<AtomicUsize>,
}

impl Resolver {
    /// Starts the resolver thread: the system's configuration, or (tests) `servers`.
    pub fn spawn(servers: Option<&[SocketAddr]>) -> anyhow::Result<Resolver> {
        let builder = match servers {
            // A host without a usable /etc/resolv.conf still serves: its url checks are refused
            // with a DNS reason instead of the server refusing to start.
            None => hickory_resolver::Resolver::builder_tokio().unwrap_or_else(|error| {
                tracing::warn!(%error, "no system resolver configuration: url downloads by name will fail");
                hickory_resolver::Resolver::builder_with_config(
                    ResolverConfig::from_name_servers(Vec::new()),
                    TokioRuntimeProvider::default(),
                )
            }),
            Some(servers) => {
                let name_servers = servers
                    .iter()
                    .map(|server| {
                        let mut config = NameServerConfig::udp(server.ip());
                        for connection in &mut config.connections {
                            connection.port = server.port();
                        }
                        config
                    })
                    .collect();
                hickory_resolver::Resolver::builder_with_config(
                    ResolverConfig::from_name_servers(name_servers),
                    TokioRuntimeProvider::default(),
                )
            }
        };
        let (lookups, mut queue) = tokio::sync::mpsc::unbounded_channel::<Lookup>();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let running = in_flight.clone();
        let (built, ready) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("modgate-dns".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = built.send(Err(anyhow::anyhow!("the DNS runtime: {error}")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let resolver = match builder.build() {
                        Ok(resolver) => {
                            let _ = built.send(Ok(()));
                            resolver
                        }
                        Err(error) => {
                            let _ = built.send(Err(anyhow::anyhow!("the DNS resolver: {error}")));
                            return;
                        }
                    };
                    while let Some(lookup) = queue.recv().await {
                        let resolver = resolver.clone();
                        let running = running.clone();
                        tokio::spawn(async move {
                            let result = tokio::time::timeout(
                                LOOKUP_TIMEOUT,
                                resolver.lookup_ip(lookup.name),
                            )
                            .await;
                            running.fetch_sub(1, Ordering::AcqRel);
                            let _ = lookup.reply.send(match result {
                                Ok(Ok(found)) => Ok(found.iter().collect()),
                                Ok(Err(error)) => Err(error.to_string()),
                                Err(_) => Err("timed out".to_owned()),
                            });
                        });
                    }
                });
            })
            .context("starting the DNS thread")?;
        ready
            .recv()
            .context("the DNS thread stopped while starting")??;
        Ok(Resolver { lookups, in_flight })
    }

    /// The addresses of `name` (with `port`), by `deadline` at the latest.
    pub async fn lookup(
        &self,
        name: &str,
        port: u16,
        deadline: Instant,
    ) -> Result<Vec<SocketAddr>, Refused> {
        if self.in_flight.fetch_add(1, Ordering::AcqRel) >= LOOKUPS_IN_FLIGHT_MAX {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(refused(
                Refusal::Dns,
                "too many name lookups in progress on this server; retry shortly",
            ));
        }
        let (reply, answer) = oneshot::channel();
        let lookup = Lookup {
            name: name.to_owned(),
            reply,
        };
        if self.lookups.send(lookup).is_err() {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(refused(Refusal::Dns, "name lookups are not available"));
        }
        match until(deadline, answer).await {
            None => Err(refused(
                Refusal::Timeout,
                format!(
                    "the download did not finish within {} s",
                    super::DOWNLOAD_TIMEOUT.as_secs()
                ),
            )),
            Some(Ok(Ok(addresses))) if !addresses.is_empty() => Ok(addresses
                .into_iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect()),
            Some(Ok(Ok(_))) => Err(refused(
                Refusal::Dns,
                format!("the host '{name}' has no address"),
            )),
            Some(Ok(Err(error))) => {
                tracing::info!(host = name, %error, "download: name lookup failed");
                Err(refused(
                    Refusal::Dns,
                    format!("the host '{name}' could not be resolved"),
                ))
            }
            Some(Err(oneshot::Canceled)) => {
                Err(refused(Refusal::Dns, "name lookups are not available"))
            }
        }
    }
}
