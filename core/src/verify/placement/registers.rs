//! The register half of the verifier: every live register is colored
//! inside the register file, a 2-lane register sits on an even lane, and no
//! two interfering registers share a lane except across an in-place handoff.
//!
//! Registers are swept the same way with an intrusive list of active
//! registers per lane: in a legal coloring each list holds at most one
//! register, so each insertion costs O(lanes) plus the conflicts it finds.

use core::cmp::Reverse;

use super::{Finding, Verifier};
use crate::ir::{InstFlags, Module, Reg, NO_LANE};
use crate::verify::treap::NIL;

impl Verifier {
    pub(super) fn check_registers(&mut self, m: &Module) {
        let max = m.target.max_regs;
        for r in m.regs().lanes.keys() {
            let lane = m.regs().lane[r];
            let lanes = m.regs().lanes[r];
            if lane == NO_LANE {
                if !self.scope.uncolored {
                    continue;
                }
                if let Some(iv) = self.reg_live.interval(r) {
                    let inst = self.order.inst_at(iv.start);
                    self.push(Finding::Uncolored {
                        reg: r,
                        inst,
                        pos: iv.start,
                    });
                }
                continue;
            }
            if lane as u32 + lanes as u32 > max as u32 {
                self.push(Finding::LaneOutOfRange {
                    reg: r,
                    lane,
                    lanes,
                    max_regs: max,
                });
            }
            if lanes == 2 && lane % 2 != 0 {
                self.push(Finding::OddPairLane { reg: r, lane });
            }
        }
    }

    pub(super) fn sweep_registers(&mut self, m: &Module) {
        let n = m.num_regs();
        self.lane_head.clear();
        self.lane_head.resize(lane_table_len(m), NIL);
        self.node_next.clear();
        self.node_next.resize(2 * n, NIL);
        self.node_prev.clear();
        self.node_prev.resize(2 * n, NIL);
        // The same sweep as for locations: registers by start, the active
        // ones in a heap by end.
        self.swept.clear();
        for r in m.regs().lanes.keys() {
            if m.regs().lane[r] == NO_LANE {
                continue;
            }
            if let Some(iv) = self.reg_live.interval(r) {
                self.swept
                    .push(((iv.start as u64) << 32) | r.as_u32() as u64);
            }
        }
        self.swept.sort_unstable();
        self.ending.clear();
        for si in 0..self.swept.len() {
            let key = self.swept[si];
            let (p, c) = ((key >> 32) as u32, key as u32);
            while let Some(&Reverse(top)) = self.ending.peek() {
                if (top >> 32) as u32 >= p {
                    break;
                }
                self.ending.pop();
                self.unlink_reg(m, top as u32);
            }
            let Some(civ) = self.reg_live.interval(Reg::from_u32(c)) else {
                continue;
            };
            self.link_reg(m, c, p);
            self.ending
                .push(Reverse(((civ.end as u64) << 32) | c as u64));
        }
    }

    /// The lanes `[first, first + n)` of a register, clipped to the table.
    fn reg_lanes(&self, m: &Module, r: u32) -> (usize, usize) {
        let reg = Reg::from_u32(r);
        let first = m.regs().lane[reg] as usize;
        let n = m.regs().lanes[reg] as usize;
        let len = self.lane_head.len();
        (first.min(len), (first + n).min(len))
    }

    fn link_reg(&mut self, m: &Module, c: u32, pos: u32) {
        let (l0, l1) = self.reg_lanes(m, c);
        for lane in l0..l1 {
            // Every register already on this lane is live at `pos`.
            let mut node = self.lane_head[lane];
            while node != NIL {
                self.candidates += 1;
                let other = node / 2;
                let (o0, _) = self.reg_lanes(m, other);
                if lane == o0.max(l0) && !self.reg_handoff(m, other, c, pos) {
                    self.push(Finding::LaneConflict {
                        a: Reg::from_u32(other),
                        b: Reg::from_u32(c),
                        inst: self.order.inst_at(pos),
                        pos,
                        lane: lane as u16,
                    });
                }
                node = self.node_next[node as usize];
            }
            let me = 2 * c + (lane - l0) as u32;
            let head = self.lane_head[lane];
            self.node_next[me as usize] = head;
            self.node_prev[me as usize] = NIL;
            if head != NIL {
                self.node_prev[head as usize] = me;
            }
            self.lane_head[lane] = me;
        }
    }

