//! Kafka 4.1's topic configs, and what `mirrorlog serve` does with each.
//!
//! [`TOPIC_CONFIGS`] lists every topic-level config Kafka 4.1 accepts with its type, Kafka's default, the values it
//! takes and the broker settings it falls back to. A topic's overrides ([`Overrides`]) are checked against that
//! table the way Kafka checks them (an unknown name, a value of the wrong type, out of range or not among the
//! valid ones is refused, naming the config), and against what `serve` can honour: every config has an
//! [`Effect`], and a value whose effect `serve` cannot deliver is refused with the reason, never accepted and
//! ignored (ADR 0052).
//!
//! The crate knows no wire format: the node turns [`Overrides::describe`] into a DescribeConfigs answer and
//! [`ConfigError`] into INVALID_CONFIG with its message.

mod defs;

use std::collections::BTreeMap;

pub use defs::TOPIC_CONFIGS;

/// A config's type, as DescribeConfigs v3+ names it (`config_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// `true` or `false`.
    Boolean,
    /// A string.
    String,
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    Long,
    /// A double.
    Double,
    /// A comma-separated list.
    List,
}

impl ConfigType {
    /// The wire code (`DescribeConfigsResponse.ConfigType`).
    pub const fn code(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::String => "STRING",
            ConfigType::Int => "INT",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::List => "LIST",
        }
    }
}

/// What values a config takes beyond its type.
#[derive(Debug, Clone, Copy)]
pub enum Check {
    /// Any value of the type.
    None,
    /// `true` or `false` (any case, as Kafka parses booleans).
    Boolean,
    /// An INT at least this.
    IntAtLeast(i32),
    /// An INT within these bounds.
    IntRange(i32, i32),
    /// -1 or 1 to 9 (gzip's levels).
    GzipLevel,
    /// A LONG at least this.
    LongAtLeast(i64),
    /// A DOUBLE within these bounds.
    DoubleRange(f64, f64),
    /// One of these strings (case-sensitive, as Kafka's `ValidString`).
    OneOf(&'static [&'static str]),
    /// A non-empty list whose items are among these (Kafka's `ValidList`).
    ListOf(&'static [&'static str]),
    /// Empty, `*`, or `partition:broker` pairs (Kafka's throttled-replica lists).
    ThrottledReplicas,
}

/// What `serve` does with a config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Enforced: produce and fetch behave as Kafka's do under it.
    Applied,
    /// Accepted, stored and described; it governs compaction or how segments are laid out, and `serve` does not
    /// yet compact or roll by it (data is kept longer than asked, never lost). `serve` logs a line each time such
    /// a value is set.
    KeptNotEnforced,
    /// Accepted: it governs replication between brokers, which a one-replica node has none of (as Kafka does with
    /// one replica: `min.insync.replicas` counts at most the replication factor).
    NothingToActOn,
    /// Only Kafka's default is accepted; another value is refused INVALID_CONFIG with this reason.
    DefaultOnly(&'static str),
}

/// One topic config.
#[derive(Debug, Clone, Copy)]
pub struct ConfigDef {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub kind: ConfigType,
    /// Kafka 4.1's default, as DescribeConfigs prints it.
    pub default: &'static str,
    /// What values it takes.
    pub check: Check,
    /// The broker settings it falls back to, in Kafka's order of precedence; the first is the primary one.
    pub synonyms: &'static [&'static str],
    /// Whether the primary broker setting has a default of its own. Kafka lists a topic config's synonyms from
    /// its primary broker setting on, so a config whose primary has none (`retention.ms`: `log.retention.ms`,
    /// whose default lives in `log.retention.hours`) lists no default synonym.
    pub primary_has_default: bool,
    /// One line on what it does (ours).
    pub doc: &'static str,
    /// What `serve` does with it.
    pub effect: Effect,
}

