//! A link's settings as Kafka-style configuration keys (issue 53, item 5; ADR 0059): what `mirrorlog mirror alter
//! --config KEY=VALUE` changes while the link runs and `mirror describe --config` shows, each key with its value and
//! whether that is the default. Names follow KIP-1279's prototype (`mirror.topics.include`, …); lists are
//! comma-separated, as Kafka's `LIST` configs are (a pattern that needs a comma goes through `mirror create
//! --include`). A change is checked whole before anything changes: an unknown key, a value out of range or a
//! pattern that does not compile is refused with the key named.

use std::collections::BTreeMap;

use super::error::MirrorError;
use super::filters::{effective_topic_exclude, Patterns, DEFAULT_TOPIC_EXCLUDE};
use super::registry::LinkSettings;
use mirror_admin::ConfigEntry;

/// Topic include patterns: source topics they select are mirrored as they appear.
pub const TOPICS_INCLUDE: &str = "mirror.topics.include";
/// Topic exclude patterns: never added; a mirrored topic they come to match is stopped (failed over).
pub const TOPICS_EXCLUDE: &str = "mirror.topics.exclude";
/// Group include patterns: the groups whose offsets are copied (default: every group).
pub const GROUPS_INCLUDE: &str = "mirror.groups.include";
/// Group exclude patterns: groups whose offsets are never copied.
pub const GROUPS_EXCLUDE: &str = "mirror.groups.exclude";
/// How often the link's source topics are checked.
pub const METADATA_REFRESH_INTERVAL: &str = "mirror.metadata.refresh.interval.ms";
/// How often the link's group offsets are copied.
pub const GROUPS_SYNC_INTERVAL: &str = "mirror.groups.sync.interval.ms";

/// Topic configs a mirror topic does not take from its source (each stays this cluster's own).
pub const TOPIC_PROPERTIES_EXCLUDE: &str = "mirror.topic.properties.exclude";

/// ACL rules: the source's ACLs they select are created here (default: none, ACLs are not synced).
pub const ACL_INCLUDE: &str = "mirror.acl.include";

/// The most one round asks of the link's source, all its partitions together (Kafka's consumer `fetch.max.bytes`).
pub const FETCH_MAX_BYTES: &str = "mirror.fetch.max.bytes";
/// The most one partition's answer in a round carries (Kafka's consumer `max.partition.fetch.bytes`); a batch
/// larger than that still comes whole, as Kafka sends it.
pub const MAX_PARTITION_FETCH_BYTES: &str = "mirror.max.partition.fetch.bytes";
/// The longest wait between a FAILED partition's retries (Kafka's clients' `retry.backoff.max.ms`).
pub const RETRY_BACKOFF_MAX: &str = "mirror.retry.backoff.max.ms";

/// Every key, in the order `describe --config` shows them.
pub const KEYS: [&str; 11] = [
    TOPICS_INCLUDE,
    TOPICS_EXCLUDE,
    GROUPS_INCLUDE,
    GROUPS_EXCLUDE,
    METADATA_REFRESH_INTERVAL,
    GROUPS_SYNC_INTERVAL,
    TOPIC_PROPERTIES_EXCLUDE,
    ACL_INCLUDE,
    FETCH_MAX_BYTES,
    MAX_PARTITION_FETCH_BYTES,
    RETRY_BACKOFF_MAX,
];

/// A round's size when the link sets none: small rounds are fast rounds (`links::ROUND_LIMITS` says why).
pub const DEFAULT_FETCH_BYTES: i64 = 2 << 20;
/// The smallest fetch size accepted.
pub const MIN_FETCH_BYTES: i64 = 1 << 10;
/// The largest fetch size accepted: the largest answer a link reads (`mirror_link::cluster::MAX_RESPONSE_BYTES`).
pub const MAX_FETCH_BYTES: i64 = 32 << 20;
/// The longest wait between retries accepted: an hour.
pub const MAX_RETRY_BACKOFF_MS: i64 = 3_600_000;

/// The topic configs not synced by default (KIP-1279's list): replication throttles and `min.insync.replicas`
/// describe this cluster's replicas, not the data; the timestamp settings would judge records this cluster does not
/// produce; unclean leader election is this cluster's own trade-off.
pub const DEFAULT_TOPIC_PROPERTIES_EXCLUDE: [&str; 8] = [
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "min.insync.replicas",
    "unclean.leader.election.enable",
];

/// The shortest interval accepted (a check asks the source a Metadata question each time).
pub const MIN_INTERVAL_MS: i64 = 100;
/// The longest interval accepted: a day.
pub const MAX_INTERVAL_MS: i64 = 86_400_000;

