//! The topology × strategy matrix, its text and JSON reports, and the verdict.
//!
//! Every cell runs the same generated script per (topology, workload) under each strategy, so a difference
//! between two cells of a row is the strategy's doing. The verdict has two parts: **the seeds' claims** — the
//! barrier strategies show no anomaly of (a)–(e) in the seed workload, and the oracle catches the corruption the
//! seeds predict for `none`, `negate` and `negate-skip-negative` ([`PREDICTIONS`]; each judged over
//! the run's seed range and holding when shown in at least [`PREDICTION_SHARE_PERCENT`] of them, so a blind
//! oracle fails the run and one lucky seed does not pass it) — and, separately, **beyond the seeds**: what the
//! beyond workload showed under each strategy.
//!
//! Every claim is judged on the printed seed's cells *and* over the run's seed range ([`crate::seed_pass`],
//! `--seeds`, [`DEFAULT_SEEDS`] by default): a universal claim broken by one seed of the range does not hold, and
//! its evidence names that seed and the command that shows it shrunk. Each claim says the range it was judged
//! over.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::oracle::Anomalies;
use crate::script::{Script, Topology, Workload};
use crate::seed_pass::{run_pass, PassOptions, SeedPass, SeedRange, SeedRun};
use crate::shrink::{shrink, Class, Reproduction};
use crate::strategy::Strategy;
use crate::world::{ClientErrors, SimStorage};
use crate::SimError;

/// What the seeds predict the oracle must catch: (strategy, topology, what, classes of which at least one must
/// be non-zero) in the seed workload.
pub const PREDICTIONS: [(Strategy, Topology, &str, &[Class]); 3] = [
    (
        Strategy::Negate,
        Topology::Chain5,
        "seed 000: the transform is not idempotent; in a chain a negated id comes back and collides with a local producer",
        &[Class::CollisionSameEpoch, Class::CollisionLowerEpoch, Class::CollisionMarker, Class::SilentLoss],
    ),
    (
        Strategy::NegateSkipNegative,
        Topology::Chain5,
        "seed 000: skipping negative ids, two clusters' local producers with one id meet downstream under one negated id",
        &[Class::CollisionSameEpoch, Class::CollisionLowerEpoch, Class::CollisionMarker, Class::SilentLoss],
    ),
    (
        Strategy::None,
        Topology::ActivePassive,
        "seed 000 (no PID mapping: two clusters issue the same id); kip1279-notes §7: the destination's first producers reuse mirrored ids and are acknowledged as duplicates without being written",
        &[Class::SilentLoss],
    ),
];

/// Runs `mirrorlog simulate` allows the shrinker per anomalous cell: enough for a minimal reproduction of the
/// default scripts (a few hundred steps) in about 5 seconds for the whole matrix.
pub const DEFAULT_SHRINK_BUDGET: usize = 300;

/// Client operations per phase of each scenario by default (`--steps`).
pub const DEFAULT_STEPS: usize = 30;

/// How many seeds every claim is checked over by default (`--seeds`), from the printed seed on: about 14,000
/// runs in memory, spread over the machine's cores.
pub const DEFAULT_SEEDS: u64 = 200;

/// The share of seeds (percent) in which a predicted corruption must appear for the prediction to hold: the
/// seeds say these strategies *can* corrupt data, not that every workload shows it; a rate below this is a
/// mechanism the simulator reaches too rarely to call it shown.
pub const PREDICTION_SHARE_PERCENT: u64 = 50;

