//! Step 5: the body, read with two bounds. A declared `Content-Length` over
//! `max_body_bytes` is refused before anything is read; a body that turns out
//! longer is cut off at the bound while streaming, never buffered whole. The
//! whole body must arrive within `body_read_timeout` (a total, not per read,
//! so a trickle of one byte a second is cut off too); a client that announces
//! more than it sends, or trickles, gets 408 `body_timeout`.

use std::time::Duration;

use bytes::BytesMut;
use http::header;
use http_body_util::BodyExt;

use super::{Halt, RequestCx, Step};
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
        cx.bytes = tokio::time::timeout(self.timeout, self.read(body))
            .await
            .map_err(|_| self.too_slow())??;
        Ok(())
    }
}

impl ReadBody {
    async fn read(&self, mut body: super::RequestBody) -> Result<bytes::Bytes, Halt> {
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
                bytes.extend_from_slice(&data);
            }
        }
        Ok(bytes.freeze())
    }
}
