//! Step 5: the body, read with a bound. A declared `Content-Length` over
//! `max_body_bytes` is refused before anything is read; a body that turns out
//! longer is cut off at the bound while streaming, never buffered whole.

use bytes::BytesMut;
use http::header;
use http_body_util::BodyExt;

use super::{Halt, RequestCx, Step};
use crate::protocol::{Reason, Reject};

pub struct ReadBody {
    max_bytes: usize,
}

impl ReadBody {
    pub fn new(max_bytes: usize) -> Self {
        Self { max_bytes }
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
        let Some(mut body) = cx.body.take() else {
            return Ok(());
        };
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
        cx.bytes = bytes.freeze();
        Ok(())
    }
}