/// What to run.
#[derive(Debug, Clone)]
pub struct MatrixOptions {
    /// Topologies (rows).
    pub topologies: Vec<Topology>,
    /// Strategies (columns of a row).
    pub strategies: Vec<Strategy>,
    /// The seed.
    pub seed: u64,
    /// Traffic operations per phase.
    pub steps: usize,
    /// Where partitions live.
    pub storage: SimStorage,
    /// Runs allowed for shrinking each cell's first anomaly (0: no reproductions).
    pub shrink_budget: usize,
    /// A deliberate bug switched on in every run (the verdict's own tests); `None` for real runs.
    pub mutation: Option<crate::Mutation>,
    /// Seeds every claim is checked over, from `seed` on (in memory; see [`crate::seed_pass`]).
    pub seeds: u64,
    /// Partitions of every topic (see [`Script::partitions`]).
    pub partitions: u32,
    /// Every script over an unreliable network: Kafka-like sources and seeded source faults
    /// ([`Script::with_network_faults`]).
    pub network_faults: bool,
}

/// One cell: a topology, a workload and a strategy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    /// The topology.
    pub topology: Topology,
    /// The workload.
    pub workload: Workload,
    /// The strategy.
    pub strategy: Strategy,
    /// What the oracle counted.
    pub anomalies: Anomalies,
    /// Refusals the clients heard (visible errors).
    pub client_errors: ClientErrors,
    /// Mirror links that went FAILED, and failovers whose STOPPING did not end STOPPED.
    pub failed_links: Vec<String>,
    /// Partitions a failover stopped mirroring that stayed read-only.
    pub read_only_after_failover: Vec<String>,
    /// Clients left with a batch never acknowledged, after a last flush.
    pub unacknowledged: Vec<String>,
    /// Records a failover's source acknowledged that the destination did not hold when it took over.
    pub failover_window: u64,
    /// Mirrors whose producer state differed from their source's as a planned failover began (the barrier's
    /// scope at work; reported, not judged).
    pub state_drift: Vec<String>,
    /// Client operations executed.
    pub operations: u64,
    /// The oracle's notes (the first few).
    pub notes: Vec<String>,
    /// The first anomaly, shrunk.
    pub reproduction: Option<Reproduction>,
}

/// A finished matrix.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Matrix {
    /// The seed.
    pub seed: u64,
    /// Traffic operations per phase.
    pub steps: usize,
    /// Partitions of every topic.
    #[serde(default = "one_partition", skip_serializing_if = "is_one_partition")]
    pub partitions: u32,
    /// Every script ran over an unreliable network (absent: no).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network_faults: bool,
    /// The backend's name.
    pub backend: String,
    /// Every cell, in run order.
    pub cells: Vec<Cell>,
    /// Each selected cell of the seed workload run over many seeds (the predictions are judged on these).
    pub seed_rates: Vec<SeedRates>,
    /// The verdict.
    pub verdict: Verdict,
}

fn one_partition() -> u32 {
    1
}

fn is_one_partition(partitions: &u32) -> bool {
    *partitions == 1
}

/// One checked claim.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claim {
    /// What is claimed.
    pub claim: String,
    /// Whether the run shows it.
    pub holds: bool,
    /// The evidence.
    pub evidence: String,
    /// The seeds it was judged over (besides the printed seed's cells, which the evidence names).
    #[serde(default)]
    pub seeds: SeedRange,
}

/// The verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verdict {
    /// True iff at least one claim was checked and every claim checked holds.
    pub seed_claims_hold: bool,
    /// False when the selected topologies and strategies check no claim of the seeds at all.
    pub checked: bool,
    /// The seeds' claims, checked.
    pub seed_claims: Vec<Claim>,
    /// What the beyond workload showed, per strategy.
    pub beyond: Vec<String>,
}

/// The scripts of a matrix: one per (topology, workload), shared by every strategy.
pub fn scripts(options: &MatrixOptions) -> Vec<(Topology, Workload, Script)> {
    let mut out = Vec::new();
    for &topology in &options.topologies {
        for workload in Workload::ALL {
            out.push((
                topology,
                workload,
                crate::script::generate_with(
                    topology,
                    workload,
                    options.seed,
                    options.steps,
                    options.partitions,
                    options.network_faults,
                ),
            ));
        }
    }
    out
}

