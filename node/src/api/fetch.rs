//! Fetch (whole batches from the one holding the offset; read_uncommitted up to the high watermark,
//! read_committed up to the LSO with the aborted transactions; long-poll on `max_wait_ms`/`min_bytes`) and
//! ListOffsets.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::*;
use partition_log::Isolation;
use record_format::{BatchBuffers, RecordBatch};

use kafka_types::KafkaError;

use super::produce::log_error;
use crate::node::Node;

/// The longest a fetch waits, whatever it asks for.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// How many bytes ListOffsets reads at a time when it searches by timestamp.
const SEARCH_READ_BYTES: usize = 1 << 20;

fn isolation(level: i8) -> Isolation {
    if level == 1 {
        Isolation::ReadCommitted
    } else {
        Isolation::ReadUncommitted
    }
}

/// Answers when `min_bytes` are there, a partition's read failed, or `max_wait_ms` passed, re-reading whenever one
/// of its partitions changes (`crate::wakeups`: an append elsewhere does not wake it). As Kafka's
/// `ReplicaManager.fetchMessages` and `DelayedFetch`: an error on any partition (unknown, deleted, offset out of
/// range, …) is answered at once, not held for the wait.
pub async fn fetch(node: &Node, request: FetchRequest, _version: i16) -> FetchResponse {
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)).min(MAX_WAIT);
    let deadline = tokio::time::Instant::now() + wait;
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let (response, bytes) = read_all(node, &request).await;
    if bytes >= min_bytes.max(1) || wait.is_zero() || any_error(&response) {
        return response;
    }
    // Registered before the next read: a change between that read and the wait leaves a permit.
    let partitions = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(|partition| (topic.topic.as_str().to_owned(), partition.partition))
        })
        .collect();
    let registration = node.fetch_wakeups.register(partitions);
    loop {
        let (response, bytes) = read_all(node, &request).await;
        if bytes >= min_bytes.max(1) || any_error(&response) || tokio::time::Instant::now() >= deadline {
            return response;
        }
        if tokio::time::timeout_at(deadline, registration.woken())
            .await
            .is_err()
        {
            return read_all(node, &request).await.0;
        }
    }
}

/// Whether a partition of the answer carries an error.
fn any_error(response: &FetchResponse) -> bool {
    response
        .responses
        .iter()
        .flat_map(|topic| &topic.partitions)
        .any(|partition| partition.error_code != 0)
}

async fn read_all(node: &Node, request: &FetchRequest) -> (FetchResponse, usize) {
    let isolation = isolation(request.isolation_level);
    let mut budget = usize::try_from(request.max_bytes).unwrap_or(0);
    let mut total = 0usize;
    let mut response = FetchResponse::default();
    for topic in &request.topics {
        let mut topic_response = FetchableTopicResponse::default();
        topic_response.topic = topic.topic.clone();
        for partition in &topic.partitions {
            let mut data = PartitionData::default();
            data.partition_index = partition.partition;
            data.high_watermark = -1;
            data.last_stable_offset = -1;
            data.log_start_offset = -1;
            let limit = usize::try_from(partition.partition_max_bytes)
                .unwrap_or(0)
                .min(budget);
            // KIP-74: the first partition with data returns at least one whole batch, whatever the limits.
            let read_bytes = if total == 0 { limit.max(1) } else { limit };
            match node.partition(topic.topic.as_str(), partition.partition).await {
                None => data.error_code = KafkaError::UnknownTopicOrPartition.code(),
                Some(slot) => {
                    let guard = slot.lock().await;
                    match guard.as_ref().map(|replicas| &replicas.leader) {
                        None => {
                            drop(guard);
                            data.error_code = node
                                .missing_log_error(topic.topic.as_str(), partition.partition, &slot)
                                .await
                                .code();
                        }
                        Some(log) => {
                            data.high_watermark = log.high_watermark();
                            data.last_stable_offset = log.last_stable_offset();
                            data.log_start_offset = log.log_start_offset();
                            if read_bytes > 0 {
                                match log.read(partition.fetch_offset, read_bytes, isolation).await {
                                    Ok(result) => {
                                        let records = record_set(&result.batches, &result.buffers);
                                        total += records.len();
                                        budget = budget.saturating_sub(records.len());
                                        data.records = Some(records);
                                        if isolation == Isolation::ReadCommitted {
                                            data.aborted_transactions = Some(
                                                result
                                                    .aborted_transactions
                                                    .iter()
                                                    .map(|aborted| {
                                                        let mut entry = AbortedTransaction::default();
                                                        entry.producer_id = ProducerId(aborted.producer_id);
                                                        entry.first_offset = aborted.first_offset;
                                                        entry
                                                    })
                                                    .collect(),
                                            );
                                        }
                                    }
                                    Err(error) => {
                                        // Kafka answers a refused read without the partition's watermarks.
                                        data.error_code = log_error(&error).code();
                                        data.high_watermark = -1;
                                        data.last_stable_offset = -1;
                                        data.log_start_offset = -1;
                                    }
                                }
                            }
                        }
                    }
                }
            }
            if data.records.is_none() {
                data.records = Some(Bytes::new());
            }
            if isolation == Isolation::ReadUncommitted
                && data.error_code != KafkaError::UnknownTopicOrPartition.code()
            {
                // Null, as Kafka answers a partition it read: only read_committed fetches carry the list (Kafka
                // answers an unknown partition with an empty one whatever the isolation).
                data.aborted_transactions = None;
            }
            topic_response.partitions.push(data);
        }
        response.responses.push(topic_response);
    }
    (response, total)
}

