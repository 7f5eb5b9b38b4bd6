//! Every psm-script file in `producer-state/tests/scenarios/` (producer-state's checklist, kept beside its other
//! tests) as a named test: Kafka's `ProducerStateManagerTest` cases that a
//! script can express (numbered after kafka-semantics §11.1), the barrier rules, and the seed's three corruption scenarios
//! with and without a barrier. A mismatch prints a diff; `mirrorlog psm-script --rewrite` regenerates a file
//! (review the diff before committing it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::Path;

fn scenarios_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../producer-state/tests/scenarios")
}

fn run(file: &str) {
    let path = scenarios_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let run = psm_script::run_script(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(!run.blocks.is_empty(), "{file}: no commands");
    let diff = run.diff(file);
    assert!(diff.is_empty(), "{file} does not match:\n{diff}");
}

macro_rules! scenarios {
    ($($name:ident => $file:literal,)*) => {
        $(#[test] fn $name() { run($file); })*

        #[test]
        fn every_scenario_file_has_a_test() {
            let mut listed = vec![$($file),*];
            listed.sort_unstable();
            let dir = scenarios_dir();
            let mut present: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|entry| entry.unwrap().file_name().into_string().unwrap())
                .collect();
            present.sort_unstable();
            assert_eq!(present, listed);
        }
    };
}

scenarios! {
    kafka_01_basic_id_mapping => "01_basic_id_mapping.txt",
    kafka_02_append_txn_marker_with_no_producer_state => "02_append_txn_marker_with_no_producer_state.txt",
    kafka_03_producer_sequence_wrap_around => "03_producer_sequence_wrap_around.txt",
    kafka_04_producer_sequence_with_wrap_around_batch_record => "04_producer_sequence_with_wrap_around_batch_record.txt",
    kafka_05_producer_sequence_invalid_wrap_around => "05_producer_sequence_invalid_wrap_around.txt",
    kafka_06_no_validation_on_first_entry_when_loading_log => "06_no_validation_on_first_entry_when_loading_log.txt",
    kafka_07_control_record_bumps_producer_epoch => "07_control_record_bumps_producer_epoch.txt",
    kafka_14_update_producer_transaction_state => "14_update_producer_transaction_state.txt",
    kafka_15_out_of_sequence_after_control_record_epoch_bump => "15_out_of_sequence_after_control_record_epoch_bump.txt",
    kafka_16_non_transactional_append_with_ongoing_transaction => "16_non_transactional_append_with_ongoing_transaction.txt",
    kafka_17_truncate_and_reload_removes_out_of_range_snapshots => "17_truncate_and_reload_removes_out_of_range_snapshots.txt",
    kafka_18_take_snapshot => "18_take_snapshot.txt",
    kafka_19_fetch_snapshot_empty_snapshot => "19_fetch_snapshot_empty_snapshot.txt",
    kafka_20_recover_from_snapshot_unfinished_transaction => "20_recover_from_snapshot_unfinished_transaction.txt",
    kafka_21_recover_from_snapshot_finished_transaction => "21_recover_from_snapshot_finished_transaction.txt",
    kafka_22_recover_from_snapshot_empty_transaction => "22_recover_from_snapshot_empty_transaction.txt",
    kafka_23_producer_state_after_fencing_abort_marker => "23_producer_state_after_fencing_abort_marker.txt",
    kafka_24_remove_expired_pids_on_reload => "24_remove_expired_pids_on_reload.txt",
    kafka_25_accept_append_without_producer_state_on_replica => "25_accept_append_without_producer_state_on_replica.txt",
    kafka_26_accept_append_with_sequence_gaps_on_replica => "26_accept_append_with_sequence_gaps_on_replica.txt",
    kafka_30_first_unstable_offset_after_truncation => "30_first_unstable_offset_after_truncation.txt",
    kafka_31_load_from_snapshot_retains_non_expired_producers => "31_load_from_snapshot_retains_non_expired_producers.txt",
    kafka_32_skip_snapshot_if_offset_unchanged => "32_skip_snapshot_if_offset_unchanged.txt",
    kafka_33_pid_expiration_timeout => "33_pid_expiration_timeout.txt",
    kafka_34_first_unstable_offset_tv0 => "34_first_unstable_offset_tv0.txt",
    kafka_34_first_unstable_offset_tv2 => "34_first_unstable_offset_tv2.txt",
    kafka_35_producers_with_ongoing_transactions_dont_expire => "35_producers_with_ongoing_transactions_dont_expire.txt",
    kafka_36_sequence_not_validated_for_group_metadata_topic => "36_sequence_not_validated_for_group_metadata_topic.txt",
    kafka_37_old_epoch_for_control_record_tv0 => "37_old_epoch_for_control_record_tv0.txt",
    kafka_37_old_epoch_for_control_record_tv2 => "37_old_epoch_for_control_record_tv2.txt",
    kafka_38_coordinator_fencing_tv0 => "38_coordinator_fencing_tv0.txt",
    kafka_38_coordinator_fencing_tv2 => "38_coordinator_fencing_tv2.txt",
    kafka_39_coordinator_fenced_after_reload_tv0 => "39_coordinator_fenced_after_reload_tv0.txt",
    kafka_39_coordinator_fenced_after_reload_tv2 => "39_coordinator_fenced_after_reload_tv2.txt",
    kafka_54_reject_non_zero_sequence_for_direct_epoch_bump => "54_reject_non_zero_sequence_for_direct_epoch_bump.txt",
    kafka_56_skip_empty_transactions => "56_skip_empty_transactions.txt",
    barrier_aborts_open_transactions => "barrier_aborts_open_transactions.txt",
    barrier_everywhere_scope => "barrier_everywhere_scope.txt",
    barrier_from_client_is_rejected => "barrier_from_client_is_rejected.txt",
    barrier_reused_pid_is_never_a_duplicate => "barrier_reused_pid_is_never_a_duplicate.txt",
    barrier_writer_scope => "barrier_writer_scope.txt",
    seed_1_same_epoch_wrong_sequence_with_barrier => "seed_1_same_epoch_wrong_sequence_with_barrier.txt",
    seed_1_same_epoch_wrong_sequence_without_barrier => "seed_1_same_epoch_wrong_sequence_without_barrier.txt",
    seed_2_different_epochs_with_barrier => "seed_2_different_epochs_with_barrier.txt",
    seed_2_different_epochs_without_barrier => "seed_2_different_epochs_without_barrier.txt",
    seed_3_transactional_interleaving_with_barrier => "seed_3_transactional_interleaving_with_barrier.txt",
    seed_3_transactional_interleaving_without_barrier => "seed_3_transactional_interleaving_without_barrier.txt",
}
