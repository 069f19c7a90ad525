//! Step 5: the body, read with two bounds. A declared `Content-Length` over
//! `max_body_bytes` is refused before anything is read; a body that turns out
//! longer is cut off at the bound while streaming, never buffered whole. The
//! whole body must arrive within `body_read_timeout` (a total, not per read,
//! so a trickle of one byte a second is cut off too); a client that announces
//! more than it sends, or trickles, gets 408 `body_timeout`.
//!
//! Every byte buffered is leased first from the connection's share of the
//! listener's body memory (a request extension,
//! [`ConnectionBudget`](crate::front::body_budget::ConnectionBudget)): one
//! HTTP/2 connection's concurrent streams, and all connections together,
//! cannot hold more than their bounds. A body that would go past one gets
//! 503 `body_memory_exhausted` at once; the lease lives in the request's
//! context ([`RequestCx::body_lease`]) and is given back with it.

use std::time::Duration;

use bytes::BytesMut;
use http::header;
use http_body_util::BodyExt;

use super::{Halt, RequestCx, Step};
use crate::front::body_budget::{ConnectionBudget, Exhausted, Lease};
use crate::protocol::{Reason, Reject};

pub struct ReadBody {
    max_bytes: usize,
    timeout: Duration,
}

impl ReadBody {
    pub fn new(max_bytes: usize, timeout: Duration) -> Self {
        Self { max_bytes, timeout }
    }

    fn too_slow(&self) -> Halt {
        Halt::refuse(
            None,
            Reject::new(
                Reason::BodyTimeout,
                format!("the request body did not arrive within {:?}", self.timeout),
            ),
        )
    }

    fn too_large(&self) -> Halt {
        Halt::refuse(
            None,
            Reject::new(
                Reason::BodyTooLarge,
                format!("the request body is larger than {} bytes", self.max_bytes),
            ),
        )
    }
}

#[async_trait::async_trait]
impl Step for ReadBody {
    async fn on_request(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        let declared = cx
            .head
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|n| n > self.max_bytes) {
            return Err(self.too_large());
        }
        let Some(body) = cx.body.take() else {
            return Ok(());
        };
        let mut lease = cx
            .head
            .extensions
            .get::<ConnectionBudget>()
            .map(|b| b.lease(self.max_bytes));
        cx.bytes = tokio::time::timeout(self.timeout, self.read(body, lease.as_mut()))
            .await
            .map_err(|_| self.too_slow())??;
        cx.body_lease = lease;
        Ok(())
    }
}

/// 503: the body would take request-body memory past a bound.
fn exhausted(why: Exhausted) -> Halt {
    Halt::refuse(
        None,
        Reject::new(
            Reason::BodyMemoryExhausted,
            format!("{why} are at their memory bound; send it again shortly"),
        )
        .with("scope", why.scope()),
    )
    .with_header(header::RETRY_AFTER, http::HeaderValue::from_static("1"))
}

impl ReadBody {
    async fn read(
        &self,
        mut body: super::RequestBody,
        mut lease: Option<&mut Lease>,
    ) -> Result<bytes::Bytes, Halt> {
        let mut bytes = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                Halt::refuse(
                    None,
                    Reject::new(
                        Reason::BodyUnreadable,
                        format!("could not read the request body: {e}"),
                    ),
                )
            })?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > self.max_bytes {
                    return Err(self.too_large());
                }
                if let Some(lease) = lease.as_deref_mut() {
                    lease.grow(data.len()).map_err(exhausted)?;
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(bytes.freeze())
    }
}
