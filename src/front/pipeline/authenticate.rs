//! Step 3: who is calling. The route's authenticator (API keys, bearer JWTs
//! with `[auth.oauth]`, or anonymous without `[auth]`) sets
//! [`RequestCx::principal`]; every 401 (and the 403 of a token without the
//! route's scopes) carries the `WWW-Authenticate` challenge.

use std::sync::Arc;

use http::header;

use super::{Halt, RequestCx, Step};
use crate::front::auth::Authenticator;
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
        let route = cx.route.path.as_str();
        match self
            .authenticator
            .authenticate(route, &cx.head.headers)
            .await
        {
            Ok(principal) => {
                cx.principal = principal;
                Ok(())
            }
            Err(e) => {
                let challenge = self.authenticator.challenge(route, &e);
                Err(Halt::refuse(None, e.into_reject())
                    .with_header(header::WWW_AUTHENTICATE, challenge))
            }
        }
    }
}
