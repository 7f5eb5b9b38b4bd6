//! A source topic's configs, as a mirror link takes them (ADR 0059): DescribeConfigs (v1–v3, the non-flexible
//! versions `kafka-shape` walks before decoding) for the topics a link mirrors, keeping only what was set on each
//! topic (config source `DYNAMIC_TOPIC_CONFIG`): the source's broker defaults are the source's, not the topic's.
//! A sensitive value (none of a topic's are, in Kafka 4.1) comes without its value and is left out.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::connection::KafkaConnection;
use crate::error::LinkError;

/// The DescribeConfigs versions asked.
const DESCRIBE_CONFIGS_VERSIONS: (i16, i16) = (1, 3);

/// A topic resource, as ConfigResource names it.
const TOPIC_RESOURCE: i8 = 2;

/// A config set on the topic itself (`DYNAMIC_TOPIC_CONFIG`).
const DYNAMIC_TOPIC_CONFIG: i8 = 1;

/// Each of `topics`' overrides at the broker on `connection` (at `address`): name → value. A topic the broker
/// answers with an error is an error naming it and Kafka's error.
pub(crate) async fn topic_overrides(
    connection: &mut KafkaConnection,
    topics: &[String],
    address: &str,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, LinkError> {
    // A topic's answer is every config with its value (some 2–4 KiB): a request at most this many topics keeps
    // an answer far below the response bound, whatever the number of topics a link mirrors.
    let mut overrides = BTreeMap::new();
    for chunk in topics.chunks(TOPICS_PER_REQUEST) {
        overrides.extend(overrides_of(connection, chunk, address).await?);
    }
    Ok(overrides)
}

/// The most topics asked about in one DescribeConfigs.
const TOPICS_PER_REQUEST: usize = 100;

async fn overrides_of(
    connection: &mut KafkaConnection,
    topics: &[String],
    address: &str,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, LinkError> {
    let version = connection.version(ApiKey::DescribeConfigs, DESCRIBE_CONFIGS_VERSIONS)?;
    let mut request = DescribeConfigsRequest::default();
    request.resources = topics
        .iter()
        .map(|topic| {
            let mut resource = DescribeConfigsResource::default();
            resource.resource_type = TOPIC_RESOURCE;
            resource.resource_name = StrBytes::from_string(topic.clone());
            resource.configuration_keys = None;
            resource
        })
        .collect();
    request.include_synonyms = false;
    request.include_documentation = false;
    let answer: DescribeConfigsResponse = connection
        .call(ApiKey::DescribeConfigs, version, &request)
        .await?;
    let mut overrides = BTreeMap::new();
    for result in answer.results {
        let topic = result.resource_name.as_str().to_owned();
        if result.error_code != 0 {
            return Err(LinkError::Kafka {
                what: format!("DescribeConfigs of topic {topic} at {address}"),
                code: result.error_code,
                detail: result
                    .error_message
                    .map(|message| format!(" ({})", message.as_str()))
                    .unwrap_or_default(),
            });
        }
        if !topics.contains(&topic) {
            continue;
        }
        let set: BTreeMap<String, String> = result
            .configs
            .into_iter()
            .filter(|config| config.config_source == DYNAMIC_TOPIC_CONFIG && !config.is_sensitive)
            .filter_map(|config| Some((config.name.as_str().to_owned(), config.value?.as_str().to_owned())))
            .collect();
        overrides.insert(topic, set);
    }
    Ok(overrides)
}
