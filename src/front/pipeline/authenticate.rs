//! Step 3: who is calling. The route's authenticator (API keys, or anonymous
//! without `[auth]`) sets [`RequestCx::principal`]; every 401 carries the
//! `WWW-Authenticate` challenge.

use std::sync::Arc;

use http::{HeaderValue, header};

use super::{Halt, RequestCx, Step};
use crate::front::auth::{Authenticator, CHALLENGE};
use crate::protocol::IntoReject;

pub struct Authenticate {
    authenticator: Arc<dyn Authenticator>,
}

impl Authenticate {
    pub fn new(authenticator: Arc<dyn Authenticator>) -> Self {
        Self { authenticator }
    }
}

#[async_trait::async_trait]
impl Step for Authenticate {
    async fn on_request(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        match self.authenticator.authenticate(&cx.head.headers).await {
            Ok(principal) => {
                cx.principal = principal;
                Ok(())
            }
            Err(e) => Err(Halt::refuse(None, e.into_reject()).with_header(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(CHALLENGE),
            )),
        }
    }
}
