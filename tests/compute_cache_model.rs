//! The compute's caches never serve a page of the wrong timeline or LSN: a property test against a model.
//!
//! Real processes (three `cambium safekeeper`s, one `cambium pageserver`); in the test process,
//! `RemotePageStore`s sharing one `HostCache` whose memory budget holds 4 pages and whose local file cache
//! holds 10, so pages move between memory, the file and the pageserver all the time. Random sequences of:
//! commits of random pages (growing the database writes every new block, as SQLite does), shrinks, reads at the
//! latest snapshot and at older ones through the writer's store, reads through read-only (time travel) stores,
//! scans with prefetch hints, a prefetch at one snapshot followed by a commit of the prefetched block, other
//! reads, and reads of it at the new snapshot and the old one, branches at the latest or an older commit,
//! restores (the slot's store closed and re-pointed to a new timeline branched from an older point), and
//! restarts (every store and the host cache dropped; a new host cache reopens the same file cache, new stores
//! campaign). Every read is checked against the model (each timeline's pages after each commit, a branch
//! starting with its parent's at the branch point). The file cache is shared by all cases, so pages of other
//! cases' timelines are in it too.
//!
//! `CACHE_MODEL_CASES` sets the number of cases (default 40, each up to 28 operations). After all cases the
//! test checks that reads were indeed served by memory, the file cache and prefetching, so it cannot pass by
//! never using them. Checked to fail when a fact's range, the writer's record of its writes, the branch-point
//! rule or a prefetched page's snapshot is ignored.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use common::cluster::{Cluster, TestResult};
use compute::cache::{FileCacheConfig, HostCache, HostCacheConfig, ENTRY_BYTES};
use compute::metrics::METRICS;
use compute::page_store::{PageStore, Snapshot};
use compute::remote_store::RemotePageStore;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use proto::pageserver as ps;
use proto::safekeeper as sk;
use storage::{Lsn, TenantId, TimelineId, PAGE_SIZE_BYTES};

const START: Lsn = Lsn(0x100_0000);
const BLOCKS_MAX: u8 = 16;

#[derive(Clone, Debug)]
enum Op {
    Write { slot: u8, blocks: Vec<u8> },
    Shrink { slot: u8, to: u8 },
    Read { slot: u8, block: u8, back: u8 },
    TimeTravel { slot: u8, block: u8, back: u8 },
    Scan { slot: u8, back: u8 },
    PrefetchThenWrite { slot: u8, block: u8 },
    Branch { slot: u8, back: u8 },
    Restore { slot: u8, back: u8 },
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u8>(), prop::collection::vec(0..BLOCKS_MAX, 1..5)).prop_map(|(slot, blocks)| Op::Write { slot, blocks }),
        1 => (any::<u8>(), 1..BLOCKS_MAX).prop_map(|(slot, to)| Op::Shrink { slot, to }),
        5 => (any::<u8>(), 0..BLOCKS_MAX, 0..4u8).prop_map(|(slot, block, back)| Op::Read { slot, block, back }),
        2 => (any::<u8>(), 0..BLOCKS_MAX, 0..4u8).prop_map(|(slot, block, back)| Op::TimeTravel { slot, block, back }),
        3 => (any::<u8>(), 0..3u8).prop_map(|(slot, back)| Op::Scan { slot, back }),
        2 => (any::<u8>(), 0..BLOCKS_MAX).prop_map(|(slot, block)| Op::PrefetchThenWrite { slot, block }),
        2 => (any::<u8>(), 0..3u8).prop_map(|(slot, back)| Op::Branch { slot, back }),
        1 => (any::<u8>(), 1..4u8).prop_map(|(slot, back)| Op::Restore { slot, back }),
        1 => Just(Op::Restart),
    ]
}

/// A timeline's state after a commit (or at its start).
#[derive(Clone, Debug)]
struct State {
    lsn: Lsn,
    size_pages: u32,
    pages: BTreeMap<u32, Bytes>,
}

/// The model of one timeline: its states, oldest first.
struct ModelTimeline {
    id: TimelineId,
    history: Vec<State>,
}

impl ModelTimeline {
    fn latest(&self) -> &State {
        self.history.last().expect("a timeline has its start state")
    }

    /// The state `back` commits before the latest (the start at most).
    fn back(&self, back: u8) -> &State {
        let index = self.history.len().saturating_sub(1 + usize::from(back));
        &self.history[index]
    }

