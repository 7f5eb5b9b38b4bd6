//! Same seed, same report; `random` under `barrier` is clean over 200 seeds; a shrunk reproduction replays.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use mirror_sim::report::{render_text, run_matrix, MatrixOptions};
use mirror_sim::shrink::{shrink, Class, Reproduction};
use mirror_sim::{generate, run_script, SimStorage, Strategy, Topology, Workload};

fn options(seed: u64) -> MatrixOptions {
    MatrixOptions {
        topologies: vec![Topology::Chain3, Topology::Random],
        strategies: Strategy::ALL.to_vec(),
        seed,
        steps: 12,
        storage: SimStorage::memory(),
        shrink_budget: 20,
        seeds: 3,
        mutation: None,
        partitions: 1,
        network_faults: false,
    }
}

#[test]
fn two_runs_with_one_seed_produce_identical_reports() {
    let first = run_matrix(&options(7), &mut |_, _, _| {}).unwrap();
    let second = run_matrix(&options(7), &mut |_, _, _| {}).unwrap();
    assert_eq!(render_text(&first), render_text(&second));
    assert_eq!(
        serde_json::to_string(&first).unwrap(),
        serde_json::to_string(&second).unwrap()
    );
    let other = run_matrix(&options(8), &mut |_, _, _| {}).unwrap();
    assert_ne!(render_text(&first), render_text(&other), "the seed matters");
}

/// The seeds' scenarios (workload `seed`). The `beyond` workload is not clean under `barrier`: see
/// `beyond_the_seeds.rs` for what producers that keep their ids do.
#[test]
fn random_topologies_show_no_anomaly_under_barrier_over_200_seeds() {
    for seed in 0..200 {
        let workload = Workload::Seed;
        let script = generate(Topology::Random, workload, seed, 12);
        let (findings, _) = run_script(&script, Strategy::Barrier, &SimStorage::memory()).unwrap();
        assert_eq!(
            findings.anomalies.corruption(),
            0,
            "seed {seed} {}: {:?}",
            workload.name(),
            findings.notes
        );
    }
}

#[test]
fn a_shrunk_reproduction_replays_to_the_same_anomaly() {
    let script = generate(Topology::ActivePassive, Workload::Seed, 1, 30);
    let (findings, _) = run_script(&script, Strategy::None, &SimStorage::memory()).unwrap();
    assert!(findings.anomalies.silent_loss > 0);
    let repro = shrink(
        &script,
        Strategy::None,
        &SimStorage::memory(),
        Class::SilentLoss,
        200,
    )
    .unwrap();
    assert!(
        repro.script.steps.len() < script.steps.len() / 4,
        "{} steps",
        repro.script.steps.len()
    );
    // Through JSON, as `--trace` writes it and `--replay` reads it, and on the fs backend.
    let text = serde_json::to_string(&repro).unwrap();
    let back: Reproduction = serde_json::from_str(&text).unwrap();
    let (again, _) = run_script(
        &back.script,
        back.strategy,
        &SimStorage::backend(storage_config::Backend::Fs),
    )
    .unwrap();
    assert!(Class::SilentLoss.count(&again.anomalies) > 0);
    assert!(
        again.notes.contains(&repro.finding),
        "{:?} vs {}",
        again.notes,
        repro.finding
    );
    // Minimal: removing any single step loses the anomaly.
    for index in 0..repro.script.steps.len() {
        let mut fewer = repro.script.clone();
        fewer.steps.remove(index);
        let (without, _) = run_script(&fewer, Strategy::None, &SimStorage::memory()).unwrap();
        assert_eq!(without.anomalies.silent_loss, 0, "step {index} was not needed");
    }
}

#[test]
fn a_replayed_script_with_a_path_for_a_cluster_name_is_refused() {
    for name in ["../escape", "a/b", "", ".."] {
        let script = mirror_sim::Script::new(vec![name.to_owned()], vec![mirror_sim::Step::Mirror]);
        let result = run_script(
            &script,
            Strategy::Barrier,
            &SimStorage::backend(storage_config::Backend::Fs),
        );
        assert!(matches!(result, Err(mirror_sim::SimError::Setup(_))), "{name:?}");
    }
}
