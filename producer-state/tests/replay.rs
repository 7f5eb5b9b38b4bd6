//! Replaying the shared segment vector (REPLICATION origin, as log recovery does) gives exactly the manifest's
//! `producer_state_after_replay`; the producers the manifest calls ambiguous are absent, because that barrier
//! has no writer tag and therefore resets under the default writer scope.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::Path;

use bytes::Bytes;
use producer_state::{replay, BarrierScope, ProducerStateManager, PsmConfig};
use record_format::BatchIter;
use serde_json::Value;

fn segment_case() -> (Vec<record_format::RecordBatch>, Value) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../record-format/tests/data/kafka-batches");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let case = manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|case| case["category"] == "segment")
        .unwrap()
        .clone();
    let bytes = std::fs::read(dir.join(case["file"].as_str().unwrap())).unwrap();
    let batches = BatchIter::new(Bytes::from(bytes))
        .map(|found| found.unwrap().batch)
        .collect();
    (batches, case["producer_state_after_replay"].clone())
}

fn replayed_json(scope: BarrierScope) -> Value {
    let (batches, _) = segment_case();
    let manager = ProducerStateManager::new(PsmConfig {
        cluster_id: Some("destination".into()),
        barrier_scope: scope,
        ..PsmConfig::default()
    });
    let replayed = replay(manager, &batches).unwrap();
    assert_eq!(replayed.barriers_applied, 1);
    serde_json::from_str(&replayed.summary().to_json()).unwrap()
}

#[test]
fn replaying_the_segment_vector_matches_the_manifest() {
    let (_, expected) = segment_case();
    for scope in [BarrierScope::Writer, BarrierScope::Everywhere] {
        let actual = replayed_json(scope);
        assert_eq!(actual["producers"], expected["producers"], "{scope:?}");
        for key in [
            "ongoing_transactions",
            "aborted_transactions",
            "log_end_offset",
            "last_stable_offset",
        ] {
            assert_eq!(actual[key], expected[key], "{scope:?} {key}");
        }
        for ambiguous in expected["ambiguous_producers"].as_array().unwrap() {
            let id = ambiguous["producer_id"].to_string();
            assert!(
                actual["producers"].get(&id).is_none(),
                "{id} must be reset by the untagged barrier"
            );
        }
    }
}
