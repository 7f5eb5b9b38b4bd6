//! `mirrorlog dump`: print the batches of a segment file, as JSON lines or as `kafka-dump-log.sh` prints them.
//!
//! JSON mode writes one object per batch with the field names of the shared test-vector manifest, and on a
//! corrupt batch one `{"error": {"category", "file_offset", "message"}}` object after the valid batches (the
//! caller then exits with status 2). The text mode follows `kafka-dump-log.sh --print-data-log`, with control
//! records decoded (`endTxnMarker: COMMIT coordinatorEpoch: 17`,
//! `MIRROR_PID_RESET source_cluster_id=… writer_cluster_id=…`).

use std::io::Write;
use std::path::Path;

use record_format::{
    ControlRecord, DecodeError, Record, RecordBatch, SegmentBatch, SegmentError, SegmentReader,
};
use serde::Serialize;
use serde_json::{json, Value};

use crate::error::CliError;

/// Unknown tagged fields of a barrier listed in `value_fields` (the count is always given in full).
const MAX_LISTED_TAGGED_FIELDS: usize = 1_000;

/// Output format of `dump`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object per line.
    Json,
    /// `kafka-dump-log.sh`-like text.
    Text,
}

#[derive(Serialize)]
struct AttributesJson {
    raw: i16,
    compression: &'static str,
    compression_id: u8,
    timestamp_type: &'static str,
    is_transactional: bool,
    is_control: bool,
}

#[derive(Serialize)]
struct RecordsSectionJson {
    stored_size: usize,
    uncompressed_size: usize,
}

/// Bytes serialised as lowercase hex, written straight into the output (no string of twice their size is
/// built: a record of a 64 MiB value costs nothing extra to print).
#[derive(Clone, Copy)]
struct Hex<'a>(&'a [u8]);

impl std::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut buffer = [0u8; 128];
        for chunk in self.0.chunks(buffer.len() / 2) {
            for (index, byte) in chunk.iter().enumerate() {
                buffer[2 * index] = DIGITS[usize::from(byte >> 4)];
                buffer[2 * index + 1] = DIGITS[usize::from(byte & 0x0f)];
            }
            // Hex digits are ASCII.
            f.write_str(std::str::from_utf8(&buffer[..2 * chunk.len()]).map_err(|_| std::fmt::Error)?)?;
        }
        Ok(())
    }
}

impl Serialize for Hex<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[derive(Serialize)]
struct HeaderJson<'a> {
    key: String,
    key_hex: Hex<'a>,
    value: Option<Hex<'a>>,
}

#[derive(Serialize)]
struct RecordJson<'a> {
    offset_delta: i32,
    offset: i64,
    timestamp_delta: i64,
    timestamp: i64,
    attributes: i8,
    length: i32,
    key_len: i64,
    key: Option<Hex<'a>>,
    value_len: i64,
    value: Option<Hex<'a>>,
    headers: Vec<HeaderJson<'a>>,
}

#[derive(Serialize)]
struct ControlJson<'a> {
    key_version: i16,
    #[serde(rename = "type")]
    control_type: i16,
    type_name: &'static str,
    key_hex: Option<Hex<'a>>,
    value_hex: Option<Hex<'a>>,
    value_fields: Value,
    record_hex: Hex<'a>,
}

#[derive(Serialize)]
struct BatchJson<'r> {
    file_offset: u64,
    size: usize,
    base_offset: i64,
    batch_length: i32,
    partition_leader_epoch: i32,
    magic: i8,
    crc: u32,
    crc_hex: String,
    attributes: AttributesJson,
    last_offset_delta: i32,
    last_offset: i64,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    last_sequence: i32,
    record_count: i32,
    records_section: RecordsSectionJson,
    records: RecordsJson<'r>,
    #[serde(skip_serializing_if = "Option::is_none")]
    control: Option<ControlJson<'r>>,
}

/// A batch whose records were all checked (first pass): what the second pass needs to stream it.
struct CheckedBatch<'a> {
    found: &'a SegmentBatch,
    records: &'a record_format::Records<'a>,
    uncompressed_size: usize,
}

/// The records of a checked batch, serialised one at a time as they are decoded again: no per-batch structure
/// grows with the record count (a batch of millions of tiny records costs what one record costs).
struct RecordsJson<'r> {
    records: &'r record_format::Records<'r>,
    is_control: bool,
}

