//! The encoder's memo tables: a string → WordPiece ids map laid out for lookups that
//! mostly miss the CPU cache.
//!
//! A `HashMap<Box<str>, (u32, u32)>` lookup that hits touches three scattered places:
//! the slot, the key's own allocation (the comparison) and the id arena. Here a slot is
//! 32 bytes holding a 32-bit tag of the hash, the key's length, the key itself when it
//! has at most 16 bytes, and the ids themselves when there are at most two: nearly every
//! word of English text and its pieces, so a hit usually reads one cache line. Longer
//! keys and id lists live in arenas. Open addressing with linear probing, at most half
//! full; the slot index is the low bits of the hash, which `finish` spreads.
//!
//! A slot is four words, all zero when free (the id count is stored plus one). A table
//! sized up front for a large input ([`IdCache::reserve`]) never grows through
//! intermediate tables; its zeros are written when it is made (see `resize`).

use super::FxHasher;

const INLINE_KEY: usize = 16;
const INLINE_IDS: usize = 2;
/// Slots of a new table (and the fewest a table has).
const MIN_SLOTS: usize = 1024;

/// Eight words: the key's bytes zero-padded (little-endian words 0–3), or (longer keys)
/// its start in `keys` in word 0; the hash's low 32 bits (word 4: the home slot, since
/// tables stay far below 2^32 slots, kept to grow without hashing again and compared
/// before the key); the key's length (low half of word 5) and the number of ids plus
/// one (high half; 0 for a free slot); the ids (words 6–7), or (more than two) their
/// start in `ids` in word 6.
type Slot = [u32; 8];

const TAG: usize = 4;
const LENS: usize = 5;
const IDS: usize = 6;

/// Whether a slot holds an entry.
#[inline]
fn used(slot: &Slot) -> bool {
    slot[LENS] >> 16 != 0
}

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
            slots: vec![[0; 8]; MIN_SLOTS],
            len: 0,
            keys: Vec::new(),
            ids: Vec::new(),
        }
    }
}

/// A key as the table sees it: its tag, and its first 16 bytes zero-padded as four
/// little-endian words (the inline key; unused for longer keys).
struct Probe {
    tag: u32,
    inline: [u32; 4],
}

/// FxHash's multiply-rotate over the zero-padded key (two 8-byte words at most for an
/// inline key, read while padding it) and its length, spread by [`FxHasher`]'s
/// `finish`.
#[inline]
fn probe(key: &[u8]) -> Probe {
    let mut h = FxHasher(0);
    let mut inline = [0; 4];
    if key.len() <= INLINE_KEY {
        let (lo, hi) = padded(key);
        h.add(lo);
        if key.len() > 8 {
            h.add(hi);
        }
        inline = [lo as u32, (lo >> 32) as u32, hi as u32, (hi >> 32) as u32];
    } else {
        std::hash::Hasher::write(&mut h, key);
    }
    h.add(key.len() as u64);
    Probe {
        tag: std::hash::Hasher::finish(&h) as u32,
        inline,
    }
}

/// A key of at most 16 bytes zero-padded to 16, as two little-endian words, read
/// with a few possibly overlapping fixed-size loads instead of a copy of variable
/// length (a `memcpy` call per lookup, about 1% of the client's CPU).
#[inline]
fn padded(key: &[u8]) -> (u64, u64) {
    debug_assert!(key.len() <= INLINE_KEY);
    let n = key.len();
    let u64_at = |i: usize| u64::from_le_bytes(key[i..i + 8].try_into().expect("8 bytes"));
    let u32_at = |i: usize| {
        u64::from(u32::from_le_bytes(
            key[i..i + 4].try_into().expect("4 bytes"),
        ))
    };
    match n {
        // The last 8 bytes moved down to their place; the overlap with the first 8 holds
        // the same bytes, shifted out.
        9..=16 => (u64_at(0), u64_at(n - 8) >> (8 * (16 - n))),
        8 => (u64_at(0), 0),
        // The first 4 and the last 4 (overlapping for fewer than 8: the same bytes at
        // the same places, so or-ing them is exact).
        4..=7 => (u32_at(0) | u32_at(n - 4) << (8 * (n - 4)), 0),
        _ => {
            let mut lo = 0u64;
            for (i, &b) in key.iter().enumerate() {
                lo |= u64::from(b) << (8 * i);
            }
            (lo, 0)
        }
    }
}

impl IdCache {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Makes room for `entries` entries in all, so that inserting up to that many never
    /// grows the table through intermediate sizes.
    pub fn reserve(&mut self, entries: usize) {
        let want = entries
            .saturating_mul(2)
            .max(MIN_SLOTS)
            .checked_next_power_of_two()
            .unwrap_or(self.slots.len());
        if want > self.slots.len() {
            self.resize(want);
        }
    }

    /// The ids remembered for `key`.
    #[inline]
    pub fn get(&self, key: &str) -> Option<&[u32]> {
        let bytes = key.as_bytes();
        let p = probe(bytes);
        let mask = self.slots.len() - 1;
        let mut i = p.tag as usize & mask;
        loop {
            let slot = &self.slots[i];
            if !used(slot) {
                return None;
            }
            if slot[TAG] == p.tag
                && (slot[LENS] & 0xffff) as usize == bytes.len()
                && self.key_matches(slot, bytes, &p.inline)
            {
                return Some(self.ids_of(slot));
            }
            i = (i + 1) & mask;
        }
    }

