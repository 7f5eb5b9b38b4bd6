//! The API versions the broker advertises: only ranges it serves completely, chosen so that each client picks a
//! version with record format v2 and the transaction features it needs (`docs/broker.md` has the reasoning).
//!
//! The data-path APIs (Produce, Fetch, DeleteRecords) and the transaction APIs but InitProducerId
//! and TxnOffsetCommit stop before their flexible versions; Metadata v9–v12 (v10+ carry topic ids), CreateTopics v5–v7
//! (v5+ answer each new topic's configs, v7 its id), ApiVersions v3,
//! ListOffsets v6–v10,
//! InitProducerId v2+, TxnOffsetCommit v3 and the group APIs' flexible versions (OffsetCommit v8, OffsetFetch v6+, FindCoordinator
//! v3+, JoinGroup v6+, SyncGroup v4+, Heartbeat v4, LeaveGroup v4+, DescribeGroups v5, ListGroups v3+,
//! DeleteGroups v2), DeleteTopics v4–v6 (v6 by topic id) are served. The request shape check ([`crate::shape`]) has a layout for each.
//! librdkafka needs Produce ≥ 3 with Fetch ≥ 4 (record format v2), ListOffsets ≥ 2 (isolation level),
//! FindCoordinator ≥ 1 and InitProducerId ≥ 3 (KIP-360 epoch bumps); kafka-python guesses the broker's version
//! from this table.

use kafka_protocol::messages::ApiKey;

/// `(api key, lowest version, highest version)` for every API the broker serves.
pub const ADVERTISED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 8),
    (ApiKey::Fetch, 4, 11),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 8),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 8),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::AddPartitionsToTxn, 0, 2),
    (ApiKey::AddOffsetsToTxn, 0, 2),
    (ApiKey::EndTxn, 0, 2),
    (ApiKey::TxnOffsetCommit, 0, 3),
    (ApiKey::DeleteRecords, 0, 1),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
];

/// The advertised range of `key`, if the broker serves it.
pub fn range(key: ApiKey) -> Option<(i16, i16)> {
    ADVERTISED
        .iter()
        .find(|(advertised, _, _)| *advertised == key)
        .map(|&(_, low, high)| (low, high))
}

/// True when the broker serves `key` at `version`.
pub fn supported(key: ApiKey, version: i16) -> bool {
    range(key).is_some_and(|(low, high)| (low..=high).contains(&version))
}
