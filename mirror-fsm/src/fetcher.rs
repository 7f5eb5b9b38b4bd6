//! The source side of a mirror, as the driver sees it.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use record_format::{BatchBuffers, RecordBatch};

/// A fetch that owns what it needs and may run on another thread ([`Fetcher::detached_fetch`]).
pub type DetachedFetch = Pin<Box<dyn Future<Output = Result<FetchResponse, FetchError>> + Send + 'static>>;

/// What one fetch returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    /// The cluster id the source reports (checked against the session's expected source).
    pub source_cluster_id: String,
    /// Whole batches from the requested offset, as the source stored them.
    pub batches: Vec<RecordBatch>,
    /// The buffers the batches were sliced from, when the fetcher knows them (a local read's, a response's record
    /// set): the destination writes batches lying back to back in one with one write. Empty is always correct.
    pub buffers: BatchBuffers,
}

/// Why the source could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FetchError {
    /// What happened.
    pub message: String,
    /// Whether a retry can help (a network error can; an unknown partition cannot).
    pub retryable: bool,
    /// The source answered that it holds no such offset (Kafka's `OFFSET_OUT_OF_RANGE`): a positive answer about
    /// its log, which the resume check ([`crate::resume`]) takes as evidence, unlike any other error.
    pub offset_out_of_range: bool,
    /// The Kafka error code the source answered, when the error is one ([`FetchError::with_code`]).
    pub code: Option<i16>,
}

impl FetchError {
    /// An error that is not an answer about the source's offsets.
    pub fn new(message: impl Into<String>, retryable: bool) -> Self {
        FetchError {
            message: message.into(),
            retryable,
            offset_out_of_range: false,
            code: None,
        }
    }

    /// The same error, recorded as the source's answer with Kafka's error `code`.
    pub fn with_code(mut self, code: i16) -> Self {
        self.code = Some(code);
        self
    }

    /// A failed read of a source partition log in this process (`OFFSET_OUT_OF_RANGE` kept as such; any other
    /// failure retryable).
    pub fn from_log_read(error: partition_log::LogError) -> Self {
        match error {
            error @ partition_log::LogError::OffsetOutOfRange { .. } => {
                Self::offset_out_of_range(error.to_string())
            }
            error => Self::new(error.to_string(), true),
        }
    }

    /// The source's answer that it holds no such offset (retryable: the resume check then finds out why).
    pub fn offset_out_of_range(message: impl Into<String>) -> Self {
        FetchError {
            message: message.into(),
            retryable: true,
            offset_out_of_range: true,
            code: Some(1),
        }
    }
}

/// The source partition of a mirror (one per partition, like the driver). `?Send`: a fetcher may read another
/// cluster's log in the same thread, as the topology tests and the simulator do.
#[async_trait(?Send)]
pub trait Fetcher {
    /// Batches from `from_offset` up to the source's **last stable offset** (a read_committed bound, without the
    /// aborted list: the bytes are copied as they are), at most about `max_bytes`. Fetching no further than
    /// the LSO means a destination never holds data its source could still cut when *it* fails over, so a
    /// chain (A → B → C) never diverges when B stops (ADR 0009).
    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<FetchResponse, FetchError>;

    /// The same fetch as a future that borrows nothing, so a catch-up can run it on another thread while it
    /// writes the range before (`crate::ahead`); `None` (the default) when this fetcher cannot, and the driver
    /// then fetches on its own thread. A detached fetch must not wait for anything the caller's thread holds.
    fn detached_fetch(&self, _from_offset: i64, _max_bytes: usize) -> Option<DetachedFetch> {
        None
    }

    /// The source's last mirrored offset for this partition from the mirror session whose source was
    /// `mirrored_from` (failback: the peer mirrored from us before), `None` if it never mirrored from it.
    async fn last_mirrored_offset(&mut self, mirrored_from: &str) -> Result<Option<i64>, FetchError>;

    /// The source partition's log start offset.
    async fn log_start_offset(&mut self) -> Result<i64, FetchError>;

    /// The cluster id the source reports now (asked, not remembered: the machine checks it before it truncates
    /// anything on the source's word).
    async fn cluster_id(&mut self) -> Result<String, FetchError>;