/// The node's intervals, which a link without its own uses (`None`: never).
#[derive(Debug, Clone, Copy)]
pub struct NodeIntervals {
    /// The source topic check's (`serve --mirror-metadata-refresh-ms`).
    pub metadata_refresh_ms: Option<i64>,
    /// The group offset copy's.
    pub group_sync_ms: Option<i64>,
}

/// Every key of `settings` with its value, and whether it is the default.
pub fn entries(settings: &LinkSettings, node: NodeIntervals) -> Vec<ConfigEntry> {
    let entry = |name: &str, value: String, default: bool| ConfigEntry {
        name: name.to_owned(),
        value,
        default,
    };
    let interval = |own: Option<i64>, node: Option<i64>| match (own, node) {
        (Some(own), _) => (own.to_string(), false),
        (None, Some(node)) => (node.to_string(), true),
        (None, None) => ("never".to_owned(), true),
    };
    let default_exclude = effective_topic_exclude(&settings.include, Vec::new());
    let (refresh, refresh_default) =
        interval(settings.metadata_refresh_interval_ms, node.metadata_refresh_ms);
    let (sync, sync_default) = interval(settings.group_sync_interval_ms, node.group_sync_ms);
    vec![
        entry(
            TOPICS_INCLUDE,
            settings.include.join(","),
            settings.include.is_empty(),
        ),
        entry(
            TOPICS_EXCLUDE,
            settings.exclude.join(","),
            settings.exclude == default_exclude,
        ),
        if settings.groups_include.is_empty() {
            entry(GROUPS_INCLUDE, ".*".to_owned(), true)
        } else {
            entry(GROUPS_INCLUDE, settings.groups_include.join(","), false)
        },
        entry(
            GROUPS_EXCLUDE,
            settings.groups_exclude.join(","),
            settings.groups_exclude.is_empty(),
        ),
        entry(METADATA_REFRESH_INTERVAL, refresh, refresh_default),
        entry(GROUPS_SYNC_INTERVAL, sync, sync_default),
        match &settings.topic_properties_exclude {
            Some(excluded) => entry(TOPIC_PROPERTIES_EXCLUDE, excluded.join(","), false),
            None => entry(
                TOPIC_PROPERTIES_EXCLUDE,
                DEFAULT_TOPIC_PROPERTIES_EXCLUDE.join(","),
                true,
            ),
        },
        entry(
            ACL_INCLUDE,
            settings.acl_include.join(","),
            settings.acl_include.is_empty(),
        ),
        number(FETCH_MAX_BYTES, settings.fetch_max_bytes, DEFAULT_FETCH_BYTES),
        number(
            MAX_PARTITION_FETCH_BYTES,
            settings.max_partition_fetch_bytes,
            DEFAULT_FETCH_BYTES,
        ),
        number(
            RETRY_BACKOFF_MAX,
            settings.retry_backoff_max_ms,
            mirror_fsm::machine::MAX_BACKOFF_MS,
        ),
    ]
}

/// A numeric key's entry: its own value, else its default.
fn number(name: &str, own: Option<i64>, default: i64) -> ConfigEntry {
    ConfigEntry {
        name: name.to_owned(),
        value: own.unwrap_or(default).to_string(),
        default: own.is_none(),
    }
}

