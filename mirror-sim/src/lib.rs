//! `mirror-sim`: the deterministic multi-cluster simulator that shows which producer-id strategies corrupt data.
//!
//! A run is a [`Script`] (generated from one `u64` seed for a [`Topology`] and a [`Workload`]: [`generate`])
//! executed by a [`World`] under a [`Strategy`]: clusters, each a `node::Node` (the code `mirrorlog serve` runs)
//! with a leader and a follower replica of every partition and its transaction coordinator on a real storage
//! backend; mirror links driven by `mirror-fsm`; idempotent and
//! transactional producers with lost acknowledgements and retries; Kafka-Streams-like applications under two
//! error policies; failovers, failbacks, replica and coordinator crashes, transactional-id expiration. The
//! [`oracle`] then counts anomalies from the clients' ground truth and the logs' bytes, independently of the
//! producer-state code. [`shrink`] reduces a script to the fewest steps that still show an anomaly, and
//! [`report`] runs the topology × strategy matrix and states the verdict.
//!
//! Nothing reads the wall clock, draws unseeded randomness or iterates a hash map: the same seed gives the same
//! report, byte for byte.

mod logview;
pub mod oracle;
pub mod report;
pub mod rng;
pub mod script;
pub mod seed_pass;
pub mod shrink;
pub mod strategy;
pub mod truth;
pub mod world;

pub use oracle::{judge, Anomalies, Findings};
pub use report::{run_matrix, Cell, Matrix, MatrixOptions};
pub use script::{generate, AppPolicy, ClientKind, Script, Step, Topology, Workload};
pub use strategy::Strategy;
pub use world::{DeletedLog, FetchBound, Finished, Mutation, SimStorage, World};

/// Why a run could not be carried out (a broken simulator or storage, never an anomaly: anomalies are counted).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The world could not be set up (a data directory, a storage config, a partition name).
    #[error("cannot set up the simulation: {0}")]
    Setup(String),
    /// The storage backend failed.
    #[error("storage failed: {0}")]
    Storage(String),
    /// A partition log failed (not a refusal a client hears: those are counted).
    #[error("partition log failed: {0}")]
    Log(String),
    /// A cluster node failed (its storage, its coordinator's log), not a refusal a client hears.
    #[error("cluster node failed: {0}")]
    Node(String),
}

impl SimError {
    fn log(error: partition_log::LogError) -> Self {
        SimError::Log(error.to_string())
    }

    fn node(error: node::NodeError) -> Self {
        SimError::Node(error.to_string())
    }
}

/// Runs `script` under `strategy` on `storage` (in a current-thread runtime of its own) and judges it.
pub fn run_script(
    script: &Script,
    strategy: Strategy,
    storage: &SimStorage,
) -> Result<(Findings, Finished), SimError> {
    run_script_with(script, strategy, storage, FetchBound::default())
}

/// [`run_script`] with mirror links fetching up to `bound`.
pub fn run_script_with(
    script: &Script,
    strategy: Strategy,
    storage: &SimStorage,
    bound: FetchBound,
) -> Result<(Findings, Finished), SimError> {
    run_script_mutated(script, strategy, storage, bound, None)
}

/// [`run_script_with`] with a deliberate bug switched on (the verdict's own tests: a claim no mutant can move
/// is not evidence).
pub fn run_script_mutated(
    script: &Script,
    strategy: Strategy,
    storage: &SimStorage,
    bound: FetchBound,
    mutation: Option<Mutation>,
) -> Result<(Findings, Finished), SimError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|error| SimError::Setup(error.to_string()))?;
    let finished = runtime.block_on(async {
        let world = World::new_mutated(script, strategy, storage.clone(), mutation)
            .await?
            .with_fetch_bound(bound);
        world.run(script).await
    })?;
    Ok((judge(&finished), finished))
}
