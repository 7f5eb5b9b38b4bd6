//! DeleteTopics, CreatePartitions, DescribeCluster and DescribeLogDirs. Kafka applies a deletion or a new partition count through
//! its controller and its metadata follows a moment later: the scenarios wait, unobserved, until Metadata shows
//! the change, then observe what a client sees.

use kafka_protocol::messages::*;
use serde_json::json;

use super::{ask, create_topic, fresh_topic, produce_plain, versions};
use crate::error::DiffError;
use crate::observe;
use crate::requests::{self, topic_name};
use crate::session::Session;

/// Waits (unobserved) until Metadata answers `topic` as `ready` says, up to 30 s; then observes it as `step`.
async fn metadata_once(
    session: &mut Session,
    topic: &str,
    step: &str,
    ready: impl Fn(&metadata_response::MetadataResponseTopic) -> bool,
) -> Result<(), DiffError> {
    let request = requests::metadata(Some(&[topic]), false);
    for _attempt in 0..300 {
        let answer: MetadataResponse = ask(session, ApiKey::Metadata, &request).await?;
        if answer.topics.iter().all(&ready) {
            session.observe(step, observe::metadata(&answer, |_| true));
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(DiffError::Setup(format!(
        "{topic}: Metadata did not settle in 30 s"
    )))
}

pub async fn delete_topics_every_version(session: &mut Session) -> Result<(), DiffError> {
    let missing = session.topic("missing");
    for version in versions(ApiKey::DeleteTopics) {
        let topic = fresh_topic(session, &format!("v{version}"), 2).await?;
        produce_plain(session, &format!("v{version} produce"), &topic, 0, "a", 3).await?;
        let mut request = DeleteTopicsRequest::default();
        if version >= 6 {
            request.topics = vec![by_name(&topic), by_name(&missing)];
        } else {
            request.topic_names = vec![topic_name(&topic), topic_name(&missing)];
        }
        request.timeout_ms = 30_000;
        let answer: DeleteTopicsResponse = session.call(ApiKey::DeleteTopics, version, &request).await?;
        // From v6 each answer carries an id: the two clusters draw their own, so only whether it is zero is seen.
        let mut seen: Vec<_> = answer
            .responses
            .iter()
            .map(|r| {
                json!([
                    r.name.as_ref().map(|n| n.as_str()),
                    r.error_code,
                    r.topic_id.is_nil()
                ])
            })
            .collect();
        observe::sort_by_partition(&mut seen);
        session.observe(&format!("v{version}"), json!(seen));
        metadata_once(session, &topic, &format!("v{version} gone"), |t| {
            t.error_code != 0
        })
        .await?;
        // The name again: a new, empty topic.
        create_topic(session, &topic, 1).await?;
        produce_plain(
            session,
            &format!("v{version} produce to the new topic"),
            &topic,
            0,
            "b",
            1,
        )
        .await?;
    }
    Ok(())
}

/// A DeleteTopics v6+ entry naming `name`.
fn by_name(name: &str) -> delete_topics_request::DeleteTopicState {
    let mut topic = delete_topics_request::DeleteTopicState::default();
    topic.name = Some(topic_name(name));
    topic
}

/// A DeleteTopics v6+ entry naming the topic whose id is `id`.
fn by_id(id: uuid::Uuid) -> delete_topics_request::DeleteTopicState {
    let mut topic = delete_topics_request::DeleteTopicState::default();
    topic.topic_id = id;
    topic
}

/// DeleteTopics v6+ by topic id (KIP-516), after Metadata told the id: a topic deleted by id, an id no topic has,
/// an entry with both a name and an id, one with neither, an id given twice, a name given beside its own topic's
/// id (once, and given twice), a name given twice. Each answer is seen as its name, its error and how its id relates to the ones asked (the clusters draw their
/// own ids), in a sorted order (Kafka shuffles its answers).
pub async fn delete_topics_by_id(session: &mut Session) -> Result<(), DiffError> {
    let version = *versions(ApiKey::DeleteTopics).end();
    if version < 6 {
        return Ok(());
    }
    let id_of = |answer: &MetadataResponse| answer.topics.first().map(|topic| topic.topic_id);
    let mut ids = Vec::new();
    let mut names = Vec::new();
    for suffix in ["by-id", "twice", "both", "beside", "beside-twice", "named-twice"] {
        let topic = fresh_topic(session, suffix, 1).await?;
        let answer: MetadataResponse = ask(
            session,
            ApiKey::Metadata,
            &requests::metadata(Some(&[&topic]), false),
        )
        .await?;
        let id = id_of(&answer)
            .filter(|id| !id.is_nil())
            .ok_or_else(|| DiffError::Setup(format!("Metadata gave {topic} no id")))?;
        ids.push(id);
        names.push(topic);
    }
    let stranger = uuid::Uuid::from_bytes([0x5a; 16]);
    let mut both = by_name(&names[2]);
    both.topic_id = ids[2];
    let request = {
        let mut request = DeleteTopicsRequest::default();
        request.timeout_ms = 30_000;
        request.topics = vec![
            by_id(ids[0]),
            by_id(stranger),
            by_id(ids[1]),
            by_id(ids[1]),
            both,
            delete_topics_request::DeleteTopicState::default(),
            by_id(ids[3]),
            by_name(&names[3]),
            by_id(ids[4]),
            by_id(ids[4]),
            by_name(&names[4]),
            by_name(&names[5]),
            by_name(&names[5]),
        ];
        request
    };
    let answer: DeleteTopicsResponse = session.call(ApiKey::DeleteTopics, version, &request).await?;
    let mut seen: Vec<_> = answer
        .responses
        .iter()
        .map(|r| {
            let id = match ids.iter().position(|id| *id == r.topic_id) {
                Some(index) => format!("id of {}", names[index]),
                None if r.topic_id == stranger => "the unknown id".to_owned(),
                None if r.topic_id.is_nil() => "zero".to_owned(),
                None => "another id".to_owned(),
            };
            json!([r.name.as_ref().map(|n| n.as_str()), r.error_code, id])
        })
        .collect();
    seen.sort_by_key(|answer| answer.to_string());
    session.observe(&format!("v{version} by id"), json!(seen));
    // The one deleted is gone; the others stay.
    metadata_once(session, &names[0], "deleted by id: gone", |t| t.error_code != 0).await?;
    for name in &names[1..] {
        metadata_once(session, name, &format!("{name} kept"), |t| t.error_code == 0).await?;
    }
    Ok(())
}

pub async fn create_partitions_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let missing = session.topic("missing");
    let mut count = 1;
    for version in versions(ApiKey::CreatePartitions) {
        let grow = |name: &str, count: i32, validate_only: bool| {
            let mut grown = create_partitions_request::CreatePartitionsTopic::default();
            grown.name = topic_name(name);
            grown.count = count;
            grown.assignments = None;
            let mut request = CreatePartitionsRequest::default();
            request.topics = vec![grown];
            request.timeout_ms = 30_000;
            request.validate_only = validate_only;
            request
        };
        let steps = [
            ("checked only", grow(&topic, count + 5, true)),
            ("grown by one", grow(&topic, count + 1, false)),
            ("the same count", grow(&topic, count + 1, false)),
            ("fewer", grow(&topic, count, false)),
            ("an unknown topic", grow(&missing, 3, false)),
        ];
        for (step, request) in steps {
            let answer: CreatePartitionsResponse =
                session.call(ApiKey::CreatePartitions, version, &request).await?;
            let seen: Vec<_> = answer
                .results
                .iter()
                .map(|r| json!({ "error": r.error_code, "message": r.error_message.as_deref() }))
                .collect();
            session.observe(&format!("v{version} {step}"), json!(seen));
        }
        count += 1;
        let expected = usize::try_from(count).unwrap_or(0);
        metadata_once(session, &topic, &format!("v{version} read back"), |t| {
            t.partitions.len() == expected
        })
        .await?;
        produce_plain(
            session,
            &format!("v{version} produce to the new partition"),
            &topic,
            count - 1,
            "c",
            1,
        )
        .await?;
    }
    Ok(())
}

pub async fn describe_cluster_every_version(session: &mut Session) -> Result<(), DiffError> {
    for version in versions(ApiKey::DescribeCluster) {
        let mut request = DescribeClusterRequest::default();
        request.include_cluster_authorized_operations = false;
        let answer: DescribeClusterResponse =
            session.call(ApiKey::DescribeCluster, version, &request).await?;
        let controller_is_a_broker = answer.brokers.iter().any(|b| b.broker_id == answer.controller_id);
        session.observe(
            &format!("v{version}"),
            json!({
                "error": answer.error_code,
                "endpoint_type": answer.endpoint_type,
                "brokers": answer.brokers.len(),
                "fenced": answer.brokers.iter().filter(|b| b.is_fenced).count(),
                "controller is a broker": controller_is_a_broker,
                "authorized operations": answer.cluster_authorized_operations,
            }),
        );
        if version >= 1 {
            request.endpoint_type = 2;
            let answer: DescribeClusterResponse =
                session.call(ApiKey::DescribeCluster, version, &request).await?;
            session.observe(
                &format!("v{version} controllers"),
                json!({ "error": answer.error_code, "message": answer.error_message.as_deref() }),
            );
        }
    }
    Ok(())
}

pub async fn describe_log_dirs_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "dirs", 2).await?;
    produce_plain(session, "produce", &topic, 0, "a", 3).await?;
    let missing = session.topic("missing");
    for version in versions(ApiKey::DescribeLogDirs) {
        let mut asked = describe_log_dirs_request::DescribableLogDirTopic::default();
        asked.topic = topic_name(&topic);
        asked.partitions = vec![0, 1, 7];
        let mut absent = describe_log_dirs_request::DescribableLogDirTopic::default();
        absent.topic = topic_name(&missing);
        absent.partitions = vec![0];
        let mut request = DescribeLogDirsRequest::default();
        request.topics = Some(vec![asked, absent]);
        let answer: DescribeLogDirsResponse =
            session.call(ApiKey::DescribeLogDirs, version, &request).await?;
        let results: Vec<serde_json::Value> = answer
            .results
            .iter()
            .map(|dir| {
                json!({
                    "error": dir.error_code,
                    "absolute log dir": dir.log_dir.starts_with('/'),
                    "volume known": dir.total_bytes >= dir.usable_bytes && dir.usable_bytes >= 0,
                    "topics": dir.topics.iter().map(|t| {
                        // Kafka lists partitions in its hash map's order: the order carries no meaning.
                        let mut partitions: Vec<_> = t.partitions.iter().map(|p| {
                            (p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                        }).collect();
                        partitions.sort_unstable();
                        json!({ "asked": t.name.0.as_str() == topic, "partitions": partitions })
                    }).collect::<Vec<_>>(),
                })
            })
            .collect();
        session.observe(
            &format!("v{version}"),
            json!({ "error": answer.error_code, "results": results }),
        );
        request.topics = None;
        let every: DescribeLogDirsResponse = session.call(ApiKey::DescribeLogDirs, version, &request).await?;
        let listed: Vec<serde_json::Value> = every
            .results
            .iter()
            .flat_map(|dir| dir.topics.iter())
            .filter(|t| t.name.0.as_str() == topic)
            .map(|t| {
                let mut indexes: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
                indexes.sort_unstable();
                json!(indexes)
            })
            .collect();
        session.observe(&format!("v{version} every topic"), json!({ "ours": listed }));
    }
    Ok(())
}
