//! What a run does: a [`Script`] of [`Step`]s over named clusters, generated from a seed for a [`Topology`] and
//! a [`Workload`], independent of the strategy (every strategy runs the same script, so cells compare).
//!
//! A script is data: it is written with `--trace`, read back with `--replay`, and shrunk by removing steps.
//! Every step is meaningful on its own — a step whose client, cluster or link does not exist (because shrinking
//! removed what created it) does nothing — so any subsequence of a script is a valid script.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::rng::SimRng;

/// The kind of client a [`Step::Connect`] creates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ClientKind {
    /// An idempotent producer (InitProducerId without a transactional id).
    Idempotent,
    /// A transactional producer.
    Transactional {
        /// Its transactional id.
        transactional_id: String,
    },
    /// A consume-transform-produce application modelled on Kafka Streams (kafka-semantics §9.2): it reads
    /// `input` read_committed from its committed position and writes one output record per input record in a
    /// transaction that also moves the position.
    App {
        /// Its transactional id.
        transactional_id: String,
        /// The topic it consumes.
        input: String,
        /// What it does with INVALID_PRODUCER_ID_MAPPING.
        policy: AppPolicy,
    },
}

/// How an application treats the coordinator's errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AppPolicy {
    /// Kafka Streams since KAFKA-16699: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH and INVALID_PRODUCER_ID_MAPPING
    /// close the task dirty; the producer is re-initialised and processing resumes from the committed position.
    Fenced,
    /// Before KAFKA-16699: INVALID_PRODUCER_ID_MAPPING is fatal (the application dies).
    Pre16699,
}

impl AppPolicy {
    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            AppPolicy::Fenced => "fenced",
            AppPolicy::Pre16699 => "pre-16699",
        }
    }
}

/// One step of a script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "step")]
pub enum Step {
    /// A mirror link starts: `dest`'s partition of `topic` becomes read-only and mirrors `source`'s (PREPARING
    /// aligns it first when the two mirrored each other before: failback).
    Start {
        /// The source cluster.
        source: String,
        /// The destination cluster.
        dest: String,
        /// The topic.
        topic: String,
    },
    /// Every running link fetches until caught up, upstream first.
    Mirror,
    /// A client connects to a cluster and initialises its producer there.
    Connect {
        /// The client's name (the ground truth's client id).
        client: String,
        /// The cluster.
        cluster: String,
        /// The topic it writes.
        topic: String,
        /// What it is.
        #[serde(flatten)]
        kind: ClientKind,
    },
    /// A producer sends one batch of `records` records (a transactional one opens a transaction first); with
    /// `lose_ack` the batch is written but its acknowledgement never reaches the client, which sends it again
    /// next time. An application runs one consume-transform-produce round instead.
    Produce {
        /// The client.
        client: String,
        /// Records in the batch.
        records: u8,
        /// The acknowledgement is lost.
        lose_ack: bool,
    },
    /// A transactional producer (or an application) ends its transaction.
    EndTxn {
        /// The client.
        client: String,
        /// Commit (or abort).
        commit: bool,
    },
    /// Failover: the link into `dest` for `topic` stops (STOPPING under the barrier strategies) and `dest`'s
    /// partition becomes writable.
    Stop {
        /// The destination cluster.
        dest: String,
        /// The topic.
        topic: String,
    },
    /// A client moves to another cluster: re-initialising its producer there, or keeping the producer id and
    /// epoch the old cluster issued (as an idempotent producer behind a DNS switch does).
    Move {
        /// The client.
        client: String,
        /// The cluster it moves to.
        cluster: String,
        /// Keep the producer id, epoch and sequence numbers.
        keep_ids: bool,
    },
    /// A partition's follower replica crashes and recovers its producer state from storage.
    CrashReplica {
        /// The cluster.
        cluster: String,
        /// The topic.
        topic: String,
    },
    /// A cluster's transaction coordinator crashes and recovers from its transaction-state log (re-sending the
    /// markers of transactions it was completing).
    CrashCoordinator {
        /// The cluster.
        cluster: String,
    },
    /// Time jumps past `transactional.id.expiration.ms`: every idle transactional id expires.
    ExpireIds,
    /// A cluster's producer-id allocator moves past `past` (sets up the seeds' figures, whose ids are not 0).
    AdvanceIds {
        /// The cluster.
        cluster: String,
        /// The id to move past.
        past: i64,
    },
    /// From now on `cluster` answers mirror links as Apache Kafka does: it never answers the private "last
    /// mirrored" question (the link reads the closed connection as "never mirrored from us").
    BehaveAsKafka {
        /// The cluster.
        cluster: String,
    },
    /// An operator adds a partition to `topic` on `cluster` (`kafka-topics --alter --partitions N+1`, a
    /// CreatePartitions request; refused where the topic is a mirror's). Producers there write to it from their
    /// next batch; the links that mirror the topic from `cluster` add it at their next check of the source's
    /// topics (KIP-1279's metadata refresh).
    AddPartition {
        /// The cluster.
        cluster: String,
        /// The topic.
        topic: String,
    },
    /// An operator deletes `topic` on `cluster` and creates it again with as many partitions (DeleteTopics, then
    /// CreateTopics); refused where the topic is a mirror's.
    RecreateTopic {
        /// The cluster.
        cluster: String,
        /// The topic.
        topic: String,
    },
    /// The next `count` requests mirror links send to `cluster` as their source meet `fault` (the network between
    /// clusters, deterministic per seed).
    SourceFault {
        /// The source cluster.
        cluster: String,
        /// What goes wrong.
        fault: SourceFault,
        /// How many requests it hits (at least one).
        count: u8,
    },
}

