//! Topics that grow at the source (issue 50, items 2 and 5; KIP-1279's metadata refresh): an operator adds a
//! partition where a topic is written ([`Step::AddPartition`], a CreatePartitions request), producers there write
//! to it, and every link that mirrors the topic adds it read-only, copies it, and fails it over with the rest (one
//! barrier on each partition). A chain carries the growth from its head to its tail. A mirror's topic cannot be
//! grown by hand. The oracle catches links that never follow a growth (`Mutation::GrowthNotFollowed`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use common::{barriers, end, idempotent, move_to, produce, run, script, start, stop, transactional};
use mirror_sim::script::generate_with;
use mirror_sim::{Finished, Mutation, SimStorage, Step, Strategy, Topology, Workload};

fn add_partition(cluster: &str, topic: &str) -> Step {
    Step::AddPartition {
        cluster: cluster.into(),
        topic: topic.into(),
    }
}

/// The record ids a read_committed consumer of one log sees.
fn record_ids<'a>(finished: &'a Finished, cluster: &str, partition: &str) -> &'a [u64] {
    &finished.committed_views[&(cluster.to_owned(), partition.to_owned())]
}

/// A → B (then B → C when `chain`): records on A's one partition, a partition added at A, records on both.
fn grown_at_the_source(chain: bool) -> Vec<Step> {
    let mut steps = vec![start("A", "B", "orders")];
    if chain {
        steps.push(start("B", "C", "orders"));
    }
    steps.extend([
        idempotent("A/p", "A", "orders"),
        produce("A/p", 2),
        Step::Mirror,
        add_partition("A", "orders"),
        // Producers take turns over the partitions: these reach partition 0 and the new partition 1.
        produce("A/p", 1),
        produce("A/p", 3),
        produce("A/p", 1),
        Step::Mirror,
    ]);
    steps
}

#[test]
fn a_partition_added_at_the_source_is_mirrored_and_fails_over_with_a_barrier_of_its_own() {
    let mut steps = grown_at_the_source(false);
    steps.push(stop("B", "orders"));
    let (findings, finished) = run(&script(&["A", "B"], steps), Strategy::BarrierAdvance);
    assert_eq!(findings.anomalies.corruption(), 0, "{:?}", findings.notes);
    assert!(finished.failed_links.is_empty(), "{:?}", finished.failed_links);
    assert!(
        finished.failover_window.is_empty(),
        "a planned failover after the growth was mirrored loses nothing: {:?}",
        finished.failover_window
    );
    let added = record_ids(&finished, "A", "orders-1");
    assert!(!added.is_empty(), "the producer wrote the new partition");
    assert_eq!(record_ids(&finished, "B", "orders-1"), added);
    assert_eq!(
        record_ids(&finished, "B", "orders"),
        record_ids(&finished, "A", "orders")
    );
    assert_eq!(barriers(&finished, "B", "orders").len(), 1);
    assert_eq!(
        barriers(&finished, "B", "orders-1").len(),
        1,
        "the added partition fails over too"
    );
    assert!(finished.read_only_after_failover.is_empty());
}

#[test]
fn a_chain_carries_a_partition_added_at_its_head_to_its_tail() {
    let (findings, finished) = run(
        &script(&["A", "B", "C"], grown_at_the_source(true)),
        Strategy::Barrier,
    );
    assert_eq!(findings.anomalies.corruption(), 0, "{:?}", findings.notes);
    assert!(finished.failed_links.is_empty(), "{:?}", finished.failed_links);
    let at_the_head = &finished.logs[&("A".to_owned(), "orders-1".to_owned())];
    assert!(!at_the_head.is_empty());
    for cluster in ["B", "C"] {
        assert_eq!(
            &finished.logs[&(cluster.to_owned(), "orders-1".to_owned())],
            at_the_head,
            "{cluster} holds A's added partition byte for byte"
        );
    }
}

#[test]
fn the_oracle_catches_links_that_never_add_a_partition_their_source_added() {
    let (findings, finished) = mirror_sim::run_script_mutated(
        &script(&["A", "B", "C"], grown_at_the_source(true)),
        Strategy::Barrier,
        &SimStorage::memory(),
        mirror_sim::FetchBound::default(),
        Some(Mutation::GrowthNotFollowed),
    )
    .unwrap();
    assert!(findings.anomalies.divergence > 0, "{:?}", findings.notes);
    assert!(
        finished
            .divergences
            .iter()
            .any(|found| found == "B/orders: mirror of A holds 1 partition(s) where its source has 2"),
        "{:?}",
        finished.divergences
    );
}

