//! The scenarios: each one a short client script over its own topics and transactional ids, recording what a
//! client observes. [`ALL`] lists them; [`run`] runs one.
//!
//! The `*_every_version` scenarios call their API at every version in [`VERSIONS`] (the versions
//! `mirrorlog serve` advertises, all of which Apache Kafka 4.1 serves too), so that a run covers every advertised
//! (API, version) pair against both brokers; the others pin one behaviour each at the highest version.

mod admin;
pub mod authorization;
mod configs;
mod fetch;
mod groups;
mod inspect;
mod offsets;
mod produce;
mod security;
mod topics;
mod txn;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};
use serde_json::json;

use crate::error::DiffError;
use crate::observe;
use crate::requests::{self, BatchSpec};
use crate::session::Session;

/// The (API, lowest, highest) versions the scenarios drive: the ones `mirrorlog serve` advertises (one table,
/// `broker::versions`), all of which Apache Kafka 4.1 serves too.
pub const VERSIONS: &[(ApiKey, i16, i16)] = broker::versions::ADVERTISED;

/// The versions of `key` the scenarios drive (none for an API the table does not name).
pub fn versions(key: ApiKey) -> std::ops::RangeInclusive<i16> {
    match VERSIONS.iter().find(|(api, _, _)| *api == key) {
        Some(&(_, low, high)) => low..=high,
        None => std::ops::RangeInclusive::new(1, 0),
    }
}

/// The highest version of `key` the scenarios drive (the one a current client picks against serve).
pub fn top(key: ApiKey) -> i16 {
    *versions(key).end()
}

/// A scenario's name and what it pins.
pub struct Scenario {
    /// The name `--only` takes.
    pub name: &'static str,
    /// One line on what it does.
    pub about: &'static str,
}

macro_rules! scenarios {
    ($($module:ident :: $name:ident => $about:literal,)*) => {
        /// Every scenario, in the order a run takes them.
        pub const ALL: &[Scenario] = &[$(Scenario { name: stringify!($name), about: $about },)*];

        /// Runs the scenario `name` in `session`.
        pub async fn run(name: &str, session: &mut Session) -> Result<(), DiffError> {
            match name {
                $(stringify!($name) => $module::$name(session).await,)*
                _ => Err(DiffError::UnknownScenario(name.to_owned())),
            }
        }
    };
}

