//! The floor under redmark's passthrough: a bare reverse proxy on the same
//! stack (hyper-util's server and pooled legacy client, tokio, jemalloc),
//! doing nothing but relay the POST and its answer. No JSON, no policy, no
//! telemetry. What it costs next to nginx is what the stack costs before
//! redmark does any work of its own (benches/WHERE_THE_TIME_GOES.md).
//!
//!   cargo run --release --example bench_floor -- LISTEN_PORT UPSTREAM_URL [loops]
//!
//! `loops`: one current-thread runtime per core, connections handed round
//! robin (as redmark's `[server] event_loops`); otherwise one work-stealing
//! runtime.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpListener;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

type Upstream = Client<HttpConnector, Full<Bytes>>;

fn upstream() -> Upstream {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(256)
        .build(connector)
}

async fn relay(
    client: Upstream,
    url: Arc<http::Uri>,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let failed = |why: String| {
        let mut r = Response::new(Full::new(Bytes::from(why)));
        *r.status_mut() = StatusCode::BAD_GATEWAY;
        r
    };
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return failed(e.to_string()),
    };
    let mut up = Request::post(url.as_ref().clone());
    for (name, value) in &parts.headers {
        if name != http::header::HOST && name != http::header::CONTENT_LENGTH {
            up = up.header(name, value);
        }
    }
    let up = match up.body(Full::new(body)) {
        Ok(r) => r,
        Err(e) => return failed(e.to_string()),
    };
    let resp = match client.request(up).await {
        Ok(r) => r,
        Err(e) => return failed(e.to_string()),
    };
    let (parts, body) = resp.into_parts();
    match body.collect().await {
        Ok(b) => Response::from_parts(parts, Full::new(b.to_bytes())),
        Err(e) => failed(e.to_string()),
    }
}

async fn serve(stream: tokio::net::TcpStream, client: Upstream, url: Arc<http::Uri>) {
    let service = service_fn(move |req| {
        let client = client.clone();
        let url = url.clone();
        async move { Ok::<_, Infallible>(relay(client, url, req).await) }
    });
    let _ = Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().ok_or("LISTEN_PORT")?.parse()?;
    let url: Arc<http::Uri> = Arc::new(args.next().ok_or("UPSTREAM_URL")?.parse()?);
    let loops = args.next().as_deref() == Some("loops");
    let accept = tokio::runtime::Runtime::new()?;
    if !loops {
        return accept.block_on(async move {
            let listener = TcpListener::bind(("127.0.0.1", port)).await?;
            let client = upstream();
            loop {
                let (stream, _) = listener.accept().await?;
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve(stream, client.clone(), url.clone()));
            }
        });
    }
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let handles: Vec<tokio::runtime::Handle> = (0..cores)
        .map(|_| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let handle = rt.handle().clone();
            std::thread::spawn(move || rt.block_on(std::future::pending::<()>()));
            Ok(handle)
        })
        .collect::<std::io::Result<_>>()?;
    // One pool per loop: a pooled connection is driven by the loop that made it.
    let clients: Vec<Upstream> = handles
        .iter()
        .map(|h| {
            let _entered = h.enter();
            upstream()
        })
        .collect();
    let next = AtomicUsize::new(0);
    accept.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let i = next.fetch_add(1, Ordering::Relaxed) % handles.len();
            let std = stream.into_std()?;
            let (client, url) = (clients[i].clone(), url.clone());
            handles[i].spawn(async move {
                if let Ok(stream) = tokio::net::TcpStream::from_std(std) {
                    serve(stream, client, url).await;
                }
            });
        }
    })
}
