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
fn generated_growth_comes_before_a_mirror_round_where_a_running_link_reads_its_topic() {
    let mut grown = 0;
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
                    Step::AddPartition { cluster, topic } => {
                        grown += 1;
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

/// A → B; A's topic is deleted and created again, and a new producer writes the new topic past the mirror's end.
fn recreated_at_the_source() -> Vec<Step> {
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
    steps.push(Step::Mirror);
    steps
}

#[test]
fn a_topic_created_again_at_the_source_fails_its_mirror_by_topic_id_and_mixes_nothing() {
    let mut steps = recreated_at_the_source();
    steps.push(stop("B", "orders"));
    let (findings, finished) = run(&script(&["A", "B"], steps), Strategy::BarrierAdvance);
    assert_eq!(findings.anomalies.corruption(), 0, "{:?}", findings.notes);
    assert_eq!(finished.failed_links.len(), 1, "{:?}", finished.failed_links);
    let failure = &finished.failed_links[0];
    assert!(
        failure.starts_with("A -> B (orders): topic orders at A has topic id ")
            && failure.contains("deleted and created again")
            && failure.contains("UNKNOWN_TOPIC_ID"),
        "{failure}"
    );
    assert_eq!(
        finished.deleted_records,
        (1..=6).collect(),
        "the old topic's records went with it"
    );
    // B kept the three batches it mirrored and took none of the new topic's; its failover still completes.
    let on_b: Vec<i64> = finished.logs[&("B".to_owned(), "orders".to_owned())]
        .iter()
        .filter(|batch| !batch.is_control())
        .map(|batch| batch.base_offset())
        .collect();
    assert_eq!(on_b, [0, 2, 4]);
    assert_eq!(record_ids(&finished, "B", "orders"), [1, 2, 3, 4, 5, 6]);
    assert_eq!(barriers(&finished, "B", "orders").len(), 1);
    assert!(finished.read_only_after_failover.is_empty());
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
        first.failed_links[0].contains("has topic id"),
        "{:?}",
        first.failed_links
    );
    assert_eq!(
        first.failed_links, second.failed_links,
        "the ids in the message too"
    );
}
