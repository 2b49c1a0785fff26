//! [`EmbeddedBroker`]: a whole broker inside a test process, on a free loopback port, with
//! its data in a fresh temporary directory that is deleted when the broker goes away.
//!
//! ```no_run
//! # async fn example() -> Result<(), runnel::server::embedded::EmbeddedError> {
//! let broker = runnel::server::embedded::EmbeddedBroker::start().await?;
//! let bootstrap_servers = broker.bootstrap(); // "127.0.0.1:PORT"
//! // ... point any Kafka client at it; dropping `broker` stops it and deletes its data.
//! # Ok(()) }
//! ```
//!
//! Dropping stops accepting and aborts the broker's tasks at once; `shutdown().await`
//! additionally waits for them and flushes every partition before the data dir is removed.
//!
//! [`EmbeddedCluster`] is N such brokers forming one cluster (each a controller quorum
//! voter, as `runnel dev-cluster` starts them), for tests of replication and failover:
//!
//! ```no_run
//! # async fn example() -> Result<(), runnel::server::embedded::EmbeddedError> {
//! let cluster = runnel::server::embedded::EmbeddedCluster::start(3).await?;
//! let bootstrap_servers = cluster.bootstrap(); // "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
//! // ... create topics with replication factor 3; stop one with `cluster.stop(node_id)`.
//! # Ok(()) }
//! ```

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use thiserror::Error;

use super::{Broker, StartError};
use crate::config::{BrokerConfig, ConfigError};

#[derive(Debug, Error)]
pub enum EmbeddedError {
    #[error("cannot create a temporary data dir under {parent}: {source}")]
    TempDir { parent: String, source: std::io::Error },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("an embedded cluster needs at least one node")]
    NoNodes,
    #[error("no free loopback port for a controller listener: {0}")]
    NoFreePort(std::io::Error),
    #[error("a broker's start task failed: {0}")]
    StartTask(String),
}

impl BrokerConfig {
    /// The defaults of a broker inside a test: listen (Kafka and HTTP) on free loopback
    /// ports (`127.0.0.1:0`), data in `data_dir`. Everything else is the normal default.
    pub fn ephemeral(data_dir: impl Into<PathBuf>) -> BrokerConfig {
        BrokerConfig {
            listen: "127.0.0.1:0".to_owned(),
            http_listen: Some("127.0.0.1:0".to_owned()),
            data_dir: data_dir.into(),
            ..BrokerConfig::default()
        }
    }
}

/// A running in-process broker that owns its temporary data dir. Derefs to [`Broker`]
/// (`bootstrap()`, `local_addr()`, `context()`).
pub struct EmbeddedBroker {
    // Declared before `data_dir`: fields drop in order, so the broker releases its files
    // and its data-dir lock before the directory is deleted.
    broker: Option<Broker>,
    data_dir: TempDataDir,
}

impl EmbeddedBroker {
    /// Start a broker with [`BrokerConfig::ephemeral`] settings in a new temporary dir.
    pub async fn start() -> Result<EmbeddedBroker, EmbeddedError> {
        Self::start_with(|_| {}).await
    }

    /// Like [`EmbeddedBroker::start`], with `configure` applied to the ephemeral config
    /// first (e.g. `|c| c.num_partitions = 3`). The result is validated as at normal start.
    pub async fn start_with(configure: impl FnOnce(&mut BrokerConfig)) -> Result<EmbeddedBroker, EmbeddedError> {
        let data_dir = TempDataDir::create()?;
        let mut config = BrokerConfig::ephemeral(data_dir.path());
        configure(&mut config);
        config.validate()?;
        let broker = Broker::start(config).await?;
        Ok(EmbeddedBroker { broker: Some(broker), data_dir })
    }

    /// The temporary data dir (deleted when this broker is dropped or shut down).
    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// Stop serving, wait for the broker's tasks, flush, then delete the data dir.
    pub async fn shutdown(mut self) {
        if let Some(broker) = self.broker.take() {
            broker.shutdown().await;
        }
    }
}

impl Deref for EmbeddedBroker {
    type Target = Broker;
    fn deref(&self) -> &Broker {
        // Only `shutdown(self)` takes the broker out, and it consumes the handle.
        self.broker.as_ref().expect("embedded broker is running")
    }
}

/// A running in-process cluster of brokers, each a broker and a controller quorum voter
/// with its own temporary data dir. `start` returns once every broker has been let in
/// by the quorum (registered and unfenced), so a topic with replication factor N can be
/// created at once. Node ids are 1..=N.
pub struct EmbeddedCluster {
    /// Index `node_id - 1`; `None` once stopped.
    brokers: Vec<Option<EmbeddedBroker>>,
}

