//! A mirror topic's configs, taken from its source's topic (issue 53, item 2; ADR 0059): at creation and at each
//! check of the link's source, the topic's overrides here become the source topic's overrides for every config
//! the link syncs (all but `mirror.topic.properties.exclude`), and keep their own value for every config it does
//! not. A source value this cluster cannot honour (a config `serve` accepts only at Kafka's default) is not taken:
//! the topic keeps its own value and the link says why. Once the topic is failed over, nothing syncs it any more:
//! its configs are its own.

use std::collections::BTreeMap;

use topic_config::Overrides;

use super::registry::LinkSettings;

/// What a mirror topic's overrides become.
#[derive(Debug)]
pub(super) struct Synced {
    /// The overrides to hold.
    pub(super) overrides: Overrides,
    /// The source's values not taken, each with why.
    pub(super) refused: Vec<String>,
}

/// The overrides a mirror topic holding `local` takes from its source topic's `source` overrides under `settings`.
pub(super) fn synced(
    settings: &LinkSettings,
    local: &BTreeMap<String, String>,
    source: &BTreeMap<String, String>,
) -> Synced {
    let mut wanted: BTreeMap<String, String> = local
        .iter()
        .filter(|(name, _)| !settings.syncs_config(name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let mut refused = Vec::new();
    for (name, value) in source.iter().filter(|(name, _)| settings.syncs_config(name)) {
        match topic_config::check(name, value) {
            Ok(_) => {
                wanted.insert(name.clone(), value.clone());
            }
            Err(error) => {
                refused.push(format!(
                    "config {name}={value} is not taken from the source: {error}"
                ));
                if let Some(own) = local.get(name) {
                    wanted.insert(name.clone(), own.clone());
                }
            }
        }
    }
    // Every value was checked one by one above, and the local ones when they were set.
    match Overrides::from_stored(wanted) {
        Ok(overrides) => Synced { overrides, refused },
        Err(error) => {
            refused.push(format!("the configs taken together are refused: {error}"));
            Synced {
                overrides: Overrides::from_stored(local.clone()).unwrap_or_default(),
                refused,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test fails by panicking

    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_source_values_replace_synced_configs_and_unsynced_ones_stay_local() {
        let local = map(&[
            ("retention.ms", "1000"),
            ("min.insync.replicas", "1"),
            ("segment.ms", "5000"),
        ]);
        let source = map(&[("retention.ms", "86400000"), ("min.insync.replicas", "2")]);
        let synced = synced(&LinkSettings::default(), &local, &source);
        assert!(synced.refused.is_empty(), "{:?}", synced.refused);
        assert_eq!(
            synced.overrides.as_map(),
            &map(&[("min.insync.replicas", "1"), ("retention.ms", "86400000")]),
            "segment.ms gone (not set at the source), min.insync.replicas kept (not synced)"
        );
    }

    #[test]
    fn a_source_value_this_cluster_refuses_is_not_taken_and_says_why() {
        let local = map(&[("retention.ms", "1000")]);
        let source = map(&[("retention.ms", "2000"), ("no.such.config", "1")]);
        let synced = synced(&LinkSettings::default(), &local, &source);
        assert_eq!(synced.overrides.as_map(), &map(&[("retention.ms", "2000")]));
        assert_eq!(synced.refused.len(), 1);
        assert!(
            synced.refused[0].contains("no.such.config=1"),
            "{:?}",
            synced.refused
        );
    }
}