/// `settings` with the keys of `set` given their values and those of `delete` back to their defaults — or why the
/// change is refused, naming the key. Nothing is half applied: the caller records the result whole.
pub fn altered(
    settings: &LinkSettings,
    set: &BTreeMap<String, String>,
    delete: &[String],
) -> Result<LinkSettings, MirrorError> {
    if set.is_empty() && delete.is_empty() {
        return Err(MirrorError::InvalidRequest(
            "name a config to set (--config KEY=VALUE) or to reset (--delete-config KEY)".to_owned(),
        ));
    }
    let mut next = settings.clone();
    for key in delete {
        known(key)?;
        if set.contains_key(key) {
            return Err(MirrorError::InvalidRequest(format!(
                "config {key} is both set and deleted"
            )));
        }
        match key.as_str() {
            TOPICS_INCLUDE => next.include.clear(),
            TOPICS_EXCLUDE => next.exclude.clear(),
            GROUPS_INCLUDE => next.groups_include.clear(),
            GROUPS_EXCLUDE => next.groups_exclude.clear(),
            METADATA_REFRESH_INTERVAL => next.metadata_refresh_interval_ms = None,
            GROUPS_SYNC_INTERVAL => next.group_sync_interval_ms = None,
            ACL_INCLUDE => next.acl_include.clear(),
            FETCH_MAX_BYTES => next.fetch_max_bytes = None,
            MAX_PARTITION_FETCH_BYTES => next.max_partition_fetch_bytes = None,
            RETRY_BACKOFF_MAX => next.retry_backoff_max_ms = None,
            _ => next.topic_properties_exclude = None,
        }
    }
    for (key, value) in set {
        known(key)?;
        match key.as_str() {
            TOPICS_INCLUDE => next.include = list(value),
            TOPICS_EXCLUDE => next.exclude = list(value),
            GROUPS_INCLUDE => next.groups_include = list(value),
            GROUPS_EXCLUDE => next.groups_exclude = list(value),
            METADATA_REFRESH_INTERVAL => next.metadata_refresh_interval_ms = Some(interval(key, value)?),
            GROUPS_SYNC_INTERVAL => next.group_sync_interval_ms = Some(interval(key, value)?),
            ACL_INCLUDE => next.acl_include = list(value),
            FETCH_MAX_BYTES | MAX_PARTITION_FETCH_BYTES => {
                let bytes = Some(within(key, value, MIN_FETCH_BYTES, MAX_FETCH_BYTES, "bytes")?);
                if key == FETCH_MAX_BYTES {
                    next.fetch_max_bytes = bytes;
                } else {
                    next.max_partition_fetch_bytes = bytes;
                }
            }
            RETRY_BACKOFF_MAX => {
                next.retry_backoff_max_ms = Some(within(
                    key,
                    value,
                    mirror_fsm::machine::INITIAL_BACKOFF_MS,
                    MAX_RETRY_BACKOFF_MS,
                    "milliseconds",
                )?);
            }
            _ => next.topic_properties_exclude = Some(config_names(key, value)?),
        }
    }
    // The implicit `__.*` goes with the last include pattern; an operator's own exclude list stays.
    if next.include.is_empty() && next.exclude == [DEFAULT_TOPIC_EXCLUDE] {
        next.exclude.clear();
    }
    next.exclude = effective_topic_exclude(&next.include, std::mem::take(&mut next.exclude));
    Patterns::new(&next.include, &next.exclude)
        .map_err(|error| named(TOPICS_INCLUDE, TOPICS_EXCLUDE, error))?;
    Patterns::new(&next.groups_include, &next.groups_exclude)
        .map_err(|error| named(GROUPS_INCLUDE, GROUPS_EXCLUDE, error))?;
    super::acl_sync::parse_rules(&next.acl_include)
        .map_err(|error| MirrorError::InvalidRequest(format!("config {ACL_INCLUDE}: {error}")))?;
    Ok(next)
}

fn known(key: &str) -> Result<(), MirrorError> {
    if KEYS.contains(&key) {
        Ok(())
    } else {
        Err(MirrorError::InvalidRequest(format!(
            "unknown link config {key:?}: a link takes {}",
            KEYS.join(", ")
        )))
    }
}

/// A comma-separated list, each item trimmed, empty items dropped.
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A list of topic config names, each one Kafka 4.1 knows (a misspelt name would exclude nothing, silently).
fn config_names(key: &str, value: &str) -> Result<Vec<String>, MirrorError> {
    let names = list(value);
    match names.iter().find(|name| topic_config::definition(name).is_none()) {
        Some(unknown) => Err(MirrorError::InvalidRequest(format!(
            "config {key}: {unknown:?} is not a topic config"
        ))),
        None => Ok(names),
    }
}

fn interval(key: &str, value: &str) -> Result<i64, MirrorError> {
    within(key, value, MIN_INTERVAL_MS, MAX_INTERVAL_MS, "milliseconds")
}

/// A whole number of `unit` from `min` to `max`, or the refusal naming `key`.
fn within(key: &str, value: &str, min: i64, max: i64, unit: &str) -> Result<i64, MirrorError> {
    value
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|number| (min..=max).contains(number))
        .ok_or_else(|| {
            MirrorError::InvalidRequest(format!(
                "config {key}={value:?} is refused: a whole number of {unit} from {min} to {max}"
            ))
        })
}

