//! The HTTP listener's accept loop: HTTP/1 connections served by hyper, each holding one
//! of a bounded number of slots, each given [`HEADER_READ_TIMEOUT`] to send a request's
//! headers. (axum's `serve` has neither: ~20,100 stalled connections took every
//! descriptor of the process, and the log dirs went offline on EMFILE.) At the bound,
//! new connections wait in the kernel's backlog until a slot frees, with a log line and
//! `http_connection_limit_reached_total`; scrapes and health checks of a full listener
//! wait instead of failing the process.
//!
//! Shutdown stops accepting, lets each connection finish the request it is serving
//! (hyper's graceful shutdown closes idle keep-alive connections at once) and returns
//! when the last one is closed; the broker bounds that wait.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch, Semaphore};
use tokio::task::JoinSet;
use tower::ServiceExt;

/// How long a client has to send a request's headers, the first request's from the
/// connection's start and each next one's from its first byte (hyper's
/// `header_read_timeout`). A connection idle between requests is closed by the same
/// timer (hyper starts it when it waits for the next request).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The HTTP listener's connection bound, shared with `/metrics`.
#[derive(Debug)]
pub struct HttpSlots {
    slots: Arc<Semaphore>,
    limit: usize,
    limit_reached: AtomicU64,
}

impl HttpSlots {
    pub fn new(limit: usize) -> Arc<HttpSlots> {
        let limit = limit.max(1);
        Arc::new(HttpSlots { slots: Arc::new(Semaphore::new(limit)), limit, limit_reached: AtomicU64::new(0) })
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// HTTP connections open now.
    pub fn open(&self) -> usize {
        self.limit - self.slots.available_permits()
    }

    /// How many times a connection had to wait for a slot.
    pub fn limit_reached(&self) -> u64 {
        self.limit_reached.load(Ordering::Relaxed)
    }
}

/// Serves `app` on `listener` until `shutdown` fires, then waits for the open connections
/// to finish.
pub async fn serve(listener: TcpListener, app: Router, slots: Arc<HttpSlots>, mut shutdown: broadcast::Receiver<()>) {
    let (closing, closing_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    loop {
        let permit = match slots.slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let n = slots.limit_reached.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_power_of_two() {
                    tracing::warn!(
                        limit = slots.limit,
                        times = n,
                        "HTTP connection limit reached: new connections wait until one closes"
                    );
                }
                tokio::select! {
                    p = slots.slots.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    _ = shutdown.recv() => break,
                }
            }
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "HTTP accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.recv() => break,
        };
        let app = app.clone();
        let mut closing = closing_rx.clone();
        connections.spawn(async move {
            let _slot = permit;
            let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                app.clone().oneshot(req)
            });
            let mut http1 = hyper::server::conn::http1::Builder::new();
            http1.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
            let conn = http1.serve_connection(TokioIo::new(stream), service).with_upgrades();
            tokio::pin!(conn);
            let closed = async move {
                let _ = closing.wait_for(|c| *c).await;
            };
            let result = tokio::select! {
                r = conn.as_mut() => r,
                () = closed => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
            }
        });
        // Finished connections are reaped as new ones come.
        while connections.try_join_next().is_some() {}
    }
    let _ = closing.send(true);
    while connections.join_next().await.is_some() {}
}