#[test]
fn a_topic_a_link_mirrors_cannot_be_grown_by_hand() {
    let steps = vec![
        start("A", "B", "orders"),
        idempotent("A/p", "A", "orders"),
        produce("A/p", 2),
        Step::Mirror,
        add_partition("B", "orders"),
        Step::Mirror,
    ];
    let (findings, finished) = run(&script(&["A", "B"], steps), Strategy::Barrier);
    assert_eq!(findings.anomalies.corruption(), 0, "{:?}", findings.notes);
    assert_eq!(finished.client_errors.get("POLICY_VIOLATION"), Some(&1));
    assert!(!finished
        .logs
        .contains_key(&("B".to_owned(), "orders-1".to_owned())));
}

#[test]
fn generated_growth_and_recreation_come_before_a_mirror_round_where_a_running_link_reads_the_topic() {
    let (mut grown, mut recreated) = (0, 0);
    for seed in 1..=20 {
        for topology in Topology::ALL {
            let script = generate_with(topology, Workload::Seed, seed, 30, 1, true);
            // The links running at each step: (source, destination, topic).
            let mut running: Vec<(String, String, String)> = Vec::new();
            for (index, step) in script.steps.iter().enumerate() {
                match step {
                    Step::Start { source, dest, topic } => {
                        running.push((source.clone(), dest.clone(), topic.clone()))
                    }
                    Step::Stop { dest, topic } => running.retain(|(_, to, of)| !(to == dest && of == topic)),
                    Step::AddPartition { cluster, topic } | Step::RecreateTopic { cluster, topic } => {
                        if matches!(step, Step::AddPartition { .. }) {
                            grown += 1;
                        } else {
                            recreated += 1;
                        }
                        assert!(
                            running
                                .iter()
                                .any(|(source, _, of)| source == cluster && of == topic),
                            "{topology} seed {seed}: {step} where no link reads it"
                        );
                        assert!(
                            !running.iter().any(|(_, dest, of)| dest == cluster && of == topic),
                            "{topology} seed {seed}: {step} on a mirror"
                        );
                        assert!(
                            script.steps[index + 1..]
                                .iter()
                                .find(|next| !matches!(next, Step::SourceFault { .. }))
                                .is_some_and(|next| *next == Step::Mirror),
                            "{topology} seed {seed}: {step} not before a mirror round"
                        );
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(grown > 10, "only {grown} growth steps in 140 scripts");
    assert!(recreated > 2, "only {recreated} recreations in 140 scripts");
}

#[test]
fn generated_recreations_fail_their_mirrors_by_topic_id_and_the_operator_mirrors_afresh_without_a_failed_link(
) {
    let mut remedied = 0;
    for seed in 1..=20 {
        for topology in Topology::ALL {
            let script = generate_with(topology, Workload::Seed, seed, 30, 1, true);
            if !script
                .steps
                .iter()
                .any(|step| matches!(step, Step::RecreateTopic { .. }))
            {
                continue;
            }
            let (findings, finished) = run(&script, Strategy::BarrierAdvance);
            assert_eq!(
                findings.anomalies.corruption(),
                0,
                "{topology} seed {seed}: {:?}",
                findings.notes
            );
            assert!(
                finished.failed_links.is_empty(),
                "{topology} seed {seed}: {:?}",
                finished.failed_links
            );
            remedied += finished.remedied.len();
        }
    }
    assert!(remedied > 0, "no generated recreation met a running link");
}

#[test]
fn a_failback_into_a_topic_with_a_partition_only_it_has_deletes_it_and_mirrors_afresh() {
    // The failover comes before B met A's added partition: its records are the failover's loss window, and the
    // reverse into A is refused (the counts differ); the operator deletes A's topic and creates the link.
    let steps = vec![
        start("A", "B", "orders"),
        idempotent("A/p", "A", "orders"),
        produce("A/p", 2),
        Step::Mirror,
        add_partition("A", "orders"),
        produce("A/p", 1),
        produce("A/p", 3),
        stop("B", "orders"),
        move_to("A/p", "B", false),
        produce("A/p", 2),
        start("B", "A", "orders"),
        Step::Mirror,
    ];
    let (findings, finished) = run(&script(&["A", "B"], steps), Strategy::BarrierAdvance);
    assert_eq!(findings.anomalies.corruption(), 0, "{:?}", findings.notes);
    assert!(finished.failed_links.is_empty(), "{:?}", finished.failed_links);
    assert_eq!(
        finished.failover_window,
        [3, 4, 5, 6].into(),
        "what A acknowledged after the last mirror round: one record on partition 0, three on the added one"
    );
    assert!(!finished
        .logs
        .contains_key(&("A".to_owned(), "orders-1".to_owned())));
    assert_eq!(
        finished.logs[&("A".to_owned(), "orders".to_owned())],
        finished.logs[&("B".to_owned(), "orders".to_owned())],
        "A mirrors B's one partition afresh"
    );
}

#[test]
fn a_failback_into_a_topic_with_fewer_partitions_grows_it_first() {
    let steps = vec![
        start("A", "B", "orders"),
        idempotent("A/p", "A", "orders"),
        produce("A/p", 2),
        Step::Mirror,
        stop("B", "orders"),
        move_to("A/p", "B", false),
        add_partition("B", "orders"),
        produce("A/p", 1),
        produce("A/p", 3),
        start("B", "A", "orders"),
        Step::Mirror,
    ];
    let (findings, finished) = run(&script(&["A", "B"], steps), Strategy::BarrierAdvance);
    assert_eq!(findings.anomalies.corruption(), 0, "{:?}", findings.notes);
    assert!(finished.failed_links.is_empty(), "{:?}", finished.failed_links);
    assert!(
        finished.failover_window.is_empty(),
        "{:?}",
        finished.failover_window
    );
    for partition in ["orders", "orders-1"] {
        let on_b = &finished.logs[&("B".to_owned(), partition.to_owned())];
        assert!(!on_b.is_empty(), "{partition}");
        assert_eq!(
            &finished.logs[&("A".to_owned(), partition.to_owned())],
            on_b,
            "A mirrors B's {partition}"
        );
    }
}

/// A → B; A's topic is deleted and created again, and a new producer writes the new topic past the mirror's end;
/// then a mirror round meets it.
fn recreated_at_the_source() -> Vec<Step> {
    let mut steps = recreated_before_a_round();
    steps.push(Step::Mirror);
    steps
}

/// [`recreated_at_the_source`] before the mirror round that meets the new topic.
fn recreated_before_a_round() -> Vec<Step> {
    let mut steps = vec![
        start("A", "B", "orders"),
        idempotent("A/p", "A", "orders"),
        produce("A/p", 2),
        produce("A/p", 2),
        produce("A/p", 2),
        Step::Mirror,
        Step::RecreateTopic {
            cluster: "A".into(),
            topic: "orders".into(),
        },
        idempotent("A/q", "A", "orders"),
    ];
    steps.extend((0..4).map(|_| produce("A/q", 2)));
    steps
}

/// The offsets of the data batches of `cluster`'s `log`.
fn data_offsets(batches: &[record_format::RecordBatch]) -> Vec<i64> {
    batches
        .iter()
        .filter(|batch| !batch.is_control())
        .map(|batch| batch.base_offset())
        .collect()
}

#[test]
fn a_mirror_failing_over_after_its_source_topic_was_created_again_keeps_the_old_topic_and_mixes_nothing() {
    let mut steps = recreated_before_a_round();
    steps.push(stop("B", "orders"));
    let (findings, finished) = run(&script(&["A", "B"], steps), Strategy::BarrierAdvance);
    assert_eq!(findings.anomalies.corruption(), 0, "{:?}", findings.notes);
    assert!(finished.failed_links.is_empty(), "{:?}", finished.failed_links);
    assert_eq!(
        finished.deleted_records,
        (1..=6).collect(),
        "the old topic's records went with it"
    );
    // B kept the three batches it mirrored and took none of the new topic's; its failover completes.
    let on_b = &finished.logs[&("B".to_owned(), "orders".to_owned())];
    assert_eq!(data_offsets(on_b), [0, 2, 4]);
    assert_eq!(record_ids(&finished, "B", "orders"), [1, 2, 3, 4, 5, 6]);
    assert_eq!(barriers(&finished, "B", "orders").len(), 1);
    assert!(finished.read_only_after_failover.is_empty());
}

#[test]
fn a_mirror_whose_source_topic_was_created_again_fails_by_topic_id_and_the_operator_mirrors_the_new_topic_afresh(
) {
    let mut steps = recreated_at_the_source();
    steps.push(Step::Mirror);
    steps.push(stop("B", "orders"));
    let (findings, finished) = run(&script(&["A", "B"], steps), Strategy::BarrierAdvance);
    assert_eq!(findings.anomalies.corruption(), 0, "{:?}", findings.notes);
    assert!(finished.failed_links.is_empty(), "{:?}", finished.failed_links);
    assert_eq!(finished.remedied.len(), 1, "{:?}", finished.remedied);
    let remedied = &finished.remedied[0];
    assert!(
        remedied.starts_with("A -> B (orders): topic orders at A has topic id ")
            && remedied.contains("deleted and created again")
            && remedied.contains("UNKNOWN_TOPIC_ID")
            && remedied.ends_with("the operator deleted the mirror and created its link afresh"),
        "{remedied}"
    );
    // The old mirror was judged and deleted as it stood: the old topic's three batches, nothing of the new one.
    let deleted: Vec<(&str, &str, Vec<i64>)> = finished
        .deleted_logs
        .iter()
        .map(|log| (log.cluster.as_str(), log.log.as_str(), data_offsets(&log.batches)))
        .collect();
    assert_eq!(
        deleted,
        [("A", "orders", vec![0, 2, 4]), ("B", "orders", vec![0, 2, 4])]
    );
    assert_eq!(finished.deleted_records, (1..=6).collect());
    // B mirrors the new topic from its start, byte for byte, and fails over with one barrier.
    let on_a = &finished.logs[&("A".to_owned(), "orders".to_owned())];
    let on_b = &finished.logs[&("B".to_owned(), "orders".to_owned())];
    assert_eq!(data_offsets(on_b), [0, 2, 4, 6]);
    assert_eq!(
        record_ids(&finished, "B", "orders"),
        (7..=14).collect::<Vec<u64>>()
    );
    let data = |batches: &[record_format::RecordBatch]| -> Vec<Vec<u8>> {
        batches
            .iter()
            .filter(|batch| !batch.is_control())
            .map(|batch| batch.as_bytes().to_vec())
            .collect()
    };
    assert_eq!(data(on_a), data(on_b));
    assert_eq!(barriers(&finished, "B", "orders").len(), 1);
    assert!(finished.read_only_after_failover.is_empty());
}

#[test]
fn a_chain_whose_head_topic_was_created_again_is_mirrored_afresh_link_by_link() {
    let mut steps = vec![
        start("A", "B", "orders"),
        start("B", "C", "orders"),
        idempotent("A/p", "A", "orders"),
        produce("A/p", 2),
        produce("A/p", 2),
        Step::Mirror,
        Step::RecreateTopic {
            cluster: "A".into(),
            topic: "orders".into(),
        },
        idempotent("A/q", "A", "orders"),
        produce("A/q", 2),
        produce("A/q", 2),
        produce("A/q", 2),
    ];
    steps.extend([Step::Mirror, Step::Mirror, Step::Mirror]);
    let (findings, finished) = run(&script(&["A", "B", "C"], steps), Strategy::BarrierAdvance);
    assert_eq!(findings.anomalies.corruption(), 0, "{:?}", findings.notes);
    assert!(finished.failed_links.is_empty(), "{:?}", finished.failed_links);
    let remedied: Vec<&str> = finished
        .remedied
        .iter()
        .map(|line| line.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(remedied, ["A -> B (orders)", "B -> C (orders)"]);
    for cluster in ["B", "C"] {
        assert_eq!(
            record_ids(&finished, cluster, "orders"),
            (5..=10).collect::<Vec<u64>>(),
            "{cluster} mirrors the new topic"
        );
    }
}

#[test]
fn the_oracle_catches_a_mirror_that_mixes_two_topics_of_one_name_running_or_failed_over() {
    for failover in [false, true] {
        let mut steps = recreated_at_the_source();
        if failover {
            steps.push(stop("B", "orders"));
        }
        let (findings, finished) = mirror_sim::run_script_mutated(
            &script(&["A", "B"], steps),
            Strategy::Barrier,
            &SimStorage::memory(),
            mirror_sim::FetchBound::default(),
            Some(Mutation::TopicIdsIgnored),
        )
        .unwrap();
        assert!(
            findings.anomalies.divergence > 0,
            "failover {failover}: {:?}",
            findings.notes
        );
        assert!(
            finished.divergences.iter().any(|found| found.starts_with(
                "B/orders: mirror of A holds a batch at offset 6 that the topic it mirrored never held"
            )),
            "failover {failover}: {:?}",
            finished.divergences
        );
    }
}

#[test]
fn a_transaction_open_on_a_deleted_topic_goes_with_it_and_is_no_loss() {
    let steps = vec![
        start("A", "B", "orders"),
        transactional("A/t", "A", "orders", "t-id"),
        produce("A/t", 2),
        Step::Mirror,
        Step::RecreateTopic {
            cluster: "A".into(),
            topic: "orders".into(),
        },
        end("A/t", true),
        Step::Mirror,
    ];
    let (findings, finished) = run(&script(&["A", "B"], steps), Strategy::Barrier);
    assert_eq!(findings.anomalies.silent_loss, 0, "{:?}", findings.notes);
    assert_eq!(finished.deleted_records, [1, 2].into());
}

#[test]
fn a_seeded_run_draws_the_same_topic_ids_every_time() {
    let first = run(&script(&["A", "B"], recreated_at_the_source()), Strategy::Barrier).1;
    let second = run(&script(&["A", "B"], recreated_at_the_source()), Strategy::Barrier).1;
    assert!(
        first
            .remedied
            .first()
            .is_some_and(|line| line.contains("has topic id")),
        "{:?}",
        first.remedied
    );
    assert_eq!(first.remedied, second.remedied, "the ids in the message too");
}

#[test]
fn a_record_lost_before_its_topic_was_deleted_stays_lost() {
    // Without the barrier, B's own producer takes the id and epoch A's producer wrote under in the mirror, and its
    // first batch is taken for a duplicate of A's: acknowledged, never written (a). B's topic is then deleted and
    // created again: the deletion excuses what the topic held, not what it never held.
    let steps = vec![
        start("A", "B", "orders"),
        idempotent("A/p", "A", "orders"),
        produce("A/p", 2),
        produce("A/p", 2),
        Step::Mirror,
        stop("B", "orders"),
        idempotent("B/q", "B", "orders"),
        produce("B/q", 2),
        Step::RecreateTopic {
            cluster: "B".into(),
            topic: "orders".into(),
        },
    ];
    let (findings, finished) = mirror_sim::run_script_mutated(
        &script(&["A", "B"], steps),
        Strategy::Barrier,
        &SimStorage::memory(),
        mirror_sim::FetchBound::default(),
        Some(Mutation::NoBarrier),
    )
    .unwrap();
    assert!(
        record_ids(&finished, "B", "orders").is_empty(),
        "B's topic is new"
    );
    let deleted_on_b = finished
        .deleted_logs
        .iter()
        .filter(|log| log.cluster == "B")
        .count();
    assert_eq!(deleted_on_b, 1, "B's deleted log is kept for the oracle");
    assert_eq!(findings.anomalies.silent_loss, 2, "{:?}", findings.notes);
    assert!(
        findings
            .notes
            .iter()
            .any(|note| note.starts_with("(a) B/orders: record 5 of B/q")),
        "{:?}",
        findings.notes
    );
    assert!(!finished.deleted_records.contains(&5));
}

#[test]
fn a_deleted_log_is_judged_for_duplicates_as_the_logs_at_the_end_are() {
    let steps = vec![
        start("A", "B", "orders"),
        idempotent("A/p", "A", "orders"),
        produce("A/p", 2),
        Step::Mirror,
    ];
    let (clean, mut finished) = run(&script(&["A", "B"], steps), Strategy::Barrier);
    assert_eq!(clean.anomalies.corruption(), 0, "{:?}", clean.notes);
    // The same log, but holding its batch twice, as a topic deleted during the run left it.
    let mut batches = finished.logs[&("A".to_owned(), "orders".to_owned())].clone();
    batches.extend(batches.clone());
    finished.deleted_logs.push(mirror_sim::DeletedLog {
        cluster: "A".into(),
        log: "orders".into(),
        batches,
        committed_view: Vec::new(),
        last_stable_offset: 0,
    });
    let findings = mirror_sim::judge(&finished);
    assert_eq!(findings.anomalies.duplicates, 2, "{:?}", findings.notes);
    assert!(
        findings
            .notes
            .iter()
            .any(|note| note.starts_with("(b) A/orders: record 1 is stored 2 times")),
        "{:?}",
        findings.notes
    );
    // Its records are gone with it: none is judged hidden from read_committed.
    assert_eq!(findings.anomalies.hidden_committed, 0, "{:?}", findings.notes);
}
