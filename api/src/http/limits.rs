//! Per-account rate limiting: a token bucket per account, refilled at `per_s` tokens a second up to `burst`.
//! A request takes one token; with none left it is refused with 429 and `Retry-After`. At most
//! [`ACCOUNTS_TRACKED_MAX`] buckets are kept; past that, full buckets (idle accounts) are dropped.
//!
//! **Shared across processes** (PostgreSQL metadata, [`spawn_sharing`]): every process's bucket for an account
//! is charged for the requests *every* process admitted for it, so together they hold one limit. Without a
//! metadata write per request: each process counts what it admits per account and one-second window, and
//! every [`SHARE_PERIOD_MS`] publishes the counts that changed and reads the other processes' (one exchange,
//! `Store::exchange_rate_counts`); what another process admitted since its last reading is charged then (a
//! bucket may go below zero: that debt is requests the others already served). On SQLite (one process) nothing
//! is shared and the limit is as before.
//!
//! **Error bound:** a process learns of another's requests at most one lag `L` late, `L` ≤ two periods plus an
//! exchange's time (it publishes at most one period after admitting, and reads at most one period after that:
//! ~400-500 ms at 200 ms). Over any interval of `T` seconds the N processes together admit at most
//! `burst + per_s × T` (what one bucket allows) plus what the other N − 1 admitted in the last `L` before each
//! one's refusal, at most (N − 1) × (`burst` + `per_s × L`): with the default burst (2 × `per_s`) and N = 2,
//! at most ~2.5 × `per_s` requests over the limit, once, not per second. Windows are each process's wall clock:
//! counts are read back to the previous window, so clocks apart by less than a window lose nothing.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::control::Control;
use crate::error::ApiError;
use crate::store::rate_limits::{RateCount, PUBLISHED_ROWS_MAX};
use crate::store::AccountId;

/// Buckets kept at most before idle ones are dropped.
pub const ACCOUNTS_TRACKED_MAX: usize = 100_000;

/// How often a process publishes its counts and reads the others' (shared limits only).
pub const SHARE_PERIOD_MS: u64 = 200;

/// The length of a counting window.
pub const WINDOW_MS: u64 = 1_000;

/// Windows older than this many are deleted from the metadata (whoever published them: a dead process's too).
const WINDOWS_KEPT: u64 = 4;

/// An account's bucket: tokens (below zero when other processes spent more than this one knew), when last
/// refilled.
type Bucket = (f64, Instant);

/// What a process shares: its own admissions not yet published, and what it last read of the others'.
#[derive(Debug, Default)]
struct Shared {
    /// (account, window start ms) → (admitted, of which published).
    admitted: HashMap<(AccountId, u64), (u64, u64)>,
    /// (owner, account, window start ms) → the count last read (and charged).
    seen: HashMap<(String, AccountId, u64), u64>,
}

/// The rate limiter; see the module doc.
#[derive(Debug)]
pub struct RateLimiter {
    per_s: f64,
    burst: f64,
    buckets: Mutex<HashMap<AccountId, Bucket>>,
    /// `Some` when the limit is shared with other processes.
    shared: Option<Mutex<Shared>>,
}

/// The current window's start, in ms since the Unix epoch.
fn window_of(now_ms: u64) -> u64 {
    now_ms - now_ms % WINDOW_MS
}

fn now_ms() -> u64 {
    u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0)
}

impl RateLimiter {
    /// A limiter allowing `per_s` requests a second on average and `burst` at once; `per_s == 0` allows all.
    pub fn new(per_s: u32, burst: u32) -> RateLimiter {
        RateLimiter {
            per_s: f64::from(per_s),
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
            shared: None,
        }
    }

    /// [`RateLimiter::new`] whose admissions are counted for sharing with other processes (see the module doc).
    pub fn shared(per_s: u32, burst: u32) -> RateLimiter {
        RateLimiter {
            shared: Some(Mutex::new(Shared::default())),
            ..RateLimiter::new(per_s, burst)
        }
    }

    /// Whether the limit is off.
    fn unlimited(&self) -> bool {
        self.per_s == 0.0
    }