/// What goes wrong with a request a mirror link sends to its source ([`Step::SourceFault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceFault {
    /// The connection is refused: the broker is down (a retryable error).
    Refused,
    /// The connection closes in the middle of the answer (a retryable error).
    ClosedMidResponse,
    /// The answer is NOT_LEADER_OR_FOLLOWER: the partition's leader moved to another broker (retryable; asked
    /// again, the new leader answers).
    LeaderMoved,
    /// A fetch's answer is cut short: only its first batch arrives whole (the client drops the partial tail).
    Truncated,
    /// The answer arrives late: [`SourceFault::SLOW_MS`] pass on the simulated clock first.
    Slow,
}

impl SourceFault {
    /// Every fault, for generation.
    pub const ALL: [SourceFault; 5] = [
        SourceFault::Refused,
        SourceFault::ClosedMidResponse,
        SourceFault::LeaderMoved,
        SourceFault::Truncated,
        SourceFault::Slow,
    ];

    /// How late a [`SourceFault::Slow`] answer arrives.
    pub const SLOW_MS: i64 = 5_000;

    /// The name in scripts and reports.
    pub fn name(self) -> &'static str {
        match self {
            SourceFault::Refused => "refused",
            SourceFault::ClosedMidResponse => "closed-mid-response",
            SourceFault::LeaderMoved => "leader-moved",
            SourceFault::Truncated => "truncated",
            SourceFault::Slow => "slow",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Start { source, dest, topic } => write!(f, "start mirror {source} -> {dest} ({topic})"),
            Step::Mirror => write!(f, "mirror: every link catches up"),
            Step::Connect {
                client,
                cluster,
                topic,
                kind,
            } => {
                let kind = match kind {
                    ClientKind::Idempotent => "idempotent producer".to_owned(),
                    ClientKind::Transactional { transactional_id } => {
                        format!("transactional producer {transactional_id:?}")
                    }
                    ClientKind::App {
                        transactional_id,
                        input,
                        policy,
                    } => format!(
                        "application {transactional_id:?} ({}) reading {input}",
                        policy.name()
                    ),
                };
                write!(f, "{client} connects to {cluster} as {kind} writing {topic}")
            }
            Step::Produce {
                client,
                records,
                lose_ack,
            } => write!(
                f,
                "{client} sends {records} record(s){}",
                if *lose_ack { ", acknowledgement lost" } else { "" }
            ),
            Step::EndTxn { client, commit } => {
                write!(
                    f,
                    "{client} {}s its transaction",
                    if *commit { "commit" } else { "abort" }
                )
            }
            Step::Stop { dest, topic } => write!(f, "failover: {dest} stops mirroring {topic}"),
            Step::Move {
                client,
                cluster,
                keep_ids,
            } => write!(
                f,
                "{client} moves to {cluster}{}",
                if *keep_ids {
                    " keeping its producer id and epoch"
                } else {
                    " and re-initialises"
                }
            ),
            Step::CrashReplica { cluster, topic } => {
                write!(f, "{cluster}'s follower of {topic} crashes and recovers")
            }
            Step::CrashCoordinator { cluster } => {
                write!(f, "{cluster}'s transaction coordinator crashes and recovers")
            }
            Step::ExpireIds => write!(f, "idle transactional ids expire"),
            Step::AdvanceIds { cluster, past } => {
                write!(f, "{cluster}'s producer-id allocator moves past {past}")
            }
            Step::BehaveAsKafka { cluster } => {
                write!(
                    f,
                    "{cluster} answers mirror links as Apache Kafka does (no private question)"
                )
            }
            Step::AddPartition { cluster, topic } => {
                write!(f, "an operator adds a partition to {topic} on {cluster}")
            }
            Step::RecreateTopic { cluster, topic } => {
                write!(f, "an operator deletes {topic} on {cluster} and creates it again")
            }
            Step::SourceFault {
                cluster,
                fault,
                count,
            } => write!(
                f,
                "the next {count} request(s) to {cluster} as a source: {}",
                fault.name()
            ),
        }
    }
}

