//! The errors of the compute's hosts: why a compute or a [`ComputeHost`](crate::host::ComputeHost) could not
//! start, or could not serve a name.

use crate::remote_store::RemoteStoreError;
use crate::vfs::VfsError;

/// Why a compute or a [`ComputeHost`](crate::host::ComputeHost) could not start, or could not serve a name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ComputeError {
    /// A branch's connection name cannot be served.
    #[error("invalid branch name {0:?}: {1}")]
    InvalidBranchName(String, &'static str),
    /// A branch's store did not start.
    #[error("starting the store of {name:?}: {source}")]
    Store {
        /// The branch's connection name.
        name: String,
        /// Why.
        source: RemoteStoreError,
    },
    /// A name could not be registered with the VFS.
    #[error("registering with the VFS: {0}")]
    Register(#[from] VfsError),
    /// The listener could not be bound.
    #[error("listening on {0}: {1}")]
    Listen(String, std::io::Error),
    /// The connection name is already used otherwise (a branch's name cannot be an alias and back).
    #[error("connection name {0:?} is already {1}")]
    NameTaken(String, &'static str),
    /// The branch was detached or replaced (with the reason its store was closed): it serves no more.
    #[error("branch {0:?} is no longer served: {1}")]
    Detached(String, String),
    /// The local file cache could not be opened.
    #[error("opening the file cache: {0}")]
    Cache(#[from] crate::cache::FileCacheError),
    /// The blocking task that started a store ended without an answer.
    #[error("the store start task failed: {0}")]
    Task(String),
}