    /// Asks the CPU to start loading the home slot of `key`, without waiting for it:
    /// a caller that knows its next keys (a paragraph's words) issues this a few keys
    /// ahead, so that the lookups' cache misses (a table of megabytes, one miss per
    /// lookup) overlap instead of following one another.
    #[inline]
    pub fn prefetch(&self, key: &str) {
        let i = probe(key.as_bytes()).tag as usize & (self.slots.len() - 1);
        let slot: *const Slot = &self.slots[i];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is only a hint: it reads nothing into the program, never
        // faults, and the address is that of a live slot anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                slot.cast::<i8>(),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    #[inline]
    fn key_matches(&self, slot: &Slot, key: &[u8], inline: &[u32; 4]) -> bool {
        if key.len() <= INLINE_KEY {
            return slot[..4] == inline[..];
        }
        let at = slot[0] as usize;
        &self.keys[at..at + key.len()] == key
    }

    #[inline]
    fn ids_of<'a>(&'a self, slot: &'a Slot) -> &'a [u32] {
        let n = (slot[LENS] >> 16) as usize - 1;
        if n <= INLINE_IDS {
            &slot[IDS..IDS + n]
        } else {
            let at = slot[IDS] as usize;
            &self.ids[at..at + n]
        }
    }

    /// Remembers `ids` for `key`, which must not be in the cache yet. Returns false,
    /// remembering nothing, for a key or id list too long to describe (64 KiB, 64 Ki
    /// ids) or when an arena would pass 2^32 entries.
    pub fn insert(&mut self, key: &str, ids: &[u32]) -> bool {
        let (Ok(key_len), Ok(stored_ids)) =
            (u16::try_from(key.len()), u16::try_from(ids.len() + 1))
        else {
            return false;
        };
        if self.ids.len() + ids.len() > u32::MAX as usize
            || (key.len() > INLINE_KEY && self.keys.len() + key.len() > u32::MAX as usize)
        {
            return false;
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.resize(self.slots.len() * 2);
        }
        let p = probe(key.as_bytes());
        let mut slot: Slot = [0; 8];
        slot[..4].copy_from_slice(&p.inline);
        slot[TAG] = p.tag;
        slot[LENS] = u32::from(key_len) | u32::from(stored_ids) << 16;
        if key.len() > INLINE_KEY {
            slot[0] = self.keys.len() as u32;
            self.keys.extend_from_slice(key.as_bytes());
        }
        if ids.len() <= INLINE_IDS {
            slot[IDS..IDS + ids.len()].copy_from_slice(ids);
        } else {
            slot[IDS] = self.ids.len() as u32;
            self.ids.extend_from_slice(ids);
        }
        self.place(slot);
        self.len += 1;
        true
    }

    fn place(&mut self, slot: Slot) {
        let mask = self.slots.len() - 1;
        let mut i = slot[TAG] as usize & mask;
        while used(&self.slots[i]) {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
    }

    /// Moves every entry to a table of `slots` slots (a power of two).
    fn resize(&mut self, slots: usize) {
        // Written through now, not allocated zeroed: a zeroed allocation's pages are the
        // kernel's shared zero page until written, so a lookup that misses on one and
        // the insert after it cost two page faults, the second a copy-on-write that
        // interrupts every other CPU running this process to flush its TLB (2% of the
        // client's CPU on SQuAD-dev-sized). Nearly every page of a table sized for its
        // input ends up holding an entry anyway.
        let mut bigger = Vec::with_capacity(slots);
        bigger.resize(slots, [0; 8]);
        let old = std::mem::replace(&mut self.slots, bigger);
        for slot in old.into_iter().filter(used) {
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

    #[test]
    fn a_reserved_table_does_not_grow() {
        let mut c = IdCache::default();
        assert!(c.insert("kept", &[7]));
        c.reserve(5000);
        let slots = c.slots.len();
        assert_eq!(slots, 16384);
        for i in 0..5000 {
            let key = format!("w{i}");
            if key != "kept" {
                assert!(c.insert(&key, &[i]));
            }
        }
        assert_eq!(c.slots.len(), slots);
        assert_eq!(c.get("kept"), Some(&[7][..]));
        assert_eq!(c.get("w4999"), Some(&[4999][..]));
        // Reserving less than there is room for changes nothing.
        c.reserve(10);
        assert_eq!(c.slots.len(), slots);
    }

    /// The loads give the key zero-padded, for every length up to 16.
    #[test]
    fn padded_keys_equal_a_zero_padded_copy() {
        let bytes: Vec<u8> = (1..=16).map(|i| i * 15 + 7).collect();
        for n in 0..=INLINE_KEY {
            let key = &bytes[..n];
            let mut k = [0u8; INLINE_KEY];
            k[..n].copy_from_slice(key);
            let want = (
                u64::from_le_bytes(k[..8].try_into().unwrap()),
                u64::from_le_bytes(k[8..].try_into().unwrap()),
            );
            assert_eq!(padded(key), want, "{n} bytes");
        }
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
            for (n, (k, ids)) in entries.iter().enumerate() {
                if n == 300 {
                    c.reserve(2000);
                }
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