impl Serialize for RecordsJson<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error as _, SerializeSeq};
        let mut seq = serializer.serialize_seq(None)?;
        let mut failed = None;
        record_format::visit_records(self.records, self.is_control, |record, _| {
            if failed.is_none() {
                failed = seq.serialize_element(&record_json(&record)).err();
            }
        })
        .map_err(S::Error::custom)?;
        if let Some(error) = failed {
            return Err(error);
        }
        seq.end()
    }
}

/// First pass: every record (and control record) decodes; returns the batch's control JSON (from its first
/// control record) for the second pass.
fn check<'a>(
    found: &'a SegmentBatch,
    records: &'a record_format::Records<'a>,
) -> Result<(CheckedBatch<'a>, Option<ControlJson<'a>>), DecodeError> {
    let mut control = None;
    record_format::visit_records(records, found.batch.is_control(), |record, decoded| {
        if let (None, Some((key, value))) = (&control, decoded) {
            control = Some(ControlJson {
                key_version: key.version,
                control_type: key.control_type,
                type_name: value.type_name(),
                key_hex: record.key.map(Hex),
                value_hex: record.value.map(Hex),
                value_fields: control_value_fields(&value),
                record_hex: Hex(record.encoded),
            });
        }
    })?;
    let checked = CheckedBatch {
        found,
        records,
        uncompressed_size: records.section().len(),
    };
    Ok((checked, control))
}

fn length_or_null(bytes: Option<&[u8]>) -> i64 {
    bytes.map_or(-1, |bytes| bytes.len() as i64)
}

/// The decoded value fields of a control record, by type.
fn control_value_fields(control: &ControlRecord) -> Value {
    match control {
        ControlRecord::Abort(marker) | ControlRecord::Commit(marker) => json!({
            "version": marker.version,
            "coordinator_epoch": marker.coordinator_epoch,
        }),
        ControlRecord::MirrorPidReset(barrier) => {
            let mut fields = json!({
                "version": barrier.version,
                "source_cluster_id": barrier.source_cluster_id,
                "tagged_field_count": barrier.tagged_field_count(),
            });
            if let Some(writer) = &barrier.writer_cluster_id {
                fields["writer_cluster_id"] = json!(writer);
            }
            if !barrier.unknown_tagged_fields.is_empty() {
                // At most the first few are listed: a hostile value may declare millions.
                fields["unknown_tagged_fields"] = barrier
                    .unknown_tagged_fields
                    .iter()
                    .take(MAX_LISTED_TAGGED_FIELDS)
                    .map(|(tag, data)| json!({"tag": tag, "data_hex": Hex(data)}))
                    .collect();
                if barrier.unknown_tagged_fields.len() > MAX_LISTED_TAGGED_FIELDS {
                    fields["unknown_tagged_fields_listed"] = json!(MAX_LISTED_TAGGED_FIELDS);
                }
            }
            fields
        }
        ControlRecord::SnapshotHeader {
            value,
            last_contained_log_timestamp,
        } => json!({
            "version": value.version,
            "last_contained_log_timestamp": last_contained_log_timestamp,
        }),
        ControlRecord::KraftVersion { value, kraft_version } => json!({
            "version": value.version,
            "kraft_version": kraft_version,
        }),
        ControlRecord::LeaderChange(value)
        | ControlRecord::SnapshotFooter(value)
        | ControlRecord::KraftVoters(value) => json!({ "version": value.version }),
        _ => json!({}),
    }
}

fn record_json<'a>(record: &Record<'a>) -> RecordJson<'a> {
    RecordJson {
        offset_delta: record.offset_delta,
        offset: record.offset,
        timestamp_delta: record.timestamp_delta,
        timestamp: record.timestamp,
        attributes: record.attributes,
        length: record.length,
        key_len: length_or_null(record.key),
        key: record.key.map(Hex),
        value_len: length_or_null(record.value),
        value: record.value.map(Hex),
        headers: record
            .headers
            .iter()
            .map(|header| HeaderJson {
                key: String::from_utf8_lossy(header.key).into_owned(),
                key_hex: Hex(header.key),
                value: header.value.map(Hex),
            })
            .collect(),
    }
}