/// A script: the clusters, how many partitions each topic has, and the steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Script {
    /// The cluster names, in order.
    pub clusters: Vec<String>,
    /// Partitions of every topic (1 unless asked otherwise; absent from a script file: 1). A producer's batches
    /// take turns over them, so a transaction spans several; a link mirrors them all and fails them over
    /// together. Applications read and write partition 0.
    #[serde(default = "one_partition", skip_serializing_if = "is_one_partition")]
    pub partitions: u32,
    /// The steps.
    pub steps: Vec<Step>,
}

/// How many requests one [`Step::SourceFault`] hits at most.
pub const MAX_FAULT_COUNT: u8 = 3;

/// The most partitions per topic a script may ask for (and [`Script::with_network_faults`] grows a topic to).
pub const MAX_PARTITIONS: u32 = 16;

/// The percentage of mirror rounds before which [`Script::with_network_faults`] adds a partition somewhere.
const GROWTH_ODDS: u64 = 6;

/// The percentage of mirror rounds before which [`Script::with_network_faults`] deletes a topic somewhere and
/// creates it again.
const RECREATION_ODDS: u64 = 2;

fn one_partition() -> u32 {
    1
}

fn is_one_partition(partitions: &u32) -> bool {
    *partitions == 1
}

impl Script {
    /// A script of `steps` over `clusters`, every topic with one partition.
    pub fn new(clusters: Vec<String>, steps: Vec<Step>) -> Self {
        Script {
            clusters,
            partitions: 1,
            steps,
        }
    }

