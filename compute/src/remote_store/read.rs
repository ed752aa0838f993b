//! The store's read path: the host cache's memory, a prefetched page, the host's file cache, then one
//! `GetPage`; prefetch requests; and where a timeline comes from (`GetTimelineInfo`), for warm branches.

use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use bytes::Bytes;
use cambium_types::{Key, Lsn, TimelineId, PAGE_SIZE_BYTES};
use proto::pageserver as pb;
use proto::pageserver::management_client::ManagementClient;
use tonic::transport::Channel;

use super::{check_state, RemotePageStore};
use crate::cache::{Admission, Ancestry, Tier};
use crate::metrics::METRICS;
use crate::page_store::{PageStoreError, Snapshot};

impl RemotePageStore {
    /// [`crate::page_store::PageStore::read_page`]: see the module doc.
    pub(super) fn read_page_at(&self, block: u32, snapshot: &Snapshot) -> Result<Option<Bytes>, PageStoreError> {
        let lsn = {
            let state = self.state.lock();
            check_state(&state)?;
            if snapshot.lsn > state.head_lsn {
                return Err(PageStoreError::Unavailable(format!(
                    "read at {} is past this store's latest commit {}",
                    snapshot.lsn, state.head_lsn
                )));
            }
            if block >= snapshot.db_size_pages {
                return Ok(None);
            }
            // A commit in flight up to the snapshot decides the page, else its version at the acknowledged
            // LSN is the snapshot's (`in_flight`).
            if snapshot.lsn > state.read_lsn {
                if let Some(page) = state.pending_page(block, snapshot.lsn) {
                    return Ok(Some(page));
                }
            }
            let lsn = snapshot.lsn.min(state.read_lsn);
            // Commits' writes get their LSN before anything is looked up.
            state.cache.observe(state.read_lsn);
            if let Some(page) = state.cache.get(block, lsn) {
                return Ok(Some(page));
            }
            lsn
        };
        // A block the VFS hinted at is read by a scan: it must not flush memory (`Admission`).
        let admission = if self.prefetcher.take_hint(block) {
            Admission::Scan
        } else {
            Admission::Memory
        };
        if let Some((page, from_file)) = self.prefetcher.take(block, lsn, self.get_page_timeout) {
            match from_file {
                Some(fact) => self.cache.admit_from_file(fact, &page, admission),
                None => self.cache.insert_prefetched(self.timeline_id, block, &page, lsn),
            }
            return Ok(Some(page));
        }
        if let Some(page) = self.cache.get_from_file(self.timeline_id, block, lsn, admission) {
            return Ok(Some(page));
        }
        let page = self.fetch_page(block, lsn)?;
        METRICS.reads_pageserver_total.fetch_add(1, Ordering::Relaxed);
        if let Some(page) = &page {
            self.cache.insert_read(self.timeline_id, block, page, lsn, admission);
        }
        Ok(page)
    }

    /// [`crate::page_store::PageStore::prefetch`]: requests the blocks the caches cannot serve.
    pub(super) fn prefetch_at(&self, blocks: &[u32], snapshot: &Snapshot) {
        if self.prefetcher.window_pages() == 0 || blocks.is_empty() {
            return;
        }
        {
            let state = self.state.lock();
            if check_state(&state).is_err() || snapshot.lsn > state.read_lsn {
                return;
            }
            state.cache.observe(state.read_lsn);
        }
        self.prefetcher.note_hints(blocks);
        let (mut from_file, mut from_pageserver) = (Vec::new(), Vec::new());
        for &block in blocks.iter().filter(|&&block| block < snapshot.db_size_pages) {
            match self.cache.locate(self.timeline_id, block, snapshot.lsn) {
                Some(Tier::Memory) => {}
                Some(Tier::File) => from_file.push(block),
                None => from_pageserver.push(block),
            }
        }
        self.prefetcher
            .request_from_file(self.runtime.get(), &from_file, snapshot.lsn);
        self.prefetcher.request(
            self.runtime.get(),
            &self.pages(),
            &self.timeline,
            &from_pageserver,
            snapshot.lsn,
        );
    }

    /// One `GetPage` at `read_lsn`, with a deadline; the page is checked before it is returned. A read LSN
    /// is always one this compute saw committed on a quorum, so a pageserver that has not ingested it yet
    /// will: a read that runs out of time waiting (a large
    /// transaction's group is applied at its commit, all at once) is asked again, up to
    /// [`super::GET_PAGE_ATTEMPTS_MAX`] times in all; any other failure ends the read at once.
    pub(super) fn fetch_page(&self, block: u32, read_lsn: Lsn) -> Result<Option<Bytes>, PageStoreError> {
        let mut attempt = 1;
        loop {
            match self.fetch_page_once(block, read_lsn) {
                Err(FetchError::TimedOut(reason)) if attempt < super::GET_PAGE_ATTEMPTS_MAX => {
                    tracing::warn!(block, %read_lsn, attempt, %reason, "GetPage timed out; asking again");
                    attempt += 1;
                }
                Err(FetchError::Gone(reason)) if attempt < GONE_ATTEMPTS_MAX => {
                    // The database may be moving to another pageserver: the host re-points this store.
                    tracing::warn!(block, %read_lsn, attempt, %reason, "GetPage found no tenant; asking again");
                    attempt += 1;
                    std::thread::sleep(GONE_RETRY_PAUSE);
                }
                Err(FetchError::TimedOut(reason) | FetchError::Failed(reason) | FetchError::Gone(reason)) => {
                    return Err(PageStoreError::Unavailable(format!(
                        "GetPage {block} at {read_lsn}: {reason}"
                    )))
                }
                Err(FetchError::Page(error)) => return Err(error),
                Ok(page) => return Ok(page),
            }
        }
    }

