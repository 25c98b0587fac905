//! Sequencing an edge's parallel copy into single moves.
//!
//! The copy is a set of one-lane moves with distinct destinations, all
//! reading before any writes. A move may run once no other pending move
//! still reads its destination; when every pending move's destination is
//! still read, the rest are cycles, and one destination is first saved to a
//! scratch — a register lane free across the edge (holding nothing live
//! into the successor and read or written by no move), else the function's
//! cycle slot — so only a cycle ever costs a scratch. A slot-to-slot move
//! goes through a free register lane; without one, lane 0 is saved to the
//! function's save slot around it (the only case with four edits).
//!
//! Part of the CFG allocator (`reg/cfg/`): it allocates a client's
//! control-flow graph. The module allocator (`reg/alloc/`) is the other
//! register allocator; the two share only the colorer (`reg/chaitin_briggs.rs`) and
//! its graph (`reg/graph.rs`).

use alloc::vec::Vec;

use super::output::Location;
use super::program::{Full, NONE};

/// The sequencer's workspace.
#[derive(Clone, Debug, Default)]
pub(crate) struct ParallelCopy {
    pending: Vec<(Location, Location)>,
}

/// Slot lanes the sequencer may need (handed out on first use).
#[derive(Copy, Clone, Debug)]
pub(crate) struct ScratchSlots {
    /// Saves a cycle's value when no register lane is free.
    pub cycle: u32,
    /// Saves lane 0 around a slot-to-slot move without a free lane.
    pub save: u32,
}

impl Default for ScratchSlots {
    fn default() -> Self {
        ScratchSlots {
            cycle: NONE,
            save: NONE,
        }
    }
}

impl ParallelCopy {
    /// Reserves for copies of up to `n` lanes.
    pub fn reserve(&mut self, n: usize) {
        if self.pending.capacity() < n {
            self.pending.reserve_exact(n - self.pending.len());
        }
    }

    /// Room for `n` more pending moves.
    pub fn has_room(&self, n: usize) -> bool {
        self.pending.len() + n <= self.pending.capacity()
    }

    /// Adds a one-lane move of the copy.
    pub fn push(&mut self, from: Location, to: Location) {
        if from != to {
            self.pending.push((from, to));
        }
    }

    /// Emits the pending copy in a safe order through `emit(from, to)`.
    /// `free` is the bitmask of register lanes free across the edge;
    /// `slot_top` hands out scratch slot lanes.
    pub fn sequence(
        &mut self,
        free: &mut [u64],
        scratch: &mut ScratchSlots,
        slot_top: &mut u32,
        emit: &mut dyn FnMut(Location, Location) -> Result<(), Full>,
    ) -> Result<(), Full> {
        while !self.pending.is_empty() {
            let ready = (0..self.pending.len()).find(|&i| {
                let to = self.pending[i].1;
                !self.pending.iter().any(|m| m.0 == to)
            });
            if let Some(i) = ready {
                let (from, to) = self.pending.swap_remove(i);
                Self::one(from, to, free, scratch, slot_top, emit)?;
                continue;
            }
            // Only cycles are left: save one destination's value.
            let blocked = self.pending[0].1;
            let tmp = match take_free(free) {
                Some(r) => Location::reg(r),
                None => {
                    if scratch.cycle == NONE {
                        scratch.cycle = *slot_top;
                        *slot_top += 1;
                    }
                    Location::slot(scratch.cycle)
                }
            };
            Self::one(blocked, tmp, free, scratch, slot_top, emit)?;
            for m in self.pending.iter_mut() {
                if m.0 == blocked {
                    m.0 = tmp;
                }
            }
        }
        Ok(())
    }

    fn one(
        from: Location,
        to: Location,
        free: &mut [u64],
        scratch: &mut ScratchSlots,
        slot_top: &mut u32,
        emit: &mut dyn FnMut(Location, Location) -> Result<(), Full>,
    ) -> Result<(), Full> {
        if from.is_reg() || to.is_reg() {
            return emit(from, to);
        }
        if let Some(r) = peek_free(free) {
            let r = Location::reg(r);
            emit(from, r)?;
            return emit(r, to);
        }
        if scratch.save == NONE {
            scratch.save = *slot_top;
            *slot_top += 1;
        }
        let (r, save) = (Location::reg(0), Location::slot(scratch.save));
        emit(r, save)?;
        emit(from, r)?;
        emit(r, to)?;
        emit(save, r)
    }
}

fn peek_free(free: &[u64]) -> Option<u32> {
    free.iter()
        .enumerate()
        .find(|(_, &w)| w != 0)
        .map(|(i, &w)| i as u32 * 64 + w.trailing_zeros())
}

fn take_free(free: &mut [u64]) -> Option<u32> {
    let r = peek_free(free)?;
    free[r as usize / 64] &= !(1u64 << (r % 64));
    Some(r)
}
