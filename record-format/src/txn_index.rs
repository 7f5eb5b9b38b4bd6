//! Aborted-transaction index entries (`.txnindex`, `kafka-semantics` §6): the 34-byte `AbortedTxn` and the
//! collection rule a read_committed fetch uses. It lives here, beside the batch format, because both the
//! producer-state layer (which decides the entries) and the storage layer (which files them) speak it.
//!
//! Entry (big-endian): `version i16 = 0 | producerId i64 | firstOffset i64 | lastOffset i64 |
//! lastStableOffset i64`.

use crate::error::DecodeError;

/// Bytes per entry.
pub const ABORTED_TXN_LEN: usize = 34;

/// One aborted transaction as the index stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    /// Producer id.
    pub producer_id: i64,
    /// The transaction's first data offset.
    pub first_offset: i64,
    /// Offset of the ABORT marker (or of the barrier that aborted it).
    pub last_offset: i64,
    /// The last stable offset when it was written (`lastStableOffset(c)`).
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// Whether the entry survives truncating the log at `offset`: its marker (at `last_offset`) stays in the log.
    /// The one index-cut rule every store and the scenario runner apply.
    pub fn survives_truncation_to(&self, offset: i64) -> bool {
        self.last_offset < offset
    }

    /// The 34-byte encoding (version 0).
    pub fn encode(&self) -> [u8; ABORTED_TXN_LEN] {
        let mut out = [0u8; ABORTED_TXN_LEN];
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// Decodes one entry. Kafka reads the version from the first byte only; a version above 0 is an error.
    pub fn decode(bytes: &[u8; ABORTED_TXN_LEN]) -> Result<Self, DecodeError> {
        if bytes[0] > 0 {
            return Err(DecodeError::CorruptRecord {
                at: 0,
                reason: format!("aborted transaction entry version {} (only 0 is known)", bytes[0]),
            });
        }
        let long = |at: usize| {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(&bytes[at..at + 8]);
            i64::from_be_bytes(raw)
        };
        Ok(AbortedTxn {
            producer_id: long(2),
            first_offset: long(10),
            last_offset: long(18),
            last_stable_offset: long(26),
        })
    }

    /// Decodes a whole index file; a trailing partial entry is ignored, as Kafka ignores it.
    pub fn decode_all(bytes: &[u8]) -> Result<Vec<Self>, DecodeError> {
        bytes
            .chunks_exact(ABORTED_TXN_LEN)
            .map(|chunk| {
                let mut entry = [0u8; ABORTED_TXN_LEN];
                entry.copy_from_slice(chunk);
                Self::decode(&entry)
            })
            .collect()
    }
}

/// What `collectAbortedTxns(fetchOffset, upperBound)` found in one index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectedAborts {
    /// Entries with `last_offset >= fetch_offset` and `first_offset < upper_bound`.
    pub aborted: Vec<AbortedTxn>,
    /// True once an entry's last stable offset reaches the upper bound: later indexes need not be read.
    pub complete: bool,
}

/// The aborted transactions a read_committed fetch of `[fetch_offset, upper_bound)` must be told about.
pub fn collect_aborted_txns(entries: &[AbortedTxn], fetch_offset: i64, upper_bound: i64) -> CollectedAborts {
    let mut aborted = Vec::new();
    for entry in entries {
        if entry.last_offset >= fetch_offset && entry.first_offset < upper_bound {
            aborted.push(*entry);
        }
        if entry.last_stable_offset >= upper_bound {
            return CollectedAborts {
                aborted,
                complete: true,
            };
        }
    }
    CollectedAborts {
        aborted,
        complete: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_matches_the_spec_vector() {
        let entry = AbortedTxn {
            producer_id: 7,
            first_offset: 100,
            last_offset: 130,
            last_stable_offset: 100,
        };
        let hex: String = entry.encode().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "00000000000000000007000000000000006400000000000000820000000000000064"
        );
        assert_eq!(AbortedTxn::decode(&entry.encode()).unwrap(), entry);
    }

    fn spec_entries() -> Vec<AbortedTxn> {
        [(0, 0, 10, 11), (1, 5, 15, 13), (2, 18, 35, 25), (3, 32, 50, 40)]
            .into_iter()
            .map(
                |(producer_id, first_offset, last_offset, last_stable_offset)| AbortedTxn {
                    producer_id,
                    first_offset,
                    last_offset,
                    last_stable_offset,
                },
            )
            .collect()
    }

    #[test]
    fn collects_aborted_transactions_like_kafka() {
        let entries = spec_entries();
        let ids = |c: &CollectedAborts| c.aborted.iter().map(|a| a.producer_id).collect::<Vec<_>>();
        let all = collect_aborted_txns(&entries, 0, 100);
        assert_eq!((ids(&all), all.complete), (vec![0, 1, 2, 3], false));
        let first_three = collect_aborted_txns(&entries, 0, 32);
        assert_eq!((ids(&first_three), first_three.complete), (vec![0, 1, 2], true));
        let last_three = collect_aborted_txns(&entries, 11, 35);
        assert_eq!((ids(&last_three), last_three.complete), (vec![1, 2, 3], true));
        let last_two = collect_aborted_txns(&entries, 20, 41);
        assert_eq!((ids(&last_two), last_two.complete), (vec![2, 3], false));
    }

    #[test]
    fn trailing_partial_entry_is_ignored_and_newer_versions_rejected() {
        let entries = spec_entries();
        let mut bytes: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
        bytes.extend_from_slice(&[0; 10]);
        assert_eq!(AbortedTxn::decode_all(&bytes).unwrap(), entries);
        bytes[0] = 1;
        assert!(AbortedTxn::decode_all(&bytes).is_err());
    }
}