    /// Binds this fetcher to the id the mirrored topic had at the source when its link was created: from then on
    /// [`Fetcher::cluster_id`] (the check that opens every preparation, before anything is truncated) fails, not
    /// retryably, when the source's topic of that name has another id — it was deleted and created again, and its
    /// log is not the one mirrored here. A fetcher that cannot see topic ids ignores it (the default).
    fn expect_topic_id(&mut self, _topic_id: [u8; 16]) {}

    /// The source's last stable offset as its latest answer reported it, `None` before the first answer or when
    /// this fetcher does not know it: how far the mirror lags (`mirror describe`) and when it caught up
    /// (`mirror promote`).
    fn source_last_stable_offset(&self) -> Option<i64> {
        None
    }
}

/// What a source cluster told about itself: its id and the partition count of each topic asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourceDescription {
    /// The source's cluster id.
    pub cluster_id: String,
    /// Each topic asked for, with its partition count.
    pub partitions: BTreeMap<String, u32>,
    /// Each topic's id, where the source has topic ids (Kafka 2.8 and later; a topic deleted and created again
    /// under the same name has another). A source without them, or an all-zero id, leaves the topic out.
    pub topic_ids: BTreeMap<String, [u8; 16]>,
    /// The configs set on each described topic at the source (Kafka's dynamic topic configs: its overrides, not
    /// the broker defaults), for a link to take them (`NotRead` where this implementation does not read them).
    pub configs: SourceConfigs,
}

/// What a source said of its topics' configs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SourceConfigs {
    /// This implementation does not read configs (the simulator's sources): nothing is synced.
    #[default]
    NotRead,
    /// Each topic's overrides, name → value (a topic left out: its configs are not known this time).
    Read(BTreeMap<String, BTreeMap<String, String>>),
    /// The source did not answer the question, or refused it (e.g. no DESCRIBE_CONFIGS right): why.
    Failed(String),
}

/// The source clusters a node can mirror from, reached by address: what a mirror link needs to start (the
/// source's id and partition counts) and one [`Fetcher`] per mirrored partition. `serve` reaches sources over
/// the Kafka protocol (`mirror-link`); a test or a simulator can reach them in process.
#[async_trait]
pub trait Sources: Send + Sync {
    /// Describes `topics` at the source `address` names; a topic the source does not have is an error naming it.
    /// No topics asks whether the source answers at all (its cluster id, no partitions).
    async fn describe(&self, address: &str, topics: &[String]) -> Result<SourceDescription, FetchError>;

    /// A fetcher of `topic`/`partition` at `address` (it connects when first used).
    fn fetcher(&self, address: &str, topic: &str, partition: i32) -> Box<dyn Fetcher>;

    /// How connections to the source at `address` are secured from now on: Kafka client settings
    /// (`security.protocol`, `sasl.*`, `ssl.*`; empty: PLAINTEXT). Settings the implementation refuses are an
    /// error naming why, and every later call to that source fails with it. The default, for sources that have no
    /// notion of security (the simulator's), refuses any setting.
    fn configure_client(
        &self,
        address: &str,
        settings: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), FetchError> {
        if settings.is_empty() {
            Ok(())
        } else {
            Err(FetchError::new(
                format!("the source {address} cannot be reached with client security settings here"),
                false,
            ))
        }
    }

    /// Whether `settings` reach the source at `address`: its cluster id, asked on a connection made with them
    /// alone — the connections in use, and the settings they were made with, are left as they are (a link's new
    /// `--source-config` is checked before it replaces the old). The default, for sources that have no client
    /// settings, asks as [`Sources::describe`] of no topic does, once [`Sources::configure_client`]'s default has
    /// accepted the settings.
    async fn verify_client(
        &self,
        address: &str,
        settings: &std::collections::BTreeMap<String, String>,
    ) -> Result<String, FetchError> {
        if !settings.is_empty() {
            return Err(FetchError::new(
                format!("the source {address} cannot be reached with client security settings here"),
                false,
            ));
        }
        self.describe(address, &[])
            .await
            .map(|description| description.cluster_id)
    }

