//! `mirrorlog dump` beyond one segment: a storage-fs (Kafka) partition directory, producer `.snapshot` files and
//! `.txnindex` files, like `kafka-dump-log.sh`. Everything here only reads: dumping never repairs a directory
//! (opening it through storage-fs would cut a torn tail).

use std::io::Write;
use std::path::{Path, PathBuf};

use producer_state::snapshot::decode_snapshot;
use record_format::txn_index::ABORTED_TXN_LEN;
use record_format::AbortedTxn;
use serde_json::json;
use storage_fs::files::{classify, DirEntry};

use crate::dump::{dump_segment, DumpOutcome, Format};
use crate::error::CliError;

/// Extra views of a partition directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Views {
    /// Also print the producer snapshots.
    pub snapshots: bool,
    /// Also print the aborted-transaction indexes.
    pub txn_index: bool,
}

fn files_of(dir: &Path, wanted: impl Fn(&DirEntry) -> bool) -> Result<Vec<PathBuf>, CliError> {
    let entries = std::fs::read_dir(dir).map_err(|source| CliError::Open {
        path: dir.to_owned(),
        source,
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| CliError::Open {
            path: dir.to_owned(),
            source,
        })?;
        if wanted(&classify(&entry.file_name().to_string_lossy())) {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// Snapshot and index files are read whole; no real one comes near this.
const MAX_WHOLE_FILE_BYTES: u64 = 256 << 20;

fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    crate::error::require_regular_file(path, Some(MAX_WHOLE_FILE_BYTES))?;
    std::fs::read(path).map_err(|source| CliError::Open {
        path: path.to_owned(),
        source,
    })
}

fn corrupt(
    out: &mut impl Write,
    format: Format,
    path: &Path,
    message: &str,
) -> Result<DumpOutcome, CliError> {
    let line = match format {
        Format::Json => json!({"error": {"category": "corrupt_record", "file": path.display().to_string(),
                                          "file_offset": 0, "message": message}})
        .to_string(),
        Format::Text => format!("error: corrupt {}: {message}", path.display()),
    };
    writeln!(out, "{line}").map_err(CliError::Output)?;
    Ok(DumpOutcome::Corrupt { valid_batches: 0 })
}

/// Dumps a producer snapshot file.
pub fn dump_snapshot(path: &Path, format: Format, out: &mut impl Write) -> Result<DumpOutcome, CliError> {
    let entries = match decode_snapshot(&read(path)?) {
        Ok(entries) => entries,
        Err(error) => return corrupt(out, format, path, &error.to_string()),
    };
    if format == Format::Text {
        writeln!(out, "Dumping {}", path.display()).map_err(CliError::Output)?;
    }
    for entry in &entries {
        let last = entry.batches.back();
        let line = match format {
            Format::Json => json!({
                "snapshot": path.file_name().map(|n| n.to_string_lossy().into_owned()),
                "producer_id": entry.producer_id,
                "producer_epoch": entry.producer_epoch,
                "last_sequence": last.map_or(-1, |b| b.last_seq),
                "last_offset": last.map_or(-1, |b| b.last_offset),
                "offset_delta": last.map_or(0, |b| b.offset_delta),
                "timestamp": entry.last_timestamp,
                "coordinator_epoch": entry.coordinator_epoch,
                "current_txn_first_offset": entry.current_txn_first_offset,
            })
            .to_string(),
            // DumpLogSegments' line: Java's OptionalLong for the open transaction, the batch fields only for a
            // producer with batch metadata (a trailing space before the line end otherwise).
            Format::Text => {
                let batch = last.map_or_else(String::new, |b| {
                    format!(
                        "firstSequence: {} lastSequence: {} lastOffset: {} offsetDelta: {} timestamp: {}",
                        b.last_seq.wrapping_sub(b.offset_delta),
                        b.last_seq,
                        b.last_offset,
                        b.offset_delta,
                        entry.last_timestamp
                    )
                });
                format!(
                    "producerId: {} producerEpoch: {} coordinatorEpoch: {} currentTxnFirstOffset: {} \
                     lastTimestamp: {} {batch}",
                    entry.producer_id,
                    entry.producer_epoch,
                    entry.coordinator_epoch,
                    entry.current_txn_first_offset.map_or_else(
                        || "OptionalLong.empty".to_owned(),
                        |offset| format!("OptionalLong[{offset}]")
                    ),
                    entry.last_timestamp,
                )
            }
        };
        writeln!(out, "{line}").map_err(CliError::Output)?;
    }
    Ok(DumpOutcome::Clean {
        batches: entries.len() as u64,
    })
}

/// Dumps an aborted-transaction index file.
pub fn dump_txn_index(path: &Path, format: Format, out: &mut impl Write) -> Result<DumpOutcome, CliError> {
    let bytes = read(path)?;
    let entries = match AbortedTxn::decode_all(&bytes) {
        Ok(entries) => entries,
        Err(error) => return corrupt(out, format, path, &error.to_string()),
    };
    if format == Format::Text {
        writeln!(out, "Dumping {}", path.display()).map_err(CliError::Output)?;
    }
    for entry in &entries {
        let line = match format {
            Format::Json => json!({
                "txn_index": path.file_name().map(|n| n.to_string_lossy().into_owned()),
                "producer_id": entry.producer_id,
                "first_offset": entry.first_offset,
                "last_offset": entry.last_offset,
                "last_stable_offset": entry.last_stable_offset,
            })
            .to_string(),
            Format::Text => format!(
                "version: 0 producerId: {} firstOffset: {} lastOffset: {} lastStableOffset: {}",
                entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset
            ),
        };
        writeln!(out, "{line}").map_err(CliError::Output)?;
    }
    // A torn last entry (a write a crash cut): Kafka's reader skips it silently; an inspection tool says so.
    let whole = (entries.len() * ABORTED_TXN_LEN) as u64;
    if whole < bytes.len() as u64 {
        let trailing = bytes.len() as u64 - whole;
        let message =
            format!("{trailing} trailing bytes: a torn entry (entries are {ABORTED_TXN_LEN} bytes)");
        let line = match format {
            Format::Json => json!({"error": {"category": "truncated", "file": path.display().to_string(),
                                              "file_offset": whole, "message": message}})
            .to_string(),
            Format::Text => format!("error: truncated {} at byte {whole}: {message}", path.display()),
        };
        writeln!(out, "{line}").map_err(CliError::Output)?;
        return Ok(DumpOutcome::Corrupt {
            valid_batches: entries.len() as u64,
        });
    }
    Ok(DumpOutcome::Clean {
        batches: entries.len() as u64,
    })
}

/// Which sparse index a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SparseIndex {
    /// `.index`: (u32 offset relative to the segment base, u32 position in the log).
    Offset,
    /// `.timeindex`: (i64 timestamp, u32 offset relative to the segment base).
    Time,
}

/// Dumps a segment's `.index` or `.timeindex` as DumpLogSegments does: one line per entry with the absolute offset
/// (`offset: N position: P`, `timestamp: T offset: N`), `<file> is empty.` for an offset index without entries, and
/// nothing after a zero entry past the first (what is left of a preallocated file). A torn last entry is reported.
fn dump_sparse_index(
    path: &Path,
    base_offset: i64,
    kind: SparseIndex,
    format: Format,
    out: &mut impl Write,
) -> Result<DumpOutcome, CliError> {
    let bytes = read(path)?;
    let entry_len = match kind {
        SparseIndex::Offset => 8,
        SparseIndex::Time => 12,
    };
    if format == Format::Text {
        writeln!(out, "Dumping {}", path.display()).map_err(CliError::Output)?;
    }
    let whole = bytes.len() / entry_len * entry_len;
    if bytes.is_empty() && kind == SparseIndex::Offset && format == Format::Text {
        writeln!(out, "{} is empty.", path.display()).map_err(CliError::Output)?;
    }
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let mut entries = 0u64;
    for (index, entry) in bytes[..whole].chunks_exact(entry_len).enumerate() {
        let u32_at = |at: usize| u32::from_be_bytes([entry[at], entry[at + 1], entry[at + 2], entry[at + 3]]);
        let (relative, line) = match kind {
            SparseIndex::Offset => {
                let (relative, position) = (u32_at(0), u32_at(4));
                let offset = base_offset.saturating_add(i64::from(relative));
                let line = match format {
                    Format::Json => {
                        json!({"offset_index": file_name, "offset": offset, "position": position}).to_string()
                    }
                    Format::Text => format!("offset: {offset} position: {position}"),
                };
                (relative, line)
            }
            SparseIndex::Time => {
                let mut timestamp = [0u8; 8];
                timestamp.copy_from_slice(&entry[..8]);
                let timestamp = i64::from_be_bytes(timestamp);
                let relative = u32_at(8);
                let offset = base_offset.saturating_add(i64::from(relative));
                let line = match format {
                    Format::Json => {
                        json!({"time_index": file_name, "timestamp": timestamp, "offset": offset}).to_string()
                    }
                    Format::Text => format!("timestamp: {timestamp} offset: {offset}"),
                };
                (relative, line)
            }
        };
        if relative == 0 && index > 0 {
            break;
        }
        writeln!(out, "{line}").map_err(CliError::Output)?;
        entries += 1;
    }
    if whole < bytes.len() {
        let message = format!(
            "{} trailing bytes: a torn entry (entries are {entry_len} bytes)",
            bytes.len() - whole
        );
        let line = match format {
            Format::Json => json!({"error": {"category": "truncated", "file": path.display().to_string(),
                                              "file_offset": whole, "message": message}})
            .to_string(),
            Format::Text => format!("error: truncated {} at byte {whole}: {message}", path.display()),
        };
        writeln!(out, "{line}").map_err(CliError::Output)?;
        return Ok(DumpOutcome::Corrupt {
            valid_batches: entries,
        });
    }
    Ok(DumpOutcome::Clean { batches: entries })
}

/// Dumps a segment, a snapshot, a txn index (by file name), or a partition directory (its segments in offset
/// order, then the views asked for). Stops at the first corrupt file.
pub fn dump_path(
    path: &Path,
    format: Format,
    views: Views,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<DumpOutcome, CliError> {
    if !path.is_dir() {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        return match classify(&name) {
            DirEntry::Snapshot { .. } => dump_snapshot(path, format, out),
            DirEntry::Segment { suffix, .. } if suffix == "txnindex" => dump_txn_index(path, format, out),
            DirEntry::Segment { suffix, base_offset } if suffix == "index" => {
                dump_sparse_index(path, base_offset, SparseIndex::Offset, format, out)
            }
            DirEntry::Segment { suffix, base_offset } if suffix == "timeindex" => {
                dump_sparse_index(path, base_offset, SparseIndex::Time, format, out)
            }
            _ => dump_segment(path, format, out, err),
        };
    }
    let segments = files_of(
        path,
        |entry| matches!(entry, DirEntry::Segment { suffix, .. } if suffix == "log"),
    )?;
    if segments.is_empty() {
        return Err(CliError::Usage(format!(
            "{} holds no .log segment",
            path.display()
        )));
    }
    let mut total = 0;
    for segment in &segments {
        match dump_segment(segment, format, out, err)? {
            DumpOutcome::Clean { batches } => total += batches,
            DumpOutcome::Corrupt { valid_batches } => {
                return Ok(DumpOutcome::Corrupt {
                    valid_batches: total + valid_batches,
                })
            }
        }
    }
    if views.snapshots {
        for snapshot in files_of(path, |entry| matches!(entry, DirEntry::Snapshot { .. }))? {
            if let corrupt @ DumpOutcome::Corrupt { .. } = dump_snapshot(&snapshot, format, out)? {
                return Ok(corrupt);
            }
        }
    }
    if views.txn_index {
        let indexes = files_of(
            path,
            |entry| matches!(entry, DirEntry::Segment { suffix, .. } if suffix == "txnindex"),
        )?;
        for index in indexes {
            if let corrupt @ DumpOutcome::Corrupt { .. } = dump_txn_index(&index, format, out)? {
                return Ok(corrupt);
            }
        }
    }
    Ok(DumpOutcome::Clean { batches: total })
}
