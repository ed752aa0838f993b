//! Replicas (`PullTimeline`, see [`crate::pull`]) on this node's side: one pull per timeline at a time, what
//! the node has of the timeline (refused during the quiet period if it has nothing usable), the staging
//! directory, and the install (see the module doc of [`super`] for the crash argument).

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cambium_types::{Lsn, TimelineKey};
use safekeeper_core::protocol::AcceptorState;

use super::dirs::{open_timeline_dir, raise_staged_control, remove_tree_if_exists, swap_dirs, sync_dir_node};
use super::{create_dir_durable, io_error, NodeError, SafekeeperNode, Slot, Timeline, STAGING_SUFFIX};
use crate::filestore::FileControl;

/// What a node knows of a timeline it is asked to pull (see [`SafekeeperNode::local_for_pull`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocalCopy {
    /// No timeline here.
    Missing,
    /// The timeline is served here with this state.
    Ready(AcceptorState),
    /// The timeline failed to load; the term its control file promised, if that file is readable.
    Broken {
        /// The promised term.
        term: Option<safekeeper_core::protocol::Term>,
    },
}

/// What installing a replica did.
#[derive(Debug)]
pub enum Installed {
    /// The replica is served now.
    Replaced(Arc<Timeline>),
    /// The timeline here had caught up meanwhile: the replica was dropped.
    NotNeeded(Arc<Timeline>),
}

/// Keeps one timeline's pull exclusive while it lives.
#[derive(Debug)]
pub struct PullGuard {
    node: Arc<SafekeeperNode>,
    key: TimelineKey,
}

impl Drop for PullGuard {
    fn drop(&mut self) {
        self.node.pulling.lock().remove(&self.key);
    }
}

impl SafekeeperNode {
    /// Sets the quiet period (default [`super::PULL_QUIET_PERIOD_MS`]). Shorter only where no proposer can hold a vote
    /// of a lost copy: tests, or a node that is known never to have had the timelines it will pull.
    pub fn set_pull_quiet_period(&self, period: Duration) {
        *self.pull_quiet_period.lock() = period;
    }

    /// The directory a replica of `key` is written to before it is installed.
    pub fn staging_dir(&self, key: TimelineKey) -> PathBuf {
        self.config
            .data_dir
            .join(key.0.to_string())
            .join(format!("{}{STAGING_SUFFIX}", key.1))
    }

    /// Makes the pull of `key` exclusive until the guard is dropped (`PullInProgress` if one runs).
    pub fn begin_pull(self: &Arc<Self>, key: TimelineKey) -> Result<PullGuard, NodeError> {
        if self.is_shut_down() {
            return Err(NodeError::ShuttingDown);
        }
        if !self.pulling.lock().insert(key) {
            return Err(NodeError::PullInProgress { key });
        }
        Ok(PullGuard {
            node: Arc::clone(self),
            key,
        })
    }

    /// What this node has of `key`, for a pull: `QuietPeriod` if it is missing or broken here and the node
    /// opened less than its quiet period ago. Blocks on the timeline's lock (and reads a broken one's control
    /// file).
    pub fn local_for_pull(&self, key: TimelineKey) -> Result<LocalCopy, NodeError> {
        let local = match self.timeline(key) {
            Ok(timeline) => return Ok(LocalCopy::Ready(timeline.run_blocking(|acceptor| acceptor.state())?)),
            Err(NodeError::NotFound { .. }) => LocalCopy::Missing,
            Err(NodeError::Broken { .. }) => LocalCopy::Broken {
                term: FileControl::load(&self.timeline_dir(key))
                    .ok()
                    .flatten()
                    .map(|control| control.term),
            },
            Err(other) => return Err(other),
        };
        let quiet = *self.pull_quiet_period.lock();
        let open_for = self.opened_at.elapsed();
        if open_for < quiet {
            return Err(NodeError::QuietPeriod {
                key,
                remaining_ms: (quiet - open_for).as_millis() as u64,
            });
        }
        Ok(local)
    }

    /// Creates the empty staging directory of `key` (durably, with the tenant directory), after removing any
    /// left by an earlier attempt. Blocks on disk I/O.
    pub fn prepare_staging_blocking(&self, key: TimelineKey) -> Result<PathBuf, NodeError> {
        let durability = self.config.store.durability;
        let tenant_dir = self.config.data_dir.join(key.0.to_string());
        create_dir_durable(&tenant_dir, durability)?;
        let staging = self.staging_dir(key);
        remove_tree_if_exists(&staging)?;
        create_dir_durable(&staging, durability)?;
        Ok(staging)
    }

