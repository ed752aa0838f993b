//! Three `cambium safekeeper`s and a `cambium pageserver` following them, with one tenant and its root
//! timeline created on all four: the storage side a compute talks to.

use compute::remote_store::RemotePageStoreConfig;
use proto::pageserver as ps;
use proto::safekeeper as sk;
use storage::{Lsn, TenantId, TimelineId};

use super::Process;

/// The error type of the process tests.
pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Fields drop in order: the processes are killed before their directory goes.
pub struct Cluster {
    /// The safekeepers.
    pub safekeepers: Vec<Process>,
    /// The pageserver.
    pub pageserver: Process,
    /// The tenant.
    pub tenant: TenantId,
    /// Its root timeline.
    pub timeline: TimelineId,
    _root: tempfile::TempDir,
}

impl Cluster {
    /// The arguments of a `cambium api` against these storage processes, its data in `data_dir`, its PostgreSQL
    /// listener on a free port; callers add their own flags (`--metadata`, …) and start it.
    pub fn api_args(&self, data_dir: &std::path::Path) -> Vec<String> {
        let safekeepers: Vec<String> = self.safekeepers.iter().map(|s| s.address.clone()).collect();
        vec![
            "api".into(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--pg-listen".into(),
            "127.0.0.1:0".into(),
            "--pageserver".into(),
            self.pageserver.address.clone(),
            "--safekeepers".into(),
            safekeepers.join(","),
        ]
    }

    /// Starts the processes and creates `timeline` (WAL from `start_lsn`) of `tenant` on all of them.
    pub async fn start(tenant: TenantId, timeline: TimelineId, start_lsn: Lsn) -> TestResult<Cluster> {
        let root = tempfile::tempdir()?;
        let safekeepers: Vec<Process> = (1..=3)
            .map(|id| Process::safekeeper(id, &root.path().join(format!("sk{id}"))))
            .collect();
        for s in &safekeepers {
            let mut client = sk::safekeeper_client::SafekeeperClient::connect(format!("http://{}", s.address)).await?;
            let timeline = Some(sk::TimelineRef {
                tenant_id: tenant.to_string(),
                timeline_id: timeline.to_string(),
            });
            client
                .create_timeline(sk::CreateTimelineRequest {
                    timeline,
                    start_lsn: start_lsn.0,
                })
                .await?;
        }
        let addresses: Vec<String> = safekeepers.iter().map(|s| s.address.clone()).collect();
        let pageserver = Process::start(vec![
            "pageserver".into(),
            "--data-dir".into(),
            root.path().join("pageserver").display().to_string(),
            "--safekeepers".into(),
            addresses.join(","),
        ]);
        let mut management =
            ps::management_client::ManagementClient::connect(format!("http://{}", pageserver.address)).await?;
        management
            .create_tenant(ps::TenantRequest {
                tenant_id: tenant.to_string(),
            })
            .await?;
        management
            .create_timeline(ps::CreateTimelineRequest {
                timeline: Some(ps::TimelineRef {
                    tenant_id: tenant.to_string(),
                    timeline_id: timeline.to_string(),
                }),
                ancestor_timeline_id: String::new(),
                ancestor_lsn: 0,
                start_lsn: start_lsn.0,
            })
            .await?;
        Ok(Cluster {
            safekeepers,
            pageserver,
            tenant,
            timeline,
            _root: root,
        })
    }

    /// A `RemotePageStore` configuration for `timeline` (WAL from `start_lsn`) with short connection timeouts,
    /// a patient `GetPage`, `commit_timeout_ms` and a small page cache.
    pub fn store_config(&self, timeline: TimelineId, start_lsn: Lsn, commit_timeout_ms: u64) -> RemotePageStoreConfig {
        let mut config = RemotePageStoreConfig::new(
            self.safekeepers.iter().map(|s| s.address.clone()).collect(),
            self.pageserver.address.clone(),
            self.tenant,
            timeline,
            start_lsn,
        );
        config.connect_timeout_ms = 500;
        config.safekeeper_request_timeout_ms = 500;
        config.get_page_timeout_ms = 20_000;
        config.commit_timeout_ms = commit_timeout_ms;
        config.page_cache_capacity_pages = 64;
        config
    }
}
