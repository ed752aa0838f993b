//! Remote storage: every tenant's layer files and timeline index copied to an object store after each flush,
//! `remote_consistent_lsn` per timeline, the rebuild of missing tenants from the object store at startup (small
//! files only), and layers downloaded on demand when the local disk lacks them (`fetch`). DESIGN.md section 2,
//! "Remote storage" and "Crash safety".
//!
//! ```text
//! <root>/tenants/<tenant id>/branches.log                                the tenant's branch log (a valid prefix)
//! <root>/tenants/<tenant id>/timelines/<timeline id>/<layer file name>   immutable, uploaded once
//! <root>/tenants/<tenant id>/timelines/<timeline id>/timestamps         the first `timestamp_count` entries
//! <root>/tenants/<tenant id>/timelines/<timeline id>/metadata           the local metadata file, byte for byte
//! ```
//!
//! `<root>` is a local directory (`file:///abs/path` or a plain path) or `s3://bucket/prefix` (any
//! S3-compatible store, configured from the `AWS_*` environment).
//!
//! **Invariant:** a remote `metadata` never names a missing object. One timeline is uploaded by one job at a
//! time, in this order: the layers the local metadata snapshot names (each checked whole, uploaded once),
//! then `timestamps` holding at least the snapshot's `timestamp_count` entries (the object only grows), then
//! the metadata bytes themselves, then the tenant's `branches.log`. Only after that is `remote_consistent_lsn`
//! advanced to the snapshot's `disk_consistent_lsn`, and only after that are remote layers the new metadata no
//! longer names deleted. A crash anywhere leaves the previous metadata with all its objects, plus some
//! unreferenced layers that the next upload deletes.
//!
//! **Invariant:** `remote_consistent_lsn` never passes what a rebuild would find: a rebuild downloads the
//! newest remote metadata of every timeline the remote `branches.log` lists, and `remote_consistent_lsn` is
//! the `disk_consistent_lsn` of a metadata uploaded before a `branches.log` that lists its timeline. So the
//! WAL the safekeepers may remove once it is reported (below it) is never needed again.
//!
//! The local snapshot is consistent without stopping flushes: the metadata file is replaced atomically, layer
//! files are immutable and removed only after a newer metadata no longer names them (so a layer missing while
//! uploading means the snapshot is stale: take a new one), and the timestamps file only grows past the count a
//! metadata names.
//!
//! **Invariant (layers on demand):** a layer the local metadata names but the local disk lacks is in the
//! remote. Such a layer comes either from a rebuild (the local metadata is a remote one, which never names a
//! missing object) or from a local loss of a layer uploaded before (a layer is uploaded before any metadata
//! naming it). A remote layer is deleted only after an uploaded metadata dropped it, which the local timeline
//! did first; a read still holding the older layer set then fails (`Fetch`), as it would locally. Every
//! tenant is opened with a fetcher when remote storage is configured, so such a layer is downloaded on its
//! first use: see `fetch` for how, and on what threads.

mod download;
mod fetch;
mod files;
mod store;
mod upload;

pub use download::{attach, rebuild};
pub use fetch::LayerDownloader;
pub use store::{RemoteConfig, RemoteError, RemoteStorage};
pub use upload::{RemoteConsistentLsns, UploadQueue, Uploader, UploaderConfig};

/// Marks `tenant`'s remote copy as this pageserver's (its `owner` object = [`RemoteStorage::owner`]); nothing
/// for a pageserver without an id. Written when a tenant is attached as its owner, before anything of it is
/// uploaded, so a pageserver that owned it before stops uploading it ([`owned_elsewhere`]).
pub async fn claim(remote: &RemoteStorage, tenant: storage::TenantId) -> Result<(), RemoteError> {
    if let Some(owner) = remote.owner() {
        remote
            .put_bytes(&remote.owner_key(tenant), bytes::Bytes::from(owner.to_owned()))
            .await?;
    }
    Ok(())
}

/// The other pageserver `tenant`'s remote `owner` object names, if it names one that is not this one (a
/// pageserver without an id, or a tenant not marked yet: `None`).
pub(crate) async fn owned_elsewhere(
    remote: &RemoteStorage,
    tenant: storage::TenantId,
) -> Result<Option<String>, RemoteError> {
    let Some(own) = remote.owner() else {
        return Ok(None);
    };
    let marker = remote.get_bytes(&remote.owner_key(tenant)).await?;
    Ok(marker
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .filter(|marker| marker != own))
}
