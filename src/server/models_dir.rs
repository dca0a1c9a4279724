//! Where the models are: an installed binary finds them without being run from the source
//! tree.
//!
//! Tried in order, the first that holds the ONNX Runtime library wins:
//! 1. `server.models_dir` of the configuration (or `--models`), relative to the working
//!    directory as given;
//! 2. the environment variable [`MODELS_ENV`];
//! 3. beside the binary: `<bin>/../share/modgate/models` and `<bin>/models`;
//! 4. the system's: `/usr/local/share/modgate/models`, `/usr/share/modgate/models`,
//!    `/var/lib/modgate/models`.
//!
//! With none, the error names every path tried (the configured one is used anyway when
//! `models.required` is false, so the server starts and reports what it cannot score).

use std::path::{Path, PathBuf};

/// The environment variable naming the models directory.
pub const MODELS_ENV: &str = "MODGATE_MODELS";

/// The directories tried, in order.
pub fn candidates(configured: &Path, env: Option<PathBuf>, exe: Option<PathBuf>) -> Vec<PathBuf> {
    let mut out = vec![configured.to_owned()];
    out.extend(env);
    if let Some(bin_dir) = exe.as_deref().and_then(Path::parent) {
        out.push(bin_dir.join("../share/modgate/models"));
        out.push(bin_dir.join("models"));
    }
    for system in [
        "/usr/local/share/modgate/models",
        "/usr/share/modgate/models",
        "/var/lib/modgate/models",
    ] {
        out.push(PathBuf::from(system));
    }
    out.dedup();
    out
}

/// The first candidate that holds `library` (relative to it), or every candidate tried.
pub fn resolve(configured: &Path, library: &Path) -> Result<PathBuf, Vec<PathBuf>> {
    let env = std::env::var_os(MODELS_ENV)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from);
    let exe = std::env::current_exe().ok();
    let tried = candidates(configured, env, exe);
    match tried.iter().find(|dir| dir.join(library).is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(tried),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_then_environment_then_beside_the_binary_then_the_system() {
        let tried = candidates(
            Path::new("models"),
            Some(PathBuf::from("/opt/m")),
            Some(PathBuf::from("/usr/local/bin/modgate")),
        );
        assert_eq!(tried[0], Path::new("models"));
        assert_eq!(tried[1], Path::new("/opt/m"));
        assert_eq!(
            tried[2],
            Path::new("/usr/local/bin/../share/modgate/models")
        );
        assert_eq!(tried.last().unwrap(), Path::new("/var/lib/modgate/models"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cache")).unwrap();
        std::fs::write(dir.path().join("cache/lib.so"), b"x").unwrap();
        assert_eq!(
            resolve(dir.path(), Path::new("cache/lib.so")),
            Ok(dir.path().to_owned())
        );
        let missing = resolve(Path::new("/nonexistent/models"), Path::new("cache/lib.so"));
        assert!(missing.is_err_and(|tried| tried[0] == Path::new("/nonexistent/models")));
    }
}
