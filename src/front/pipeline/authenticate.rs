//! Step 3: who is calling. The route's authenticator (API keys, bearer JWTs
//! with `[auth.oauth]`, or anonymous without `[auth]`) sets
//! [`RequestCx::principal`]; every 401 (and the 403 of a token without the
//! route's scopes) carries the `WWW-Authenticate` challenge.

use std::sync::Arc;

use http::header;

use super::{Halt, RequestCx, Step};
use crate::front::auth::Authenticator;
use crate::front::client_cert::CertPrincipal;
use crate::protocol::IntoReject;

pub struct Authenticate {
    authenticator: Arc<dyn Authenticator>,
}

impl Authenticate {
    pub fn new(authenticator: Arc<dyn Authenticator>) -> Self {
        Self { authenticator }
    }

    /// A request with no credentials of its own, on a connection whose
    /// client certificate names a principal (`client_principal`), is that
    /// principal. Credentials sent with it win: a bad token is refused,
    /// never replaced by the certificate.
    fn by_certificate(cx: &mut RequestCx) -> bool {
        if !cx.head.headers.contains_key(header::AUTHORIZATION)
            && let Some(cert) = cx.head.extensions.get::<CertPrincipal>()
        {
            cx.principal = (*cert.0).clone();
            return true;
        }
        false
    }
}

#[async_trait::async_trait]
impl Step for Authenticate {
    /// Without `[auth]` every caller is the anonymous one: nothing to wait for.
    fn now(&self, cx: &mut RequestCx) -> Option<Result<(), Halt>> {
        if !self.authenticator.is_anonymous() {
            return None;
        }
        if !Self::by_certificate(cx) {
            cx.principal = crate::protocol::Principal::anonymous();
        }
        Some(Ok(()))
    }

    async fn on_request(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        if Self::by_certificate(cx) {
            return Ok(());
        }
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
