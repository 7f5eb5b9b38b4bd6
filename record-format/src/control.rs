//! Control records: transaction markers, KRaft records, and the `MIRROR_PID_RESET` barrier (type 7).
//!
//! A control batch (attribute bit 5) holds records whose key is `i16 version | i16 type` and whose value
//! depends on the type. [`ControlRecord::decode`] turns a key and value into a typed enum; an unassigned type is
//! [`ControlRecord::Unknown`], never an error, because consumers must skip control types they do not know.
//!
//! [`MirrorPidResetRecord`] is the barrier of the seeds: `Version int16 | SourceClusterId compact string |
//! tagged fields`, flexible from version 0. This project adds `WriterClusterId` as tagged field 0 (ARCHITECTURE.md, barrier invariants; ADR 0005):
//! the cluster that wrote the barrier. Unknown tagged fields survive a decode/encode round trip.

use crate::batch::{Attributes, RecordBatch, TimestampType, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE};
use crate::builder::{BatchBuilder, NewRecord};
use crate::compression::Compression;
use crate::error::{DecodeError, EncodeError};
use crate::flexible::{
    read_compact_string, read_i16, read_i32, read_i64, visit_tagged_fields, write_compact_string,
    write_tagged_fields, TaggedFields,
};

/// Control type codes. The barrier's code lives in one constant in case upstream Kafka claims 7 later.
pub mod types {
    /// Transaction abort marker.
    pub const ABORT: i16 = 0;
    /// Transaction commit marker.
    pub const COMMIT: i16 = 1;
    /// KRaft leader change.
    pub const LEADER_CHANGE: i16 = 2;
    /// KRaft snapshot header.
    pub const SNAPSHOT_HEADER: i16 = 3;
    /// KRaft snapshot footer.
    pub const SNAPSHOT_FOOTER: i16 = 4;
    /// KRaft version.
    pub const KRAFT_VERSION: i16 = 5;
    /// KRaft voters.
    pub const KRAFT_VOTERS: i16 = 6;
    /// KIP-1279 mirror PID reset barrier (not in Apache Kafka's `ControlRecordType`).
    pub const MIRROR_PID_RESET: i16 = 7;
}

/// The control key version this crate writes.
pub const CONTROL_KEY_VERSION: i16 = 0;

/// Kafka's name for a control type (`UNKNOWN` for unassigned codes).
pub fn type_name(control_type: i16) -> &'static str {
    match control_type {
        types::ABORT => "ABORT",
        types::COMMIT => "COMMIT",
        types::LEADER_CHANGE => "LEADER_CHANGE",
        types::SNAPSHOT_HEADER => "SNAPSHOT_HEADER",
        types::SNAPSHOT_FOOTER => "SNAPSHOT_FOOTER",
        types::KRAFT_VERSION => "KRAFT_VERSION",
        types::KRAFT_VOTERS => "KRAFT_VOTERS",
        types::MIRROR_PID_RESET => "MIRROR_PID_RESET",
        _ => "UNKNOWN",
    }
}

/// The key of a control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ControlKey {
    /// Key version (0 today; higher versions are read as 0).
    pub version: i16,
    /// Control type code.
    pub control_type: i16,
}

impl ControlKey {
    /// Parses a key: at least 4 bytes (extra bytes ignored, as Kafka does), version not negative.
    pub fn decode(key: Option<&[u8]>) -> Result<Self, DecodeError> {
        let key = key.ok_or_else(|| DecodeError::corrupt(0, "control record without a key"))?;
        let mut pos = 0;
        let version = read_i16(key, &mut pos)
            .map_err(|_| DecodeError::corrupt(0, format!("control key of {} bytes, 4 needed", key.len())))?;
        let control_type = read_i16(key, &mut pos)
            .map_err(|_| DecodeError::corrupt(0, format!("control key of {} bytes, 4 needed", key.len())))?;
        if version < 0 {
            return Err(DecodeError::corrupt(
                0,
                format!("negative control key version {version}"),
            ));
        }
        Ok(ControlKey {
            version,
            control_type,
        })
    }

    /// The 4-byte encoding.
    pub fn encode(&self) -> [u8; 4] {
        let mut out = [0u8; 4];
        out[..2].copy_from_slice(&self.version.to_be_bytes());
        out[2..].copy_from_slice(&self.control_type.to_be_bytes());
        out
    }
}

/// The value of an ABORT or COMMIT marker (`EndTxnMarker`, not flexible).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EndTxnMarker {
    /// Value version (0; higher versions are read as 0).
    pub version: i16,
    /// Epoch of the transaction coordinator that wrote the marker.
    pub coordinator_epoch: i32,
}