/// `n` free loopback ports for controller listeners, which must be named (as voters)
/// before any broker binds them: found free by binding, then released. They are taken
/// below the kernel's ephemeral range (`ip_local_port_range`), so that no listener bound
/// to port 0 meanwhile (this process's other brokers, or any other test) can be handed
/// one; a 3-broker start took a client listener's `:0` port that way and failed with
/// "address in use". Where the range cannot be read, from port 0 binds as before.
pub fn controller_ports(n: usize) -> std::io::Result<Vec<u16>> {
    const LOWEST: u16 = 10_000;
    let below = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .filter(|low| *low > LOWEST + 1_000);
    let mut held = Vec::with_capacity(n);
    match below {
        Some(below) => {
            let span = u128::from(below - LOWEST);
            for _ in 0..n * 200 {
                if held.len() == n {
                    break;
                }
                let port = LOWEST + (uuid::Uuid::new_v4().as_u128() % span) as u16;
                if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
                    held.push(l);
                }
            }
            if held.len() < n {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrNotAvailable,
                    "no free port below the ephemeral range",
                ));
            }
        }
        None => {
            for _ in 0..n {
                held.push(std::net::TcpListener::bind("127.0.0.1:0")?);
            }
        }
    }
    held.iter().map(|l| l.local_addr().map(|a| a.port())).collect()
}

impl EmbeddedCluster {
    /// `nodes` brokers with [`BrokerConfig::ephemeral`] settings.
    pub async fn start(nodes: usize) -> Result<EmbeddedCluster, EmbeddedError> {
        Self::start_with(nodes, |_, _| {}).await
    }

