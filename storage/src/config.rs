//! `TimelineConfig`: the knobs of flush, compaction, image creation and GC.

use crate::fsio::Durability;

/// Tuning of a tenant's timelines. Defaults follow DESIGN.md section 2.
#[derive(Clone, Debug)]
pub struct TimelineConfig {
    /// Freeze the open in-memory layer once it holds this many WAL bytes.
    pub checkpoint_distance_bytes: u64,
    /// Freeze the open in-memory layer once it has been open this long with data in it.
    pub checkpoint_timeout_ms: u64,
    /// Merge L0 layers into L1 once there are this many.
    pub compaction_l0_threshold: usize,
    /// Write an image layer for a key partition once this many delta layers touch it above its last image.
    pub image_creation_threshold: usize,
    /// Keys per partition of L1 and image layers (131072 pages = 1 GiB of 8 KiB pages).
    pub partition_keys: u64,
    /// GC keeps at least this much WAL history behind `last_record_lsn`.
    pub gc_horizon_bytes: u64,
    /// GC keeps at least this much time of history.
    pub pitr_interval_ms: u64,
    /// Whether to fsync.
    pub durability: Durability,
    /// Bytes of a transaction's pending group (its parts before its commit) kept in memory; the rest goes to a
    /// temporary file in the timeline's directory until the commit applies it or the group is abandoned.
    pub group_memory_bytes_max: u64,
    /// Deltas of one key in a row in the open in-memory layer after which ingest makes the key's newest version
    /// the whole page it makes (reconstructed then): a read applies at most about twice this many deltas, and a
    /// page changed by every commit costs one more page image per this many commits. At least 2.
    pub delta_run_max: usize,
}

impl Default for TimelineConfig {
    fn default() -> Self {
        TimelineConfig {
            checkpoint_distance_bytes: 64 * 1024 * 1024,
            checkpoint_timeout_ms: 10 * 60 * 1000,
            compaction_l0_threshold: 10,
            image_creation_threshold: 3,
            partition_keys: 128 * 1024,
            gc_horizon_bytes: 64 * 1024 * 1024,
            pitr_interval_ms: 7 * 24 * 3600 * 1000,
            durability: Durability::Fsync,
            group_memory_bytes_max: 64 * 1024 * 1024,
            delta_run_max: 64,
        }
    }
}

impl TimelineConfig {
    /// Checks the values make sense together.
    pub fn validate(&self) -> Result<(), String> {
        if self.checkpoint_distance_bytes == 0 {
            return Err("checkpoint_distance_bytes must be positive".into());
        }
        if self.compaction_l0_threshold < 2 {
            return Err("compaction_l0_threshold must be at least 2".into());
        }
        if self.image_creation_threshold == 0 {
            return Err("image_creation_threshold must be positive".into());
        }
        if self.delta_run_max < 2 {
            return Err("delta_run_max must be at least 2".into());
        }
        if self.partition_keys == 0 {
            return Err("partition_keys must be positive".into());
        }
        Ok(())
    }
}
