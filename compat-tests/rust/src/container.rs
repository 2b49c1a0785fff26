//! [`Runnel`]: the runnel image for testcontainers-rs.
//!
//! ```no_run
//! use runnel_compat_rust::container::{bootstrap_servers, Runnel};
//! use testcontainers::runners::AsyncRunner;
//! # async fn example() -> testcontainers::core::error::Result<()> {
//! let broker = Runnel::default().start().await?;
//! let bootstrap = bootstrap_servers(&broker).await?; // "localhost:<mapped port>"
//! # Ok(()) }
//! ```
//!
//! The advertised listener: testcontainers publishes 9092 on a random host port that is
//! known only once the container runs, and a Kafka client that bootstraps on
//! `localhost:<mapped>` reconnects to whatever address the broker advertises. So the image
//! is started with `RUNNEL_ADVERTISED_LISTENER_FILE` set: its entrypoint waits for that
//! file before it starts the broker, and [`Runnel::exec_before_ready`] writes
//! `<host>:<mapped port>` into it right after start — before the ready condition (the
//! broker's ready line on stdout) is awaited. The broker then advertises exactly the
//! address the test's clients can reach.

use std::borrow::Cow;

use testcontainers::core::{ContainerPort, ContainerState, ExecCommand, WaitFor};
use testcontainers::{ContainerAsync, Image};

/// The port runnel listens on inside the container.
pub const KAFKA_PORT: ContainerPort = ContainerPort::Tcp(9092);
/// The broker's ready line (stdout), printed once it serves.
pub const READY_LINE: &str = "runnel ready: listening on";
const ADVERTISED_LISTENER_FILE: &str = "/tmp/runnel-advertised-listener";

/// The runnel image, `runnel:dev` by default (or `$RUNNEL_IMAGE`, `name:tag`).
#[derive(Debug, Clone)]
pub struct Runnel {
    name: String,
    tag: String,
    env: Vec<(String, String)>,
}

impl Default for Runnel {
    fn default() -> Self {
        let image = std::env::var("RUNNEL_IMAGE").unwrap_or_else(|_| "runnel:dev".to_owned());
        let (name, tag) = image.rsplit_once(':').unwrap_or((image.as_str(), "latest"));
        Runnel { name: name.to_owned(), tag: tag.to_owned(), env: Vec::new() }
    }
}

impl Runnel {
    /// Another image, e.g. `Runnel::image("ghcr.io/x/runnel", "0.1.0")`.
    pub fn image(name: impl Into<String>, tag: impl Into<String>) -> Self {
        Runnel { name: name.into(), tag: tag.into(), env: Vec::new() }
    }

    /// A broker setting as its `RUNNEL_*` variable, e.g. `.with_setting("NUM_PARTITIONS", "3")`.
    pub fn with_setting(mut self, name: &str, value: impl Into<String>) -> Self {
        self.env.push((format!("RUNNEL_{name}"), value.into()));
        self
    }
}

impl Image for Runnel {
    fn name(&self) -> &str {
        &self.name
    }

    fn tag(&self) -> &str {
        &self.tag
    }

    fn ready_conditions(&self) -> Vec<WaitFor> {
        vec![WaitFor::message_on_stdout(READY_LINE)]
    }

    fn env_vars(&self) -> impl IntoIterator<Item = (impl Into<Cow<'_, str>>, impl Into<Cow<'_, str>>)> {
        let mut env: Vec<(Cow<'_, str>, Cow<'_, str>)> =
            vec![("RUNNEL_ADVERTISED_LISTENER_FILE".into(), ADVERTISED_LISTENER_FILE.into())];
        env.extend(self.env.iter().map(|(k, v)| (k.as_str().into(), v.as_str().into())));
        env
    }

    fn expose_ports(&self) -> &[ContainerPort] {
        &[KAFKA_PORT]
    }

    fn exec_before_ready(&self, cs: ContainerState) -> testcontainers::core::error::Result<Vec<ExecCommand>> {
        let advertised = format!("{}:{}", cs.host(), cs.host_port_ipv4(KAFKA_PORT)?);
        // Written whole, then renamed: the entrypoint never reads half a line.
        let script = format!("printf '%s' '{advertised}' > {f}.tmp && mv {f}.tmp {f}", f = ADVERTISED_LISTENER_FILE);
        Ok(vec![ExecCommand::new(["sh", "-c", script.as_str()])])
    }
}

/// `host:port` for a client's `bootstrap.servers`: the published port on the Docker host.
pub async fn bootstrap_servers(container: &ContainerAsync<Runnel>) -> testcontainers::core::error::Result<String> {
    Ok(format!("{}:{}", container.get_host().await?, container.get_host_port_ipv4(KAFKA_PORT).await?))
}
