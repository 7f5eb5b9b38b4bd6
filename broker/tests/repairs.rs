//! What opening a data directory repaired is kept for `mirrorlog serve` to print, not dropped.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::net::SocketAddr;

use broker::{BrokerConfig, Server};
use storage_config::StorageConfig;

fn config(dir: &std::path::Path) -> BrokerConfig {
    let mut config = BrokerConfig::new(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        StorageConfig::for_backend(storage_config::Backend::Fs, dir),
    );
    config.node.topics = vec![("orders".to_owned(), 1)];
    config
}

#[tokio::test]
async fn a_torn_metadata_change_is_cut_and_reported_by_the_next_start() {
    let dir = tempfile::tempdir().expect("dir");
    let server = Server::bind(config(dir.path())).await.expect("first start");
    assert!(
        server.node().repairs().is_empty(),
        "a new directory needs nothing"
    );
    drop(server);
    // Half of a metadata change: what a crash during its append leaves.
    let metadata = dir.path().join("orders-0/mirrorlog.metadata");
    let mut bytes = std::fs::read(&metadata).expect("metadata");
    let whole = bytes.len();
    bytes.extend_from_slice(&[0, 0, 0, 40, 0, 0, 0, 2, 0]);
    std::fs::write(&metadata, &bytes).expect("write");

    let server = Server::bind(config(dir.path())).await.expect("second start");
    let repairs = server.node().repairs();
    assert_eq!(repairs.len(), 1, "{repairs:?}");
    assert_eq!(repairs[0].0.to_string(), "orders-0");
    let line = repairs[0].1.to_string();
    assert!(
        line.starts_with("metadata: 9 bytes of an interrupted change cut"),
        "{line}"
    );
    assert!(
        std::fs::read(&metadata).expect("metadata").len() <= whole,
        "the torn change is gone"
    );
}
