//! [`KafkaFetcher`]: one partition of a Kafka-compatible cluster as a mirror's source.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    fetch_request, ApiKey, BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use mirror_fsm::{DetachedFetch, FetchError, FetchResponse as Fetched, Fetcher};
use record_format::{BatchBuffers, BatchIter, ErrorCategory, RecordBatch, SegmentError};
use tokio::sync::Mutex;

use crate::connection::KafkaConnection;
use crate::error::LinkError;

/// Fetch versions the link speaks: 4 (record format v2, isolation levels) to 11 (the last without topic ids).
const FETCH_VERSIONS: (i16, i16) = (4, 11);
/// Metadata versions: 2 (the cluster id) to 8.
const METADATA_VERSIONS: (i16, i16) = (2, 8);
/// ListOffsets versions: 1 (offsets, not lists) to 5.
const LIST_OFFSETS_VERSIONS: (i16, i16) = (1, 5);
/// `read_committed`: a fetch stops at the last stable offset.
const READ_COMMITTED: i8 = 1;

/// How a [`KafkaFetcher`] talks to its source.
#[derive(Debug, Clone)]
pub struct FetcherConfig {
    /// The source's bootstrap address (`host:port`).
    pub bootstrap: String,
    /// The client id the source sees.
    pub client_id: String,
    /// Every call's limit.
    pub timeout: Duration,
    /// How long a fetch waits on the source for data (`max.wait.ms`); short, since the driver holds the
    /// partition while it waits.
    pub max_wait: Duration,
    /// The largest batch accepted beyond a fetch's `max_bytes` (Kafka returns at least one whole batch,
    /// whatever the limit): a response is refused past `max_bytes + max_batch_bytes`.
    pub max_batch_bytes: usize,
}

impl FetcherConfig {
    /// Defaults for `bootstrap`: 10 s calls, 50 ms fetch waits, batches up to 16 MiB.
    pub fn new(bootstrap: impl Into<String>) -> Self {
        FetcherConfig {
            bootstrap: bootstrap.into(),
            client_id: "mirrorlog-mirror".to_owned(),
            timeout: Duration::from_secs(10),
            max_wait: Duration::from_millis(50),
            max_batch_bytes: 16 << 20,
        }
    }
}

/// A session with the partition's leader: the connection, the source's cluster id, the versions agreed.
#[derive(Debug)]
struct Session {
    connection: KafkaConnection,
    cluster_id: String,
    fetch_version: i16,
    list_offsets_version: i16,
}

/// One source partition over the Kafka protocol; see the crate docs. Its session is shared with the fetches it
/// hands to another thread ([`Fetcher::detached_fetch`]: a catch-up fetches range *n+1* while it writes *n*); one
/// call at a time uses the connection.
#[derive(Debug, Clone)]
pub struct KafkaFetcher {
    source: Arc<Mutex<Source>>,
    /// The source's last stable offset in its latest fetch answer (−1 before the first).
    last_stable: Arc<AtomicI64>,
}

/// The partition, the config and the session a [`KafkaFetcher`]'s calls share.
#[derive(Debug)]
struct Source {
    config: FetcherConfig,
    topic: String,
    partition: i32,
    session: Option<Session>,
    last_stable: Arc<AtomicI64>,
}

impl KafkaFetcher {
    /// A fetcher of `topic`/`partition` at the source `config` names; it connects at its first call.
    pub fn new(config: FetcherConfig, topic: impl Into<String>, partition: i32) -> Self {
        let last_stable = Arc::new(AtomicI64::new(-1));
        KafkaFetcher {
            source: Arc::new(Mutex::new(Source {
                config,
                topic: topic.into(),
                partition,
                session: None,
                last_stable: Arc::clone(&last_stable),
            })),
            last_stable,
        }
    }

    /// The source cluster's id, once a session is open (`None` too while a call holds the session).
    pub fn source_cluster_id(&self) -> Option<String> {
        let source = self.source.try_lock().ok()?;
        source.session.as_ref().map(|session| session.cluster_id.clone())
    }
}