    /// Every cluster some [`Step::Start`] of the script makes a link's destination.
    pub fn destinations(&self) -> std::collections::BTreeSet<&str> {
        self.steps
            .iter()
            .filter_map(|step| match step {
                Step::Start { dest, .. } => Some(dest.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The same script over an unreliable network, deterministic per `seed` (issue 50): every cluster that is no
    /// link's destination answers as Apache Kafka does ([`Step::BehaveAsKafka`]: a mirrorlog destination cannot be
    /// one), before some mirror rounds, starts and failovers a link's source meets a few [`Step::SourceFault`]s,
    /// and before some mirror rounds an operator adds a partition to a topic a link mirrors, where its source
    /// writes it ([`Step::AddPartition`]; up to [`MAX_PARTITIONS`] per topic), or deletes such a topic and creates
    /// it again ([`Step::RecreateTopic`]; the links reading it fail by its id, and the operator mirrors the new
    /// topic afresh). Growth and recreation are each drawn from a random stream of their own, apart from the
    /// faults, so that a seed's other steps stay where they were. The script's own steps are unchanged and in order: only these steps
    /// are added.
    pub fn with_network_faults(mut self, seed: u64) -> Self {
        let mut rng = SimRng::new(seed ^ 0xFA17_5EED_0BAD_CAFE);
        let mut growth_rng = SimRng::new(seed ^ 0x6120_4E57_5EED_0001);
        let mut recreation_rng = SimRng::new(seed ^ 0x2EC2_EA7E_5EED_0002);
        // Partitions each topic has once the growth steps added so far are applied.
        let mut partitions: BTreeMap<String, u32> = BTreeMap::new();
        let destinations = self.destinations();
        let mut steps: Vec<Step> = self
            .clusters
            .iter()
            .filter(|cluster| !destinations.contains(cluster.as_str()))
            .map(|cluster| Step::BehaveAsKafka {
                cluster: cluster.clone(),
            })
            .collect();
        // The links running as each step comes: (source, destination, topic).
        let mut running: Vec<(String, String, String)> = Vec::new();
        for step in std::mem::take(&mut self.steps) {
            // A fault hits a source some link is about to ask: the one a start or failover names, or any running
            // link's before a mirror round (a fault queued on a cluster nobody asks would wait for the next link).
            let (odds, sources): (u64, Vec<String>) = match &step {
                Step::Mirror => (40, running.iter().map(|(source, _, _)| source.clone()).collect()),
                Step::Start { source, .. } => (25, vec![source.clone()]),
                Step::Stop { dest, topic } => (
                    25,
                    running
                        .iter()
                        .filter(|(_, to, of)| to == dest && of == topic)
                        .map(|(source, _, _)| source.clone())
                        .collect(),
                ),
                _ => (0, Vec::new()),
            };
            if odds > 0 && rng.chance(odds) {
                if let (Some(cluster), Some(fault)) =
                    (rng.pick(&sources).cloned(), rng.pick(&SourceFault::ALL).copied())
                {
                    let count = 1 + rng.below(u64::from(MAX_FAULT_COUNT)) as u8;
                    steps.push(Step::SourceFault {
                        cluster,
                        fault,
                        count,
                    });
                }
            }
            // A topic grows, or is created again, where it is written: at a running link's source that no link
            // mirrors it into.
            let writable: Vec<&(String, String, String)> = running
                .iter()
                .filter(|(source, _, topic)| {
                    !running
                        .iter()
                        .any(|(_, dest, other)| dest == source && other == topic)
                })
                .collect();
            if step == Step::Mirror && recreation_rng.chance(RECREATION_ODDS) {
                if let Some((cluster, _, topic)) = recreation_rng.pick(&writable).copied() {
                    steps.push(Step::RecreateTopic {
                        cluster: cluster.clone(),
                        topic: topic.clone(),
                    });
                }
            }
            if step == Step::Mirror && growth_rng.chance(GROWTH_ODDS) {
                if let Some((cluster, _, topic)) = growth_rng.pick(&writable).copied() {
                    let count = partitions.entry(topic.clone()).or_insert(self.partitions);
                    if *count < MAX_PARTITIONS {
                        *count += 1;
                        steps.push(Step::AddPartition {
                            cluster: cluster.clone(),
                            topic: topic.clone(),
                        });
                    }
                }
            }
            match &step {
                Step::Start { source, dest, topic } => {
                    running.push((source.clone(), dest.clone(), topic.clone()));
                }
                Step::Stop { dest, topic } => running.retain(|(_, to, of)| !(to == dest && of == topic)),
                _ => {}
            }
            steps.push(step);
        }
        self.steps = steps;
        self
    }

    /// The same script with `partitions` partitions per topic (at least 1, at most [`MAX_PARTITIONS`]).
    pub fn with_partitions(mut self, partitions: u32) -> Self {
        self.partitions = partitions.clamp(1, MAX_PARTITIONS);
        self
    }
}

/// The shapes the simulator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Topology {
    /// A → B, then failover to B.
    ActivePassive,
    /// A → B, failover, B → A, fail back, and again.
    Failback,
    /// A → B and A → C, both fail over.
    FanOut,
    /// A → C and B → C on different topics, C fails over.
    FanIn,
    /// A → B → C, every node failing over in turn along the chain.
    Chain3,
    /// A → B → C → D → E: C first leaves the chain while B still mirrors A (D and E keep mirroring C), then
    /// every other node fails over in turn.
    Chain5,
    /// A seeded tree of links over 3–5 clusters with seeded failovers.
    Random,
}

impl Topology {
    /// Every topology, in table order.
    pub const ALL: [Topology; 7] = [
        Topology::ActivePassive,
        Topology::Failback,
        Topology::FanOut,
        Topology::FanIn,
        Topology::Chain3,
        Topology::Chain5,
        Topology::Random,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Topology::ActivePassive => "active-passive",
            Topology::Failback => "failback",
            Topology::FanOut => "fan-out",
            Topology::FanIn => "fan-in",
            Topology::Chain3 => "chain-3",
            Topology::Chain5 => "chain-5",
            Topology::Random => "random",
        }
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Topology {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Topology::ALL
            .into_iter()
            .find(|topology| topology.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Topology::ALL.iter().map(|t| t.name()).collect();
                format!("unknown topology {name:?} (one of: {})", names.join(", "))
            })
    }
}

/// Which clients a script has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Workload {
    /// What the seeds describe: producers on the source whose records are mirrored, then local producers on the
    /// destination after failover; clients that move re-initialise against the destination. Failovers are planned
    /// (transactions end and the links catch up first), and half of them still find a transaction open at the cut.
    Seed,
    /// What the seeds do not discuss: idempotent producers that keep their source-issued id and epoch across
    /// failover, transactional ids that expire while idle, and applications under both error policies.
    Beyond,
    /// The seed workload with unplanned failovers: the source is lost with open transactions and data the link
    /// has not copied yet (no commit, no catch-up before the stop). What the source acknowledged and the
    /// destination never received is the failover's loss window, counted apart from silent loss.
    Unplanned,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 3] = [Workload::Seed, Workload::Beyond, Workload::Unplanned];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Seed => "seed",
            Workload::Beyond => "beyond",
            Workload::Unplanned => "unplanned",
        }
    }
}

