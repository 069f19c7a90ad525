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
