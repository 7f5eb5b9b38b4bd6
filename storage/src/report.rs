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