/// The definition of `name`, if Kafka 4.1 has such a topic config.
pub fn definition(name: &str) -> Option<&'static ConfigDef> {
    TOPIC_CONFIGS.iter().find(|def| def.name == name)
}

/// Why a topic config was refused. Every variant names the config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Kafka 4.1 has no topic config of this name.
    #[error("Unknown topic config name: {0}")]
    Unknown(String),
    /// Configs without a value at creation or in AlterConfigs (their names, comma-separated).
    #[error("Null value not supported for topic configs: {0}")]
    Null(String),
    /// An IncrementalAlterConfigs SET without a value.
    #[error("Null value not supported for : {0}")]
    NullSet(String),
    /// The value does not parse as the config's type, or is not among its valid values.
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    Invalid {
        /// The config.
        name: String,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A valid value `serve` cannot honour.
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    NotHonoured {
        /// The config.
        name: String,
        /// The value given.
        value: String,
        /// Why `serve` cannot.
        reason: &'static str,
    },
    /// APPEND or SUBTRACT (the operation's name first) on a config that is not a list, or not a config.
    #[error("Can't {0} to key {1} because its type is not LIST.")]
    NotAList(&'static str, String),
    /// An IncrementalAlterConfigs operation code outside 0–3.
    #[error("Unknown config operation {operation} for {name}")]
    UnknownOperation {
        /// The config.
        name: String,
        /// The code given.
        operation: i8,
    },
}

/// Checks `value` for the config `name`: Kafka's parsing and validation, then what `serve` honours.
pub fn check(name: &str, value: &str) -> Result<&'static ConfigDef, ConfigError> {
    let def = definition(name).ok_or_else(|| ConfigError::Unknown(name.to_owned()))?;
    let invalid = |reason: String| ConfigError::Invalid {
        name: name.to_owned(),
        value: value.to_owned(),
        reason,
    };
    let not_a = || invalid(format!("Not a number of type {}", def.kind.name()));
    let trimmed = value.trim();
    match def.kind {
        ConfigType::Boolean => {
            if !trimmed.eq_ignore_ascii_case("true") && !trimmed.eq_ignore_ascii_case("false") {
                return Err(invalid("Expected value to be either true or false".to_owned()));
            }
        }
        ConfigType::Int => {
            let number: i32 = trimmed.parse().map_err(|_| not_a())?;
            match def.check {
                Check::IntAtLeast(min) if number < min => {
                    return Err(invalid(format!("Value must be at least {min}")))
                }
                Check::IntRange(min, max) if !(min..=max).contains(&number) => {
                    return Err(invalid(format!("Value must be in the range [{min}, {max}]")))
                }
                Check::GzipLevel if number != -1 && !(1..=9).contains(&number) => {
                    return Err(invalid("Value must be -1 or in the range [1, 9]".to_owned()))
                }
                _ => {}
            }
        }
        ConfigType::Long => {
            let number: i64 = trimmed.parse().map_err(|_| not_a())?;
            if let Check::LongAtLeast(min) = def.check {
                if number < min {
                    return Err(invalid(format!("Value must be at least {min}")));
                }
            }
        }
        ConfigType::Double => {
            let number: f64 = trimmed.parse().map_err(|_| not_a())?;
            if let Check::DoubleRange(min, max) = def.check {
                if !(min..=max).contains(&number) {
                    return Err(invalid(format!("Value must be between {min} and {max}")));
                }
            }
        }
        ConfigType::String => {
            if let Check::OneOf(valid) = def.check {
                if !valid.contains(&trimmed) {
                    return Err(invalid(format!("String must be one of: {}", valid.join(", "))));
                }
            }
        }
        ConfigType::List => check_list(def, trimmed).map_err(invalid)?,
    }
    if let Effect::DefaultOnly(reason) = def.effect {
        if !same_value(def, trimmed, def.default) {
            return Err(ConfigError::NotHonoured {
                name: name.to_owned(),
                value: value.to_owned(),
                reason,
            });
        }
    }
    Ok(def)
}

