//! `cargo xtask model [--topology NAME|all] [--depth N] [--source-writes N] [--local-writes N] [--crashes N]
//! [--source-errors N] [--scope writer|everywhere] [--origin mirrorlog|kafka] [--mutant NAME]`: runs the model check and prints the states
//! explored, the time, every violated property with the steps that show it, and each reported finding with the
//! shortest steps that reach it. Exit status 0 when every property holds (for a mutant: when the checker found it),
//! 1 otherwise, 2 on a usage error.

use std::process::ExitCode;

use mirror_model::{Bounds, MirrorModel, Mutant, Topology};
use producer_state::BarrierScope;

const USAGE: &str = "usage: mirror-model [--topology active-passive|failback|chain|all] [--depth N] \
    [--source-writes N] [--local-writes N] [--crashes N] [--source-errors N] [--scope writer|everywhere] \
    [--origin mirrorlog|kafka] [--mutant none|barrier-before-lso-cut|barrier-on-leader-only|last-mirrored-after-barrier|second-barrier-after-crash|truncate-on-retry]";

/// What a run checks: topologies, bounds, depth, the mutant, the barrier scope and whether A is a Kafka cluster.
type Run = (Vec<Topology>, Bounds, usize, Mutant, BarrierScope, bool);

fn parse(args: &[String]) -> Option<Run> {
    let mut scope = BarrierScope::Writer;
    let mut topologies = Topology::ALL.to_vec();
    let mut bounds = Bounds::default();
    let mut depth = 0;
    let mut mutant = Mutant::None;
    let mut kafka_origin = false;
    let mut pairs = args.chunks(2);
    for pair in &mut pairs {
        let [flag, value] = pair else {
            return None;
        };
        match flag.as_str() {
            "--topology" => {
                topologies = match value.as_str() {
                    "all" => Topology::ALL.to_vec(),
                    "active-passive" => vec![Topology::ActivePassive],
                    "failback" => vec![Topology::Failback],
                    "chain" => vec![Topology::Chain],
                    _ => return None,
                }
            }
            "--depth" => depth = value.parse().ok()?,
            "--source-writes" => bounds.source_writes = value.parse().ok()?,
            "--local-writes" => bounds.local_writes = value.parse().ok()?,
            "--crashes" => bounds.crashes = value.parse().ok()?,
            "--source-errors" => bounds.source_errors = value.parse().ok()?,
            "--scope" => scope = BarrierScope::parse(value)?,
            "--origin" => {
                kafka_origin = match value.as_str() {
                    "mirrorlog" => false,
                    "kafka" => true,
                    _ => return None,
                }
            }
            "--mutant" => {
                mutant = match value.as_str() {
                    "none" => Mutant::None,
                    "barrier-before-lso-cut" => Mutant::BarrierBeforeLsoCut,
                    "barrier-on-leader-only" => Mutant::BarrierOnLeaderOnly,
                    "last-mirrored-after-barrier" => Mutant::LastMirroredAfterBarrier,
                    "second-barrier-after-crash" => Mutant::SecondBarrierAfterCrash,
                    "truncate-on-retry" => Mutant::TruncateOnRetry,
                    _ => return None,
                }
            }
            _ => return None,
        }
    }
    Some((topologies, bounds, depth, mutant, scope, kafka_origin))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((topologies, bounds, depth, mutant, scope, kafka_origin)) = parse(&args) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let mut found_any = false;
    for topology in topologies {
        let mut model = MirrorModel::new(topology, bounds, mutant).with_scope(scope);
        if kafka_origin {
            model = model.with_kafka_origin();
        }
        let report = model.check(depth);
        println!(
            "{topology:?} ({mutant:?}, {scope:?} scope, {} origin; {} source writes, {} local writes, {} crashes, {} source errors, depth {}): {} \
             states ({} distinct), max depth {}, {:.2?}",
            if model.kafka_origin { "Kafka" } else { "mirrorlog" },
            bounds.source_writes,
            bounds.local_writes,
            bounds.crashes,
            bounds.source_errors,
            if depth == 0 { "unbounded".to_owned() } else { depth.to_string() },
            report.states,
            report.unique_states,
            report.max_depth,
            report.elapsed
        );
        if report.violations.is_empty() {
            println!("  every property holds");
        }
        for (finding, steps) in report
            .examples
            .iter()
            .filter(|(name, _)| name == mirror_model::WRITER_SCOPE_FINDING)
        {
            println!("  REPORTED: {finding}");
            for (number, step) in steps.iter().enumerate() {
                println!("    {number:>2}. {step}");
            }
        }
        for (property, steps) in &report.violations {
            found_any = true;
            println!("  VIOLATED: {property}");
            for (number, step) in steps.iter().enumerate() {
                println!("    {number:>2}. {step}");
            }
        }
    }
    if found_any == (mutant != Mutant::None) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
