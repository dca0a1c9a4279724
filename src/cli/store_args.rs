//! What every admin command shares: where the store and journals are (`--data`,
//! `--config`), and times as the command line writes them.

use std::path::PathBuf;

use anyhow::{anyhow, Context};
use clap::Args;

use crate::config::Config;

/// Where the admin commands find the store.
#[derive(Args)]
pub struct StoreArgs {
    /// Data directory. Default: server.data_dir of --config, else ./data.
    #[arg(long, value_name = "DIR", global = true)]
    pub data: Option<PathBuf>,
    /// Configuration file whose server.data_dir to use.
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
}

/// The data directory and configuration the admin commands work on.
pub fn resolve(args: &StoreArgs) -> anyhow::Result<(PathBuf, Config)> {
    let config = Config::load(args.config.as_deref())?;
    // Workflows may name the configuration's own models.
    crate::checks::custom::register(&config.models.custom).map_err(|error| anyhow!(error))?;
    let dir = args
        .data
        .clone()
        .unwrap_or_else(|| config.server.data_dir.clone());
    Ok((dir, config))
}

/// The wall clock's Unix milliseconds.
pub fn now_ms() -> i64 {
    crate::clock::Clock::System.now_ms()
}

/// A time as RFC 3339 (`2027-01-31T00:00:00Z`), in Unix milliseconds.
pub fn parse_rfc3339_ms(text: &str) -> anyhow::Result<i64> {
    let time = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .with_context(|| {
            format!("invalid time '{text}': expected RFC 3339, e.g. 2027-01-31T00:00:00Z")
        })?;
    Ok((time.unix_timestamp_nanos() / 1_000_000) as i64)
}