impl EndTxnMarker {
    /// Size of the v0 encoding.
    pub const ENCODED_LEN: usize = 6;

    /// Parses `i16 version | i32 coordinatorEpoch`.
    pub fn decode(value: &[u8]) -> Result<Self, DecodeError> {
        let mut pos = 0;
        let version = read_i16(value, &mut pos)?;
        if version < 0 {
            return Err(DecodeError::corrupt(
                0,
                format!("negative end-txn marker version {version}"),
            ));
        }
        let coordinator_epoch = read_i32(value, &mut pos)?;
        Ok(EndTxnMarker {
            version,
            coordinator_epoch,
        })
    }

    /// The 6-byte encoding.
    pub fn encode(&self) -> [u8; Self::ENCODED_LEN] {
        let mut out = [0u8; Self::ENCODED_LEN];
        out[..2].copy_from_slice(&self.version.to_be_bytes());
        out[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        out
    }
}

/// The barrier's value: `MirrorPidResetRecord` v0, flexible encoding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MirrorPidResetRecord {
    /// The record's own `Version` field.
    pub version: i16,
    /// The cluster the mirrored data came from.
    pub source_cluster_id: String,
    /// Tagged field 0: the cluster that wrote this barrier; `None` when absent (another implementation).
    pub writer_cluster_id: Option<String>,
    /// Tagged fields other than 0, in stored order, preserved on re-encode (kept as their encoding: a value of
    /// millions of fields costs its own size).
    pub unknown_tagged_fields: TaggedFields,
}

impl MirrorPidResetRecord {
    /// Tag of `WriterClusterId`.
    pub const WRITER_CLUSTER_ID_TAG: u32 = 0;

    /// A v0 barrier value.
    pub fn new(source_cluster_id: impl Into<String>, writer_cluster_id: Option<String>) -> Self {
        MirrorPidResetRecord {
            version: 0,
            source_cluster_id: source_cluster_id.into(),
            writer_cluster_id,
            unknown_tagged_fields: TaggedFields::new(),
        }
    }

    /// Parses the value; trailing bytes after the tagged fields are an error.
    pub fn decode(value: &[u8]) -> Result<Self, DecodeError> {
        let mut pos = 0;
        let version = read_i16(value, &mut pos)?;
        if version < 0 {
            return Err(DecodeError::corrupt(
                0,
                format!("negative MirrorPidResetRecord version {version}"),
            ));
        }
        let source_cluster_id = read_compact_string(value, &mut pos)?.to_owned();
        let tags_at = pos;
        let mut writer_cluster_id = None;
        let mut unknown_tagged_fields = TaggedFields::new();
        visit_tagged_fields(value, &mut pos, |tag, data| {
            if tag != Self::WRITER_CLUSTER_ID_TAG {
                unknown_tagged_fields.push(tag, data);
                return Ok(());
            }
            if writer_cluster_id.is_some() {
                return Err(DecodeError::corrupt(tags_at, "WriterClusterId tag appears twice"));
            }
            let mut inner = 0;
            let writer = read_compact_string(data, &mut inner)?;
            if inner != data.len() {
                return Err(DecodeError::corrupt(
                    tags_at,
                    "WriterClusterId tag has trailing bytes",
                ));
            }
            writer_cluster_id = Some(writer.to_owned());
            Ok(())
        })?;
        if pos != value.len() {
            return Err(DecodeError::corrupt(
                pos,
                format!("{} trailing bytes after MirrorPidResetRecord", value.len() - pos),
            ));
        }
        Ok(MirrorPidResetRecord {
            version,
            source_cluster_id,
            writer_cluster_id,
            unknown_tagged_fields,
        })
    }

    /// Encodes the value: the writer tag (0) first, then the unknown tags in their stored order.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.source_cluster_id.len());
        out.extend_from_slice(&self.version.to_be_bytes());
        write_compact_string(&mut out, &self.source_cluster_id);
        let writer = self.writer_cluster_id.as_ref().map(|writer| {
            let mut payload = Vec::with_capacity(1 + writer.len());
            write_compact_string(&mut payload, writer);
            (Self::WRITER_CLUSTER_ID_TAG, payload)
        });
        let fields: Vec<(u32, &[u8])> = writer
            .iter()
            .map(|(tag, payload)| (*tag, payload.as_slice()))
            .chain(self.unknown_tagged_fields.iter())
            .collect();
        write_tagged_fields(&mut out, fields.into_iter());
        out
    }

    /// Number of tagged fields the encoding carries.
    pub fn tagged_field_count(&self) -> usize {
        usize::from(self.writer_cluster_id.is_some()) + self.unknown_tagged_fields.len()
    }
}

