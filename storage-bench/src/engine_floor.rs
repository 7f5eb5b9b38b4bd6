//! The database engines' own floor under small appends (`append-1k-engine-floor`): the same 1 KiB batches put
//! straight into sled or RocksDB with the engine's API and nothing of mirrorlog's around it — no partition layer,
//! no poison checks, no offsets kept — written as the key-value backends write them at best:
//!
//! - **sled**: one `insert` per batch (what a held append becomes at best), and `Db::flush` every eighth of a
//!   segment, the bound without which sled 0.34.7 deadlocks (ADR 0022) — sled's own minimum, without the
//!   `fdatasync` the backend adds to a requested sync;
//! - **RocksDB**: one `WriteBatch` per 64 KiB (the write-behind bound, ADR 0042) or, under mirroring
//!   (`mirror-copy-engine-floor`), per MiB (a mirror's round), write-ahead log on, no sync, in a column family
//!   with the backend's table options.
//!
//! It says how far the backends' figures could rise if mirrorlog's own code cost nothing (the mirroring floor does
//! not even read a source).

use std::path::Path;
use std::time::{Duration, Instant};

use record_format::RecordBatch;

/// The key of a batch: its base offset, big-endian (the order the backends keep).
fn key(batch: &RecordBatch) -> [u8; 8] {
    batch.base_offset().to_be_bytes()
}

/// Raw sled: see the module docs (one insert per batch whatever `_write_bytes`). `None` when sled cannot open
/// `dir`.
pub fn sled(dir: &Path, batches: &[RecordBatch], _write_bytes: usize) -> Option<Duration> {
    let segment_size = storage_sled::DEFAULT_SEGMENT_SIZE;
    let db = sled::Config::new()
        .path(dir)
        .cache_capacity(64 << 20)
        .segment_size(segment_size)
        .flush_every_ms(None)
        .open()
        .ok()?;
    let bound = segment_size / storage_sled::UNFLUSHED_SEGMENT_FRACTION as usize;
    let started = Instant::now();
    let mut unflushed = 0;
    for batch in batches {
        db.insert(key(batch), batch.as_bytes().as_ref()).ok()?;
        unflushed += 8 + batch.size();
        if unflushed >= bound {
            db.flush().ok()?;
            unflushed = 0;
        }
    }
    db.flush().ok()?;
    Some(started.elapsed())
}

/// Raw RocksDB, a write per `write_bytes` of batches: see the module docs. `None` when RocksDB cannot open `dir`.
#[cfg(feature = "rocks")]
pub fn rocks(dir: &Path, batches: &[RecordBatch], write_bytes: usize) -> Option<Duration> {
    use rocksdb::{BlockBasedOptions, ColumnFamilyDescriptor, DBCompressionType, Options, WriteBatch, DB};

    let mut options = Options::default();
    options.create_if_missing(true);
    options.create_missing_column_families(true);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    options.increase_parallelism(i32::try_from(cores).unwrap_or(2));
    let mut family = Options::default();
    family.set_compression_type(DBCompressionType::None);
    let mut table = BlockBasedOptions::default();
    table.set_block_size(64 * 1024);
    family.set_block_based_table_factory(&table);
    let db = DB::open_cf_descriptors(&options, dir, [ColumnFamilyDescriptor::new("batches", family)]).ok()?;
    let batches_family = db.cf_handle("batches")?;
    let started = Instant::now();
    let mut write = WriteBatch::default();
    let mut held = 0;
    for batch in batches {
        write.put_cf(&batches_family, key(batch), batch.as_bytes());
        held += batch.size();
        if held >= write_bytes {
            db.write(std::mem::take(&mut write)).ok()?;
            held = 0;
        }
    }
    if held > 0 {
        db.write(write).ok()?;
    }
    Some(started.elapsed())
}

/// Raw RocksDB is not in this build.
#[cfg(not(feature = "rocks"))]
pub fn rocks(_dir: &Path, _batches: &[RecordBatch], _write_bytes: usize) -> Option<Duration> {
    None
}