    fn expected(state: &State, block: u32) -> Option<Bytes> {
        (block < state.size_pages).then(|| {
            state
                .pages
                .get(&block)
                .cloned()
                .unwrap_or_else(|| Bytes::from(vec![0u8; PAGE_SIZE_BYTES]))
        })
    }
}

/// The world: the model, the stores serving it, and the cluster.
struct World<'a> {
    cluster: &'a Cluster,
    runtime: &'a tokio::runtime::Runtime,
    cache_config: HostCacheConfig,
    cache: Arc<HostCache>,
    timelines: Vec<ModelTimeline>,
    /// Branch slots: (index into `timelines`, its writer store).
    slots: Vec<(usize, Arc<RemotePageStore>)>,
    next_timeline: &'a std::cell::Cell<u128>,
    next_content: u64,
}

fn check(condition: bool, what: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if condition {
        Ok(())
    } else {
        Err(TestCaseError::fail(what()))
    }
}

fn fail(error: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(error.to_string())
}

impl World<'_> {
    fn start_store(&self, timeline: TimelineId, start: Lsn) -> Result<Arc<RemotePageStore>, TestCaseError> {
        let mut config = self.cluster.store_config(timeline, start, 5_000);
        config.cache = Some(self.cache.clone());
        self.runtime.block_on(RemotePageStore::start(config)).map_err(fail)
    }

    fn slot(&self, slot: u8) -> usize {
        usize::from(slot) % self.slots.len()
    }

    fn content(&mut self, block: u32) -> Bytes {
        self.next_content += 1;
        let mut page = vec![(self.next_content % 251) as u8; PAGE_SIZE_BYTES];
        page[..8].copy_from_slice(&self.next_content.to_le_bytes());
        page[8..12].copy_from_slice(&block.to_le_bytes());
        Bytes::from(page)
    }

    /// Commits `blocks` (and every block a growth adds) and the new size on `slot`'s store and in the model.
    fn commit(&mut self, slot: usize, blocks: &[u32], size_pages: Option<u32>) -> Result<(), TestCaseError> {
        let (timeline, store) = self.slots[slot].clone();
        let latest = self.timelines[timeline].latest().clone();
        let written_max = blocks.iter().map(|b| b + 1).max().unwrap_or(0);
        let size = size_pages.unwrap_or(latest.size_pages.max(written_max));
        let mut state = latest.clone();
        let mut written: BTreeMap<u32, Bytes> = BTreeMap::new();
        for block in blocks.iter().copied().chain(latest.size_pages..size) {
            let page = self.content(block);
            written.insert(block, page);
        }
        state.pages.retain(|block, _| *block < size);
        state.pages.extend(written.clone());
        state.size_pages = size;
        let snapshot = store.commit(written.into_iter().collect(), size).map_err(fail)?;
        state.lsn = snapshot.lsn;
        self.timelines[timeline].history.push(state);
        Ok(())
    }

    fn read_check(
        &self,
        store: &RemotePageStore,
        timeline: usize,
        state: &State,
        block: u32,
    ) -> Result<(), TestCaseError> {
        let snapshot = Snapshot {
            lsn: state.lsn,
            db_size_pages: state.size_pages,
        };
        let page = store.read_page(block, &snapshot).map_err(fail)?;
        let expected = ModelTimeline::expected(state, block);
        check(page == expected, || {
            format!(
                "timeline {} block {block} at {}: read {:?}, expected {:?}",
                self.timelines[timeline].id,
                state.lsn,
                page.map(|p| p[..12].to_vec()),
                expected.map(|p| p[..12].to_vec())
            )
        })
    }

    /// Creates a timeline branched from `parent` at `lsn` on the pageserver and the safekeepers.
    fn branch(&mut self, parent: usize, back: u8) -> Result<usize, TestCaseError> {
        let state = self.timelines[parent].back(back).clone();
        self.next_timeline.set(self.next_timeline.get() + 1);
        let id = TimelineId(self.next_timeline.get());
        let parent_id = self.timelines[parent].id;
        self.runtime
            .block_on(create_branch(self.cluster, id, parent_id, state.lsn))
            .map_err(fail)?;
        self.timelines.push(ModelTimeline {
            id,
            history: vec![state],
        });
        Ok(self.timelines.len() - 1)
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Write { slot, ref blocks } => {
                let blocks: Vec<u32> = blocks.iter().map(|b| u32::from(*b)).collect();
                self.commit(self.slot(slot), &blocks, None)
            }
            Op::Shrink { slot, to } => self.commit(self.slot(slot), &[], Some(u32::from(to))),
            Op::Read { slot, block, back } => {
                let (timeline, store) = self.slots[self.slot(slot)].clone();
                let state = self.timelines[timeline].back(back).clone();
                self.read_check(&store, timeline, &state, u32::from(block))
            }
            Op::TimeTravel { slot, block, back } => {
                let timeline = self.slots[self.slot(slot)].0;
                let state = self.timelines[timeline].back(back).clone();
                let mut config = self.cluster.store_config(self.timelines[timeline].id, START, 5_000);
                config.cache = Some(self.cache.clone());
                let store = self
                    .runtime
                    .block_on(RemotePageStore::start_read_only(config, state.lsn))
                    .map_err(fail)?;
                self.read_check(&store, timeline, &state, u32::from(block))
            }
            Op::Scan { slot, back } => {
                let (timeline, store) = self.slots[self.slot(slot)].clone();
                let state = self.timelines[timeline].back(back).clone();
                let snapshot = Snapshot {
                    lsn: state.lsn,
                    db_size_pages: state.size_pages,
                };
                let blocks: Vec<u32> = (0..state.size_pages + 1).collect();
                store.prefetch(&blocks, &snapshot);
                for block in blocks {
                    self.read_check(&store, timeline, &state, block)?;
                }
                Ok(())
            }
            Op::PrefetchThenWrite { slot, block } => {
                let slot = self.slot(slot);
                let (timeline, store) = self.slots[slot].clone();
                let before = self.timelines[timeline].latest().clone();
                let block = u32::from(block);
                store.prefetch(
                    &[block],
                    &Snapshot {
                        lsn: before.lsn,
                        db_size_pages: before.size_pages,
                    },
                );
                self.commit(slot, &[block], None)?;
                let after = self.timelines[timeline].latest().clone();
                // Other reads push the block's new version out of memory, so the read below meets the prefetch.
                for other in (1..6).map(|i| (block + i) % after.size_pages.max(1)) {
                    self.read_check(&store, timeline, &after, other)?;
                }
                self.read_check(&store, timeline, &after, block)?;
                self.read_check(&store, timeline, &before, block)
            }
            Op::Branch { slot, back } => {
                let parent = self.slots[self.slot(slot)].0;
                let timeline = self.branch(parent, back)?;
                let start = self.timelines[timeline].latest().lsn;
                let store = self.start_store(self.timelines[timeline].id, start)?;
                self.slots.push((timeline, store));
                Ok(())
            }
            Op::Restore { slot, back } => {
                let slot = self.slot(slot);
                let old = self.slots[slot].0;
                let timeline = self.branch(old, back)?;
                self.slots[slot].1.close("restored");
                let start = self.timelines[timeline].latest().lsn;
                let store = self.start_store(self.timelines[timeline].id, start)?;
                self.slots[slot] = (timeline, store);
                Ok(())
            }
            Op::Restart => self.restart(),
        }
    }

    fn restart(&mut self) -> Result<(), TestCaseError> {
        let timelines: Vec<usize> = self.slots.iter().map(|(timeline, _)| *timeline).collect();
        self.slots.clear();
        self.cache = HostCache::new(&self.cache_config).map_err(fail)?;
        for timeline in timelines {
            let id = self.timelines[timeline].id;
            let start = self.timelines[timeline].history[0].lsn;
            let store = self.start_store(id, start)?;
            let latest = self.timelines[timeline].latest().lsn;
            check(store.read_lsn() == latest, || {
                format!("restarted at {}, last commit {latest}", store.read_lsn())
            })?;
            self.slots.push((timeline, store));
        }
        Ok(())
    }
}

