//! When a walk may drop the value state of a location it is done with.
//!
//! An unplaced location's cells are a private region (`shape`): only the
//! access patterns on that location read or write them. Once the walk has
//! passed the last block that accesses it — and every pass of the loops
//! around that block — nothing reads those cells again, so their slabs and
//! bands can go back to the arenas' free lists. Without this, a program's
//! state holds every location it ever wrote until the end (an original
//! program keeps most of its tiles unplaced), and the arenas grow with the
//! whole program instead of with what is live.
//!
//! Invariant: location `l` is dropped only when the walk starts an
//! instruction of a block that no loop holds and that comes after every
//! block accessing `l` and after the outermost loop around each of them.
//! The walk visits such a block once, after every block before it is done
//! (loops are block ranges, walked to their end before the next block).
//! `OUTPUT` locations are never dropped: the end of the check compares
//! them. So every read the walk makes sees what it saw without dropping;
//! the findings do not change.

use alloc::vec::Vec;

use super::report::DataflowError;
use super::shape::private_region;
use super::state::CellMap;
use crate::ir::{Block, MemFlags, MemLoc, Module};

/// The locations to drop, by the block from which on they may go.
#[derive(Debug, Default)]
pub(super) struct Release {
    /// Per location, the first block from which on nothing accesses it
    /// (`u32::MAX`: no pattern accesses it); scratch of [`Self::compute`].
    key: Vec<u32>,
    /// `locs[starts[k] .. starts[k + 1]]` may be dropped from block `k` on.
    starts: Vec<u32>,
    locs: Vec<MemLoc>,
    /// Per block, the next free slot of its list in `locs`; scratch of
    /// [`Self::compute`], kept so that a later check reuses it.
    next: Vec<u32>,
    /// Blocks `[0, done)` have had their lists dropped.
    done: u32,
    /// Keep every location to the end ([`Self::compute`] plans no drop).
    pub keep_all: bool,
}

fn grow<T: Clone>(v: &mut Vec<T>, n: usize, x: T) -> Result<(), DataflowError> {
    v.clear();
    if v.try_reserve(n).is_err() {
        return Err(DataflowError::Capacity {
            what: "the locations the walk drops",
            reserved: v.capacity(),
        });
    }
    v.resize(n, x);
    Ok(())
}

impl Release {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.key, self.starts, self.locs, self.next)
    }

    /// The drop lists of `m` (see the module doc), in one pass over its
    /// blocks' instructions.
    pub fn compute(&mut self, m: &Module) -> Result<(), DataflowError> {
        self.done = 0;
        self.starts.clear();
        self.locs.clear();
        if self.keep_all {
            return Ok(());
        }
        let blocks = m.num_blocks();
        grow(&mut self.key, m.num_mems(), u32::MAX)?;
        for k in 0..blocks {
            let b = Block::new(k);
            let key = Self::after(m, b);
            let mut i = m.blocks().first[b];
            while i.is_valid() {
                for a in m.all_aps(i) {
                    if let Some(x) = self.key.get_mut(m.aps().loc[a].index()) {
                        *x = key;
                    }
                }
                i = m.insts().next[i];
            }
        }
        // Counting sort of the droppable locations by key.
        grow(&mut self.starts, blocks + 2, 0)?;
        let droppable = |l: MemLoc, key: u32| {
            key != u32::MAX
                && !m.mems().flags[l].contains(MemFlags::OUTPUT)
                && private_region(m, l).is_some()
        };
        let mut n = 0usize;
        for l in m.mems().space.keys() {
            let key = self.key[l.index()];
            if droppable(l, key) {
                if let Some(c) = self.starts.get_mut(key as usize + 1) {
                    *c += 1;
                    n += 1;
                }
            }
        }
        for k in 1..self.starts.len() {
            self.starts[k] += self.starts[k - 1];
        }
        grow(&mut self.locs, n, MemLoc::INVALID)?;
        // `next` holds the next free slot of each block's list.
        grow(&mut self.next, blocks + 1, 0)?;
        self.next.copy_from_slice(&self.starts[..blocks + 1]);
        for l in m.mems().space.keys() {
            let key = self.key[l.index()];
            if droppable(l, key) {
                if let Some(at) = self.next.get_mut(key as usize) {
                    self.locs[*at as usize] = l;
                    *at += 1;
                }
            }
        }
        Ok(())
    }

    /// The first block past `b` and past the outermost loop around it.
    fn after(m: &Module, b: Block) -> u32 {
        let mut lp = m.blocks().loop_[b];
        if !lp.is_valid() {
            return b.index() as u32 + 1;
        }
        while m.loops().parent[lp].is_valid() {
            lp = m.loops().parent[lp];
        }
        m.loops().end_block[lp].index() as u32
    }

    /// Called as the walk starts an instruction of block `b`: drops from
    /// `state` the locations whose lists are due, when `b` is a block no
    /// loop holds.
    pub fn enter(
        &mut self,
        m: &Module,
        b: Block,
        state: &mut CellMap,
    ) -> Result<(), DataflowError> {
        let k = b.index() as u32;
        if k < self.done || m.blocks().loop_[b].is_valid() {
            return Ok(());
        }
        let from = self.starts.get(self.done as usize).copied().unwrap_or(0) as usize;
        let to = self.starts.get(k as usize + 1).copied().unwrap_or(0) as usize;
        self.done = k + 1;
        for &l in self.locs.get(from..to).unwrap_or(&[]) {
            if let Some(region) = private_region(m, l) {
                state.drop_region(region)?;
            }
        }
        Ok(())
    }
}
