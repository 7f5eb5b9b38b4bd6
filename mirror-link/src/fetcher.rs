//! [`KafkaFetcher`]: one partition of a Kafka-compatible cluster as a mirror's source.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mirror_fsm::{DetachedFetch, FetchError, FetchLimits, FetchResponse as Fetched, Fetcher, PartitionFetch};
use tokio::sync::Mutex;

use crate::cluster::SourceCluster;

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
    /// How connections to the source are secured (TLS, SASL); PLAINTEXT by default.
    pub security: crate::ClientSecurity,
    /// How old a session's Metadata may grow before the next call asks again, errors or not (Kafka's
    /// `metadata.max.age.ms`, 5 minutes by default): the brokers the source names now, for a session that must
    /// reopen after the ones it knew are gone, and leaders that moved without an error telling.
    pub metadata_max_age: Duration,
}

impl FetcherConfig {
    /// Defaults for `bootstrap`: 10 s calls, 50 ms fetch waits, batches up to 16 MiB, Metadata asked again after
    /// 5 minutes.
    pub fn new(bootstrap: impl Into<String>) -> Self {
        FetcherConfig {
            bootstrap: bootstrap.into(),
            client_id: "mirrorlog-mirror".to_owned(),
            timeout: Duration::from_secs(10),
            max_wait: Duration::from_millis(50),
            max_batch_bytes: 16 << 20,
            security: crate::ClientSecurity::plaintext(),
            metadata_max_age: Duration::from_secs(300),
        }
    }
}

/// One source partition over the Kafka protocol; see the crate docs. Its source's connections
/// ([`SourceCluster`]) may be shared with other partitions of the same source (`KafkaSources` shares them), and
/// with the fetches it hands to another thread ([`Fetcher::detached_fetch`]: a catch-up fetches range *n+1* while
/// it writes *n*); one call at a time uses them.
#[derive(Debug, Clone)]
pub struct KafkaFetcher {
    cluster: Arc<Mutex<SourceCluster>>,
    topic: String,
    partition: i32,
    max_wait_ms: i32,
    /// The source's last stable offset in its latest fetch answer (−1 before the first).
    last_stable: Arc<AtomicI64>,
    /// The topic's id at the source when the link was created ([`Fetcher::expect_topic_id`]).
    expected_topic_id: Option<[u8; 16]>,
}

impl KafkaFetcher {
    /// A fetcher of `topic`/`partition` at the source `config` names, with connections of its own; it connects
    /// at its first call.
    pub fn new(config: FetcherConfig, topic: impl Into<String>, partition: i32) -> Self {
        let max_wait = config.max_wait;
        Self::on(
            Arc::new(Mutex::new(SourceCluster::new(config))),
            max_wait,
            topic,
            partition,
        )
    }

    /// A fetcher of `topic`/`partition` over `cluster`'s shared connections, waiting up to `max_wait` at the
    /// source for data.
    pub fn on(
        cluster: Arc<Mutex<SourceCluster>>,
        max_wait: std::time::Duration,
        topic: impl Into<String>,
        partition: i32,
    ) -> Self {
        KafkaFetcher {
            cluster,
            topic: topic.into(),
            partition,
            max_wait_ms: i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX),
            last_stable: Arc::new(AtomicI64::new(-1)),
            expected_topic_id: None,
        }
    }

    /// The source cluster's id, once a session is open (`None` too while a call holds the session).
    pub fn source_cluster_id(&self) -> Option<String> {
        let cluster = self.cluster.try_lock().ok()?;
        cluster.cluster_id().map(str::to_owned)
    }
}

/// One partition's fetch through the shared connections; the source's LSO recorded in `last_stable`.
async fn fetch_one(
    cluster: &Mutex<SourceCluster>,
    wanted: PartitionFetch,
    max_bytes: usize,
    max_wait_ms: i32,
    last_stable: &AtomicI64,
) -> Result<Fetched, FetchError> {
    let mut answers = cluster
        .lock()
        .await
        .fetch(
            std::slice::from_ref(&wanted),
            FetchLimits::single(max_bytes),
            max_wait_ms,
        )
        .await;
    let answer = answers
        .pop()
        .unwrap_or_else(|| Err(FetchError::new("no answer for the partition".to_owned(), true)))?;
    if let Some(stable) = answer.last_stable_offset {
        last_stable.store(stable, Ordering::Relaxed);
    }
    Ok(answer.response)
}

