//! The version each simulated client (or operator) request is sent at: one table, which `tests/advertised_versions.rs` checks
//! against the ranges `mirrorlog serve` advertises, so that the simulator only asks of a node what a real client
//! could ask of `serve`. The highest advertised version each (as a current client negotiates them): PRODUCER_FENCED
//! is answered as such from these on; the applications' offset requests' answers carry nothing the simulator reads
//! beyond error codes.

use kafka_protocol::messages::ApiKey;

pub(super) const PRODUCE: i16 = 8;
pub(super) const INIT_PRODUCER_ID: i16 = 4;
pub(super) const ADD_PARTITIONS_TO_TXN: i16 = 2;
pub(super) const END_TXN: i16 = 2;
pub(super) const ADD_OFFSETS_TO_TXN: i16 = 2;
pub(super) const TXN_OFFSET_COMMIT: i16 = 3;
pub(super) const OFFSET_FETCH: i16 = 7;
pub(super) const CREATE_PARTITIONS: i16 = 3;

/// Every request the simulated clients send, with its version.
pub const SENT: &[(ApiKey, i16)] = &[
    (ApiKey::Produce, PRODUCE),
    (ApiKey::InitProducerId, INIT_PRODUCER_ID),
    (ApiKey::AddPartitionsToTxn, ADD_PARTITIONS_TO_TXN),
    (ApiKey::EndTxn, END_TXN),
    (ApiKey::AddOffsetsToTxn, ADD_OFFSETS_TO_TXN),
    (ApiKey::TxnOffsetCommit, TXN_OFFSET_COMMIT),
    (ApiKey::OffsetFetch, OFFSET_FETCH),
    (ApiKey::CreatePartitions, CREATE_PARTITIONS),
];