scenarios! {
    admin::api_versions_every_version => "ApiVersions at every version: answered without error",
    admin::metadata_every_version => "Metadata at every version: a known topic, an unknown one (auto-created where the version asks), an invalid name",
    admin::metadata_without_auto_creation => "Metadata v4+ with allow_auto_topic_creation false: an unknown topic stays unknown",
    admin::metadata_empty_topic_list => "Metadata v1+ naming no topic (an empty list, not null)",
    admin::create_topics_every_version => "CreateTopics at every version: a new topic, an existing one, no partitions, replication 3, an invalid name, validate_only (of a new topic and of an existing one)",
    admin::find_coordinator_every_version => "FindCoordinator at every version: a group, a transactional id (v1+), an unknown key type",
    configs::create_topics_with_configs => "CreateTopics with configs: accepted ones, then an unknown name, a wrong type, out of range, a bad list value, a null value",
    configs::many_configs_in_one_request => "500 configs in one request: CreateTopics with unknown names, one name repeated, valid ones then an unknown one; IncrementalAlterConfigs repeating a SET and setting unknown names; read back",
    configs::describe_configs_every_version => "DescribeConfigs at every version: every config of a topic with overrides (values, sources, synonyms, types), named keys, an unknown and an invalid topic, broker ids",
    configs::alter_configs_every_version => "AlterConfigs at every version: overrides replaced, validate_only, a bad value, an unknown topic, read back",
    configs::incremental_alter_configs_every_version => "IncrementalAlterConfigs at every version: SET, DELETE, APPEND, SUBTRACT, a null SET, APPEND to a non-list, an unknown topic, read back",
    configs::topic_configs_applied => "max.message.bytes, message.timestamp.after.max.ms and message.timestamp.type=LogAppendTime set on topics: what a produce and a fetch see",
    configs::compacted_topics_refuse_records_without_a_key => "a compacted topic refuses a batch holding records without a key (INVALID_RECORD naming them), the timestamp check beside it; compact,delete too; delete accepts them",
    inspect::describe_producers_every_version => "DescribeProducers at every version: an idempotent producer, a transaction open then committed, an unknown partition and topic",
    inspect::list_transactions_every_version => "ListTransactions at every version: all, by state (with an unknown one), by producer id, by duration (v1)",
    inspect::write_txn_markers_every_version => "WriteTxnMarkers at every version: a client aborts an open transaction itself (kafka-transactions abort), an unknown partition; what read_committed reads after",
    inspect::describe_transactions_every_version => "DescribeTransactions at every version: an open transaction, a committed one, an unknown id",
    topics::delete_topics_every_version => "DeleteTopics at every version: a topic with records and an unknown one; Metadata after; the name created again",
    topics::delete_topics_by_id => "DeleteTopics v6 by topic id: deleted by id, an unknown id, a name and an id in one entry, neither, an id given twice, a name beside its own id (given once and twice), a name given twice; Metadata after",
    topics::create_partitions_every_version => "CreatePartitions at every version: validate_only, grown by one, the same count, fewer, an unknown topic; Metadata and a produce after",
    topics::describe_cluster_every_version => "DescribeCluster at every version: brokers, controller, authorized operations; controller endpoints (v1+)",
    topics::describe_log_dirs_every_version => "DescribeLogDirs at every version: the partitions asked (missing ones left out), their sizes and lag; then every topic",
    produce::produce_every_version => "Produce at every version, acks=all, then what a fetch returns",
    produce::produce_acks => "acks 0, 1 and all: what is stored and what the end offset says",
    produce::produce_codecs => "a batch in each codec (none, gzip, snappy, lz4, zstd), read back",
    produce::produce_unknown_topic_and_partition => "Produce to a topic and a partition that do not exist",
    produce::produce_corrupt_crc => "a batch whose CRC does not match, then nothing stored",
    produce::produce_oversized_batch => "a batch above the default message.max.bytes, then one below it",
    produce::produce_control_batch => "a client sends a control batch",
    produce::produce_several_partitions => "one Produce request writing three partitions of two topics",
    produce::idempotent_duplicate => "an idempotent batch sent twice: the duplicate answered with the original offset",
    produce::idempotent_out_of_order => "an idempotent batch with a sequence gap",
    produce::idempotent_first_sequence_not_zero => "a new producer's first batch at sequence 7",
    produce::idempotent_epoch_bump_then_stale => "an idempotent producer bumps its epoch (sequence 0), then writes with the old epoch",
    produce::idempotent_unknown_producer_id => "a batch from a producer id no coordinator issued",
    produce::produce_two_batches_in_one_partition => "one partition's records holding two batches",
    produce::produce_without_records => "a partition with an empty record set",
    produce::produce_invalid_acks => "acks 2 and -2",
    produce::produce_timestamps_far_from_now => "batches stamped two hours ahead of the broker's clock and 30 years behind",
    produce::idempotent_sequences_per_partition => "one idempotent producer's sequences start at 0 in each partition",
    produce::transactional_produce_not_added => "a transactional batch for a partition not added to the transaction",
    fetch::fetch_every_version => "Fetch at every version and both isolation levels over plain, committed and aborted batches",
    fetch::fetch_offset_out_of_range => "Fetch past the end and before the start",
    fetch::fetch_unknown_topic_and_partition => "Fetch a topic and a partition that do not exist",
    fetch::fetch_open_transaction => "an open transaction: read_committed stops at the LSO, read_uncommitted does not",
    fetch::fetch_aborted_transactions => "aborted transactions listed for read_committed, from their first offset on",
    fetch::fetch_middle_of_batch => "Fetch from an offset inside a batch returns the whole batch",
    fetch::fetch_small_max_bytes => "partition_max_bytes smaller than the first batch",
    fetch::list_offsets_every_version => "ListOffsets at every version: earliest, latest, by timestamp, past the last timestamp",
    fetch::list_offsets_open_transaction => "ListOffsets latest under both isolation levels while a transaction is open",
    fetch::delete_records_every_version => "DeleteRecords at every version: inside a batch, up to the high watermark (-1), below the start, beyond the end, unknown partitions; what ListOffsets and Fetch say after",
    fetch::list_offsets_empty_partition => "ListOffsets earliest, latest and by timestamp on a partition never written",
    fetch::two_open_transactions => "two transactions open on one partition, the later one ends first: where the LSO stops",
    fetch::list_offsets_unknown => "ListOffsets for a topic and a partition that do not exist, and an invalid timestamp",
    txn::init_producer_id_every_version => "InitProducerId at every version: idempotent, transactional, again (epoch bump)",
    txn::init_producer_id_invalid_timeout => "InitProducerId with a transaction timeout above the maximum",
    txn::transaction_every_version => "a transaction at each AddPartitionsToTxn and EndTxn version, committed, read back",
    txn::transaction_abort => "a transaction over two partitions aborted: markers, aborted list, what each isolation reads",
    txn::transaction_fencing_every_version => "a fenced producer's AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and Produce at every version",
    txn::end_txn_without_partitions => "EndTxn commit and abort of a transaction that added nothing",
    txn::end_txn_retried_and_reversed => "EndTxn commit sent again after it completed, then an abort of the committed transaction",
    txn::init_producer_id_bump_with_current_epoch => "InitProducerId v3+ naming the producer's current id and epoch (KIP-360), for a transactional and an idempotent producer",
    txn::transaction_with_an_unwritten_partition => "a transaction adds two partitions, writes one, commits: what each partition holds after",
    txn::end_txn_unknown_transactional_id => "EndTxn for a transactional id never initialised",
    txn::add_partitions_unknown_topic => "AddPartitionsToTxn naming a known and an unknown topic",
    txn::add_partitions_wrong_producer_id => "AddPartitionsToTxn with a producer id the transactional id does not hold",
    txn::init_aborts_open_transaction => "InitProducerId while the transactional id's transaction is open: aborted, epoch bumped",
    txn::transaction_over_two_topics => "one transaction over two topics' partitions, committed: a marker in each",
    txn::transactions_in_sequence => "two transactions of one producer: sequences continue, two markers",
    txn::transactional_id_expiry => "a transactional id idle past transactional.id.expiration.ms: INVALID_PRODUCER_ID_MAPPING, then a new id",
    txn::transaction_timeout_aborts => "a transaction past its timeout is aborted by the coordinator; the producer is fenced",
    offsets::offset_commit_every_version => "OffsetCommit at every version, read back by OffsetFetch at every version",
    offsets::offset_fetch_unknown_group => "OffsetFetch for a group that committed nothing",
    offsets::offset_commit_unknown_topic => "OffsetCommit for a topic that does not exist",
    offsets::transactional_offsets_every_version => "AddOffsetsToTxn and TxnOffsetCommit at every version, committed, read back",
    offsets::transactional_offsets_aborted => "offsets committed in an aborted transaction are not visible",
    offsets::txn_offset_commit_group_not_added => "TxnOffsetCommit for a group the transaction did not add",
    offsets::offset_fetch_pending_transactional_offsets => "OffsetFetch while a transaction's offsets are pending",
    groups::group_every_version => "a group member's life at every JoinGroup, SyncGroup, Heartbeat and LeaveGroup version: join, sync as leader, heartbeats, commits, leave",
    groups::group_refusals => "a short session timeout, an unknown member id, no common protocol, a stale generation, unknown members",
    groups::static_member_returns => "a static member back under a new member id in a Stable group: no rebalance, the old leader id, its assignment kept, the old id fenced",
    groups::transactional_offsets_checked_against_the_group => "TxnOffsetCommit v3 (KIP-447) from an unknown member, at a stale generation, from the current member",
    groups::offset_delete_every_version => "OffsetDelete at every version: a group with only offsets, one whose member subscribes to a topic, one never seen; what OffsetFetch says after",
    groups::delete_groups_every_version => "DeleteGroups at every version: a group with a member, emptied, one with only committed offsets, one never seen",
    security::sasl_requests_outside_authentication_every_version => "SaslHandshake and SaslAuthenticate at every version on a PLAINTEXT connection: ILLEGAL_SASL_STATE",
    security::user_scram_credentials => "AlterUserScramCredentials and DescribeUserScramCredentials: credentials set, refused (unknown mechanism, iterations out of bounds, twice in one request, deleting nothing), described, deleted",
    security::acl_apis_without_an_authorizer_every_version => "DescribeAcls, CreateAcls and DeleteAcls at every version on a broker without an authorizer: SECURITY_DISABLED",
    groups::describe_and_list_groups_every_version => "DescribeGroups and ListGroups at every version: a stable group, an unknown one, the group emptied by its member's leave",
}