/// Runs the matrix; `progress` hears each cell as it finishes (done, total, label).
///
/// The printed seed's cells (on the run's storage: mostly waiting on syncs) run on a thread of their own while the
/// seed pass (in memory: CPU) runs on the others; `progress` hears both from the calling thread, counted together.
pub fn run_matrix(
    options: &MatrixOptions,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Matrix, SimError> {
    let range = SeedRange::starting_at(options.seed, options.seeds);
    let pass_options = PassOptions {
        topologies: &options.topologies,
        strategies: &options.strategies,
        range,
        steps: options.steps,
        partitions: options.partitions,
        network_faults: options.network_faults,
        mutation: options.mutation,
    };
    let (cells, pass) = std::thread::scope(|scope| {
        let (events, heard) = std::sync::mpsc::channel::<(usize, usize, String)>();
        let cells = scope.spawn(move || {
            run_cells(options, &mut |done, total, label| {
                // The receiver outlives this thread: a send cannot fail while anyone listens.
                let _ = events.send((done, total, label.to_owned()));
            })
        });
        let mut latest = (0, 0, String::new());
        let pass = run_pass(&pass_options, &mut |done, runs| {
            while let Ok(event) = heard.try_recv() {
                latest = event;
            }
            progress(
                latest.0 + done,
                latest.1 + runs,
                &format!("{range}: runs in memory"),
            );
        });
        let pass_total = pass.as_ref().map_or(0, |pass| pass.runs.len());
        for (done, total, label) in heard {
            progress(done + pass_total, total + pass_total, &label);
        }
        let cells = cells
            .join()
            .unwrap_or_else(|_| Err(SimError::Setup("the matrix's cells panicked".into())));
        (cells, pass)
    });
    let (cells, pass) = (cells?, pass?);
    let rates = seed_rates(options, &pass);
    let verdict = verdict(&cells, &rates, &pass, options);
    Ok(Matrix {
        seed: options.seed,
        steps: options.steps,
        partitions: options.partitions,
        network_faults: options.network_faults,
        backend: options.storage.name().to_owned(),
        cells,
        seed_rates: rates,
        verdict,
    })
}

/// Runs the printed seed's cells; `progress` hears each as it finishes (done, total, label).
fn run_cells(
    options: &MatrixOptions,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<Cell>, SimError> {
    let scripts = scripts(options);
    let total = scripts.len() * options.strategies.len();
    let mut cells = Vec::new();
    for (topology, workload, script) in &scripts {
        for &strategy in &options.strategies {
            let (findings, finished) = crate::run_script_mutated(
                script,
                strategy,
                &options.storage,
                crate::FetchBound::default(),
                options.mutation,
            )?;
            let reproduction = match Class::first_in(&findings.anomalies) {
                Some(class) if options.shrink_budget > 0 => Some(shrink(
                    script,
                    strategy,
                    &SimStorage::memory(),
                    class,
                    options.shrink_budget,
                )?),
                _ => None,
            };
            cells.push(Cell {
                topology: *topology,
                workload: *workload,
                strategy,
                anomalies: findings.anomalies,
                client_errors: finished.client_errors,
                failed_links: finished.failed_links,
                read_only_after_failover: finished.read_only_after_failover,
                unacknowledged: finished.unacknowledged,
                failover_window: finished.failover_window.len() as u64,
                state_drift: finished.state_drift,
                operations: finished.operations,
                notes: findings.notes.into_iter().take(5).collect(),
                reproduction,
            });
            progress(
                cells.len(),
                total,
                &format!("{topology} / {} / {strategy}", workload.name()),
            );
        }
    }
    Ok(cells)
}

/// One cell of the seed workload run over many seeds: in how many of them each corruption class appears.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SeedRates {
    /// The strategy.
    pub strategy: Strategy,
    /// The topology.
    pub topology: Topology,
    /// Seeds run.
    pub seeds: u64,
    /// The first seed run.
    pub first_seed: u64,
    /// For each class of (a)–(e), the seeds whose run showed it.
    pub classes: BTreeMap<Class, u64>,
    /// For a cell the seeds make a prediction about, the seeds whose run showed one of its classes.
    pub predicted: Option<u64>,
}

/// The classes (a)–(e) the rates count: the first seven of `Class::ALL` (the applications' (f) is reported, not
/// predicted).
const CORRUPTION_CLASSES: &[Class] = Class::ALL.split_at(7).0;

/// Every selected cell of the seed workload over the pass's seeds: in how many of them each class appears.
fn seed_rates(options: &MatrixOptions, pass: &SeedPass) -> Vec<SeedRates> {
    let mut rates = Vec::new();
    for &topology in &options.topologies {
        for &strategy in &options.strategies {
            let prediction = PREDICTIONS
                .iter()
                .find(|(s, t, _, _)| *s == strategy && *t == topology)
                .map(|(_, _, _, classes)| *classes);
            let mut classes: BTreeMap<Class, u64> =
                CORRUPTION_CLASSES.iter().map(|class| (*class, 0)).collect();
            let mut predicted = prediction.map(|_| 0);
            let runs = pass.runs.iter().filter(|run| {
                run.topology == topology && run.strategy == strategy && run.workload == Workload::Seed
            });
            for run in runs {
                for (class, seeds) in classes.iter_mut() {
                    if class.count(&run.anomalies) > 0 {
                        *seeds += 1;
                    }
                }
                if let (Some(predicted), Some(predicted_classes)) = (predicted.as_mut(), prediction) {
                    if predicted_classes
                        .iter()
                        .any(|class| class.count(&run.anomalies) > 0)
                    {
                        *predicted += 1;
                    }
                }
            }
            rates.push(SeedRates {
                strategy,
                topology,
                seeds: pass.range.len(),
                first_seed: pass.range.first,
                classes,
                predicted,
            });
        }
    }
    rates
}

/// How many runs of a pass to name in a failing claim's evidence before "and N more".
const RUNS_NAMED: usize = 3;

/// A universal claim judged over the pass's `runs`: `broken` says why a run breaks it (`None`: it does not).
/// Returns whether no run breaks it, and the evidence: how many runs, and the first few that break it with the
/// command that shows the first one shrunk.
fn judged_over_seeds(
    runs: &[&SeedRun],
    range: SeedRange,
    broken: impl Fn(&SeedRun) -> Option<String>,
) -> (bool, String) {
    let breaking: Vec<(&SeedRun, String)> = runs
        .iter()
        .filter_map(|run| broken(run).map(|why| (*run, why)))
        .collect();
    let Some((first, _)) = breaking.first() else {
        return (true, format!("{range}: 0 in {} runs", runs.len()));
    };
    let named: Vec<String> = breaking
        .iter()
        .take(RUNS_NAMED)
        .map(|(run, why)| format!("{}: {why}", run.label()))
        .collect();
    let more = breaking.len().saturating_sub(RUNS_NAMED);
    (
        false,
        format!(
            "{range}: {} of {} runs break it: {}{}; shown by `{}`",
            breaking.len(),
            runs.len(),
            named.join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            },
            first.command()
        ),
    )
}

