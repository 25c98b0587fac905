//! Segregated size bins: the size index of a flat best-fit line.
//!
//! Free holes are kept in bins by size class — exact classes below 16
//! bytes, then 16 classes per power of two — each bin an intrusive doubly
//! linked list over the caller's segment ids, with a two-level bitmap of the
//! non-empty bins. Every size in bin `b` is smaller than every size in bin
//! `b + 1`, so the `k` smallest holes of at least `n` bytes are found by
//! walking the bins from `bin_of(n)` upwards and stopping after the first
//! bin that completes `k` (exactly the answers of an ordered index; see
//! [`super::best_fit`]). Insert and remove are O(1) with no pointer chasing
//! through a tree; a search walks the few holes of the bins it opens, which
//! the 16-way split keeps short (one class spans 1/16 of its octave).
//!
//! Storage is sized by [`SizeBins::reserve`] (one link pair per segment id);
//! nothing allocates afterwards.

use alloc::vec::Vec;

/// No segment.
pub const NIL: u32 = u32::MAX;
/// Exact bins for sizes `0..SMALL`.
const SMALL: u64 = 16;
/// Classes per power of two above `SMALL` (a power of two).
const SUB: u64 = 16;
const SUB_BITS: u32 = 4;
/// Bins: the small ones, then `SUB` per octave from 2^4 to 2^63.
pub const BINS: usize = SMALL as usize + (64 - SUB_BITS as usize) * SUB as usize;
const WORDS: usize = BINS.div_ceil(64);

/// The bin of a hole of `size` bytes (monotone in `size`).
#[inline]
pub fn bin_of(size: u64) -> usize {
    if size < SMALL {
        size as usize
    } else {
        let e = 63 - size.leading_zeros(); // >= SUB_BITS
        let sub = (size >> (e - SUB_BITS)) & (SUB - 1);
        SMALL as usize + ((e - SUB_BITS) as usize) * SUB as usize + sub as usize
    }
}

/// Bins of free segments with O(1) insert/remove and a bitmap search.
#[derive(Clone, Debug)]
pub struct SizeBins {
    head: [u32; BINS],
    words: [u64; WORDS],
    /// Bit `w` set when `words[w] != 0`.
    summary: u16,
    prev: Vec<u32>,
    next: Vec<u32>,
    len: usize,
}

impl Default for SizeBins {
    fn default() -> Self {
        SizeBins {
            head: [NIL; BINS],
            words: [0; WORDS],
            summary: 0,
            prev: Vec::new(),
            next: Vec::new(),
            len: 0,
        }
    }
}