/// Builds scripts: clients, their traffic, and the topology's failovers.
struct Builder {
    rng: SimRng,
    workload: Workload,
    steps: Vec<Step>,
    /// Clients by cluster: (name, topic, transactional).
    clients: Vec<(String, String, String, bool)>,
    next_client: usize,
}

impl Builder {
    fn connect(&mut self, cluster: &str, topic: &str, transactional: bool) -> String {
        let name = format!("{cluster}/c{}", self.next_client);
        self.next_client += 1;
        let kind = if transactional {
            ClientKind::Transactional {
                transactional_id: format!("tx-{}", self.next_client),
            }
        } else {
            ClientKind::Idempotent
        };
        self.steps.push(Step::Connect {
            client: name.clone(),
            cluster: cluster.to_owned(),
            topic: topic.to_owned(),
            kind,
        });
        self.clients
            .push((name.clone(), cluster.to_owned(), topic.to_owned(), transactional));
        name
    }

    fn app(&mut self, cluster: &str, input: &str, policy: AppPolicy) -> String {
        let name = format!("{cluster}/app-{}", policy.name());
        self.steps.push(Step::Connect {
            client: name.clone(),
            cluster: cluster.to_owned(),
            topic: format!("out-{}", policy.name()),
            kind: ClientKind::App {
                transactional_id: format!("app-{}", policy.name()),
                input: input.to_owned(),
                policy,
            },
        });
        self.clients.push((
            name.clone(),
            cluster.to_owned(),
            format!("out-{}", policy.name()),
            true,
        ));
        name
    }

    /// Short-lived idempotent producers on `cluster`: one or two single-record batches each, then they stop —
    /// the producers whose ids a destination's allocator hands out again (Redpanda's reproducer).
    fn short_lived(&mut self, cluster: &str, topic: &str, count: usize) {
        for _ in 0..count {
            let name = self.connect(cluster, topic, false);
            let batches = 1 + self.rng.below(2);
            for _ in 0..batches {
                self.steps.push(Step::Produce {
                    client: name.clone(),
                    records: 1,
                    lose_ack: false,
                });
            }
            if let Some(entry) = self.clients.iter_mut().find(|entry| entry.0 == name) {
                // Retired: no more traffic.
                entry.1 = String::new();
            }
        }
    }

    /// `count` random operations by the clients on `clusters`, with mirror rounds in between.
    fn traffic(&mut self, clusters: &[&str], count: usize) {
        let active: Vec<(String, bool)> = self
            .clients
            .iter()
            .filter(|(_, cluster, _, _)| clusters.contains(&cluster.as_str()))
            .map(|(name, _, _, transactional)| (name.clone(), *transactional))
            .collect();
        if active.is_empty() {
            return;
        }
        for _ in 0..count {
            let roll = self.rng.below(100);
            if roll < 15 {
                self.steps.push(Step::Mirror);
                continue;
            }
            let Some((client, transactional)) = self.rng.pick(&active).cloned() else {
                return;
            };
            if transactional && roll < 40 {
                let commit = self.rng.chance(75);
                self.steps.push(Step::EndTxn { client, commit });
            } else {
                let records = 1 + self.rng.below(3) as u8;
                let lose_ack = self.rng.chance(12);
                self.steps.push(Step::Produce {
                    client,
                    records,
                    lose_ack,
                });
            }
        }
    }