/// Sends `request` at the highest version of `key` the scenarios drive.
pub async fn ask<Q: Encodable, A: Decodable>(
    session: &mut Session,
    key: ApiKey,
    request: &Q,
) -> Result<A, DiffError> {
    session.call(key, top(key), request).await
}

/// A topic of this scenario's own (`<scenario>-<suffix>`), created with `partitions` partitions and ready.
pub async fn fresh_topic(session: &mut Session, suffix: &str, partitions: i32) -> Result<String, DiffError> {
    let name = session.topic(suffix);
    create_topic(session, &name, partitions).await?;
    Ok(name)
}

/// Creates `name` with `partitions` partitions (CreateTopics at its highest version) and waits until every
/// partition answers ListOffsets, as a client's first produce would.
pub async fn create_topic(session: &mut Session, name: &str, partitions: i32) -> Result<(), DiffError> {
    let mut request = CreateTopicsRequest::default();
    request.timeout_ms = 30_000;
    request.topics = vec![requests::creatable(name, partitions, 1)];
    let answer: CreateTopicsResponse = ask(session, ApiKey::CreateTopics, &request).await?;
    let code = answer.topics.first().map_or(-2, |topic| topic.error_code);
    if code != 0 {
        return Err(DiffError::Setup(format!("CreateTopics {name}: error {code}")));
    }
    let parts: Vec<(&str, i32, i64)> = (0..partitions).map(|index| (name, index, -1)).collect();
    let request = requests::list_offsets(0, &parts);
    for _attempt in 0..300 {
        let answer: ListOffsetsResponse = ask(session, ApiKey::ListOffsets, &request).await?;
        let ready = answer
            .topics
            .iter()
            .flat_map(|topic| topic.partitions.iter())
            .filter(|partition| partition.error_code == 0)
            .count();
        if ready == parts.len() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(DiffError::Setup(format!("{name} has no leader after 30 s")))
}

/// Produces `spec` to `topic`/`partition` at the highest version with acks=all; the answer is observed as `step`.
pub async fn produce_observed(
    session: &mut Session,
    step: &str,
    transactional_id: Option<&str>,
    parts: Vec<(&str, i32, BatchSpec)>,
) -> Result<ProduceResponse, DiffError> {
    produce_at(session, step, top(ApiKey::Produce), transactional_id, parts).await
}

/// [`produce_observed`] of one plain batch of `count` records tagged `tag` to `topic`/`partition`.
pub async fn produce_plain(
    session: &mut Session,
    step: &str,
    topic: &str,
    partition: i32,
    tag: &str,
    count: usize,
) -> Result<ProduceResponse, DiffError> {
    produce_observed(
        session,
        step,
        None,
        vec![(topic, partition, BatchSpec::plain(tag, count))],
    )
    .await
}

/// [`produce_observed`] at `version`.
pub async fn produce_at(
    session: &mut Session,
    step: &str,
    version: i16,
    transactional_id: Option<&str>,
    parts: Vec<(&str, i32, BatchSpec)>,
) -> Result<ProduceResponse, DiffError> {
    let mut built = Vec::new();
    for (topic, partition, spec) in parts {
        built.push((topic, partition, spec.build()?));
    }
    let request = requests::produce(transactional_id, -1, built);
    let answer: ProduceResponse = session.call(ApiKey::Produce, version, &request).await?;
    session.observe(step, observe::produce(&answer));
    Ok(answer)
}

/// Reads `parts` at the highest version under `isolation` as a consumer does and observes it as `step`
/// (see [`consume`]).
pub async fn fetch_observed(
    session: &mut Session,
    step: &str,
    isolation: i8,
    parts: &[(&str, i32, i64)],
) -> Result<(), DiffError> {
    let seen = consume(session, top(ApiKey::Fetch), isolation, parts).await?;
    session.observe(step, seen);
    Ok(())
}

/// Reads `parts` from their offsets up to their high watermark (read_uncommitted) or last stable offset
/// (read_committed) as a consumer does: fetching again from the offset after the last batch received until the
/// partition is read or answers an error. A broker may answer a fetch with fewer batches than the limits allow
/// (Kafka does, up to where its high watermark's position is known); what a consumer ends up with is the same.
/// Per partition: the first fetch's error, the last fetch's watermarks, every batch once, and the aborted
/// transactions of all the answers, each once.
pub async fn consume(
    session: &mut Session,
    version: i16,
    isolation: i8,
    parts: &[(&str, i32, i64)],
) -> Result<serde_json::Value, DiffError> {
    use serde_json::Value;
    let mut read: Vec<Option<Value>> = vec![None; parts.len()];
    let mut next: Vec<i64> = parts.iter().map(|part| part.2).collect();
    let mut open: Vec<bool> = vec![true; parts.len()];
    for _round in 0..100 {
        let pending: Vec<(&str, i32, i64)> = parts
            .iter()
            .zip(&next)
            .zip(&open)
            .filter(|(_, open)| **open)
            .map(|((part, offset), _)| (part.0, part.1, *offset))
            .collect();
        if pending.is_empty() {
            break;
        }
        let request = requests::fetch(isolation, &pending);
        let answer: FetchResponse = session.call(ApiKey::Fetch, version, &request).await?;
        let seen = observe::fetch(session, &answer);
        let answered = seen["partitions"].as_array().cloned().unwrap_or_default();
        for partition in answered {
            let Some(index) = parts.iter().zip(&open).position(|(part, open)| {
                *open && partition["topic"] == part.0 && partition["partition"] == part.1
            }) else {
                continue;
            };
            let batches = partition["batches"].as_array().cloned().unwrap_or_default();
            let last_read = batches
                .iter()
                .filter_map(|batch| {
                    Some(batch["base_offset"].as_i64()? + batch["last_offset_delta"].as_i64()?)
                })
                .max();
            let upper = if isolation == 1 {
                partition["last_stable_offset"].as_i64()
            } else {
                partition["high_watermark"].as_i64()
            };
            match &mut read[index] {
                None => read[index] = Some(partition.clone()),
                Some(merged) => {
                    for field in ["high_watermark", "last_stable_offset", "log_start_offset"] {
                        merged[field] = partition[field].clone();
                    }
                    let seen_up_to = next[index];
                    if let Some(list) = merged["batches"].as_array_mut() {
                        list.extend(
                            batches
                                .iter()
                                .filter(|batch| {
                                    batch["base_offset"].as_i64().unwrap_or(-1)
                                        + batch["last_offset_delta"].as_i64().unwrap_or(0)
                                        >= seen_up_to
                                })
                                .cloned(),
                        );
                    }
                    if let (Some(list), Some(more)) = (
                        merged["aborted_transactions"].as_array_mut(),
                        partition["aborted_transactions"].as_array(),
                    ) {
                        for entry in more {
                            if !list.contains(entry) {
                                list.push(entry.clone());
                            }
                        }
                        list.sort_by_key(|entry| {
                            (entry["first_offset"].as_i64(), entry["producer"].to_string())
                        });
                    }
                }
            }
            match last_read {
                Some(last) if partition["error"] == 0 && upper.is_some_and(|upper| last + 1 < upper) => {
                    next[index] = last + 1;
                }
                _ => open[index] = false,
            }
        }
    }
    let partitions: Vec<Value> = read.into_iter().flatten().collect();
    Ok(serde_json::json!({ "partitions": partitions }))
}

/// Fetches `topic`'s `partitions` from offset 0 under both isolation levels and observes both.
pub async fn read_back(session: &mut Session, topic: &str, partitions: i32) -> Result<(), DiffError> {
    let parts: Vec<(&str, i32, i64)> = (0..partitions).map(|index| (topic, index, 0)).collect();
    fetch_observed(session, "read_uncommitted", 0, &parts).await?;
    fetch_observed(session, "read_committed", 1, &parts).await
}

/// A setup step: `request` at the highest version of `key`, retried as clients retry; an error `code` reads
/// from the final answer ends the scenario (`what` names the step).
async fn setup<Q: Encodable, A: Decodable>(
    session: &mut Session,
    key: ApiKey,
    request: &Q,
    what: &str,
    code: impl Fn(&A) -> i16,
) -> Result<A, DiffError> {
    let answer: A = session.call_until(key, top(key), request, &code).await?;
    match code(&answer) {
        0 => Ok(answer),
        error => Err(DiffError::Setup(format!("{what}: error {error}"))),
    }
}

/// An idempotent producer's (id, epoch), from InitProducerId at its highest version.
pub async fn idempotent_producer(session: &mut Session) -> Result<(i64, i16), DiffError> {
    let request = requests::init_producer_id(None, 60_000);
    let answer = setup(
        session,
        ApiKey::InitProducerId,
        &request,
        "InitProducerId",
        |a: &InitProducerIdResponse| a.error_code,
    )
    .await?;
    Ok((answer.producer_id.0, answer.producer_epoch))
}

/// Looks up the coordinator of `key` (`key_type` 0: a group, 1: a transactional id) as a client does before its
/// first coordinator request, until one is found; not observed. Kafka creates its internal topic on this lookup
/// and answers coordinator requests NOT_COORDINATOR until then, so a scenario that skipped it would depend on
/// the ones before it.
pub async fn find_coordinator(session: &mut Session, key: &str, key_type: i8) -> Result<(), DiffError> {
    let request = requests::find_coordinator(key, key_type, top(ApiKey::FindCoordinator));
    let what = format!("FindCoordinator {key}");
    setup(
        session,
        ApiKey::FindCoordinator,
        &request,
        &what,
        observe::coordinator_error,
    )
    .await?;
    Ok(())
}

/// Initialises `txn` with `timeout_ms` and returns its (id, epoch); the answer is observed as `init <txn>`.
pub async fn init_transactional(
    session: &mut Session,
    txn: &str,
    timeout_ms: i32,
) -> Result<(i64, i16), DiffError> {
    find_coordinator(session, txn, 1).await?;
    let request = requests::init_producer_id(Some(txn), timeout_ms);
    let answer: InitProducerIdResponse = session
        .call_until(
            ApiKey::InitProducerId,
            top(ApiKey::InitProducerId),
            &request,
            |a: &InitProducerIdResponse| a.error_code,
        )
        .await?;
    let producer = session.producer(answer.producer_id.0);
    session.observe(
        &format!("init {txn}"),
        json!({ "error": answer.error_code, "producer": producer, "epoch": answer.producer_epoch }),
    );
    if answer.error_code != 0 {
        return Err(DiffError::Setup(format!(
            "InitProducerId {txn}: error {}",
            answer.error_code
        )));
    }
    Ok((answer.producer_id.0, answer.producer_epoch))
}

/// Adds `partitions` to `txn`'s transaction at `version` (retrying CONCURRENT_TRANSACTIONS as clients do) and
/// observes the answer.
pub async fn add_partitions_at(
    session: &mut Session,
    version: i16,
    txn: &str,
    producer: (i64, i16),
    partitions: &[(&str, i32)],
) -> Result<Vec<i16>, DiffError> {
    let request = requests::add_partitions(txn, producer, partitions);
    let answer: AddPartitionsToTxnResponse = session
        .call_until(
            ApiKey::AddPartitionsToTxn,
            version,
            &request,
            |a: &AddPartitionsToTxnResponse| {
                a.results_by_topic_v3_and_below
                    .iter()
                    .flat_map(|topic| topic.results_by_partition.iter())
                    .map(|p| p.partition_error_code)
                    .find(|code| *code != 0)
                    .unwrap_or(0)
            },
        )
        .await?;
    session.observe(
        &format!("AddPartitionsToTxn v{version}"),
        observe::add_partitions(&answer),
    );
    Ok(answer
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|topic| topic.results_by_partition.iter().map(|p| p.partition_error_code))
        .collect())
}

