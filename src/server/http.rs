//! The HTTP listener (`--http-listen`, default 127.0.0.1:9644):
//!
//! * `GET /health`: 200 while the process runs.
//! * `GET /ready`: 200 while the broker serves Kafka clients (started, not shutting
//!   down, and in a cluster registered and unfenced by the controller quorum); 503 with
//!   the reason otherwise.
//! * `GET /metrics`: the Prometheus text format ([`super::metrics`]).
//! * The HTTP API ([`super::http_api`]): produce, topics, consumer groups,
//!   `/openapi.json`, and the web console at `/`.
//!
//! Anything else is a 404 (unknown path) or 405 (wrong method); malformed HTTP is
//! answered 400 by hyper. The listener is bound at start, before the slower parts, so
//! a busy port fails the start at once; it is served from then on (`/ready` says 503
//! until the broker serves) and stops with the broker's shutdown broadcast.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use super::connections::ConnectionTable;
use super::http_api::Routes;
use super::http_serve::HttpSlots;
use crate::protocol::Ctx;

/// What the handlers read.
pub struct HttpState {
    ctx: Arc<Ctx>,
    /// Set once the broker serves Kafka clients; cleared when its shutdown begins.
    serving: Arc<AtomicBool>,
    registry: Registry,
    slots: Arc<HttpSlots>,
}

impl HttpState {
    pub fn new(
        ctx: Arc<Ctx>,
        connections: Arc<ConnectionTable>,
        serving: Arc<AtomicBool>,
        slots: Arc<HttpSlots>,
    ) -> HttpState {
        let registry = super::metrics::registry(ctx.clone(), connections, slots.clone());
        HttpState { ctx, serving, registry, slots }
    }

    /// `Err(reason)` while the broker should not get client traffic.
    fn readiness(&self) -> Result<(), &'static str> {
        if !self.serving.load(Ordering::Acquire) {
            return Err("the broker is starting or shutting down");
        }
        if self.ctx.controller.is_clustered() && !self.ctx.image().broker_alive(self.ctx.config.node_id) {
            return Err("not registered or fenced by the controller quorum");
        }
        Ok(())
    }
}

fn base_routes() -> Routes<Arc<HttpState>> {
    Routes::default().add(Method::GET, "/health", health).add(Method::GET, "/ready", ready).add(
        Method::GET,
        "/metrics",
        metrics,
    )
}

/// Every (method, path) the listener routes.
pub fn listed_routes() -> Vec<(Method, &'static str)> {
    let mut all = base_routes().listed;
    all.extend(super::http_api::api_routes().listed);
    all
}

/// Serves `listener` until `shutdown` fires (see [`super::http_serve`]).
pub fn spawn(listener: TcpListener, state: Arc<HttpState>, shutdown: broadcast::Receiver<()>) -> JoinHandle<()> {
    let api = super::http_api::router(state.ctx.clone(), shutdown.resubscribe());
    let slots = state.slots.clone();
    let app = base_routes().router.with_state(state).merge(api);
    tokio::spawn(super::http_serve::serve(listener, app, slots, shutdown))
}

/// The bound address of `listener` (port 0 resolved).
pub fn bound(listener: &TcpListener) -> std::io::Result<SocketAddr> {
    listener.local_addr()
}

async fn health() -> &'static str {
    "ok\n"
}

async fn ready(State(state): State<Arc<HttpState>>) -> Response {
    match state.readiness() {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {reason}\n")).into_response(),
    }
}

/// Rendered on a blocking thread: it walks every local partition.
async fn metrics(State(state): State<Arc<HttpState>>) -> Response {
    let rendered = tokio::task::spawn_blocking(move || super::metrics::render(&state.registry)).await;
    match rendered {
        Ok(Ok(text)) => {
            ([(header::CONTENT_TYPE, prometheus_client::encoding::prometheus_text::CONTENT_TYPE)], text).into_response()
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "cannot render metrics\n").into_response(),
    }
}