impl SizeBins {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.prev, self.next)
    }

    /// Room for segment ids `0..segs` (capacity only: an unused line
    /// touches no memory).
    pub fn reserve(&mut self, segs: usize) {
        for v in [&mut self.prev, &mut self.next] {
            crate::storage::grow(v, segs);
        }
    }

    /// Extends the link arrays to their whole reserve, once (later calls
    /// are no-ops): links are written on insert, so [`Self::clear`] need
    /// not touch them and insert needs no growth check. Call before the
    /// first insert.
    pub fn open_links(&mut self) {
        for v in [&mut self.prev, &mut self.next] {
            let cap = v.capacity();
            if v.len() < cap {
                v.resize(cap, NIL);
            }
        }
    }

    /// Empties the bins; ids up to the reserved count may be inserted.
    pub fn clear(&mut self) {
        self.head = [NIL; BINS];
        self.words = [0; WORDS];
        self.summary = 0;
        self.len = 0;
    }

    #[cfg(test)]
    /// Holes indexed.
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    /// True when no hole is indexed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when segment `s` can be linked (its id is within the reserve).
    pub fn can_hold(&self, s: u32) -> bool {
        (s as usize) < self.prev.len()
    }

    /// Links segment `s`, a hole of `size` bytes. The caller checks
    /// [`Self::can_hold`] first.
    pub fn insert(&mut self, s: u32, size: u64) {
        let i = s as usize;
        let b = bin_of(size);
        let h = self.head[b];
        self.prev[i] = NIL;
        self.next[i] = h;
        if h != NIL {
            self.prev[h as usize] = s;
        }
        self.head[b] = s;
        self.words[b / 64] |= 1 << (b % 64);
        self.summary |= 1 << (b / 64);
        self.len += 1;
    }

    /// Unlinks segment `s`, inserted with `size`.
    pub fn remove(&mut self, s: u32, size: u64) {
        let i = s as usize;
        let (p, n) = (self.prev[i], self.next[i]);
        let b = bin_of(size);
        if p != NIL {
            self.next[p as usize] = n;
        } else {
            self.head[b] = n;
            if n == NIL {
                self.words[b / 64] &= !(1 << (b % 64));
                if self.words[b / 64] == 0 {
                    self.summary &= !(1 << (b / 64));
                }
            }
        }
        if n != NIL {
            self.prev[n as usize] = p;
        }
        self.len -= 1;
    }

    /// The first non-empty bin at or after `from`.
    #[inline]
    pub fn next_bin(&self, from: usize) -> Option<usize> {
        if from >= BINS {
            return None;
        }
        let w = from / 64;
        let bits = self.words[w] & (u64::MAX << (from % 64));
        if bits != 0 {
            return Some(w * 64 + bits.trailing_zeros() as usize);
        }
        let rest = if w + 1 >= 16 {
            0
        } else {
            self.summary & (u16::MAX << (w + 1))
        };
        if rest == 0 {
            return None;
        }
        let w = rest.trailing_zeros() as usize;
        Some(w * 64 + self.words[w].trailing_zeros() as usize)
    }

    /// The last non-empty bin.
    pub fn last_bin(&self) -> Option<usize> {
        if self.summary == 0 {
            return None;
        }
        let w = 15 - self.summary.leading_zeros() as usize;
        Some(w * 64 + 63 - self.words[w].leading_zeros() as usize)
    }

    /// First segment of bin `b` ([`NIL`] when empty).
    #[inline]
    pub fn head(&self, b: usize) -> u32 {
        self.head[b]
    }

    /// The segment after `s` in its bin ([`NIL`] at the end).
    #[inline]
    pub fn next(&self, s: u32) -> u32 {
        self.next[s as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_are_monotone_in_size() {
        let mut last = 0;
        for s in (0..5000u64).chain([1 << 40, (1 << 40) + 1, u64::MAX]) {
            let b = bin_of(s);
            assert!(b >= last && b < BINS, "size {s} bin {b}");
            last = b;
        }
        assert_eq!(bin_of(u64::MAX), BINS - 1);
    }

    #[test]
    fn insert_remove_and_search() {
        let mut bins = SizeBins::default();
        bins.reserve(8);
        bins.clear();
        bins.open_links();
        bins.insert(0, 100);
        bins.insert(1, 5);
        bins.insert(2, 100);
        bins.insert(3, 1 << 30);
        assert_eq!(bins.len(), 4);
        assert_eq!(bins.next_bin(0), Some(bin_of(5)));
        assert_eq!(bins.next_bin(bin_of(6)), Some(bin_of(100)));
        let b = bin_of(100);
        let mut seen = [bins.head(b), bins.next(bins.head(b))];
        seen.sort();
        assert_eq!(seen, [0, 2]);
        bins.remove(2, 100);
        bins.remove(0, 100);
        assert_eq!(bins.next_bin(bin_of(6)), Some(bin_of(1 << 30)));
        assert_eq!(bins.last_bin(), Some(bin_of(1 << 30)));
        bins.remove(3, 1 << 30);
        bins.remove(1, 5);
        assert!(bins.is_empty());
        assert_eq!(bins.next_bin(0), None);
        assert_eq!(bins.last_bin(), None);
    }
}