    /// Every open transaction of the clients on `clusters` ends (committed), then the links catch up: a
    /// planned failover. In half the planned failovers a transaction is still open at the cut all the same (the
    /// seed's STOPPING: "ABORT markers for ongoing transactions, then the barrier"): [`Self::straddle`] on each
    /// cluster, whose second transaction stays open as the operator stops the link.
    fn settle(&mut self, clusters: &[&str]) {
        if self.workload == Workload::Unplanned {
            // The source is lost as it is: open transactions stay open, the link has copied what it has.
            for cluster in clusters {
                self.straddle_the_lso(cluster);
            }
            return;
        }
        let transactional: Vec<String> = self
            .clients
            .iter()
            .filter(|(_, cluster, _, transactional)| *transactional && clusters.contains(&cluster.as_str()))
            .map(|(name, ..)| name.clone())
            .collect();
        for client in transactional {
            self.steps.push(Step::EndTxn { client, commit: true });
        }
        if self.rng.chance(50) {
            for cluster in clusters {
                self.straddle(cluster);
            }
        }
        self.steps.push(Step::Mirror);
    }

    /// Just before `cluster` is lost: [`Self::straddle`], then every idempotent producer writes three more
    /// batches, which the link never copies.
    fn straddle_the_lso(&mut self, cluster: &str) {
        self.straddle(cluster);
        self.unmirrored_writes(cluster);
    }

    /// Per topic of `cluster` with a transactional producer: that producer's transaction (T1) is followed by a
    /// second producer's (T2), then T1 aborts and the links fetch. T1's records lie below the source's last
    /// stable offset (T2's first offset) and its abort marker above it, so the link copies them without their
    /// marker: the one case an LSO-bounded fetch cannot keep out, which STOPPING's stable cut keeps and aborts
    /// (ADR 0045). T2 stays open.
    fn straddle(&mut self, cluster: &str) {
        let mut firsts: Vec<(String, String)> = Vec::new();
        for (name, at, topic, transactional) in &self.clients {
            if at == cluster
                && *transactional
                && !name.contains("/app-")
                && !firsts.iter().any(|(_, t)| t == topic)
            {
                firsts.push((name.clone(), topic.clone()));
            }
        }
        for (first, topic) in firsts {
            let second = self.connect(cluster, &topic, true);
            for client in [&first, &second] {
                self.steps.push(Step::Produce {
                    client: client.clone(),
                    records: 1,
                    lose_ack: false,
                });
            }
            self.steps.push(Step::EndTxn {
                client: first,
                commit: false,
            });
            self.steps.push(Step::Mirror);
        }
    }

    /// Each idempotent producer on `cluster` writes three more batches: acknowledged, never mirrored (the source
    /// is lost before the links fetch again).
    fn unmirrored_writes(&mut self, cluster: &str) {
        let idempotent: Vec<String> = self
            .clients
            .iter()
            .filter(|(_, at, _, transactional)| at == cluster && !*transactional)
            .map(|(name, ..)| name.clone())
            .collect();
        for client in idempotent {
            for _ in 0..3 {
                let records = 1 + self.rng.below(3) as u8;
                self.steps.push(Step::Produce {
                    client: client.clone(),
                    records,
                    lose_ack: false,
                });
            }
        }
    }

    /// Failover of `topic` from `from` to `to`: the link stops, `from`'s clients of that topic move.
    fn failover(&mut self, from: &str, to: &str, topic: &str) {
        self.steps.push(Step::Stop {
            dest: to.to_owned(),
            topic: topic.to_owned(),
        });
        let keep_ids = self.workload == Workload::Beyond;
        let moving: Vec<usize> = (0..self.clients.len())
            .filter(|&index| self.clients[index].1 == from && self.clients[index].2 == topic)
            .collect();
        for index in moving {
            let client = self.clients[index].0.clone();
            self.steps.push(Step::Move {
                client,
                cluster: to.to_owned(),
                keep_ids,
            });
            self.clients[index].1 = to.to_owned();
        }
    }

    /// The workload's extra faults between phases.
    fn faults(&mut self, cluster: &str, topic: &str) {
        if self.rng.chance(50) {
            self.steps.push(Step::CrashReplica {
                cluster: cluster.to_owned(),
                topic: topic.to_owned(),
            });
        }
        if self.rng.chance(40) {
            self.steps.push(Step::CrashCoordinator {
                cluster: cluster.to_owned(),
            });
        }
        if self.workload == Workload::Beyond && self.rng.chance(50) {
            self.steps.push(Step::ExpireIds);
        }
    }
}

