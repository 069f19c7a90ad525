//! Rate limits of one route: governor's GCRA limiters per principal, per
//! route and per tool (`[route.rate_limit]`, a policy's `[tool.NAME] rate`),
//! and what a refused request is told (which limit, and when to come back).
//!
//! Retries (a `tools/call`, `prompts/get` or `resources/read` that carries
//! a `requestState`; see `ClientRequest::is_retry`) are counted in a bucket
//! of their own and by no other limit: they are a person answering a
//! question the server asked, and must never wait because a model called
//! fast. No other method has a retry, so no other request is exempt.
//! Memory stays bounded: keys whose bucket is full again are dropped every
//! [`SWEEP_EVERY`] checks.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use crate::config::{Rate, RateLimitConfig};
use crate::telemetry::metrics::Metrics;

/// Checks between two sweeps of idle keys.
pub const SWEEP_EVERY: u64 = 4096;

type Keyed<C> =
    RateLimiter<String, DashMapStateStore<String>, C, NoOpMiddleware<<C as Clock>::Instant>>;
type Direct<C> = RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// Which limit refused a request: `data.limit` and the metric's `scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    PerPrincipal,
    PerRoute,
    Tool,
    Retries,
}

impl Scope {
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::PerPrincipal => "per_principal",
            Scope::PerRoute => "per_route",
            Scope::Tool => "tool",
            Scope::Retries => "retries",
        }
    }
}

/// A request over a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    pub scope: Scope,
    pub rate: Rate,
    /// When one more request would be allowed.
    pub retry_after: Duration,
}

/// What one request is, as the limits see it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub principal: &'a str,
    /// Carries a `requestState`.
    pub retry: bool,
    /// A `tools/call` of a tool whose policy sets a rate.
    pub tool: Option<(&'a str, Rate)>,
}

struct Limit<L> {
    rate: Rate,
    limiter: L,
}

/// The limiters of one route.
pub struct RouteLimits<C: Clock = DefaultClock> {
    route: Arc<str>,
    clock: C,
    per_principal: Option<Limit<Keyed<C>>>,
    retries: Option<Limit<Keyed<C>>>,
    per_route: Option<Limit<Direct<C>>>,
    /// One limiter per tool that has a rate, replaced when a reload changes it.
    per_tool: DashMap<String, Arc<Limit<Keyed<C>>>>,
    checks: AtomicU64,
    metrics: Arc<Metrics>,
}

fn quota(rate: Rate, burst: Option<NonZeroU32>) -> Quota {
    let per = Quota::with_period(rate.interval()).unwrap_or_else(|| Quota::per_second(rate.count));
    per.allow_burst(burst.unwrap_or(rate.count))
}

impl RouteLimits {
    pub fn new(route: Arc<str>, config: &RateLimitConfig, metrics: Arc<Metrics>) -> Self {
        Self::with_clock(route, config, metrics, DefaultClock::default())
    }
}

impl<C: Clock + Clone> RouteLimits<C> {
    pub fn with_clock(
        route: Arc<str>,
        config: &RateLimitConfig,
        metrics: Arc<Metrics>,
        clock: C,
    ) -> Self {
        let keyed = |rate: Rate, burst| Limit {
            rate,
            limiter: RateLimiter::dashmap_with_clock(quota(rate, burst), clock.clone()),
        };
        let retries = config
            .retries
            .map(|rate| keyed(rate, None))
            .or_else(|| config.per_principal.map(|rate| keyed(rate, config.burst)));
        Self {
            route,
            per_principal: config.per_principal.map(|rate| keyed(rate, config.burst)),
            retries,
            per_route: config.per_route.map(|rate| Limit {
                rate,
                limiter: RateLimiter::direct_with_clock(quota(rate, None), clock.clone()),
            }),
            per_tool: DashMap::new(),
            checks: AtomicU64::new(0),
            metrics,
            clock,
        }
    }

