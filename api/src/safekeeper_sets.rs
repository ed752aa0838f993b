//! Which safekeepers hold each timeline (issue 17 item 3): a *set* of [`SET_SIZE`] of the N configured, chosen
//! when the timeline is made and changed only when a member is replaced.
//!
//! - **Choice** ([`choose_set`]): the reachable safekeepers holding the fewest timelines, ties in configuration
//!   order; with fewer than [`SET_SIZE`] reachable, unreachable ones fill the set (a creation needs a majority
//!   of it, as a commit does). With N = [`SET_SIZE`] every set is the whole configuration (`cambium up`).
//! - **Liveness** ([`Liveness`]): the reconciler probes every configured safekeeper each round; one that has
//!   not answered for `dead_after` since it was first seen failing is *dead*. Creation skips the ones not
//!   answering now; replacement waits for dead.
//! - **Replacement** ([`plan_replacement`]): a set with exactly one dead member gets the live non-member with
//!   the fewest timelines in its place; with two dead the survivors are no majority of the old set, so nothing
//!   can fence it and the set is left for an operator (`Plan::Stuck`).
//!
//! Pure but for [`Liveness`]'s clock, which its callers pass in.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Safekeepers in a timeline's set (fewer only when fewer are configured).
pub const SET_SIZE: usize = 3;
/// The default time a safekeeper must have been unreachable before its timelines move elsewhere.
pub const DEAD_AFTER_MS_DEFAULT: u64 = 300_000;

/// The set of a timeline that has none recorded (made before sets existed): the first [`SET_SIZE`] configured.
pub fn default_set(configured: &[String]) -> Vec<String> {
    configured.iter().take(SET_SIZE).cloned().collect()
}

/// The set for a new timeline: [`SET_SIZE`] (or every) configured safekeeper, reachable ones first, fewest
/// timelines (`counts`) first, ties in configuration order; returned in configuration order.
pub fn choose_set(
    configured: &[String],
    counts: &HashMap<String, usize>,
    unreachable: &HashSet<String>,
) -> Vec<String> {
    let mut ranked: Vec<(usize, &String)> = configured.iter().enumerate().collect();
    ranked.sort_by_key(|(index, address)| {
        (
            unreachable.contains(*address),
            counts.get(*address).copied().unwrap_or(0),
            *index,
        )
    });
    let mut chosen: Vec<(usize, &String)> = ranked.into_iter().take(SET_SIZE).collect();
    chosen.sort_by_key(|(index, _)| *index);
    chosen.into_iter().map(|(_, address)| address.clone()).collect()
}

/// What to do with one timeline's set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// No member is dead (or no live safekeeper outside the set can take a dead one's place yet).
    Keep,
    /// Replace `dead` by `with`: fence the other members, record the new set, re-point the writer, pull.
    Replace {
        /// The dead member.
        dead: String,
        /// A live safekeeper not in the set.
        with: String,
        /// The set after the replacement, in the old set's order with `with` where `dead` was.
        new_set: Vec<String>,
    },
    /// More than one member is dead: the survivors are no majority of the set, so it cannot be fenced safely.
    Stuck(String),
}

/// What to do with `set` when `dead` are the dead safekeepers and `unreachable` those not answering now (a
/// superset of `dead`); `counts` the timelines each holds. Pure.
pub fn plan_replacement(
    set: &[String],
    configured: &[String],
    dead: &HashSet<String>,
    unreachable: &HashSet<String>,
    counts: &HashMap<String, usize>,
) -> Plan {
    let dead_members: Vec<&String> = set.iter().filter(|member| dead.contains(*member)).collect();
    let Some(first_dead) = dead_members.first() else {
        return Plan::Keep;
    };
    // The fence needs a majority of the old set among the live members.
    let live_members = set.iter().filter(|member| !unreachable.contains(*member)).count();
    if dead_members.len() > 1 || live_members < set.len() / 2 + 1 {
        return Plan::Stuck(format!(
            "{} of the set {set:?} are dead or unreachable; a majority must answer to move it",
            set.len() - live_members
        ));
    }
    let candidate = configured
        .iter()
        .enumerate()
        .filter(|(_, address)| !set.contains(address) && !unreachable.contains(*address))
        .min_by_key(|(index, address)| (counts.get(*address).copied().unwrap_or(0), *index))
        .map(|(_, address)| address.clone());
    let Some(with) = candidate else {
        return Plan::Keep;
    };
    let new_set = set
        .iter()
        .map(|member| {
            if member == *first_dead {
                with.clone()
            } else {
                member.clone()
            }
        })
        .collect();
    Plan::Replace {
        dead: (*first_dead).clone(),
        with,
        new_set,
    }
}

/// Timelines per safekeeper over `sets` (each live timeline's set). Pure.
pub fn count_timelines<'a>(sets: impl IntoIterator<Item = &'a Vec<String>>) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for set in sets {
        for member in set {
            *counts.entry(member.clone()).or_insert(0) += 1;
        }
    }
    counts
}

/// Which safekeepers answer, as the reconciler's probes found them (see the module doc).
#[derive(Debug, Default)]
pub struct Liveness {
    /// Per address: since when it has not answered (absent or `None`: it answered last time).
    unreachable_since: Mutex<HashMap<String, Option<Instant>>>,
}

impl Liveness {
    /// Records a probe of `address` at `now`.
    pub fn observe(&self, address: &str, answered: bool, now: Instant) {
        let mut map = self.unreachable_since.lock();
        let entry = map.entry(address.to_owned()).or_insert(None);
        match (answered, *entry) {
            (true, _) => *entry = None,
            (false, None) => *entry = Some(now),
            (false, Some(_)) => {}
        }
    }

