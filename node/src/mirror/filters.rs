//! A link's name filters (ADR 0059): KIP-1279's `mirror.topics.include` / `mirror.topics.exclude` for topics and
//! `mirror.groups.include` / `mirror.groups.exclude` for the consumer groups whose offsets are copied — regexes a
//! whole name must match, as Kafka's `Pattern.matcher(name).matches()` does. A name is selected when an include
//! pattern matches it and no exclude pattern does. For topics, without an exclude list, `__.*` is the exclude list
//! (KIP-1279's default: double-underscore topics are some system's bookkeeping), and whatever the patterns, a
//! topic the source calls internal is never selected. For groups, no include pattern selects every group.
//!
//! Patterns come from an administration request: each is bounded in length and compiled size and refused with the
//! pattern named; matching is linear in the name (the `regex` crate has no backtracking).

use regex::{Regex, RegexBuilder};

use super::error::MirrorError;

/// The exclude list a link with include patterns and no exclude patterns gets (KIP-1279's default).
pub const DEFAULT_TOPIC_EXCLUDE: &str = "__.*";

/// The longest pattern accepted.
const MAX_PATTERN_CHARS: usize = 1_000;

/// The most patterns of each kind on one link.
const MAX_PATTERNS: usize = 100;

/// The most memory one compiled pattern may take (the crate's default is 10 MiB).
const MAX_COMPILED_BYTES: usize = 1 << 20;

/// A link's compiled include and exclude patterns, for topics or groups.
#[derive(Debug, Clone)]
pub struct Patterns {
    include: Vec<Regex>,
    exclude: Vec<Regex>,
}

impl Patterns {
    /// Compiles `include` and `exclude` (each pattern anchored at both ends); refuses a pattern that is too
    /// long, too large compiled, or not a regex, naming it.
    pub fn new(include: &[String], exclude: &[String]) -> Result<Self, MirrorError> {
        Ok(Patterns {
            include: compile_all("include", include)?,
            exclude: compile_all("exclude", exclude)?,
        })
    }

    /// Whether a group's offsets are copied: no include pattern (every group) or one that matches, and no
    /// exclude pattern that matches.
    pub fn selects_group(&self, group: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|pattern| pattern.is_match(group)))
            && !self.excludes(group)
    }

    /// Whether discovery is on: at least one include pattern.
    pub fn discovers(&self) -> bool {
        !self.include.is_empty()
    }

    /// Whether the topic `name` is selected: an include pattern matches it and no exclude pattern does.
    pub fn selects(&self, name: &str) -> bool {
        self.include.iter().any(|pattern| pattern.is_match(name)) && !self.excludes(name)
    }

    /// Whether an exclude pattern matches `name`.
    pub fn excludes(&self, name: &str) -> bool {
        self.exclude.iter().any(|pattern| pattern.is_match(name))
    }
}

/// The exclude list recorded for a link: the operator's, or [`DEFAULT_TOPIC_EXCLUDE`] when the link has include
/// patterns and the operator gave no exclude pattern.
pub fn effective_topic_exclude(include: &[String], exclude: Vec<String>) -> Vec<String> {
    if exclude.is_empty() && !include.is_empty() {
        vec![DEFAULT_TOPIC_EXCLUDE.to_owned()]
    } else {
        exclude
    }
}

fn compile_all(kind: &str, patterns: &[String]) -> Result<Vec<Regex>, MirrorError> {
    if patterns.len() > MAX_PATTERNS {
        return Err(MirrorError::InvalidRequest(format!(
            "{} {kind} patterns: a link takes at most {MAX_PATTERNS}",
            patterns.len()
        )));
    }
    patterns.iter().map(|pattern| compile(kind, pattern)).collect()
}

fn compile(kind: &str, pattern: &str) -> Result<Regex, MirrorError> {
    let refused =
        |why: String| MirrorError::InvalidRequest(format!("{kind} pattern {pattern:?} is refused: {why}"));
    if pattern.is_empty() {
        return Err(refused("it is empty".to_owned()));
    }
    if pattern.chars().count() > MAX_PATTERN_CHARS {
        return Err(refused(format!(
            "it is longer than {MAX_PATTERN_CHARS} characters"
        )));
    }
    whole_name(pattern).map_err(refused)
}

/// `pattern` compiled to match a whole name (anchored at both ends), within [`MAX_COMPILED_BYTES`]; or why not, in
/// one line (the regex crate's messages span lines — the pattern, a caret, the reason — and the reason is the last).
pub(crate) fn whole_name(pattern: &str) -> Result<Regex, String> {
    // The pattern compiles on its own first: wrapped at once, `a)|(b` would compile as `^(?:a)|(b)$` and match
    // names it does not name whole (Kafka refuses it).
    RegexBuilder::new(pattern)
        .size_limit(MAX_COMPILED_BYTES)
        .build()
        .map_err(|error| last_line(&error.to_string()))?;
    RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(MAX_COMPILED_BYTES)
        .build()
        .map_err(|error| last_line(&error.to_string()))
}

