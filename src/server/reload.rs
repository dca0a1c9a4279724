//! `SIGHUP`: read the configuration again and apply what can change without a restart.
//!
//! Applied at once: `log.level` (unless `--log-level` or `RUST_LOG` set the filter), the
//! plans (`[plans.*]`, written to the store, where every shard sees them on its next request)
//! and the workflow file of `workflows.file` (imported; a workflow whose thresholds changed
//! gets a new version). Everything else needs a restart; the reload names what changed and
//! was not applied. A file that does not parse or validate changes nothing.
//!
//! The outcome is one line on stdout and in the log.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::{Config, Overrides};
use crate::logging::{LevelChange, LogControl};
use crate::store::Store;
use crate::workflow;

/// What a reload needs: how the configuration was read, the logger, the store, and the
/// configuration in force (to tell what changed).
pub struct Reloader {
    pub overrides: Overrides,
    pub log: LogControl,
    pub store: Store,
    pub running: Config,
}

impl Reloader {
    /// Reloads; returns the line that says what happened.
    /// Reloads; the line says what changed, and `Err` carries it when something was refused.
    pub fn reload(&mut self) -> Result<String, String> {
        let next = match self.overrides.load() {
            Ok(next) => next,
            Err(error) => return Err(format!("reload refused, nothing changed: {error:#}")),
        };
        let mut applied = Vec::new();
        let mut problems = Vec::new();
        match self.log.set_config_level(&next.log.level) {
            Ok(LevelChange::Changed { from, to }) => {
                applied.push(format!("log.level {from} -> {to}"));
                self.running.log.level = next.log.level.clone();
            }
            Ok(LevelChange::Unchanged) => {}
            Ok(LevelChange::Overridden(source)) => {
                if next.log.level != self.running.log.level {
                    problems.push(format!("log.level not applied: {source:?} sets the filter"));
                }
            }
            Err(error) => problems.push(format!("{error:#}")),
        }
        // In a fleet the store is a replica of PostgreSQL: plans and workflows change there.
        let fleet = self.running.cluster.is_some();
        if fleet && (next.plans != self.running.plans || next.workflows.file.is_some()) {
            problems.push(
                "plans and workflows.file are not applied by a fleet node: change them with `modgate db migrate` or `modgate workflow import` and --config".to_owned(),
            );
        } else if next.plans != self.running.plans {
            match self.store.put_plans(&next.plans) {
                Ok(()) => {
                    applied.push("plans".to_owned());
                    self.running.plans = next.plans.clone();
                }
                Err(error) => problems.push(format!("plans not applied: {error:#}")),
            }
        }
        if let (false, Some(file)) = (fleet, &next.workflows.file) {
            match import_workflows(&self.store, file) {
                Ok(changed) if changed.is_empty() => {}
                Ok(changed) => applied.push(format!("workflows {}", changed.join(", "))),
                Err(error) => problems.push(format!("workflows not applied: {error:#}")),
            }
        }
        self.running.workflows = next.workflows.clone();
        let restart: Vec<&str> = [
            ("server", next.server != self.running.server),
            ("tls", next.tls != self.running.tls),
            ("limits", next.limits != self.running.limits),
            ("models", next.models != self.running.models),
            ("inference", next.inference != self.running.inference),
            ("journal", next.journal != self.running.journal),
            ("log.format", next.log.format != self.running.log.format),
            ("metrics", next.metrics != self.running.metrics),
            ("cluster", next.cluster != self.running.cluster),
            ("testing", next.testing != self.running.testing),
        ]
        .into_iter()
        .filter_map(|(section, changed)| changed.then_some(section))
        .collect();
        let mut line = if applied.is_empty() {
            "reloaded: nothing changed".to_owned()
        } else {
            format!("reloaded: {}", applied.join("; "))
        };
        if !restart.is_empty() {
            line.push_str(&format!(
                "; changed but applied only at the next start: {}",
                restart.join(", ")
            ));
        }
        let refused = !problems.is_empty();
        for problem in problems {
            line.push_str(&format!("; {problem}"));
        }
        if refused {
            Err(line)
        } else {
            Ok(line)
        }
    }
}

/// Imports the workflow file into the store; returns the workflows that changed, as
/// `name vN`.
pub fn import_workflows(store: &Store, file: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(file)
        .map_err(|error| anyhow::anyhow!("reading {}: {error}", file.display()))?;
    let definitions = workflow::parse_workflows(&text)
        .map_err(|error| anyhow::anyhow!("{}: {error}", file.display()))?;
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    Ok(store
        .import_workflows(&definitions, now_ms)?
        .into_iter()
        .filter(|imported| imported.changed)
        .map(|imported| format!("{} v{}", imported.name, imported.version))
        .collect())
}
