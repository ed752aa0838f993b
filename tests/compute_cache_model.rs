//! The compute's caches never serve a page of the wrong timeline or LSN: a property test against a model.
//!
//! Real processes (three `cambium safekeeper`s, one `cambium pageserver`); in the test process,
//! `RemotePageStore`s sharing one `HostCache` whose memory budget holds 4 pages (or, in some cases, 64) and
//! whose local file cache holds 10, so pages move between memory, the file and the pageserver all the time. Random sequences of:
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
//! Edits change one byte of a block's current version back and forth (so commits go as byte-range deltas
//! against the version the store believes current, and a delta against a stale one leaves a byte wrong),
//! settles let commits be acknowledged with no read in between, and direct reads ask the pageserver itself
//! (no cache) for a block at a commit, so what the WAL made of the pages is checked too.
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
/// Edits change the first few blocks only, again and again (as the rows of a small hot table are).
const EDITED_BLOCKS: u8 = 3;
/// Where an edit sets its flag (past the stamp: content number and block).
const EDIT_OFFSET: usize = 100;

#[derive(Clone, Debug)]
enum Op {
    Write { slot: u8, blocks: Vec<u8> },
    Edit { slot: u8, edits: Vec<(u8, bool)> },
    Settle { slot: u8 },
    Direct { slot: u8, block: u8, back: u8 },
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
        6 => (any::<u8>(), prop::collection::vec((0..EDITED_BLOCKS, any::<bool>()), 1..3)).prop_map(|(slot, edits)| Op::Edit { slot, edits }),
        3 => any::<u8>().prop_map(|slot| Op::Settle { slot }),
        3 => (any::<u8>(), 0..BLOCKS_MAX, 0..4u8).prop_map(|(slot, block, back)| Op::Direct { slot, block, back }),
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
        // New content starts with its edit flag down (see `edited`).
        page[EDIT_OFFSET] = 0;
        Bytes::from(page)
    }

    /// `block`'s current version on `timeline` with its stamp renewed and the byte at [`EDIT_OFFSET`] set to
    /// `flag`: a few bytes from the current version, so the commit sends a byte-range delta, and a flag that
    /// goes back and forth, so a delta made against an older version than the current one misses it.
    fn edited(&mut self, timeline: usize, block: u32, flag: bool) -> Bytes {
        let current = ModelTimeline::expected(self.timelines[timeline].latest(), block);
        let mut page = current.map_or_else(|| vec![0u8; PAGE_SIZE_BYTES], |page| page.to_vec());
        self.next_content += 1;
        page[..8].copy_from_slice(&self.next_content.to_le_bytes());
        page[8..12].copy_from_slice(&block.to_le_bytes());
        page[EDIT_OFFSET] = u8::from(flag);
        Bytes::from(page)
    }

    /// Commits `blocks` (and every block a growth adds) and the new size on `slot`'s store and in the model.
    fn commit(&mut self, slot: usize, blocks: &[u32], size_pages: Option<u32>) -> Result<(), TestCaseError> {
        let written = blocks.iter().map(|&block| (block, None)).collect::<Vec<_>>();
        self.commit_edits(slot, &written, size_pages)
    }

    /// Commits `edits` (a block and, for an edit, its flag; else new content) and every block a growth adds,
    /// and the new size, on `slot`'s store and in the model.
    fn commit_edits(
        &mut self,
        slot: usize,
        edits: &[(u32, Option<bool>)],
        size_pages: Option<u32>,
    ) -> Result<(), TestCaseError> {
        let (timeline, store) = self.slots[slot].clone();
        let latest = self.timelines[timeline].latest().clone();
        let written_max = edits.iter().map(|(b, _)| b + 1).max().unwrap_or(0);
        let size = size_pages.unwrap_or(latest.size_pages.max(written_max));
        let mut state = latest.clone();
        let mut written: BTreeMap<u32, Bytes> = BTreeMap::new();
        let grown = (latest.size_pages..size).map(|block| (block, None));
        for (block, flag) in edits.iter().copied().chain(grown) {
            let page = match flag {
                Some(flag) if block < latest.size_pages => self.edited(timeline, block, flag),
                _ => self.content(block),
            };
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
            Op::Edit { slot, ref edits } => {
                let edits: Vec<(u32, Option<bool>)> = edits
                    .iter()
                    .map(|&(block, flag)| (u32::from(block), Some(flag)))
                    .collect();
                self.commit_edits(self.slot(slot), &edits, None)
            }
            Op::Settle { slot } => {
                // The commits in flight are acknowledged; nothing is read.
                let (timeline, store) = self.slots[self.slot(slot)].clone();
                let latest = self.timelines[timeline].latest().lsn;
                store.wait_durable(latest).map_err(fail)
            }
            Op::Direct { slot, block, back } => {
                let timeline = self.slots[self.slot(slot)].0;
                let state = self.timelines[timeline].back(back).clone();
                let block = u32::from(block);
                let Some(expected) = ModelTimeline::expected(&state, block) else {
                    return Ok(());
                };
                let id = self.timelines[timeline].id;
                let page = self
                    .runtime
                    .block_on(get_page(self.cluster, id, block, state.lsn))
                    .map_err(fail)?;
                check(page == expected, || {
                    format!(
                        "the pageserver's timeline {id} block {block} at {}: {:?} (flag {}), expected {:?} (flag {})",
                        state.lsn,
                        &page[..12],
                        page[EDIT_OFFSET],
                        &expected[..12],
                        expected[EDIT_OFFSET]
                    )
                })
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
    let case = Case {
        cluster: &cluster,
        runtime: &runtime,
        cache_dir: cache_dir.path(),
        next_timeline: &next_timeline,
    };
    // The sequence that once corrupted a page: two commits of one block acknowledged back to back, the second
    // a delta made against the version before the first (a read in front so the cache holds that version).
    let edit = |flag| Op::Edit {
        slot: 0,
        edits: vec![(0, flag)],
    };
    let seen = vec![
        Op::Write {
            slot: 0,
            blocks: vec![2],
        },
        Op::Read {
            slot: 0,
            block: 0,
            back: 0,
        },
        edit(true),
        edit(false),
        Op::Direct {
            slot: 0,
            block: 0,
            back: 0,
        },
    ];
    for roomy in [false, true] {
        case.run(&seen, roomy)
            .map_err(|e| format!("the sequence seen (roomy {roomy}): {e}"))?;
    }
    // A memory budget of 4 pages moves pages between memory, the file and the pageserver all the time; one of
    // 64 keeps older versions in memory next to newer ones.
    let result = runner.run(
        &(prop::collection::vec(op(), 4..28), prop::bool::ANY),
        |(ops, roomy)| case.run(&ops, roomy),
    );
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

/// What every case shares: the cluster, a runtime, the file cache's directory, the next timeline id.
struct Case<'a> {
    cluster: &'a Cluster,
    runtime: &'a tokio::runtime::Runtime,
    cache_dir: &'a std::path::Path,
    next_timeline: &'a std::cell::Cell<u128>,
}

impl Case<'_> {
    /// Runs `ops` on a fresh root timeline with a memory budget of 64 pages (`roomy`) or 4, and a file cache
    /// that may hold earlier cases' pages (other timelines: they must never be served here).
    fn run(&self, ops: &[Op], roomy: bool) -> Result<(), TestCaseError> {
        self.next_timeline.set(self.next_timeline.get() + 1);
        let root = TimelineId(self.next_timeline.get());
        self.runtime.block_on(create_root(self.cluster, root)).map_err(fail)?;
        let cache_config = HostCacheConfig {
            memory_budget_bytes: if roomy { 64 } else { 4 } * ENTRY_BYTES,
            file: Some(FileCacheConfig {
                path: self.cache_dir.join("file_cache"),
                size_bytes: 10 * PAGE_SIZE_BYTES as u64,
            }),
        };
        let cache = HostCache::new(&cache_config).map_err(fail)?;
        let mut world = World {
            cluster: self.cluster,
            runtime: self.runtime,
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
            next_timeline: self.next_timeline,
            next_content: 0,
        };
        let store = world.start_store(root, START)?;
        world.slots.push((0, store));
        for op in ops {
            world.apply(op)?;
        }
        Ok(())
    }
}

/// `block` of timeline `id` at `lsn`, asked of the pageserver itself (no cache on the way).
async fn get_page(cluster: &Cluster, id: TimelineId, block: u32, lsn: Lsn) -> Result<Bytes, String> {
    let mut pages =
        ps::page_service_client::PageServiceClient::connect(format!("http://{}", cluster.pageserver.address))
            .await
            .map_err(|e| e.to_string())?;
    let response = pages
        .get_page(ps::GetPageRequest {
            timeline: Some(ps::TimelineRef {
                tenant_id: cluster.tenant.to_string(),
                timeline_id: id.to_string(),
            }),
            key: storage::Key::page(block).0,
            read_lsn: lsn.0,
            not_modified_since: 0,
            request_id: 0,
        })
        .await
        .map_err(|status| format!("GetPage {block} at {lsn}: {status}"))?;
    Ok(response.into_inner().page)
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
