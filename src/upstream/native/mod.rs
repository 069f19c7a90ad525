//! The native side: servers that speak the stateless 2026-07-28 protocol
//! themselves. Every request carries its own `_meta` (protocol version, the
//! client's capabilities and info) and, over HTTP, the headers the transport
//! requires; nothing is initialized and no session is held. Over stdio one
//! process serves every request at once, answers matched by id.
//!
//! [`NativeUpstream`] also owns detection (`[route.upstream] protocol`):
//! `auto` asks `server/discover` once and falls back to the legacy pool when
//! the server does not speak it; the answer is cached per route and
//! forgotten when the server stops answering or starts refusing, so a
//! restarted (or upgraded, or downgraded) server is detected again.

pub mod headers;
mod http;
mod stdio;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::UpstreamError;
use crate::config::{UpstreamConfig, UpstreamProtocol, UpstreamTarget};
use crate::jsonrpc::{ErrorObject, code};
use crate::protocol::meta;
use crate::protocol::shape::ServerInfo;
use crate::telemetry::metrics::Metrics;
use crate::upstream::lock;

/// The longest `auto` waits for an answer to `server/discover` (bounded
/// further by `init_timeout`); no answer means a legacy server.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// The revision a native upstream speaks.
pub const NATIVE_VERSION: &str = "2026-07-28";

/// What redmark knows of a route's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detected {
    /// Not asked yet (or forgotten after a failure).
    Unknown,
    Native,
    Legacy,
}

impl Detected {
    pub fn label(self) -> &'static str {
        match self {
            Detected::Unknown => "unknown",
            Detected::Native => NATIVE_VERSION,
            Detected::Legacy => "legacy",
        }
    }
}

enum Transport {
    Http(http::HttpNative),
    Stdio(stdio::StdioNative),
}

/// One stateless request: its method, params (with `_meta`) and the values
/// its HTTP headers mirror.
pub struct NativeRequest<'a> {
    pub method: &'a str,
    pub params: Value,
    /// `Mcp-Name`: the tool or prompt name, or the resource URI.
    pub name: Option<&'a str>,
    /// `Mcp-Param-{Name}` headers (already encoded), from the tool's `x-mcp-header`s.
    pub param_headers: Vec<(String, String)>,
    pub timeout: Duration,
    /// Where the notifications the server sends on this request's own
    /// response stream go (`{"method", "params"}`), as they arrive; never
    /// waited on: a full queue drops them. Over stdio only progress (which
    /// names its request's token) can be told apart by request.
    pub notify: Option<tokio::sync::mpsc::Sender<Value>>,
}

/// The `serverInfo` a `server/discover` answer carries (`null` when it
/// carries none), made ready to write.
fn server_info_in(result: &Value) -> Arc<ServerInfo> {
    let info = result
        .get("_meta")
        .and_then(|m| m.get(meta::SERVER_INFO))
        .cloned()
        .unwrap_or(Value::Null);
    Arc::new(ServerInfo::new(info))
}

pub struct NativeUpstream {
    route: Arc<str>,
    setting: UpstreamProtocol,
    transport: Option<Transport>,
    detected: Mutex<Detected>,
    /// Why the last request failed to reach the server; `None` after one that did.
    last_error: Mutex<Option<String>>,
    /// The `serverInfo` of the server's last `server/discover` answer, made
    /// ready to write when the answer came (every native call stamps it).
    server_info: Mutex<Option<Arc<ServerInfo>>>,
    /// At most one `server/discover` probe at a time.
    probing: tokio::sync::Mutex<()>,
    init_timeout: Duration,
    metrics: Arc<Metrics>,
}

