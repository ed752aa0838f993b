//! The compute's VFS-backed pg front started for a test (shared by the test files that include it).
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use compute::page_store::MemoryPageStore;
use compute::pg::{serve, VfsSessionFactory};

/// The pg front on 127.0.0.1 serving VFS sessions (user `app`, password `secret`) of a database registered
/// over a new `MemoryPageStore`.
pub struct VfsServer {
    name: String,
    /// The port it listens on.
    pub port: u16,
    /// The registered database's store.
    pub store: Arc<MemoryPageStore>,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
}

impl VfsServer {
    /// Registers `name` over a new store and serves it.
    pub async fn start(name: &str) -> VfsServer {
        let store = Arc::new(MemoryPageStore::new());
        compute::vfs::register_database(name, store.clone()).expect("register");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let factory = Arc::new(VfsSessionFactory::new(HashMap::from([(
            "app".to_string(),
            "secret".to_string(),
        )])));
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let _ = serve(listener, factory, async move {
                let _ = stop_rx.await;
            })
            .await;
        });
        VfsServer {
            name: name.to_owned(),
            port,
            store,
            stop,
            server,
        }
    }

    /// Stops the server and unregisters its database.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.server.await;
        compute::vfs::unregister_database(&self.name);
    }
}