fn batch_json<'r>(
    checked: &'r CheckedBatch<'r>,
    control: Option<ControlJson<'r>>,
) -> Result<BatchJson<'r>, DecodeError> {
    let batch: &RecordBatch = &checked.found.batch;
    let attributes = batch.attributes();
    Ok(BatchJson {
        file_offset: checked.found.file_offset,
        size: batch.size(),
        base_offset: batch.base_offset(),
        batch_length: batch.batch_length(),
        partition_leader_epoch: batch.partition_leader_epoch(),
        magic: batch.magic(),
        crc: batch.crc(),
        crc_hex: format!("{:08x}", batch.crc()),
        attributes: AttributesJson {
            raw: attributes.0,
            compression: attributes.compression()?.name(),
            compression_id: attributes.compression_id(),
            timestamp_type: attributes.timestamp_type().name(),
            is_transactional: attributes.is_transactional(),
            is_control: attributes.is_control(),
        },
        last_offset_delta: batch.last_offset_delta(),
        last_offset: batch.last_offset(),
        base_timestamp: batch.base_timestamp(),
        max_timestamp: batch.max_timestamp(),
        producer_id: batch.producer_id(),
        producer_epoch: batch.producer_epoch(),
        base_sequence: batch.base_sequence(),
        last_sequence: batch.last_sequence(),
        record_count: batch.record_count(),
        records_section: RecordsSectionJson {
            stored_size: batch.records_section().len(),
            uncompressed_size: checked.uncompressed_size,
        },
        records: RecordsJson {
            records: checked.records,
            is_control: batch.is_control(),
        },
        control,
    })
}

fn control_text(control: &ControlRecord) -> String {
    match control {
        ControlRecord::Abort(marker) | ControlRecord::Commit(marker) => format!(
            "endTxnMarker: {} coordinatorEpoch: {}",
            control.type_name(),
            marker.coordinator_epoch
        ),
        ControlRecord::MirrorPidReset(barrier) => format!(
            "MIRROR_PID_RESET source_cluster_id={} writer_cluster_id={}",
            barrier.source_cluster_id,
            barrier.writer_cluster_id.as_deref().unwrap_or("none")
        ),
        other => format!("{}: {}", other.type_name(), control_value_fields(other)),
    }
}

/// Writes the `kafka-dump-log.sh` text of one checked batch: its header line, then one line per record as each
/// is decoded again (nothing accumulates per record).
fn write_batch_text(
    checked: &CheckedBatch<'_>,
    out: &mut impl Write,
) -> Result<Result<(), DecodeError>, CliError> {
    let batch = &checked.found.batch;
    let attributes = batch.attributes();
    let compression = match attributes.compression() {
        Ok(compression) => compression.name(),
        Err(error) => return Ok(Err(error)),
    };
    let timestamp_type = attributes.timestamp_type().name();
    let delete_horizon = if attributes.has_delete_horizon() {
        format!("OptionalLong[{}]", batch.base_timestamp())
    } else {
        "OptionalLong.empty".to_owned()
    };
    writeln!(
        out,
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} \
         producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} deleteHorizonMs: {} \
         position: {} {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: true",
        batch.base_offset(),
        batch.last_offset(),
        batch.record_count(),
        batch.base_sequence(),
        batch.last_sequence(),
        batch.producer_id(),
        batch.producer_epoch(),
        batch.partition_leader_epoch(),
        batch.is_transactional(),
        batch.is_control(),
        delete_horizon,
        checked.found.file_offset,
        timestamp_type,
        batch.max_timestamp(),
        batch.size(),
        batch.magic(),
        compression,
        batch.crc(),
    )
    .map_err(CliError::Output)?;
    let mut failed = None;
    let visited = record_format::visit_records(checked.records, batch.is_control(), |record, control| {
        if failed.is_some() {
            return;
        }
        let header_keys: Vec<String> = record
            .headers
            .iter()
            .map(|header| String::from_utf8_lossy(header.key).into_owned())
            .collect();
        // As DumpLogSegments: a null key or value prints no field (keySize/valueSize -1 say it is null).
        let payload = match control {
            Some((_, control)) => format!(" {}", control_text(&control)),
            None => {
                let key = record
                    .key
                    .map(|key| format!(" key: {}", String::from_utf8_lossy(key)));
                let value = record
                    .value
                    .map(|value| format!(" payload: {}", String::from_utf8_lossy(value)));
                format!("{}{}", key.unwrap_or_default(), value.unwrap_or_default())
            }
        };
        failed = writeln!(
            out,
            "| offset: {} {}: {} keySize: {} valueSize: {} sequence: {} headerKeys: [{}]{payload}",
            record.offset,
            timestamp_type,
            record.timestamp,
            length_or_null(record.key),
            length_or_null(record.value),
            record.sequence,
            header_keys.join(","),
        )
        .err();
    });
    if let Some(error) = failed {
        return Err(CliError::Output(error));
    }
    Ok(visited)
}

