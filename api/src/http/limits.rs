//! Per-account rate limiting: a token bucket per account, refilled at `per_s` tokens a second up to `burst`.
//! A request takes one token; with none left it is refused with 429 and `Retry-After`. At most
//! [`ACCOUNTS_TRACKED_MAX`] buckets are kept; past that, full buckets (idle accounts) are dropped.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;

use crate::error::ApiError;
use crate::store::AccountId;

/// Buckets kept at most before idle ones are dropped.
pub const ACCOUNTS_TRACKED_MAX: usize = 100_000;

/// The rate limiter; see the module doc.
#[derive(Debug)]
pub struct RateLimiter {
    per_s: f64,
    burst: f64,
    buckets: Mutex<HashMap<AccountId, (f64, Instant)>>,
}

impl RateLimiter {
    /// A limiter allowing `per_s` requests a second on average and `burst` at once; `per_s == 0` allows all.
    pub fn new(per_s: u32, burst: u32) -> RateLimiter {
        RateLimiter {
            per_s: f64::from(per_s),
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a token for `account`, or refuses with 429.
    pub fn check(&self, account: &AccountId) -> Result<(), ApiError> {
        if self.per_s == 0.0 {
            return Ok(());
        }
        let now = Instant::now();
        let mut buckets = self.buckets.lock();
        if buckets.len() >= ACCOUNTS_TRACKED_MAX && !buckets.contains_key(account) {
            let (per_s, burst) = (self.per_s, self.burst);
            buckets.retain(|_, (tokens, at)| *tokens + now.duration_since(*at).as_secs_f64() * per_s < burst);
        }
        let (tokens, at) = buckets.entry(account.clone()).or_insert((self.burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * self.per_s).min(self.burst);
        *at = now;
        if *tokens < 1.0 {
            return Err(ApiError::RateLimited(format!(
                "more than {} requests a second; slow down",
                self.per_s
            )));
        }
        *tokens -= 1.0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let limiter = RateLimiter::new(10, 5);
        let account = AccountId("acct_a".to_owned());
        for _ in 0..5 {
            assert!(limiter.check(&account).is_ok());
        }
        assert!(matches!(limiter.check(&account), Err(ApiError::RateLimited(_))));
        // Another account has its own bucket.
        assert!(limiter.check(&AccountId("acct_b".to_owned())).is_ok());
        std::thread::sleep(std::time::Duration::from_millis(250));
        assert!(limiter.check(&account).is_ok(), "refilled at 10/s");
        let unlimited = RateLimiter::new(0, 0);
        for _ in 0..10_000 {
            assert!(unlimited.check(&account).is_ok());
        }
    }
}