/// The batches as one record set, without a copy when they can be: a single batch as it is, several lying back to
/// back in the buffer they were read into as a view of it (storage-fs reads a range with one `pread`); otherwise
/// they are joined.
fn record_set(batches: &[RecordBatch], buffers: &BatchBuffers) -> Bytes {
    if let Some(range) = buffers.contiguous_bytes(batches) {
        return range;
    }
    match batches {
        [one] => one.as_bytes().clone(),
        many => {
            let mut records = BytesMut::with_capacity(many.iter().map(|batch| batch.size()).sum());
            for batch in many {
                records.extend_from_slice(batch.as_bytes());
            }
            records.freeze()
        }
    }
}

/// ListOffsets: earliest (-2), latest (-1: the high watermark, or the LSO for read_committed), or the first
/// record at or after a timestamp.
///
/// A search by timestamp or for the largest one reads the log through a [`storage::PartitionReader`] *without* the
/// partition's lock: it takes the lock only to note where the log stands, so a long scan delays no produce or fetch
/// of the partition. Should retention or DeleteRecords move the log start past where the scan reads meanwhile, the
/// scan starts again from the new start (what lay below it is gone, and no longer an answer).
pub async fn list_offsets(node: &Node, request: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let isolation = isolation(request.isolation_level);
    let mut response = ListOffsetsResponse::default();
    for topic in request.topics {
        let mut topic_response = ListOffsetsTopicResponse::default();
        topic_response.name = topic.name.clone();
        for partition in topic.partitions {
            let mut answer = ListOffsetsPartitionResponse::default();
            answer.partition_index = partition.partition_index;
            answer.timestamp = -1;
            answer.offset = -1;
            match node
                .partition(topic.name.as_str(), partition.partition_index)
                .await
            {
                None => answer.error_code = KafkaError::UnknownTopicOrPartition.code(),
                Some(slot) => match LogView::take(&slot, isolation).await {
                    None => {
                        answer.error_code = node
                            .missing_log_error(topic.name.as_str(), partition.partition_index, &slot)
                            .await
                            .code()
                    }
                    Some(view) => {
                        let leader_epoch = view.leader_epoch;
                        let search = match partition.timestamp {
                            // Earliest, and (v8+, KIP-1005) earliest *local*: the same without tiered storage.
                            -2 => Ok(Some((view.start, -1))),
                            -4 if version >= 8 => Ok(Some((view.start, -1))),
                            // v9+ (KIP-1005): the latest offset in tiered storage — none here, and Kafka
                            // without remote storage answers -1 and no error.
                            -5 if version >= 9 => Ok(None),
                            -1 => Ok(Some((view.upper, -1))),
                            // v7+ (KIP-734): the record with the largest timestamp.
                            -3 if version >= 7 => {
                                scan_unlocked(&slot, isolation, view, Search::Largest).await
                            }
                            timestamp if timestamp >= 0 => {
                                scan_unlocked(&slot, isolation, view, Search::AtOrAfter(timestamp)).await
                            }
                            // A special newer than the request's version, or a tiered-storage one not served.
                            _ => Err(KafkaError::UnsupportedVersion.code()),
                        };
                        match search {
                            Ok(Some((offset, timestamp))) => {
                                answer.offset = offset;
                                answer.timestamp = timestamp;
                            }
                            Ok(None) => {}
                            // A read that failed because the topic was deleted under the scan.
                            Err(code) if code == KafkaError::KafkaStorageError.code() => {
                                answer.error_code = node
                                    .missing_log_error(topic.name.as_str(), partition.partition_index, &slot)
                                    .await
                                    .code();
                            }
                            Err(code) => answer.error_code = code,
                        }
                        // From v4 (an older response that sets the field does not encode), and only beside an
                        // offset found: Kafka answers -1 with no offset or an error.
                        if version >= 4 && answer.error_code == 0 && answer.offset >= 0 {
                            answer.leader_epoch = leader_epoch;
                        }
                    }
                },
            }
            topic_response.partitions.push(answer);
        }
        response.topics.push(topic_response);
    }
    response
}

