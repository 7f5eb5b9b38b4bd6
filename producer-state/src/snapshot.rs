//! Kafka's producer snapshot file (`ProducerSnapshot.json` version 1, kafka-semantics §5) and the abstract set of snapshots
//! the manager loads from and writes to.
//!
//! Layout (big-endian): `i16 version = 1 | u32 crc | i32 count | count × 46-byte entries`; the CRC-32C covers bytes
//! 6..EOF. Entry: `producerId i64 | epoch i16 | lastSequence i32 | lastOffset i64 | offsetDelta i32 |
//! timestamp i64 | coordinatorEpoch i32 | currentTxnFirstOffset i64`. Decoding never trusts the count: it must
//! match the file size exactly.
//!
//! The manager does no I/O: a [`SnapshotStore`] (files in a partition directory, a key-value store, memory) is
//! passed to the operations that need snapshots, keyed by offset.

use std::collections::BTreeMap;

use crate::entry::{BatchMetadata, BatchWindow, ProducerStateEntry};
use crate::error::ProducerStateError;

/// The only snapshot version Kafka writes and reads.
pub const SNAPSHOT_VERSION: i16 = 1;
/// Bytes before the first entry.
pub const SNAPSHOT_HEADER_LEN: usize = 10;
/// Bytes per entry.
pub const SNAPSHOT_ENTRY_LEN: usize = 46;

/// `offset` as Kafka names its snapshot file: 20 digits + `.snapshot`.
pub fn snapshot_file_name(offset: i64) -> String {
    format!("{offset:020}.snapshot")
}

/// Encodes producer entries as a snapshot file. Entries are written in the given order.
pub fn encode_snapshot<'a>(entries: impl ExactSizeIterator<Item = &'a ProducerStateEntry>) -> Vec<u8> {
    let count = entries.len();
    let mut out = vec![0u8; SNAPSHOT_HEADER_LEN + count * SNAPSHOT_ENTRY_LEN];
    out[..2].copy_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
    out[6..10].copy_from_slice(&(count as i32).to_be_bytes());
    for (slot, entry) in out[SNAPSHOT_HEADER_LEN..]
        .chunks_exact_mut(SNAPSHOT_ENTRY_LEN)
        .zip(entries)
    {
        let last = entry.batches.back();
        slot[0..8].copy_from_slice(&entry.producer_id.to_be_bytes());
        slot[8..10].copy_from_slice(&entry.producer_epoch.to_be_bytes());
        slot[10..14].copy_from_slice(&last.map_or(-1, |b| b.last_seq).to_be_bytes());
        slot[14..22].copy_from_slice(&last.map_or(-1, |b| b.last_offset).to_be_bytes());
        slot[22..26].copy_from_slice(&last.map_or(0, |b| b.offset_delta).to_be_bytes());
        slot[26..34].copy_from_slice(&entry.last_timestamp.to_be_bytes());
        slot[34..38].copy_from_slice(&entry.coordinator_epoch.to_be_bytes());
        slot[38..46].copy_from_slice(&entry.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
    }
    let crc = record_format::crc::crc32c(&out[6..]);
    out[2..6].copy_from_slice(&crc.to_be_bytes());
    out
}

fn corrupt(reason: impl Into<String>) -> ProducerStateError {
    ProducerStateError::CorruptSnapshot {
        reason: reason.into(),
    }
}

fn field<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

/// Decodes a snapshot file into producer entries (one cached batch each at most, as Kafka restores them).
pub fn decode_snapshot(bytes: &[u8]) -> Result<Vec<ProducerStateEntry>, ProducerStateError> {
    if bytes.len() < SNAPSHOT_HEADER_LEN {
        return Err(corrupt(format!(
            "{} bytes, shorter than the 10-byte header",
            bytes.len()
        )));
    }
    let version = i16::from_be_bytes(field(bytes, 0));
    if version != SNAPSHOT_VERSION {
        return Err(corrupt(format!("unsupported version {version}")));
    }
    let stored_crc = u32::from_be_bytes(field(bytes, 2));
    let computed_crc = record_format::crc::crc32c(&bytes[6..]);
    if stored_crc != computed_crc {
        return Err(corrupt(format!(
            "crc mismatch: stored {stored_crc:#010x}, computed {computed_crc:#010x}"
        )));
    }
    let count = i32::from_be_bytes(field(bytes, 6));
    let body = &bytes[SNAPSHOT_HEADER_LEN..];
    let Ok(count) = usize::try_from(count) else {
        return Err(corrupt(format!("negative entry count {count}")));
    };
    if body.len() != count.saturating_mul(SNAPSHOT_ENTRY_LEN) {
        return Err(corrupt(format!(
            "{count} entries declared but {} entry bytes present",
            body.len()
        )));
    }
    let mut entries = Vec::with_capacity(count);
    for raw in body.chunks_exact(SNAPSHOT_ENTRY_LEN) {
        let producer_id = i64::from_be_bytes(field(raw, 0));
        let last_offset = i64::from_be_bytes(field(raw, 14));
        let txn_first_offset = i64::from_be_bytes(field(raw, 38));
        let timestamp = i64::from_be_bytes(field(raw, 26));
        let mut batches = BatchWindow::new();
        if last_offset >= 0 {
            batches.push_back(BatchMetadata {
                last_seq: i32::from_be_bytes(field(raw, 10)),
                last_offset,
                offset_delta: i32::from_be_bytes(field(raw, 22)),
                timestamp,
            });
        }
        entries.push(ProducerStateEntry {
            producer_id,
            batches,
            producer_epoch: i16::from_be_bytes(field(raw, 8)),
            coordinator_epoch: i32::from_be_bytes(field(raw, 34)),
            last_timestamp: timestamp,
            current_txn_first_offset: (txn_first_offset >= 0).then_some(txn_first_offset),
        });
    }
    Ok(entries)
}

/// The producer snapshots of one partition, keyed by offset (the map end offset when each was taken).
pub trait SnapshotStore {
    /// Offsets of the stored snapshots, ascending.
    fn offsets(&self) -> Vec<i64>;
    /// The bytes of the snapshot at `offset`, `None` if there is none.
    fn read(&self, offset: i64) -> Option<Vec<u8>>;
    /// Stores (or replaces) the snapshot at `offset`.
    fn write(&mut self, offset: i64, bytes: Vec<u8>);
    /// Removes the snapshot at `offset` (no error if absent).
    fn delete(&mut self, offset: i64);

    /// The highest offset, if any.
    fn latest(&self) -> Option<i64> {
        self.offsets().last().copied()
    }
}

/// Snapshots kept in memory (tests, scripts, and the reference for other stores).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemorySnapshotStore {
    snapshots: BTreeMap<i64, Vec<u8>>,
}

