//! The producer-id manager over real storage: no id is issued twice across restarts, and an advance survives a
//! crash that comes before the next id.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::collections::BTreeSet;

use proptest::prelude::*;
use storage::{MemoryStorage, PartitionId, PartitionStorage, Storage};
use storage_fs::{FsConfig, FsStorage};
use txn_coordinator::durable;

fn state_partition() -> PartitionId {
    PartitionId::new("__transaction_state", 0).unwrap()
}

async fn open_or_create(store: &dyn Storage) -> Box<dyn PartitionStorage> {
    match store.open(&state_partition()).await {
        Ok(partition) => partition,
        Err(_) => store.create(&state_partition()).await.unwrap(),
    }
}

#[tokio::test]
async fn ids_are_never_reissued_after_a_restart_on_fs() {
    let dir = tempfile::tempdir().unwrap();
    let open = || FsStorage::open(FsConfig::new(dir.path())).unwrap();
    let mut issued = Vec::new();
    for _restart in 0..3 {
        let store = open();
        let mut partition = open_or_create(&store).await;
        let mut manager = durable::recover(&*partition).await.unwrap();
        for _ in 0..1_500 {
            issued.push(durable::issue(&mut *partition, &mut manager).await.unwrap().get());
        }
        // Dropped without any clean shutdown: a crash.
    }
    let distinct: BTreeSet<i64> = issued.iter().copied().collect();
    assert_eq!(distinct.len(), issued.len(), "an id was issued twice");
    assert!(issued.windows(2).all(|pair| pair[0] < pair[1]), "ids only grow");
}

#[tokio::test]
async fn an_advance_survives_a_crash_before_the_next_id() {
    let dir = tempfile::tempdir().unwrap();
    let open = || FsStorage::open(FsConfig::new(dir.path())).unwrap();
    {
        let store = open();
        let mut partition = open_or_create(&store).await;
        let mut manager = durable::recover(&*partition).await.unwrap();
        durable::issue(&mut *partition, &mut manager).await.unwrap();
        durable::advance_past(&mut *partition, &mut manager, 1_000_000)
            .await
            .unwrap();
    }
    let store = open();
    let mut partition = open_or_create(&store).await;
    let mut manager = durable::recover(&*partition).await.unwrap();
    let next = durable::issue(&mut *partition, &mut manager).await.unwrap();
    assert!(next.get() > 1_000_000, "{next}");
}

#[derive(Debug, Clone)]
enum Op {
    Issue(u16),
    Advance(i64),
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1..600u16).prop_map(Op::Issue),
        2 => (0..50_000i64).prop_map(Op::Advance),
        2 => Just(Op::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Under random issues, advances and restarts: no id is issued twice, and every id issued after an advance
    /// past `x` returned is greater than `x`.
    #[test]
    fn no_id_twice_and_advances_hold(ops in proptest::collection::vec(op(), 1..40)) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let store = MemoryStorage::new();
            let mut partition = open_or_create(&store).await;
            let mut manager = durable::recover(&*partition).await.unwrap();
            let mut issued = BTreeSet::new();
            let mut floor = -1i64;
            for op in &ops {
                match *op {
                    Op::Issue(count) => {
                        for _ in 0..count {
                            let id = durable::issue(&mut *partition, &mut manager).await.unwrap().get();
                            prop_assert!(issued.insert(id), "id {} issued twice", id);
                            prop_assert!(id > floor, "id {} not above the advance {}", id, floor);
                        }
                    }
                    Op::Advance(id) => {
                        durable::advance_past(&mut *partition, &mut manager, id).await.unwrap();
                        floor = floor.max(id);
                    }
                    Op::Restart => {
                        drop(partition);
                        partition = open_or_create(&store).await;
                        manager = durable::recover(&*partition).await.unwrap();
                    }
                }
            }
            Ok(())
        })?;
    }
}