    /// The in-place handoff of docs/SEMANTICS.md §1 for registers: `c` is defined at
    /// `pos` by an in-place instruction that reads `old`, `old` dies there,
    /// and `c` is not also read there (its lanes may then reuse `old`'s).
    fn reg_handoff(&self, m: &Module, old: u32, c: u32, pos: u32) -> bool {
        let (old, c) = (Reg::from_u32(old), Reg::from_u32(c));
        let dies_here = self.reg_live.interval(old).is_some_and(|iv| iv.end == pos);
        let born_here = self.reg_live.interval(c).is_some_and(|iv| iv.start == pos);
        if !(dies_here && born_here) {
            return false;
        }
        let i = self.order.inst_at(pos);
        m.insts().flags[i].contains(InstFlags::IN_PLACE)
            && m.uses(i).contains(&old)
            && m.defs(i).contains(&c)
            && !m.uses(i).contains(&c)
    }

    fn unlink_reg(&mut self, m: &Module, x: u32) {
        let (l0, l1) = self.reg_lanes(m, x);
        for lane in l0..l1 {
            let me = (2 * x + (lane - l0) as u32) as usize;
            let (p, n) = (self.node_prev[me], self.node_next[me]);
            if p != NIL {
                self.node_next[p as usize] = n;
            } else {
                self.lane_head[lane] = n;
            }
            if n != NIL {
                self.node_prev[n as usize] = p;
            }
        }
    }
}

/// Lanes the register sweep tracks: the register file, or further when a
/// register sits beyond it (already a finding, but still checked).
pub(super) fn lane_table_len(m: &Module) -> usize {
    let mut n = m.target.max_regs as usize;
    for r in m.regs().lanes.keys() {
        let l = m.regs().lane[r];
        if l != NO_LANE {
            n = n.max(l as usize + m.regs().lanes[r] as usize);
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::super::tests::texts;
    use super::*;
    use crate::testing::counter_loop;

    #[test]
    fn registers_legal_coloring_passes() {
        let (mut m, [i, one, k, z]) = counter_loop();
        m.columns_mut().regs.lane[i] = 0;
        m.columns_mut().regs.lane[one] = 1;
        m.columns_mut().regs.lane[k] = 2;
        m.columns_mut().regs.lane[z] = 0; // i and one are dead by 5
        let mut ver = Verifier::new();
        let r = ver.verify(&m);
        assert!(r.is_clean(), "{}", texts(&m, &r));
    }

    #[test]
    fn register_violations_are_found() {
        let (mut m, [i, one, k, z]) = counter_loop();
        m.columns_mut().regs.lane[i] = 2;
        m.columns_mut().regs.lane[one] = 0;
        m.columns_mut().regs.lane[k] = 3; // a pair on an odd lane, its lanes 3..=4 past a 4-lane file
        m.target.max_regs = 4;
        let mut ver = Verifier::new();
        let r = ver.verify(&m);
        let s = texts(&m, &r);
        assert!(
            r.findings
                .contains(&Finding::OddPairLane { reg: k, lane: 3 }),
            "{s}"
        );
        assert!(r.findings.contains(&Finding::LaneOutOfRange {
            reg: k,
            lane: 3,
            lanes: 2,
            max_regs: 4
        }));
        assert!(r.findings.contains(&Finding::Uncolored {
            reg: z,
            inst: m.program_order().nth(5).unwrap(),
            pos: 5
        }));
        assert_eq!(r.findings.len(), 3, "{s}");
        // Now two interfering registers on one lane: i (0..=4) and k (3..=5).
        m.target.max_regs = 64;
        m.columns_mut().regs.lane[k] = 2;
        m.columns_mut().regs.lane[z] = 4;
        let r = ver.verify(&m);
        let s = texts(&m, &r);
        let i3 = m.program_order().nth(3).unwrap();
        assert_eq!(
            r.findings,
            &[Finding::LaneConflict {
                a: i,
                b: k,
                inst: i3,
                pos: 3,
                lane: 2
            }],
            "{s}"
        );
        assert!(
            s.contains("$i@r2(1 lane) and $k@r2(2 lanes) share lane 2"),
            "{s}"
        );
    }
}