/// Where a partition's leader log stood when its lock was last held, and a reader of it that needs no lock.
struct LogView {
    reader: Box<dyn storage::PartitionReader>,
    /// The log start offset.
    start: i64,
    /// The log end offset.
    end: i64,
    /// The bound the isolation level reads up to: the high watermark, or the last stable offset.
    upper: i64,
    leader_epoch: i32,
}

impl LogView {
    /// The view of the leader log in `slot` (`None`: the partition is offline), its lock held only meanwhile.
    async fn take(slot: &crate::PartitionSlot, isolation: Isolation) -> Option<LogView> {
        let guard = slot.lock().await;
        let log = &guard.as_ref()?.leader;
        Some(LogView {
            reader: log.reader(),
            start: log.log_start_offset(),
            end: log.log_end_offset(),
            upper: match isolation {
                Isolation::ReadCommitted => log.last_stable_offset(),
                Isolation::ReadUncommitted => log.high_watermark(),
            },
            leader_epoch: log.config().leader_epoch,
        })
    }
}

/// What a ListOffsets scan looks for.
#[derive(Clone, Copy)]
enum Search {
    /// The first record at or after this timestamp.
    AtOrAfter(i64),
    /// The record with the largest timestamp (the first of equals).
    Largest,
}

/// How many times a scan starts again because the log start moved past it (each time, retention or DeleteRecords
/// removed what it was reading; a fourth is answered with the read's error).
const SCAN_RESTARTS: usize = 3;

/// Runs `search` over the log `view` shows, without the partition's lock; see [`list_offsets`].
async fn scan_unlocked(
    slot: &crate::PartitionSlot,
    isolation: Isolation,
    mut view: LogView,
    search: Search,
) -> Result<Option<(i64, i64)>, i16> {
    let mut restarts = 0;
    loop {
        let found = match search {
            Search::AtOrAfter(timestamp) => at_or_after(&view, timestamp).await,
            Search::Largest => max_timestamp(&view).await,
        };
        let Err(code) = found else { return found };
        // A read below a start that moved meanwhile fails: look again from the new start.
        match LogView::take(slot, isolation).await {
            Some(now) if now.start > view.start && restarts < SCAN_RESTARTS => {
                restarts += 1;
                view = now;
            }
            _ => return Err(code),
        }
    }
}

/// What a scan over the records below an offset is told to do next.
enum Scan {
    /// Read this batch's records (or go on to the next record).
    Go,
    /// Skip this batch.
    Skip,
    /// Stop the scan.
    Stop,
}

/// What a scan shows its visitor: a batch (before its records), or one record's `(offset, timestamp)`.
enum Seen<'a> {
    Batch(&'a RecordBatch),
    Record(i64, i64),
}

