//! Closing segments whose files are gone, off the partition's thread. On Linux a removed file's blocks are freed
//! when its last handle closes: for a segment deleted by retention or truncation, or replaced by a cleaner's
//! rewrite (its files renamed over while still open), that close costs tens of milliseconds for 64 MiB and grows
//! with the segment — time the partition, and every produce and fetch waiting on it, should not spend. Kafka
//! deletes such segments asynchronously too (after `file.delete.delay.ms`). Here the files are already unlinked
//! when the segments come here; only the handles are left, and a thread of their own drops them.

use crate::segment::Segment;

/// Closes `segments` (each [`Segment::retire`]d: closing writes nothing) on a thread of their own; inline when no
/// thread can be started.
pub(crate) fn close_retired(segments: Vec<Segment>) {
    if segments.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("segment-closer".to_owned())
        .spawn(move || drop(segments));
    // A failed spawn drops the closure, and the segments with it, here.
    drop(spawned);
}