    /// One round for many partitions of the source at `address` — one Fetch request per source broker instead
    /// of one per partition — each answer as [`Fetcher::fetch`] would give it, in `wanted`'s order, within
    /// `limits` (whole batches; a first batch larger than them comes whole; partitions early in `wanted` are
    /// served first when the round's total runs out). `None` (the default) when this implementation fetches
    /// partition by partition only: the caller then uses each partition's [`Fetcher`].
    async fn fetch_many(
        &self,
        _address: &str,
        _wanted: &[PartitionFetch],
        _limits: FetchLimits,
    ) -> Option<Vec<Result<FetchedPartition, FetchError>>> {
        None
    }

    /// The offsets the consumer groups of the source at `address` committed on partitions of `topics` (a
    /// byte-exact mirror has the same offsets, so they carry over as they are). Empty (the default) when this
    /// implementation does not read groups.
    async fn group_offsets(
        &self,
        _address: &str,
        _topics: &[String],
    ) -> Result<Vec<GroupOffset>, FetchError> {
        Ok(Vec::new())
    }

    /// Whether this cluster may read `topics` at the source `address` (Kafka: a Fetch of each topic's first
    /// partition, which needs READ where Metadata needs only DESCRIBE), asked before a link is created so that a
    /// missing right refuses the link instead of failing its partitions later. An error names the first topic
    /// refused; any other answer (the source busy, an offset gone) is not this check's to judge. The default: no
    /// check (sources without authorization).
    async fn check_readable(&self, _address: &str, _topics: &[String]) -> Result<(), FetchError> {
        Ok(())
    }

    /// Every topic the source `address` shows (Kafka: Metadata for all topics), for a link's topic filters to
    /// discover from. An error (the default: this implementation cannot list, e.g. the simulator's) leaves a
    /// link's topics as they are — an absence is never evidence that a topic went away.
    async fn list_topics(&self, address: &str) -> Result<Vec<ListedTopic>, FetchError> {
        Err(FetchError::new(
            format!("the source at {address} cannot be asked for its topics here"),
            false,
        ))
    }

    /// Every ACL of the source `address` (Kafka: DescribeAcls matching everything, which needs DESCRIBE on its
    /// cluster), for a link's ACL rules to sync. [`SourceAcls::NotRead`] (the default) where this implementation
    /// does not read them.
    async fn acls(&self, _address: &str) -> SourceAcls {
        SourceAcls::NotRead
    }

    /// The last stable offset of each of `partitions` at the source `address` now, in order: what a paused
    /// partition's lag is measured against, since no round asks for it. `None` (the default) when this
    /// implementation cannot say; the lag of a paused partition is then unknown.
    async fn last_stable_offsets(
        &self,
        _address: &str,
        _partitions: &[(String, i32)],
    ) -> Option<Vec<Result<i64, FetchError>>> {
        None
    }
}

/// What a source said of its ACLs ([`Sources::acls`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SourceAcls {
    /// This implementation does not read ACLs: nothing is synced.
    #[default]
    NotRead,
    /// Every binding the source holds, and the cluster id of the broker that answered (a link syncs only from
    /// its own source cluster).
    Read {
        /// The answering cluster's id.
        cluster_id: String,
        /// Its bindings.
        acls: Vec<SourceAcl>,
    },
    /// The source has no authorizer (Kafka's SECURITY_DISABLED): there is nothing to sync.
    NoAuthorizer,
    /// The source did not answer, or refused (e.g. no DESCRIBE on its cluster): why.
    Failed(String),
}

/// One ACL binding at a source, in Kafka's wire codes (the node checks them as it checks a CreateAcls).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SourceAcl {
    /// The resource type's code.
    pub resource_type: i8,
    /// The resource name (or prefix, or `*`).
    pub resource_name: String,
    /// The pattern type's code.
    pub pattern_type: i8,
    /// `User:NAME`.
    pub principal: String,
    /// A client address or `*`.
    pub host: String,
    /// The operation's code.
    pub operation: i8,
    /// The permission's code.
    pub permission: i8,
}

/// One topic of a source's listing ([`Sources::list_topics`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTopic {
    /// The topic's name.
    pub name: String,
    /// The source calls it internal (Kafka's `__consumer_offsets`, `__transaction_state`; a mirrorlog node's own
    /// bookkeeping): never mirrored by a filter.
    pub internal: bool,
}

/// One committed offset of a source's consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffset {
    /// The group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The committed offset (the next record the group reads).
    pub offset: i64,
    /// The commit's metadata string.
    pub metadata: Option<String>,
}