/// How a dump ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpOutcome {
    /// Every batch decoded.
    Clean {
        /// Batches printed.
        batches: u64,
    },
    /// A corrupt batch stopped the dump after `valid_batches`.
    Corrupt {
        /// Batches printed before the corrupt one.
        valid_batches: u64,
    },
}

fn error_json(category: &str, file_offset: u64, message: &str) -> Value {
    json!({"error": {"category": category, "file_offset": file_offset, "message": message}})
}

fn write_line(out: &mut impl Write, line: &str) -> Result<(), CliError> {
    writeln!(out, "{line}").map_err(CliError::Output)
}

/// Dumps one segment file to `out` (errors about the input also go to `out` in JSON mode, to `err` in text
/// mode). Directories and other Kafka files go through [`crate::dump_dir::dump_path`].
pub fn dump_segment(
    path: &Path,
    format: Format,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<DumpOutcome, CliError> {
    crate::error::require_regular_file(path, None)?;
    let reader = SegmentReader::open(path).map_err(|source| CliError::Open {
        path: path.to_owned(),
        source,
    })?;
    if format == Format::Text {
        write_line(out, &format!("Dumping {}", path.display()))?;
        let start = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .and_then(|stem| stem.parse::<i64>().ok())
            .unwrap_or(0);
        write_line(out, &format!("Log starting offset: {start}"))?;
    }
    let mut batches = 0u64;
    for found in reader {
        let failure = match found {
            Ok(found) => {
                // Two passes over the records: the first checks them all (so a corrupt batch prints nothing of
                // itself, only the error after the valid batches), the second writes them as they decode. A
                // failed write (a full disk) is an error, never a silent success; a closed pipe is turned into
                // a clean exit by `main`.
                let written = match found.batch.records() {
                    Err(error) => Err(error),
                    Ok(records) => match check(&found, &records) {
                        Err(error) => Err(error),
                        Ok((checked, control)) => match format {
                            Format::Json => match batch_json(&checked, control) {
                                Err(error) => Err(error),
                                Ok(json) => {
                                    serde_json::to_writer(&mut *out, &json)
                                        .map_err(|error| CliError::Output(std::io::Error::other(error)))?;
                                    out.write_all(b"\n").map_err(CliError::Output)?;
                                    Ok(())
                                }
                            },
                            Format::Text => write_batch_text(&checked, out)?,
                        },
                    },
                };
                match written {
                    Ok(()) => {
                        batches += 1;
                        continue;
                    }
                    Err(error) => (error.category().as_str(), found.file_offset, error.to_string()),
                }
            }
            Err(SegmentError::Corrupt {
                file_offset, error, ..
            }) => (error.category().as_str(), file_offset, error.to_string()),
            Err(SegmentError::Io { file_offset, source }) => {
                return Err(CliError::Read {
                    path: path.to_owned(),
                    file_offset,
                    source,
                })
            }
            Err(other) => return Err(CliError::Usage(other.to_string())),
        };
        let (category, file_offset, message) = failure;
        match format {
            Format::Json => write_line(out, &error_json(category, file_offset, &message).to_string())?,
            Format::Text => {
                out.flush().map_err(CliError::Output)?;
                let _ = writeln!(err, "error: {category} at file offset {file_offset}: {message}");
            }
        }
        out.flush().map_err(CliError::Output)?;
        return Ok(DumpOutcome::Corrupt {
            valid_batches: batches,
        });
    }
    out.flush().map_err(CliError::Output)?;
    Ok(DumpOutcome::Clean { batches })
}
