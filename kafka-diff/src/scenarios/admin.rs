//! ApiVersions, Metadata, CreateTopics and FindCoordinator.

use kafka_protocol::messages::*;
use serde_json::json;

use super::{ask, fresh_topic, top, versions};
use crate::error::DiffError;
use crate::observe;
use crate::requests;
use crate::session::Session;

pub async fn api_versions_every_version(session: &mut Session) -> Result<(), DiffError> {
    for version in versions(ApiKey::ApiVersions) {
        let mut request = ApiVersionsRequest::default();
        if version >= 3 {
            request.client_software_name = requests::s("kafka-diff");
            request.client_software_version = requests::s("1.0");
        }
        let answer: ApiVersionsResponse = session.call(ApiKey::ApiVersions, version, &request).await?;
        // Which versions each broker serves differs by design; what the scenarios drive is in range for both
        // (the suite checks that separately).
        let serves_driven = super::VERSIONS.iter().all(|&(key, low, high)| {
            answer
                .api_keys
                .iter()
                .any(|api| api.api_key == key as i16 && api.min_version <= low && api.max_version >= high)
        });
        session.observe(
            &format!("v{version}"),
            json!({ "error": answer.error_code, "serves every driven version": serves_driven }),
        );
    }
    Ok(())
}

pub async fn metadata_every_version(session: &mut Session) -> Result<(), DiffError> {
    let known = fresh_topic(session, "known", 2).await?;
    for version in versions(ApiKey::Metadata) {
        let auto = session.topic(&format!("auto-v{version}"));
        let names = [known.as_str(), auto.as_str(), "invalid name!"];
        let request = requests::metadata(Some(&names), true);
        let answer: MetadataResponse = session.call(ApiKey::Metadata, version, &request).await?;
        let prefix = session.topic("");
        session.observe(
            &format!("v{version} named"),
            observe::metadata(&answer, |name| {
                name.starts_with(&prefix) || name == "invalid name!"
            }),
        );
        // Once created, the auto-created topic has its partition and leader.
        let request = requests::metadata(Some(&[auto.as_str()]), false);
        let mut settled = None;
        for _attempt in 0..100 {
            let answer: MetadataResponse = session.call(ApiKey::Metadata, version.max(4), &request).await?;
            let ready = answer.topics.iter().all(|topic| {
                topic.error_code == 0
                    && topic
                        .partitions
                        .iter()
                        .all(|p| p.error_code == 0 && p.leader_id.0 >= 0)
            });
            if ready {
                settled = Some(answer);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let seen = settled.map_or(json!("never settled"), |answer| {
            observe::metadata(&answer, |_| true)
        });
        session.observe(&format!("v{version} auto-created topic later"), seen);
        if version >= 10 {
            // The known topic asked by its id (no name), and a topic without a name or an id.
            let id = answer
                .topics
                .iter()
                .find(|topic| topic.name.as_ref().is_some_and(|name| name.0.as_str() == known))
                .map(|topic| topic.topic_id)
                .unwrap_or_default();
            // An id no topic has (the known one with its bits turned), asked alone and beside the known one.
            let unknown = uuid_of(id.as_u128() ^ u128::MAX);
            let asks: [(&str, Vec<_>); 4] = [
                ("by id", vec![id]),
                ("unknown id", vec![unknown]),
                ("known and unknown ids", vec![id, unknown]),
                ("nameless", vec![Default::default()]),
            ];
            for (what, topic_ids) in asks {
                let mut request = MetadataRequest::default();
                request.topics = Some(
                    topic_ids
                        .iter()
                        .map(|topic_id| {
                            let mut topic = metadata_request::MetadataRequestTopic::default();
                            topic.topic_id = *topic_id;
                            topic.name = None;
                            topic
                        })
                        .collect(),
                );
                let refused: MetadataResponse = session.call(ApiKey::Metadata, version, &request).await?;
                let topics: Vec<serde_json::Value> = refused
                    .topics
                    .iter()
                    .map(|topic| {
                        json!({
                            "error": topic.error_code,
                            "named": topic.name.as_ref().is_some_and(|name| !name.0.is_empty()),
                            "asked_id": topic_ids.iter().position(|asked| *asked == topic.topic_id),
                            "partitions": topic.partitions.len(),
                        })
                    })
                    .collect();
                session.observe(
                    &format!("v{version} {what}"),
                    json!({"brokers": refused.brokers.len(), "topics": topics}),
                );
            }
        }
    }
    let request = requests::metadata(None, true);
    let answer: MetadataResponse = ask(session, ApiKey::Metadata, &request).await?;
    let prefix = session.topic("known");
    session.observe(
        "all topics (this scenario's)",
        observe::metadata(&answer, |name| name == prefix),
    );
    Ok(())
}

pub async fn metadata_without_auto_creation(session: &mut Session) -> Result<(), DiffError> {
    let missing = session.topic("missing");
    for version in 4..=top(ApiKey::Metadata) {
        let request = requests::metadata(Some(&[missing.as_str()]), false);
        let answer: MetadataResponse = session.call(ApiKey::Metadata, version, &request).await?;
        session.observe(&format!("v{version}"), observe::metadata(&answer, |_| true));
    }
    Ok(())
}

pub async fn create_topics_every_version(session: &mut Session) -> Result<(), DiffError> {
    let existing = fresh_topic(session, "existing", 1).await?;
    for version in versions(ApiKey::CreateTopics) {
        fresh_topic(session, &format!("collide.v{version}"), 1).await?;
        let fresh = session.topic(&format!("fresh-v{version}"));
        let mut request = CreateTopicsRequest::default();
        request.timeout_ms = 30_000;
        request.topics = vec![
            requests::creatable(&fresh, 3, 1),
            // Taken, with a replication factor no broker can place: the name is checked first.
            requests::creatable(&existing, 1, 3),
            requests::creatable(&session.topic(&format!("zero-v{version}")), 0, 1),
            // No partitions and a replication factor no broker can place: the counts as given come first.
            requests::creatable(&session.topic(&format!("zero-replicated-v{version}")), 0, 3),
            requests::creatable("bad/replicated", 1, 3),
            // Equal to a topic made above but for `.` against `_`: the names collide.
            requests::creatable(&session.topic(&format!("collide_v{version}")), 1, 1),
            requests::creatable(&session.topic(&format!("replicated-v{version}")), 1, 3),
            requests::creatable("bad/name", 1, 1),
            // A name beginning with `__` is a topic like any other; only internal names are refused.
            requests::creatable(
                &format!("__{}", session.topic(&format!("dunder-v{version}"))),
                1,
                1,
            ),
            requests::creatable("__cluster_metadata", 1, 1),
            // Given twice: neither created, one INVALID_REQUEST.
            requests::creatable(&session.topic(&format!("twice-v{version}")), 1, 1),
            requests::creatable(&session.topic(&format!("twice-v{version}")), 2, 1),
            // The broker's default partition count.
            requests::creatable(&session.topic(&format!("default-v{version}")), -1, -1),
        ];
        let answer: CreateTopicsResponse = session.call(ApiKey::CreateTopics, version, &request).await?;
        session.observe(&format!("v{version}"), observe::create_topics(&answer));
        request.validate_only = true;
        // A new name passes; what the creation would refuse is refused validated only too: a taken name
        // (TOPIC_ALREADY_EXISTS), no partitions, a name no topic may have, a name given twice.
        request.topics = vec![
            requests::creatable(&session.topic(&format!("checked-v{version}")), 1, 1),
            requests::creatable(&existing, 1, 1),
            requests::creatable(&session.topic(&format!("checked-zero-v{version}")), 0, 1),
            requests::creatable("bad/name", 1, 1),
            requests::creatable(&session.topic(&format!("checked-twice-v{version}")), 1, 1),
            requests::creatable(&session.topic(&format!("checked-twice-v{version}")), 1, 1),
        ];
        let answer: CreateTopicsResponse = session.call(ApiKey::CreateTopics, version, &request).await?;
        session.observe(
            &format!("v{version} validate_only"),
            observe::create_topics(&answer),
        );
        // 10,002 metadata records (two topics, 10,000 partitions) are over Kafka's bound on one request: neither
        // is created, validated only or not.
        request.topics = vec![
            requests::creatable(&session.topic(&format!("large-v{version}")), 5_000, 1),
            requests::creatable(&session.topic(&format!("larger-v{version}")), 5_000, 1),
        ];
        let answer: CreateTopicsResponse = session.call(ApiKey::CreateTopics, version, &request).await?;
        session.observe(
            &format!("v{version} validate_only, too many records"),
            observe::create_topics(&answer),
        );
        // 10,001 partitions asked for are over Kafka's other bound, counted before any check: a taken name too.
        request.topics = vec![requests::creatable(&existing, 10_001, 1)];
        let answer: CreateTopicsResponse = session.call(ApiKey::CreateTopics, version, &request).await?;
        session.observe(
            &format!("v{version} validate_only, too many partitions"),
            observe::create_topics(&answer),
        );
    }
    let checked = session.topic("checked-v2");
    let fresh = session.topic("fresh-v2");
    let twice = session.topic("twice-v2");
    let request = requests::metadata(Some(&[fresh.as_str(), checked.as_str(), twice.as_str()]), false);
    let answer: MetadataResponse = ask(session, ApiKey::Metadata, &request).await?;
    session.observe(
        "created, and validated only",
        observe::metadata(&answer, |_| true),
    );
    Ok(())
}

pub async fn find_coordinator_every_version(session: &mut Session) -> Result<(), DiffError> {
    for version in versions(ApiKey::FindCoordinator) {
        let types: &[i8] = if version >= 1 { &[0, 1, 9] } else { &[0] };
        for &key_type in types {
            let mut request = requests::find_coordinator(&session.transactional_id("key"), key_type, version);
            if version >= 4 {
                // Batched (KIP-699): two keys, one answer each.
                request
                    .coordinator_keys
                    .push(requests::s(&session.transactional_id("other-key")));
            }
            let answer: FindCoordinatorResponse = session
                .call_until(
                    ApiKey::FindCoordinator,
                    version,
                    &request,
                    observe::coordinator_error,
                )
                .await?;
            let answered = if version >= 4 {
                json!(answer
                    .coordinators
                    .iter()
                    .map(|c| json!({ "error": c.error_code, "has_node": c.node_id.0 >= 0 }))
                    .collect::<Vec<_>>())
            } else {
                json!({ "error": answer.error_code, "has_node": answer.node_id.0 >= 0 })
            };
            session.observe(&format!("v{version} key type {key_type}"), answered);
        }
    }
    Ok(())
}

pub async fn metadata_empty_topic_list(session: &mut Session) -> Result<(), DiffError> {
    fresh_topic(session, "t", 1).await?;
    for version in versions(ApiKey::Metadata) {
        let request = requests::metadata(Some(&[]), version < 4);
        let answer: MetadataResponse = session.call(ApiKey::Metadata, version, &request).await?;
        session.observe(
            &format!("v{version}"),
            json!({ "topics": answer.topics.len(), "brokers": answer.brokers.len() }),
        );
    }
    Ok(())
}

/// A topic id from its 128 bits.
fn uuid_of(bits: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(bits)
}
