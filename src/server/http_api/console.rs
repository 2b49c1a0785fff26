//! The web console at `/`: one HTML page, a script and a style sheet, embedded in the
//! binary (no CDN, no build step). The script reads the JSON API of this listener
//! (`/cluster`, `/topics`, `/consumer-groups`, the record browser's
//! `/topics/{topic}/partitions/{n}/records`) and writes with `POST /topics` and
//! `POST /topics/{topic}/messages`.
//!
//! Record contents are hostile input: the script only ever puts text into the page
//! (`textContent`, never HTML), and the page's Content-Security-Policy allows scripts
//! from this listener only, so a value that reads `<script>` stays text.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX_HTML: &str = include_str!("console/index.html");
const CONSOLE_JS: &str = include_str!("console/console.js");
const CONSOLE_CSS: &str = include_str!("console/console.css");

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; \
                   base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", CONSOLE_JS)
}

pub async fn style() -> Response {
    asset("text/css; charset=utf-8", CONSOLE_CSS)
}