    /// Like [`EmbeddedCluster::start`], with `configure(node_id, config)` applied to each
    /// broker's config first (e.g. `|_, c| c.default_replication_factor = 3`).
    pub async fn start_with(
        nodes: usize,
        configure: impl Fn(i32, &mut BrokerConfig),
    ) -> Result<EmbeddedCluster, EmbeddedError> {
        if nodes == 0 {
            return Err(EmbeddedError::NoNodes);
        }
        // The voters must be known before any broker starts (see `controller_ports`).
        let ports = controller_ports(nodes).map_err(EmbeddedError::NoFreePort)?;
        let voters: Vec<(i32, String)> =
            ports.iter().enumerate().map(|(i, p)| (i as i32 + 1, format!("127.0.0.1:{p}"))).collect();
        let mut starting = Vec::with_capacity(nodes);
        for (i, _) in ports.iter().enumerate() {
            let node_id = i as i32 + 1;
            let data_dir = TempDataDir::create()?;
            let mut config = BrokerConfig::ephemeral(data_dir.path());
            config.node_id = node_id;
            config.controller_quorum_voters = voters.clone();
            configure(node_id, &mut config);
            config.validate()?;
            // Every broker waits for the quorum (the others) before it serves: start all.
            starting.push((data_dir, tokio::spawn(Broker::start(config))));
        }
        let mut brokers = Vec::with_capacity(nodes);
        let mut failed = None;
        for (data_dir, task) in starting {
            match task.await {
                Ok(Ok(broker)) => brokers.push(Some(EmbeddedBroker { broker: Some(broker), data_dir })),
                Ok(Err(e)) => failed = failed.or(Some(EmbeddedError::Start(e))),
                Err(e) => failed = failed.or(Some(EmbeddedError::StartTask(e.to_string()))),
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let cluster = EmbeddedCluster { brokers };
        // Each broker returned once it was let in itself; the others' admissions may
        // still be on their way to it. Ready means every broker sees all of them (as
        // long as a quorum forms in time).
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        let all_in =
            |b: &EmbeddedBroker| b.context().controller.image().brokers.values().filter(|r| !r.fenced).count() == nodes;
        while !cluster.running().all(all_in) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        Ok(cluster)
    }

    /// Every running broker's address, comma-separated: a client's bootstrap servers.
    pub fn bootstrap(&self) -> String {
        self.running().map(|b| b.bootstrap()).collect::<Vec<_>>().join(",")
    }

    /// The broker with `node_id`, unless it was stopped.
    pub fn broker(&self, node_id: i32) -> Option<&EmbeddedBroker> {
        usize::try_from(node_id - 1).ok().and_then(|i| self.brokers.get(i)).and_then(Option::as_ref)
    }

    /// The running brokers.
    pub fn running(&self) -> impl Iterator<Item = &EmbeddedBroker> {
        self.brokers.iter().flatten()
    }

    /// Stop one broker the way SIGTERM does (its leadership moves off first) and delete
    /// its data dir; the others carry on.
    pub async fn stop(&mut self, node_id: i32) {
        let slot = usize::try_from(node_id - 1).ok().and_then(|i| self.brokers.get_mut(i));
        if let Some(broker) = slot.and_then(Option::take) {
            broker.shutdown().await;
        }
    }

    /// Stop every broker, one after another, then delete the data dirs. Each controlled
    /// shutdown but the last still has a quorum to commit it; the last broker shares no
    /// ISR with a live one by then and waits at most 2 s for a quorum that is gone. (A
    /// concurrent stop was tried and reverted: the rdkafka cluster test of
    /// compat-tests/rust hung once for over 10 minutes with it, cause not found.)
    pub async fn shutdown(mut self) {
        for broker in self.brokers.iter_mut().filter_map(Option::take) {
            broker.shutdown().await;
        }
    }
}

/// `<temp dir>/runnel-embedded-<pid>-<n>`, removed with everything in it on drop.
struct TempDataDir(PathBuf);

impl TempDataDir {
    fn create() -> Result<TempDataDir, EmbeddedError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let parent = std::env::temp_dir();
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = parent.join(format!("runnel-embedded-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(TempDataDir(path)),
                // Left behind by an earlier process that had the same pid: take the next name.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(source) => return Err(EmbeddedError::TempDir { parent: parent.display().to_string(), source }),
            }
        }
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_ports_are_distinct_free_and_outside_the_ephemeral_range() {
        let ports = controller_ports(5).unwrap();
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), 5, "{ports:?}");
        if let Ok(range) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range") {
            let low: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
            assert!(ports.iter().all(|p| *p < low), "{ports:?} below {low}");
        }
        for p in ports {
            drop(std::net::TcpListener::bind(("127.0.0.1", p)).expect("free after the release"));
        }
    }

    #[tokio::test]
    async fn starts_on_a_free_port_and_removes_its_data_dir() {
        let broker = EmbeddedBroker::start().await.unwrap();
        let dir = broker.data_dir().to_owned();
        assert!(dir.is_dir());
        assert_ne!(broker.local_addr().port(), 0);
        assert!(broker.local_addr().ip().is_loopback());
        tokio::net::TcpStream::connect(broker.local_addr()).await.unwrap();
        broker.shutdown().await;
        assert!(!dir.exists());
    }

    #[tokio::test]
    async fn two_brokers_side_by_side_and_drop_cleans_up() {
        let a = EmbeddedBroker::start().await.unwrap();
        let b = EmbeddedBroker::start_with(|c| c.num_partitions = 3).await.unwrap();
        assert_ne!(a.local_addr(), b.local_addr());
        assert_ne!(a.data_dir(), b.data_dir());
        assert_eq!(b.context().config.num_partitions, 3);
        let dir = a.data_dir().to_owned();
        drop(a);
        assert!(!dir.exists());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cluster_of_three_admits_every_broker_and_replicates_a_topic() {
        let mut cluster = EmbeddedCluster::start(3).await.unwrap();
        assert_eq!(cluster.bootstrap().split(',').count(), 3);
        for b in cluster.running() {
            let image = b.context().controller.image();
            assert_eq!(image.brokers.values().filter(|b| !b.fenced).count(), 3, "every broker let in");
        }
        let controller = cluster.broker(2).unwrap().context().controller.clone();
        let topic = crate::controller::NewTopic {
            name: "replicated".into(),
            num_partitions: 3,
            replication_factor: 3,
            assignments: vec![],
            configs: vec![],
        };
        let created = controller.create_topic(&topic, false).await;
        assert!(created.unwrap().partitions.iter().all(|p| p.replicas.len() == 3));
        let dir = cluster.broker(1).unwrap().data_dir().to_owned();
        cluster.stop(1).await;
        assert!(!dir.exists() && cluster.broker(1).is_none());
        assert_eq!(cluster.bootstrap().split(',').count(), 2);
        cluster.shutdown().await;
    }

    #[tokio::test]
    async fn a_cluster_needs_a_node() {
        assert!(matches!(EmbeddedCluster::start(0).await, Err(EmbeddedError::NoNodes)));
    }

    #[tokio::test]
    async fn invalid_settings_are_refused() {
        let err = EmbeddedBroker::start_with(|c| c.num_partitions = 0).await.err().unwrap();
        assert!(err.to_string().contains("num_partitions"), "{err}");
    }
}