    /// Removes the staging directory of `key` (a pull that failed). Blocks on disk I/O; failures are logged.
    pub fn discard_staging_blocking(&self, key: TimelineKey) {
        let staging = self.staging_dir(key);
        if let Err(error) = remove_tree_if_exists(&staging) {
            tracing::warn!(path = %staging.display(), %error, "could not remove a replica's staging directory; the next pull or open will");
        }
    }

    /// Installs the complete replica in the staging directory of `key` (see the module doc), unless the
    /// timeline here is, by now, at least at `copy_position` (the replica's `(last log term, flush LSN)`):
    /// then the replica is dropped. The replica's control file gets the higher of its term and the term
    /// promised here, and the higher commit LSN. Blocks on disk I/O and on the timeline's lock.
    pub fn install_pull_blocking(
        &self,
        key: TimelineKey,
        copy_position: (safekeeper_core::protocol::Term, Lsn),
    ) -> Result<Installed, NodeError> {
        if self.is_shut_down() {
            return Err(NodeError::ShuttingDown);
        }
        let _installing = self.create_lock.lock();
        let slot = match self.timelines.read().get(&key) {
            Some(Slot::Ready(timeline)) => Some(Arc::clone(timeline)),
            Some(Slot::Broken(_)) | None => None,
        };
        let staging = self.staging_dir(key);
        let dir = self.timeline_dir(key);
        let durability = self.config.store.durability;
        let tenant_dir = self.config.data_dir.join(key.0.to_string());
        match slot {
            Some(timeline) => {
                // Under the acceptor lock from the check to the swap: nothing is appended to the old copy after
                // it was judged behind.
                let acceptor = timeline.acceptor.lock();
                timeline.check_usable()?;
                let current = acceptor.state();
                if current.log_position() >= copy_position {
                    drop(acceptor);
                    self.discard_staging_blocking(key);
                    tracing::info!(node = self.config.node_id, tenant = %key.0, timeline = %key.1, "the timeline caught up during the pull; replica dropped");
                    return Ok(Installed::NotNeeded(timeline));
                }
                raise_staged_control(&staging, &current, copy_position.1, durability)?;
                if dir.exists() {
                    swap_dirs(&dir, &staging, &tenant_dir, durability)?;
                } else {
                    // A timeline that has not written yet has no directory (see `create_timeline_deferred`); its
                    // acceptor lock, held here, keeps it from making one.
                    fs::rename(&staging, &dir).map_err(io_error(&staging))?;
                    sync_dir_node(&tenant_dir, durability)?;
                }
                timeline.deleted.send_replace(true);
                drop(acceptor);
            }
            None => {
                // A broken timeline, or a creation cut short (a directory without a control file): replaced.
                if dir.exists() {
                    swap_dirs(&dir, &staging, &tenant_dir, durability)?;
                } else {
                    fs::rename(&staging, &dir).map_err(io_error(&staging))?;
                    sync_dir_node(&tenant_dir, durability)?;
                }
            }
        }
        // The directory is durable with its control file: a later loss of it reads as a lost copy.
        {
            let mut log = self.log.lock();
            if log.is_logged(&key) && !log.is_materialized(&key) {
                log.append(&[super::creations::Record::Materialized(key)])?;
            }
        }
        let timeline = match open_timeline_dir(&dir, &self.config.store) {
            Ok(Some(acceptor)) => Arc::new(Timeline::new(key, acceptor, Arc::clone(&self.lock))),
            Ok(None) => unreachable!("a replica is installed with its control file"),
            Err(error) => {
                tracing::error!(dir = %dir.display(), %error, "an installed replica failed to load; served as broken");
                self.timelines.write().insert(key, Slot::Broken(error.to_string()));
                return Err(NodeError::Acceptor(error));
            }
        };
        self.timelines.write().insert(key, Slot::Ready(Arc::clone(&timeline)));
        tracing::info!(
            node = self.config.node_id,
            tenant = %key.0,
            timeline = %key.1,
            commit_lsn = %timeline.commit_lsn(),
            "installed a replica pulled from a peer"
        );
        Ok(Installed::Replaced(timeline))
    }
}
