//! `runnel dev-cluster --nodes N`: a local N-broker cluster of child processes, for
//! development and tests that need several brokers without Docker.
//!
//! Node i (1-based) is `runnel --node-id i` with its client listener on
//! `127.0.0.1:<base_port + i - 1>`, its controller listener on
//! `127.0.0.1:<base_port + 100 + i - 1>`, its HTTP listener (`/health`, `/ready`,
//! `/metrics`) on `127.0.0.1:<base_port + 200 + i - 1>` unless the extra flags set
//! `--http-listen`, every node a voter of the controller quorum (`{node}` in an extra
//! flag becomes the node's id: `-- --rack 'rack-{node}'` puts each node in a rack of its own),
//! its data in `<data_root>/node-i` and its log in `<data_root>/node-i.log`. The parent
//! prints the bootstrap string once every node listens, and stops them all (SIGTERM, a
//! controlled shutdown) on Ctrl-C or SIGTERM, or when one of them exits on its own.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Offset of the controller listeners from the client listeners.
pub const CONTROLLER_PORT_OFFSET: u16 = 100;
/// Offset of the HTTP listeners from the client listeners.
pub const HTTP_PORT_OFFSET: u16 = 200;
/// How long a node may take to listen, and to stop after SIGTERM.
const NODE_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Error)]
pub enum DevClusterError {
    #[error("--nodes must be between 1 and 9, not {0}")]
    Nodes(u16),
    #[error("ports {0}..{1} do not fit below 65536")]
    Ports(u32, u32),
    #[error("cannot start node {node}: {source}")]
    Spawn { node: u16, source: std::io::Error },
    #[error("node {node} exited before it was ready ({status}); see {log}")]
    NotReady { node: u16, status: String, log: String },
    #[error("node {node} is not listening after {secs} s; see {log}")]
    Timeout { node: u16, secs: u64, log: String },
    #[error("node {node} exited ({status}); see {log}")]
    Exited { node: u16, status: String, log: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

#[derive(Debug, Clone)]
pub struct DevCluster {
    pub nodes: u16,
    pub base_port: u16,
    pub data_root: PathBuf,
    /// The runnel binary to start (normally this very executable).
    pub binary: PathBuf,
    /// Further flags given to every node.
    pub extra_args: Vec<String>,
}

impl DevCluster {
    fn check(&self) -> Result<(), DevClusterError> {
        if !(1..=9).contains(&self.nodes) {
            return Err(DevClusterError::Nodes(self.nodes));
        }
        let top = u32::from(self.base_port) + u32::from(HTTP_PORT_OFFSET) + u32::from(self.nodes);
        if top > 65_535 {
            return Err(DevClusterError::Ports(u32::from(self.base_port), top));
        }
        Ok(())
    }

    pub fn client_address(&self, node: u16) -> String {
        format!("127.0.0.1:{}", self.base_port + node - 1)
    }

    fn controller_address(&self, node: u16) -> String {
        format!("127.0.0.1:{}", self.base_port + CONTROLLER_PORT_OFFSET + node - 1)
    }

    /// The HTTP listener of node `node`, `None` when the extra flags choose it.
    pub fn http_address(&self, node: u16) -> Option<String> {
        let chosen = self.extra_args.iter().any(|a| a == "--http-listen" || a.starts_with("--http-listen="));
        (!chosen).then(|| format!("127.0.0.1:{}", self.base_port + HTTP_PORT_OFFSET + node - 1))
    }

    pub fn bootstrap(&self) -> String {
        (1..=self.nodes).map(|n| self.client_address(n)).collect::<Vec<_>>().join(",")
    }

    pub fn data_dir(&self, node: u16) -> PathBuf {
        self.data_root.join(format!("node-{node}"))
    }

    pub fn log_path(&self, node: u16) -> PathBuf {
        self.data_root.join(format!("node-{node}.log"))
    }

    /// The command line of node `node` (1-based).
    pub fn node_args(&self, node: u16) -> Vec<String> {
        let voters =
            (1..=self.nodes).map(|n| format!("{n}@{}", self.controller_address(n))).collect::<Vec<_>>().join(",");
        let mut args = vec![
            "--node-id".to_owned(),
            node.to_string(),
            "--listen".to_owned(),
            self.client_address(node),
            "--controller-listen".to_owned(),
            self.controller_address(node),
            "--controller-quorum-voters".to_owned(),
            voters,
            "--data-dir".to_owned(),
            self.data_dir(node).display().to_string(),
        ];
        if let Some(http) = self.http_address(node) {
            args.extend(["--http-listen".to_owned(), http]);
        }
        args.extend(self.extra_args.iter().map(|a| a.replace("{node}", &node.to_string())));
        args
    }

    /// Start every node, print the bootstrap string, and run until a signal or a node's
    /// exit; then stop the rest.
    pub async fn run(&self) -> Result<(), DevClusterError> {
        self.check()?;
        std::fs::create_dir_all(&self.data_root)?;
        let mut children = Vec::new();
        let started = self.start_all(&mut children).await;
        let outcome = match started {
            Ok(()) => {
                println!("runnel dev cluster: {} brokers", self.nodes);
                println!("  bootstrap servers: {}", self.bootstrap());
                let http: Vec<String> = (1..=self.nodes).filter_map(|n| self.http_address(n)).collect();
                if !http.is_empty() {
                    println!("  http (/metrics):   {}", http.join(","));
                }
                println!("  data and logs:     {}/node-N, node-N.log", self.data_root.display());
                println!("Ctrl-C stops them all.");
                self.wait(&mut children).await
            }
            Err(e) => Err(e),
        };
        stop_all(&mut children).await;
        outcome
    }

    async fn start_all(&self, children: &mut Vec<(u16, Child)>) -> Result<(), DevClusterError> {
        for node in 1..=self.nodes {
            let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path(node))?;
            let child = Command::new(&self.binary)
                .args(self.node_args(node))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(log)
                // Ctrl-C reaches the parent only; it stops the nodes with SIGTERM, so a
                // node never sees a second, competing signal.
                .process_group(0)
                .spawn()
                .map_err(|source| DevClusterError::Spawn { node, source })?;
            children.push((node, child));
        }
        // Nodes wait for each other (the controller quorum), so they are waited for
        // together, after all have started.
        for (node, child) in children.iter_mut() {
            let log = self.log_path(*node).display().to_string();
            let stdout = child.stdout.take().ok_or_else(|| std::io::Error::other("no stdout"))?;
            let mut lines = BufReader::new(stdout).lines();
            let ready = tokio::time::timeout(NODE_TIMEOUT, async {
                while let Some(line) = lines.next_line().await? {
                    if line.contains("listening on") {
                        return Ok::<bool, std::io::Error>(true);
                    }
                }
                Ok(false)
            })
            .await;
            match ready {
                Ok(Ok(true)) => {}
                Ok(_) => {
                    let status = child.wait().await.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                    return Err(DevClusterError::NotReady { node: *node, status, log });
                }
                Err(_) => return Err(DevClusterError::Timeout { node: *node, secs: NODE_TIMEOUT.as_secs(), log }),
            }
        }
        Ok(())
    }

    async fn wait(&self, children: &mut [(u16, Child)]) -> Result<(), DevClusterError> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let any_exit = futures_first_exit(children);
        tokio::select! {
            _ = tokio::signal::ctrl_c() => Ok(()),
            _ = term.recv() => Ok(()),
            (node, status) = any_exit => Err(DevClusterError::Exited {
                node,
                status,
                log: self.log_path(node).display().to_string(),
            }),
        }
    }
}

