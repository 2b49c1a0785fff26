//! [`RunnelCluster`]: N containers of the runnel image forming one replicated cluster on
//! a Docker network of their own, reachable from the test's clients on the host.
//!
//! ```no_run
//! use runnel_compat_rust::cluster::RunnelCluster;
//! # async fn example() -> testcontainers::core::error::Result<()> {
//! let cluster = RunnelCluster::start(3).await?;
//! let bootstrap = cluster.bootstrap_servers().await?; // "<host>:P1,<host>:P2,<host>:P3"
//! // ... create topics with replication factor 3; `cluster.kill(node_id)` crashes one.
//! # Ok(()) }
//! ```
//!
//! Two listeners per broker, as Kafka's test containers do it: the brokers reach each
//! other on the network, clients reach them through published ports, and no single
//! address works for both.
//!
//! * the client listener (9092) is published on a random host port and advertised as
//!   `<host>:<mapped port>` (written by [`Runnel`]'s `exec_before_ready` into the file the
//!   entrypoint waits for), so clients on the host are told addresses they can reach;
//! * the inter-broker listener (9094) is advertised by the container's name on the
//!   network: replica fetchers connect there;
//! * the controller quorum (9093) runs on the network, its voters named the same way.
//!
//! Each container's name is its DNS name on the network (testcontainers-rs cannot set
//! network aliases); names and the network carry a suffix unique to the cluster, so
//! clusters of concurrent tests do not collide. The containers start concurrently: a
//! broker prints its ready line only once the controller quorum has let it in, which
//! needs a majority of the voters running.

use std::sync::atomic::{AtomicU32, Ordering};

use testcontainers::core::error::{Result, TestcontainersError};
use testcontainers::core::{ContainerPort, ImageExt};
use testcontainers::runners::AsyncRunner;
use testcontainers::ContainerAsync;

use crate::container::{Runnel, KAFKA_PORT};

/// The controller listener inside each container (on the network only).
pub const CONTROLLER_PORT: ContainerPort = ContainerPort::Tcp(9093);
/// The inter-broker listener inside each container (on the network only).
pub const INTER_BROKER_PORT: ContainerPort = ContainerPort::Tcp(9094);

/// A running cluster; dropping it removes its containers and then its network.
pub struct RunnelCluster {
    /// `runnel-<unique>`: the network's name and the prefix of the containers'.
    name: String,
    /// Index `node_id - 1`; `None` once stopped or killed.
    nodes: Vec<Option<ContainerAsync<Runnel>>>,
}

impl RunnelCluster {
    /// `nodes` brokers of the default image ([`Runnel::default`]), each a controller
    /// quorum voter; node ids are 1..=nodes.
    pub async fn start(nodes: usize) -> Result<RunnelCluster> {
        Self::start_with(Runnel::default(), nodes).await
    }

    /// Like [`RunnelCluster::start`], with `image` (and its settings, e.g.
    /// `Runnel::default().with_setting("DEFAULT_REPLICATION_FACTOR", "3")`) for every node.
    pub async fn start_with(image: Runnel, nodes: usize) -> Result<RunnelCluster> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
        let name = format!("runnel-{}-{}-{nanos:x}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let alias = |id: usize| format!("{name}-{id}");
        let port = |p: ContainerPort| p.as_u16();
        let voters: Vec<String> =
            (1..=nodes).map(|id| format!("{id}@{}:{}", alias(id), port(CONTROLLER_PORT))).collect();
        let voters = voters.join(",");
        let mut starting = Vec::with_capacity(nodes);
        for id in 1..=nodes {
            let request = image
                .clone()
                .with_setting("NODE_ID", id.to_string())
                .with_setting("CONTROLLER_QUORUM_VOTERS", voters.clone())
                .with_setting("CONTROLLER_LISTEN", format!("0.0.0.0:{}", port(CONTROLLER_PORT)))
                .with_setting("INTER_BROKER_LISTEN", format!("0.0.0.0:{}", port(INTER_BROKER_PORT)))
                .with_setting("INTER_BROKER_ADVERTISED_LISTENER", format!("{}:{}", alias(id), port(INTER_BROKER_PORT)))
                .with_network(name.clone())
                .with_container_name(alias(id));
            starting.push(tokio::spawn(request.start()));
        }
        let mut started = Vec::with_capacity(nodes);
        let mut failed = None;
        for task in starting {
            match task.await {
                Ok(Ok(container)) => started.push(Some(container)),
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(e) => failed = failed.or(Some(TestcontainersError::other(format!("start task: {e}")))),
            }
        }
        match failed {
            // The started containers (and then the network) go with `started`.
            Some(e) => Err(e),
            None => Ok(RunnelCluster { name, nodes: started }),
        }
    }

    /// The Docker network the brokers share.
    pub fn network(&self) -> &str {
        &self.name
    }

    /// Node `node_id`'s name on the network (its container's name).
    pub fn alias(&self, node_id: i32) -> String {
        format!("{}-{node_id}", self.name)
    }

    /// The container of node `node_id`, unless it was stopped or killed.
    pub fn container(&self, node_id: i32) -> Option<&ContainerAsync<Runnel>> {
        usize::try_from(node_id - 1).ok().and_then(|i| self.nodes.get(i)).and_then(Option::as_ref)
    }

    /// Every running broker's published client address, comma-separated: a client's
    /// `bootstrap.servers`.
    pub async fn bootstrap_servers(&self) -> Result<String> {
        let mut out = Vec::new();
        for c in self.nodes.iter().flatten() {
            out.push(format!("{}:{}", c.get_host().await?, c.get_host_port_ipv4(KAFKA_PORT).await?));
        }
        Ok(out.join(","))
    }

    /// `docker stop` node `node_id` (SIGTERM: its leadership moves off before it exits)
    /// and remove its container.
    pub async fn stop(&mut self, node_id: i32) -> Result<()> {
        match self.take(node_id) {
            Some(c) => {
                c.stop().await?;
                c.rm().await
            }
            None => Ok(()),
        }
    }

    /// Crash node `node_id` (`docker kill`: SIGKILL, no controlled shutdown) and remove
    /// its container. The controller quorum fences it once its heartbeats stop.
    pub async fn kill(&mut self, node_id: i32) -> Result<()> {
        let Some(c) = self.take(node_id) else { return Ok(()) };
        let out = tokio::process::Command::new("docker")
            .args(["kill", "--signal", "KILL", c.id()])
            .output()
            .await
            .map_err(|e| TestcontainersError::other(format!("docker kill: {e}")))?;
        if !out.status.success() {
            return Err(TestcontainersError::other(format!(
                "docker kill {}: {}",
                c.id(),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        c.rm().await
    }

    fn take(&mut self, node_id: i32) -> Option<ContainerAsync<Runnel>> {
        usize::try_from(node_id - 1).ok().and_then(|i| self.nodes.get_mut(i)).and_then(Option::take)
    }
}
