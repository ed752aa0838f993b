//! `StorageError`: everything the engine's public operations can fail with.

use std::path::PathBuf;

use crate::id::TimelineId;
use crate::key::Key;
use crate::lsn::Lsn;

/// An engine error. Reads of damaged files give `Corrupt`, never a wrong page or a panic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The LSN is below the timeline's GC cutoff: that history is gone.
    #[error("LSN {lsn} is below the GC cutoff {gc_cutoff}")]
    LsnBelowGcCutoff {
        /// The LSN asked for.
        lsn: Lsn,
        /// The oldest readable LSN.
        gc_cutoff: Lsn,
    },
    /// The LSN is past what the timeline has ingested.
    #[error("LSN {lsn} is ahead of the last record LSN {last_record_lsn}")]
    LsnAhead {
        /// The LSN asked for.
        lsn: Lsn,
        /// The newest readable LSN.
        last_record_lsn: Lsn,
    },
    /// The LSN is before the timeline's start and the timeline has no ancestor to read from.
    #[error("LSN {lsn} is before the start {start_lsn} of timeline {timeline}")]
    LsnBeforeStart {
        /// The timeline.
        timeline: TimelineId,
        /// The LSN asked for.
        lsn: Lsn,
        /// The timeline's first LSN.
        start_lsn: Lsn,
    },
    /// The ancestor has not ingested up to this branch's branch point yet (after a restart, its WAL must be
    /// re-fed first).
    #[error("ancestor {ancestor} is at {last_record_lsn}, behind the branch point {branch_lsn}")]
    AncestorBehind {
        /// The ancestor timeline.
        ancestor: TimelineId,
        /// The branch point.
        branch_lsn: Lsn,
        /// How far the ancestor has ingested.
        last_record_lsn: Lsn,
    },
    /// A file's bytes fail their checks.
    #[error("corrupt file {}: at offset {offset}: {reason}", file.display())]
    Corrupt {
        /// The damaged file.
        file: PathBuf,
        /// Where the damage was found.
        offset: u64,
        /// What check failed.
        reason: String,
    },
    /// A layer file missing locally could not be fetched (see [`crate::layer::fetch`]). Trying again may succeed.
    #[error("fetching layer {}: {reason}", file.display())]
    Fetch {
        /// The layer file that was to be fetched.
        file: PathBuf,
        /// Why the fetch failed.
        reason: String,
    },
    /// A page outside the database at that LSN, never written.
    #[error("page {key} does not exist at {lsn}")]
    PageNotFound {
        /// The key.
        key: Key,
        /// The LSN read.
        lsn: Lsn,
    },
    /// No such timeline.
    #[error("timeline {0} not found")]
    TimelineNotFound(TimelineId),
    /// A timeline with this id exists already.
    #[error("timeline {0} already exists")]
    TimelineExists(TimelineId),
    /// The timeline has child branches and cannot be deleted.
    #[error("timeline {timeline} has {children} child timelines")]
    HasChildren {
        /// The timeline.
        timeline: TimelineId,
        /// How many children.
        children: usize,
    },
    /// The timeline has no child branches: nothing reads it as an ancestor, so there is nothing to seal it for.
    #[error("timeline {0} has no child timelines to be sealed for")]
    NoChildren(TimelineId),
    /// A branch point past where a sealed timeline ends.
    #[error("timeline {timeline} is sealed at {end_lsn}; {lsn} is past it")]
    PastSeal {
        /// The sealed timeline.
        timeline: TimelineId,
        /// Where it ends.
        end_lsn: Lsn,
        /// The LSN asked for.
        lsn: Lsn,
    },
    /// A record that does not start where the previous one ended.
    #[error("record at {got} does not follow the last record, which ended at {expected}")]
    OutOfOrder {
        /// Where the next record must start.
        expected: Lsn,
        /// Where it starts.
        got: Lsn,
    },
    /// A group's part or commit that does not fit the pending group: a part that starts a group elsewhere than
    /// at its group LSN, or a commit naming a group whose parts were not ingested. Ingest resumes at or before a
    /// group's first part, so this is a writer's bug, never a restart.
    #[error("WAL group frame at {lsn} names group {group_lsn}, which was not started there")]
    GroupMismatch {
        /// The frame's start.
        lsn: Lsn,
        /// The group it names.
        group_lsn: Lsn,
    },
    /// A record that breaks the value rules.
    #[error("invalid record: {0}")]
    InvalidRecord(#[from] crate::wal::WalEncodeError),
    /// A timestamp with no history at or before it.
    #[error("no history at or before timestamp {timestamp_us} µs (earliest commit is at {earliest_us:?} µs)")]
    TimestampBeforeHistory {
        /// The timestamp asked for.
        timestamp_us: u64,
        /// The earliest commit timestamp known, if any.
        earliest_us: Option<u64>,
    },
    /// An earlier write or fsync failed; the timeline takes no more writes until it is reloaded from disk.
    #[error("timeline {0} is poisoned by an earlier I/O failure; reload it")]
    Poisoned(TimelineId),
    /// A WAL frame that does not decode.
    #[error("bad WAL: {0}")]
    Wal(#[from] crate::wal::WalDecodeError),
    /// A configuration that makes no sense.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// An I/O error on a path.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Shorthand for engine results.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Wraps an `io::Error` with its path.
pub(crate) fn io_err<P: Into<PathBuf>>(path: P) -> impl FnOnce(std::io::Error) -> StorageError {
    // The path is copied only if the call failed: every write and fsync passes one.
    move |source| StorageError::Io {
        path: path.into(),
        source,
    }
}

impl From<crate::fsio::IoError> for StorageError {
    fn from(error: crate::fsio::IoError) -> StorageError {
        StorageError::Io {
            path: error.path,
            source: error.source,
        }
    }
}

/// A `Corrupt` error.
pub(crate) fn corrupt(file: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> StorageError {
    StorageError::Corrupt {
        file: file.into(),
        offset,
        reason: reason.into(),
    }
}