/// [`generate`] with `partitions` per topic, over an unreliable network when `network_faults` is set (the
/// faults drawn from the same seed: [`Script::with_network_faults`]).
pub fn generate_with(
    topology: Topology,
    workload: Workload,
    seed: u64,
    steps: usize,
    partitions: u32,
    network_faults: bool,
) -> Script {
    let script = generate(topology, workload, seed, steps).with_partitions(partitions);
    if network_faults {
        script.with_network_faults(seed)
    } else {
        script
    }
}

/// The script of `topology` under `workload` from `seed`, with about `steps` traffic operations per phase.
pub fn generate(topology: Topology, workload: Workload, seed: u64, steps: usize) -> Script {
    let mut b = Builder {
        rng: SimRng::new(seed ^ (topology as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        workload,
        steps: Vec::new(),
        clients: Vec::new(),
        next_client: 0,
    };
    let names = |n: usize| -> Vec<String> {
        ["A", "B", "C", "D", "E"][..n]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let orders = "orders";
    let clusters = match topology {
        Topology::ActivePassive | Topology::Failback => {
            let apps = workload == Workload::Beyond;
            b.steps.push(start("A", "B", orders));
            if apps {
                for policy in [AppPolicy::Fenced, AppPolicy::Pre16699] {
                    b.steps.push(start("A", "B", &format!("out-{}", policy.name())));
                }
            }
            b.short_lived("A", orders, 3);
            b.connect("A", orders, false);
            b.connect("A", orders, true);
            let mut app_names = Vec::new();
            if apps {
                for policy in [AppPolicy::Fenced, AppPolicy::Pre16699] {
                    app_names.push(b.app("A", orders, policy));
                }
            }
            b.traffic(&["A"], steps);
            b.faults("A", orders);
            let cycles = if topology == Topology::Failback { 2 } else { 0 };
            let (mut active, mut passive) = ("A", "B");
            b.settle(&[active]);
            for topic in topics_of(apps, orders) {
                b.failover(active, passive, &topic);
            }
            std::mem::swap(&mut active, &mut passive);
            b.short_lived(active, orders, 2);
            b.connect(active, orders, false);
            b.connect(active, orders, true);
            b.traffic(&[active], steps);
            b.faults(active, orders);
            for _ in 0..cycles {
                // The old source comes back as a mirror of the new one, then takes over again.
                for topic in topics_of(apps, orders) {
                    b.steps.push(start(active, passive, &topic));
                }
                b.traffic(&[active], steps / 2);
                b.settle(&[active]);
                for topic in topics_of(apps, orders) {
                    b.failover(active, passive, &topic);
                }
                std::mem::swap(&mut active, &mut passive);
                b.connect(active, orders, false);
                b.traffic(&[active], steps);
                b.faults(active, orders);
            }
            names(2)
        }
        Topology::FanOut => {
            b.steps.push(start("A", "B", orders));
            b.steps.push(start("A", "C", orders));
            b.short_lived("A", orders, 3);
            b.connect("A", orders, false);
            b.connect("A", orders, true);
            b.traffic(&["A"], steps);
            b.settle(&["A"]);
            // Both destinations take over; A's clients split between them.
            b.steps.push(Step::Stop {
                dest: "B".into(),
                topic: orders.into(),
            });
            b.failover("A", "C", orders);
            for cluster in ["B", "C"] {
                b.short_lived(cluster, orders, 2);
                b.connect(cluster, orders, false);
                b.connect(cluster, orders, true);
                b.faults(cluster, orders);
            }
            b.traffic(&["B", "C"], steps);
            names(3)
        }
        Topology::FanIn => {
            b.steps.push(start("A", "C", "a-orders"));
            b.steps.push(start("B", "C", "b-orders"));
            for (cluster, topic) in [("A", "a-orders"), ("B", "b-orders")] {
                b.short_lived(cluster, topic, 2);
                b.connect(cluster, topic, false);
                b.connect(cluster, topic, true);
            }
            b.traffic(&["A", "B"], steps);
            b.settle(&["A", "B"]);
            b.failover("A", "C", "a-orders");
            b.failover("B", "C", "b-orders");
            for topic in ["a-orders", "b-orders"] {
                b.short_lived("C", topic, 2);
                b.connect("C", topic, false);
                b.connect("C", topic, true);
                b.faults("C", topic);
            }
            b.traffic(&["C"], steps);
            names(3)
        }
        Topology::Chain3 | Topology::Chain5 => {
            let n = if topology == Topology::Chain3 { 3 } else { 5 };
            let chain = names(n);
            for pair in chain.windows(2) {
                b.steps.push(start(&pair[0], &pair[1], orders));
            }
            b.short_lived("A", orders, 3);
            b.connect("A", orders, false);
            b.connect("A", orders, true);
            b.traffic(&["A"], steps);
            // chain-5 first fails over in the middle (the seed: "on failover at any point in the chain"): the
            // third node stops mirroring the second, itself still a mirror of A, and takes local writes while A
            // keeps its own and the nodes below the third keep mirroring it. No client moves: A is not lost.
            // chain-3 keeps its one line, so that the seed's two local producers with one id meet on C.
            let breakaway = (n >= 5).then(|| chain[2].clone());
            if let Some(breakaway) = &breakaway {
                b.settle(&["A"]);
                b.steps.push(Step::Mirror);
                b.steps.push(Step::Stop {
                    dest: breakaway.clone(),
                    topic: orders.to_owned(),
                });
                b.short_lived(breakaway, orders, 2);
                b.connect(breakaway, orders, false);
                b.connect(breakaway, orders, true);
                b.traffic(&["A", breakaway.as_str()], steps);
                b.faults(breakaway, orders);
            }
            // Then each node fails over in turn, the last one too: its upstream is lost, it takes the writes, the
            // rest of the chain keeps mirroring from it. After a breakaway the chain is two (A → B, and
            // C → D → E): the third node mirrors nobody, so no failover leads into it.
            for index in 1..n {
                let (from, to) = (chain[index - 1].clone(), chain[index].clone());
                if breakaway.as_ref() == Some(&to) {
                    continue;
                }
                b.settle(&[from.as_str()]);
                b.failover(&from, &to, orders);
                b.short_lived(&to, orders, 2);
                b.connect(&to, orders, false);
                b.connect(&to, orders, true);
                b.traffic(&[to.as_str()], steps);
                b.faults(&to, orders);
            }
            b.steps.push(Step::Mirror);
            chain
        }
        Topology::Random => {
            let n = 3 + b.rng.below(3) as usize;
            let all = names(n);
            // A tree rooted at A: every other cluster mirrors from an earlier one.
            let mut parent = vec![0usize; n];
            for index in 1..n {
                parent[index] = b.rng.below(index as u64) as usize;
                b.steps.push(start(&all[parent[index]], &all[index], orders));
            }
            b.short_lived("A", orders, 2);
            b.connect("A", orders, false);
            b.connect("A", orders, true);
            b.traffic(&["A"], steps);
            // Writable clusters: A. A failover moves the writes of a mirroring child's parent to it.
            let mut writable = vec![true; 1];
            writable.resize(n, false);
            for _ in 0..(1 + b.rng.below(3)) {
                let candidates: Vec<usize> = (1..n)
                    .filter(|&index| !writable[index] && writable[parent[index]])
                    .collect();
                let Some(&child) = b.rng.pick(&candidates) else {
                    break;
                };
                let from = all[parent[child]].clone();
                let to = all[child].clone();
                b.settle(&[from.as_str()]);
                b.failover(&from, &to, orders);
                writable[parent[child]] = false;
                writable[child] = true;
                b.short_lived(&to, orders, 1);
                let transactional = b.rng.chance(50);
                b.connect(&to, orders, transactional);
                b.traffic(&[to.as_str()], steps);
                b.faults(&to, orders);
            }
            b.steps.push(Step::Mirror);
            all
        }
    };
    let mut steps = b.steps;
    steps.push(Step::Mirror);
    Script::new(clusters, steps)
}

fn start(source: &str, dest: &str, topic: &str) -> Step {
    Step::Start {
        source: source.to_owned(),
        dest: dest.to_owned(),
        topic: topic.to_owned(),
    }
}

fn topics_of(apps: bool, orders: &str) -> Vec<String> {
    let mut topics = vec![orders.to_owned()];
    if apps {
        for policy in [AppPolicy::Fenced, AppPolicy::Pre16699] {
            topics.push(format!("out-{}", policy.name()));
        }
    }
    topics
}
