//! The producer entries of one partition, found by producer id.
//!
//! A hash table of the entries themselves (each entry holds its id, so the id is not stored twice). Besides the
//! map operations the manager needs, it can [`prefetch`](ProducerTable::prefetch) a producer's entry: with many
//! producers an entry has usually left the CPU caches since the producer's last batch, and a client append asks
//! for it before checking the batch, so the entry arrives while the check runs (ADR 0028). The prefetch reads
//! nothing: it locates the entry by the hash table's control bytes alone, without comparing its key, and hints its
//! cache lines to the CPU; a wrong guess (another producer whose 7-bit hash tag matches) costs a wasted hint.

use std::hash::BuildHasher;

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

use crate::entry::ProducerStateEntry;

/// Where an entry was found in a [`ProducerTable`]: valid until the table changes, and checked when used. Four
/// bytes, so that a plan carrying one stays small; a slot beyond them (a table of over four billion buckets) is
/// recorded as none and looked up again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot(u32);

impl Slot {
    fn new(index: usize) -> Self {
        Slot(u32::try_from(index).unwrap_or(u32::MAX))
    }

    fn index(self) -> usize {
        // Whatever it names, `get_mut_in` uses it only if the entry there has the producer's id.
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

/// The producer entries by producer id; see the module docs.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProducerTable {
    entries: HashTable<ProducerStateEntry>,
}

fn hash(producer_id: i64) -> u64 {
    FxBuildHasher.hash_one(producer_id)
}

fn hash_entry(entry: &ProducerStateEntry) -> u64 {
    hash(entry.producer_id)
}

impl ProducerTable {
    /// The entry of `producer_id`.
    pub(crate) fn get(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.entries
            .find(hash(producer_id), |entry| entry.producer_id == producer_id)
    }

    /// The entry of `producer_id` and the slot it is in, which [`get_mut_in`](Self::get_mut_in) goes back to
    /// without looking it up again.
    pub(crate) fn get_with_slot(&self, producer_id: i64) -> Option<(Slot, &ProducerStateEntry)> {
        let index = self
            .entries
            .find_bucket_index(hash(producer_id), |entry| entry.producer_id == producer_id)?;
        Some((Slot::new(index), self.entries.get_bucket(index)?))
    }

    /// The entry of `producer_id`, to change in place, from the slot [`get_with_slot`](Self::get_with_slot)
    /// found it in; looked up again if the table changed since and the slot holds another entry or none.
    pub(crate) fn get_mut_in(&mut self, slot: Slot, producer_id: i64) -> Option<&mut ProducerStateEntry> {
        let at_slot = self
            .entries
            .get_bucket(slot.index())
            .is_some_and(|entry| entry.producer_id == producer_id);
        if at_slot {
            self.entries.get_bucket_mut(slot.index())
        } else {
            self.get_mut(producer_id)
        }
    }

    /// The entry of `producer_id`, to change in place.
    pub(crate) fn get_mut(&mut self, producer_id: i64) -> Option<&mut ProducerStateEntry> {
        self.entries
            .find_mut(hash(producer_id), |entry| entry.producer_id == producer_id)
    }

    /// The entry of `producer_id`, an empty one added first if there is none.
    pub(crate) fn get_or_insert_empty(&mut self, producer_id: i64) -> &mut ProducerStateEntry {
        self.entries
            .entry(
                hash(producer_id),
                |entry| entry.producer_id == producer_id,
                hash_entry,
            )
            .or_insert_with(|| ProducerStateEntry::empty(producer_id))
            .into_mut()
    }

    /// Stores `entry` under its producer id, replacing the one stored there.
    pub(crate) fn insert(&mut self, entry: ProducerStateEntry) {
        let producer_id = entry.producer_id;
        match self.entries.entry(
            hash(producer_id),
            |stored| stored.producer_id == producer_id,
            hash_entry,
        ) {
            Entry::Occupied(mut stored) => *stored.get_mut() = entry,
            Entry::Vacant(slot) => {
                slot.insert(entry);
            }
        }
    }

    /// Keeps the entries for which `keep` is true.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&ProducerStateEntry) -> bool) {
        self.entries.retain(|entry| keep(entry));
    }

