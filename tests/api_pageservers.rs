//! Several pageservers (issue 17 item 2): two `cambium pageserver`s on one local-directory remote, three
//! safekeepers and one `cambium api --pageservers a,b`, all real processes. Databases are placed on both (each
//! pageserver's `ListTenants` holds exactly the tenants the metadata places on it), SQL works on each, and a
//! branch and a restore work on each. A pageserver whose disk is lost rebuilds its own tenants from the remote
//! at start, and none of the other's.

mod common;

use common::api::{connect, password_of, request, with_password};
use common::Process;
use compute::rusqlite;
use proto::pageserver as ps;
use serde_json::Value;

/// Three safekeepers, two pageservers sharing a remote, and the API over them.
struct Deployment {
    _safekeepers: Vec<Process>,
    pageservers: Vec<Process>,
    api: Process,
    key: String,
    data_dir: std::path::PathBuf,
    root: tempfile::TempDir,
}

impl Deployment {
    fn start() -> Deployment {
        let root = tempfile::tempdir().expect("tempdir");
        let safekeepers: Vec<Process> = (1..=3)
            .map(|id| Process::safekeeper(id, &root.path().join(format!("sk{id}"))))
            .collect();
        let addresses: Vec<String> = safekeepers.iter().map(|s| s.address.clone()).collect();
        let remote = format!("file://{}", root.path().join("remote").display());
        let pageservers: Vec<Process> = (1..=2)
            .map(|n| {
                Process::start(vec![
                    "pageserver".into(),
                    "--data-dir".into(),
                    root.path().join(format!("ps{n}")).display().to_string(),
                    "--safekeepers".into(),
                    addresses.join(","),
                    "--remote".into(),
                    remote.clone(),
                    "--id".into(),
                    format!("ps{n}"),
                ])
            })
            .collect();
        let data_dir = root.path().join("api");
        let pageserver_list: Vec<String> = pageservers.iter().map(|p| p.address.clone()).collect();
        let api = Process::start(vec![
            "api".into(),
            "--data-dir".into(),
            data_dir.display().to_string(),
            "--pg-listen".into(),
            "127.0.0.1:0".into(),
            "--pageservers".into(),
            pageserver_list.join(","),
            "--safekeepers".into(),
            addresses.join(","),
        ]);
        let key = std::fs::read_to_string(data_dir.join("api_key"))
            .expect("key")
            .trim()
            .to_owned();
        Deployment {
            _safekeepers: safekeepers,
            pageservers,
            api,
            key,
            data_dir,
            root,
        }
    }

    async fn call(&self, method: &str, path: &str, body: Option<&str>) -> common::api::Reply {
        request(&self.api.address, method, path, Some(&self.key), body, &[]).await
    }

    async fn wait_operation(&self, id: &str) -> Value {
        let reply = self.call("GET", &format!("/v1/operations/{id}?wait=30s"), None).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        reply.json()["operation"].clone()
    }