/// A pattern error with the config key it came from (`include` or `exclude` in its message says which: a
/// refused pattern's message starts with its kind, a count's names it after the number).
fn named(include_key: &str, exclude_key: &str, error: MirrorError) -> MirrorError {
    let message = error.to_string();
    let key = if message.starts_with("exclude") || message.contains(" exclude patterns") {
        exclude_key
    } else {
        include_key
    };
    MirrorError::InvalidRequest(format!("config {key}: {message}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test fails by panicking

    use super::*;

    fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    const NODE: NodeIntervals = NodeIntervals {
        metadata_refresh_ms: Some(30_000),
        group_sync_ms: Some(5_000),
    };

    #[test]
    fn a_new_link_shows_every_key_at_its_default() {
        let shown = entries(&LinkSettings::default(), NODE);
        let names: Vec<&str> = shown.iter().map(|entry| entry.name.as_str()).collect();
        assert_eq!(names, KEYS);
        assert!(shown.iter().all(|entry| entry.default), "{shown:?}");
        assert_eq!(shown[2].value, ".*");
        assert_eq!(shown[4].value, "30000");
        assert_eq!(shown[8].value, "2097152");
        assert_eq!(shown[10].value, "30000");
        assert_eq!(shown[5].value, "5000");
        assert!(shown[6].value.contains("min.insync.replicas"));
        let settings = LinkSettings::default();
        assert!(settings.syncs_config("retention.ms") && !settings.syncs_config("min.insync.replicas"));
        let own = altered(
            &settings,
            &set(&[(TOPIC_PROPERTIES_EXCLUDE, "retention.ms")]),
            &[],
        )
        .unwrap();
        assert!(!own.syncs_config("retention.ms") && own.syncs_config("min.insync.replicas"));
    }

    #[test]
    fn set_values_replace_defaults_and_deleting_a_key_brings_its_default_back() {
        let changed = altered(
            &LinkSettings::default(),
            &set(&[
                (TOPICS_INCLUDE, r"orders\..*, payments"),
                (METADATA_REFRESH_INTERVAL, "1000"),
                (GROUPS_EXCLUDE, "test-.*"),
            ]),
            &[],
        )
        .unwrap();
        assert_eq!(changed.include, vec![r"orders\..*", "payments"]);
        assert_eq!(
            changed.exclude,
            vec!["__.*"],
            "include patterns bring the default exclude list"
        );
        assert_eq!(changed.metadata_refresh_interval_ms, Some(1_000));
        assert_eq!(changed.groups_exclude, vec!["test-.*"]);
        let shown = entries(&changed, NODE);
        assert!(!shown[0].default && shown[1].default && !shown[3].default && !shown[4].default);
        assert_eq!(shown[4].value, "1000");
        let reset = altered(
            &changed,
            &BTreeMap::new(),
            &[METADATA_REFRESH_INTERVAL.to_owned()],
        )
        .unwrap();
        let no_include = altered(&changed, &BTreeMap::new(), &[TOPICS_INCLUDE.to_owned()]).unwrap();
        assert!(
            no_include.exclude.is_empty(),
            "the implicit __.* goes with the last include pattern"
        );
        let own = altered(
            &changed,
            &set(&[(TOPICS_EXCLUDE, "tmp-.*")]),
            &[TOPICS_INCLUDE.to_owned()],
        )
        .unwrap();
        assert_eq!(own.exclude, vec!["tmp-.*"], "an operator's exclude list stays");
        assert_eq!(reset.metadata_refresh_interval_ms, None);
        assert_eq!(reset.include, changed.include, "only the deleted key changed");
    }

    #[test]
    fn a_bad_change_is_refused_whole_naming_its_key() {
        let refused = |pairs: &[(&str, &str)], delete: &[&str]| {
            let delete: Vec<String> = delete.iter().map(|key| key.to_string()).collect();
            let error = altered(&LinkSettings::default(), &set(pairs), &delete).unwrap_err();
            assert_eq!(error.category(), "invalid_request");
            error.to_string()
        };
        assert!(refused(&[("mirror.topic.include", "x")], &[])
            .contains("unknown link config \"mirror.topic.include\""));
        assert!(refused(&[(METADATA_REFRESH_INTERVAL, "10")], &[]).contains(METADATA_REFRESH_INTERVAL));
        assert!(refused(&[(GROUPS_SYNC_INTERVAL, "soon")], &[]).contains(GROUPS_SYNC_INTERVAL));
        assert!(refused(&[(TOPICS_INCLUDE, "orders(")], &[]).contains(TOPICS_INCLUDE));
        assert!(refused(&[(TOPICS_INCLUDE, "x"), (TOPICS_EXCLUDE, "[")], &[]).contains(TOPICS_EXCLUDE));
        assert!(refused(&[(GROUPS_INCLUDE, "(")], &[]).contains(GROUPS_INCLUDE));
        assert!(refused(&[(TOPICS_INCLUDE, "x")], &[TOPICS_INCLUDE]).contains("both set and deleted"));
        assert!(refused(&[], &[]).contains("name a config"));
        assert!(refused(&[], &["nope"]).contains("unknown link config"));
        assert!(refused(&[(ACL_INCLUDE, "topic;orders")], &[]).contains(ACL_INCLUDE));
        assert!(
            refused(&[(TOPIC_PROPERTIES_EXCLUDE, "retention.ms,retention.msec")], &[])
                .contains("retention.msec")
        );
        assert!(refused(&[(FETCH_MAX_BYTES, "100")], &[]).contains(FETCH_MAX_BYTES));
        assert!(refused(&[(MAX_PARTITION_FETCH_BYTES, "67108864")], &[]).contains("33554432"));
        assert!(refused(&[(RETRY_BACKOFF_MAX, "-1")], &[]).contains(RETRY_BACKOFF_MAX));
    }
}