#[async_trait(?Send)]
impl Fetcher for KafkaFetcher {
    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<Fetched, FetchError> {
        let wanted = PartitionFetch {
            topic: self.topic.clone(),
            partition: self.partition,
            offset: from_offset,
            topic_id: self.expected_topic_id,
        };
        fetch_one(
            &self.cluster,
            wanted,
            max_bytes,
            self.max_wait_ms,
            &self.last_stable,
        )
        .await
    }

    fn detached_fetch(&self, from_offset: i64, max_bytes: usize) -> Option<DetachedFetch> {
        let cluster = Arc::clone(&self.cluster);
        let last_stable = Arc::clone(&self.last_stable);
        let wanted = PartitionFetch {
            topic: self.topic.clone(),
            partition: self.partition,
            offset: from_offset,
            topic_id: self.expected_topic_id,
        };
        let max_wait_ms = self.max_wait_ms;
        Some(Box::pin(async move {
            fetch_one(&cluster, wanted, max_bytes, max_wait_ms, &last_stable).await
        }))
    }

    /// Kafka has no API for a peer's last mirrored offset: a mirrorlog peer answers on its administration key
    /// ([`crate::peer`]); any other is taken never to have mirrored from us (the machine then aligns by copying
    /// the peer's log from its start).
    async fn last_mirrored_offset(&mut self, mirrored_from: &str) -> Result<Option<i64>, FetchError> {
        self.cluster
            .lock()
            .await
            .last_mirrored_at_peer(&self.topic, self.partition, mirrored_from)
            .await
            .map_err(|error| error.as_fetch_error())
    }

    async fn log_start_offset(&mut self) -> Result<i64, FetchError> {
        self.cluster
            .lock()
            .await
            .earliest_offset(&self.topic, self.partition)
            .await
    }

    async fn cluster_id(&mut self) -> Result<String, FetchError> {
        self.cluster
            .lock()
            .await
            .verified_cluster_id(&self.topic, self.expected_topic_id)
            .await
    }

    fn expect_topic_id(&mut self, topic_id: [u8; 16]) {
        self.expected_topic_id = Some(topic_id);
    }

    fn source_last_stable_offset(&self) -> Option<i64> {
        Some(self.last_stable.load(Ordering::Relaxed)).filter(|offset| *offset >= 0)
    }
}

#[cfg(test)]
mod tests {
    use crate::cluster::whole_batches_from;
    use record_format::BatchBuilder;
    use record_format::RecordBatch;

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
        let kept = whole_batches_from(cut, 2, 1 << 20).unwrap();
        let offsets: Vec<i64> = kept.iter().map(RecordBatch::base_offset).collect();
        assert_eq!(offsets, vec![2]);
    }

    #[test]
    fn the_batch_holding_the_requested_offset_is_kept_whole_for_the_driver_to_align() {
        let kept = whole_batches_from(batches(&[(0, 3), (3, 1)]), 1, 1 << 20).unwrap();
        let offsets: Vec<i64> = kept.iter().map(RecordBatch::base_offset).collect();
        assert_eq!(offsets, vec![0, 3]);
    }

    /// A batch claiming 2 GiB is never whole in any answer: refused with its claim, not dropped as a partial tail.
    #[test]
    fn a_batch_claiming_more_than_the_link_accepts_is_refused_not_dropped() {
        let whole = batches(&[(0, 2), (2, 1)]);
        let first = record_format::BatchIter::unverified(whole.clone())
            .next()
            .unwrap()
            .unwrap()
            .batch
            .as_bytes()
            .len();
        let mut claimed = whole.to_vec();
        // The second batch's length field (bytes 8..12 of its log overhead) claims 2 GiB − 1.
        claimed[first + 8..first + 12].copy_from_slice(&i32::MAX.to_be_bytes());
        let error = whole_batches_from(bytes::Bytes::from(claimed), 0, 16 << 20).unwrap_err();
        assert!(error.to_string().contains("claims 2147483659 bytes"), "{error}");
        // A batch within the bound that the answer cut off is a partial tail, as before.
        let cut = whole.slice(..whole.len() - 7);
        assert_eq!(whole_batches_from(cut, 0, 16 << 20).unwrap().len(), 1);
    }

    #[test]
    fn offsets_going_backwards_are_refused() {
        let error = whole_batches_from(batches(&[(4, 2), (3, 1)]), 0, 1 << 20).unwrap_err();
        assert!(error.to_string().contains("backwards"), "{error}");
    }
}
