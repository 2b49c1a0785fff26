//! runnel as the drop-in Kafka broker of other projects' tests, three ways:
//!
//! * [`container::Runnel`]: a testcontainers image definition for the `runnel` image
//!   (built by `docker/build-image.sh`), with a ready check and advertised-listener
//!   handling for the random host port that testcontainers publishes;
//! * [`cluster::RunnelCluster`]: N such containers forming one replicated cluster on a
//!   Docker network of their own (brokers replicate over an inter-broker listener named
//!   on that network; clients on the host use the published ports);
//! * `runnel::server::embedded::EmbeddedBroker`: the broker inside the test process
//!   (re-used from the main crate, nothing here);
//! * [`subprocess::RunnelProcess`]: the `runnel` binary as a child process on a free port,
//!   the way a harness in any language starts it.

pub mod cluster;
pub mod container;
pub mod subprocess;

use std::path::PathBuf;

/// The repository root (this package lives in `compat-tests/rust`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `${RUNNEL_CACHE:-~/.cache/runnel}`: where compat-tests/setup/* install the clients.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("RUNNEL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/runnel"))
}