/// A KRaft control value kept raw, with its leading `Version` field decoded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KraftControlValue {
    /// The message's `Version` field (its first `i16`).
    pub version: i16,
    /// The whole value as stored.
    pub raw: Vec<u8>,
}

/// One decoded control record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ControlRecord {
    /// Type 0.
    Abort(EndTxnMarker),
    /// Type 1.
    Commit(EndTxnMarker),
    /// Type 2.
    LeaderChange(KraftControlValue),
    /// Type 3, with `LastContainedLogTimestamp`.
    SnapshotHeader {
        /// Raw value and version.
        value: KraftControlValue,
        /// `LastContainedLogTimestamp`.
        last_contained_log_timestamp: i64,
    },
    /// Type 4.
    SnapshotFooter(KraftControlValue),
    /// Type 5, with the `KRaftVersion` field.
    KraftVersion {
        /// Raw value and version.
        value: KraftControlValue,
        /// `KRaftVersion`.
        kraft_version: i16,
    },
    /// Type 6.
    KraftVoters(KraftControlValue),
    /// Type 7, the mirror barrier.
    MirrorPidReset(MirrorPidResetRecord),
    /// Any other type: kept as stored, never an error.
    Unknown {
        /// The type code.
        control_type: i16,
        /// The key as stored.
        key: Vec<u8>,
        /// The value as stored.
        value: Option<Vec<u8>>,
    },
}

fn required_value(value: Option<&[u8]>, control_type: i16) -> Result<&[u8], DecodeError> {
    value.ok_or_else(|| {
        DecodeError::corrupt(
            0,
            format!("{} control record without a value", type_name(control_type)),
        )
    })
}

fn kraft_value(value: Option<&[u8]>, control_type: i16) -> Result<KraftControlValue, DecodeError> {
    let value = required_value(value, control_type)?;
    let mut pos = 0;
    Ok(KraftControlValue {
        version: read_i16(value, &mut pos)?,
        raw: value.to_vec(),
    })
}

impl ControlRecord {
    /// Decodes a control record from its key and value.
    pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Self, DecodeError> {
        let control_key = ControlKey::decode(key)?;
        let control_type = control_key.control_type;
        Ok(match control_type {
            types::ABORT => ControlRecord::Abort(EndTxnMarker::decode(required_value(value, control_type)?)?),
            types::COMMIT => {
                ControlRecord::Commit(EndTxnMarker::decode(required_value(value, control_type)?)?)
            }
            types::LEADER_CHANGE => ControlRecord::LeaderChange(kraft_value(value, control_type)?),
            types::SNAPSHOT_HEADER => {
                let value = kraft_value(value, control_type)?;
                let mut pos = 2;
                let last_contained_log_timestamp = read_i64(&value.raw, &mut pos)?;
                ControlRecord::SnapshotHeader {
                    value,
                    last_contained_log_timestamp,
                }
            }
            types::SNAPSHOT_FOOTER => ControlRecord::SnapshotFooter(kraft_value(value, control_type)?),
            types::KRAFT_VERSION => {
                let value = kraft_value(value, control_type)?;
                let mut pos = 2;
                let kraft_version = read_i16(&value.raw, &mut pos)?;
                ControlRecord::KraftVersion { value, kraft_version }
            }
            types::KRAFT_VOTERS => ControlRecord::KraftVoters(kraft_value(value, control_type)?),
            types::MIRROR_PID_RESET => ControlRecord::MirrorPidReset(MirrorPidResetRecord::decode(
                required_value(value, control_type)?,
            )?),
            _ => ControlRecord::Unknown {
                control_type,
                key: key.map(<[u8]>::to_vec).unwrap_or_default(),
                value: value.map(<[u8]>::to_vec),
            },
        })
    }

    /// The type code.
    pub fn control_type(&self) -> i16 {
        match self {
            ControlRecord::Abort(_) => types::ABORT,
            ControlRecord::Commit(_) => types::COMMIT,
            ControlRecord::LeaderChange(_) => types::LEADER_CHANGE,
            ControlRecord::SnapshotHeader { .. } => types::SNAPSHOT_HEADER,
            ControlRecord::SnapshotFooter(_) => types::SNAPSHOT_FOOTER,
            ControlRecord::KraftVersion { .. } => types::KRAFT_VERSION,
            ControlRecord::KraftVoters(_) => types::KRAFT_VOTERS,
            ControlRecord::MirrorPidReset(_) => types::MIRROR_PID_RESET,
            ControlRecord::Unknown { control_type, .. } => *control_type,
        }
    }

