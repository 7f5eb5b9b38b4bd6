//! Closing segments whose files are gone, off the partition's thread. On Linux a removed file's blocks are freed
//! when its last handle closes: for a segment deleted by retention or truncation, or replaced by a cleaner's
//! rewrite (its files renamed over while still open), that close costs tens of milliseconds for 64 MiB and grows
//! with the segment — time the partition, and every produce and fetch waiting on it, should not spend. Kafka
//! deletes such segments asynchronously too (after `file.delete.delay.ms`). Here the files are already unlinked
//! when the segments come here; only the handles are left, and one thread of the process closes them in the
//! order they came.

use std::sync::mpsc::{channel, Sender};
use std::sync::OnceLock;

use crate::segment::Segment;

/// The closing thread's queue; `None` when no thread could be started (segments are then closed inline).
static CLOSER: OnceLock<Option<Sender<Vec<Segment>>>> = OnceLock::new();

fn closer() -> Option<&'static Sender<Vec<Segment>>> {
    CLOSER
        .get_or_init(|| {
            let (queue, closing) = channel::<Vec<Segment>>();
            std::thread::Builder::new()
                .name("segment-closer".to_owned())
                .spawn(move || {
                    for segments in closing {
                        drop(segments);
                    }
                })
                .ok()
                .map(|_| queue)
        })
        .as_ref()
}

/// Closes `segments` (each [`Segment::retire`]d: closing writes nothing) on the closing thread; inline when there
/// is none.
pub(crate) fn close_retired(segments: Vec<Segment>) {
    if segments.is_empty() {
        return;
    }
    match closer() {
        // A thread that ended hands the segments back, and they close here.
        Some(queue) => {
            if let Err(returned) = queue.send(segments) {
                drop(returned);
            }
        }
        None => drop(segments),
    }
}