/// Visits the data records below `upper` from `from` (at least the view's start), in order: `visit` sees each
/// batch first (and decides whether its records are read), then each record's offset and the timestamp it carries
/// (a LogAppendTime batch's records carry its time), and may stop the scan. Reads [`SEARCH_READ_BYTES`] at a time.
async fn scan_records(view: &LogView, from: i64, mut visit: impl FnMut(Seen<'_>) -> Scan) -> Result<(), i16> {
    let upper = view.upper;
    let mut offset = from.max(view.start);
    while offset < upper {
        let batches = view
            .reader
            .read(offset, SEARCH_READ_BYTES)
            .await
            .map_err(|error| log_error(&error.into()).code())?;
        let Some(last) = batches.last() else {
            break;
        };
        offset = last.next_offset();
        for batch in &batches {
            if batch.is_control() || batch.base_offset() >= upper {
                continue;
            }
            match visit(Seen::Batch(batch)) {
                Scan::Go => {}
                Scan::Skip => continue,
                Scan::Stop => return Ok(()),
            }
            let records = batch.records().map_err(|_| KafkaError::InvalidRecord.code())?;
            for one in records.iter() {
                let one = one.map_err(|_| KafkaError::InvalidRecord.code())?;
                let record_offset = batch.base_offset().saturating_add(i64::from(one.offset_delta));
                if record_offset >= upper {
                    break;
                }
                if let Scan::Stop = visit(Seen::Record(record_offset, one.timestamp)) {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

/// The record below the view's bound with the largest timestamp (the first of equals): `(offset, its timestamp)`.
/// A scan of the log from its start, skipping batches whose newest record is no newer than the best so far.
async fn max_timestamp(view: &LogView) -> Result<Option<(i64, i64)>, i16> {
    let mut best: Option<(i64, i64)> = None;
    scan_records(view, view.start, |seen| match seen {
        Seen::Batch(batch) if best.is_some_and(|(_, held)| batch.max_timestamp() <= held) => Scan::Skip,
        Seen::Batch(_) => Scan::Go,
        Seen::Record(offset, timestamp) => {
            if best.is_none_or(|(_, held)| timestamp > held) {
                best = Some((offset, timestamp));
            }
            Scan::Go
        }
    })
    .await?;
    Ok(best)
}

/// Retention units asked per page when a search skips units.
const SEARCH_UNITS_PER_PAGE: usize = 256;

/// Where a search for `timestamp` starts: the first retention unit (a storage-fs segment, or a batch) whose largest
/// timestamp reaches it — every unit before holds only older records, as Kafka's time index lets it skip
/// segments. `None` when no unit below the view's bound does.
async fn first_unit_reaching(view: &LogView, timestamp: i64) -> Result<Option<i64>, i16> {
    let upper = view.upper;
    let mut from = view.start;
    while from < upper.min(view.end) {
        let units = view
            .reader
            .segments(from, SEARCH_UNITS_PER_PAGE)
            .await
            .map_err(|error| log_error(&error.into()).code())?;
        let Some(last) = units.last() else {
            return Ok(None);
        };
        if let Some(unit) = units.iter().find(|unit| unit.max_timestamp >= timestamp) {
            return Ok((unit.base_offset < upper).then_some(unit.base_offset.max(from)));
        }
        if last.next_offset <= from {
            return Ok(None);
        }
        from = last.next_offset;
    }
    Ok(None)
}

/// The first record below the view's bound with a timestamp at or after `timestamp`: `(offset, its timestamp)`.
async fn at_or_after(view: &LogView, timestamp: i64) -> Result<Option<(i64, i64)>, i16> {
    let Some(from) = first_unit_reaching(view, timestamp).await? else {
        return Ok(None);
    };
    let mut found = None;
    scan_records(view, from, |seen| match seen {
        Seen::Batch(batch) if batch.max_timestamp() < timestamp => Scan::Skip,
        Seen::Batch(_) => Scan::Go,
        Seen::Record(offset, record_timestamp) if record_timestamp >= timestamp => {
            found = Some((offset, record_timestamp));
            Scan::Stop
        }
        Seen::Record(..) => Scan::Go,
    })
    .await?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::{BatchBuilder, BatchIter};

    use std::sync::Arc;
    use tokio::sync::{oneshot, Mutex as AsyncMutex};

    /// A reader that stops at its first read until the test lets it go: the scan is then parked outside the log.
    struct GatedReader {
        inner: Box<dyn storage::PartitionReader>,
        gate: AsyncMutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>,
    }

    #[async_trait::async_trait]
    impl storage::PartitionReader for GatedReader {
        async fn read(&self, from_offset: i64, max_bytes: usize) -> storage::Result<Vec<RecordBatch>> {
            if let Some((entered, release)) = self.gate.lock().await.take() {
                let _ = entered.send(());
                let _ = release.await;
            }
            self.inner.read(from_offset, max_bytes).await
        }
        async fn segments(
            &self,
            from_offset: i64,
            max: usize,
        ) -> storage::Result<Vec<storage::SegmentSummary>> {
            self.inner.segments(from_offset, max).await
        }
        async fn aborted_txns(
            &self,
            from_offset: i64,
            upper_bound: i64,
        ) -> storage::Result<Vec<record_format::AbortedTxn>> {
            self.inner.aborted_txns(from_offset, upper_bound).await
        }
    }

    /// A node over memory storage whose topic `t` holds one record per batch at the timestamps given.
    async fn node_with(timestamps: &[i64]) -> (crate::Node, Arc<crate::PartitionSlot>) {
        let storage = storage_config::StorageConfig::for_backend(
            storage_config::Backend::Memory,
            std::path::Path::new(""),
        );
        let mut config = crate::NodeConfig::new(storage);
        config.topics = vec![("t".to_owned(), 1)];
        let node = crate::Node::open(config, ("localhost".to_owned(), 9092))
            .await
            .unwrap();
        for &timestamp in timestamps {
            let mut builder = BatchBuilder::new();
            builder.add(timestamp, None, Some(b"v"), &[]);
            let mut data = produce_request::PartitionProduceData::default();
            data.records = Some(builder.build().unwrap().into_bytes());
            let mut topic = produce_request::TopicProduceData::default();
            topic.name = TopicName(kafka_protocol::protocol::StrBytes::from_static_str("t"));
            topic.partition_data = vec![data];
            let mut request = ProduceRequest::default();
            request.acks = -1;
            request.timeout_ms = 10_000;
            request.topic_data = vec![topic];
            let answer = node.produce(request, 8).await;
            assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
        }
        let slot = node.partition("t", 0).await.unwrap();
        (node, slot)
    }

    /// The view of `slot`'s log, its reader gated: `(view, entered, release)`.
    async fn gated_view(
        slot: &crate::PartitionSlot,
    ) -> (LogView, oneshot::Receiver<()>, oneshot::Sender<()>) {
        let mut view = LogView::take(slot, Isolation::ReadUncommitted).await.unwrap();
        let (entered_tx, entered) = oneshot::channel();
        let (release, release_rx) = oneshot::channel();
        view.reader = Box::new(GatedReader {
            inner: view.reader,
            gate: AsyncMutex::new(Some((entered_tx, release_rx))),
        });
        (view, entered, release)
    }

    #[tokio::test]
    async fn a_timestamp_search_reads_without_the_partitions_lock() {
        let (_node, slot) = node_with(&[100, 300, 200]).await;
        let (view, entered, release) = gated_view(&slot).await;
        let scanning = {
            let slot = slot.clone();
            tokio::spawn(async move {
                scan_unlocked(&slot, Isolation::ReadUncommitted, view, Search::Largest).await
            })
        };
        entered.await.unwrap();
        // Parked in the middle of its read: the partition is free for a produce or a fetch.
        assert!(slot.try_lock().is_ok(), "the scan holds the partition's lock");
        release.send(()).unwrap();
        assert_eq!(scanning.await.unwrap(), Ok(Some((1, 300))));
    }

    #[tokio::test]
    async fn a_scan_whose_log_start_moved_meanwhile_starts_again_from_the_new_start() {
        let (_node, slot) = node_with(&[100, 300, 200]).await;
        let (view, entered, release) = gated_view(&slot).await;
        let scanning = {
            let slot = slot.clone();
            tokio::spawn(async move {
                scan_unlocked(&slot, Isolation::ReadUncommitted, view, Search::AtOrAfter(50)).await
            })
        };
        entered.await.unwrap();
        // DeleteRecords (or retention) while the scan waits: offsets 0 and 1 are gone.
        let moved = slot
            .lock()
            .await
            .as_mut()
            .unwrap()
            .leader
            .delete_records_before(2)
            .await
            .unwrap();
        assert_eq!(moved, 2);
        release.send(()).unwrap();
        assert_eq!(
            scanning.await.unwrap(),
            Ok(Some((2, 200))),
            "not offset 0, which is gone"
        );
    }

    #[test]
    fn batches_read_back_to_back_are_answered_as_a_view_of_their_buffer_others_are_joined() {
        let built: Vec<RecordBatch> = (0..3)
            .map(|offset| {
                let mut builder = BatchBuilder::new().base_offset(offset);
                builder.add(0, None, Some(b"value"), &[]);
                builder.build().unwrap()
            })
            .collect();
        let stored = Bytes::from(
            built
                .iter()
                .flat_map(|b| b.as_bytes().to_vec())
                .collect::<Vec<u8>>(),
        );
        let read: Vec<RecordBatch> = BatchIter::new(stored.clone())
            .map(|batch| batch.unwrap().batch)
            .collect();
        let buffers = BatchBuffers::new(vec![stored.clone()]);
        let view = record_set(&read, &buffers);
        assert_eq!(view, stored);
        assert_eq!(view.as_ptr(), stored.as_ptr(), "no copy");

        let joined = record_set(&built, &buffers);
        assert_eq!(joined, stored, "the same bytes, joined");
        assert_ne!(joined.as_ptr(), stored.as_ptr());
        assert_eq!(record_set(&read, &BatchBuffers::default()), stored);
        assert!(record_set(&[], &buffers).is_empty());
    }
}