    /// Kafka's name of the type.
    pub fn type_name(&self) -> &'static str {
        type_name(self.control_type())
    }

    /// The value bytes this record encodes to.
    pub fn encode_value(&self) -> Option<Vec<u8>> {
        match self {
            ControlRecord::Abort(marker) | ControlRecord::Commit(marker) => Some(marker.encode().to_vec()),
            ControlRecord::LeaderChange(value)
            | ControlRecord::SnapshotFooter(value)
            | ControlRecord::KraftVoters(value)
            | ControlRecord::SnapshotHeader { value, .. }
            | ControlRecord::KraftVersion { value, .. } => Some(value.raw.clone()),
            ControlRecord::MirrorPidReset(record) => Some(record.encode()),
            ControlRecord::Unknown { value, .. } => value.clone(),
        }
    }

    /// The key bytes this record encodes to (an unknown record keeps its stored key).
    pub fn encode_key(&self) -> Vec<u8> {
        match self {
            ControlRecord::Unknown { key, .. } => key.clone(),
            _ => ControlKey {
                version: CONTROL_KEY_VERSION,
                control_type: self.control_type(),
            }
            .encode()
            .to_vec(),
        }
    }
}

/// Decodes the control record of every record in a control batch.
pub fn decode_control_records(batch: &RecordBatch) -> Result<Vec<ControlRecord>, DecodeError> {
    let records = batch.records()?;
    let mut decoded = Vec::new();
    for record in records.iter() {
        let record = record?;
        decoded.push(ControlRecord::decode(record.key, record.value)?);
    }
    Ok(decoded)
}

/// Where a control batch goes and when it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlBatchPlacement {
    /// Offset of the batch (assigned again on append by a log).
    pub base_offset: i64,
    /// Partition leader epoch to stamp.
    pub partition_leader_epoch: i32,
    /// The writer's wall-clock time, used as base and max timestamp.
    pub timestamp: i64,
}

fn single_control_record_batch(
    placement: ControlBatchPlacement,
    transactional: bool,
    producer_id: i64,
    producer_epoch: i16,
    record: &ControlRecord,
) -> Result<RecordBatch, EncodeError> {
    let mut builder = BatchBuilder::new()
        .base_offset(placement.base_offset)
        .partition_leader_epoch(placement.partition_leader_epoch)
        .attributes(Attributes::new(
            Compression::None,
            TimestampType::CreateTime,
            transactional,
            true,
        ))
        .producer(producer_id, producer_epoch, NO_SEQUENCE)
        .base_timestamp(placement.timestamp)
        .max_timestamp(placement.timestamp);
    builder.push(NewRecord {
        key: Some(record.encode_key().into()),
        value: record.encode_value().map(Into::into),
        ..NewRecord::default()
    });
    builder.build()
}

/// An ABORT or COMMIT marker batch as the broker writes it (`MemoryRecords.withEndTransactionMarker`):
/// transactional + control, one record, base sequence −1, CreateTime — 78 bytes.
pub fn end_txn_marker_batch(
    commit: bool,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    placement: ControlBatchPlacement,
) -> Result<RecordBatch, EncodeError> {
    let marker = EndTxnMarker {
        version: 0,
        coordinator_epoch,
    };
    let record = if commit {
        ControlRecord::Commit(marker)
    } else {
        ControlRecord::Abort(marker)
    };
    single_control_record_batch(placement, true, producer_id, producer_epoch, &record)
}

/// A `MIRROR_PID_RESET` barrier batch (ARCHITECTURE.md, barrier invariants; ADR 0005): control, not transactional, producer id/epoch/sequence −1,
/// one record.
pub fn mirror_pid_reset_batch(
    barrier: &MirrorPidResetRecord,
    placement: ControlBatchPlacement,
) -> Result<RecordBatch, EncodeError> {
    single_control_record_batch(
        placement,
        false,
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        &ControlRecord::MirrorPidReset(barrier.clone()),
    )
}