/// The last non-blank line of a regex error: its reason.
fn last_line(message: &str) -> String {
    message
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or(message)
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test fails by panicking

    use super::*;

    fn filter(include: &[&str], exclude: &[&str]) -> Patterns {
        let include: Vec<String> = include.iter().map(|p| p.to_string()).collect();
        let exclude = effective_topic_exclude(&include, exclude.iter().map(|p| p.to_string()).collect());
        Patterns::new(&include, &exclude).unwrap()
    }

    #[test]
    fn a_pattern_matches_the_whole_name_as_kafka_matches_it() {
        let orders = filter(&[r"orders\..*"], &[]);
        assert!(orders.selects("orders.eu"));
        assert!(orders.selects("orders.asia"));
        assert!(!orders.selects("old-orders.eu"), "anchored at the start");
        assert!(!orders.selects("orders"), "the dot is literal");
        let exact = filter(&["payments"], &[]);
        assert!(exact.selects("payments"));
        assert!(!exact.selects("payments-dlq"), "anchored at the end");
        // An alternation inside the pattern is anchored as a whole.
        let either = filter(&["a|b"], &[]);
        assert!(either.selects("a") && either.selects("b") && !either.selects("ab"));
    }

    #[test]
    fn double_underscore_topics_are_excluded_unless_the_operator_gives_an_exclude_list() {
        let all = filter(&[".*"], &[]);
        assert!(all.selects("orders"));
        assert!(!all.selects("__consumer_offsets"));
        assert!(!all.selects("__connect-offsets"));
        let own = filter(&[".*"], &["tmp-.*"]);
        assert!(
            own.selects("__connect-offsets"),
            "the operator's list replaces the default"
        );
        assert!(!own.selects("tmp-1"));
    }

    #[test]
    fn an_exclude_pattern_wins_over_an_include_pattern() {
        let orders = filter(&[r"orders\..*"], &[r".*\.test"]);
        assert!(orders.selects("orders.eu"));
        assert!(!orders.selects("orders.test"));
        assert!(orders.excludes("orders.test"));
    }

    #[test]
    fn no_include_pattern_selects_nothing_and_discovers_nothing() {
        let none = filter(&[], &[]);
        assert!(!none.discovers());
        assert!(!none.selects("orders"));
        assert!(filter(&["x"], &[]).discovers());
    }

    #[test]
    fn without_an_include_pattern_every_group_is_selected_and_an_exclude_pattern_wins() {
        let every = Patterns::new(&[], &[]).unwrap();
        assert!(every.selects_group("billing") && every.selects_group("__anything"));
        let some = Patterns::new(&["app-.*".to_owned()], &["app-test".to_owned()]).unwrap();
        assert!(some.selects_group("app-1"));
        assert!(!some.selects_group("app-test"));
        assert!(!some.selects_group("other"));
    }

    #[test]
    fn a_bad_pattern_is_refused_with_its_kind_and_text() {
        for (include, exclude, named) in [
            (vec!["orders("], vec![], "include pattern \"orders(\""),
            (vec!["ok"], vec!["[z-a]"], "exclude pattern \"[z-a]\""),
            (vec![""], vec![], "it is empty"),
            // Unbalanced once alone: wrapped at once it would compile and match names it does not name whole.
            (vec!["a)|(b"], vec![], "include pattern \"a)|(b\""),
            (vec!["ok"], vec!["x)|(?:"], "exclude pattern \"x)|(?:\""),
        ] {
            let include: Vec<String> = include.into_iter().map(String::from).collect();
            let exclude: Vec<String> = exclude.into_iter().map(String::from).collect();
            let error = Patterns::new(&include, &exclude).unwrap_err();
            assert_eq!(error.category(), "invalid_request");
            assert!(error.to_string().contains(named), "{error}");
        }
        let long = vec!["a".repeat(MAX_PATTERN_CHARS + 1)];
        assert!(Patterns::new(&long, &[]).is_err());
        // A pattern whose compiled form would be huge is refused, not compiled.
        let huge = vec![r"\w{1000}\w{1000}\w{1000}".to_owned()];
        let error = Patterns::new(&huge, &[]).unwrap_err().to_string();
        assert!(error.contains("refused"), "{error}");
        let many: Vec<String> = (0..=MAX_PATTERNS).map(|index| format!("t{index}")).collect();
        assert!(Patterns::new(&many, &[]).is_err());
    }
}