    /// Takes a token for `account`, or refuses with 429.
    pub fn check(&self, account: &AccountId) -> Result<(), ApiError> {
        if self.unlimited() {
            return Ok(());
        }
        let now = Instant::now();
        {
            let mut buckets = self.buckets.lock();
            let tokens = self.refilled(&mut buckets, account, now);
            if *tokens < 1.0 {
                return Err(ApiError::RateLimited(format!(
                    "more than {} requests a second; slow down",
                    self.per_s
                )));
            }
            *tokens -= 1.0;
        }
        if let Some(shared) = &self.shared {
            let mut shared = shared.lock();
            shared
                .admitted
                .entry((account.clone(), window_of(now_ms())))
                .or_default()
                .0 += 1;
        }
        Ok(())
    }

    /// `account`'s bucket refilled up to `now` (made full if absent, dropping idle ones past the bound).
    fn refilled<'b>(
        &self,
        buckets: &'b mut HashMap<AccountId, Bucket>,
        account: &AccountId,
        now: Instant,
    ) -> &'b mut f64 {
        if buckets.len() >= ACCOUNTS_TRACKED_MAX && !buckets.contains_key(account) {
            let (per_s, burst) = (self.per_s, self.burst);
            buckets.retain(|_, (tokens, at)| *tokens + now.duration_since(*at).as_secs_f64() * per_s < burst);
        }
        let (tokens, at) = buckets.entry(account.clone()).or_insert((self.burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * self.per_s).min(self.burst);
        *at = now;
        tokens
    }

    /// The counts to publish: each (account, window, admitted) whose count changed since it was last
    /// published, at most [`PUBLISHED_ROWS_MAX`].
    fn unpublished(&self) -> Vec<(AccountId, u64, u64)> {
        let Some(shared) = &self.shared else {
            return Vec::new();
        };
        let shared = shared.lock();
        shared
            .admitted
            .iter()
            .filter(|(_, (admitted, published))| admitted > published)
            .take(PUBLISHED_ROWS_MAX)
            .map(|((account, window), (admitted, _))| (account.clone(), *window, *admitted))
            .collect()
    }

    /// Records that `published` went out, forgets windows older than the previous one that have nothing left
    /// to publish, and charges each account's bucket for what the other processes admitted since last read
    /// (`others`, their counts of the windows from `since_ms` on).
    fn exchanged(&self, published: &[(AccountId, u64, u64)], others: Vec<RateCount>, since_ms: u64) {
        let Some(shared) = &self.shared else {
            return;
        };
        let mut charges: HashMap<AccountId, u64> = HashMap::new();
        {
            let mut shared = shared.lock();
            for (account, window, count) in published {
                if let Some(entry) = shared.admitted.get_mut(&(account.clone(), *window)) {
                    entry.1 = entry.1.max(*count);
                }
            }
            shared
                .admitted
                .retain(|(_, window), (admitted, published)| *window >= since_ms || admitted > published);
            for row in others {
                let key = (row.owner, row.account, row.window_ms);
                let seen = shared.seen.entry(key.clone()).or_insert(0);
                if row.count > *seen {
                    *charges.entry(key.1).or_insert(0) += row.count - *seen;
                    *seen = row.count;
                }
            }
            shared.seen.retain(|(_, _, window), _| *window >= since_ms);
        }
        if charges.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut buckets = self.buckets.lock();
        for (account, requests) in charges {
            // Counts are small integers (requests in a second): exact in an f64.
            let requests = requests as f64;
            *self.refilled(&mut buckets, &account, now) -= requests;
        }
    }

    /// One exchange with the metadata: publishes this process's changed counts, reads the others' and charges
    /// for them. Runs the store's blocking call on `control`'s blocking pool.
    async fn share_once(&self, control: &Control) -> Result<(), ApiError> {
        let published = self.unpublished();
        let now = now_ms();
        // The previous window too: a count of it may be published up to a period after it ended.
        let since_ms = window_of(now).saturating_sub(WINDOW_MS);
        let delete_before_ms = window_of(now).saturating_sub(WINDOWS_KEPT * WINDOW_MS);
        let batch = published.clone();
        let others = control
            .blocking(move |store| store.exchange_rate_counts(&batch, since_ms, delete_before_ms))
            .await?;
        self.exchanged(&published, others, since_ms);
        Ok(())
    }
}

