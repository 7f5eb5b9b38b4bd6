//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: topics' configs (crate `topic-config` says what each
//! means and accepts; `crate::topic_configs` keeps them) and the broker's, which are its start-up settings and
//! read-only.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_types::{KafkaError, NO_ERROR};
use topic_config::{ConfigSource, ConfigType, Operation, Overrides};

use super::str_bytes;
use crate::node::Node;
use crate::ConfigRefusal;

/// `ConfigResource.Type.TOPIC`.
const TOPIC: i8 = 2;
/// `ConfigResource.Type.BROKER`.
const BROKER: i8 = 4;
/// This node's broker id.
const BROKER_ID: &str = "0";

/// DescribeConfigs: a topic's configs with their sources (and synonyms, types and documentation when asked), or
/// the broker's settings.
pub async fn describe_configs(
    node: &Node,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let mut response = DescribeConfigsResponse::default();
    for resource in request.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        // Null asks for every config, and so does an empty list (as Kafka reads it).
        let keys: Option<Vec<&str>> = resource
            .configuration_keys
            .as_ref()
            .filter(|keys| !keys.is_empty())
            .map(|keys| keys.iter().map(|key| key.as_str()).collect());
        let answer = match resource.resource_type {
            TOPIC => describe_topic(node, resource.resource_name.as_str(), keys.as_deref()).await,
            BROKER => describe_broker(node, resource.resource_name.as_str(), keys.as_deref()),
            other => Err(unsupported_resource(other)),
        };
        match answer {
            Ok(entries) => {
                result.configs = entries
                    .into_iter()
                    .map(|entry| {
                        entry.answer(request.include_synonyms, request.include_documentation, version)
                    })
                    .collect();
            }
            Err(refusal) => {
                result.error_code = refusal.error.code();
                result.error_message = refusal.message.map(|message| str_bytes(&message));
            }
        }
        response.results.push(result);
    }
    response
}

/// One described config, before it is put in the answer's shape.
struct Entry {
    name: String,
    value: String,
    source: ConfigSource,
    read_only: bool,
    kind: ConfigType,
    doc: &'static str,
    /// `(name, value, source)`, the one in force first.
    synonyms: Vec<(String, String, ConfigSource)>,
}

impl Entry {
    fn answer(self, synonyms: bool, documentation: bool, version: i16) -> DescribeConfigsResourceResult {
        let mut result = DescribeConfigsResourceResult::default();
        result.name = str_bytes(&self.name);
        result.value = Some(str_bytes(&self.value));
        result.read_only = self.read_only;
        result.config_source = self.source.code();
        result.is_sensitive = false;
        if synonyms {
            result.synonyms = self
                .synonyms
                .into_iter()
                .map(|(name, value, source)| {
                    let mut synonym = DescribeConfigsSynonym::default();
                    synonym.name = str_bytes(&name);
                    synonym.value = Some(str_bytes(&value));
                    synonym.source = source.code();
                    synonym
                })
                .collect();
        }
        if version >= 3 {
            result.config_type = self.kind.code();
            if documentation {
                result.documentation = Some(str_bytes(self.doc));
            }
        }
        result
    }
}

async fn describe_topic(
    node: &Node,
    topic: &str,
    keys: Option<&[&str]>,
) -> Result<Vec<Entry>, ConfigRefusal> {
    let described = node.describe_topic_configs(topic, keys).await?;
    Ok(described
        .into_iter()
        .map(|described| Entry {
            name: described.value.name,
            value: described.value.value,
            source: described.value.source,
            read_only: false,
            kind: described.def.kind,
            doc: described.def.doc,
            synonyms: described
                .synonyms
                .into_iter()
                .map(|synonym| (synonym.name, synonym.value, synonym.source))
                .collect(),
        })
        .collect())
}