    /// Counts the request against every limit that applies to it, in order
    /// (principal, tool, route); the first it is over refuses it.
    pub fn check(&self, request: Request<'_>) -> Result<(), Limited> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep();
        }
        let result = self.count(request);
        if let Err(limited) = &result {
            self.metrics
                .record_rate_limited(&self.route, limited.scope.as_str());
        }
        result
    }

    fn count(&self, request: Request<'_>) -> Result<(), Limited> {
        if request.retry {
            if let Some(limit) = &self.retries {
                self.keyed(limit, Scope::Retries, request.principal)?;
            }
            return Ok(());
        }
        if let Some(limit) = &self.per_principal {
            self.keyed(limit, Scope::PerPrincipal, request.principal)?;
        }
        if let Some((tool, rate)) = request.tool {
            let limit = self.tool_limit(tool, rate);
            self.keyed(&limit, Scope::Tool, request.principal)?;
        }
        if let Some(limit) = &self.per_route {
            limit
                .limiter
                .check()
                .map_err(|not_until| self.limited(Scope::PerRoute, limit.rate, &not_until))?;
        }
        Ok(())
    }

    fn keyed(&self, limit: &Limit<Keyed<C>>, scope: Scope, principal: &str) -> Result<(), Limited> {
        // The key is owned by the store; most requests find it there already.
        limit
            .limiter
            .check_key(&principal.to_owned())
            .map(|_| ())
            .map_err(|not_until| self.limited(scope, limit.rate, &not_until))
    }

    fn limited(
        &self,
        scope: Scope,
        rate: Rate,
        not_until: &governor::NotUntil<C::Instant>,
    ) -> Limited {
        Limited {
            scope,
            rate,
            retry_after: not_until.wait_time_from(self.clock.now()),
        }
    }

    fn tool_limit(&self, tool: &str, rate: Rate) -> Arc<Limit<Keyed<C>>> {
        if let Some(limit) = self.per_tool.get(tool).filter(|l| l.rate == rate) {
            return limit.clone();
        }
        let limit = Arc::new(Limit {
            rate,
            limiter: RateLimiter::dashmap_with_clock(quota(rate, None), self.clock.clone()),
        });
        self.per_tool.insert(tool.to_owned(), limit.clone());
        limit
    }

    /// Drops the keys whose buckets are full again (indistinguishable from new).
    pub fn sweep(&self) {
        for limit in [&self.per_principal, &self.retries].into_iter().flatten() {
            limit.limiter.retain_recent();
            limit.limiter.shrink_to_fit();
        }
        for tool in &self.per_tool {
            tool.limiter.retain_recent();
            tool.limiter.shrink_to_fit();
        }
    }

    /// Keys remembered across every keyed limiter.
    pub fn keys(&self) -> usize {
        let tools: usize = self.per_tool.iter().map(|t| t.limiter.len()).sum();
        [&self.per_principal, &self.retries]
            .into_iter()
            .flatten()
            .map(|l| l.limiter.len())
            .sum::<usize>()
            + tools
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;

    fn limits(toml_text: &str) -> (RouteLimits<FakeRelativeClock>, FakeRelativeClock) {
        let config: RateLimitConfig = toml::from_str(toml_text).unwrap();
        let clock = FakeRelativeClock::default();
        let limits = RouteLimits::with_clock(
            Arc::from("r"),
            &config,
            Arc::new(Metrics::new()),
            clock.clone(),
        );
        (limits, clock)
    }

    fn call(principal: &str) -> Request<'_> {
        Request {
            principal,
            retry: false,
            tool: None,
        }
    }

    #[test]
    fn a_burst_over_the_limit_is_refused_then_recovers() {
        let (limits, clock) = limits("per_principal = \"2/s\"\nburst = 3");
        for _ in 0..3 {
            assert_eq!(limits.check(call("ann")), Ok(()));
        }
        let refused = limits.check(call("ann")).unwrap_err();
        assert_eq!(refused.scope, Scope::PerPrincipal);
        assert_eq!(refused.retry_after, Duration::from_millis(500));
        // Another principal has a bucket of its own.
        assert_eq!(limits.check(call("bob")), Ok(()));
        clock.advance(Duration::from_millis(500));
        assert_eq!(limits.check(call("ann")), Ok(()));
        assert!(limits.check(call("ann")).is_err());
    }

    #[test]
    fn retries_are_counted_apart_from_calls() {
        let (limits, _clock) = limits("per_principal = \"1/s\"\nper_route = \"1/s\"");
        assert_eq!(limits.check(call("ann")), Ok(()));
        assert!(limits.check(call("ann")).is_err());
        let retry = Request {
            retry: true,
            ..call("ann")
        };
        // Neither the spent call bucket nor the route's limit touches a retry.
        assert_eq!(limits.check(retry), Ok(()));
        let second = limits.check(retry).unwrap_err();
        assert_eq!(second.scope, Scope::Retries);
    }

    #[test]
    fn the_route_limit_counts_every_principal() {
        let (limits, _clock) = limits("per_route = \"2/s\"");
        assert_eq!(limits.check(call("a")), Ok(()));
        assert_eq!(limits.check(call("b")), Ok(()));
        let refused = limits.check(call("c")).unwrap_err();
        assert_eq!(
            (refused.scope, refused.rate.to_string()),
            (Scope::PerRoute, "2/s".into())
        );
    }

    #[test]
    fn a_tool_rate_is_per_principal_and_follows_a_changed_policy() {
        let (limits, clock) = limits("");
        let one: Rate = "1/s".parse().unwrap();
        let transfer = |p| Request {
            tool: Some(("transfer", one)),
            ..call(p)
        };
        assert_eq!(limits.check(transfer("ann")), Ok(()));
        assert_eq!(
            limits.check(transfer("ann")).unwrap_err().scope,
            Scope::Tool
        );
        assert_eq!(limits.check(transfer("bob")), Ok(()));
        // Other tools and plain requests are not limited.
        assert_eq!(limits.check(call("ann")), Ok(()));
        let ten: Rate = "10/s".parse().unwrap();
        let faster = Request {
            tool: Some(("transfer", ten)),
            ..call("ann")
        };
        assert_eq!(limits.check(faster), Ok(()));
        clock.advance(Duration::from_secs(2));
        assert_eq!(limits.check(transfer("ann")), Ok(()));
    }

    #[test]
    fn idle_keys_are_swept() {
        let (limits, clock) = limits("per_principal = \"10/s\"");
        for i in 0..100 {
            limits.check(call(&format!("p{i}"))).unwrap();
        }
        assert_eq!(limits.keys(), 100);
        clock.advance(Duration::from_secs(1));
        limits.sweep();
        assert_eq!(limits.keys(), 0);
    }
}
