//! Copy coalescing of the module register allocator ([`super::RegAllocator`]):
//! SSA representatives joined by union-find over `mov`s, and the renaming
//! that turns the joined copies into self-moves and deletes them.
//!
//! For `b = mov a` where `a`'s range ends at the copy and `b`'s range starts
//! there (the two only touch), `b` joins `a`'s union-find class; the class's
//! range is the union, still an interval. The test is conservative in the
//! lane-weighted Briggs sense for interval graphs: the merged node's
//! neighbours at every position are the registers live there, so it is
//! trivially colorable exactly when the lane-weighted pressure over its range
//! stays within K; a merge whose range crosses a position above K is refused
//! (it would make a bigger spill candidate out of two small ones). Pinned
//! registers and spill temporaries are never coalesced. After coloring, the
//! class members are renamed to the representative and the copies, now
//! `a = mov a`, are deleted.
//!
//! Invariant: `parent` is a forest over the module's registers whose roots
//! are the class representatives; `gstart`/`gend` of a root hold the class's
//! doubled-position range.
//!
//! Part of the module allocator (`reg/alloc/`), not of the CFG allocator
//! (`reg/cfg/`), which has its own coalescing and splitting spill code.

use super::RegAllocator;
use crate::ir::{Module, Opcode, Reg, RegFlags};

impl RegAllocator {
    /// The class representative of register `r` (path halving).
    pub(super) fn find(&mut self, mut r: u32) -> u32 {
        while self.parent[r as usize] != r {
            let p = self.parent[r as usize];
            self.parent[r as usize] = self.parent[p as usize];
            r = p;
        }
        r
    }

    /// True when `r` may join a class: its lane is not fixed and it is not a
    /// spill temporary.
    pub(super) fn coalescable(&self, m: &Module, r: Reg) -> bool {
        !self.fixed(m, r) && !m.regs().flags[r].contains(RegFlags::SPILL_TEMP)
    }

    /// Merges copy-related classes whose ranges touch only at the copy.
    pub(super) fn coalesce(&mut self, m: &Module, k: u16) -> u32 {
        let over = self.pressure.iter().any(|&p| p > k as i32);
        let mut merged = 0;
        for p in 0..self.order.len() {
            let i = self.order.insts()[p];
            if m.insts().opcode[i] != Opcode::ScalarMov {
                continue;
            }
            let (u, d) = (m.uses(i), m.defs(i));
            if u.len() != 1 || d.len() != 1 {
                continue;
            }
            let (a, b) = (u[0], d[0]);
            if a == b
                || m.regs().lanes[a] != m.regs().lanes[b]
                || !self.coalescable(m, a)
                || !self.coalescable(m, b)
            {
                continue;
            }
            let (ra, rb) = (self.find(a.as_u32()), self.find(b.as_u32()));
            let p2 = 2 * p as u32;
            if ra == rb || self.gend[ra as usize] != p2 || self.gstart[rb as usize] != p2 {
                continue;
            }
            let end = self.gend[rb as usize];
            if over {
                let (lo, hi) = (self.gstart[ra as usize] as usize, end as usize);
                let lanes = m.regs().lanes[a] as i32;
                let worst = (lo..=hi)
                    .map(|q| self.pressure[q] - if q == p2 as usize { lanes } else { 0 })
                    .max()
                    .unwrap_or(0);
                if worst > k as i32 {
                    continue;
                }
            }
            self.parent[rb as usize] = ra;
            self.gend[ra as usize] = end;
            self.pressure[p2 as usize] -= m.regs().lanes[a] as i32;
            merged += 1;
        }
        merged
    }

    /// After coloring: renames every register to its class representative
    /// (when anything was coalesced) and deletes the copies that became
    /// self-moves, counting them in `report.copies_removed`.
    pub(super) fn rename_coalesced(&mut self, m: &mut Module, report: &mut super::RegReport) {
        for p in 0..self.order.len() {
            let i = self.order.insts()[p];
            if report.coalesced > 0 {
                for x in 0..m.regs_mut(i).len() {
                    let r = m.regs_mut(i)[x];
                    let root = Reg::from_u32(self.find(r.as_u32()));
                    m.regs_mut(i)[x] = root;
                }
            }
            if m.insts().opcode[i] == Opcode::ScalarMov
                && m.uses(i).len() == 1
                && m.defs(i).len() == 1
                && m.uses(i)[0] == m.defs(i)[0]
            {
                m.remove_inst(i);
                report.copies_removed += 1;
            }
        }
    }
}