/// Joins the printed seed's evidence and the pass's.
fn both(this_seed: String, over_seeds: String) -> String {
    format!("{this_seed}; {over_seeds}")
}

fn verdict(cells: &[Cell], rates: &[SeedRates], pass: &SeedPass, options: &MatrixOptions) -> Verdict {
    let mut claims = Vec::new();
    let range = pass.range;
    let barrier_runs: Vec<&SeedRun> = pass
        .runs
        .iter()
        .filter(|run| {
            matches!(run.workload, Workload::Seed | Workload::Unplanned) && run.strategy.writes_barrier()
        })
        .collect();
    let barrier_cells: Vec<&Cell> = cells
        .iter()
        .filter(|cell| {
            matches!(cell.workload, Workload::Seed | Workload::Unplanned) && cell.strategy.writes_barrier()
        })
        .collect();
    if !barrier_cells.is_empty() {
        let dirty: Vec<String> = barrier_cells
            .iter()
            .filter(|cell| cell.anomalies.corruption() > 0)
            .map(|cell| {
                format!(
                    "{} / {} / {}: {}",
                    cell.topology,
                    cell.workload.name(),
                    cell.strategy,
                    cell.anomalies.corruption()
                )
            })
            .collect();
        let (clean_over_seeds, over_seeds) = judged_over_seeds(&barrier_runs, range, |run| {
            let count = run.anomalies.corruption();
            (count > 0).then(|| format!("{count} anomalies"))
        });
        claims.push(Claim {
            claim: "the barrier strategies show no anomaly of (a)-(e) in the scenarios the seeds describe, with planned and unplanned failovers (a failover's loss window is not an anomaly)"
                .into(),
            holds: dirty.is_empty() && clean_over_seeds,
            evidence: both(
                if dirty.is_empty() {
                    format!("seed {}: 0 anomalies in {} cells", options.seed, barrier_cells.len())
                } else {
                    format!("seed {}: {}", options.seed, dirty.join("; "))
                },
                over_seeds,
            ),
            seeds: range,
        });
        let mut unfinished: Vec<String> = Vec::new();
        for cell in &barrier_cells {
            let at = format!("{} / {} / {}", cell.topology, cell.workload.name(), cell.strategy);
            unfinished.extend(
                cell.failed_links
                    .iter()
                    .map(|link| format!("{at}: link failed: {link}")),
            );
            unfinished.extend(
                cell.read_only_after_failover
                    .iter()
                    .map(|partition| format!("{at}: {partition} read-only after failover")),
            );
            unfinished.extend(cell.unacknowledged.iter().map(|client| format!("{at}: {client}")));
        }
        let (finished_over_seeds, over_seeds) =
            judged_over_seeds(&barrier_runs, range, |run| run.unfinished.first().cloned());
        claims.push(Claim {
            claim: "under the barrier strategies every failover completes: no link fails, no failed-over partition stays read-only, every client's last batch is acknowledged"
                .into(),
            holds: unfinished.is_empty() && finished_over_seeds,
            evidence: both(
                if unfinished.is_empty() {
                    format!("seed {}: in {} cells", options.seed, barrier_cells.len())
                } else {
                    format!("seed {}: {}", options.seed, unfinished.join("; "))
                },
                over_seeds,
            ),
            seeds: range,
        });
    }
    let advance_cells: Vec<&Cell> = cells
        .iter()
        .filter(|cell| cell.strategy == Strategy::BarrierAdvance)
        .collect();
    if !advance_cells.is_empty() {
        let shared: Vec<String> = advance_cells
            .iter()
            .filter(|cell| cell.anomalies.shared_ids > 0)
            .map(|cell| {
                format!(
                    "{} / {}: {}",
                    cell.topology,
                    cell.workload.name(),
                    cell.anomalies.shared_ids
                )
            })
            .collect();
        let advance_runs: Vec<&SeedRun> = pass
            .runs
            .iter()
            .filter(|run| run.strategy == Strategy::BarrierAdvance)
            .collect();
        let (unshared_over_seeds, over_seeds) = judged_over_seeds(&advance_runs, range, |run| {
            let shared = run.anomalies.shared_ids;
            (shared > 0).then(|| format!("{shared} shared ids"))
        });
        claims.push(Claim {
            claim: "kip1279-notes §12.9 (Redpanda advances the allocator past mirrored ids; here past the source's report of the ids it issued, ADR 0047): under barrier+advance no producer id is shared by two real clients, in every workload".into(),
            holds: shared.is_empty() && unshared_over_seeds,
            evidence: both(
                if shared.is_empty() {
                    format!("seed {}: 0 shared ids in {} cells", options.seed, advance_cells.len())
                } else {
                    format!("seed {}: {}", options.seed, shared.join("; "))
                },
                over_seeds,
            ),
            seeds: range,
        });
    }
    for (strategy, topology, what, classes) in PREDICTIONS {
        let Some((rate, showing)) = rates
            .iter()
            .filter(|rate| rate.strategy == strategy && rate.topology == topology)
            .find_map(|rate| rate.predicted.map(|showing| (rate, showing)))
        else {
            continue;
        };
        let labels: Vec<&str> = classes.iter().map(|class| class.label()).collect();
        let this_run = cells
            .iter()
            .find(|cell| {
                cell.strategy == strategy && cell.topology == topology && cell.workload == Workload::Seed
            })
            .map(|cell| {
                let found: Vec<String> = classes
                    .iter()
                    .filter(|class| class.count(&cell.anomalies) > 0)
                    .map(|class| format!("{} {}", class.label(), class.count(&cell.anomalies)))
                    .collect();
                if found.is_empty() {
                    format!("seed {}: none of it", options.seed)
                } else {
                    format!("seed {}: {}", options.seed, found.join(", "))
                }
            })
            .unwrap_or_default();
        claims.push(Claim {
            claim: format!("{strategy} in {topology}: {what}"),
            holds: rate.seeds > 0 && showing * 100 >= PREDICTION_SHARE_PERCENT * rate.seeds,
            evidence: format!(
                "{} in {} of {} seeds ({}–{}; holds from {}%); {this_run}",
                labels.join(" or "),
                showing,
                rate.seeds,
                rate.first_seed,
                rate.first_seed.wrapping_add(rate.seeds.saturating_sub(1)),
                PREDICTION_SHARE_PERCENT
            ),
            seeds: SeedRange::starting_at(rate.first_seed, rate.seeds),
        });
    }
    let checked = !claims.is_empty();
    let seed_claims_hold = checked && claims.iter().all(|claim| claim.holds);
    let mut beyond = Vec::new();
    for &strategy in &options.strategies {
        let mut total = Anomalies::default();
        let mut where_: Vec<String> = Vec::new();
        for cell in cells
            .iter()
            .filter(|cell| cell.strategy == strategy && cell.workload == Workload::Beyond)
        {
            total.add(&cell.anomalies);
            if cell.anomalies.corruption() > 0 {
                where_.push(cell.topology.to_string());
            }
        }
        beyond.push(format!(
            "{strategy}: {} anomalies of (a)-(e) (loss {}, duplicates {}, read_committed {}, collisions {}, divergence {}){}; {} producer ids shared by two real clients; applications: {} died, {} recoveries, {} duplicated or lost inputs",
            total.corruption(),
            total.silent_loss,
            total.duplicates,
            total.exposed + total.hidden_committed,
            total.collisions(),
            total.divergence,
            if where_.is_empty() { String::new() } else { format!(" in {}", where_.join(", ")) },
            total.shared_ids,
            total.apps_dead,
            total.apps_recovered,
            total.app_damage(),
        ));
    }
    Verdict {
        seed_claims_hold,
        checked,
        seed_claims: claims,
        beyond,
    }
}

