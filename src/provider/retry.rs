//! Retry policy: which failures are worth another attempt, and how long to
//! wait before it.
//!
//! One attempt ends in a [`Failure`]: either `Retry` (a 429 or 5xx status,
//! a dropped connection, a stream cut or silent) with an optional
//! server-requested delay, or `Fatal` (anything else). The delay before
//! retry `n` is `retry_base_ms * 2^n`, capped at `retry_max_ms`, with "equal
//! jitter" (a random point in the upper half), unless the server sent
//! `retry-after` / `retry-after-ms`, which wins (capped at 60 seconds).

use std::time::Duration;

use rand::Rng;
use reqwest::header::HeaderMap;

use super::{ProviderError, ProviderErrorKind};

/// The longest delay a server may ask for through `retry-after`.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Why one attempt failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Worth another attempt. `error` is reported if no attempt is left.
    Retry {
        error: ProviderError,
        retry_after: Option<Duration>,
    },
    /// Reported at once.
    Fatal(ProviderError),
}

impl Failure {
    pub(crate) fn retry(kind: ProviderErrorKind, message: impl Into<String>) -> Failure {
        Failure::Retry {
            error: ProviderError::new(kind, message),
            retry_after: None,
        }
    }

    pub(crate) fn fatal(kind: ProviderErrorKind, message: impl Into<String>) -> Failure {
        Failure::Fatal(ProviderError::new(kind, message))
    }
}

/// HTTP statuses that are retried: rate limits, server errors, overload.
pub(crate) fn is_retryable_status(code: u16) -> bool {
    matches!(code, 408 | 429 | 500 | 502 | 503 | 504 | 529)
}

/// The delay a server asked for, from `retry-after-ms` (milliseconds) or
/// `retry-after` (whole seconds or an HTTP date), capped at 60 seconds.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers.get("retry-after-ms").and_then(|v| v.to_str().ok())
        && let Ok(ms) = ms.trim().parse::<f64>()
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0).min(MAX_RETRY_AFTER));
    }
    let raw = headers.get("retry-after")?.to_str().ok()?;
    parse_retry_after(raw, jiff::Timestamp::now())
}

/// Parses a `retry-after` value relative to `now`.
pub(crate) fn parse_retry_after(raw: &str, now: jiff::Timestamp) -> Option<Duration> {
    let raw = raw.trim();
    if let Ok(secs) = raw.parse::<u64>() {
        return Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    }
    let when = jiff::fmt::rfc2822::parse(raw).ok()?.timestamp();
    let wait = now.duration_until(when);
    let wait = Duration::try_from(wait).unwrap_or(Duration::ZERO);
    Some(wait.min(MAX_RETRY_AFTER))
}

/// The backoff before retry number `retry` (0 for the first retry).
pub(crate) fn backoff(retry: u32, base_ms: u64, max_ms: u64) -> Duration {
    let exp = base_ms.saturating_mul(1u64.checked_shl(retry.min(32)).unwrap_or(u64::MAX));
    let cap = exp.min(max_ms.max(base_ms));
    let half = cap / 2;
    let jitter = if cap > half {
        rand::rng().random_range(0..=cap - half)
    } else {
        0
    };
    Duration::from_millis(half + jitter)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_stays_under_the_cap() {
        for retry in 0..10 {
            let d = backoff(retry, 100, 1_000).as_millis() as u64;
            let full = (100u64 << retry).min(1_000);
            assert!(
                d >= full / 2 && d <= full,
                "retry {retry}: {d} not in [{}, {full}]",
                full / 2
            );
        }
    }

    #[test]
    fn backoff_survives_huge_exponents() {
        assert!(backoff(200, u64::MAX, u64::MAX) <= Duration::from_millis(u64::MAX));
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("3600", now), Some(MAX_RETRY_AFTER));
        assert_eq!(
            parse_retry_after("Thu, 01 Jan 2026 00:00:10 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Wed, 31 Dec 2025 00:00:10 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }
}
