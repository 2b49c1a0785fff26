//! [`RunnelProcess`]: the `runnel` binary as a child process on a free loopback port, the
//! way a test harness in any language uses it: start `runnel --listen 127.0.0.1:0
//! --data-dir DIR`, read `runnel ready: listening on IP:PORT` from its stdout, point the
//! clients at IP:PORT, kill it at the end.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The binary under test: `$RUNNEL_BIN`, else the repository's release build, else its
/// debug build.
pub fn runnel_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("RUNNEL_BIN") {
        return PathBuf::from(p);
    }
    let target = crate::repo_root().join("target");
    let release = target.join("release/runnel");
    if release.exists() {
        release
    } else {
        target.join("debug/runnel")
    }
}

pub struct RunnelProcess {
    child: Child,
    bootstrap: String,
    // Kept open: runnel writes to stdout only once, but a closed pipe would turn a later
    // write into EPIPE.
    _stdout: BufReader<ChildStdout>,
    data_dir: tempfile::TempDir,
}

impl RunnelProcess {
    /// Start `bin` with its data in a new temporary directory, extra `args` appended,
    /// and wait up to 20 s for the ready line.
    pub fn start(bin: &Path, args: &[&str]) -> std::io::Result<RunnelProcess> {
        let data_dir = tempfile::tempdir()?;
        let log = std::fs::File::create(data_dir.path().join("runnel.log"))?;
        let mut child = Command::new(bin)
            .args(["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir.path().join("data"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot run {}: {e}", bin.display())))?;
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        // Read the ready line on a thread, so that a broker that never prints it cannot
        // hang the test past the timeout.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut stdout = stdout;
            let mut line = String::new();
            let result = loop {
                line.clear();
                match stdout.read_line(&mut line) {
                    Ok(0) | Err(_) => break None,
                    Ok(_) => {
                        if let Some(addr) = line.trim().strip_prefix("runnel ready: listening on ") {
                            break Some(addr.to_owned());
                        }
                    }
                }
            };
            let _ = tx.send((result, stdout));
        });
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok((Some(bootstrap), stdout)) => Ok(RunnelProcess { child, bootstrap, _stdout: stdout, data_dir }),
            outcome => {
                let _ = child.kill();
                let _ = child.wait();
                let log = std::fs::read_to_string(data_dir.path().join("runnel.log")).unwrap_or_default();
                let why = if outcome.is_err() {
                    "did not print its ready line within 20 s"
                } else {
                    "exited before it was ready"
                };
                Err(std::io::Error::other(format!("runnel {why}; its log:\n{log}")))
            }
        }
    }

    /// `IP:PORT` from the ready line.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }
}

impl Drop for RunnelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