/// The first child to exit, with its status.
async fn futures_first_exit(children: &mut [(u16, Child)]) -> (u16, String) {
    loop {
        for (node, child) in children.iter_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                return (*node, status.to_string());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// SIGTERM every node still running, one after another (each moves its leadership off
/// and flushes), and SIGKILL one that does not stop in time. One at a time, as a rolling
/// stop: each controlled shutdown but the last still has a quorum to commit it, where
/// stopping all at once left the last node asking a quorum that was gone for its whole
/// 15 s timeout.
async fn stop_all(children: &mut [(u16, Child)]) {
    for (node, child) in children.iter_mut() {
        if let Some(pid) = child.id().and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        if tokio::time::timeout(NODE_TIMEOUT, child.wait()).await.is_err() {
            eprintln!("runnel dev cluster: node {node} did not stop in time; killing it");
            let _ = child.kill().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(nodes: u16) -> DevCluster {
        DevCluster {
            nodes,
            base_port: 9092,
            data_root: PathBuf::from("d"),
            binary: PathBuf::from("runnel"),
            extra_args: vec!["--num-partitions".into(), "3".into()],
        }
    }

    #[test]
    fn nodes_get_consecutive_ports_and_every_node_is_a_voter() {
        let c = spec(3);
        assert_eq!(c.bootstrap(), "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094");
        assert_eq!(
            c.node_args(2),
            [
                "--node-id",
                "2",
                "--listen",
                "127.0.0.1:9093",
                "--controller-listen",
                "127.0.0.1:9193",
                "--controller-quorum-voters",
                "1@127.0.0.1:9192,2@127.0.0.1:9193,3@127.0.0.1:9194",
                "--data-dir",
                "d/node-2",
                "--http-listen",
                "127.0.0.1:9293",
                "--num-partitions",
                "3",
            ]
        );
    }

    #[test]
    fn http_listeners_are_per_node_unless_the_extra_flags_choose() {
        let c = spec(3);
        assert_eq!(c.http_address(1).as_deref(), Some("127.0.0.1:9292"));
        assert_eq!(c.http_address(3).as_deref(), Some("127.0.0.1:9294"));
        let mut off = spec(2);
        off.extra_args = vec!["--http-listen".into(), "off".into()];
        assert_eq!(off.http_address(1), None);
        let args = off.node_args(1);
        assert_eq!(args.iter().filter(|a| *a == "--http-listen").count(), 1, "{args:?}");
    }

    #[test]
    fn extra_flags_name_their_node() {
        let mut c = spec(3);
        c.extra_args = vec!["--rack".into(), "RACK{node}".into()];
        assert_eq!(c.node_args(2).iter().rev().take(2).collect::<Vec<_>>(), ["RACK2", "--rack"]);
    }

    #[test]
    fn bad_sizes_are_refused() {
        assert!(matches!(spec(0).check(), Err(DevClusterError::Nodes(0))));
        assert!(matches!(spec(10).check(), Err(DevClusterError::Nodes(10))));
        let mut high = spec(3);
        high.base_port = 65_500;
        assert!(matches!(high.check(), Err(DevClusterError::Ports(..))));
        assert!(spec(5).check().is_ok());
    }
}
