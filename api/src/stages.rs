//! Where the time of a `/v1` call or an operation goes, stage by stage (issue 12 item 7): the layers and the
//! handler mark the end of each stage ([`mark`]: the time since the previous mark, or since the call began) or
//! record a stage that ran beside others ([`record`]: the storage calls and the metadata write of a branch
//! creation run at once). A call's stages are kept in a task-local while it runs ([`timed`]); when it ends they
//! are added to per-(call, stage) sums and counts, which `/metrics` shows as
//! `cambium_api_stage_seconds_sum{call, stage}` and `_count`, and logged at `debug`.
//!
//! Cheap: a few `Instant::now()` and one short lock per call. Calls are named by method and route template
//! (`POST /v1/databases/{id}/branches`) or by operation action (`operation restore_branch`), so the label set is
//! bounded; only calls that succeeded are counted, so a stage's mean is that of the path a success takes.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The stages of the running call.
#[derive(Debug)]
struct Recorder {
    /// When the previous stage ended (or the call began).
    last: Instant,
    /// (stage, how long), in the order they ended.
    stages: Vec<(&'static str, Duration)>,
}

tokio::task_local! {
    /// The stages of the call this task runs, while [`timed`] runs it.
    static CURRENT: RefCell<Recorder>;
}

/// (call, stage) → (calls, microseconds in all).
type Table = BTreeMap<(String, &'static str), (u64, u64)>;

/// Every finished call's stages, summed.
static TABLE: Mutex<Table> = Mutex::new(BTreeMap::new());

/// The stage that ran from the last mark until now ends: its time is recorded under `stage`. Nothing outside
/// [`timed`].
pub(crate) fn mark(stage: &'static str) {
    let _ = CURRENT.try_with(|recorder| {
        let mut recorder = recorder.borrow_mut();
        let now = Instant::now();
        let took = now.saturating_duration_since(recorder.last);
        recorder.last = now;
        recorder.stages.push((stage, took));
    });
}

/// A stage that ran beside others took `took` (the last mark does not move). Nothing outside [`timed`].
pub(crate) fn record(stage: &'static str, took: Duration) {
    let _ = CURRENT.try_with(|recorder| recorder.borrow_mut().stages.push((stage, took)));
}

/// Runs `call` recording its stages; the time after the last mark is the stage `rest`. The stages are added to
/// the sums under `name` if `succeeded` says so of the output. A call already inside another's [`timed`] (an
/// operation run from a request's task) records in the outer one.
pub(crate) async fn timed<F, T>(name: impl FnOnce() -> String, succeeded: impl FnOnce(&T) -> bool, call: F) -> T
where
    F: Future<Output = T>,
{
    if CURRENT.try_with(|_| ()).is_ok() {
        return call.await;
    }
    let began = Instant::now();
    let recorder = RefCell::new(Recorder {
        last: began,
        stages: Vec::new(),
    });
    let (output, recorder) = CURRENT
        .scope(recorder, async {
            let output = call.await;
            mark("rest");
            let stages = CURRENT.with(|recorder| std::mem::take(&mut recorder.borrow_mut().stages));
            (output, stages)
        })
        .await;
    if succeeded(&output) {
        let name = name();
        tracing::debug!(call = %name, total_us = began.elapsed().as_micros() as u64,
            stages = ?recorder.iter().map(|(stage, took)| (*stage, took.as_micros() as u64)).collect::<Vec<_>>(),
            "call stages (µs)");
        let mut table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
        for (stage, took) in recorder {
            let entry = table.entry((name.clone(), stage)).or_default();
            entry.0 += 1;
            entry.1 += u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        }
    }
    output
}

/// The sums in the Prometheus text format.
pub(crate) fn render() -> String {
    use std::fmt::Write as _;
    let table = TABLE.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(
        out,
        "# HELP cambium_api_stage_seconds Time successful calls and operations spent in each stage."
    );
    let _ = writeln!(out, "# TYPE cambium_api_stage_seconds summary");
    for ((call, stage), (count, sum_us)) in &table {
        let labels = format!("call=\"{}\",stage=\"{stage}\"", call.replace('"', "'"));
        let _ = writeln!(
            out,
            "cambium_api_stage_seconds_sum{{{labels}}} {}",
            *sum_us as f64 / 1e6
        );
        let _ = writeln!(out, "cambium_api_stage_seconds_count{{{labels}}} {count}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stages_are_summed_per_call_and_only_for_successes() {
        let name = || "test call".to_owned();
        timed(name, |ok: &bool| *ok, async {
            tokio::time::sleep(Duration::from_millis(2)).await;
            mark("first");
            record("beside", Duration::from_millis(5));
            true
        })
        .await;
        timed(name, |ok: &bool| *ok, async {
            mark("first");
            false
        })
        .await;
        // Outside a call: nothing happens.
        mark("nowhere");
        let rendered = render();
        assert!(
            rendered.contains("cambium_api_stage_seconds_count{call=\"test call\",stage=\"first\"} 1"),
            "{rendered}"
        );
        assert!(
            rendered.contains("cambium_api_stage_seconds_sum{call=\"test call\",stage=\"beside\"} 0.005"),
            "{rendered}"
        );
        assert!(rendered.contains("stage=\"rest\""), "{rendered}");
        assert!(!rendered.contains("nowhere"), "{rendered}");
        let table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
        let first = table
            .get(&("test call".to_owned(), "first"))
            .copied()
            .unwrap_or_default();
        assert!(first.1 >= 2_000, "the first stage took the sleep: {first:?}");
    }
}