impl NativeUpstream {
    /// `target` is `None` for a route whose transport is supplied in process
    /// (tests): such a route is always legacy.
    pub fn new(
        route: Arc<str>,
        target: Option<&UpstreamTarget>,
        config: &UpstreamConfig,
        http: crate::upstream::client::HttpClient,
        metrics: Arc<Metrics>,
    ) -> Arc<Self> {
        let setting = if target.is_none() {
            UpstreamProtocol::Legacy
        } else {
            config.protocol
        };
        let transport = match target {
            Some(UpstreamTarget::Http { url, headers }) => Some(Transport::Http(
                http::HttpNative::new(http, url, headers, config.max_message_bytes),
            )),
            Some(UpstreamTarget::Stdio {
                program,
                args,
                env,
                cwd,
            }) => Some(Transport::Stdio(stdio::StdioNative::new(
                route.clone(),
                program.clone(),
                args.clone(),
                env.clone(),
                cwd.clone(),
                config.max_message_bytes,
            ))),
            None => None,
        };
        let initial = match setting {
            UpstreamProtocol::Auto => Detected::Unknown,
            UpstreamProtocol::Native => Detected::Native,
            UpstreamProtocol::Legacy => Detected::Legacy,
        };
        let this = Arc::new(Self {
            route,
            setting,
            transport,
            detected: Mutex::new(initial),
            server_info: Mutex::new(None),
            last_error: Mutex::new(Some("not asked yet".into())),
            probing: tokio::sync::Mutex::new(()),
            init_timeout: config.init_timeout,
            metrics,
        });
        this.publish(initial);
        this
    }

    /// What is known now, without asking.
    pub fn detected(&self) -> Detected {
        *lock(&self.detected)
    }

    fn publish(&self, d: Detected) {
        for other in [Detected::Unknown, Detected::Native, Detected::Legacy] {
            self.metrics
                .set_upstream_protocol(&self.route, other.label(), other == d);
        }
    }

    fn set(&self, d: Detected) {
        let mut cur = lock(&self.detected);
        if *cur != d {
            tracing::info!(route = %self.route, protocol = d.label(), "upstream protocol");
            *cur = d;
            drop(cur);
            self.publish(d);
        }
    }

    /// Forgets an `auto` detection, so the next request asks again.
    pub fn forget(&self) {
        if self.setting == UpstreamProtocol::Auto {
            self.set(Detected::Unknown);
        }
    }

    /// Whether the route's server speaks 2026-07-28 (asking it first under `auto`).
    pub async fn is_native(&self) -> bool {
        match self.detected() {
            Detected::Native => true,
            Detected::Legacy => false,
            // Boxed: the probe's future is over 2 KiB and runs once per
            // route, while this one is awaited inline in the future of every
            // call (twice: the known-tool check and dispatch), which hyper
            // and tokio move by value.
            Detected::Unknown => Box::pin(self.probe()).await,
        }
    }

    /// Asks the server once, under `auto`, which protocol it speaks.
    async fn probe(&self) -> bool {
        let _one = self.probing.lock().await;
        if self.detected() != Detected::Unknown {
            return self.detected() == Detected::Native;
        }
        let found = match self.discover(self.init_timeout.min(PROBE_TIMEOUT)).await {
            Ok(Ok(result)) if speaks_native(&result) => Detected::Native,
            // A legacy server refuses a request before `initialize`, or never answers it.
            Ok(_) | Err(UpstreamError::Timeout(_)) => Detected::Legacy,
            Err(e) => {
                // Unreachable: the legacy path reports it (and we ask again next time).
                tracing::info!(route = %self.route, error = %e, "server/discover failed; using the legacy protocol for now");
                self.close();
                return false;
            }
        };
        if found == Detected::Legacy {
            // The legacy pool starts its own processes.
            self.close();
        }
        self.set(found);
        found == Detected::Native
    }

    /// `server/discover` with redmark's own `_meta` (no client behind it);
    /// its `serverInfo` is remembered ([`NativeUpstream::server_info`]).
    pub async fn discover(
        &self,
        timeout: Duration,
    ) -> Result<Result<Value, ErrorObject>, UpstreamError> {
        let out = self
            .send(NativeRequest {
                method: "server/discover",
                params: json!({"_meta": request_meta(&json!({}), None)}),
                name: None,
                param_headers: Vec::new(),
                timeout,
                notify: None,
            })
            .await;
        if let Ok(Ok(result)) = &out {
            *lock(&self.server_info) = Some(server_info_in(result));
        }
        out
    }

    /// A `subscriptions/listen` stream from the server (see
    /// [`http::HttpNative::listen`], [`stdio::StdioNative::listen`]); `None`
    /// for a route whose transport is supplied in process.
    pub async fn listen(
        &self,
        params: Value,
    ) -> Option<Result<tokio::sync::mpsc::Receiver<crate::jsonrpc::Message>, UpstreamError>> {
        match &self.transport {
            Some(Transport::Http(h)) => {
                let out = h.listen(params).await;
                if out.is_err() {
                    self.forget();
                }
                Some(out)
            }
            Some(Transport::Stdio(s)) => Some(s.listen(params).await),
            None => None,
        }
    }