/// Ends `txn`'s transaction at `version` (retrying as clients do) and observes the error code; when it ended,
/// waits until the markers are in `partitions` (see [`wait_for_markers`]).
pub async fn end_txn_at(
    session: &mut Session,
    version: i16,
    txn: &str,
    producer: (i64, i16),
    committed: bool,
    partitions: &[(&str, i32)],
) -> Result<i16, DiffError> {
    let request = requests::end_txn(txn, producer, committed);
    let answer: EndTxnResponse = session
        .call_until(ApiKey::EndTxn, version, &request, |a: &EndTxnResponse| {
            a.error_code
        })
        .await?;
    let what = if committed { "commit" } else { "abort" };
    session.observe(&format!("EndTxn v{version} {what}"), json!(answer.error_code));
    if answer.error_code == 0 {
        wait_for_markers(session, partitions).await?;
    }
    Ok(answer.error_code)
}

/// Waits until each of `partitions` has no open transaction (its last stable offset reached its high
/// watermark). Kafka answers EndTxn once the decision is logged and writes the markers afterwards; a scenario
/// that wrote next without waiting would interleave its batch with the markers differently on each broker.
pub async fn wait_for_markers(session: &mut Session, partitions: &[(&str, i32)]) -> Result<(), DiffError> {
    for &(topic, partition) in partitions {
        for attempt in 0.. {
            let mut ends = [0i64; 2];
            for isolation in [0i8, 1] {
                let request = requests::list_offsets(isolation, &[(topic, partition, -1)]);
                let answer: ListOffsetsResponse = ask(session, ApiKey::ListOffsets, &request).await?;
                ends[isolation as usize] = answer
                    .topics
                    .first()
                    .and_then(|t| t.partitions.first())
                    .map_or(-1, |p| p.offset);
            }
            if ends[0] == ends[1] {
                break;
            }
            if attempt >= 300 {
                return Err(DiffError::Setup(format!(
                    "{topic}/{partition} kept a transaction open for 30 s"
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Begins a transaction of a fresh `txn` over `partitions` and writes `records` records to each; returns the
/// producer.
pub async fn open_transaction(
    session: &mut Session,
    txn: &str,
    partitions: &[(&str, i32)],
    records: usize,
) -> Result<(i64, i16), DiffError> {
    let producer = init_transactional(session, txn, 60_000).await?;
    add_partitions_at(
        session,
        top(ApiKey::AddPartitionsToTxn),
        txn,
        producer,
        partitions,
    )
    .await?;
    let parts = partitions
        .iter()
        .map(|&(topic, partition)| {
            (
                topic,
                partition,
                BatchSpec::plain(txn, records).by(producer, 0).in_transaction(),
            )
        })
        .collect();
    produce_observed(session, "transactional produce", Some(txn), parts).await?;
    Ok(producer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_names_are_unique_and_there_are_at_least_forty() {
        let names: std::collections::BTreeSet<_> = ALL.iter().map(|scenario| scenario.name).collect();
        assert_eq!(names.len(), ALL.len());
        assert!(ALL.len() >= 40, "{} scenarios", ALL.len());
    }
}