impl Source {
    fn response_bound(&self, max_bytes: usize) -> usize {
        max_bytes
            .saturating_add(self.config.max_batch_bytes)
            .saturating_add(1 << 16)
    }

    /// Opens a session: the bootstrap broker's metadata (cluster id, the partition's leader), then a connection
    /// to the leader when it is another broker.
    async fn open_session(&mut self, max_bytes: usize) -> Result<&mut Session, LinkError> {
        if self.session.is_none() {
            let bound = self.response_bound(max_bytes);
            let mut connection = KafkaConnection::connect(
                &self.config.bootstrap,
                &self.config.client_id,
                self.config.timeout,
                bound,
            )
            .await?;
            let version = connection.version(ApiKey::Metadata, METADATA_VERSIONS)?;
            let mut request = MetadataRequest::default();
            let mut topic = MetadataRequestTopic::default();
            topic.name = Some(TopicName(StrBytes::from_string(self.topic.clone())));
            request.topics = Some(vec![topic]);
            // A mirror never creates a topic on its source.
            request.allow_auto_topic_creation = false;
            let metadata: MetadataResponse = connection.call(ApiKey::Metadata, version, &request).await?;
            let what = format!("Metadata of {}-{}", self.topic, self.partition);
            let cluster_id = metadata
                .cluster_id
                .as_ref()
                .map(|id| id.as_str().to_owned())
                .ok_or_else(|| LinkError::Malformed {
                    address: self.config.bootstrap.clone(),
                    what: what.clone(),
                    reason: "no cluster id".to_owned(),
                })?;
            let topic = metadata
                .topics
                .iter()
                .find(|topic| {
                    topic
                        .name
                        .as_ref()
                        .is_some_and(|name| name.as_str() == self.topic)
                })
                .ok_or_else(|| LinkError::Malformed {
                    address: self.config.bootstrap.clone(),
                    what: what.clone(),
                    reason: "the topic asked for is missing".to_owned(),
                })?;
            if topic.error_code != 0 {
                return Err(LinkError::Kafka {
                    what,
                    code: topic.error_code,
                    detail: String::new(),
                });
            }
            let partition = topic
                .partitions
                .iter()
                .find(|partition| partition.partition_index == self.partition)
                .ok_or(LinkError::Kafka {
                    what: what.clone(),
                    code: 3,
                    detail: " (no such partition)".to_owned(),
                })?;
            if partition.error_code != 0 {
                return Err(LinkError::Kafka {
                    what,
                    code: partition.error_code,
                    detail: String::new(),
                });
            }
            let leader = metadata
                .brokers
                .iter()
                .find(|broker| broker.node_id == partition.leader_id)
                .map(|broker| format!("{}:{}", broker.host.as_str(), broker.port));
            if let Some(leader) = leader.filter(|leader| *leader != self.config.bootstrap) {
                connection =
                    KafkaConnection::connect(&leader, &self.config.client_id, self.config.timeout, bound)
                        .await?;
            }
            let fetch_version = connection.version(ApiKey::Fetch, FETCH_VERSIONS)?;
            let list_offsets_version = connection.version(ApiKey::ListOffsets, LIST_OFFSETS_VERSIONS)?;
            self.session = Some(Session {
                connection,
                cluster_id,
                fetch_version,
                list_offsets_version,
            });
        }
        self.session
            .as_mut()
            .ok_or_else(|| LinkError::Refused("no session".to_owned()))
    }