fn check_list(def: &ConfigDef, value: &str) -> Result<(), String> {
    let items: Vec<&str> = list_items(value).collect();
    match def.check {
        // An empty list is accepted, as Kafka's `ValidList` accepts it.
        Check::ListOf(valid) if items.iter().any(|item| !valid.contains(item)) => {
            return Err(format!("String must be one of: {}", valid.join(", ")));
        }
        Check::ThrottledReplicas => {
            let pair = |item: &str| {
                item.split_once(':').is_some_and(|(partition, broker)| {
                    partition.trim().parse::<u32>().is_ok() && broker.trim().parse::<u32>().is_ok()
                })
            };
            let wildcard = items.len() == 1 && items.first() == Some(&"*");
            if !wildcard && !items.iter().all(|item| pair(item)) {
                return Err("must be the wildcard (*) or a list of partitionId:brokerId pairs".to_owned());
            }
        }
        _ => {}
    }
    Ok(())
}

/// The items of a comma-separated list, trimmed, empty items dropped.
fn list_items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|item| !item.is_empty())
}

/// Whether two values of `def` mean the same (numbers compared as numbers, booleans without case).
fn same_value(def: &ConfigDef, left: &str, right: &str) -> bool {
    let (left, right) = (left.trim(), right.trim());
    match def.kind {
        ConfigType::Boolean => left.eq_ignore_ascii_case(right),
        ConfigType::Int | ConfigType::Long => left.parse::<i64>().ok() == right.parse::<i64>().ok(),
        ConfigType::Double => left.parse::<f64>().ok() == right.parse::<f64>().ok(),
        ConfigType::String => left == right,
        ConfigType::List => list_items(left).eq(list_items(right)),
    }
}

/// Broker settings a topic config falls back to, where `serve` was given a value other than Kafka's default:
/// broker config name (a topic config's first synonym, same unit) → value.
pub type BrokerSettings = BTreeMap<String, String>;

/// Where a described value comes from (`DescribeConfigsResponse.ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// A topic override (DYNAMIC_TOPIC_CONFIG).
    Topic,
    /// A broker setting given at start (STATIC_BROKER_CONFIG).
    StaticBroker,
    /// Kafka's default (DEFAULT_CONFIG).
    Default,
}

impl ConfigSource {
    /// The wire code.
    pub const fn code(self) -> i8 {
        match self {
            ConfigSource::Topic => 1,
            ConfigSource::StaticBroker => 4,
            ConfigSource::Default => 5,
        }
    }
}

/// One value and where it comes from (a described config, or one of its synonyms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced {
    /// The config's name at that source (the topic config's, or a broker setting's).
    pub name: String,
    /// Its value.
    pub value: String,
    /// Where it comes from.
    pub source: ConfigSource,
}

/// One described topic config.
#[derive(Debug, Clone)]
pub struct Described {
    /// The definition.
    pub def: &'static ConfigDef,
    /// The value in force and its source.
    pub value: Sourced,
    /// Every value that could apply, the one in force first (topic override, broker setting, default).
    pub synonyms: Vec<Sourced>,
}

/// A topic's config overrides, each one checked by [`check`]: config name → value as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides(BTreeMap<String, String>);

/// One IncrementalAlterConfigs operation.
#[derive(Debug, Clone, Copy)]
pub struct Operation<'a> {
    /// The config.
    pub name: &'a str,
    /// 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT.
    pub op: i8,
    /// The value (none for DELETE).
    pub value: Option<&'a str>,
}

