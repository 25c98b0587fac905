//! Spilling of the module register allocator ([`super::RegAllocator`]): the
//! headroom the spill code may need, the spill cost of a node, the choice of
//! what to spill when the colorer leaves nodes uncolored, the spill code
//! itself and its estimated cycles.
//!
//! **Spill cost** of a node: `Σ over accesses 10^min(depth, 30) × lanes`
//! (depth = loop depth of the accessing instruction); the colorer divides it
//! by the node's current lane-weighted degree when it chooses a potential
//! spill. Spill temporaries and pinned registers cost `∞` (never spilled).
//!
//! **Spill code.** A spilled register gets a DRAM memory location of
//! `target.reg_lane_bytes × lanes` bytes flagged `SPILL | INTERNAL` (DRAM:
//! the flat per-core space the target reserves for spill slots, placed by the
//! pipeline after this pass; the sequencer reaches it through a queue, hence
//! the waits). Each def writes a fresh `SPILL_TEMP` register, followed by
//! `spill_store` and a `sync_wait`; each use reads a fresh `SPILL_TEMP`
//! filled by `reload` and a `sync_wait` just before it.
//!
//! **Cycles.** Every inserted store or reload costs `target.reg_spill_cycles`
//! (sync wait included) times the product of the trip counts of its
//! enclosing loops (an unknown trip counts 1).
//!
//! Invariant: the spill code never inserts more than the run's limit of
//! spill temporaries, so it stays within the headroom [`spill_headroom`]
//! reserved; past the limit the run fails with
//! [`RegAllocError::SpillHeadroom`].
//!
//! Part of the module allocator (`reg/alloc/`), not of the CFG allocator
//! (`reg/cfg/`), which has its own coalescing and splitting spill code.

use core::fmt::Write as _;

use super::super::chaitin_briggs::NO_COLOR;
use super::{RegAllocError, RegAllocator, RegReport, NONE};
use crate::ir::{
    full_ap, Capacity, DType, InstFlags, InstSpec, MemFlags, MemSpec, Module, Opcode, Reg,
    RegFlags, Space, NO_LANE, UNKNOWN_TRIP,
};

/// The default limit on spill temporaries is one per this many register
/// operands...
pub const SPILL_TEMP_FRACTION: usize = 4;
/// ...plus this many.
pub const SPILL_TEMP_SLACK: usize = 64;

/// Spill temporaries (each one reload or one store) a run on `m` may
/// insert by default: one per [`SPILL_TEMP_FRACTION`] register operands
/// plus [`SPILL_TEMP_SLACK`], at most one per operand (what spilling every
/// register would take). Reserving for every operand would make the
/// reservation grow with the operands times the spill code's size, most of
/// it never used; a run needing more fails with
/// [`RegAllocError::SpillHeadroom`], which says how to raise the limit.
///
/// None when no register can ever be spilled ([`never_spills`]).
pub fn default_spill_temporaries(m: &Module) -> u32 {
    if never_spills(m) {
        return 0;
    }
    let t = m.reg_pool().len();
    (t / SPILL_TEMP_FRACTION + SPILL_TEMP_SLACK).min(t) as u32
}

/// True when the register file holds every register of `m` at once, each
/// on a lane pair of its own: at most K/2 registers, of one or two lanes,
/// none pinned or colored. A node's neighbours then occupy fewer than K/2
/// aligned lane pairs (one each, whatever their lanes), so some pair, and
/// some lane, is always free: simplify never blocks, select always finds a
/// color, and nothing spills, so the spill code needs no headroom.
pub fn never_spills(m: &Module) -> bool {
    m.num_regs().saturating_mul(2) <= m.target.max_regs as usize
        && m.regs().lanes.keys().all(|r| {
            m.regs().lanes[r] <= 2
                && !m.regs().flags[r].contains(RegFlags::PINNED)
                && m.regs().lane[r] == NO_LANE
        })
}

/// Headroom the spill code of `m` can need with at most `limit` spill
/// temporaries (`None`: [`default_spill_temporaries`]): every original
/// register is spilled at most once (one slot each), and each temporary
/// adds two instructions, one access pattern and one register operand. The
/// pattern is a full access of a one-partition slot: one dim, kept inline,
/// so no pooled dims.
pub(super) fn spill_headroom(m: &Module, limit: Option<u32>) -> Capacity {
    let t = limit.unwrap_or_else(|| default_spill_temporaries(m)) as usize;
    let r = m.num_regs();
    Capacity {
        insts: 2 * t,
        aps: t,
        dims: 0,
        reg_operands: t,
        mems: r,
        regs: t,
        names: t + r,
        name_bytes: (t + r) * 24,
        ..Capacity::default()
    }
}

/// Estimated cycles of the spill code in `m` (see the module doc).
pub(super) fn spill_cycles(m: &Module) -> u64 {
    let cyc = m.target.reg_spill_cycles as u64;
    let mut cycles = 0u64;
    for i in m.program_order() {
        let op = m.insts().opcode[i];
        if op != Opcode::RegSpillStore && op != Opcode::RegReload {
            continue;
        }
        let mut w = 1u64;
        let mut l = m.inst_loop(i);
        while l.is_valid() {
            let t = m.loops().trip[l];
            if t != UNKNOWN_TRIP {
                w = w.saturating_mul(t as u64);
            }
            l = m.loops().parent[l];
        }
        cycles = cycles.saturating_add(w.saturating_mul(cyc));
    }
    cycles
}