/// Decodes every record of a batch's records section — and, for a control batch, each record's control key and
/// value — handing each to `visit`. The one verdict on a batch's contents: `mirrorlog dump` prints what it
/// visits and `mirrorlog replay` refuses a batch it rejects, so the two never disagree about a batch.
pub fn visit_records<'r>(
    records: &'r crate::record::Records<'_>,
    is_control: bool,
    mut visit: impl FnMut(crate::record::Record<'r>, Option<(ControlKey, ControlRecord)>),
) -> Result<(), DecodeError> {
    for record in records.iter() {
        let record = record?;
        let control = if is_control {
            Some((
                ControlKey::decode(record.key)?,
                ControlRecord::decode(record.key, record.value)?,
            ))
        } else {
            None
        };
        visit(record, control);
    }
    Ok(())
}

/// Whether every record of `batch` decodes ([`visit_records`] discarding what it visits).
pub fn check_records(batch: &crate::batch::RecordBatch) -> Result<(), DecodeError> {
    let records = batch.records()?;
    visit_records(&records, batch.is_control(), |_, _| {})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_control_type_is_kept_not_rejected() {
        let key = [0, 0, 0x12, 0x34];
        let decoded = ControlRecord::decode(Some(&key), Some(b"xyz")).unwrap();
        assert_eq!(
            decoded,
            ControlRecord::Unknown {
                control_type: 0x1234,
                key: key.to_vec(),
                value: Some(b"xyz".to_vec())
            }
        );
        assert_eq!(decoded.type_name(), "UNKNOWN");
    }

    #[test]
    fn short_or_negative_control_keys_are_corrupt() {
        assert!(ControlRecord::decode(Some(&[0, 0, 1]), None).is_err());
        assert!(ControlRecord::decode(Some(&[0xff, 0xff, 0, 1]), None).is_err());
        assert!(ControlRecord::decode(None, None).is_err());
    }

    #[test]
    fn higher_control_key_version_reads_as_v0() {
        let decoded = ControlRecord::decode(Some(&[0, 3, 0, 1]), Some(&[0, 0, 0, 0, 0, 9])).unwrap();
        assert_eq!(
            decoded,
            ControlRecord::Commit(EndTxnMarker {
                version: 0,
                coordinator_epoch: 9
            })
        );
    }

    #[test]
    fn barrier_without_writer_matches_the_shared_vector() {
        let record = MirrorPidResetRecord::new("source-cluster-A", None);
        assert_eq!(
            record.encode(),
            [&[0u8, 0, 0x11][..], b"source-cluster-A", &[0]].concat()
        );
    }

    #[test]
    fn barrier_writer_tag_round_trips_with_unknown_tags() {
        let record = MirrorPidResetRecord {
            version: 0,
            source_cluster_id: "A".into(),
            writer_cluster_id: Some("B".into()),
            unknown_tagged_fields: [(9, &[1u8, 2, 3][..])].into_iter().collect(),
        };
        let bytes = record.encode();
        assert_eq!(
            bytes,
            [0, 0, 2, b'A', 2, 0, 2, 2, b'B', 9, 3, 1, 2, 3],
            "version, source, 2 tags: (0, size 2, 'B'), (9, size 3, 1 2 3)"
        );
        assert_eq!(MirrorPidResetRecord::decode(&bytes).unwrap(), record);
    }

    #[test]
    fn barrier_with_trailing_bytes_is_corrupt() {
        let mut bytes = MirrorPidResetRecord::new("A", None).encode();
        bytes.push(0);
        assert!(MirrorPidResetRecord::decode(&bytes).is_err());
    }

    #[test]
    fn end_txn_marker_batch_matches_spec_vector() {
        let batch = end_txn_marker_batch(
            true,
            7,
            4,
            2,
            ControlBatchPlacement {
                base_offset: 42,
                partition_leader_epoch: 5,
                timestamp: 1_700_000_000_000,
            },
        )
        .unwrap();
        let expected = "000000000000002a0000004200000005027c29a3750030000000000000018bcfe568000000018bcfe5680000000000000000070004ffffffff000000012000000008000000010c00000000000200";
        assert_eq!(hex(batch.as_bytes()), expected);
    }

    #[test]
    fn abort_marker_batch_matches_spec_vector() {
        let batch = end_txn_marker_batch(
            false,
            7,
            4,
            2,
            ControlBatchPlacement {
                base_offset: 42,
                partition_leader_epoch: 5,
                timestamp: 1_700_000_000_000,
            },
        )
        .unwrap();
        let expected = "000000000000002a0000004200000005028817753d0030000000000000018bcfe568000000018bcfe5680000000000000000070004ffffffff000000012000000008000000000c00000000000200";
        assert_eq!(hex(batch.as_bytes()), expected);
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}
