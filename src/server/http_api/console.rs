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

#[cfg(test)]
mod tests {
    use super::*;

    /// The page loads its script and style sheet from routes the listener serves.
    #[test]
    fn the_page_refers_to_served_assets_only() {
        let routes: Vec<&str> = crate::server::http::listed_routes().into_iter().map(|(_, p)| p).collect();
        for asset in ["/console/console.js", "/console/console.css"] {
            assert!(INDEX_HTML.contains(&format!("\"{asset}\"")), "{asset} is not loaded by the page");
            assert!(routes.contains(&asset), "{asset} is not routed");
        }
        assert!(
            !INDEX_HTML.contains("http://") && !INDEX_HTML.contains("https://"),
            "the page loads nothing from elsewhere"
        );
    }

    /// Broker data reaches the page as text only: the script never parses HTML.
    #[test]
    fn the_script_never_writes_html() {
        for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"] {
            assert!(!CONSOLE_JS.contains(sink), "console.js uses {sink}");
        }
        assert!(CSP.contains("script-src 'self'") && !CSP.contains("unsafe-inline"));
    }
}
