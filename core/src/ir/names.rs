//! Interned names: one byte arena, one end offset per name, and an
//! open-addressing hash table for lookup, so that interning is O(1) and a
//! name costs four bytes in every column that refers to it.

use alloc::string::String;
use alloc::vec::Vec;

use super::column::EntityRef;
use crate::entity_id;

entity_id!(
    /// An interned name.
    Name,
    "name"
);

impl EntityRef for Name {
    fn new(i: usize) -> Self {
        Name::new(i)
    }
    fn index(self) -> usize {
        Name::index(self)
    }
}

/// Longest name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 256;

/// The name arena.
#[derive(Clone, Debug, Default)]
pub struct NamePool {
    /// Every name, one after the other. A `String` (only `&str`s are
    /// interned, whole), so every span between two ends is on character
    /// boundaries and [`NamePool::get`] slices without re-validating
    /// UTF-8 (which cost ~4% of a run: names are read per operand).
    bytes: String,
    ends: Vec<u32>,
    /// Open addressing; `u32::MAX` marks an empty slot. Length is a power of
    /// two with the load kept at most 3/4 ([`table_len`]). Each slot holds the
    /// name index in its low [`INDEX_BITS`] bits and a tag of the name's
    /// hash above them, so a probe that meets another name rejects it
    /// without loading that name's bytes (two cache misses per probed slot
    /// at millions of names, which made interning the costliest step of
    /// parsing). A pool past `2^INDEX_BITS` names stores bare indices
    /// (`untagged`).
    table: Vec<u32>,
    untagged: bool,
}

/// Bits of a table slot that hold the name index while tags are in use.
const INDEX_BITS: u32 = 26;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;

/// The tag of hash `h`: 0..=62, so that no tagged slot equals the empty
/// marker.
#[inline]
fn tag_of(h: u64) -> u32 {
    ((h >> 58) as u32) % 63
}

/// Table length for `names` names: a power of two at least 4/3 of them.
/// Every slot is written when the table is built, so the whole table is
/// resident: a load of 3/4 (linear probing: ~2.5 probes per hit) instead of
/// 1/2 keeps a 5M-name module's table at 32 MiB rather than 64–128 MiB.
fn table_len(names: usize) -> usize {
    (names.saturating_add(names / 3) + 1)
        .next_power_of_two()
        .max(16)
}

fn hash(s: &[u8]) -> u64 {
    // No adversarial-hash concern: the table only speeds lookup, a
    // collision costs a probe, never correctness.
    crate::digest::digest(s)
}

