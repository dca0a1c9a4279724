//! modgate-load: the load tool bundled with modgate.
//!
//! It drives a running server with a scenario's traffic (a weighted mix of text, image,
//! compatible-route, `url`, bad-key and malformed requests) in open loop at a fixed arrival
//! rate, or in closed loop with N connections, and reports throughput, answers by status and
//! error type, and latency percentiles per request from HDR histograms.
//!
//! # Layout
//!
//! - [`scenario`]: the TOML scenario files (`loadtest/scenarios/`).
//! - [`prepare`]: each request rendered once into the bytes sent.
//! - [`image_server`]: the local server `url` requests download from.
//! - [`client`]: a keep-alive HTTP/1.1 connection on glommio.
//! - [`generator`]: open and closed loop; latency from when a request was due.
//! - [`stats`]: histograms, counts and the per-second timeline.
//! - [`report`]: the table, the JSON and the SVG.
//! - [`find_max`]: the highest rate under a p99 target.
//! - [`server_cpu`]: the server's CPU time per answer (`--server-pid`).

pub mod client;
pub mod find_max;
pub mod generator;
pub mod image_server;
pub mod prepare;
pub mod report;
pub mod scenario;
pub mod server_cpu;
pub mod stats;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};

use prepare::{Prepared, Target};
use scenario::{Kind, Scenario};

/// The shipped scenarios (`loadtest/scenarios/NAME.toml`).
pub const SCENARIOS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios");

/// A scenario file, or the name of a shipped one.
pub fn scenario_path(name_or_path: &str) -> PathBuf {
    let path = Path::new(name_or_path);
    if path.exists() {
        return path.to_path_buf();
    }
    Path::new(SCENARIOS_DIR).join(format!("{name_or_path}.toml"))
}

/// `http://host:port` to an address and a `Host` header.
pub fn parse_server(url: &str) -> anyhow::Result<(SocketAddr, String)> {
    let Some(rest) = url.strip_prefix("http://") else {
        bail!("--server {url}: only http:// is supported (put TLS in front of modgate-load's target, not in it)");
    };
    let authority = rest.trim_end_matches('/');
    if authority.contains('/') {
        bail!("--server {url}: give the server's root, without a path");
    }
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .with_context(|| format!("resolving {with_port}"))?
        .next()
        .ok_or_else(|| anyhow!("{with_port} has no address"))?;
    Ok((addr, authority.to_owned()))
}

/// Renders `scenario` for `host` and `key`, starting the image server if it has `url`
/// requests.
pub fn prepare_scenario(
    scenario: &Scenario,
    host: &str,
    key: &str,
) -> anyhow::Result<Vec<Prepared>> {
    let needs_images = scenario
        .requests
        .iter()
        .any(|r| matches!(r.kind, Kind::Url | Kind::CompatUrl));
    let image_server = if needs_images {
        Some(
            image_server::start(prepare::images_to_serve(scenario)?)
                .context("starting the image server")?,
        )
    } else {
        None
    };
    prepare::prepare(
        scenario,
        &Target {
            host,
            key,
            image_server,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_and_scenarios_resolve() {
        let (addr, host) = parse_server("http://127.0.0.1:8080/").unwrap();
        assert_eq!(addr.port(), 8080);
        assert_eq!(host, "127.0.0.1:8080");
        assert!(parse_server("https://127.0.0.1:8080").is_err());
        assert!(parse_server("http://127.0.0.1:8080/v1").is_err());
        assert!(scenario_path("default-text").exists());
    }
}
