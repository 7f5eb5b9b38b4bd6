//! Long-polling fetches woken by the partitions they wait on. A Fetch that has less than `min_bytes` to answer
//! waits for records on one of the partitions it names, up to `max_wait_ms`; an append (a produce, a marker, a
//! mirror's write) wakes only the fetches registered on its partition — not every waiting fetch of the node,
//! each of which would re-read all its partitions (issue 54: a busy partition made every idle consumer of the
//! node read again at each produce).
//!
//! A fetch registers one [`Notify`] under each of its partitions for as long as it waits ([`Registration`],
//! removed when dropped); a wake takes a permit even when the fetch is reading at that moment, so no append
//! between a read and the wait is missed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// By topic and partition, the fetches waiting on it.
type Waiting = BTreeMap<String, BTreeMap<i32, Vec<Arc<Notify>>>>;

/// The node's waiting fetches; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct FetchWakeups {
    waiting: Mutex<Waiting>,
}

/// One fetch's registration: woken by any of its partitions; unregistered when dropped.
pub(crate) struct Registration<'a> {
    wakeups: &'a FetchWakeups,
    notify: Arc<Notify>,
    partitions: Vec<(String, i32)>,
}

impl FetchWakeups {
    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a fetch on `partitions`.
    pub(crate) fn register(&self, partitions: Vec<(String, i32)>) -> Registration<'_> {
        let notify = Arc::new(Notify::new());
        let mut waiting = self.waiting();
        for (topic, partition) in &partitions {
            waiting
                .entry(topic.clone())
                .or_default()
                .entry(*partition)
                .or_default()
                .push(notify.clone());
        }
        drop(waiting);
        Registration {
            wakeups: self,
            notify,
            partitions,
        }
    }

    /// Wakes the fetches waiting on `topic`'s `partition`.
    pub(crate) fn wake(&self, topic: &str, partition: i32) {
        let waiting = self.waiting();
        if let Some(fetches) = waiting
            .get(topic)
            .and_then(|partitions| partitions.get(&partition))
        {
            for fetch in fetches {
                fetch.notify_one();
            }
        }
    }

    /// The fetches waiting on `topic`'s `partition`.
    pub(crate) fn waiting_on(&self, topic: &str, partition: i32) -> usize {
        self.waiting()
            .get(topic)
            .and_then(|partitions| partitions.get(&partition))
            .map_or(0, Vec::len)
    }

    /// Fetches waiting, over every partition (a fetch counts once per partition it names).
    #[cfg(test)]
    fn registered(&self) -> usize {
        self.waiting()
            .values()
            .flat_map(BTreeMap::values)
            .map(Vec::len)
            .sum()
    }
}

impl Registration<'_> {
    /// Waits until one of the fetch's partitions is woken (or was, since the last wait).
    pub(crate) async fn woken(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut waiting = self.wakeups.waiting();
        for (topic, partition) in &self.partitions {
            let Some(partitions) = waiting.get_mut(topic) else {
                continue;
            };
            if let Some(fetches) = partitions.get_mut(partition) {
                fetches.retain(|fetch| !Arc::ptr_eq(fetch, &self.notify));
                if fetches.is_empty() {
                    partitions.remove(partition);
                }
            }
            if partitions.is_empty() {
                waiting.remove(topic);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_fetch_is_woken_by_its_own_partitions_only_and_unregisters_when_done() {
        let wakeups = FetchWakeups::default();
        let fetch = wakeups.register(vec![("orders".to_owned(), 0), ("orders".to_owned(), 1)]);
        let other = wakeups.register(vec![("payments".to_owned(), 0)]);
        assert_eq!(wakeups.registered(), 3);
        wakeups.wake("orders", 1);
        // The wake came before the wait: its permit is kept.
        tokio::time::timeout(std::time::Duration::from_secs(5), fetch.woken())
            .await
            .expect("woken by its partition");
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(1), other.woken())
                .await
                .is_err(),
            "another partition's append does not wake it"
        );
        drop(fetch);
        drop(other);
        assert_eq!(wakeups.registered(), 0);
        assert!(wakeups.waiting().is_empty());
    }
}
