//! Which `MIRROR_PID_RESET` barriers reset a partition's producer state (ARCHITECTURE.md, barrier invariants; ADR 0005).
//!
//! The seed requires both that a barrier clears producer state wherever it is met (leader, followers, log
//! recovery) and that a barrier replicated *back* to a cluster that is mirroring (failback) leaves that cluster's
//! state alone. Both hold, and every replica agrees, because the barrier says who wrote it: under
//! [`BarrierScope::Writer`] a barrier resets state iff its `WriterClusterId` tag names the local cluster or it has
//! no tag (written by an implementation that does not tag). [`BarrierScope::Everywhere`] is the KIP prototype's
//! behaviour (every barrier resets), kept so the simulator can compare the two.

use record_format::MirrorPidResetRecord;

/// Which barriers reset producer state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BarrierScope {
    /// Only barriers written by this cluster, or untagged ones (the default).
    #[default]
    Writer,
    /// Every barrier.
    Everywhere,
}

impl BarrierScope {
    /// Parses `writer` or `everywhere`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "writer" => Some(BarrierScope::Writer),
            "everywhere" => Some(BarrierScope::Everywhere),
            _ => None,
        }
    }

    /// The name `parse` accepts.
    pub fn name(self) -> &'static str {
        match self {
            BarrierScope::Writer => "writer",
            BarrierScope::Everywhere => "everywhere",
        }
    }

    /// Whether `barrier`, met on a cluster whose id is `local_cluster_id`, resets producer state.
    pub fn applies(self, barrier: &MirrorPidResetRecord, local_cluster_id: Option<&str>) -> bool {
        match self {
            BarrierScope::Everywhere => true,
            BarrierScope::Writer => match &barrier.writer_cluster_id {
                None => true,
                Some(writer) => local_cluster_id == Some(writer.as_str()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn barrier(writer: Option<&str>) -> MirrorPidResetRecord {
        MirrorPidResetRecord::new("source", writer.map(str::to_owned))
    }

    #[test]
    fn writer_scope_resets_for_the_local_writer_or_an_untagged_barrier_only() {
        let scope = BarrierScope::Writer;
        assert!(scope.applies(&barrier(Some("A")), Some("A")));
        assert!(scope.applies(&barrier(None), Some("A")));
        assert!(scope.applies(&barrier(None), None));
        assert!(!scope.applies(&barrier(Some("B")), Some("A")));
        assert!(!scope.applies(&barrier(Some("B")), None));
    }

    #[test]
    fn everywhere_scope_always_resets() {
        assert!(BarrierScope::Everywhere.applies(&barrier(Some("B")), Some("A")));
        assert!(BarrierScope::Everywhere.applies(&barrier(None), None));
    }
}