    /// Batches from `from_offset` up to the source's LSO, at most about `max_bytes`.
    async fn fetch_batches(&mut self, from_offset: i64, max_bytes: usize) -> Result<Fetched, LinkError> {
        let (topic, partition, max_wait) = (self.topic.clone(), self.partition, self.config.max_wait);
        let last_stable = Arc::clone(&self.last_stable);
        let session = self.open_session(max_bytes).await?;
        let limit = i32::try_from(max_bytes).unwrap_or(i32::MAX);
        let mut request = FetchRequest::default();
        request.replica_id = BrokerId(-1);
        request.max_wait_ms = i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX);
        request.min_bytes = 1;
        request.max_bytes = limit;
        request.isolation_level = READ_COMMITTED;
        // Sessionless: every fetch is a full fetch (KIP-227's final epoch).
        request.session_id = 0;
        request.session_epoch = -1;
        let mut wanted = fetch_request::FetchPartition::default();
        wanted.partition = partition;
        wanted.fetch_offset = from_offset;
        wanted.partition_max_bytes = limit;
        wanted.log_start_offset = -1;
        wanted.current_leader_epoch = -1;
        let mut fetch_topic = fetch_request::FetchTopic::default();
        fetch_topic.topic = TopicName(StrBytes::from_string(topic.clone()));
        fetch_topic.partitions = vec![wanted];
        request.topics = vec![fetch_topic];
        let version = session.fetch_version;
        let response: FetchResponse = session.connection.call(ApiKey::Fetch, version, &request).await?;
        let what = format!("Fetch of {topic}-{partition} at {from_offset}");
        if response.error_code != 0 {
            return Err(LinkError::Kafka {
                what,
                code: response.error_code,
                detail: String::new(),
            });
        }
        let data = response
            .responses
            .iter()
            .filter(|answer| answer.topic.as_str() == topic)
            .flat_map(|answer| answer.partitions.iter())
            .find(|answer| answer.partition_index == partition);
        let data = answered(data, |data| data.error_code, session.connection.address(), what)?;
        if data.last_stable_offset >= 0 {
            last_stable.store(data.last_stable_offset, Ordering::Relaxed);
        }
        let records = data.records.clone().unwrap_or_default();
        let batches = whole_batches_from(records.clone(), from_offset)?;
        Ok(Fetched {
            source_cluster_id: session.cluster_id.clone(),
            batches,
            buffers: BatchBuffers::new(vec![records]),
        })
    }

    async fn earliest_offset(&mut self) -> Result<i64, LinkError> {
        let (topic, partition) = (self.topic.clone(), self.partition);
        let session = self.open_session(1 << 20).await?;
        let mut wanted = ListOffsetsPartition::default();
        wanted.partition_index = partition;
        wanted.timestamp = -2;
        wanted.current_leader_epoch = -1;
        let mut list_topic = ListOffsetsTopic::default();
        list_topic.name = TopicName(StrBytes::from_string(topic.clone()));
        list_topic.partitions = vec![wanted];
        let mut request = ListOffsetsRequest::default();
        request.replica_id = BrokerId(-1);
        request.topics = vec![list_topic];
        let version = session.list_offsets_version;
        let response: ListOffsetsResponse = session
            .connection
            .call(ApiKey::ListOffsets, version, &request)
            .await?;
        let what = format!("ListOffsets of {topic}-{partition}");
        let answer = response
            .topics
            .iter()
            .filter(|answer| answer.name.as_str() == topic)
            .flat_map(|answer| answer.partitions.iter())
            .find(|answer| answer.partition_index == partition);
        Ok(answered(
            answer,
            |answer| answer.error_code,
            session.connection.address(),
            what,
        )?
        .offset)
    }

    /// A failed call ends the session (a retry reconnects and checks the cluster id again).
    fn failed(&mut self, error: LinkError) -> FetchError {
        self.session = None;
        FetchError {
            retryable: error.retryable(),
            message: error.to_string(),
        }
    }

    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<Fetched, FetchError> {
        match self.fetch_batches(from_offset, max_bytes).await {
            Ok(fetched) => Ok(fetched),
            Err(error) => Err(self.failed(error)),
        }
    }
}

/// The partition's answer in a response, if it is there and carries no error.
fn answered<'a, T>(
    answer: Option<&'a T>,
    error_code: impl Fn(&T) -> i16,
    address: &str,
    what: String,
) -> Result<&'a T, LinkError> {
    let Some(answer) = answer else {
        return Err(LinkError::Malformed {
            address: address.to_owned(),
            what,
            reason: "the partition asked for is missing".to_owned(),
        });
    };
    match error_code(answer) {
        0 => Ok(answer),
        code => Err(LinkError::Kafka {
            what,
            code,
            detail: String::new(),
        }),
    }
}

