//! A map from row keys to values that keeps small non-negative keys (the generated ones: loaded
//! rows and background inserts count up from 1) in a vector indexed by key, and any other key in
//! a B-tree. Building it from loaded rows, scanning it in key order and dropping it cost a pass
//! over a vector instead of a tree.
//!
//! The representation is canonical (the vector ends at the largest dense key present, also after
//! a removal), so two maps with the same entries are equal and hash equal, as state hashing
//! needs. PostgreSQL's tables and the sink's documents use it.

use crate::core::ids::Key;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Keys in `0..DENSE_KEYS` live in the vector.
pub const DENSE_KEYS: Key = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyMap<V> {
    dense: Vec<Option<V>>,
    dense_len: usize,
    sparse: BTreeMap<Key, V>,
}

impl<V> Default for KeyMap<V> {
    fn default() -> Self {
        KeyMap { dense: Vec::new(), dense_len: 0, sparse: BTreeMap::new() }
    }
}

fn dense_index(key: Key) -> Option<usize> {
    if (0..DENSE_KEYS).contains(&key) { usize::try_from(key).ok() } else { None }
}

impl<V> KeyMap<V> {
    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.dense_len + self.sparse.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, key: Key) -> Option<&V> {
        match dense_index(key) {
            Some(index) => self.dense.get(index).and_then(Option::as_ref),
            None => self.sparse.get(&key),
        }
    }

    pub fn get_mut(&mut self, key: Key) -> Option<&mut V> {
        match dense_index(key) {
            Some(index) => self.dense.get_mut(index).and_then(Option::as_mut),
            None => self.sparse.get_mut(&key),
        }
    }

    /// Inserts or replaces the value of `key`.
    pub fn insert(&mut self, key: Key, value: V) {
        let Some(index) = dense_index(key) else {
            self.sparse.insert(key, value);
            return;
        };
        if index == self.dense.len() {
            // The usual case: keys counting up.
            self.dense.push(Some(value));
            self.dense_len += 1;
            return;
        }
        if self.dense.len() < index {
            self.dense.resize_with(index + 1, || None);
        }
        if self.dense[index].replace(value).is_none() {
            self.dense_len += 1;
        }
    }

    /// Removes the value of `key`; the vector is trimmed so the map stays canonical.
    pub fn remove(&mut self, key: Key) -> Option<V> {
        let Some(index) = dense_index(key) else { return self.sparse.remove(&key) };
        let removed = self.dense.get_mut(index).and_then(Option::take);
        if removed.is_some() {
            self.dense_len -= 1;
            while self.dense.last().is_some_and(Option::is_none) {
                self.dense.pop();
            }
        }
        removed
    }

    /// Calls `f` with every entry, in key order (a plain loop, for the hot paths).
    pub fn for_each(&self, mut f: impl FnMut(Key, &V)) {
        if !self.sparse.is_empty() {
            for (key, value) in self.sparse.range(..0) {
                f(*key, value);
            }
        }
        for (key, value) in self.dense.iter().enumerate() {
            if let Some(value) = value {
                f(key as Key, value);
            }
        }
        if !self.sparse.is_empty() {
            for (key, value) in self.sparse.range(DENSE_KEYS..) {
                f(*key, value);
            }
        }
    }

    /// Every entry, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (Key, &V)> + '_ {
        let negative = self.sparse.range(..0).map(|(key, value)| (*key, value));
        let dense = self.dense.iter().enumerate().filter_map(|(key, value)| value.as_ref().map(|v| (key as Key, v)));
        let large = self.sparse.range(DENSE_KEYS..).map(|(key, value)| (*key, value));
        negative.chain(dense).chain(large)
    }
}

impl<V> FromIterator<(Key, V)> for KeyMap<V> {
    fn from_iter<I: IntoIterator<Item = (Key, V)>>(entries: I) -> KeyMap<V> {
        let entries = entries.into_iter();
        let mut map = KeyMap::default();
        map.dense.reserve(entries.size_hint().0);
        for (key, value) in entries {
            map.insert(key, value);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_an_ordered_map_whatever_the_keys() {
        let keys = [5, 1, -2, DENSE_KEYS + 3, 9, 0, -7, DENSE_KEYS - 1, 5];
        let mut map = KeyMap::default();
        let mut expected = BTreeMap::new();
        for (value, key) in keys.into_iter().enumerate() {
            map.insert(key, value);
            expected.insert(key, value);
        }
        assert_eq!(map.iter().map(|(k, v)| (k, *v)).collect::<Vec<_>>(), expected.into_iter().collect::<Vec<_>>());
        assert_eq!(map.len(), 8);
        assert_eq!(map.get(5), Some(&8));
        assert_eq!(map.get(6), None);
        assert_eq!(map.get(DENSE_KEYS + 3), Some(&3));
        *map.get_mut(-2).expect("present") = 100;
        assert_eq!(map.get(-2), Some(&100));
        assert_eq!(map.remove(DENSE_KEYS - 1), Some(7));
        assert_eq!(map.remove(DENSE_KEYS - 1), None);
        assert_eq!(map.len(), 7);
    }

    #[test]
    fn equal_entries_make_equal_maps() {
        let a: KeyMap<u32> = [(3, 1), (1, 2)].into_iter().collect();
        let b: KeyMap<u32> = [(1, 2), (3, 1)].into_iter().collect();
        assert_eq!(a, b);
        let mut c: KeyMap<u32> = [(1, 2), (3, 1), (9, 4)].into_iter().collect();
        c.remove(9);
        assert_eq!(a, c, "a removal leaves no trace");
    }
}
