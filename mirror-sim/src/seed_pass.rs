//! The seed pass: every claim of the verdict checked over a range of seeds, not only the printed one (issue 49).
//!
//! One printed seed is one sample; a claim of the seeds ("the barrier shows no anomaly", "every failover
//! completes", "no producer id is shared") is universal, so a single seed that breaks it breaks it. The pass runs,
//! for each selected topology and each seed of the range, the workloads a claim is about under the strategies
//! the claim names — in memory, without shrinking — and keeps for each run what the verdict judges: the oracle's
//! counts and what stayed unfinished. The seed workload runs under every selected strategy (its rates judge the
//! seeds' predictions); the unplanned workload under the barrier strategies; the beyond workload under
//! `barrier+advance` (the shared-id claim).
//!
//! Runs are independent, so they are spread over the machine's cores: each worker takes the next job from a
//! shared counter and runs it on a runtime of its own; the results are put back in job order, so the pass is
//! deterministic whatever the scheduling.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use serde::{Deserialize, Serialize};

use crate::oracle::Anomalies;
use crate::script::{Script, Topology, Workload};
use crate::strategy::Strategy;
use crate::world::SimStorage;
use crate::{Mutation, SimError};

/// The most worker threads a pass starts.
const MAX_WORKERS: usize = 8;

/// A range of seeds, both ends included (the default, seed 0 alone, is what a report written before ranges
/// existed reads as).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedRange {
    /// The first seed.
    pub first: u64,
    /// The last seed.
    pub last: u64,
}

impl SeedRange {
    /// `count` seeds from `first` on (at least one).
    pub fn starting_at(first: u64, count: u64) -> Self {
        SeedRange {
            first,
            last: first.saturating_add(count.max(1) - 1),
        }
    }

    /// How many seeds the range holds.
    pub fn len(&self) -> u64 {
        self.last - self.first + 1
    }

    /// Never: a range holds at least its first seed.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The seeds, in order.
    pub fn seeds(&self) -> impl Iterator<Item = u64> {
        self.first..=self.last
    }
}

impl std::fmt::Display for SeedRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.first == self.last {
            write!(f, "seed {}", self.first)
        } else {
            write!(f, "seeds {}–{}", self.first, self.last)
        }
    }
}

/// One run of the pass and what the verdict judges of it.
#[derive(Debug, Clone)]
pub struct SeedRun {
    /// The topology.
    pub topology: Topology,
    /// The workload.
    pub workload: Workload,
    /// The strategy.
    pub strategy: Strategy,
    /// The seed its script was generated from.
    pub seed: u64,
    /// Client operations per phase of its script.
    pub steps: usize,
    /// Partitions of every topic of its script.
    pub partitions: u32,
    /// Its script ran over an unreliable network.
    pub network_faults: bool,
    /// What the oracle counted.
    pub anomalies: Anomalies,
    /// Failed links, failed-over partitions left read-only, clients never acknowledged.
    pub unfinished: Vec<String>,
}

impl SeedRun {
    /// Where this run is, as `mirrorlog simulate` selects it: `topology / workload / strategy / seed N`.
    pub fn label(&self) -> String {
        format!(
            "{} / {} / {} / seed {}",
            self.topology,
            self.workload.name(),
            self.strategy,
            self.seed
        )
    }

    /// The command that prints this run's cell (with a shrunk reproduction when an anomaly of (a)–(f) is what
    /// breaks the claim), over that one seed.
    pub fn command(&self) -> String {
        let mut command = format!(
            "mirrorlog simulate --seed {} --topology {} --strategy {}",
            self.seed, self.topology, self.strategy
        );
        if self.steps != crate::report::DEFAULT_STEPS {
            command.push_str(&format!(" --steps {}", self.steps));
        }
        if self.partitions != 1 {
            command.push_str(&format!(" --partitions {}", self.partitions));
        }
        if self.network_faults {
            command.push_str(" --network-faults");
        }
        command.push_str(" --seeds 1");
        command
    }
}

/// A finished pass: every run, in job order.
#[derive(Debug, Clone)]
pub struct SeedPass {
    /// The seeds it covered.
    pub range: SeedRange,
    /// Every run.
    pub runs: Vec<SeedRun>,
}

/// What the pass runs.
#[derive(Debug, Clone)]
pub struct PassOptions<'a> {
    /// Topologies.
    pub topologies: &'a [Topology],
    /// Strategies (the seed workload runs them all; the others only the ones their claims name).
    pub strategies: &'a [Strategy],
    /// The seeds.
    pub range: SeedRange,
    /// Traffic operations per phase.
    pub steps: usize,
    /// Partitions of every topic.
    pub partitions: u32,
    /// Every script over an unreliable network (see [`crate::Script::with_network_faults`]).
    pub network_faults: bool,
    /// A deliberate bug switched on in every run (the verdict's own tests).
    pub mutation: Option<Mutation>,
}

/// The strategies `workload` runs under in the pass, of those selected.
fn strategies_for(workload: Workload, selected: &[Strategy]) -> Vec<Strategy> {
    selected
        .iter()
        .copied()
        .filter(|strategy| match workload {
            Workload::Seed => true,
            Workload::Unplanned => strategy.writes_barrier(),
            Workload::Beyond => *strategy == Strategy::BarrierAdvance,
        })
        .collect()
}

