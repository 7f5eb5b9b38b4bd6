//! What opening a partition found on disk, and what it repaired.

/// What opening a partition found and repaired. In a read-only open nothing is repaired: the same fields say
/// what a read-write open would cut, drop or rebuild (and reads stop before a torn tail).
///
/// Backends that keep no files of their own (memory, the embedded databases, which recover themselves) report
/// nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Segments whose torn or corrupt tail was cut: (base offset, bytes cut, reason).
    pub truncated: Vec<(i64, u64, String)>,
    /// Segments deleted because an earlier segment had a torn tail (their data cannot follow it).
    pub dropped_segments: Vec<i64>,
    /// Segments whose index files were rebuilt.
    pub rebuilt_indexes: Vec<i64>,
    /// Leftovers of interrupted writes that were removed.
    pub removed_leftovers: Vec<String>,
    /// Files the partition does not know, left in place.
    pub unknown_files: Vec<String>,
    /// A torn tail of the metadata journal (an interrupted change, never acknowledged): (bytes, reason). Cut
    /// in a read-write open; the records are those of the last whole change.
    pub metadata_torn_tail: Option<(u64, String)>,
}

impl OpenReport {
    /// True when opening found nothing to repair and nothing unknown.
    pub fn is_clean(&self) -> bool {
        *self == OpenReport::default()
    }
}

/// One line: what was (or, read-only, would be) repaired, item by item; "nothing" for a clean open.
impl std::fmt::Display for OpenReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut items = Vec::new();
        for (base, bytes, reason) in &self.truncated {
            items.push(format!("segment {base}: {bytes} bytes cut ({reason})"));
        }
        if !self.dropped_segments.is_empty() {
            items.push(format!(
                "segments dropped after a torn one: {:?}",
                self.dropped_segments
            ));
        }
        if !self.rebuilt_indexes.is_empty() {
            items.push(format!("indexes rebuilt: segments {:?}", self.rebuilt_indexes));
        }
        if !self.removed_leftovers.is_empty() {
            items.push(format!(
                "leftovers of interrupted writes: {}",
                self.removed_leftovers.join(", ")
            ));
        }
        if !self.unknown_files.is_empty() {
            items.push(format!(
                "unknown files left in place: {}",
                self.unknown_files.join(", ")
            ));
        }
        if let Some((bytes, reason)) = &self.metadata_torn_tail {
            items.push(format!(
                "metadata: {bytes} bytes of an interrupted change cut ({reason})"
            ));
        }
        if items.is_empty() {
            return f.write_str("nothing");
        }
        f.write_str(&items.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_as_one_line_of_what_was_repaired() {
        assert_eq!(OpenReport::default().to_string(), "nothing");
        let report = OpenReport {
            truncated: vec![(40, 12, "CRC mismatch".into())],
            metadata_torn_tail: Some((9, "a frame cut short (9 bytes)".into())),
            ..OpenReport::default()
        };
        assert_eq!(
            report.to_string(),
            "segment 40: 12 bytes cut (CRC mismatch); metadata: 9 bytes of an interrupted change cut (a frame cut \
             short (9 bytes))"
        );
    }
}