impl MemorySnapshotStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl SnapshotStore for MemorySnapshotStore {
    fn offsets(&self) -> Vec<i64> {
        self.snapshots.keys().copied().collect()
    }

    fn read(&self, offset: i64) -> Option<Vec<u8>> {
        self.snapshots.get(&offset).cloned()
    }

    fn write(&mut self, offset: i64, bytes: Vec<u8>) {
        self.snapshots.insert(offset, bytes);
    }

    fn delete(&mut self, offset: i64) {
        self.snapshots.remove(&offset);
    }

    fn latest(&self) -> Option<i64> {
        self.snapshots.keys().next_back().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn empty_snapshot_matches_the_spec_vector() {
        assert_eq!(hex(&encode_snapshot([].iter())), "000148674bc700000000");
    }

    fn spec_entries() -> Vec<ProducerStateEntry> {
        let mut first = ProducerStateEntry::empty(7);
        first.producer_epoch = 4;
        first.batches.push_back(BatchMetadata {
            last_seq: 9,
            last_offset: 120,
            offset_delta: 2,
            timestamp: 1_700_000_000_000,
        });
        first.last_timestamp = 1_700_000_000_000;
        first.coordinator_epoch = 2;
        let mut second = ProducerStateEntry::empty(8);
        second.producer_epoch = 0;
        second.last_timestamp = 1_700_000_000_500;
        second.coordinator_epoch = 5;
        second.current_txn_first_offset = Some(130);
        vec![first, second]
    }

    #[test]
    fn two_entry_snapshot_matches_the_spec_vector() {
        let expected = "0001a43a0b2e0000000200000000000000070004000000090000000000000078000000020000018bcfe5680000000002ffffffffffffffff00000000000000080000ffffffffffffffffffffffff000000000000018bcfe569f4000000050000000000000082";
        let entries = spec_entries();
        let bytes = encode_snapshot(entries.iter());
        assert_eq!(hex(&bytes), expected);
        assert_eq!(decode_snapshot(&bytes).unwrap(), entries);
    }

    #[test]
    fn corrupt_snapshots_are_typed_errors() {
        let good = encode_snapshot(spec_entries().iter());
        assert!(decode_snapshot(&[]).is_err(), "empty");
        assert!(decode_snapshot(&good[..good.len() / 2]).is_err(), "truncated");
        let mut flipped = good.clone();
        flipped[40] ^= 1;
        assert!(decode_snapshot(&flipped).is_err(), "crc");
        let mut version = good.clone();
        version[1] = 2;
        assert!(decode_snapshot(&version).is_err(), "version");
        let mut zeros = good;
        zeros[..37].fill(0);
        assert!(decode_snapshot(&zeros).is_err(), "zeroed start");
    }

    #[test]
    fn file_names_have_twenty_digits() {
        assert_eq!(snapshot_file_name(42), "00000000000000000042.snapshot");
    }
}