    /// Creates a database; returns its JSON.
    async fn create_database(&self, project: &str, name: &str) -> Value {
        let reply = self
            .call(
                "POST",
                &format!("/v1/projects/{project}/databases"),
                Some(&format!(r#"{{"name":"{name}"}}"#)),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        let operation = reply.json()["operation"]["id"].as_str().expect("id").to_owned();
        let ended = self.wait_operation(&operation).await;
        assert_eq!(ended["status"], "finished", "{ended}");
        reply.json()["database"].clone()
    }

    /// The tenants pageserver `index` holds.
    async fn tenants_on(&self, index: usize) -> Vec<String> {
        let mut client =
            ps::management_client::ManagementClient::connect(format!("http://{}", self.pageservers[index].address))
                .await
                .expect("connect to the pageserver");
        let mut tenants = client
            .list_tenants(ps::ListTenantsRequest {})
            .await
            .expect("list tenants")
            .into_inner()
            .tenant_ids;
        tenants.sort();
        tenants
    }

    /// Each database's tenant and pageserver column, read from the metadata file.
    fn placements(&self) -> Vec<(String, String, Option<String>)> {
        let conn = rusqlite::Connection::open(self.data_dir.join("metadata.sqlite")).expect("open the metadata");
        let mut stmt = conn
            .prepare("SELECT id, tenant_id, pageserver FROM databases ORDER BY id")
            .expect("prepare");
        let rows = stmt
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .expect("query");
        rows.collect::<Result<_, _>>().expect("rows")
    }
}

async fn ids(uri: &str) -> Vec<i64> {
    let client = connect(uri).await.expect("connect");
    client
        .query("SELECT id FROM t ORDER BY id", &[])
        .await
        .expect("select")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

async fn insert(uri: &str, range: std::ops::Range<i64>) {
    let client = connect(uri).await.expect("connect");
    for id in range {
        client
            .execute("INSERT INTO t VALUES ($1)", &[&id])
            .await
            .expect("insert");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn databases_are_placed_on_both_pageservers_and_served_from_each() {
    let deployment = Deployment::start();
    let project = deployment
        .call("POST", "/v1/projects", Some(r#"{"name":"p"}"#))
        .await
        .json()["project"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut databases = Vec::new();
    for n in 0..4 {
        let database = deployment.create_database(&project, &format!("d{n}")).await;
        let uri = database["connection_uri"].as_str().expect("uri").to_owned();
        let client = connect(&uri).await.expect("connect");
        client
            .batch_execute(&format!(
                "CREATE TABLE t (id BIGINT PRIMARY KEY); INSERT INTO t VALUES ({n})"
            ))
            .await
            .expect("write");
        databases.push((database, uri));
    }
    // The public view carries no placement (the contract fixes its keys).
    assert!(databases[0].0.get("pageserver").is_none());

    // Placed two and two (the fewest first), each tenant on the pageserver the metadata names and only there.
    let addresses: Vec<String> = deployment.pageservers.iter().map(|p| p.address.clone()).collect();
    let placements = deployment.placements();
    assert_eq!(placements.len(), 4);
    for (index, address) in addresses.iter().enumerate() {
        let mut expected: Vec<String> = placements
            .iter()
            .filter(|(_, _, placed)| placed.as_deref() == Some(address.as_str()))
            .map(|(_, tenant, _)| tenant.clone())
            .collect();
        expected.sort();
        assert_eq!(expected.len(), 2, "two databases on {address}: {placements:?}");
        assert_eq!(deployment.tenants_on(index).await, expected, "pageserver {address}");
    }

    // The placement on /metrics (admin key).
    let metrics = deployment.call("GET", "/metrics", None).await;
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    for address in &addresses {
        let line = format!("cambium_pageserver_databases{{pageserver=\"{address}\"}} 2");
        assert!(metrics.body.contains(&line), "{line} in {}", metrics.body);
    }

    // SQL, a branch and a restore on a database of each pageserver.
    for (index, address) in addresses.iter().enumerate() {
        let (_, tenant, _) = placements
            .iter()
            .find(|(_, _, placed)| placed.as_deref() == Some(address.as_str()))
            .expect("one");
        let (database, uri) = databases
            .iter()
            .find(|(database, _)| {
                placements
                    .iter()
                    .any(|(id, t, _)| t == tenant && database["id"].as_str() == Some(id.as_str()))
            })
            .expect("its database");
        let first: i64 = ids(uri).await[0];
        insert(uri, 100..105).await;
        let database_id = database["id"].as_str().expect("id");
        let reply = deployment
            .call(
                "POST",
                &format!("/v1/databases/{database_id}/branches"),
                Some(r#"{"name":"dev"}"#),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.body);
        let branch = reply.json()["branch"].clone();
        let point = branch["parent_lsn"].as_str().expect("lsn").to_owned();
        let password = password_of(uri).expect("password");
        let branch_uri = with_password(branch["connection_uri"].as_str().expect("uri"), &password);
        let mut expected = vec![first];
        expected.extend(100..105);
        assert_eq!(ids(&branch_uri).await, expected, "the branch on pageserver {index}");
        insert(&branch_uri, 200..202).await;
        insert(uri, 105..110).await;
        // Restore the default branch to the branch point.
        let default_branch = database["default_branch_id"].as_str().expect("branch");
        let reply = deployment
            .call(
                "POST",
                &format!("/v1/branches/{default_branch}/restore"),
                Some(&format!(r#"{{"target_lsn":"{point}","preserve":false}}"#)),
            )
            .await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        let ended = deployment
            .wait_operation(reply.json()["operation"]["id"].as_str().expect("id"))
            .await;
        assert_eq!(ended["status"], "finished", "{ended}");
        assert_eq!(ids(uri).await, expected, "restored on pageserver {index}");
        let mut branch_expected = expected.clone();
        branch_expected.extend(200..202);
        assert_eq!(ids(&branch_uri).await, branch_expected, "the branch is untouched");
        // Every timeline of the tenant is on its own pageserver only.
        let other = 1 - index;
        assert!(
            !deployment.tenants_on(other).await.contains(tenant),
            "the tenant is not on the other pageserver"
        );
    }

    // Each tenant's remote copy is marked with its pageserver's id once uploaded.
    let remote = deployment.root.path().join("remote").join("tenants");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for (_, tenant, placed) in &placements {
        let index = addresses
            .iter()
            .position(|a| Some(a) == placed.as_ref())
            .expect("placed");
        let owner = remote.join(tenant).join("owner");
        let local = deployment
            .root
            .path()
            .join(format!("ps{}", index + 1))
            .join("tenants")
            .join(tenant)
            .join("branches.log");
        // Up to date: the remote branch log names every timeline (the restore's too). It is the local log's
        // frames, without the zeros the local one holds ahead of its appends.
        let local_frames = || {
            let bytes = std::fs::read(&local).ok()?;
            let (_, frames_len) = storage::formats::branch_log_prefix(&bytes).ok()?;
            Some(bytes[..frames_len].to_vec())
        };
        while !owner.exists() || std::fs::read(remote.join(tenant).join("branches.log")).ok() != local_frames() {
            assert!(std::time::Instant::now() < deadline, "{tenant} never uploaded");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_eq!(
            std::fs::read_to_string(&owner).expect("owner"),
            format!("ps{}", index + 1)
        );
    }
    // The second pageserver loses its disk: it rebuilds its own tenants from the remote, not the first's, and
    // serves their data again (the WAL past the remote copy from the safekeepers).
    let before = deployment.tenants_on(1).await;
    let mut deployment = deployment;
    deployment.pageservers[1].kill9();
    std::fs::remove_dir_all(deployment.root.path().join("ps2")).expect("wipe the second pageserver");
    deployment.pageservers[1].restart();
    assert_eq!(deployment.tenants_on(1).await, before, "only its own tenants rebuilt");
    let (_, tenant, _) = placements
        .iter()
        .find(|(_, _, placed)| placed.as_deref() == Some(addresses[1].as_str()))
        .expect("one on the second");
    let (database, uri) = databases
        .iter()
        .find(|(database, _)| {
            placements
                .iter()
                .any(|(id, t, _)| t == tenant && database["id"].as_str() == Some(id.as_str()))
        })
        .expect("its database");
    // A fresh store reads from the rebuilt pageserver: suspend and resume the database.
    let database_id = database["id"].as_str().expect("id");
    for action in ["suspend", "resume"] {
        let reply = deployment
            .call("POST", &format!("/v1/databases/{database_id}/{action}"), None)
            .await;
        assert!(reply.status == 200 || reply.status == 202, "{action}: {}", reply.body);
        if let Some(operation) = reply.json()["operation"]["id"].as_str() {
            let ended = deployment.wait_operation(operation).await;
            assert_eq!(ended["status"], "finished", "{ended}");
        }
    }
    let rows = ids(uri).await;
    assert!(rows.len() >= 6, "the database's rows after the rebuild: {rows:?}");
}