/// Creates `id`, a branch of `parent` at `lsn`, on the pageserver (once it has ingested `lsn`) and on every
/// safekeeper.
async fn create_branch(cluster: &Cluster, id: TimelineId, parent: TimelineId, lsn: Lsn) -> TestResult {
    let mut management =
        ps::management_client::ManagementClient::connect(format!("http://{}", cluster.pageserver.address)).await?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let created = management
            .create_timeline(ps::CreateTimelineRequest {
                timeline: Some(ps::TimelineRef {
                    tenant_id: cluster.tenant.to_string(),
                    timeline_id: id.to_string(),
                }),
                ancestor_timeline_id: parent.to_string(),
                ancestor_lsn: lsn.0,
                start_lsn: 0,
            })
            .await;
        match created {
            Ok(_) => break,
            Err(status) if status.code() == tonic::Code::OutOfRange && std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(status) => return Err(status.into()),
        }
    }
    for s in &cluster.safekeepers {
        let mut client = sk::safekeeper_client::SafekeeperClient::connect(format!("http://{}", s.address)).await?;
        client
            .create_timeline(sk::CreateTimelineRequest {
                timeline: Some(sk::TimelineRef {
                    tenant_id: cluster.tenant.to_string(),
                    timeline_id: id.to_string(),
                }),
                start_lsn: lsn.0,
            })
            .await?;
    }
    Ok(())
}

