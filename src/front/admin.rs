//! The admin listener: `/healthz` (the process answers), `/readyz` (serving,
//! not shutting down, every upstream reachable: [`super::readiness`]) and `/metrics` (Prometheus text format).

use std::sync::Arc;

use http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;

use super::Gateway;
use super::response::{self as body, Body};

pub async fn handle(gw: Arc<Gateway>, req: Request<Incoming>) -> Response<Body> {
    match req.uri().path() {
        "/healthz" => body::text(StatusCode::OK, "ok\n"),
        "/readyz" => super::readiness::readyz(&gw).await,
        "/reload" => reload(&gw, req.method()),
        "/metrics" => {
            let mut resp = body::text(StatusCode::OK, &gw.metrics.render());
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            resp
        }
        _ => body::text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// `POST /reload`: the config file reloaded, with what changed (200) or why
/// nothing did (400). Served only on a loopback admin listener: anyone who
/// can reach it can reload.
fn reload(gw: &Gateway, method: &http::Method) -> Response<Body> {
    if method != http::Method::POST {
        return body::text(StatusCode::METHOD_NOT_ALLOWED, "POST /reload\n");
    }
    let Some(hook) = gw.reload.get() else {
        return body::text(
            StatusCode::FORBIDDEN,
            "reload is served only when the admin listener is on loopback (use SIGHUP)\n",
        );
    };
    match hook() {
        Ok(done) => body::json(StatusCode::OK, &done),
        Err(why) => body::json(
            StatusCode::BAD_REQUEST,
            &serde_json::json!({ "error": why, "running": "the running config stays in force" }),
        ),
    }
}