/// How much one fetch round may bring: Kafka's `partition_max_bytes` and the request's `max_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// The most one partition's answer carries.
    pub per_partition: usize,
    /// The most the whole answer carries (partitions after the one that fills it come back empty).
    pub total: usize,
}

impl FetchLimits {
    /// One partition's fetch: `max_bytes` for it and for the answer.
    pub fn single(max_bytes: usize) -> Self {
        FetchLimits {
            per_partition: max_bytes,
            total: max_bytes,
        }
    }
}

/// One partition of a [`Sources::fetch_many`] round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionFetch {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Where to fetch from (the destination's log end).
    pub offset: i64,
    /// The topic's id at the source when the link was created (`None`: the source had none, or the link was
    /// recorded before ids were): a source that can be asked by topic id (Kafka's Fetch v13 and later) is asked
    /// for this id, so a topic deleted and created again under the same name answers `UNKNOWN_TOPIC_ID` rather
    /// than the new topic's records (ADR 0050).
    pub topic_id: Option<[u8; 16]>,
}

/// One partition's answer in a [`Sources::fetch_many`] round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    /// The batches, as [`Fetcher::fetch`] returns them.
    pub response: FetchResponse,
    /// The source's last stable offset for the partition in this answer.
    pub last_stable_offset: Option<i64>,
}

/// A topic id as Kafka prints it (`kafka-topics --describe`: URL-safe base64 without padding).
pub fn topic_id_text(id: [u8; 16]) -> String {
    let mut text = String::with_capacity(22);
    let mut bits: u32 = 0;
    let mut held = 0;
    for byte in id {
        bits = (bits << 8) | u32::from(byte);
        held += 8;
        while held >= 6 {
            held -= 6;
            text.push(char::from(ALPHABET[((bits >> held) & 63) as usize]));
        }
    }
    if held > 0 {
        text.push(char::from(ALPHABET[((bits << (6 - held)) & 63) as usize]));
    }
    text
}

/// URL-safe base64's alphabet, in which Kafka prints topic ids.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A topic id from the text [`topic_id_text`] prints (22 characters of URL-safe base64, no padding); `None` for
/// any other text.
pub fn topic_id_from_text(text: &str) -> Option<[u8; 16]> {
    if text.len() != 22 {
        return None;
    }
    let mut id = [0u8; 16];
    let (mut bits, mut held, mut at) = (0u32, 0, 0);
    for character in text.bytes() {
        let value = ALPHABET.iter().position(|&letter| letter == character)?;
        bits = (bits << 6) | u32::try_from(value).ok()?;
        held += 6;
        if held >= 8 {
            held -= 8;
            *id.get_mut(at)? = u8::try_from((bits >> held) & 0xff).ok()?;
            at += 1;
        }
    }
    // 22 characters hold 132 bits: the last 4 are padding and must be zero, as in the text of an id.
    (at == 16 && bits & 0xf == 0).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::{topic_id_from_text, topic_id_text};

    #[test]
    fn a_topic_id_reads_back_from_its_text_and_other_text_is_refused() {
        for id in [[0u8; 16], [0xff; 16], *b"0123456789abcdef"] {
            assert_eq!(topic_id_from_text(&topic_id_text(id)), Some(id));
        }
        assert_eq!(
            topic_id_from_text("AQIDBAUGBwgJCgsMDQ4PEA"),
            Some(std::array::from_fn(|i| i as u8 + 1))
        );
        for bad in [
            "",
            "AQIDBAUGBwgJCgsMDQ4PE",
            "AQIDBAUGBwgJCgsMDQ4PEA=",
            "AQIDBAUGBwgJCgsMDQ4P+A",
            "AQIDBAUGBwgJCgsMDQ4PEB",
        ] {
            assert_eq!(topic_id_from_text(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_topic_id_prints_as_kafka_prints_it_url_safe_base64_without_padding() {
        let counting: [u8; 16] = std::array::from_fn(|index| index as u8 + 1);
        assert_eq!(topic_id_text(counting), "AQIDBAUGBwgJCgsMDQ4PEA");
        assert_eq!(topic_id_text([0xff; 16]), "_____________________w");
        assert_eq!(topic_id_text([0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
    }
}
