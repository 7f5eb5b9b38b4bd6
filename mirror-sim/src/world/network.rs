//! The network between clusters, as unreliable as a seed makes it (issue 50, item 5): which clusters answer as
//! Apache Kafka does ([`crate::script::Step::BehaveAsKafka`]) and the faults queued on each source
//! ([`crate::script::Step::SourceFault`]), which every destination's [`super::sources::SimSources`] meets in the
//! order it sends its requests.
//!
//! A fault is met by one request: a fetch, one of the alignment questions (cluster id, log start, last mirrored
//! offset) or a description of the source's topics. Refused, closed and leader-moved requests fail with a
//! retryable error, as `mirror-link` reports them; a truncated fetch answers its first batch only (a client drops
//! a partial trailing batch); a slow answer moves the simulated clock on first. Nothing here draws randomness:
//! the faults are the script's steps.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use mirror_fsm::FetchError;

use super::SimClock;
use crate::script::SourceFault;

/// The network of one run, shared by the world and every destination's sources.
#[derive(Debug, Clone, Default)]
pub(super) struct Network(Arc<Mutex<NetworkState>>);

#[derive(Debug, Default)]
struct NetworkState {
    /// Clusters that never answer the private question.
    kafka_like: BTreeSet<String>,
    /// Faults waiting for the next requests to each source, in order.
    faults: BTreeMap<String, VecDeque<SourceFault>>,
    /// Faults met so far.
    met: u64,
}

/// What a request does after meeting the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Passage {
    /// Answered in full.
    Whole,
    /// A fetch's answer keeps its first batch only.
    FirstBatchOnly,
}

impl Network {
    fn state(&self) -> std::sync::MutexGuard<'_, NetworkState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `cluster` answers as Apache Kafka does from now on.
    pub(super) fn behave_as_kafka(&self, cluster: &str) {
        self.state().kafka_like.insert(cluster.to_owned());
    }

    /// Whether `cluster` answers as Apache Kafka does.
    pub(super) fn is_kafka_like(&self, cluster: &str) -> bool {
        self.state().kafka_like.contains(cluster)
    }

    /// Queues `fault` for the next `count` requests to `cluster`.
    pub(super) fn queue(&self, cluster: &str, fault: SourceFault, count: u8) {
        let mut state = self.state();
        let queue = state.faults.entry(cluster.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(fault, usize::from(count.max(1))));
    }

    /// How many faults requests have met so far.
    pub(super) fn faults_met(&self) -> u64 {
        self.state().met
    }

    /// A request to `cluster` (named `what` in its error) crosses the network: the next fault queued for the
    /// cluster, if any, is met here.
    pub(super) fn cross(&self, cluster: &str, what: &str, clock: &SimClock) -> Result<Passage, FetchError> {
        let fault = {
            let mut state = self.state();
            let fault = state.faults.get_mut(cluster).and_then(VecDeque::pop_front);
            if fault.is_some() {
                state.met += 1;
            }
            fault
        };
        match fault {
            None => Ok(Passage::Whole),
            Some(SourceFault::Refused) => Err(FetchError::new(
                format!("{cluster} refused the connection for {what}"),
                true,
            )),
            Some(SourceFault::ClosedMidResponse) => Err(FetchError::new(
                format!("{cluster} closed the connection in the middle of its answer to {what}"),
                true,
            )),
            Some(SourceFault::LeaderMoved) => Err(FetchError::new(
                format!("{cluster} answered {what} with NOT_LEADER_OR_FOLLOWER: the leader moved"),
                true,
            )),
            Some(SourceFault::Truncated) => Ok(Passage::FirstBatchOnly),
            Some(SourceFault::Slow) => {
                clock.advance(SourceFault::SLOW_MS);
                Ok(Passage::Whole)
            }
        }
    }
}
