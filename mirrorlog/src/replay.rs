//! `mirrorlog replay`: rebuild producer state from a segment (or a partition directory's segments) with
//! REPLICATION origin, as Kafka's log recovery does, and print it.

use std::io::Write;
use std::path::{Path, PathBuf};

use producer_state::{BarrierScope, ProducerStateManager, PsmConfig, Replayed};
use record_format::{SegmentError, SegmentReader};

use crate::error::CliError;

/// The segment files to replay: the file itself, or a directory's `*.log` files in name (= offset) order.
fn segment_files(path: &Path) -> Result<Vec<PathBuf>, CliError> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let entries = std::fs::read_dir(path).map_err(|source| CliError::Open {
        path: path.to_owned(),
        source,
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| CliError::Open {
            path: path.to_owned(),
            source,
        })?;
        let file = entry.path();
        if file.extension().is_some_and(|ext| ext == "log") && file.is_file() {
            files.push(file);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(CliError::Usage(format!(
            "{} holds no .log segment",
            path.display()
        )));
    }
    Ok(files)
}

/// Where reading stopped early: the file and the reader's error.
pub struct Stopped {
    /// The segment file.
    pub file: PathBuf,
    /// Why.
    pub error: String,
}

/// Bytes of batches replayed together (one producer-state plan per chunk); memory stays bounded by this plus
/// one batch.
const REPLAY_CHUNK_BYTES: usize = 1 << 20;

/// Replays the segments in order, streaming chunk by chunk. Stops at the first corrupt batch (returning where)
/// after replaying the valid prefix.
fn replay_files(files: &[PathBuf], replayed: &mut Replayed) -> Result<Option<Stopped>, CliError> {
    let mut chunk = Vec::new();
    let mut chunk_bytes = 0;
    let flush = |chunk: &mut Vec<_>, chunk_bytes: &mut usize, replayed: &mut Replayed| {
        let outcome = replayed
            .push(chunk)
            .map_err(|error| CliError::Replay(error.to_string()));
        chunk.clear();
        *chunk_bytes = 0;
        outcome
    };
    for file in files {
        crate::error::require_regular_file(file, None)?;
        let reader = SegmentReader::open(file).map_err(|source| CliError::Open {
            path: file.clone(),
            source,
        })?;
        for found in reader {
            match found {
                Ok(found) => {
                    // The verdict `dump` gives: a batch whose records do not decode stops the replay as corrupt
                    // input, after the batches before it.
                    if let Err(error) = record_format::check_records(&found.batch) {
                        flush(&mut chunk, &mut chunk_bytes, replayed)?;
                        return Ok(Some(Stopped {
                            file: file.clone(),
                            error: format!(
                                "{} at file offset {}: {error}",
                                error.category().as_str(),
                                found.file_offset
                            ),
                        }));
                    }
                    chunk_bytes += found.batch.size();
                    chunk.push(found.batch);
                    if chunk_bytes >= REPLAY_CHUNK_BYTES {
                        flush(&mut chunk, &mut chunk_bytes, replayed)?;
                    }
                }
                Err(SegmentError::Io { file_offset, source }) => {
                    return Err(CliError::Read {
                        path: file.clone(),
                        file_offset,
                        source,
                    })
                }
                Err(error) => {
                    flush(&mut chunk, &mut chunk_bytes, replayed)?;
                    // Named by the category `dump` prints for the same batch.
                    let error = match error.category() {
                        Some(category) => format!("{}: {error}", category.as_str()),
                        None => error.to_string(),
                    };
                    return Ok(Some(Stopped {
                        file: file.clone(),
                        error,
                    }));
                }
            }
        }
    }
    flush(&mut chunk, &mut chunk_bytes, replayed)?;
    Ok(None)
}

fn write_text(out: &mut impl Write, replayed: &Replayed) -> std::io::Result<()> {
    let batches = replayed.batches;
    let summary = replayed.summary();
    writeln!(
        out,
        "replayed {batches} batches: log end offset {}, barriers applied {}, barriers kept {}",
        summary.log_end_offset, replayed.barriers_applied, replayed.barriers_kept
    )?;
    for (producer_id, p) in &summary.producers {
        let txn = p
            .ongoing_txn_first_offset
            .map_or_else(|| "none".to_owned(), |offset| offset.to_string());
        writeln!(
            out,
            "producer {producer_id}: epoch={} last_seq={} last_offset={} coordinator_epoch={} txn_first_offset={txn}",
            p.producer_epoch, p.last_sequence, p.last_data_offset, p.coordinator_epoch
        )?;
    }
    for (producer_id, first_offset) in &summary.ongoing_transactions {
        writeln!(
            out,
            "ongoing transaction: producer {producer_id} from offset {first_offset}"
        )?;
    }
    for aborted in &summary.aborted_transactions {
        writeln!(
            out,
            "aborted transaction: producer {} offsets {}..={} (lso {})",
            aborted.producer_id, aborted.first_offset, aborted.last_offset, aborted.last_stable_offset
        )?;
    }
    writeln!(out, "last stable offset: {}", summary.last_stable_offset)
}

/// Options of `replay`.
pub struct ReplayOptions {
    /// This cluster's id (whose barriers reset under the writer scope).
    pub cluster_id: Option<String>,
    /// Which barriers reset.
    pub barrier_scope: BarrierScope,
    /// JSON output.
    pub json: bool,
}

/// Replays and prints; returns where reading stopped early, if it did.
pub fn replay_path(
    path: &Path,
    options: ReplayOptions,
    out: &mut impl Write,
) -> Result<Option<Stopped>, CliError> {
    let files = segment_files(path)?;
    let manager = ProducerStateManager::new(PsmConfig {
        cluster_id: options.cluster_id,
        barrier_scope: options.barrier_scope,
        ..PsmConfig::default()
    });
    let mut replayed = Replayed::start(manager);
    let stopped = replay_files(&files, &mut replayed)?;
    if options.json {
        writeln!(out, "{}", replayed.summary().to_json()).map_err(CliError::Output)?;
    } else {
        write_text(out, &replayed).map_err(CliError::Output)?;
    }
    Ok(stopped)
}
