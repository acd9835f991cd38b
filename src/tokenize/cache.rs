//! The encoder's memo tables: a string → WordPiece ids map laid out for lookups that
//! mostly miss the CPU cache.
//!
//! A `HashMap<Box<str>, (u32, u32)>` lookup that hits touches three scattered places:
//! the slot, the key's own allocation (the comparison) and the id arena. Here a slot is
//! 32 bytes holding a 32-bit tag of the hash, the key's length, the key itself when it
//! has at most 16 bytes, and the ids themselves when there are at most two: nearly every
//! word of English text and its pieces, so a hit usually reads one cache line. Longer
//! keys and id lists live in arenas. Open addressing with linear probing, at most half
//! full; the slot index is the low bits of [`WordHash`], whose `finish` spreads them.

use std::hash::BuildHasher;

use super::WordHash;

const INLINE_KEY: usize = 16;
const INLINE_IDS: usize = 2;
const EMPTY: u16 = u16::MAX;

#[derive(Debug, Clone, Copy)]
struct Slot {
    /// The key's bytes zero-padded, or (longer keys) its start in `keys` in `key[..8]`.
    key: [u8; INLINE_KEY],
    /// The hash's low 32 bits: the home slot (tables stay far below 2^32 slots), kept
    /// to grow without hashing again and compared before the key.
    tag: u32,
    key_len: u16,
    /// Number of ids, or `EMPTY` for a free slot.
    ids_len: u16,
    /// The ids, or (more than two) their start in `ids` in `ids[0]`.
    ids: [u32; INLINE_IDS],
}

const FREE: Slot = Slot {
    key: [0; INLINE_KEY],
    tag: 0,
    key_len: 0,
    ids_len: EMPTY,
    ids: [0; INLINE_IDS],
};

/// A string → ids memo (see the module header). Entries are never removed.
#[derive(Debug, Clone)]
pub struct IdCache {
    slots: Vec<Slot>,
    len: usize,
    keys: Vec<u8>,
    ids: Vec<u32>,
}

impl Default for IdCache {
    fn default() -> Self {
        IdCache {
            slots: vec![FREE; 1024],
            len: 0,
            keys: Vec::new(),
            ids: Vec::new(),
        }
    }
}

fn hash(key: &str) -> u32 {
    WordHash.hash_one(key) as u32
}

fn padded(key: &[u8]) -> [u8; INLINE_KEY] {
    let mut k = [0; INLINE_KEY];
    if key.len() <= INLINE_KEY {
        k[..key.len()].copy_from_slice(key);
    }
    k
}

impl IdCache {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The ids remembered for `key`.
    #[inline]
    pub fn get(&self, key: &str) -> Option<&[u32]> {
        let h = hash(key);
        let bytes = key.as_bytes();
        let inline = padded(bytes);
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let slot = &self.slots[i];
            if slot.ids_len == EMPTY {
                return None;
            }
            if slot.tag == h
                && usize::from(slot.key_len) == bytes.len()
                && self.key_matches(slot, bytes, &inline)
            {
                return Some(self.ids_of(slot));
            }
            i = (i + 1) & mask;
        }
    }

    fn key_matches(&self, slot: &Slot, key: &[u8], inline: &[u8; INLINE_KEY]) -> bool {
        if key.len() <= INLINE_KEY {
            return slot.key == *inline;
        }
        let at = u64::from_le_bytes(slot.key[..8].try_into().expect("8 bytes")) as usize;
        &self.keys[at..at + key.len()] == key
    }

    fn ids_of<'a>(&'a self, slot: &'a Slot) -> &'a [u32] {
        let n = usize::from(slot.ids_len);
        if n <= INLINE_IDS {
            &slot.ids[..n]
        } else {
            let at = slot.ids[0] as usize;
            &self.ids[at..at + n]
        }
    }

    /// Remembers `ids` for `key`, which must not be in the cache yet. Returns false,
    /// remembering nothing, for a key or id list too long to describe (64 KiB, 64 Ki
    /// ids) or when the arenas would pass 2^32 entries.
    pub fn insert(&mut self, key: &str, ids: &[u32]) -> bool {
        let (Ok(key_len), Ok(ids_len)) = (u16::try_from(key.len()), u16::try_from(ids.len()))
        else {
            return false;
        };
        if ids_len == EMPTY || self.ids.len() + ids.len() > u32::MAX as usize {
            return false;
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let h = hash(key);
        let mut slot = Slot {
            key: padded(key.as_bytes()),
            tag: h,
            key_len,
            ids_len,
            ids: [0; INLINE_IDS],
        };
        if key.len() > INLINE_KEY {
            slot.key[..8].copy_from_slice(&(self.keys.len() as u64).to_le_bytes());
            self.keys.extend_from_slice(key.as_bytes());
        }
        if ids.len() <= INLINE_IDS {
            slot.ids[..ids.len()].copy_from_slice(ids);
        } else {
            slot.ids[0] = self.ids.len() as u32;
            self.ids.extend_from_slice(ids);
        }
        self.place(slot);
        self.len += 1;
        true
    }

    fn place(&mut self, slot: Slot) {
        let mask = self.slots.len() - 1;
        let mut i = slot.tag as usize & mask;
        while self.slots[i].ids_len != EMPTY {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
    }

    fn grow(&mut self) {
        let bigger = vec![FREE; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        for slot in old.into_iter().filter(|s| s.ids_len != EMPTY) {
            self.place(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn short_and_long_keys_and_id_lists() {
        let mut c = IdCache::default();
        let long = "x".repeat(40);
        for (k, ids) in [
            ("", &[][..]),
            ("a", &[1][..]),
            ("ab", &[1, 2][..]),
            ("exactly-16-bytes", &[1, 2, 3][..]),
            ("seventeen-bytes!!", &[4][..]),
            (long.as_str(), &[5, 6, 7, 8][..]),
        ] {
            assert!(c.get(k).is_none());
            assert!(c.insert(k, ids));
            assert_eq!(c.get(k), Some(ids), "{k:?}");
        }
        assert_eq!(c.len(), 6);
        assert!(c.get("exactly-16-byteS").is_none());
        assert!(c.get(&"x".repeat(39)).is_none());
        assert!(!c.insert("too many", &vec![0; 1 << 16]));
        assert!(c.get("too many").is_none());
    }

    proptest::proptest! {
        /// The same answers as a HashMap, through growth.
        #[test]
        fn agrees_with_a_hash_map(
            entries in proptest::collection::vec(
                ("[a-c]{0,20}|é{1,9}", proptest::collection::vec(0u32..9, 0..5)),
                0..1200,
            ),
        ) {
            let mut c = IdCache::default();
            let mut m: HashMap<String, Vec<u32>> = HashMap::new();
            for (k, ids) in &entries {
                if !m.contains_key(k) {
                    proptest::prop_assert!(c.insert(k, ids));
                    m.insert(k.clone(), ids.clone());
                }
                proptest::prop_assert_eq!(c.get(k), m.get(k).map(Vec::as_slice));
            }
            proptest::prop_assert_eq!(c.len(), m.len());
            for (k, ids) in &m {
                proptest::prop_assert_eq!(c.get(k), Some(ids.as_slice()));
            }
            proptest::prop_assert!(c.get("zz").is_none());
        }
    }
}