impl Overrides {
    /// Overrides from `(name, value)` pairs (CreateTopics, AlterConfigs: a later pair for the same name wins).
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, ConfigError> {
        let pairs: Vec<(&str, Option<&str>)> = pairs.into_iter().collect();
        let nulls: Vec<&str> = pairs
            .iter()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| *name)
            .collect();
        if !nulls.is_empty() {
            return Err(ConfigError::Null(nulls.join(",")));
        }
        let mut overrides = BTreeMap::new();
        for (name, value) in pairs.into_iter().filter_map(|(name, value)| Some((name, value?))) {
            check(name, value)?;
            overrides.insert(name.to_owned(), value.to_owned());
        }
        Ok(Overrides(overrides))
    }

    /// The overrides as stored: name → value.
    pub fn as_map(&self) -> &BTreeMap<String, String> {
        &self.0
    }

    /// Overrides read back from storage, checked again (a config this build refuses is an error naming it).
    pub fn from_stored(map: BTreeMap<String, String>) -> Result<Self, ConfigError> {
        Self::from_pairs(
            map.iter()
                .map(|(name, value)| (name.as_str(), Some(value.as_str()))),
        )
    }

    /// The overrides after `operations` (IncrementalAlterConfigs), all or nothing.
    pub fn altered(&self, operations: &[Operation<'_>]) -> Result<Self, ConfigError> {
        let mut map = self.0.clone();
        for operation in operations {
            let name = operation.name;
            match operation.op {
                0 => {
                    let value = operation
                        .value
                        .ok_or_else(|| ConfigError::NullSet(name.to_owned()))?;
                    map.insert(name.to_owned(), value.to_owned());
                }
                // Deleting a config that is not set, or not a config, changes nothing (as in Kafka).
                1 => {
                    map.remove(name);
                }
                2 | 3 => {
                    let verb = if operation.op == 2 { "APPEND" } else { "SUBTRACT" };
                    let def = definition(name)
                        .filter(|def| def.kind == ConfigType::List)
                        .ok_or_else(|| ConfigError::NotAList(verb, name.to_owned()))?;
                    let current = map.get(name).map_or(def.default, String::as_str);
                    let mut items: Vec<String> = list_items(current).map(str::to_owned).collect();
                    let given: Vec<&str> = operation.value.map(list_items).into_iter().flatten().collect();
                    if operation.op == 2 {
                        for item in given {
                            if !items.iter().any(|held| held == item) {
                                items.push(item.to_owned());
                            }
                        }
                    } else {
                        items.retain(|held| !given.contains(&held.as_str()));
                    }
                    map.insert(name.to_owned(), items.join(","));
                }
                other => {
                    return Err(ConfigError::UnknownOperation {
                        name: name.to_owned(),
                        operation: other,
                    })
                }
            }
        }
        Self::from_stored(map)
    }

    /// Every topic config (or those named in `keys`, unknown names skipped as Kafka skips them) with the value in
    /// force: the override, else the broker setting, else Kafka's default.
    pub fn describe(&self, broker: &BrokerSettings, keys: Option<&[&str]>) -> Vec<Described> {
        TOPIC_CONFIGS
            .iter()
            .filter(|def| keys.is_none_or(|keys| keys.contains(&def.name)))
            .map(|def| {
                let mut synonyms = Vec::new();
                if let Some(value) = self.0.get(def.name) {
                    synonyms.push(Sourced {
                        name: def.name.to_owned(),
                        value: value.clone(),
                        source: ConfigSource::Topic,
                    });
                }
                if let Some((name, value)) = def
                    .synonyms
                    .first()
                    .and_then(|name| broker.get(*name).map(|value| (*name, value)))
                {
                    synonyms.push(Sourced {
                        name: name.to_owned(),
                        value: value.clone(),
                        source: ConfigSource::StaticBroker,
                    });
                }
                if let Some(primary) = def.synonyms.first().filter(|_| def.primary_has_default) {
                    synonyms.push(Sourced {
                        name: (*primary).to_owned(),
                        value: def.default.to_owned(),
                        source: ConfigSource::Default,
                    });
                }
                let value = match synonyms.first() {
                    Some(first) => Sourced {
                        name: def.name.to_owned(),
                        ..first.clone()
                    },
                    None => Sourced {
                        name: def.name.to_owned(),
                        value: def.default.to_owned(),
                        source: ConfigSource::Default,
                    },
                };
                Described { def, value, synonyms }
            })
            .collect()
    }

    /// The value in force for `name`: the override, else the broker setting, else Kafka's default.
    fn value(&self, def: &ConfigDef, broker: &BrokerSettings) -> String {
        self.0
            .get(def.name)
            .or_else(|| def.synonyms.first().and_then(|name| broker.get(*name)))
            .cloned()
            .unwrap_or_else(|| def.default.to_owned())
    }

    /// What the node enforces for this topic.
    pub fn settings(&self, broker: &BrokerSettings) -> TopicSettings {
        let number = |name: &str, fallback: i64| {
            definition(name)
                .and_then(|def| self.value(def, broker).trim().parse::<i64>().ok())
                .unwrap_or(fallback)
        };
        let timestamp_type = definition("message.timestamp.type")
            .map(|def| self.value(def, broker))
            .unwrap_or_default();
        let cleanup_policy = definition("cleanup.policy")
            .map(|def| self.value(def, broker))
            .unwrap_or_default();
        let delete_by_retention = list_items(&cleanup_policy).any(|item| item == "delete");
        let compacted = list_items(&cleanup_policy).any(|item| item == "compact");
        TopicSettings {
            delete_by_retention,
            compacted,
            retention_ms: number("retention.ms", 604_800_000),
            retention_bytes: number("retention.bytes", -1),
            min_cleanable_dirty_ratio: definition("min.cleanable.dirty.ratio")
                .and_then(|def| self.value(def, broker).trim().parse::<f64>().ok())
                .unwrap_or(0.5),
            min_compaction_lag_ms: number("min.compaction.lag.ms", 0),
            max_compaction_lag_ms: number("max.compaction.lag.ms", i64::MAX),
            delete_retention_ms: number("delete.retention.ms", 86_400_000),
            segment_bytes: u64::try_from(number("segment.bytes", 1 << 30)).unwrap_or(1 << 30),
            segment_ms: number("segment.ms", 604_800_000),
            max_message_bytes: usize::try_from(number("max.message.bytes", 1_048_588)).unwrap_or(0),
            timestamp_after_max_ms: number("message.timestamp.after.max.ms", 3_600_000),
            timestamp_before_max_ms: number("message.timestamp.before.max.ms", i64::MAX),
            log_append_time: timestamp_type.trim() == "LogAppendTime",
        }
    }

    /// The overrides whose values `serve` keeps without enforcing them yet ([`Effect::KeptNotEnforced`]) and
    /// that differ from Kafka's default.
    pub fn kept_not_enforced(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().filter_map(|(name, value)| {
            let def = definition(name)?;
            (def.effect == Effect::KeptNotEnforced && !same_value(def, value, def.default))
                .then_some((name.as_str(), value.as_str()))
        })
    }
}

/// What the node enforces for one topic (the [`Effect::Applied`] configs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopicSettings {
    /// `cleanup.policy` includes `delete`: retention deletes old data.
    pub delete_by_retention: bool,
    /// `cleanup.policy` includes `compact`: every record needs a key (Kafka refuses keyless ones).
    pub compacted: bool,
    /// `retention.ms` (negative: forever).
    pub retention_ms: i64,
    /// `retention.bytes` (negative: no bound).
    pub retention_bytes: i64,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`.
    pub delete_retention_ms: i64,
    /// `segment.bytes`: the size at which a segment rolls.
    pub segment_bytes: u64,
    /// `segment.ms`: the age at which a segment holding data rolls.
    pub segment_ms: i64,
    /// `max.message.bytes`: the largest batch a produce may write.
    pub max_message_bytes: usize,
    /// `message.timestamp.after.max.ms`.
    pub timestamp_after_max_ms: i64,
    /// `message.timestamp.before.max.ms`.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.type=LogAppendTime`: the broker stamps each batch with its clock.
    pub log_append_time: bool,
}

#[cfg(test)]
mod tests;
