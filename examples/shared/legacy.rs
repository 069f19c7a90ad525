//! Makes an rmcp 3.11 handler look like a 2025-11-25 server on the wire,
//! shared by the example servers. rmcp answers `server/discover` (a
//! 2026-07-28 method) for every handler and can start an inline session
//! without `initialize`; a legacy server knows neither, so this wrapper
//! answers discover with method-not-found and requires `initialize` first.

use std::borrow::Cow;

use rmcp::model::{
    ClientNotification, ClientRequest, DiscoverRequestMethod, ProtocolVersion, ServerConfig,
    ServerResult,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, Service};

pub struct Legacy<H>(pub H);

impl<H: ServerHandler> Service<RoleServer> for Legacy<H> {
    async fn handle_request(
        &self,
        request: ClientRequest,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let initialized = ctx.peer.peer_info().is_some();
        match request {
            ClientRequest::DiscoverRequest(_) => {
                Err(ErrorData::method_not_found::<DiscoverRequestMethod>())
            }
            ClientRequest::InitializeRequest(_) | ClientRequest::PingRequest(_) => {
                self.0.handle_request(request, ctx).await
            }
            _ if initialized => self.0.handle_request(request, ctx).await,
            _ => {
                let first = "this server speaks MCP 2025-11-25: send `initialize` first";
                Err(ErrorData::invalid_request(first, None))
            }
        }
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        ctx: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.0.handle_notification(notification, ctx).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerHandler::get_info(&self.0)
    }

    // Must forward: the `Service` default would claim every version rmcp knows.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        ServerHandler::supported_protocol_versions(&self.0)
    }
}
