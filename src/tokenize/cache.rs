//! The encoder's memo tables: a string → WordPiece ids map. Keys of up to 24 bytes
//! (nearly every word) are held in the table's slot itself ([`CompactString`]), so a
//! lookup compares the key without reading another allocation; the ids of every entry
//! lie in one arena, so an entry costs its key and a range, not a vector of its own.

use std::collections::HashMap;

use compact_str::CompactString;
use rustc_hash::FxBuildHasher;

/// A string → ids memo. Entries are never removed. Keys are our own input's words (no
/// adversary to defend against), hence FxHash rather than SipHash.
#[derive(Debug, Clone, Default)]
pub(crate) struct IdCache {
    /// Key → where its ids start in `ids`, and how many there are.
    map: HashMap<CompactString, (u32, u32), FxBuildHasher>,
    ids: Vec<u32>,
}

impl IdCache {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Makes room for `entries` entries in all, so that inserting up to that many never
    /// grows the table through intermediate sizes.
    pub(crate) fn reserve(&mut self, entries: usize) {
        self.map.reserve(entries.saturating_sub(self.map.len()));
    }

    /// The ids remembered for `key`.
    #[inline]
    pub(crate) fn get(&self, key: &str) -> Option<&[u32]> {
        self.map
            .get(key)
            .map(|&(at, n)| &self.ids[at as usize..(at + n) as usize])
    }

    /// Remembers `ids` for `key` (replacing what it held). Returns false, remembering
    /// nothing, when the arena would pass 2^32 ids.
    pub(crate) fn insert(&mut self, key: &str, ids: &[u32]) -> bool {
        let (Ok(at), Ok(n)) = (u32::try_from(self.ids.len()), u32::try_from(ids.len())) else {
            return false;
        };
        if at.checked_add(n).is_none() {
            return false;
        }
        self.map.insert(key.into(), (at, n));
        self.ids.extend_from_slice(ids);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_their_ids() {
        let mut c = IdCache::default();
        let long = "x".repeat(40);
        for (k, ids) in [
            ("", &[][..]),
            ("a", &[1][..]),
            ("ab", &[1, 2][..]),
            (long.as_str(), &[5, 6, 7, 8][..]),
        ] {
            assert!(c.get(k).is_none());
            assert!(c.insert(k, ids));
            assert_eq!(c.get(k), Some(ids), "{k:?}");
        }
        assert_eq!(c.len(), 4);
        assert!(c.get("abc").is_none());
        assert_eq!(c.get("ab"), Some(&[1, 2][..]));
    }
}
