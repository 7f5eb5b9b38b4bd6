//! Topic configs: CreateTopics with configs, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, and configs
//! that change what a produce and a fetch see.
//!
//! Documentation strings are observed as present or not (their wording is each broker's own); entries in name
//! order (Kafka answers in hash order); the broker resource by its errors only (Kafka describes hundreds of broker
//! settings, `serve` the few it has).

use kafka_protocol::messages::*;
use serde_json::{json, Value};

use super::{ask, fetch_observed, fresh_topic, versions};
use crate::error::DiffError;
use crate::requests::{self, s, BatchSpec};
use crate::session::Session;

/// A config name and its value (null allowed).
type Pair<'a> = (&'a str, Option<&'a str>);

const TOPIC: i8 = 2;
const BROKER: i8 = 4;

fn creatable_with(name: &str, configs: &[(&str, Option<&str>)]) -> create_topics_request::CreatableTopic {
    let mut topic = requests::creatable(name, 1, 1);
    topic.configs = configs
        .iter()
        .map(|&(name, value)| {
            let mut config = create_topics_request::CreatableTopicConfig::default();
            config.name = s(name);
            config.value = value.map(s);
            config
        })
        .collect();
    topic
}

/// Creates `name` with `configs` and waits until it is ready (as [`super::create_topic`]).
async fn topic_with(
    session: &mut Session,
    suffix: &str,
    configs: &[(&str, Option<&str>)],
) -> Result<String, DiffError> {
    let name = session.topic(suffix);
    let mut request = CreateTopicsRequest::default();
    request.timeout_ms = 30_000;
    request.topics = vec![creatable_with(&name, configs)];
    let answer: CreateTopicsResponse = ask(session, ApiKey::CreateTopics, &request).await?;
    let code = answer.topics.first().map_or(-2, |topic| topic.error_code);
    if code != 0 {
        return Err(DiffError::Setup(format!(
            "CreateTopics {name} with configs: error {code}"
        )));
    }
    // Ready once a produce-free ListOffsets answers (as `create_topic` waits).
    let request = requests::list_offsets(0, &[(name.as_str(), 0, -1)]);
    for _attempt in 0..300 {
        let answer: ListOffsetsResponse = ask(session, ApiKey::ListOffsets, &request).await?;
        if answer
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .all(|p| p.error_code == 0)
        {
            return Ok(name);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(DiffError::Setup(format!("{name} has no leader after 30 s")))
}

fn describe_request(resources: &[(i8, &str, Option<&[&str]>)], version: i16) -> DescribeConfigsRequest {
    let mut request = DescribeConfigsRequest::default();
    request.include_synonyms = true;
    request.include_documentation = version >= 3;
    request.resources = resources
        .iter()
        .map(|&(resource_type, name, keys)| {
            let mut resource = describe_configs_request::DescribeConfigsResource::default();
            resource.resource_type = resource_type;
            resource.resource_name = s(name);
            resource.configuration_keys = keys.map(|keys| keys.iter().map(|key| s(key)).collect());
            resource
        })
        .collect();
    request
}

/// Waits (up to 10 s) until a batch produced to `partition` of `topic` is stamped with the broker's log append
/// time (the topic's LogAppendTime in effect in its logs).
async fn until_log_append_time(session: &mut Session, topic: &str, partition: i32) -> Result<(), DiffError> {
    for _attempt in 0..100 {
        let request = requests::produce(
            None,
            -1,
            vec![(topic, partition, BatchSpec::plain("probe", 1).build()?)],
        );
        let answer: ProduceResponse = ask(session, ApiKey::Produce, &request).await?;
        let stamped = answer
            .responses
            .iter()
            .flat_map(|topic| &topic.partition_responses)
            .any(|answered| answered.error_code == 0 && answered.log_append_time_ms > 0);
        if stamped {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(DiffError::Setup(format!(
        "{topic}-{partition} never stamped a batch with the log append time within 10 s"
    )))
}

/// Waits (up to 10 s) until the broker describes `topic`'s config `name` as `value`.
async fn until_described(
    session: &mut Session,
    topic: &str,
    name: &str,
    value: &str,
) -> Result<(), DiffError> {
    let request = describe_request(&[(TOPIC, topic, Some(&[name]))], 1);
    for _attempt in 0..100 {
        let answer: DescribeConfigsResponse = session.call(ApiKey::DescribeConfigs, 1, &request).await?;
        let described = answer
            .results
            .iter()
            .flat_map(|result| &result.configs)
            .any(|entry| entry.name.as_str() == name && entry.value.as_deref() == Some(value));
        if described {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err(DiffError::Setup(format!(
        "{topic}'s {name} was never described as {value} within 10 s"
    )))
}

/// A DescribeConfigs answer: per resource its error and, for topics, every entry in name order.
fn described(answer: &DescribeConfigsResponse, version: i16) -> Value {
    json!(answer
        .results
        .iter()
        .map(|result| {
            let mut entries: Vec<Value> = if result.resource_type == TOPIC {
                result
                    .configs
                    .iter()
                    .map(|entry| {
                        let mut seen = json!({
                            "name": entry.name.as_str(),
                            "value": entry.value.as_deref(),
                            "read_only": entry.read_only,
                            "source": entry.config_source,
                            "sensitive": entry.is_sensitive,
                            "synonyms": entry
                                .synonyms
                                .iter()
                                .map(|synonym| json!([synonym.name.as_str(), synonym.value.as_deref(), synonym.source]))
                                .collect::<Vec<_>>(),
                        });
                        if version >= 3 {
                            seen["type"] = json!(entry.config_type);
                            seen["documented"] = json!(entry.documentation.as_deref().is_some_and(|doc| !doc.is_empty()));
                        }
                        seen
                    })
                    .collect()
            } else {
                Vec::new()
            };
            entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
            // A broker's refusal names the broker's own id (1 on Kafka, 0 on serve): masked.
            let message = result.error_message.as_deref().map(|message| match message.split_once(", expected ") {
                Some((before, after)) if result.resource_type == BROKER => {
                    let rest = after.trim_start_matches(|c: char| c.is_ascii_digit());
                    format!("{before}, expected <broker id>{rest}")
                }
                _ => message.to_owned(),
            });
            json!({
                "type": result.resource_type,
                "name": result.resource_name.as_str(),
                "error": result.error_code,
                "message": message,
                "entries": entries,
            })
        })
        .collect::<Vec<_>>())
}

/// The topic's configs named in `keys`, as [`described`] shows them.
async fn read_back(session: &mut Session, topic: &str, keys: &[&str], step: &str) -> Result<(), DiffError> {
    let request = describe_request(&[(TOPIC, topic, Some(keys))], 4);
    let answer: DescribeConfigsResponse = ask(session, ApiKey::DescribeConfigs, &request).await?;
    session.observe(step, described(&answer, 4));
    Ok(())
}

fn alter_results<'a>(results: impl Iterator<Item = (i16, Option<&'a str>, &'a str)>) -> Value {
    json!(results
        .map(|(error, message, name)| json!({ "name": name, "error": error, "message": message }))
        .collect::<Vec<_>>())
}

pub async fn create_topics_with_configs(session: &mut Session) -> Result<(), DiffError> {
    let cases: Vec<(&str, Vec<Pair>)> = vec![
        (
            "accepted",
            vec![
                ("retention.ms", Some("3600000")),
                ("cleanup.policy", Some("compact,delete")),
                ("max.message.bytes", Some("2000")),
            ],
        ),
        ("unknown", vec![("retention.mss", Some("1"))]),
        ("wrong-type", vec![("retention.ms", Some("abc"))]),
        ("out-of-range", vec![("min.insync.replicas", Some("0"))]),
        ("bad-list", vec![("cleanup.policy", Some("bogus"))]),
        ("null", vec![("retention.ms", None), ("segment.ms", None)]),
        ("removed-in-4", vec![("message.format.version", Some("3.0"))]),
    ];
    for (suffix, configs) in cases {
        let mut request = CreateTopicsRequest::default();
        request.timeout_ms = 30_000;
        request.topics = vec![creatable_with(&session.topic(suffix), &configs)];
        let answer: CreateTopicsResponse = ask(session, ApiKey::CreateTopics, &request).await?;
        let seen = answer
            .topics
            .iter()
            .map(|topic| json!({ "error": topic.error_code, "message": topic.error_message.as_deref() }))
            .collect::<Vec<_>>();
        // With the configs the topic was created with, as the answer lists them (v5+).
        session.observe(
            suffix,
            json!({ "seen": seen, "created": crate::observe::create_topics(&answer) }),
        );
    }
    let accepted = session.topic("accepted");
    read_back(
        session,
        &accepted,
        &["retention.ms", "cleanup.policy", "max.message.bytes"],
        "accepted, read back",
    )
    .await
}

/// The configs one request of [`many_configs_in_one_request`] carries. With 10,000, Apache Kafka 4.1 had not
/// answered this scenario after 10 minutes of CPU on the developers' machine; `serve`'s answers to 10,000 are
/// pinned in `node/tests/topic_configs.rs`.
const MANY_CONFIGS: usize = 500;

pub async fn many_configs_in_one_request(session: &mut Session) -> Result<(), DiffError> {
    let unknown: Vec<String> = (0..MANY_CONFIGS).map(|n| format!("no.such.config.{n}")).collect();
    let unknown: Vec<Pair> = unknown.iter().map(|name| (name.as_str(), Some("1"))).collect();
    let repeated: Vec<Pair> = vec![("retention.ms", Some("3600000")); MANY_CONFIGS];
    let valid_then_unknown: Vec<Pair> = repeated
        .iter()
        .take(MANY_CONFIGS - 1)
        .copied()
        .chain([("no.such.config", Some("1"))])
        .collect();
    for (suffix, configs) in [
        ("unknown", &unknown),
        ("repeated", &repeated),
        ("valid-then-unknown", &valid_then_unknown),
    ] {
        let mut request = CreateTopicsRequest::default();
        request.timeout_ms = 30_000;
        request.topics = vec![creatable_with(&session.topic(suffix), configs)];
        let answer: CreateTopicsResponse = ask(session, ApiKey::CreateTopics, &request).await?;
        let seen: Vec<i16> = answer.topics.iter().map(|topic| topic.error_code).collect();
        session.observe(&format!("create, {suffix}"), json!(seen));
    }
    let topic = topic_with(session, "altered", &[]).await?;
    let set_many: Vec<(&str, i8, Option<&str>)> = vec![("retention.ms", 0, Some("7200000")); MANY_CONFIGS];
    let unknown_many: Vec<(&str, i8, Option<&str>)> =
        unknown.iter().map(|&(name, value)| (name, 0, value)).collect();
    for (step, operations) in [("set repeated", &set_many), ("set unknown", &unknown_many)] {
        let mut request = IncrementalAlterConfigsRequest::default();
        request.resources = vec![incremental_resource(&topic, operations)];
        let answer: IncrementalAlterConfigsResponse =
            ask(session, ApiKey::IncrementalAlterConfigs, &request).await?;
        let seen: Vec<i16> = answer
            .responses
            .iter()
            .map(|resource| resource.error_code)
            .collect();
        session.observe(&format!("incremental alter, {step}"), json!(seen));
    }
    // The legacy AlterConfigs, one name repeated.
    let mut resource = alter_configs_request::AlterConfigsResource::default();
    resource.resource_type = TOPIC;
    resource.resource_name = s(&topic);
    let mut config = alter_configs_request::AlterableConfig::default();
    config.name = s("retention.ms");
    config.value = Some(s("9000000"));
    resource.configs = vec![config; MANY_CONFIGS];
    let mut request = AlterConfigsRequest::default();
    request.resources = vec![resource];
    let answer: AlterConfigsResponse = ask(session, ApiKey::AlterConfigs, &request).await?;
    let seen: Vec<i16> = answer
        .responses
        .iter()
        .map(|resource| resource.error_code)
        .collect();
    session.observe("alter, set repeated", json!(seen));
    read_back(session, &topic, &["retention.ms"], "altered, read back").await
}

pub async fn describe_configs_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = topic_with(
        session,
        "t",
        &[
            ("retention.ms", Some("3600000")),
            ("cleanup.policy", Some("compact")),
        ],
    )
    .await?;
    let missing = session.topic("missing");
    for version in versions(ApiKey::DescribeConfigs) {
        let request = describe_request(
            &[
                (TOPIC, &topic, None),
                (
                    TOPIC,
                    &topic,
                    Some(&["retention.ms", "no.such.config", "segment.bytes"]),
                ),
                (TOPIC, &missing, None),
                (TOPIC, "", None),
                (BROKER, "12345", None),
                (BROKER, "x", None),
            ],
            version,
        );
        let answer: DescribeConfigsResponse =
            session.call(ApiKey::DescribeConfigs, version, &request).await?;
        session.observe(&format!("v{version}"), described(&answer, version));
    }
    Ok(())
}

pub async fn alter_configs_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = topic_with(session, "t", &[("cleanup.policy", Some("compact"))]).await?;
    let missing = session.topic("missing");
    for version in versions(ApiKey::AlterConfigs) {
        let retention = format!("{}", 1000 + i64::from(version));
        let resource = |name: &str, configs: &[(&str, Option<&str>)]| {
            let mut resource = alter_configs_request::AlterConfigsResource::default();
            resource.resource_type = TOPIC;
            resource.resource_name = s(name);
            resource.configs = configs
                .iter()
                .map(|&(name, value)| {
                    let mut config = alter_configs_request::AlterableConfig::default();
                    config.name = s(name);
                    config.value = value.map(s);
                    config
                })
                .collect();
            resource
        };
        for (step, resources, validate_only) in [
            (
                "checked only",
                vec![resource(&topic, &[("retention.ms", Some("5"))])],
                true,
            ),
            (
                "replaced",
                vec![resource(&topic, &[("retention.ms", Some(retention.as_str()))])],
                false,
            ),
            (
                "bad value and unknown topic",
                vec![
                    resource(&topic, &[("segment.bytes", Some("10"))]),
                    resource(&missing, &[("retention.ms", Some("5"))]),
                ],
                false,
            ),
        ] {
            let mut request = AlterConfigsRequest::default();
            request.resources = resources;
            request.validate_only = validate_only;
            let answer: AlterConfigsResponse = session.call(ApiKey::AlterConfigs, version, &request).await?;
            let seen = alter_results(
                answer
                    .responses
                    .iter()
                    .map(|r| (r.error_code, r.error_message.as_deref(), r.resource_name.as_str())),
            );
            session.observe(&format!("v{version} {step}"), seen);
        }
        // AlterConfigs replaces every override: cleanup.policy is back to its default.
        read_back(
            session,
            &topic,
            &["retention.ms", "cleanup.policy", "segment.bytes"],
            &format!("v{version} read back"),
        )
        .await?;
    }
    Ok(())
}

/// A topic's IncrementalAlterConfigs operations: `(name, operation, value)`.
fn incremental_resource(
    topic: &str,
    operations: &[(&str, i8, Option<&str>)],
) -> incremental_alter_configs_request::AlterConfigsResource {
    let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
    resource.resource_type = TOPIC;
    resource.resource_name = s(topic);
    resource.configs = operations
        .iter()
        .map(|&(name, operation, value)| {
            let mut config = incremental_alter_configs_request::AlterableConfig::default();
            config.name = s(name);
            config.config_operation = operation;
            config.value = value.map(s);
            config
        })
        .collect();
    resource
}

pub async fn incremental_alter_configs_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = topic_with(session, "t", &[("retention.ms", Some("5000"))]).await?;
    let missing = session.topic("missing");
    for version in versions(ApiKey::IncrementalAlterConfigs) {
        let resource = incremental_resource;
        let steps: Vec<(&str, Vec<incremental_alter_configs_request::AlterConfigsResource>)> = vec![
            (
                "append and set",
                vec![resource(
                    &topic,
                    &[
                        ("cleanup.policy", 2, Some("compact")),
                        ("max.message.bytes", 0, Some("3000")),
                    ],
                )],
            ),
            (
                "subtract and delete",
                vec![resource(
                    &topic,
                    &[
                        ("cleanup.policy", 3, Some("delete")),
                        ("retention.ms", 1, None),
                        ("no.such.config", 1, None),
                    ],
                )],
            ),
            ("null set", vec![resource(&topic, &[("retention.ms", 0, None)])]),
            (
                "append to a non-list",
                vec![resource(&topic, &[("retention.ms", 2, Some("5"))])],
            ),
            (
                "unknown name",
                vec![resource(&topic, &[("retention.mss", 0, Some("5"))])],
            ),
            (
                "unknown topic",
                vec![resource(&missing, &[("retention.ms", 0, Some("5"))])],
            ),
        ];
        for (step, resources) in steps {
            let mut request = IncrementalAlterConfigsRequest::default();
            request.resources = resources;
            let answer: IncrementalAlterConfigsResponse = session
                .call(ApiKey::IncrementalAlterConfigs, version, &request)
                .await?;
            let seen = alter_results(
                answer
                    .responses
                    .iter()
                    .map(|r| (r.error_code, r.error_message.as_deref(), r.resource_name.as_str())),
            );
            session.observe(&format!("v{version} {step}"), seen);
        }
        read_back(
            session,
            &topic,
            &["retention.ms", "cleanup.policy", "max.message.bytes"],
            &format!("v{version} read back"),
        )
        .await?;
        // Back to where this version started.
        let mut request = IncrementalAlterConfigsRequest::default();
        request.resources = vec![resource(
            &topic,
            &[
                ("retention.ms", 0, Some("5000")),
                ("cleanup.policy", 1, None),
                ("max.message.bytes", 1, None),
            ],
        )];
        let _: IncrementalAlterConfigsResponse = session
            .call(ApiKey::IncrementalAlterConfigs, version, &request)
            .await?;
    }
    Ok(())
}

/// A produce's answer with the broker's clock (a LogAppendTime topic's `log_append_time`) named, not valued.
async fn produce_step(
    session: &mut Session,
    step: &str,
    topic: &str,
    spec: BatchSpec,
) -> Result<(), DiffError> {
    let request = requests::produce(None, -1, vec![(topic, 0, spec.build()?)]);
    let answer: ProduceResponse = ask(session, ApiKey::Produce, &request).await?;
    let mut seen = crate::observe::produce(&answer);
    if let Some(partitions) = seen.as_array_mut() {
        for partition in partitions {
            if partition["log_append_time"].as_i64().is_some_and(|time| time > 0) {
                partition["log_append_time"] = json!("broker clock");
            }
        }
    }
    session.observe(step, seen);
    Ok(())
}

pub async fn topic_configs_applied(session: &mut Session) -> Result<(), DiffError> {
    let small = topic_with(session, "small", &[("max.message.bytes", Some("300"))]).await?;
    produce_step(
        session,
        "small batch to max.message.bytes=300",
        &small,
        BatchSpec::plain("a", 1),
    )
    .await?;
    produce_step(
        session,
        "large batch to max.message.bytes=300",
        &small,
        BatchSpec::plain("b", 40),
    )
    .await?;
    let strict = topic_with(
        session,
        "strict",
        &[("message.timestamp.after.max.ms", Some("0"))],
    )
    .await?;
    produce_step(
        session,
        "a batch stamped now-ish to after.max.ms=0",
        &strict,
        BatchSpec::plain("c", 2),
    )
    .await?;
    let appended = topic_with(
        session,
        "appended",
        &[("message.timestamp.type", Some("LogAppendTime"))],
    )
    .await?;
    produce_step(
        session,
        "a batch to a LogAppendTime topic",
        &appended,
        BatchSpec::plain("d", 3),
    )
    .await?;
    fetch_observed(
        session,
        "read back from the LogAppendTime topic",
        0,
        &[(appended.as_str(), 0, 0)],
    )
    .await?;
    // Two partitions: the second is where the switch is seen to take effect before the first is written.
    let fresh = fresh_topic(session, "later", 2).await?;
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources = vec![incremental_resource(
        &fresh,
        &[("message.timestamp.type", 0, Some("LogAppendTime"))],
    )];
    let answer: IncrementalAlterConfigsResponse =
        ask(session, ApiKey::IncrementalAlterConfigs, &request).await?;
    session.observe(
        "switched to LogAppendTime",
        json!(answer.responses.iter().map(|r| r.error_code).collect::<Vec<_>>()),
    );
    // Kafka's controller answers the alter before its broker applies it (a metadata record the broker reads
    // afterwards, and its logs after its DescribeConfigs): the produce waits until the broker describes the new
    // value and a batch on the other partition is stamped with the log append time.
    until_described(session, &fresh, "message.timestamp.type", "LogAppendTime").await?;
    until_log_append_time(session, &fresh, 1).await?;
    produce_step(
        session,
        "a batch after the switch",
        &fresh,
        BatchSpec::plain("e", 2),
    )
    .await?;
    fetch_observed(
        session,
        "read back after the switch",
        0,
        &[(fresh.as_str(), 0, 0)],
    )
    .await
}

pub async fn compacted_topics_refuse_records_without_a_key(session: &mut Session) -> Result<(), DiffError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64);
    for policy in ["compact", "compact,delete", "delete"] {
        let topic = topic_with(
            session,
            &policy.replace(',', "-"),
            &[("cleanup.policy", Some(policy))],
        )
        .await?;
        // Every third record of a batch has no key (records 2 and 5 of six).
        let mut far = BatchSpec::plain("far", 3);
        far.base_timestamp = Some(now + 2 * 3_600_000);
        for (step, spec) in [
            ("six records, two without a key", BatchSpec::plain("mixed", 6)),
            ("two records with keys", BatchSpec::plain("keyed", 2)),
            ("three records two hours ahead, the last without a key", far),
        ] {
            let request = requests::produce(None, -1, vec![(topic.as_str(), 0, spec.build()?)]);
            let answer: ProduceResponse = ask(session, ApiKey::Produce, &request).await?;
            session.observe(&format!("{policy}: {step}"), crate::observe::produce(&answer));
        }
    }
    Ok(())
}
