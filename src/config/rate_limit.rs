//! `[route.rate_limit]` and the rates written as `"20/s"`, `"600/m"` or
//! `"1000/h"` (also a policy's `[tool.NAME] rate`): parsed and checked at
//! load, so a rate that cannot be enforced never reaches a running gateway.

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

/// `count` requests per `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    pub count: NonZeroU32,
    pub per: Duration,
}

/// Why a rate string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rate `{0}` must be COUNT/UNIT with COUNT at least 1 and UNIT s, m or h (e.g. \"20/s\")")]
pub struct BadRate(String);

impl Rate {
    /// The spacing between two requests at this rate.
    pub fn interval(self) -> Duration {
        self.per / self.count.get()
    }
}

impl FromStr for Rate {
    type Err = BadRate;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadRate(text.to_owned());
        let (count, unit) = text.trim().split_once('/').ok_or_else(bad)?;
        let count: NonZeroU32 = count.trim().parse().map_err(|_| bad())?;
        let per = match unit.trim() {
            "s" | "sec" | "second" => Duration::from_secs(1),
            "m" | "min" | "minute" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            _ => return Err(bad()),
        };
        // A spacing under a nanosecond cannot be enforced by a GCRA clock.
        if per.as_nanos() < u128::from(count.get()) {
            return Err(bad());
        }
        Ok(Rate { count, per })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "m",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Rate {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Rate".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "COUNT/UNIT: requests per second (s), minute (m) or hour (h), e.g. \"20/s\", \"600/m\".",
            "pattern": r"^\s*[0-9]+\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*$",
        })
    }
}

/// `[route.rate_limit]`: GCRA limits on a route's requests (see the book's
/// docs/src/reference/limits.md, "Rate limits"). New calls and retries that carry a
/// `requestState` are counted apart, so a person answering a question is
/// never throttled by the rate at which a model makes calls.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Requests without `requestState`, per principal.
    #[serde(default)]
    pub per_principal: Option<Rate>,
    /// How many of those may arrive at once; default: the rate's count.
    #[serde(default)]
    pub burst: Option<NonZeroU32>,
    /// Requests without `requestState`, all principals together.
    #[serde(default)]
    pub per_route: Option<Rate>,
    /// Retries (requests with `requestState`) per principal; default:
    /// `per_principal`'s rate and burst, in a bucket of their own.
    #[serde(default)]
    pub retries: Option<Rate>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_print() {
        let r: Rate = "20/s".parse().unwrap();
        assert_eq!(r.count.get(), 20);
        assert_eq!(r.interval(), Duration::from_millis(50));
        assert_eq!(r.to_string(), "20/s");
        assert_eq!(
            "600/m".parse::<Rate>().unwrap().interval(),
            Duration::from_millis(100)
        );
        assert_eq!(" 1 / h ".parse::<Rate>().unwrap().to_string(), "1/h");
    }

    #[test]
    fn bad_rates_are_refused() {
        for text in ["", "20", "0/s", "-1/s", "20/d", "x/s", "2000000000/s"] {
            assert!(text.parse::<Rate>().is_err(), "{text:?} accepted");
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err =
            toml::from_str::<RateLimitConfig>("per_principal = \"1/s\"\nper_user = 3").unwrap_err();
        assert!(err.to_string().contains("per_user"), "{err}");
    }
}