impl NamePool {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reserves room for `names` names of `bytes` bytes in all.
    pub fn reserve(&mut self, names: usize, bytes: usize) {
        self.bytes.reserve(bytes);
        self.ends.reserve(names);
        let want = table_len(self.ends.len() + names);
        if want > self.table.len() {
            self.rehash(want);
        }
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when no name is interned.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The text of a name (empty for the sentinel).
    pub fn get(&self, n: Name) -> &str {
        let i = n.index();
        if i >= self.ends.len() {
            return "";
        }
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let end = self.ends[i] as usize;
        // Only whole `&str`s are ever interned: the span is on character
        // boundaries (`get` checks the two ends only).
        self.bytes.get(start..end).unwrap_or("")
    }

    /// The bytes of a name (empty for the sentinel): comparing them skips
    /// the UTF-8 check of [`NamePool::get`], which costs more than the
    /// comparison on short names.
    pub fn bytes(&self, n: Name) -> &[u8] {
        self.span(n.index())
    }

    /// The bytes of name `i` (empty when out of range).
    fn span(&self, i: usize) -> &[u8] {
        let Some(&end) = self.ends.get(i) else {
            return &[];
        };
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.bytes
            .as_bytes()
            .get(start..end as usize)
            .unwrap_or(&[])
    }

    /// The table slot value for name `n` of hash `h`.
    #[inline]
    fn slot_value(&self, h: u64, n: u32) -> u32 {
        if self.untagged {
            n
        } else {
            n | tag_of(h) << INDEX_BITS
        }
    }

    /// The name index in slot value `v` when its tag can match hash `h`.
    #[inline]
    fn candidate(&self, h: u64, v: u32) -> Option<u32> {
        if self.untagged {
            Some(v)
        } else {
            (v >> INDEX_BITS == tag_of(h)).then_some(v & INDEX_MASK)
        }
    }

    /// The name spelled `s`, if interned.
    pub fn lookup(&self, s: &str) -> Option<Name> {
        if self.table.is_empty() {
            return None;
        }
        let mask = self.table.len() - 1;
        let h = hash(s.as_bytes());
        let mut slot = h as usize & mask;
        loop {
            let v = self.table[slot];
            if v == u32::MAX {
                return None;
            }
            // Compare bytes: `get` re-validates UTF-8, which would dominate
            // parsing (every operand is a lookup).
            if let Some(i) = self.candidate(h, v) {
                if self.span(i as usize) == s.as_bytes() {
                    return Some(Name::from_u32(i));
                }
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Interns `s`, returning the existing name when it is already there.
    /// Returns `None` when `s` is longer than [`MAX_NAME_LEN`].
    pub fn intern(&mut self, s: &str) -> Option<Name> {
        if s.len() > MAX_NAME_LEN {
            return None;
        }
        if self.table.is_empty() && !self.ends.is_empty() {
            // A copy without its table (`clone_without_index`): rebuild it
            // before looking up.
            self.rehash(table_len(self.ends.len()));
        }
        if let Some(n) = self.lookup(s) {
            return Some(n);
        }
        if !self.untagged && self.ends.len() >= INDEX_MASK as usize {
            // Past the tagged index range: bare indices from here on.
            self.untagged = true;
            self.rehash(self.table.len().max(16));
        }
        if table_len(self.ends.len() + 1) > self.table.len() {
            self.rehash(table_len(self.ends.len() + 1).max(self.table.len() * 2));
        }
        self.bytes.push_str(s);
        let n = Name::new(self.ends.len());
        self.ends.push(self.bytes.len() as u32);
        self.insert_slot(s.as_bytes(), n);
        Some(n)
    }

    fn insert_slot(&mut self, s: &[u8], n: Name) {
        let mask = self.table.len() - 1;
        let h = hash(s);
        let mut slot = h as usize & mask;
        while self.table[slot] != u32::MAX {
            slot = (slot + 1) & mask;
        }
        self.table[slot] = self.slot_value(h, n.as_u32());
    }

    fn rehash(&mut self, size: usize) {
        self.table.clear();
        self.table.resize(size, u32::MAX);
        for i in 0..self.ends.len() {
            let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
            let end = self.ends[i] as usize;
            let h = hash(&self.bytes.as_bytes()[start..end]);
            let mask = size - 1;
            let mut slot = h as usize & mask;
            while self.table[slot] != u32::MAX {
                slot = (slot + 1) & mask;
            }
            self.table[slot] = self.slot_value(h, i as u32);
        }
    }

    /// Frees the lookup table, for a pool only printed from from here on:
    /// [`NamePool::lookup`] finds nothing until [`NamePool::intern`] or
    /// [`NamePool::reserve`] rebuilds it (as for [`Self::clone_without_index`]).
    pub fn drop_index(&mut self) {
        self.table = Vec::new();
    }

    /// A copy without the lookup table, for a pool only printed from (a
    /// module copy that is only read): [`NamePool::lookup`] finds nothing in
    /// it until [`NamePool::intern`] or [`NamePool::reserve`] rebuilds the
    /// table.
    pub fn clone_without_index(&self) -> NamePool {
        NamePool {
            bytes: self.bytes.clone(),
            ends: self.ends.clone(),
            table: Vec::new(),
            untagged: self.untagged,
        }
    }

    /// Makes `self` equal to `src` (the index too) in its own storage: no
    /// allocation when it holds `src`'s reserved room already.
    pub(crate) fn copy_from_pool(&mut self, src: &Self) {
        self.bytes.clear();
        self.bytes.reserve_exact(src.bytes.capacity());
        self.bytes.push_str(&src.bytes);
        crate::storage::copy_into(&mut self.ends, &src.ends);
        crate::storage::copy_into(&mut self.table, &src.table);
        self.untagged = src.untagged;
    }

    /// Bytes of storage reserved.
    pub fn reserved_bytes(&self) -> usize {
        self.bytes.capacity() + self.ends.capacity() * 4 + self.table.capacity() * 4
    }

    /// Bytes of the lookup table alone (what [`NamePool::drop_index`]
    /// frees).
    pub fn index_bytes(&self) -> usize {
        self.table.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intern_is_idempotent_and_lookup_finds() {
        let mut p = NamePool::new();
        let a = p.intern("xt").unwrap();
        let b = p.intern("acc").unwrap();
        assert_ne!(a, b);
        assert_eq!(p.intern("xt"), Some(a));
        assert_eq!(p.get(b), "acc");
        assert_eq!(p.lookup("acc"), Some(b));
        assert_eq!(p.lookup("nope"), None);
        for i in 0..1000 {
            let s = alloc::format!("t{i}");
            let n = p.intern(&s).unwrap();
            assert_eq!(p.get(n), s);
        }
        assert_eq!(p.lookup("t999").map(|n| p.get(n)), Some("t999"));
        assert_eq!(p.lookup("xt"), Some(a));
        let long = "x".repeat(MAX_NAME_LEN + 1);
        assert_eq!(p.intern(&long), None);
    }

    #[test]
    fn switching_to_bare_indices_keeps_every_name() {
        // The switch past 2^26 names, forced on a small pool.
        let mut p = NamePool::new();
        let names: alloc::vec::Vec<_> = (0..300)
            .map(|i| p.intern(&alloc::format!("n{i}")).unwrap())
            .collect();
        p.untagged = true;
        p.rehash(p.table.len());
        for (i, &n) in names.iter().enumerate() {
            assert_eq!(p.lookup(&alloc::format!("n{i}")), Some(n));
        }
        let m = p.intern("after").unwrap();
        assert_eq!(p.lookup("after"), Some(m));
        assert_eq!(p.lookup("n300"), None);
    }
}