impl RegAllocator {
    /// Spill cost of every node (see the module doc).
    pub(super) fn find_costs(&mut self, m: &Module) {
        let n = self.node_reg.len();
        self.n_cost.clear();
        self.n_cost.resize(n, 0.0);
        for r in m.regs().lanes.keys() {
            if self.gstart[r.index()] == NONE {
                continue;
            }
            let root = self.find(r.as_u32());
            let v = self.node_of[root as usize] as usize;
            if self.fixed(m, r) || m.regs().flags[r].contains(RegFlags::SPILL_TEMP) {
                self.n_cost[v] = f64::INFINITY;
                continue;
            }
            let lanes = m.regs().lanes[r] as f64;
            let mut c = 0.0;
            for &p in self.live.accesses(r) {
                let d = m.inst_loop_depth(self.order.inst_at(p)).min(30) as usize;
                c += self.depth_weight[d] * lanes;
            }
            self.n_cost[v] += c;
        }
    }

    /// Marks the nodes to spill in `chosen`: every uncolored spillable
    /// node, and for every uncolored unspillable node (a spill temporary or
    /// a pinned register) its cheapest spillable neighbour (by cost per
    /// lane), since freeing a neighbour's lanes is the only way to make
    /// room for it. Fails with the unspillable node that has no spillable
    /// neighbour.
    pub(super) fn choose_spills(&mut self) -> Result<(), usize> {
        let n = self.colors.len();
        self.chosen.clear();
        self.chosen.resize(n, false);
        let mut any = false;
        for v in 0..n {
            if self.colors[v] == NO_COLOR && self.n_cost[v].is_finite() {
                self.chosen[v] = true;
                any = true;
            }
        }
        for v in 0..n {
            if self.colors[v] != NO_COLOR || self.n_cost[v].is_finite() {
                continue;
            }
            let mut best: Option<(f64, usize)> = None;
            let mut covered = false;
            for &u in self.graph.neighbors(v) {
                let u = u as usize;
                let c = self.n_cost[u];
                if !c.is_finite() {
                    continue;
                }
                if self.chosen[u] {
                    covered = true;
                    continue;
                }
                let per_lane = c / self.n_lanes[u] as f64;
                if best.map_or(true, |(b, _)| per_lane < b) {
                    best = Some((per_lane, u));
                }
            }
            match best {
                Some((_, u)) if !covered => {
                    self.chosen[u] = true;
                    any = true;
                }
                Some(_) | None if covered => {}
                _ => return Err(v),
            }
        }
        if any {
            Ok(())
        } else {
            Err(0)
        }
    }

    /// A register or location name `prefix<n>` not yet in `m`.
    fn fresh_name(m: &Module, prefix: &str, serial: &mut u32) -> heapless::String<32> {
        loop {
            let mut s: heapless::String<32> = heapless::String::new();
            let _ = write!(s, "{prefix}{}", *serial);
            *serial += 1;
            if m.reg_by_name(&s).is_none() && m.mem_by_name(&s).is_none() {
                return s;
            }
        }
    }

    /// Rewrites `r` to live in a memory slot (see the module doc).
    pub(super) fn spill_register(
        &mut self,
        m: &mut Module,
        r: Reg,
        serial: &mut u32,
        report: &mut RegReport,
        limit: u32,
    ) -> Result<(), RegAllocError> {
        let lanes = m.regs().lanes[r];
        let name = Self::fresh_name(m, "spill.slot", serial);
        let lane_bytes = m.target.reg_lane_bytes;
        let slot = m.try_add_mem(&MemSpec {
            dtype: DType::Raw(lane_bytes),
            flags: MemFlags::SPILL | MemFlags::INTERNAL,
            ..MemSpec::new(&name, Space::Dram, 1, lane_bytes as u32 * lanes as u32)
        })?;
        report.spilled_registers += 1;
        let ap = [full_ap(m, slot)];
        let mut last = u32::MAX;
        let n_acc = self.live.accesses(r).len();
        for k in 0..n_acc {
            let p = self.live.accesses(r)[k];
            if p == last {
                continue;
            }
            last = p;
            let i = self.order.inst_at(p);
            let ops = m.operands(i);
            let n_use = ops.n_use as usize;
            let uses_r = m.uses(i).contains(&r);
            let defs_r = m.defs(i).contains(&r);
            let temps = uses_r as u32 + defs_r as u32;
            if report.spill_instructions + temps > limit {
                return Err(RegAllocError::SpillHeadroom { limit });
            }
            if uses_r {
                let tn = Self::fresh_name(m, "spill.t", serial);
                let t = m.try_add_reg(&tn, lanes)?;
                m.set_reg_flags(t, RegFlags::SPILL_TEMP);
                let defs = [t];
                let mut spec = InstSpec::new(Opcode::RegReload);
                spec.inputs = &ap;
                spec.defs = &defs;
                spec.flags = InstFlags::RELOAD;
                m.insert_before(i, &spec)?;
                m.insert_before(i, &InstSpec::new(Opcode::SyncWait))?;
                for x in m.regs_mut(i)[..n_use].iter_mut() {
                    if *x == r {
                        *x = t;
                    }
                }
                report.spill_instructions += 1;
            }
            if defs_r {
                let tn = Self::fresh_name(m, "spill.t", serial);
                let t = m.try_add_reg(&tn, lanes)?;
                m.set_reg_flags(t, RegFlags::SPILL_TEMP);
                for x in m.regs_mut(i)[n_use..].iter_mut() {
                    if *x == r {
                        *x = t;
                    }
                }
                let uses = [t];
                let mut spec = InstSpec::new(Opcode::RegSpillStore);
                spec.outputs = &ap;
                spec.uses = &uses;
                spec.flags = InstFlags::SPILL;
                let st = m.insert_after(i, &spec)?;
                m.insert_after(st, &InstSpec::new(Opcode::SyncWait))?;
                report.spill_instructions += 1;
            }
        }
        Ok(())
    }
}
