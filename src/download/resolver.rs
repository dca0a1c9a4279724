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
//!   and at most [`LOOKUPS_PER_ORG_MAX`] of one organization's, counting those whose caller has
//!   given up; past either a lookup is refused at once. The share per organization is what
//!   keeps the process-wide cap from being a lever: names that never answer hold a place for
//!   [`LOOKUP_TIMEOUT`] each, so without it one caller sending a dozen such urls a second would
//!   have held every place, and every organization's urls by name would have been refused.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures_channel::oneshot;
use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;

use super::refusal::{refused, Refusal, Refused, ADDRESS_REFUSED, DOWNLOAD_TIMEOUT};
use crate::http::conn::until;

/// Lookups running at once in the process, at most.
pub const LOOKUPS_IN_FLIGHT_MAX: usize = 64;
/// Lookups of one organization running at once, at most.
pub const LOOKUPS_PER_ORG_MAX: usize = 8;
/// One lookup, at most (all of its name servers and attempts).
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

struct Lookup {
    name: String,
    reply: oneshot::Sender<Result<Vec<IpAddr>, String>>,
    /// Given back when the resolver thread is done with the lookup.
    place: Place,
}

/// The lookups running, in all and by organization (one with none has no entry).
#[derive(Default)]
struct InFlight {
    all: usize,
    by_org: HashMap<String, usize>,
}

/// A lookup's place among those running, given back when dropped.
struct Place {
    in_flight: Arc<Mutex<InFlight>>,
    org: String,
}

impl Place {
    /// A place for a lookup of `org`, or why there is none.
    fn take(in_flight: &Arc<Mutex<InFlight>>, org: &str) -> Result<Place, &'static str> {
        let mut counts = in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if counts.all >= LOOKUPS_IN_FLIGHT_MAX {
            return Err("too many name lookups in progress on this server; retry shortly");
        }
        let mine = counts.by_org.get(org).copied().unwrap_or(0);
        if mine >= LOOKUPS_PER_ORG_MAX {
            return Err("too many name lookups in progress for this organization; retry shortly");
        }
        counts.all += 1;
        counts.by_org.insert(org.to_owned(), mine + 1);
        Ok(Place {
            in_flight: in_flight.clone(),
            org: org.to_owned(),
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut counts = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        counts.all -= 1;
        if let Some(mine) = counts.by_org.get_mut(&self.org) {
            *mine -= 1;
            if *mine == 0 {
                counts.by_org.remove(&self.org);
            }
        }
    }
}

/// The shards' handle on the resolver thread.
#[derive(Clone)]
pub struct Resolver {
    lookups: tokio::sync::mpsc::UnboundedSender<Lookup>,
    in_flight: Arc<Mutex<InFlight>>,
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
                        let Lookup { name, reply, place } = lookup;
                        tokio::spawn(async move {
                            let result =
                                tokio::time::timeout(LOOKUP_TIMEOUT, resolver.lookup_ip(name))
                                    .await;
                            // Given back before the reply, so a caller that looks up again at
                            // once finds it free.
                            drop(place);
                            let _ = reply.send(match result {
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
        Ok(Resolver {
            lookups,
            in_flight: Arc::default(),
        })
    }

    /// The addresses of `name` (with `port`) for a caller of organization `org`, by `deadline`
    /// at the latest.
    pub async fn lookup(
        &self,
        name: &str,
        port: u16,
        org: &str,
        deadline: Instant,
    ) -> Result<Vec<SocketAddr>, Refused> {
        let place = Place::take(&self.in_flight, org).map_err(|why| refused(Refusal::Dns, why))?;
        let (reply, answer) = oneshot::channel();
        let lookup = Lookup {
            name: name.to_owned(),
            reply,
            place,
        };
        if self.lookups.send(lookup).is_err() {
            return Err(refused(Refusal::Dns, "name lookups are not available"));
        }
        match until(deadline, answer).await {
            None => Err(refused(
                Refusal::Timeout,
                format!(
                    "the download did not finish within {} s",
                    DOWNLOAD_TIMEOUT.as_secs()
                ),
            )),
            Some(Ok(Ok(addresses))) if !addresses.is_empty() => Ok(addresses
                .into_iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect()),
            // Told as a refused address is ([`ADDRESS_REFUSED`]): which names exist
            // is for the log.
            Some(Ok(Ok(_))) => {
                tracing::info!(host = name, "download: the name has no address");
                Err(refused(Refusal::Dns, ADDRESS_REFUSED))
            }
            Some(Ok(Err(error))) => {
                tracing::info!(host = name, %error, "download: name lookup failed");
                Err(refused(Refusal::Dns, ADDRESS_REFUSED))
            }
            Some(Err(oneshot::Canceled)) => {
                Err(refused(Refusal::Dns, "name lookups are not available"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_organization_has_a_share_and_the_process_a_cap() {
        let in_flight = Arc::new(Mutex::new(InFlight::default()));
        let mine: Vec<Place> = (0..LOOKUPS_PER_ORG_MAX)
            .map(|_| Place::take(&in_flight, "acme").unwrap())
            .collect();
        let refused = Place::take(&in_flight, "acme").err().unwrap();
        assert!(refused.contains("for this organization"), "{refused}");
        // Others still find places, up to the process's cap.
        let others: Vec<Place> = (0..LOOKUPS_IN_FLIGHT_MAX - LOOKUPS_PER_ORG_MAX)
            .map(|n| Place::take(&in_flight, &format!("org{}", n % 40)).unwrap())
            .collect();
        let refused = Place::take(&in_flight, "newcomer").err().unwrap();
        assert!(refused.contains("on this server"), "{refused}");
        // Places are given back when dropped, and an organization with none has no entry.
        drop(others);
        assert_eq!(in_flight.lock().unwrap().by_org.len(), 1);
        drop(mine);
        let counts = in_flight.lock().unwrap();
        assert_eq!(counts.all, 0);
        assert!(counts.by_org.is_empty());
    }
}