    /// Every entry, unordered.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.entries.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }

    /// Makes room for `additional` more entries.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional, hash_entry);
    }

    /// Hints the CPU to bring `producer_id`'s entry into its caches (module docs). Reads no entry and changes
    /// nothing.
    pub(crate) fn prefetch(&self, producer_id: i64) {
        if let Some(candidate) = self.entries.find(hash(producer_id), |_| true) {
            candidate.prefetch();
        }
    }
}

impl PartialEq for ProducerTable {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|entry| other.get(entry.producer_id) == Some(entry))
    }
}

impl Eq for ProducerTable {}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(producer_id: i64, epoch: i16) -> ProducerStateEntry {
        let mut entry = ProducerStateEntry::empty(producer_id);
        entry.add_batch(epoch, 4, 10, 4, 1_000);
        entry
    }

    fn table_of(ids: impl IntoIterator<Item = i64>) -> ProducerTable {
        let mut table = ProducerTable::default();
        for producer_id in ids {
            table.insert(entry(producer_id, 0));
        }
        table
    }

    #[test]
    fn an_entry_is_found_by_its_id_and_replaced_by_a_later_insert() {
        let mut table = table_of(0..100);
        assert_eq!(table.get(42), Some(&entry(42, 0)));
        assert_eq!(table.get(100), None);
        table.insert(entry(42, 3));
        assert_eq!(table.len(), 100);
        assert_eq!(table.get(42).map(|entry| entry.producer_epoch), Some(3));
    }

    #[test]
    fn a_slot_leads_back_to_its_entry_or_to_a_lookup_when_it_holds_another() {
        let mut table = table_of(0..4);
        let (slot, found) = table
            .get_with_slot(2)
            .map(|(slot, entry)| (slot, entry.clone()))
            .unwrap();
        assert_eq!(found, entry(2, 0));
        assert_eq!(table.get_mut_in(slot, 2).map(|entry| entry.producer_id), Some(2));
        // Another producer's id at that slot: found by lookup, not by the slot.
        assert_eq!(table.get_mut_in(slot, 3).map(|entry| entry.producer_id), Some(3));
        assert_eq!(table.get_mut_in(slot, 99), None);
        // The table grows (entries move); the old slot is checked, not trusted.
        for producer_id in 4..10_000 {
            table.insert(entry(producer_id, 0));
        }
        assert_eq!(table.get_mut_in(slot, 2).map(|entry| entry.producer_id), Some(2));
        assert_eq!(
            table.get_mut_in(Slot(u32::MAX), 7).map(|entry| entry.producer_id),
            Some(7)
        );
    }

    #[test]
    fn get_or_insert_empty_adds_an_empty_entry_only_when_there_is_none() {
        let mut table = table_of([7]);
        assert_eq!(table.get_or_insert_empty(7), &mut entry(7, 0));
        assert_eq!(table.get_or_insert_empty(8), &mut ProducerStateEntry::empty(8));
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn prefetching_a_stored_or_absent_producer_changes_nothing() {
        let table = table_of(0..1_000);
        let before = table.clone();
        for producer_id in [0, 500, 999, 1_000, -1, i64::MAX] {
            table.prefetch(producer_id);
        }
        assert_eq!(table, before);
        // Also on an empty table (no control bytes to probe yet).
        ProducerTable::default().prefetch(1);
    }

    #[test]
    fn tables_with_the_same_entries_are_equal_whatever_the_order_they_came_in() {
        assert_eq!(table_of(0..50), table_of((0..50).rev()));
        assert_ne!(table_of(0..50), table_of(0..49));
        let mut changed = table_of(0..50);
        changed.insert(entry(10, 1));
        assert_ne!(changed, table_of(0..50));
    }

    #[test]
    fn retain_keeps_only_the_entries_it_is_told_to_keep() {
        let mut table = table_of(0..10);
        table.retain(|entry| entry.producer_id % 2 == 0);
        let mut kept: Vec<i64> = table.iter().map(|entry| entry.producer_id).collect();
        kept.sort_unstable();
        assert_eq!(kept, vec![0, 2, 4, 6, 8]);
        assert!(table.get(3).is_none());
    }
}