    fn fetch_page_once(&self, block: u32, read_lsn: Lsn) -> Result<Option<Bytes>, FetchError> {
        let request = pb::GetPageRequest {
            timeline: Some(self.timeline.clone()),
            key: Key::page(block).0,
            read_lsn: read_lsn.0,
            not_modified_since: 0,
            request_id: 0,
        };
        let (mut client, timeout) = (self.pages(), self.get_page_timeout);
        let work = async move {
            let mut request = tonic::Request::new(request);
            request.set_timeout(timeout);
            match tokio::time::timeout(timeout, client.get_page(request)).await {
                Ok(result) => result,
                Err(_) => Err(tonic::Status::deadline_exceeded("no GetPage answer in time")),
            }
        };
        match self.run(timeout, work) {
            Ok(Ok(response)) => {
                let page = response.into_inner().page;
                // Bytes from a peer are checked before use.
                if page.len() != PAGE_SIZE_BYTES {
                    return Err(FetchError::Page(PageStoreError::InvalidPage {
                        block,
                        len_bytes: page.len(),
                    }));
                }
                Ok(Some(page))
            }
            // A page outside the database; a missing tenant or timeline is not an empty page.
            Ok(Err(status)) if status.code() == tonic::Code::NotFound && status.message().starts_with("page ") => {
                Ok(None)
            }
            Ok(Err(status)) if status.code() == tonic::Code::NotFound => Err(FetchError::Gone(status.to_string())),
            // A deadline the pageserver reported (its wait for the LSN) or the client's own (`Cancelled`
            // "Timeout expired").
            Ok(Err(status)) if matches!(status.code(), tonic::Code::DeadlineExceeded | tonic::Code::Cancelled) => {
                Err(FetchError::TimedOut(status.to_string()))
            }
            Ok(Err(status)) => Err(FetchError::Failed(status.to_string())),
            Err(RecvTimeoutError::Timeout) => Err(FetchError::TimedOut("no answer in time".to_owned())),
            Err(RecvTimeoutError::Disconnected) => Err(FetchError::Failed("the store is shutting down".to_owned())),
        }
    }
}

/// Attempts of one read that finds no tenant or timeline, at most (see [`FetchError::Gone`]).
const GONE_ATTEMPTS_MAX: u32 = 50;
/// The pause before asking again after [`FetchError::Gone`].
const GONE_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// How one GetPage attempt failed.
enum FetchError {
    /// It ran out of time (the pageserver still waiting for the read LSN, or no answer): worth asking again.
    TimedOut(String),
    /// Any other failure, reported at once.
    Failed(String),
    /// The pageserver holds no such tenant or timeline (a database that moved away): asked again after a pause,
    /// up to [`GONE_ATTEMPTS_MAX`] times, in case the store is re-pointed meanwhile.
    Gone(String),
    /// The answer was not a page.
    Page(PageStoreError),
}

/// Where `timeline` comes from, as the pageserver says (`GetTimelineInfo`, with a deadline). `None` if it does
/// not answer or answers nonsense: the store then works, only without its ancestor's cached pages.
pub(super) async fn timeline_ancestry(
    channel: Channel,
    timeline: pb::TimelineRef,
    timeout: Duration,
) -> Option<Ancestry> {
    let mut client = ManagementClient::new(channel);
    let mut request = tonic::Request::new(timeline);
    request.set_timeout(timeout);
    let info = match tokio::time::timeout(timeout, client.get_timeline_info(request)).await {
        Ok(Ok(response)) => response.into_inner(),
        Ok(Err(status)) => {
            tracing::warn!(%status, "no timeline info: the branch starts without its ancestor's cached pages");
            return None;
        }
        Err(_) => {
            tracing::warn!("no timeline info in time: the branch starts without its ancestor's cached pages");
            return None;
        }
    };
    let parent = match info.ancestor_timeline_id.as_str() {
        "" => None,
        id => Some((id.parse::<TimelineId>().ok()?, Lsn(info.ancestor_lsn))),
    };
    Some(Ancestry {
        start_lsn: Lsn(info.start_lsn),
        parent,
    })
}