    /// The safekeepers the last probe found not answering.
    pub fn unreachable(&self) -> HashSet<String> {
        let map = self.unreachable_since.lock();
        map.iter()
            .filter(|(_, since)| since.is_some())
            .map(|(address, _)| address.clone())
            .collect()
    }

    /// The safekeepers that have not answered for at least `dead_after` at `now`.
    pub fn dead(&self, dead_after: Duration, now: Instant) -> HashSet<String> {
        let map = self.unreachable_since.lock();
        map.iter()
            .filter(|(_, since)| since.is_some_and(|since| now.saturating_duration_since(since) >= dead_after))
            .map(|(address, _)| address.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("sk{i}")).collect()
    }

    fn set(members: &[&str]) -> Vec<String> {
        members.iter().map(|m| (*m).to_owned()).collect()
    }

    #[test]
    fn new_sets_take_the_least_loaded_reachable_safekeepers() {
        let configured = names(5);
        let none = HashSet::new();
        assert_eq!(
            choose_set(&configured, &HashMap::new(), &none),
            set(&["sk1", "sk2", "sk3"])
        );
        let counts = count_timelines(&[set(&["sk1", "sk2", "sk3"])]);
        assert_eq!(choose_set(&configured, &counts, &none), set(&["sk1", "sk4", "sk5"]));
        let unreachable: HashSet<String> = ["sk4".to_owned()].into();
        assert_eq!(
            choose_set(&configured, &counts, &unreachable),
            set(&["sk1", "sk2", "sk5"])
        );
        // Fewer reachable than a set: unreachable ones fill it.
        let unreachable: HashSet<String> = ["sk1", "sk2", "sk3"].iter().map(|s| (*s).to_owned()).collect();
        let chosen = choose_set(&configured, &HashMap::new(), &unreachable);
        assert_eq!(chosen, set(&["sk1", "sk4", "sk5"]));
        // Three configured: always all three, whatever they hold (`cambium up`).
        let three = names(3);
        assert_eq!(choose_set(&three, &counts, &["sk2".to_owned()].into()), three);
        // Fewer than three configured: all of them.
        assert_eq!(choose_set(&names(1), &HashMap::new(), &none), names(1));
    }

    #[test]
    fn many_creations_spread_evenly_and_every_set_has_distinct_members() {
        let configured = names(5);
        let mut sets = Vec::new();
        for _ in 0..50 {
            let counts = count_timelines(&sets);
            let chosen = choose_set(&configured, &counts, &HashSet::new());
            let distinct: HashSet<&String> = chosen.iter().collect();
            assert_eq!(distinct.len(), SET_SIZE, "{chosen:?}");
            sets.push(chosen);
        }
        let counts = count_timelines(&sets);
        let (min, max) = (counts.values().min().copied(), counts.values().max().copied());
        assert_eq!((min, max), (Some(30), Some(30)), "{counts:?}");
    }

    #[test]
    fn one_dead_member_is_replaced_by_the_least_loaded_live_outsider() {
        let configured = names(5);
        let old = set(&["sk1", "sk2", "sk3"]);
        let dead: HashSet<String> = ["sk2".to_owned()].into();
        let counts: HashMap<String, usize> = [("sk4".to_owned(), 7), ("sk5".to_owned(), 2)].into();
        assert_eq!(
            plan_replacement(&old, &configured, &dead, &dead, &counts),
            Plan::Replace {
                dead: "sk2".into(),
                with: "sk5".into(),
                new_set: set(&["sk1", "sk5", "sk3"]),
            }
        );
        // Nobody dead: kept.
        assert_eq!(
            plan_replacement(&old, &configured, &HashSet::new(), &HashSet::new(), &counts),
            Plan::Keep
        );
        // Unreachable but not yet dead: kept.
        assert_eq!(
            plan_replacement(&old, &configured, &HashSet::new(), &dead, &counts),
            Plan::Keep
        );
        // The only outsider unreachable too: nowhere to go yet.
        let unreachable: HashSet<String> = ["sk2", "sk4", "sk5"].iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(
            plan_replacement(&old, &configured, &dead, &unreachable, &counts),
            Plan::Keep
        );
        // Two members dead, or one dead and another unreachable: no majority to fence with.
        let two: HashSet<String> = ["sk1".to_owned(), "sk2".to_owned()].into();
        assert!(matches!(
            plan_replacement(&old, &configured, &two, &two, &counts),
            Plan::Stuck(_)
        ));
        let unreachable: HashSet<String> = ["sk2".to_owned(), "sk3".to_owned()].into();
        assert!(matches!(
            plan_replacement(&old, &configured, &dead, &unreachable, &counts),
            Plan::Stuck(_)
        ));
        // Three configured: no outsider, kept (and under-replicated until the safekeeper returns).
        assert_eq!(plan_replacement(&old, &names(3), &dead, &dead, &counts), Plan::Keep);
    }

    #[test]
    fn a_safekeeper_is_dead_after_failing_every_probe_for_the_bound() {
        let liveness = Liveness::default();
        let start = Instant::now();
        let bound = Duration::from_secs(10);
        liveness.observe("a", true, start);
        liveness.observe("b", false, start);
        assert_eq!(liveness.unreachable(), ["b".to_owned()].into());
        assert!(liveness.dead(bound, start + Duration::from_secs(9)).is_empty());
        liveness.observe("b", false, start + Duration::from_secs(5));
        assert_eq!(liveness.dead(bound, start + bound), ["b".to_owned()].into());
        // One answer resets the clock.
        liveness.observe("b", true, start + bound);
        liveness.observe("b", false, start + bound + Duration::from_secs(1));
        assert!(liveness.dead(bound, start + bound + Duration::from_secs(2)).is_empty());
    }
}