/// One job: a script and the strategies it runs under.
struct Job {
    topology: Topology,
    workload: Workload,
    seed: u64,
    steps: usize,
    partitions: u32,
    network_faults: bool,
    script: Script,
    strategies: Vec<Strategy>,
}

/// Runs the pass; `progress` hears (runs done, runs in all) from the calling thread as results arrive.
pub fn run_pass(
    options: &PassOptions<'_>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<SeedPass, SimError> {
    let mut jobs = Vec::new();
    for &topology in options.topologies {
        for seed in options.range.seeds() {
            for workload in Workload::ALL {
                let strategies = strategies_for(workload, options.strategies);
                if strategies.is_empty() {
                    continue;
                }
                let script = crate::script::generate_with(
                    topology,
                    workload,
                    seed,
                    options.steps,
                    options.partitions,
                    options.network_faults,
                );
                jobs.push(Job {
                    topology,
                    workload,
                    seed,
                    steps: options.steps,
                    partitions: options.partitions,
                    network_faults: options.network_faults,
                    script,
                    strategies,
                });
            }
        }
    }
    let total: usize = jobs.iter().map(|job| job.strategies.len()).sum();
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, MAX_WORKERS)
        .min(jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<Vec<SeedRun>>> = jobs.iter().map(|_| None).collect();
    let (sender, receiver) = mpsc::channel::<(usize, Result<Vec<SeedRun>, SimError>)>();
    let outcome = std::thread::scope(|scope| {
        for _ in 0..workers {
            let sender = sender.clone();
            let (jobs, next, mutation) = (&jobs, &next, options.mutation);
            scope.spawn(move || loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(index) else {
                    return;
                };
                let runs = run_job(job, mutation);
                let failed = runs.is_err();
                if sender.send((index, runs)).is_err() || failed {
                    // The pass has stopped listening, or it is over: an error ends it.
                    next.store(jobs.len(), Ordering::Relaxed);
                    return;
                }
            });
        }
        drop(sender);
        let mut done = 0;
        for (index, runs) in receiver {
            let runs = runs?;
            done += runs.len();
            if let Some(slot) = results.get_mut(index) {
                *slot = Some(runs);
            }
            progress(done, total);
        }
        Ok::<(), SimError>(())
    });
    outcome?;
    let mut runs = Vec::with_capacity(total);
    for (job, result) in jobs.iter().zip(results) {
        let Some(result) = result else {
            return Err(SimError::Setup(format!(
                "the seed pass lost the runs of {} / {} / seed {}",
                job.topology,
                job.workload.name(),
                job.seed
            )));
        };
        runs.extend(result);
    }
    Ok(SeedPass {
        range: options.range,
        runs,
    })
}

/// Runs one job's script under each of its strategies, in memory.
fn run_job(job: &Job, mutation: Option<Mutation>) -> Result<Vec<SeedRun>, SimError> {
    let mut runs = Vec::with_capacity(job.strategies.len());
    for &strategy in &job.strategies {
        let (findings, finished) = crate::run_script_mutated(
            &job.script,
            strategy,
            &SimStorage::memory(),
            crate::FetchBound::default(),
            mutation,
        )?;
        let unfinished = finished
            .failed_links
            .iter()
            .map(|link| format!("link failed: {link}"))
            .chain(
                finished
                    .read_only_after_failover
                    .iter()
                    .map(|partition| format!("{partition} read-only after failover")),
            )
            .chain(finished.unacknowledged.iter().cloned())
            .collect();
        runs.push(SeedRun {
            topology: job.topology,
            workload: job.workload,
            strategy,
            seed: job.seed,
            steps: job.steps,
            partitions: job.partitions,
            network_faults: job.network_faults,
            anomalies: findings.anomalies,
            unfinished,
        });
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking
    use super::*;

    #[test]
    fn a_range_names_its_ends_and_counts_both() {
        let range = SeedRange::starting_at(7, 20);
        assert_eq!((range.first, range.last, range.len()), (7, 26, 20));
        assert_eq!(range.to_string(), "seeds 7–26");
        assert_eq!(SeedRange::starting_at(3, 1).to_string(), "seed 3");
        assert_eq!(SeedRange::starting_at(u64::MAX, 5).last, u64::MAX);
    }

    #[test]
    fn the_pass_is_the_same_whatever_the_scheduling_and_matches_single_runs() {
        let options = PassOptions {
            topologies: &[Topology::ActivePassive],
            strategies: &[Strategy::None, Strategy::BarrierAdvance],
            range: SeedRange::starting_at(1, 3),
            steps: 10,
            partitions: 1,
            network_faults: false,
            mutation: None,
        };
        let pass = run_pass(&options, &mut |_, _| {}).unwrap();
        // seed: both strategies; unplanned: barrier+advance; beyond: barrier+advance; for each of 3 seeds.
        assert_eq!(pass.runs.len(), 3 * 4);
        let again = run_pass(&options, &mut |_, _| {}).unwrap();
        let key = |run: &SeedRun| (run.label(), run.anomalies.clone(), run.unfinished.clone());
        assert_eq!(
            pass.runs.iter().map(key).collect::<Vec<_>>(),
            again.runs.iter().map(key).collect::<Vec<_>>()
        );
        let alone = &pass.runs[0];
        let script = crate::script::generate(alone.topology, alone.workload, alone.seed, 10);
        let (findings, _) = crate::run_script(&script, alone.strategy, &SimStorage::memory()).unwrap();
        assert_eq!(findings.anomalies, alone.anomalies);
    }
}
