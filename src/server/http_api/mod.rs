//! The HTTP API on the admin listener: produce, create topics, watermarks, and consumer
//! groups whose HTTP members are real classic-protocol members of the group coordinator.
//! Handlers call the broker's layers as the Kafka handlers do (the replica manager, the
//! group coordinator, the controller); nothing goes through a Kafka connection.
//!
//! * [`produce`]: `POST /topics/{topic}/messages` ([`produce_body`], [`partitioner`],
//!   [`batch`]).
//! * [`topics`]: `POST /topics`, `GET /topics/{topic}/partitions/{n}/watermark`.
//! * [`groups`], [`poll`]: join, poll, commit; [`members`] and [`member_task`]: the
//!   HTTP members and their heartbeat task.
//! * [`views`]: `GET /cluster`, `GET /topics`, `GET /consumer-groups`,
//!   `GET /consumer-groups/{group}`; [`records`]: browsing a partition's records.
//! * [`console`]: the web console at `/`, built on the routes above.
//! * [`openapi`]: `GET /openapi.json`. [`json`], [`error`]: request parsing and the
//!   `{error, field, message}` shape of every refusal.
//!
//! Bodies are limited to [`MAX_BODY_BYTES`]; every number a client gives that sizes work
//! (records per request, poll wait and bytes) is capped.

pub mod batch;
pub mod console;
pub mod error;
pub mod groups;
pub mod json;
pub mod member_task;
pub mod members;
pub mod openapi;
pub mod partitioner;
pub mod poll;
pub mod produce;
pub mod produce_body;
pub mod records;
pub mod topics;
pub mod views;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter};
use axum::Router;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::protocol::Ctx;

/// The largest request body: 1000 records of about 16 KiB.
pub const MAX_BODY_BYTES: usize = 16 << 20;

pub struct ApiState {
    pub ctx: Arc<Ctx>,
    pub members: Arc<members::Members>,
    pub keyless: partitioner::KeylessPartitioner,
}

/// A router that remembers what it routes, so a test can hold the OpenAPI document to it.
pub struct Routes<S> {
    pub router: Router<S>,
    pub listed: Vec<(Method, &'static str)>,
}

impl<S: Clone + Send + Sync + 'static> Default for Routes<S> {
    fn default() -> Self {
        Routes { router: Router::new(), listed: Vec::new() }
    }
}

impl<S: Clone + Send + Sync + 'static> Routes<S> {
    pub fn add<H: Handler<T, S>, T: 'static>(mut self, method: Method, path: &'static str, handler: H) -> Self {
        let filter = MethodFilter::try_from(method.clone()).expect("a standard method");
        self.router = self.router.route(path, on(filter, handler));
        self.listed.push((method, path));
        self
    }
}

pub fn api_routes() -> Routes<Arc<ApiState>> {
    Routes::default()
        .add(Method::GET, "/", console::index)
        .add(Method::GET, "/console/console.js", console::script)
        .add(Method::GET, "/console/console.css", console::style)
        .add(Method::GET, "/openapi.json", openapi_json)
        .add(Method::GET, "/cluster", views::cluster)
        .add(Method::GET, "/topics", views::topics)
        .add(Method::POST, "/topics", topics::create)
        .add(Method::POST, "/topics/{topic}/messages", produce::handle)
        .add(Method::GET, "/topics/{topic}/partitions/{n}/watermark", topics::watermark)
        .add(Method::GET, "/topics/{topic}/partitions/{n}/records", records::handle)
        .add(Method::GET, "/consumer-groups", views::groups)
        .add(Method::GET, "/consumer-groups/{group}", views::group)
        .add(Method::POST, "/consumer-groups/{group}/join", groups::join)
        .add(Method::GET, "/consumer-groups/{group}/poll", poll::handle)
        .add(Method::POST, "/consumer-groups/{group}/commit", groups::commit)
}

/// The API's routes with their state; HTTP members' tasks stop on `shutdown`.
pub fn router(ctx: Arc<Ctx>, shutdown: broadcast::Receiver<()>) -> Router {
    let state =
        Arc::new(ApiState { ctx, members: Arc::new(members::Members::new(shutdown)), keyless: Default::default() });
    api_routes().router.layer(DefaultBodyLimit::max(MAX_BODY_BYTES)).with_state(state)
}

pub fn json_response(status: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

async fn openapi_json() -> Response {
    json_response(StatusCode::OK, &openapi::document())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route the listener serves is described in `/openapi.json`, with its method.
    #[test]
    fn every_route_is_in_the_openapi_document() {
        let doc = openapi::document();
        let routes = crate::server::http::listed_routes();
        assert!(routes.len() >= 10, "{routes:?}");
        for (method, path) in routes {
            let m = method.as_str().to_ascii_lowercase();
            assert!(doc["paths"][path][&m].is_object(), "{method} {path} is not in the OpenAPI document");
        }
        // And nothing else is.
        let described: usize = doc["paths"].as_object().unwrap().values().map(|p| p.as_object().unwrap().len()).sum();
        assert_eq!(described, crate::server::http::listed_routes().len());
    }
}