/// The broker's settings that shape what clients see, each with Kafka's default beside it: read-only (they are
/// `serve`'s command-line flags).
fn describe_broker(node: &Node, name: &str, keys: Option<&[&str]>) -> Result<Vec<Entry>, ConfigRefusal> {
    // The empty name is the cluster-wide dynamic defaults: serve has none.
    if name.is_empty() {
        return Ok(Vec::new());
    }
    let refused = |message: String| ConfigRefusal {
        error: KafkaError::InvalidRequest,
        message: Some(message),
    };
    if name.parse::<i32>().is_err() {
        return Err(refused(format!(
            "Broker id must be an integer, but it is: {name}"
        )));
    }
    if name != BROKER_ID {
        return Err(refused(format!(
            "Unexpected broker id, expected {BROKER_ID} or empty string, but received {name}"
        )));
    }
    let config = node.config();
    let settings: [(&str, ConfigType, String, &str, &'static str); 12] = [
        ("auto.create.topics.enable", ConfigType::Boolean, config.auto_create_topics.to_string(), "true", "Create a topic a Metadata request names when it does not exist."),
        ("log.cleaner.io.max.bytes.per.second", ConfigType::Double, java_double(config.cleaner_io_max_bytes_per_second), "1.7976931348623157E308", "The most bytes per second the log cleaner reads and writes, all its passes together."),
        ("log.message.timestamp.after.max.ms", ConfigType::Long, config.max_timestamp_ahead_ms.to_string(), "3600000", "How far ahead of the broker's clock a record's timestamp may be, for topics without their own setting."),
        ("log.message.timestamp.before.max.ms", ConfigType::Long, config.max_timestamp_behind_ms.to_string(), topic_config::definition("message.timestamp.before.max.ms").map_or("", |def| def.default), "How far behind the broker's clock a record's timestamp may be, for topics without their own setting."),
        ("log.retention.bytes", ConfigType::Long, config.log_retention_bytes.to_string(), "-1", "The size a partition may grow to before its oldest data is deleted, for topics without their own retention.bytes (-1: no bound)."),
        ("log.retention.ms", ConfigType::Long, config.log_retention_ms.to_string(), "604800000", "How long data is kept, for topics without their own retention.ms (-1: forever)."),
        ("message.max.bytes", ConfigType::Int, config.max_message_bytes.to_string(), "1048588", "The largest record batch a produce may write, for topics without their own max.message.bytes."),
        ("node.id", ConfigType::Int, BROKER_ID.to_owned(), "-1", "This broker's id."),
        ("num.partitions", ConfigType::Int, config.default_partitions.to_string(), "1", "Partitions of an auto-created topic."),
        ("producer.id.expiration.ms", ConfigType::Int, config.producer_id_expiration_ms.to_string(), "86400000", "How long an idle idempotent producer's state is kept."),
        ("transaction.max.timeout.ms", ConfigType::Int, config.max_transaction_timeout_ms.to_string(), "900000", "The longest transaction timeout a producer may ask for."),
        ("transactional.id.expiration.ms", ConfigType::Int, config.transactional_id_expiration_ms.to_string(), "604800000", "How long an idle transactional id is kept."),
    ];
    Ok(settings
        .into_iter()
        .filter(|(name, ..)| keys.is_none_or(|keys| keys.contains(name)))
        .map(|(name, kind, value, default, doc)| {
            let source = if value == default {
                ConfigSource::Default
            } else {
                ConfigSource::StaticBroker
            };
            let mut synonyms = Vec::new();
            if source == ConfigSource::StaticBroker {
                synonyms.push((name.to_owned(), value.clone(), ConfigSource::StaticBroker));
            }
            synonyms.push((name.to_owned(), default.to_owned(), ConfigSource::Default));
            Entry {
                name: name.to_owned(),
                value,
                source,
                read_only: true,
                kind,
                doc,
                synonyms,
            }
        })
        .collect())
}

/// `value` as Java's `Double.toString` writes it (what Kafka's DescribeConfigs shows for a DOUBLE): the shortest
/// digits that read back as `value`, in plain notation from 10⁻³ up to 10⁷ (`1048576.0`), in computerized
/// scientific notation otherwise (`1.0E7`, `1.7976931348623157E308`).
fn java_double(value: f64) -> String {
    if !value.is_finite() {
        return if value.is_nan() {
            "NaN".to_owned()
        } else if value > 0.0 {
            "Infinity".to_owned()
        } else {
            "-Infinity".to_owned()
        };
    }
    let magnitude = value.abs();
    if value == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let plain = format!("{value}");
        return if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        };
    }
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_owned()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exponent}")
}

fn unsupported_resource(resource_type: i8) -> ConfigRefusal {
    ConfigRefusal {
        error: KafkaError::InvalidRequest,
        message: Some(format!("serve has no configs for resource type {resource_type}")),
    }
}

/// The refusal of an alteration of the broker's settings.
fn broker_read_only() -> ConfigRefusal {
    ConfigRefusal {
        error: KafkaError::InvalidRequest,
        message: Some(
            "serve's broker settings are its command-line flags: they cannot be altered while it serves"
                .to_owned(),
        ),
    }
}

