//! One configured route: the path a client posts to, the upstream pool and
//! catalog behind it, its policy, and how its results are stamped. Built by
//! the composition step (`app`); used by the operation engine and the front.

use std::sync::Arc;
use std::time::Duration;

use crate::config::MissingCapability;
use crate::limits::RouteLimits;
use crate::policy::reload::PolicyHandle;
use crate::protocol::Principal;
use crate::protocol::profile::Profile;
use crate::protocol::shape::{CacheScope, Stamp};
use crate::upstream::UpstreamError;
use crate::upstream::catalog::Catalog;
use crate::upstream::native::NativeUpstream;
use crate::upstream::pool::{Lease, RoutePool};

pub struct Route {
    pub name: Arc<str>,
    pub path: String,
    pub pool: Arc<RoutePool>,
    /// The stateless 2026-07-28 side, and which side this route's server speaks.
    pub native: Arc<NativeUpstream>,
    pub catalog: Arc<Catalog>,
    pub cache_ttl: Duration,
    pub cache_scope: CacheScope,
    /// Always a loaded policy: a route whose policy cannot be loaded does not start.
    pub policy: Arc<PolicyHandle>,
    pub on_missing_capability: MissingCapability,
    /// `shape_questions`: forms are narrowed by the policy's field rules.
    pub shape_questions: bool,
    /// `[route.rate_limit]` and the policy's per-tool rates.
    pub limits: Arc<RouteLimits>,
    /// `[route.tasks]`: set, the route makes tasks of its legacy server's
    /// calls and offers the tasks extension; unset, it serves none.
    pub tasks: Option<crate::config::TasksConfig>,
}

impl Route {
    /// How results of this route are stamped, with the session's `serverInfo`.
    pub fn stamp(&self, server_info: &Arc<crate::protocol::shape::ServerInfo>) -> Stamp {
        Stamp {
            server_info: Arc::clone(server_info),
            ttl_ms: u64::try_from(self.cache_ttl.as_millis()).unwrap_or(u64::MAX),
            scope: self.cache_scope,
        }
    }

    /// Leases a session for this principal and profile, remembering the
    /// server's `initialize` answer for `server/discover`.
    pub async fn lease(
        &self,
        principal: &Principal,
        profile: Profile,
    ) -> Result<Lease, UpstreamError> {
        let lease = self.pool.acquire(&principal.name, profile).await?;
        let session = lease.session();
        // Once per session, not per lease: the catalog's lock and lookup
        // were a part of every call.
        if session.first_lease() {
            self.catalog.put_init(profile, &session.init);
        }
        Ok(lease)
    }
}

#[cfg(test)]
impl Route {
    /// A route whose server is never started (unit tests of steps that need no upstream).
    pub fn detached(name: &str) -> Arc<Route> {
        Self::detached_with(
            name,
            &crate::config::RateLimitConfig::default(),
            crate::policy::Policy::default(),
        )
    }

    /// [`Route::detached`] with rate limits and a policy.
    pub fn detached_with(
        name: &str,
        limits: &crate::config::RateLimitConfig,
        policy: crate::policy::Policy,
    ) -> Arc<Route> {
        use crate::config::{PoolConfig, UpstreamConfig, UpstreamTarget};
        let upstream: UpstreamConfig = toml::from_str("url = \"http://127.0.0.1:9/mcp\"")
            .unwrap_or_else(|e| panic!("upstream config: {e}"));
        let name: Arc<str> = Arc::from(name);
        let metrics = Arc::new(crate::telemetry::metrics::Metrics::new());
        let pool = RoutePool::new(
            name.clone(),
            UpstreamTarget::Http {
                url: "http://127.0.0.1:9/mcp".into(),
                headers: Default::default(),
            },
            upstream,
            PoolConfig::default(),
            crate::upstream::client::for_tests(),
            metrics.clone(),
        );
        let native = NativeUpstream::new(
            name.clone(),
            None,
            &toml::from_str("url = \"http://127.0.0.1:9/mcp\"")
                .unwrap_or_else(|e| panic!("upstream config: {e}")),
            crate::upstream::client::for_tests(),
            metrics.clone(),
        );
        Arc::new(Route {
            name: name.clone(),
            path: "/mcp".into(),
            native,
            catalog: Catalog::new(&pool, Duration::from_secs(60)),
            pool,
            cache_ttl: Duration::from_secs(60),
            cache_scope: CacheScope::Public,
            policy: PolicyHandle::fixed(policy),
            on_missing_capability: MissingCapability::Error,
            shape_questions: true,
            limits: Arc::new(RouteLimits::new(name.clone(), limits, metrics)),
            tasks: None,
        })
    }
}
