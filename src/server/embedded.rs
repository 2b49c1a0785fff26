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

    #[tokio::test]
    async fn invalid_settings_are_refused() {
        let err = EmbeddedBroker::start_with(|c| c.num_partitions = 0).await.err().unwrap();
        assert!(err.to_string().contains("num_partitions"), "{err}");
    }
}
