//! File descriptors as a budgeted resource of the process (issue 13): how many are open, the limit, and
//! whether there is room for more work that needs them, so new connections and new branches are refused with
//! a clear error *before* the process runs out (and something that must not fail, a WAL segment or a layer
//! file, fails instead).
//!
//! Linux only, without `unsafe`: the count is the number of entries of `/proc/self/fd`, the limit the soft
//! "Max open files" of `/proc/self/limits`. Elsewhere both are unknown and every check passes. Both are
//! cached for [`CACHE_MS`] so a burst of checks (a branch creation each) reads the directory and the limits
//! once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// How long a count is reused.
pub const CACHE_MS: u64 = 100;
/// Descriptors kept free for what must not fail (segment and layer files, storage connections): a check for
/// new work fails once fewer than this many, or a tenth of the limit if more, are left.
pub const RESERVE_MIN: u64 = 256;

static CACHED_COUNT: AtomicU64 = AtomicU64::new(0);
/// The cached limit; 0: none known (the checks pass).
static CACHED_LIMIT: AtomicU64 = AtomicU64::new(0);
static CACHED_AT_MS: AtomicU64 = AtomicU64::new(0);

/// Open descriptors of this process, if known.
pub fn open_count() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    Some(entries.count() as u64)
}

/// The soft limit on open descriptors of this process, if known and finite.
pub fn limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    let soft = line.trim_start_matches("Max open files").split_whitespace().next()?;
    soft.parse().ok()
}

/// Descriptors to keep free under `limit`.
pub fn reserve(limit: u64) -> u64 {
    (limit / 10).max(RESERVE_MIN).min(limit / 2)
}

/// Why new work was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("out of file descriptors: {open} of {limit} open, {reserve} kept for work in progress; close sessions or idle branches, or raise the limit (ulimit -n)")]
pub struct Exhausted {
    /// Open now.
    pub open: u64,
    /// The process's limit.
    pub limit: u64,
    /// Kept free.
    pub reserve: u64,
}

/// Whether there is room for new work that takes `needed` more descriptors (a session, a branch).
pub fn check_room(needed: u64) -> Result<(), Exhausted> {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let (open, limit) = if now_ms.saturating_sub(CACHED_AT_MS.load(Ordering::Acquire)) < CACHE_MS {
        (
            CACHED_COUNT.load(Ordering::Relaxed),
            CACHED_LIMIT.load(Ordering::Relaxed),
        )
    } else {
        let (Some(open), Some(limit)) = (open_count(), limit()) else {
            return Ok(());
        };
        CACHED_COUNT.store(open, Ordering::Relaxed);
        CACHED_LIMIT.store(limit, Ordering::Relaxed);
        // Release: a check that sees this time sees the count and limit stored before it.
        CACHED_AT_MS.store(now_ms, Ordering::Release);
        (open, limit)
    };
    if limit == 0 {
        return Ok(());
    }
    let reserve = reserve(limit);
    if open + needed + reserve > limit {
        return Err(Exhausted { open, limit, reserve });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_and_limit_are_read_and_the_reserve_is_bounded() {
        if let (Some(open), Some(limit)) = (open_count(), limit()) {
            assert!(open > 0 && open < limit, "{open} open of {limit}");
            assert!(check_room(1).is_ok());
            assert!(check_room(limit).is_err(), "no room for the whole limit again");
        }
        assert_eq!(reserve(20_000), 2_000);
        assert_eq!(reserve(1_024), 256);
        assert_eq!(reserve(100), 50, "never more than half");
    }
}
