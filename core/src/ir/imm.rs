//! The immediates of instructions, as a sparse side table.
//!
//! Only `imm` and `memset` carry an immediate, and most of those are small
//! constants; a full `i64` column cost 8 B for every instruction. The table
//! keeps one `(instruction, value)` entry per instruction whose immediate is
//! not zero, sorted by instruction id: instructions are only ever created at
//! the end of the id space (appends and pass insertions alike), so pushing
//! keeps the order and a lookup is a binary search. An absent entry reads
//! as 0, which is also what a new instruction without an immediate gets.

use alloc::vec::Vec;

use super::module::Inst;

/// Sparse `Inst → i64` map, sorted by instruction id, for ids created in
/// increasing order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImmTable {
    insts: Vec<Inst>,
    values: Vec<i64>,
}

impl ImmTable {
    /// The immediate of `i` (0 when it has none).
    #[inline]
    pub fn get(&self, i: Inst) -> i64 {
        match self.insts.binary_search(&i) {
            Ok(k) => self.values.get(k).copied().unwrap_or(0),
            Err(_) => 0,
        }
    }

    /// Number of instructions with a non-zero immediate.
    pub fn len(&self) -> usize {
        self.insts.len()
    }

    /// True when no instruction has a non-zero immediate.
    pub fn is_empty(&self) -> bool {
        self.insts.is_empty()
    }

    /// Entries that fit without growing.
    pub fn capacity(&self) -> usize {
        self.insts.capacity().min(self.values.capacity())
    }

    /// True when one more entry fits without growing.
    pub fn has_room(&self) -> bool {
        self.insts.len() < self.capacity()
    }

    /// Records the immediate of `i`, the newest instruction (ids must come
    /// in increasing order; the module creates them so). A zero is not
    /// stored. May grow; callers that must not allocate check
    /// [`Self::has_room`] first.
    pub(crate) fn push(&mut self, i: Inst, value: i64) {
        if value == 0 {
            return;
        }
        debug_assert!(self.insts.last().map_or(true, |&l| l < i));
        self.insts.push(i);
        self.values.push(value);
    }

    /// Makes `self` equal to `src` in its own storage
    /// ([`crate::storage::copy_into`]).
    pub(crate) fn copy_from_table(&mut self, src: &Self) {
        crate::storage::copy_into(&mut self.insts, &src.insts);
        crate::storage::copy_into(&mut self.values, &src.values);
    }

    /// Reserves room for `n` more entries.
    pub(crate) fn reserve_exact(&mut self, n: usize) {
        self.insts.reserve_exact(n);
        self.values.reserve_exact(n);
    }

    /// Drops the spare room.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.insts.shrink_to_fit();
        self.values.shrink_to_fit();
    }

    /// Bytes the entries use.
    pub fn used_bytes(&self) -> usize {
        self.insts.len() * (core::mem::size_of::<Inst>() + core::mem::size_of::<i64>())
    }

    /// Bytes reserved.
    pub fn reserved_bytes(&self) -> usize {
        self.insts.capacity() * core::mem::size_of::<Inst>()
            + self.values.capacity() * core::mem::size_of::<i64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_reads_zero_and_zeros_are_not_stored() {
        let mut t = ImmTable::default();
        t.push(Inst::new(0), 0);
        t.push(Inst::new(3), -7);
        t.push(Inst::new(9), i64::MAX);
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(Inst::new(0)), 0);
        assert_eq!(t.get(Inst::new(3)), -7);
        assert_eq!(t.get(Inst::new(4)), 0);
        assert_eq!(t.get(Inst::new(9)), i64::MAX);
        assert_eq!(t.used_bytes(), 24);
    }
}