/// The whole batches of a fetched record set that the destination, whose log ends at `from_offset`, can append:
/// those wholly before it skipped (a source returns the batch holding the offset), a partial last batch dropped
/// (a response ends where its byte limit fell). Length and magic are checked here, the CRC by the machine.
fn whole_batches_from(records: bytes::Bytes, from_offset: i64) -> Result<Vec<RecordBatch>, LinkError> {
    let mut batches: Vec<RecordBatch> = Vec::new();
    for found in BatchIter::unverified(records) {
        let batch = match found {
            Ok(found) => found.batch,
            // The response ended inside a batch: what came before it is whole.
            Err(SegmentError::Corrupt { error, .. }) if error.category() == ErrorCategory::Truncated => break,
            Err(error) => return Err(LinkError::Refused(format!("a fetched batch: {error}"))),
        };
        if batch.last_offset() < from_offset {
            continue;
        }
        if batch.base_offset() < from_offset {
            return Err(LinkError::Refused(format!(
                "the source's batch {}..={} straddles offset {from_offset}, where the destination's log ends",
                batch.base_offset(),
                batch.last_offset()
            )));
        }
        if let Some(previous) = batches.last() {
            if batch.base_offset() <= previous.last_offset() {
                return Err(LinkError::Refused(format!(
                    "offsets go backwards: batch at {} after one ending at {}",
                    batch.base_offset(),
                    previous.last_offset()
                )));
            }
        }
        batches.push(batch);
    }
    Ok(batches)
}

#[async_trait(?Send)]
impl Fetcher for KafkaFetcher {
    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<Fetched, FetchError> {
        self.source.lock().await.fetch(from_offset, max_bytes).await
    }

    fn detached_fetch(&self, from_offset: i64, max_bytes: usize) -> Option<DetachedFetch> {
        let source = Arc::clone(&self.source);
        Some(Box::pin(async move {
            source.lock().await.fetch(from_offset, max_bytes).await
        }))
    }

    /// There is no Kafka API for a peer's last mirrored offset: the peer is taken never to have mirrored from
    /// us, and the machine aligns by copying its log from its start.
    async fn last_mirrored_offset(&mut self, _mirrored_from: &str) -> Result<Option<i64>, FetchError> {
        Ok(None)
    }

    async fn log_start_offset(&mut self) -> Result<i64, FetchError> {
        let mut source = self.source.lock().await;
        match source.earliest_offset().await {
            Ok(offset) => Ok(offset),
            Err(error) => Err(source.failed(error)),
        }
    }

    fn source_last_stable_offset(&self) -> Option<i64> {
        Some(self.last_stable.load(Ordering::Relaxed)).filter(|offset| *offset >= 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::BatchBuilder;

    fn batches(offsets: &[(i64, u32)]) -> bytes::Bytes {
        let mut all = Vec::new();
        for &(base, records) in offsets {
            let mut builder = BatchBuilder::new().base_offset(base);
            for index in 0..records {
                builder.add(1_000 + i64::from(index), None, Some(b"value"), &[]);
            }
            all.extend_from_slice(builder.build().unwrap().as_bytes());
        }
        bytes::Bytes::from(all)
    }

    #[test]
    fn batches_before_the_log_end_are_skipped_and_a_partial_last_one_dropped() {
        let whole = batches(&[(0, 2), (2, 3), (5, 1)]);
        let cut = whole.slice(..whole.len() - 7);
        let kept = whole_batches_from(cut, 2).unwrap();
        let offsets: Vec<i64> = kept.iter().map(RecordBatch::base_offset).collect();
        assert_eq!(offsets, vec![2]);
    }

    #[test]
    fn a_batch_straddling_the_log_end_is_refused_not_appended() {
        let error = whole_batches_from(batches(&[(0, 3)]), 1).unwrap_err();
        assert!(!error.retryable(), "{error}");
    }

    #[test]
    fn offsets_going_backwards_are_refused() {
        let error = whole_batches_from(batches(&[(4, 2), (3, 1)]), 0).unwrap_err();
        assert!(error.to_string().contains("backwards"), "{error}");
    }
}
