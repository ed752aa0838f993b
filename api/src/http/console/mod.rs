//! The web console at `/console`: one page of plain HTML, CSS and JavaScript embedded in the binary
//! (`include_str!`; nothing fetched from elsewhere, a Content-Security-Policy allowing only this origin), which
//! drives the `/v1` API from the browser with the API key the user signs in with (kept in the tab's
//! `sessionStorage` only), and [`sql`], the one call of its own: a query run on a branch (or a branch as of a
//! point in time) through this process's PostgreSQL listener, for the console's SQL box and its restore preview.
//!
//! The page needs no route besides these: everything else it shows comes from `/v1`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use super::AppState;

mod sql;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");
const ICON_SVG: &str = include_str!("assets/icon.svg");

/// Only this origin: no inline script, no other host, not framed by another site.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/// The console's routes, merged into the API's router.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/console",
            get(|| async { asset(INDEX_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/console/",
            get(|| async { asset(INDEX_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/console/app.js",
            get(|| async { asset(APP_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/console/app.css",
            get(|| async { asset(APP_CSS, "text/css; charset=utf-8") }),
        )
        .route("/console/icon.svg", get(|| async { asset(ICON_SVG, "image/svg+xml") }))
        .route("/console/sql", post(sql::run))
}

/// An embedded file with its type and the console's security headers. `no-cache`: a new binary's page is
/// never mixed with an old script.
fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_assets() {
        for asset in ["app.js", "app.css", "icon.svg"] {
            assert!(INDEX_HTML.contains(&format!("/console/{asset}")), "{asset}");
        }
        for text in [INDEX_HTML, APP_JS, APP_CSS, ICON_SVG] {
            // The SVG namespace is a name, not a fetch.
            let text = text.replace("http://www.w3.org/2000/svg", "");
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "no other origin"
            );
        }
        assert!(
            !INDEX_HTML.contains("<script>"),
            "no inline script (the policy forbids it)"
        );
        assert!(
            !INDEX_HTML.contains("style="),
            "no inline style (the policy forbids it)"
        );
    }
}