    /// The server's `serverInfo`, from its last `server/discover` answer
    /// (`null` before one): read and made ready to write once per answer,
    /// not once per call.
    pub fn server_info(&self) -> Arc<ServerInfo> {
        static NONE: std::sync::LazyLock<Arc<ServerInfo>> =
            std::sync::LazyLock::new(|| Arc::new(ServerInfo::new(Value::Null)));
        lock(&self.server_info)
            .clone()
            .unwrap_or_else(|| NONE.clone())
    }

    /// One stateless request. A failure to reach the server, or a refusal
    /// that says it no longer speaks 2026-07-28, forgets the detection.
    pub async fn request(
        &self,
        req: NativeRequest<'_>,
    ) -> Result<Result<Value, ErrorObject>, UpstreamError> {
        let out = self.send(req).await;
        match &out {
            Err(_) => self.forget(),
            Ok(Err(e))
                if e.code == code::UNSUPPORTED_PROTOCOL_VERSION
                    || (e.code == code::METHOD_NOT_FOUND
                        && e.message.contains("server/discover")) =>
            {
                self.forget();
            }
            Ok(_) => {}
        }
        out
    }

    async fn send(
        &self,
        req: NativeRequest<'_>,
    ) -> Result<Result<Value, ErrorObject>, UpstreamError> {
        let timeout = req.timeout;
        let fut = async {
            match &self.transport {
                Some(Transport::Http(h)) => h.send(&req).await,
                Some(Transport::Stdio(s)) => {
                    s.send(req.method, req.params.clone(), req.notify.clone())
                        .await
                }
                None => Err(UpstreamError::Unavailable(
                    "this route's transport cannot speak 2026-07-28".into(),
                )),
            }
        };
        let out = tokio::time::timeout(timeout, fut)
            .await
            .unwrap_or(Err(UpstreamError::Timeout(timeout)));
        *lock(&self.last_error) = out.as_ref().err().map(ToString::to_string);
        out
    }

    /// Whether the last request reached the server (for `/readyz`).
    pub fn is_up(&self) -> bool {
        lock(&self.last_error).is_none()
    }

    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }

    /// Stops a stdio server's process (the gateway is shutting down).
    pub fn close(&self) {
        if let Some(Transport::Stdio(s)) = &self.transport {
            s.close();
        }
    }
}

/// Whether a `server/discover` result lists 2026-07-28.
fn speaks_native(result: &Value) -> bool {
    result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .is_some_and(|v| v.iter().any(|s| s.as_str() == Some(NATIVE_VERSION)))
}

/// The `_meta` of a request to a native server (spec 2026-07-28
/// basic/index.mdx "_meta": every request carries the protocol version, the
/// client's capabilities and its info): the client's own capabilities and
/// info, redmark's when it asks for itself.
pub fn request_meta(capabilities: &Value, client_info: Option<&Value>) -> Value {
    json!({
        meta::PROTOCOL_VERSION: NATIVE_VERSION,
        meta::CLIENT_CAPABILITIES: capabilities,
        meta::CLIENT_INFO: client_info.cloned().unwrap_or_else(|| json!({"name": "redmark", "version": env!("CARGO_PKG_VERSION")})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discover_results_that_list_the_revision_are_native() {
        assert!(speaks_native(
            &json!({"supportedVersions": ["2025-11-25", "2026-07-28"]})
        ));
        assert!(!speaks_native(
            &json!({"supportedVersions": ["2025-11-25"]})
        ));
        assert!(!speaks_native(&json!({})));
    }

    #[test]
    fn a_discover_answer_gives_its_server_info_ready_to_write() {
        let info = json!({"name": "s", "version": "1"});
        let found = server_info_in(&json!({"_meta": {meta::SERVER_INFO: info.clone()}}));
        assert_eq!(**found, info);
        assert_eq!(serde_json::to_value(&*found).unwrap(), info);
        assert_eq!(**server_info_in(&json!({})), Value::Null);
    }
}
