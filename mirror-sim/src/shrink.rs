//! Minimal reproductions: a script reduced to the fewest steps that still show an anomaly class — first the
//! shortest prefix that shows it (binary search), then by removing chunks of steps (halves, then quarters, …
//! then single steps) while the class stays non-zero, delta debugging's complement pass. Any subsequence of a script is a valid script (see [`crate::script`]), so every
//! candidate runs.

use serde::{Deserialize, Serialize};

use crate::oracle::Anomalies;
use crate::script::{Script, Step};
use crate::strategy::Strategy;
use crate::world::SimStorage;
use crate::{run_script, SimError};

/// An anomaly class the shrinker can hold on to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// (a)
    SilentLoss,
    /// (b)
    Duplicates,
    /// (c) either direction.
    ReadCommitted,
    /// (d1)
    CollisionSameEpoch,
    /// (d2)
    CollisionLowerEpoch,
    /// (d3)
    CollisionMarker,
    /// (e)
    Divergence,
    /// (f) an application died.
    AppDied,
    /// (f) an application's output duplicated or lost input.
    AppDamage,
}

impl Class {
    /// Every class, in report order.
    pub const ALL: [Class; 9] = [
        Class::SilentLoss,
        Class::Duplicates,
        Class::ReadCommitted,
        Class::CollisionSameEpoch,
        Class::CollisionLowerEpoch,
        Class::CollisionMarker,
        Class::Divergence,
        Class::AppDied,
        Class::AppDamage,
    ];

    /// The class's count in `anomalies`.
    pub fn count(self, anomalies: &Anomalies) -> u64 {
        match self {
            Class::SilentLoss => anomalies.silent_loss,
            Class::Duplicates => anomalies.duplicates,
            Class::ReadCommitted => anomalies.exposed + anomalies.hidden_committed,
            Class::CollisionSameEpoch => anomalies.collision_same_epoch,
            Class::CollisionLowerEpoch => anomalies.collision_lower_epoch,
            Class::CollisionMarker => anomalies.collision_marker,
            Class::Divergence => anomalies.divergence,
            Class::AppDied => anomalies.apps_dead,
            Class::AppDamage => anomalies.app_damage(),
        }
    }

    /// The label in reports.
    pub fn label(self) -> &'static str {
        match self {
            Class::SilentLoss => "(a) silent loss",
            Class::Duplicates => "(b) duplicates",
            Class::ReadCommitted => "(c) read_committed",
            Class::CollisionSameEpoch => "(d1) collision, same epoch",
            Class::CollisionLowerEpoch => "(d2) collision, lower epoch",
            Class::CollisionMarker => "(d3) collision, marker",
            Class::Divergence => "(e) divergence",
            Class::AppDied => "(f) application died",
            Class::AppDamage => "(f) application duplicates/losses",
        }
    }

    /// The first class `anomalies` shows, in report order.
    pub fn first_in(anomalies: &Anomalies) -> Option<Class> {
        Class::ALL.into_iter().find(|class| class.count(anomalies) > 0)
    }
}

/// A reproduction: the class, the steps, and the first finding of that class when they run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reproduction {
    /// The class it shows.
    pub class: Class,
    /// The strategy it runs under.
    pub strategy: Strategy,
    /// The script.
    pub script: Script,
    /// What the oracle says when it runs.
    pub finding: String,
}

/// Whether `script` shows `class` under `strategy`.
fn shows(script: &Script, strategy: Strategy, storage: &SimStorage, class: Class) -> Result<bool, SimError> {
    let (findings, _) = run_script(script, strategy, storage)?;
    Ok(class.count(&findings.anomalies) > 0)
}

/// Shrinks `script` (which shows `class` under `strategy`) within `budget` runs; returns the reproduction.
pub fn shrink(
    script: &Script,
    strategy: Strategy,
    storage: &SimStorage,
    class: Class,
    budget: usize,
) -> Result<Reproduction, SimError> {
    let mut runs = 0;
    // First the shortest prefix that still shows it (a binary search: an anomaly, once shown, stays in the logs).
    let (mut low, mut high) = (0, script.steps.len());
    while low < high && runs < budget {
        let middle = (low + high) / 2;
        runs += 1;
        let prefix = Script {
            steps: script.steps[..middle].to_vec(),
            ..script.clone()
        };
        if shows(&prefix, strategy, storage, class)? {
            high = middle;
        } else {
            low = middle + 1;
        }
    }
    let mut steps: Vec<Step> = script.steps[..high].to_vec();
    let mut chunk = steps.len().div_ceil(2).max(1);
    loop {
        let mut start = 0;
        let mut removed_any = false;
        while start < steps.len() && runs < budget {
            let end = (start + chunk).min(steps.len());
            let mut candidate = steps.clone();
            candidate.drain(start..end);
            runs += 1;
            let trial = Script {
                steps: candidate.clone(),
                ..script.clone()
            };
            if shows(&trial, strategy, storage, class)? {
                steps = candidate;
                removed_any = true;
            } else {
                start = end;
            }
        }
        if runs >= budget || (chunk == 1 && !removed_any) {
            break;
        }
        if !removed_any {
            chunk = (chunk / 2).max(1);
        }
    }
    let script = Script {
        steps,
        ..script.clone()
    };
    let (findings, _) = run_script(&script, strategy, storage)?;
    let prefix = class_prefix(class);
    let finding = findings
        .notes
        .iter()
        .find(|note| note.starts_with(prefix))
        .cloned()
        .unwrap_or_default();
    Ok(Reproduction {
        class,
        strategy,
        script,
        finding,
    })
}

/// The prefix of the oracle's notes of a class.
fn class_prefix(class: Class) -> &'static str {
    match class {
        Class::SilentLoss => "(a)",
        Class::Duplicates => "(b)",
        Class::ReadCommitted => "(c)",
        Class::CollisionSameEpoch => "(d1)",
        Class::CollisionLowerEpoch => "(d2)",
        Class::CollisionMarker => "(d3)",
        Class::Divergence => "(e)",
        Class::AppDied | Class::AppDamage => "(f)",
    }
}
