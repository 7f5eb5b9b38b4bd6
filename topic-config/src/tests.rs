#![allow(clippy::unwrap_used)] // a test fails by panicking

use super::*;

#[test]
fn the_table_is_sorted_unique_and_every_default_passes_its_own_check() {
    let names: Vec<&str> = TOPIC_CONFIGS.iter().map(|def| def.name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(names, sorted);
    for def in TOPIC_CONFIGS {
        check(def.name, def.default).unwrap_or_else(|error| panic!("{}: {error}", def.name));
    }
}

#[test]
fn an_unknown_name_a_wrong_type_and_an_out_of_range_value_are_refused_naming_the_config() {
    assert_eq!(
        check("retention.mss", "1").unwrap_err().to_string(),
        "Unknown topic config name: retention.mss"
    );
    assert_eq!(
        check("retention.ms", "abc").unwrap_err().to_string(),
        "Invalid value abc for configuration retention.ms: Not a number of type LONG"
    );
    assert_eq!(
        check("min.insync.replicas", "0").unwrap_err().to_string(),
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"
    );
    assert!(check("max.message.bytes", "3000000000").is_err(), "above an INT");
    assert!(check("cleanup.policy", "bogus")
        .unwrap_err()
        .to_string()
        .contains("cleanup.policy"));
    assert_eq!(
        check("cleanup.policy", "bogus").unwrap_err().to_string(),
        "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"
    );
    assert!(
        check("message.timestamp.type", "logappendtime").is_err(),
        "case-sensitive"
    );
    assert!(check("min.cleanable.dirty.ratio", "1.5").is_err());
    assert!(check("preallocate", "yes").is_err());
    assert!(check("compression.gzip.level", "0").is_err());
    assert!(check("leader.replication.throttled.replicas", "0:1,x").is_err());
    for good in [
        ("cleanup.policy", "compact,delete"),
        ("cleanup.policy", " delete , compact "),
        ("cleanup.policy", ""),
        ("retention.ms", " 1000 "),
        ("retention.ms", "-1"),
        ("preallocate", "TRUE"),
        ("leader.replication.throttled.replicas", "0:1, 1:2"),
        ("follower.replication.throttled.replicas", "*"),
        ("message.timestamp.type", "LogAppendTime"),
        ("compression.gzip.level", "9"),
    ] {
        check(good.0, good.1).unwrap_or_else(|error| panic!("{good:?}: {error}"));
    }
}

#[test]
fn a_value_serve_cannot_honour_is_refused_with_the_reason_and_its_default_is_accepted() {
    let error = check("compression.type", "zstd").unwrap_err();
    assert!(matches!(error, ConfigError::NotHonoured { .. }), "{error:?}");
    assert!(error.to_string().contains("compression.type"), "{error}");
    check("compression.type", "producer").unwrap();
    assert!(check("remote.storage.enable", "true").is_err());
    check("remote.storage.enable", "False").unwrap();
    check("max.compaction.lag.ms", "60000").unwrap();
    assert!(check("max.compaction.lag.ms", "0").is_err(), "at least 1");
    assert!(check("flush.messages", "1").is_err());
}

#[test]
fn pairs_with_a_null_value_are_refused_and_a_later_pair_wins() {
    assert_eq!(
        Overrides::from_pairs([
            ("retention.ms", None),
            ("segment.ms", Some("1")),
            ("cleanup.policy", None)
        ])
        .unwrap_err()
        .to_string(),
        "Null value not supported for topic configs: retention.ms,cleanup.policy"
    );
    let overrides =
        Overrides::from_pairs([("retention.ms", Some("1")), ("retention.ms", Some("2"))]).unwrap();
    assert_eq!(
        overrides.as_map().get("retention.ms").map(String::as_str),
        Some("2")
    );
}

#[test]
fn incremental_operations_set_delete_append_and_subtract_all_or_nothing() {
    let overrides = Overrides::from_pairs([("retention.ms", Some("1000"))]).unwrap();
    let op = |name, op, value| Operation { name, op, value };
    let altered = overrides
        .altered(&[
            op("cleanup.policy", 2, Some("compact")),
            op("retention.ms", 1, None),
            op("max.message.bytes", 0, Some("2000")),
        ])
        .unwrap();
    let map = altered.as_map();
    assert_eq!(
        map.get("cleanup.policy").map(String::as_str),
        Some("delete,compact")
    );
    assert_eq!(map.get("retention.ms"), None);
    let subtracted = altered
        .altered(&[op("cleanup.policy", 3, Some("delete"))])
        .unwrap();
    assert_eq!(
        subtracted.as_map().get("cleanup.policy").map(String::as_str),
        Some("compact")
    );
    // Subtracting the last item leaves an empty list, which Kafka accepts.
    let emptied = subtracted
        .altered(&[op("cleanup.policy", 3, Some("compact"))])
        .unwrap();
    assert_eq!(
        emptied.as_map().get("cleanup.policy").map(String::as_str),
        Some("")
    );
    assert_eq!(
        overrides
            .altered(&[op("retention.ms", 2, Some("5"))])
            .unwrap_err()
            .to_string(),
        "Can't APPEND to key retention.ms because its type is not LIST."
    );
    assert_eq!(
        overrides.altered(&[op("retention.ms", 0, None)]).unwrap_err(),
        ConfigError::NullSet("retention.ms".to_owned())
    );
    // Deleting what is not set, or is no config at all, changes nothing.
    assert_eq!(
        overrides.altered(&[op("no.such.config", 1, None)]).unwrap(),
        overrides
    );
    assert!(overrides.altered(&[op("retention.ms", 7, Some("5"))]).is_err());
    // One bad operation refuses the whole request.
    assert!(overrides
        .altered(&[op("max.message.bytes", 0, Some("2000")), op("nope", 0, Some("1"))])
        .is_err());
}

#[test]
fn described_values_come_from_the_override_then_the_broker_then_kafkas_default() {
    let overrides = Overrides::from_pairs([("retention.ms", Some("1000"))]).unwrap();
    let broker: BrokerSettings = [("message.max.bytes".to_owned(), "2000000".to_owned())].into();
    let described = overrides.describe(&broker, None);
    assert_eq!(described.len(), TOPIC_CONFIGS.len());
    let find = |name: &str| described.iter().find(|d| d.def.name == name).unwrap();
    let retention = find("retention.ms");
    assert_eq!(retention.value.value, "1000");
    assert_eq!(retention.value.source, ConfigSource::Topic);
    // log.retention.ms has no default of its own (it lives in log.retention.hours): no default synonym.
    assert_eq!(retention.synonyms.len(), 1);
    let segment = find("segment.bytes");
    assert_eq!(segment.synonyms.len(), 1);
    assert_eq!(
        (segment.synonyms[0].name.as_str(), segment.synonyms[0].source),
        ("log.segment.bytes", ConfigSource::Default)
    );
    assert!(find("retention.bytes").synonyms.len() == 1);
    assert!(find("remote.storage.enable").synonyms.is_empty());
    let max = find("max.message.bytes");
    assert_eq!(
        (max.value.name.as_str(), max.value.value.as_str()),
        ("max.message.bytes", "2000000")
    );
    assert_eq!(max.value.source, ConfigSource::StaticBroker);
    assert_eq!(max.synonyms[0].name, "message.max.bytes");
    assert_eq!(max.synonyms.len(), 2, "the broker's value, then Kafka's default");
    assert_eq!(find("cleanup.policy").value.source, ConfigSource::Default);
    let some = overrides.describe(&broker, Some(&["retention.ms", "no.such"]));
    assert_eq!(some.len(), 1);
}

#[test]
fn settings_follow_the_overrides_and_the_broker() {
    let broker: BrokerSettings = [("message.max.bytes".to_owned(), "2000000".to_owned())].into();
    let defaults = Overrides::default().settings(&broker);
    assert_eq!(defaults.max_message_bytes, 2_000_000);
    assert_eq!(defaults.timestamp_after_max_ms, 3_600_000);
    assert_eq!(defaults.timestamp_before_max_ms, i64::MAX);
    assert!(!defaults.log_append_time);
    let overrides = Overrides::from_pairs([
        ("max.message.bytes", Some("100")),
        ("message.timestamp.type", Some("LogAppendTime")),
        ("min.insync.replicas", Some("2")),
        ("retention.ms", Some("60000")),
        ("segment.ms", Some("604800000")),
    ])
    .unwrap();
    let settings = overrides.settings(&broker);
    assert_eq!(settings.max_message_bytes, 100);
    assert!(settings.log_append_time);
    assert_eq!(settings.retention_ms, 60_000);
    let kept: Vec<_> = overrides.kept_not_enforced().collect();
    assert!(
        kept.is_empty(),
        "retention.ms is applied, segment.ms is its default: {kept:?}"
    );
}

#[test]
fn retention_settings_come_from_the_topic_then_the_broker_and_compact_alone_deletes_nothing() {
    let defaults = Overrides::default().settings(&BrokerSettings::new());
    assert!(defaults.delete_by_retention);
    assert_eq!(
        (defaults.retention_ms, defaults.retention_bytes),
        (604_800_000, -1)
    );
    let broker: BrokerSettings = [
        ("log.retention.ms".to_owned(), "1000".to_owned()),
        ("log.retention.bytes".to_owned(), "5000".to_owned()),
    ]
    .into();
    let from_broker = Overrides::default().settings(&broker);
    assert_eq!(
        (from_broker.retention_ms, from_broker.retention_bytes),
        (1000, 5000)
    );
    let compact = Overrides::from_pairs([
        ("cleanup.policy", Some("compact")),
        ("retention.bytes", Some("10")),
    ])
    .unwrap();
    let settings = compact.settings(&broker);
    assert!(!settings.delete_by_retention);
    assert_eq!(settings.retention_bytes, 10);
    assert!(settings.compacted);
    assert!(
        compact.kept_not_enforced().next().is_none(),
        "compaction is applied"
    );
    let both = Overrides::from_pairs([("cleanup.policy", Some("compact, delete"))]).unwrap();
    assert!(both.settings(&broker).delete_by_retention);
}