/// Shares `limiter`'s counts through `control`'s metadata every [`SHARE_PERIOD_MS`] until the limiter is
/// dropped (the router with it). A failed exchange is logged and retried at the next period; meanwhile each
/// process limits on what it knows.
pub(crate) fn spawn_sharing(limiter: &Arc<RateLimiter>, control: Arc<Control>) -> tokio::task::JoinHandle<()> {
    let limiter: Weak<RateLimiter> = Arc::downgrade(limiter);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(Duration::from_millis(SHARE_PERIOD_MS));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(limiter) = limiter.upgrade() else {
                return;
            };
            if let Err(error) = limiter.share_once(&control).await {
                tracing::warn!(%error, "sharing the rate limit's counts failed; retrying");
            }
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test failure is a panic
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

    /// Two limiters (two processes) exchanging through two stores on one metadata: what one admitted is
    /// charged to the other's bucket, so together they refuse past one burst; without sharing each would
    /// admit a burst of its own.
    fn two_processes_share_one_limit_on(open: crate::store::scenarios::Open<'_>) {
        let (store_a, store_b) = (open(), open());
        let (a, b) = (RateLimiter::shared(1, 10), RateLimiter::shared(1, 10));
        let account = AccountId("acct_a".to_owned());
        let exchange = |limiter: &RateLimiter, store: &crate::store::Store| {
            let published = limiter.unpublished();
            let since_ms = window_of(now_ms()).saturating_sub(WINDOW_MS);
            let others = store.exchange_rate_counts(&published, since_ms, 0).unwrap();
            limiter.exchanged(&published, others, since_ms);
        };
        for _ in 0..7 {
            a.check(&account).unwrap();
        }
        exchange(&a, &store_a);
        exchange(&b, &store_b);
        // b knows of a's 7: 3 of the burst of 10 (and at most 1 token refilled in between) are left.
        let mut admitted_by_b = 0;
        while b.check(&account).is_ok() {
            admitted_by_b += 1;
            assert!(admitted_by_b < 10, "b admits past the shared burst");
        }
        assert!((3..=4).contains(&admitted_by_b), "b admitted {admitted_by_b}");
        // And a learns of b's in turn, and of nothing twice.
        exchange(&b, &store_b);
        exchange(&a, &store_a);
        exchange(&a, &store_a);
        assert!(
            matches!(a.check(&account), Err(ApiError::RateLimited(_))),
            "a is charged b's requests"
        );
        let unshared = RateLimiter::new(1, 10);
        for _ in 0..10 {
            unshared.check(&account).unwrap();
        }
    }

    #[test]
    fn two_processes_share_one_limit() {
        crate::store::scenarios::on_sqlite(two_processes_share_one_limit_on);
    }

    #[test]
    fn two_processes_share_one_limit_on_postgresql() {
        let Some(server) = crate::testing_postgres::TestPostgres::start() else {
            return;
        };
        let url = server.create_database("limits");
        two_processes_share_one_limit_on(&|| crate::store::Store::open_postgres(&url).unwrap());
    }

    #[test]
    fn nothing_is_counted_when_not_shared() {
        let limiter = RateLimiter::new(100, 100);
        limiter.check(&AccountId("acct_a".to_owned())).unwrap();
        assert!(limiter.unpublished().is_empty());
        let shared = RateLimiter::shared(100, 100);
        shared.check(&AccountId("acct_a".to_owned())).unwrap();
        shared.check(&AccountId("acct_a".to_owned())).unwrap();
        let unpublished = shared.unpublished();
        assert_eq!(unpublished.len(), 1);
        assert_eq!(unpublished[0].2, 2);
        shared.exchanged(&unpublished, Vec::new(), 0);
        assert!(shared.unpublished().is_empty(), "published once");
    }
}