/// A resource's alteration: the topic's overrides altered by `alter`, the broker's refused.
async fn alter_resource(
    node: &Node,
    (resource_type, name): (i8, &str),
    alter: impl FnOnce(&Overrides) -> Result<Overrides, topic_config::ConfigError>,
    validate_only: bool,
) -> (i16, Option<StrBytes>) {
    let outcome = match resource_type {
        TOPIC => node.alter_topic_configs(name, alter, validate_only).await,
        BROKER => Err(broker_read_only()),
        other => Err(unsupported_resource(other)),
    };
    answer_of(outcome)
}

/// The error code and message of an outcome (no message on success, as Kafka answers).
pub(super) fn answer_of(outcome: Result<(), ConfigRefusal>) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (NO_ERROR, None),
        Err(refusal) => (
            refusal.error.code(),
            refusal.message.map(|message| str_bytes(&message)),
        ),
    }
}

/// AlterConfigs: replaces a topic's overrides with the request's (Kafka's legacy, non-incremental semantics).
pub async fn alter_configs(node: &Node, request: AlterConfigsRequest, _version: i16) -> AlterConfigsResponse {
    let mut response = AlterConfigsResponse::default();
    for resource in request.resources {
        let pairs: Vec<(&str, Option<&str>)> = resource
            .configs
            .iter()
            .map(|config| (config.name.as_str(), config.value.as_deref()))
            .collect();
        let target = (resource.resource_type, resource.resource_name.as_str());
        let (code, message) = match duplicate_keys(pairs.iter().map(|(name, _)| *name)) {
            // Kafka refuses the resource whole, before looking at its type or name.
            Some(refusal) => answer_of(Err(refusal)),
            None => {
                alter_resource(
                    node,
                    target,
                    |_| Overrides::from_pairs(pairs),
                    request.validate_only,
                )
                .await
            }
        };
        let mut answer = alter_configs_response::AlterConfigsResourceResponse::default();
        answer.resource_type = resource.resource_type;
        answer.resource_name = resource.resource_name.clone();
        answer.error_code = code;
        answer.error_message = message;
        response.responses.push(answer);
    }
    response
}

/// INVALID_REQUEST naming the config names a resource repeats (in the order they first repeat), as Kafka refuses
/// an AlterConfigs or IncrementalAlterConfigs resource that names a config twice.
fn duplicate_keys<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> Option<ConfigRefusal> {
    // Each name: false once seen, true once named in `repeated`.
    let mut seen = std::collections::HashMap::with_capacity(names.len());
    let mut repeated: Vec<&str> = Vec::new();
    for name in names {
        match seen.entry(name) {
            std::collections::hash_map::Entry::Vacant(first) => {
                first.insert(false);
            }
            std::collections::hash_map::Entry::Occupied(mut again) if !again.get() => {
                again.insert(true);
                repeated.push(name);
            }
            std::collections::hash_map::Entry::Occupied(_) => {}
        }
    }
    (!repeated.is_empty()).then(|| ConfigRefusal {
        error: KafkaError::InvalidRequest,
        message: Some(format!(
            "Error due to duplicate config keys : {}",
            repeated.join(",")
        )),
    })
}

/// IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on a topic's overrides, all of a resource's or none.
pub async fn incremental_alter_configs(
    node: &Node,
    request: IncrementalAlterConfigsRequest,
    _version: i16,
) -> IncrementalAlterConfigsResponse {
    let mut response = IncrementalAlterConfigsResponse::default();
    for resource in request.resources {
        let operations: Vec<Operation<'_>> = resource
            .configs
            .iter()
            .map(|config| Operation {
                name: config.name.as_str(),
                op: config.config_operation,
                value: config.value.as_deref(),
            })
            .collect();
        let target = (resource.resource_type, resource.resource_name.as_str());
        let (code, message) = match duplicate_keys(operations.iter().map(|operation| operation.name)) {
            // Kafka refuses the resource whole, before looking at its type or name.
            Some(refusal) => answer_of(Err(refusal)),
            None => {
                alter_resource(
                    node,
                    target,
                    |current| current.altered(&operations),
                    request.validate_only,
                )
                .await
            }
        };
        let mut answer = incremental_alter_configs_response::AlterConfigsResourceResponse::default();
        answer.resource_type = resource.resource_type;
        answer.resource_name = resource.resource_name.clone();
        answer.error_code = code;
        answer.error_message = message;
        response.responses.push(answer);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::java_double;

    #[test]
    fn doubles_are_written_as_javas_double_to_string_writes_them() {
        for (value, java) in [
            (f64::MAX, "1.7976931348623157E308"),
            (1_048_576.0, "1048576.0"),
            (0.5, "0.5"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1e7, "1.0E7"),
            (1.5e7, "1.5E7"),
            (0.0, "0.0"),
        ] {
            assert_eq!(java_double(value), java, "{value}");
        }
    }
}
