//! `GET /report` on the admin listener: the report page of
//! `redmark report --format html`, live from the audit log. The read is
//! bounded ([`MAX_READ_BYTES`] of the newest lines, on a blocking thread);
//! `?since=` takes the CLI's `--since` choices (`24h`, `7d`, an RFC 3339
//! time). Behind the same `Host` and `Origin` checks as every admin route.

use http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;

use super::Gateway;
use super::response::{self as body, Body};
use crate::telemetry::report::{self, By};
use crate::telemetry::suggest::Thresholds;

/// The most of the audit log one `/report` reads, newest lines first.
pub const MAX_READ_BYTES: u64 = 64 << 20;

/// The `since` query parameter, percent-decoded.
fn since_param(req: &Request<Incoming>) -> Option<String> {
    let query = req.uri().query()?;
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "since")
        .map(|(_, v)| v.into_owned())
}

pub async fn report(gw: &Gateway, req: &Request<Incoming>) -> Response<Body> {
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return body::text(StatusCode::METHOD_NOT_ALLOWED, "GET /report\n");
    }
    let Some(path) = gw.engine.audit.path().map(std::path::Path::to_path_buf) else {
        return body::text(
            StatusCode::NOT_FOUND,
            "no audit log to report on: set [audit] path to a file\n",
        );
    };
    let since = match since_param(req)
        .map(|s| report::parse_since(&s, std::time::SystemTime::now()))
        .transpose()
    {
        Ok(s) => s,
        Err(e) => return body::text(StatusCode::BAD_REQUEST, &format!("{e}\n")),
    };
    let page = tokio::task::spawn_blocking(move || {
        let files = report::audit_files(&[path]);
        let (questions, skipped, truncated) = report::read_tail(&files, since, MAX_READ_BYTES)?;
        let mut r = report::build(
            &questions,
            By::Tool,
            since,
            files,
            skipped,
            &Thresholds::default(),
        )?;
        r.truncated = truncated;
        report::render(&r, report::Format::Html)
    })
    .await;
    match page {
        Ok(Ok(html)) => {
            let mut resp = body::text(StatusCode::OK, &html);
            let headers = resp.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            // Nothing to fetch, nothing to run: say so to the browser.
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'"),
            );
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            resp
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "/report could not read the audit log");
            body::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the audit log could not be read\n",
            )
        }
        Err(_) => body::text(StatusCode::INTERNAL_SERVER_ERROR, "the report failed\n"),
    }
}