#[test]
fn prefetch_memory_and_file_caches_never_serve_a_wrong_page() -> TestResult {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let cluster = runtime.block_on(Cluster::start(TenantId(0xCA), TimelineId(0xCA00), START))?;
    let cache_dir = tempfile::tempdir()?;
    let cases = std::env::var("CACHE_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        // Each case runs against real processes: shrinking would take long; the failing sequence is printed.
        max_shrink_iters: 0,
        ..Config::default()
    });
    let next_timeline = std::cell::Cell::new(0xCA00u128);
    let result = runner.run(&prop::collection::vec(op(), 4..28), |ops| {
        // Each case: a fresh root timeline, and a file cache that may hold earlier cases' pages (other
        // timelines: they must never be served here).
        next_timeline.set(next_timeline.get() + 1);
        let root = TimelineId(next_timeline.get());
        runtime.block_on(create_root(&cluster, root)).map_err(fail)?;
        let cache_config = HostCacheConfig {
            memory_budget_bytes: 4 * ENTRY_BYTES,
            file: Some(FileCacheConfig {
                path: cache_dir.path().join("file_cache"),
                size_bytes: 10 * PAGE_SIZE_BYTES as u64,
            }),
        };
        let cache = HostCache::new(&cache_config).map_err(fail)?;
        let mut world = World {
            cluster: &cluster,
            runtime: &runtime,
            cache_config,
            cache,
            timelines: vec![ModelTimeline {
                id: root,
                history: vec![State {
                    lsn: START,
                    size_pages: 0,
                    pages: BTreeMap::new(),
                }],
            }],
            slots: Vec::new(),
            next_timeline: &next_timeline,
            next_content: 0,
        };
        let store = world.start_store(root, START)?;
        world.slots.push((0, store));
        for op in &ops {
            world.apply(op)?;
        }
        Ok(())
    });
    if let Err(error) = result {
        return Err(format!("{error}").into());
    }
    let served = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
    assert!(served(&METRICS.reads_memory_total) > 0, "no read was served by memory");
    assert!(
        served(&METRICS.reads_file_total) > 0,
        "no read was served by the file cache"
    );
    assert!(
        served(&METRICS.reads_prefetch_total) > 0,
        "no read was served by a prefetch"
    );
    Ok(())
}

/// Creates a root timeline `id` starting at [`START`] on the pageserver and every safekeeper.
async fn create_root(cluster: &Cluster, id: TimelineId) -> TestResult {
    let mut management =
        ps::management_client::ManagementClient::connect(format!("http://{}", cluster.pageserver.address)).await?;
    management
        .create_timeline(ps::CreateTimelineRequest {
            timeline: Some(ps::TimelineRef {
                tenant_id: cluster.tenant.to_string(),
                timeline_id: id.to_string(),
            }),
            ancestor_timeline_id: String::new(),
            ancestor_lsn: 0,
            start_lsn: START.0,
        })
        .await?;
    for s in &cluster.safekeepers {
        let mut client = sk::safekeeper_client::SafekeeperClient::connect(format!("http://{}", s.address)).await?;
        client
            .create_timeline(sk::CreateTimelineRequest {
                timeline: Some(sk::TimelineRef {
                    tenant_id: cluster.tenant.to_string(),
                    timeline_id: id.to_string(),
                }),
                start_lsn: START.0,
            })
            .await?;
    }
    Ok(())
}
