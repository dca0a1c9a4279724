//! Logs: `tracing` events to stderr, as text for people or JSON for log shippers, filtered by
//! a level that `SIGHUP` can change while the server runs.
//!
//! Where the filter comes from, first found wins: `--log-level`, then `RUST_LOG` (when set),
//! then `log.level` of the configuration. Only the last can be reloaded; [`LogControl`] says
//! so when a reload finds the file's level overridden.
//!
//! What is logged (the request path's lines are written in [`crate::api`]): at `debug` a line
//! per answer, at `info` a line per refusal and the server's lifecycle, `warn` and `error`
//! for failures; with the request id, shard, route, status, error type and time. Never a
//! key, a secret, a `ref` or a text's content.
//!
//! Panics follow the same rule ([`install_panic_hook`]): a panic's message is logged only when
//! it is a literal written in the code; a formatted one (which may quote a key, a ref or a
//! text, as a failed slice quotes its string) is withheld, and the place in the code is logged
//! instead.

use std::io::IsTerminal;
use std::sync::Mutex;

use anyhow::anyhow;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, reload, EnvFilter, Registry};

use crate::config::LogFormat;

/// Where the active filter came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterSource {
    Flag,
    Environment,
    Config,
}

/// The installed logger's filter, changeable at run time.
pub struct LogControl {
    handle: reload::Handle<EnvFilter, Registry>,
    source: FilterSource,
    /// The filter in force, as written.
    current: Mutex<String>,
}

/// What [`LogControl::set_config_level`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum LevelChange {
    Changed {
        from: String,
        to: String,
    },
    Unchanged,
    /// The flag or the environment wins over the file.
    Overridden(FilterSource),
}

impl LogControl {
    /// Installs the process's logger. `flag`: `--log-level`; `config_level`: `log.level`.
    pub fn install(
        format: LogFormat,
        flag: Option<&str>,
        config_level: &str,
    ) -> anyhow::Result<LogControl> {
        let environment = std::env::var("RUST_LOG").ok().filter(|v| !v.is_empty());
        let (spec, source) = match (flag, environment) {
            (Some(flag), _) => (flag.to_owned(), FilterSource::Flag),
            (None, Some(environment)) => (environment, FilterSource::Environment),
            (None, None) => (config_level.to_owned(), FilterSource::Config),
        };
        let filter =
            EnvFilter::try_new(&spec).map_err(|error| anyhow!("log filter '{spec}': {error}"))?;
        let (filter, handle) = reload::Layer::new(filter);
        let registry = tracing_subscriber::registry().with(filter);
        let installed = match format {
            LogFormat::Text => registry
                .with(
                    fmt::layer()
                        .with_ansi(std::io::stderr().is_terminal())
                        .with_writer(std::io::stderr),
                )
                .try_init(),
            LogFormat::Json => registry
                .with(
                    fmt::layer()
                        .json()
                        .flatten_event(true)
                        .with_current_span(false)
                        .with_writer(std::io::stderr),
                )
                .try_init(),
        };
        installed.map_err(|error| anyhow!("installing the logger: {error}"))?;
        install_panic_hook();
        Ok(LogControl {
            handle,
            source,
            current: Mutex::new(spec),
        })
    }

    /// Applies the configuration's `log.level` (on SIGHUP), unless a flag or `RUST_LOG` set
    /// the filter.
    pub fn set_config_level(&self, level: &str) -> anyhow::Result<LevelChange> {
        if self.source != FilterSource::Config {
            return Ok(LevelChange::Overridden(self.source));
        }
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *current == level {
            return Ok(LevelChange::Unchanged);
        }
        let filter =
            EnvFilter::try_new(level).map_err(|error| anyhow!("log filter '{level}': {error}"))?;
        self.handle
            .reload(filter)
            .map_err(|error| anyhow!("reloading the log filter: {error}"))?;
        let from = std::mem::replace(&mut *current, level.to_owned());
        Ok(LevelChange::Changed {
            from,
            to: level.to_owned(),
        })
    }
}

/// The logger of the admin commands: text on stderr, `RUST_LOG` or `info`.
pub fn install_for_commands() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// Replaces the default panic hook (which prints the whole message to stderr) with one that
/// logs where the panic happened and only a literal message.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|place| format!("{}:{}", place.file(), place.line()))
            .unwrap_or_default();
        let thread = std::thread::current();
        tracing::error!(
            location,
            thread = thread.name().unwrap_or("unnamed"),
            message = panic_message(info.payload()),
            "panic"
        );
    }));
}

/// A panic's message if the code wrote it as a literal (`&'static str`); anything formatted at
/// run time is withheld, since it may hold request data.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &'static str {
    payload
        .downcast_ref::<&'static str>()
        .copied()
        .unwrap_or("(formatted message withheld: it may quote request data)")
}

#[cfg(test)]
mod panic_tests {
    use super::panic_message;

    #[test]
    fn formatted_panic_messages_are_withheld() {
        let key = "mg_live_AAAAAAAAAAAéBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB".to_owned();
        let payload = std::panic::catch_unwind(|| {
            let _ = &key[..20];
        })
        .expect_err("slicing inside a character panics");
        let message = panic_message(payload.as_ref());
        assert!(!message.contains("mg_live"), "{message}");
        let payload = std::panic::catch_unwind(|| panic!("a literal")).expect_err("panics");
        assert_eq!(panic_message(payload.as_ref()), "a literal");
    }
}