/// The seed workload's cells over many seeds: for each class, in how many seeds it appears.
fn render_seed_rates(out: &mut String, matrix: &Matrix) {
    let Some(first) = matrix.seed_rates.first() else {
        return;
    };
    let _ = writeln!(
        out,
        "Workload `seed` over seeds {}–{}: in how many of the {} seeds each class appears (in memory)",
        first.first_seed,
        first.first_seed.wrapping_add(first.seeds.saturating_sub(1)),
        first.seeds
    );
    let _ = writeln!(
        out,
        "{:<15} {:<21} {:>4} {:>4} {:>4} {:>4} {:>4} {:>4} {:>4}  predicted",
        "topology", "strategy", "(a)", "(b)", "(c)", "(d1)", "(d2)", "(d3)", "(e)"
    );
    for rate in &matrix.seed_rates {
        let mut line = format!("{:<15} {:<21}", rate.topology.name(), rate.strategy.name());
        for &class in CORRUPTION_CLASSES {
            let _ = write!(line, " {:>4}", rate.classes.get(&class).copied().unwrap_or(0));
        }
        if let Some(showing) = rate.predicted {
            let _ = write!(line, "  {showing}/{}", rate.seeds);
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out);
}

/// The human report: the tables of the three workloads, the seed workload's rates over many seeds, the
/// reproductions, the verdict.
pub fn render_text(matrix: &Matrix) -> String {
    let mut out = String::new();
    let mut partitions = if matrix.partitions > 1 {
        format!(", {} partitions per topic", matrix.partitions)
    } else {
        String::new()
    };
    if matrix.network_faults {
        partitions.push_str(", over an unreliable network (Kafka-like sources, source faults)");
    }
    let _ = writeln!(
        out,
        "mirrorlog simulate: seed {}, {} operations per phase{partitions}, backend {}\n",
        matrix.seed, matrix.steps, matrix.backend
    );
    for workload in Workload::ALL {
        let title = match workload {
            Workload::Seed => "Workload `seed`: mirrored producers, then local producers after failover; moving clients re-initialise",
            Workload::Beyond => "Workload `beyond`: moving producers keep their ids, transactional ids expire, applications under both policies",
            Workload::Unplanned => "Workload `unplanned`: the seed workload, but each source is lost with open transactions and data not yet mirrored",
        };
        let _ = writeln!(out, "{title}");
        let _ = writeln!(
            out,
            "{:<15} {:<21} {:>4} {:>4} {:>4} {:>4} {:>4} {:>4} {:>4} {:>9} {:>7} {:>6} {:>9} {:>11} {:>7} {:>6}",
            "topology",
            "strategy",
            "(a)",
            "(b)",
            "(c)",
            "(d1)",
            "(d2)",
            "(d3)",
            "(e)",
            "(f)d/r/x",
            "shared",
            "ops",
            "refusals",
            "unfinished",
            "window",
            "drift"
        );
        for cell in matrix.cells.iter().filter(|cell| cell.workload == workload) {
            let a = &cell.anomalies;
            let refusals: u64 = cell.client_errors.values().sum();
            let _ = writeln!(
                out,
                "{:<15} {:<21} {:>4} {:>4} {:>4} {:>4} {:>4} {:>4} {:>4} {:>9} {:>7} {:>6} {:>9} {:>11} {:>7} {:>6}",
                cell.topology.name(),
                cell.strategy.name(),
                a.silent_loss,
                a.duplicates,
                a.exposed + a.hidden_committed,
                a.collision_same_epoch,
                a.collision_lower_epoch,
                a.collision_marker,
                a.divergence,
                format!("{}/{}/{}", a.apps_dead, a.apps_recovered, a.app_damage()),
                a.shared_ids,
                cell.operations,
                refusals,
                format!(
                    "{}/{}/{}",
                    cell.failed_links.len(),
                    cell.read_only_after_failover.len(),
                    cell.unacknowledged.len()
                ),
                cell.failover_window,
                cell.state_drift.len()
            );
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "(a) acknowledged but not in the log  (b) duplicate copies  (c) read_committed shows aborted / hides committed\n(d1) two producers, one id, same epoch, sequence out of order  (d2) lower epoch accepted  (d3) one's marker ends the other's transaction\n(e) leader/follower/recovered producer state differ  (f) applications dead/recoveries/duplicated-or-lost inputs\nshared: producer ids two real clients sent under to one partition (refused or not)  refusals: errors the clients heard\nunfinished: links failed / failed-over partitions left read-only / clients whose last batch was never acknowledged\nwindow: records a failover's source acknowledged that its destination had not received (the loss window of an unplanned failover)\ndrift: caught-up mirrors whose producer state differed from their source's as a planned failover began (not judged)\n"
    );
    render_seed_rates(&mut out, matrix);
    let with_repro: Vec<&Cell> = matrix
        .cells
        .iter()
        .filter(|cell| cell.reproduction.is_some())
        .collect();
    if !with_repro.is_empty() {
        let _ = writeln!(
            out,
            "Minimal reproductions (the first anomaly of each cell, shrunk)"
        );
        for cell in with_repro {
            let Some(repro) = &cell.reproduction else {
                continue;
            };
            let _ = writeln!(
                out,
                "\n[{} / {} / {}] {}: {} step(s)",
                cell.topology,
                cell.workload.name(),
                cell.strategy,
                repro.class.label(),
                repro.script.steps.len()
            );
            for (index, step) in repro.script.steps.iter().enumerate() {
                let _ = writeln!(out, "  {:>2}. {step}", index + 1);
            }
            let _ = writeln!(out, "  => {}", repro.finding);
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "Verdict");
    let _ = writeln!(
        out,
        "  The seeds' claims: {}",
        if !matrix.verdict.checked {
            "NONE CHECKED (the selected topologies and strategies test no claim of the seeds)"
        } else if matrix.verdict.seed_claims_hold {
            "HOLD"
        } else {
            "DO NOT HOLD"
        }
    );
    for claim in &matrix.verdict.seed_claims {
        let _ = writeln!(
            out,
            "    [{}] {}\n          {}",
            if claim.holds { "ok" } else { "FAIL" },
            claim.claim,
            claim.evidence
        );
    }
    let _ = writeln!(out, "  Beyond the seeds (workload `beyond`):");
    for line in &matrix.verdict.beyond {
        let _ = writeln!(out, "    {line}");
    }
    out
}

/// Counts per strategy over a set of cells (used by tests and the JSON report).
pub fn totals(cells: &[Cell]) -> BTreeMap<Strategy, Anomalies> {
    let mut out: BTreeMap<Strategy, Anomalies> = BTreeMap::new();
    for cell in cells {
        out.entry(cell.strategy).or_default().add(&cell.anomalies);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking
    use super::*;

    fn options() -> MatrixOptions {
        MatrixOptions {
            topologies: vec![Topology::ActivePassive],
            strategies: vec![Strategy::None],
            seed: 7,
            steps: 30,
            storage: SimStorage::memory(),
            shrink_budget: 0,
            seeds: 20,
            mutation: None,
            partitions: 1,
            network_faults: false,
        }
    }

    fn prediction_claim(showing: u64) -> Claim {
        let rate = SeedRates {
            strategy: Strategy::None,
            topology: Topology::ActivePassive,
            seeds: 20,
            first_seed: 7,
            classes: BTreeMap::new(),
            predicted: Some(showing),
        };
        let pass = SeedPass {
            range: SeedRange::starting_at(7, 20),
            runs: Vec::new(),
        };
        let verdict = verdict(&[], &[rate], &pass, &options());
        verdict
            .seed_claims
            .into_iter()
            .find(|claim| claim.claim.starts_with("none in active-passive"))
            .expect("the prediction is judged")
    }

    #[test]
    fn a_prediction_shown_in_fewer_than_half_the_seeds_does_not_hold() {
        let claim = prediction_claim(9);
        assert!(!claim.holds, "{claim:?}");
        assert!(claim.evidence.contains("in 9 of 20 seeds (7–26"), "{claim:?}");
    }

    #[test]
    fn a_prediction_shown_in_half_the_seeds_holds() {
        assert!(prediction_claim(10).holds);
    }
}
