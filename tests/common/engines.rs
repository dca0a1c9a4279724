//! Real engines for the fleet tests, from Debian's packages (`make test` installs them):
//! PostgreSQL on 127.0.0.1, a free port and a temporary directory, run as the `postgres` user
//! when the tests run as root (PostgreSQL refuses to run as root).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The directory of PostgreSQL's programs (`/usr/lib/postgresql/<version>/bin`).
fn postgres_bin() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is installed (make test installs Debian's postgresql)")
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("postgres").is_file())
        .collect();
    found.sort();
    found
        .pop()
        .expect("a PostgreSQL version under /usr/lib/postgresql")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) takes no arguments, cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() == 0 }
}

/// A command run as the `postgres` user when we are root.
fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

pub struct Postgres {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl Postgres {
    /// A fresh cluster with a database `modgate` owned by the user `modgate` (trust auth on
    /// loopback only).
    pub fn start() -> Postgres {
        let bin = postgres_bin();
        let dir = tempfile::Builder::new()
            .prefix("modgate-pg-")
            .tempdir()
            .expect("tempdir");
        if is_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(status.success());
        }
        let data = dir.path().join("data");
        let output = as_postgres(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "modgate", "--no-sync", "-E", "UTF8"])
            .output()
            .expect("initdb");
        assert!(
            output.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let mut postgres = Postgres {
            child: None,
            port: free_port(),
            dir,
            bin,
        };
        postgres.run();
        let output = Command::new(postgres.bin.join("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &postgres.port.to_string(),
                "-U",
                "modgate",
                "modgate",
            ])
            .output()
            .expect("createdb");
        assert!(
            output.status.success(),
            "createdb: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        postgres
    }

    fn run(&mut self) {
        let data = self.dir.path().join("data");
        let child = as_postgres(&self.bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args([
                "-p",
                &self.port.to_string(),
                "-c",
                "listen_addresses=127.0.0.1",
            ])
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.dir.path().display()
            ))
            .args(["-c", "fsync=off", "-c", "max_connections=200"])
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(self.dir.path().join("postgres.log"))
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null()),
            )
            .spawn()
            .expect("postgres");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "PostgreSQL did not start: {}",
                std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn url(&self) -> String {
        format!("postgres://modgate@127.0.0.1:{}/modgate", self.port)
    }

    /// Stops the server (fast shutdown), keeping its data.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The child may be `runuser`, which does not pass signals on: pg_ctl stops the
            // server itself (fast shutdown), then the child is reaped.
            let _ = as_postgres(&self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(self.dir.path().join("data"))
                .args(["-m", "fast", "-w", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and data.
    pub fn restart(&mut self) {
        self.stop();
        self.run();
    }

    /// Runs SQL with psql; its output.
    pub fn psql(&self, sql: &str) -> String {
        let output = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "modgate",
                "-d",
                "modgate",
            ])
            .args(["-At", "-c", sql])
            .output()
            .expect("psql");
        assert!(
            output.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Redis server (Debian's `redis-server`; Valkey speaks the same protocol) on 127.0.0.1, a
/// free port, no persistence: a restart comes back empty, as a lost cache would.
pub struct Redis {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Redis {
    pub fn start() -> Redis {
        let dir = tempfile::Builder::new()
            .prefix("modgate-redis-")
            .tempdir()
            .expect("tempdir");
        let mut redis = Redis {
            child: None,
            port: free_port(),
            dir,
        };
        redis.run();
        redis
    }

    fn run(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(
                std::fs::File::create(self.dir.path().join("redis.log"))
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null()),
            )
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (make test installs Debian's redis-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "Redis did not start: {}",
                std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kills the server (`kill -9`): everything it held is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again, empty, on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.run();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}
