//! The schedule model: how long the program takes on the engines, and how
//! much of that the placement costs.
//!
//! A model, not the hardware. What it assumes:
//!
//! - **Resources.** Each compute engine (PE, ACT, DVE, POOL, SP) and each
//!   DMA queue (0..=255) runs its instructions one at a time, in program
//!   order; different resources run in parallel. A queue moves data at one
//!   DMA engine's bandwidth whatever the other queues do.
//! - **Start.** An execution starts when its resource finished the previous
//!   one and every execution it depends on has finished:
//!   - *true dependencies*: an access of a location after an earlier access
//!     of the same location to a common cell, at least one of them a write
//!     (read after write, and the program's own write after read / write),
//!     a register use after its definition, a `sync_wait queue q` after
//!     everything queue `q` was given before it;
//!   - *placement-added dependencies*: the same conflict between accesses
//!     of two distinct locations whose placed cells are shared. With
//!     unlimited memory every location would have cells of its own and
//!     these would not exist: the model runs the program twice in one walk,
//!     with and without them, and reports both makespans and the loss.
//! - **Latencies** come from the target ([`crate::Target::dma_transfer_cycles`],
//!   [`crate::Target::engine_cycles`]): a DMA costs a fixed cost, a cost per
//!   descriptor and its bytes over the bandwidth; a compute instruction its
//!   engine's fixed cost plus its elements per partition over the engine's
//!   rate (PE: the output's free size, one column per cycle; others: the
//!   largest operand's elements per partition). Element types do not
//!   change the rate.
//! - **Loops** run their trip count in sequence (an unknown trip count
//!   once), each iteration's access patterns moved by its loop terms, so a
//!   tile rewritten in every iteration waits for the previous iteration's
//!   readers. At most [`ScheduleOptions::max_executions`] executions are
//!   simulated; past that the walk stops and the makespans are scaled by
//!   total / simulated executions ([`ScheduleReport::extrapolated`]).
//! - **Bounded memory of accesses.** The recent accesses are kept in a
//!   table of [`ScheduleOptions::window`] entries; a write that covers an
//!   entry of its own location replaces it (everything after the write is
//!   after the entry too). When the table is full, the entry that finished
//!   first leaves it and its finish time is folded into its location's
//!   floor (a fixed table by location index; locations that share a slot
//!   share a floor): later accesses of that location wait for it (a true
//!   dependency is never lost, at worst over-serialized), and a placement
//!   dependency on it is lost (the loss is then under-estimated).
//! - Register-lane sharing (a register allocator's false dependencies) and
//!   register-term windows beyond their declared window are not modelled:
//!   a register-term access touches its whole window.
//!
//! Storage: fixed tables (the window, the floors, the delays of the most
//! delayed instructions) plus one entry per register and per loop, so a
//! module of millions of instructions costs the model well under a
//! megabyte; [`Schedule::reserve`] sizes them, and [`Schedule::run`] then
//! does not allocate. Time: at most `max_executions × window` overlap
//! tests per walk.

use arrayvec::ArrayVec;

use super::order::{executions_with, BlockSpan};
use crate::dma::conflict::Rect;
use crate::ir::{ap, Ap, Capacity, Engine, Inst, Limits, MemLoc, Module, Opcode, Space};
use crate::target::COMPUTE_ENGINES;
use alloc::vec::Vec;

/// How many of the costliest placement-added dependencies a report keeps.
pub const MAX_COSTLY: usize = 5;

/// Candidates priced by a what-if walk each (the most delayed
/// instructions): a long local delay often costs the makespan nothing, so
/// more are priced than reported.
const MAX_CANDIDATES: usize = 12;

/// Resources: the compute engines, then one DMA queue per queue id an
/// instruction can name (the IR's queue column is a `u8`), each its own
/// resource at one engine's bandwidth.
const RESOURCES: usize = COMPUTE_ENGINES + (u8::MAX as usize + 1);

/// Limits of one run of the model.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ScheduleOptions {
    /// Executions simulated at most (see the module doc).
    pub max_executions: u64,
    /// Entries of the recent-access table (see the module doc).
    pub window: usize,
    /// Executions the what-if walks that price the costliest dependencies
    /// may take in all (one walk per dependency).
    pub what_if_executions: u64,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        ScheduleOptions {
            // A kernel's tiled loops (thousands of executions) run in full;
            // a module of millions of executions is extrapolated after
            // 65536, so the model's cost stays bounded however long the
            // loops run.
            max_executions: 1 << 16,
            window: 128,
            what_if_executions: 1 << 18,
        }
    }
}

/// One placement-added dependency that delayed an instruction, with the
/// total delay it caused over the instruction's executions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CostlyDep {
    /// The instruction that waited.
    pub inst: Inst,
    /// Its engine.
    pub engine: Engine,
    /// Its queue (DMA).
    pub queue: u8,
    /// The instruction it waited for (at its longest wait).
    pub waits_for: Inst,
    /// The location the waiting instruction accesses there.
    pub loc: MemLoc,
    /// The other location, whose access of the shared cells it waited for.
    pub other: MemLoc,
    /// Cycles the instruction started later, summed over its executions,
    /// than it would have without any placement-added dependency.
    pub cycles: u64,
    /// Executions of the instruction delayed that way.
    pub waits: u64,
    /// Cycles the makespan drops when only this dependency (this
    /// instruction on `other`'s cells) is dropped, from a second walk;
    /// `None` when [`ScheduleOptions::what_if_executions`] did not allow
    /// the walk. A local delay need not lengthen the makespan (the engine
    /// had slack), so this, not `cycles`, orders the report.
    pub makespan_cost: Option<u64>,
}

/// What the model found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScheduleReport {
    /// Cycles from the first start to the last finish, with every
    /// dependency.
    pub makespan: u64,
    /// The same without placement-added dependencies (unlimited memory).
    pub makespan_unlimited: u64,
    /// Executions simulated.
    pub executions: u64,
    /// Executions of the whole program (loops by trip count, unknown: 1).
    pub total_executions: u64,
    /// True when the walk stopped at the cap and the makespans were scaled.
    pub extrapolated: bool,
    /// Executions that started later because of a placement-added
    /// dependency.
    pub placement_waits: u64,
    /// Recent-access entries folded into their location's floor.
    pub evicted: u64,
    /// The costliest placement-added dependencies, costliest first.
    pub costliest: ArrayVec<CostlyDep, MAX_COSTLY>,
}

impl ScheduleReport {
    /// Cycles the placement costs: the two makespans' difference.
    pub fn loss(&self) -> u64 {
        self.makespan.saturating_sub(self.makespan_unlimited)
    }

    /// The loss in percent of the unlimited-memory makespan.
    pub fn loss_pct(&self) -> f64 {
        if self.makespan_unlimited == 0 {
            0.0
        } else {
            100.0 * self.loss() as f64 / self.makespan_unlimited as f64
        }
    }
}

/// The cells of a pattern in iteration 0 of its loops, relative to its
/// location (see [`Extent`](crate::ir::pattern::Extent)), and whether a register term fixes
/// its bytes to the window.
#[derive(Copy, Clone, Debug)]
struct Base {
    p0: i64,
    p1: i64,
    b0: i64,
    b1: i64,
    flat: bool,
    reg: bool,
}

/// An access in the recent-access table. `t`: finish times with and
/// without placement-added dependencies.
#[derive(Copy, Clone, Debug)]
struct Entry {
    loc: MemLoc,
    inst: Inst,
    rect: Rect,
    space: Space,
    placed: bool,
    write: bool,
    t: [u64; 2],
}

/// One access of the execution being scheduled.
#[derive(Copy, Clone, Debug)]
struct Access {
    loc: MemLoc,
    rect: Rect,
    space: Space,
    placed: bool,
    write: bool,
}

/// Per instruction: the placement delay it suffered.
#[derive(Copy, Clone, Debug)]
struct Cost {
    inst: Inst,
    cycles: u64,
    waits: u64,
    worst: u64,
    waits_for: Inst,
    loc: MemLoc,
    other: MemLoc,
}

/// When each resource is free next, and the last finish, with and
/// without the placement-added dependencies.
struct Clocks {
    free: [[u64; 2]; RESOURCES],
    end: [u64; 2],
}

/// The model's storage (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    /// The placement delays of the instructions that suffered one: an
    /// open-addressing table of [`COST_SLOTS`] slots keyed by instruction
    /// (when a probe finds no room, the entry with the least delay makes
    /// way), so its size does not grow with the program.
    cost: Vec<Cost>,
    /// Evicted finish times (write with, write without, any with, any
    /// without) per location, in [`FLOOR_SLOTS`] slots by location index:
    /// locations sharing a slot share a floor (a conservative merge).
    floor: Vec<[u64; 4]>,
    /// Per register: its last definition's finish times.
    reg_def: Vec<[u64; 2]>,
    iv: Vec<u32>,
    frames: Vec<BlockSpan>,
    entries: Vec<Entry>,
    /// One instruction's accesses: room for the module's limit on access
    /// patterns per instruction, so that no access goes unmodelled.
    acc: Vec<Access>,
}

/// Slots of the delay table (a power of two).
const COST_SLOTS: usize = 4096;

/// Slots probed for one instruction in the delay table.
const COST_PROBES: usize = 8;

/// Slots of the floor table.
const FLOOR_SLOTS: usize = 1024;

impl Schedule {
    /// Empty storage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.cost,
            self.floor,
            self.reg_def,
            self.iv,
            self.frames,
            self.entries,
            self.acc
        )
    }

    /// Sizes the tables for a module of up to `cap` entities and a window
    /// of `window` entries: afterwards [`Schedule::run`] on any module
    /// within `cap` with that window does not allocate (unless the module
    /// raised its limit on access patterns per instruction above the
    /// default; run grows the access list once for it).
    pub fn reserve(&mut self, cap: &Capacity, window: usize) {
        use crate::storage::grow;
        grow(&mut self.cost, COST_SLOTS);
        grow(&mut self.floor, FLOOR_SLOTS);
        grow(&mut self.reg_def, cap.regs);
        grow(&mut self.iv, cap.loops);
        grow(&mut self.frames, cap.loops + 1);
        grow(&mut self.entries, window);
        grow(&mut self.acc, Limits::default().aps_per_inst as usize);
    }

    /// Runs the model on `m` as placed (unplaced locations have cells of
    /// their own), then prices the placement-added dependencies that
    /// delayed their instructions most (see [`CostlyDep::makespan_cost`]).
    pub fn run(&mut self, m: &Module, opts: &ScheduleOptions) -> ScheduleReport {
        let window = opts.window.max(1);
        self.reserve(&m.capacity(), window);
        crate::storage::grow(&mut self.acc, m.limits.aps_per_inst as usize);
        let mut rep = ScheduleReport {
            total_executions: total_executions(m),
            ..ScheduleReport::default()
        };
        let end = self.simulate(m, opts, None, &mut rep);
        rep.extrapolated = rep.executions < rep.total_executions;
        let (ran, total) = (rep.executions, rep.total_executions);
        let scale = |x: u64| scale(x, ran, total);
        rep.makespan = scale(end[0]);
        rep.makespan_unlimited = scale(end[1]).min(rep.makespan);
        let mut cands = self.candidates(m);
        // What-if runs: the makespan without one dependency each.
        let reruns = cands.len() as u64;
        if rep.executions.saturating_mul(reruns) <= opts.what_if_executions {
            for d in cands.iter_mut() {
                let mut r = ScheduleReport::default();
                let e = self.simulate(m, opts, Some((d.inst, d.other)), &mut r);
                d.makespan_cost = Some(rep.makespan.saturating_sub(scale(e[0])));
            }
            cands.sort_by_key(|d| {
                (
                    core::cmp::Reverse(d.makespan_cost),
                    core::cmp::Reverse(d.cycles),
                    d.inst.as_u32(),
                )
            });
        }
        rep.costliest = cands.into_iter().take(MAX_COSTLY).collect();
        rep
    }

    /// One walk of the program (see the module doc); `ignore` drops the
    /// placement-added dependencies of one instruction on one location.
    /// Returns the finish of the last execution with and without the
    /// placement-added dependencies; counts into `rep`.
    fn simulate(
        &mut self,
        m: &Module,
        opts: &ScheduleOptions,
        ignore: Option<(Inst, MemLoc)>,
        rep: &mut ScheduleReport,
    ) -> [u64; 2] {
        let window = opts.window.max(1);
        self.reset(m);
        let mut clocks = Clocks {
            free: [[0; 2]; RESOURCES],
            end: [0; 2],
        };
        self.frames.clear();
        self.frames.push(BlockSpan::program(m));
        'walk: while let Some(top) = self.frames.last().copied() {
            let depth = self.frames.len() - 1;
            if top.done() {
                let f = &mut self.frames[depth];
                if f.end_pass() {
                    if let Some(x) = self.iv.get_mut(f.lp().index()) {
                        *x = f.pass();
                    }
                } else {
                    self.frames.pop();
                }
                continue;
            }
            let b = top.block();
            if let Some(span) = self.frames[depth].enter_child(m) {
                let child = span.lp();
                // At most `u32::MAX` passes (a known trip is a `u32`).
                let trip = m.counted_trip(child) as u32;
                if trip == 0 || self.frames.len() == self.frames.capacity() {
                    continue;
                }
                if let Some(x) = self.iv.get_mut(child.index()) {
                    *x = 0;
                }
                self.frames.push(span.with_passes(trip));
                continue;
            }
            self.frames[depth].advance();
            for i in m.block_insts(b) {
                if rep.executions >= opts.max_executions {
                    break 'walk;
                }
                rep.executions += 1;
                self.execute(m, i, window, ignore, &mut clocks, rep);
            }
        }
        clocks.end
    }

    /// Clears the per-walk state.
    fn reset(&mut self, m: &Module) {
        self.cost.clear();
        self.cost.resize(COST_SLOTS, Cost::EMPTY);
        self.floor.clear();
        self.floor.resize(FLOOR_SLOTS, [0; 4]);
        self.reg_def.clear();
        self.reg_def.resize(m.num_regs(), [0; 2]);
        self.iv.clear();
        self.iv.resize(m.num_loops(), 0);
        self.entries.clear();
    }

    /// The cells pattern `a` touches in the current iteration: physical
    /// when its location is placed, else relative to the location.
    fn access(&self, m: &Module, a: Ap, write: bool) -> Access {
        let be = base(m, a);
        let (mut dp, mut db) = (0i64, 0i64);
        for t in &m.ap_ext(a).terms {
            let iv = t.index(self.iv.get(t.lp.index()).copied().unwrap_or(0)) as i64;
            dp = dp.saturating_add((t.parts as i64).saturating_mul(iv));
            db = db.saturating_add(t.bytes.saturating_mul(iv));
        }
        if be.reg {
            db = 0;
        }
        let loc = m.aps().loc[a];
        let space = m.mems().space[loc];
        let row = m.mems().bytes[loc] as i64;
        let placed = m.is_placed(loc);
        let off = if placed {
            m.mems().offset[loc] as i64
        } else {
            0
        };
        let u = |x: i64| x.max(0) as u64;
        let rect = if be.flat {
            let s = dp.saturating_mul(row).saturating_add(db);
            Rect {
                p0: 0,
                p1: 1,
                lo: u(off + be.b0 + s),
                hi: u(off + be.b1 + s),
            }
        } else if space == Space::Dram {
            let (p0, p1) = (be.p0 + dp, (be.p1 + dp).max(be.p0 + dp + 1));
            Rect {
                p0: 0,
                p1: 1,
                lo: u(off + p0 * row + be.b0 + db),
                hi: u(off + (p1 - 1) * row + be.b1 + db),
            }
        } else {
            let bp = if placed {
                m.mems().base_partition[loc] as i64
            } else {
                0
            };
            Rect {
                p0: u(bp + be.p0 + dp) as u32,
                p1: u(bp + be.p1 + dp) as u32,
                lo: u(off + be.b0 + db),
                hi: u(off + be.b1 + db),
            }
        };
        Access {
            loc,
            rect,
            space,
            placed,
            write,
        }
    }

    fn execute(
        &mut self,
        m: &Module,
        i: Inst,
        window: usize,
        ignore: Option<(Inst, MemLoc)>,
        clocks: &mut Clocks,
        rep: &mut ScheduleReport,
    ) {
        let Clocks { free, end } = clocks;
        // Taken out for the walk and put back at the end: its room
        // (reserved for the module's limit) is kept, nothing is allocated.
        let mut acc = core::mem::take(&mut self.acc);
        acc.clear();
        for a in m.inputs(i) {
            acc.push(self.access(m, a, false));
        }
        for a in m.outputs(i) {
            acc.push(self.access(m, a, true));
        }
        let (lat, res) = latency(m, i);
        let res = res as usize;
        // ready[mode]: true dependencies and the resource; place: the
        // placement-added dependencies (mode 0 only).
        let mut ready = free.get(res).copied().unwrap_or([0; 2]);
        for &r in m.uses(i) {
            if let Some(d) = self.reg_def.get(r.index()) {
                ready = [ready[0].max(d[0]), ready[1].max(d[1])];
            }
        }
        if m.insts().opcode[i] == Opcode::SyncWait {
            let q = COMPUTE_ENGINES + m.insts().queue[i] as usize;
            if let Some(d) = free.get(q) {
                ready = [ready[0].max(d[0]), ready[1].max(d[1])];
            }
        }
        for x in &acc {
            if let Some(f) = self.floor.get(x.loc.index() % FLOOR_SLOTS) {
                let (w, n) = if x.write { (f[2], f[3]) } else { (f[0], f[1]) };
                ready = [ready[0].max(w), ready[1].max(n)];
            }
        }
        let mut place = 0u64;
        let mut blocker: Option<(Inst, MemLoc, MemLoc)> = None;
        for e in &self.entries {
            for x in &acc {
                if !(x.write || e.write) || !e.rect.overlaps(&x.rect) {
                    continue;
                }
                if e.loc == x.loc {
                    ready = [ready[0].max(e.t[0]), ready[1].max(e.t[1])];
                } else if e.placed
                    && x.placed
                    && e.space == x.space
                    && e.t[0] > place
                    && ignore != Some((i, e.loc))
                {
                    place = e.t[0];
                    blocker = Some((e.inst, x.loc, e.loc));
                }
            }
        }
        let start = [ready[0].max(place), ready[1]];
        if place > ready[0] {
            rep.placement_waits += 1;
            let d = place - ready[0];
            if let Some(c) = self.cost_slot(i, d) {
                c.cycles = c.cycles.saturating_add(d);
                c.waits += 1;
                if let (true, Some((w, l, o))) = (d > c.worst, blocker) {
                    (c.worst, c.waits_for, c.loc, c.other) = (d, w, l, o);
                }
            }
        }
        let fin = [start[0] + lat, start[1] + lat];
        if let Some(f) = free.get_mut(res) {
            *f = fin;
        }
        *end = [end[0].max(fin[0]), end[1].max(fin[1])];
        for &r in m.defs(i) {
            if let Some(d) = self.reg_def.get_mut(r.index()) {
                *d = fin;
            }
        }
        self.record(i, &acc, fin, window, rep);
        self.acc = acc;
    }

    /// Enters the execution's accesses into the recent-access table.
    fn record(
        &mut self,
        i: Inst,
        acc: &[Access],
        fin: [u64; 2],
        window: usize,
        rep: &mut ScheduleReport,
    ) {
        for x in acc.iter().filter(|x| x.write) {
            self.entries
                .retain(|e| !(e.loc == x.loc && covers(&x.rect, &e.rect)));
        }
        for x in acc {
            if !x.write {
                if let Some(e) = self
                    .entries
                    .iter_mut()
                    .find(|e| !e.write && e.inst == i && e.loc == x.loc && e.rect == x.rect)
                {
                    e.t = [e.t[0].max(fin[0]), e.t[1].max(fin[1])];
                    continue;
                }
            }
            if self.entries.len() >= window {
                self.evict(rep);
            }
            self.entries.push(Entry {
                loc: x.loc,
                inst: i,
                rect: x.rect,
                space: x.space,
                placed: x.placed,
                write: x.write,
                t: fin,
            });
        }
    }

    /// Folds the entry that finished first into its location's floor.
    fn evict(&mut self, rep: &mut ScheduleReport) {
        let Some((k, _)) = self.entries.iter().enumerate().min_by_key(|(_, e)| e.t[0]) else {
            return;
        };
        let e = self.entries.swap_remove(k);
        rep.evicted += 1;
        if let Some(f) = self.floor.get_mut(e.loc.index() % FLOOR_SLOTS) {
            if e.write {
                f[0] = f[0].max(e.t[0]);
                f[1] = f[1].max(e.t[1]);
            }
            f[2] = f[2].max(e.t[0]);
            f[3] = f[3].max(e.t[1]);
        }
    }

    /// The delay-table slot of `i`, claimed for it when free; when its
    /// probes are all taken by others, the one with the least delay makes
    /// way if that is less than `d` (else the delay is not recorded).
    fn cost_slot(&mut self, i: Inst, d: u64) -> Option<&mut Cost> {
        let h = (i.as_u32().wrapping_mul(0x9E37_79B1) >> 12) as usize;
        let mut weakest: Option<(usize, u64)> = None;
        for k in 0..COST_PROBES {
            let at = (h + k) & (COST_SLOTS - 1);
            let c = self.cost.get(at)?;
            if c.inst == i || !c.inst.is_valid() {
                let c = self.cost.get_mut(at)?;
                c.inst = i;
                return Some(c);
            }
            if weakest.map_or(true, |(_, w)| c.cycles < w) {
                weakest = Some((at, c.cycles));
            }
        }
        let (at, cycles) = weakest?;
        if cycles >= d {
            return None;
        }
        let c = self.cost.get_mut(at)?;
        *c = Cost {
            inst: i,
            ..Cost::EMPTY
        };
        Some(c)
    }

    /// The instructions that placement-added dependencies delayed most
    /// (summed delay), each with its longest wait's blocker.
    fn candidates(&self, m: &Module) -> ArrayVec<CostlyDep, MAX_CANDIDATES> {
        let mut out: ArrayVec<CostlyDep, MAX_CANDIDATES> = ArrayVec::new();
        for c in &self.cost {
            if c.cycles == 0 || !c.waits_for.is_valid() || !c.inst.is_valid() {
                continue;
            }
            let i = c.inst;
            let d = CostlyDep {
                inst: i,
                engine: m.insts().engine[i],
                queue: m.insts().queue[i],
                waits_for: c.waits_for,
                loc: c.loc,
                other: c.other,
                cycles: c.cycles,
                waits: c.waits,
                makespan_cost: None,
            };
            // Most delay first; ties by instruction (the table's slot
            // order must not show).
            let key = |x: &CostlyDep| (core::cmp::Reverse(x.cycles), x.inst.as_u32());
            let at = out
                .iter()
                .position(|x| key(x) > key(&d))
                .unwrap_or(out.len());
            if at < MAX_CANDIDATES {
                if out.is_full() {
                    out.pop();
                }
                out.insert(at, d);
            }
        }
        out
    }
}

impl Cost {
    const EMPTY: Cost = Cost {
        inst: Inst::INVALID,
        cycles: 0,
        waits: 0,
        worst: 0,
        waits_for: Inst::INVALID,
        loc: MemLoc::INVALID,
        other: MemLoc::INVALID,
    };
}

/// The cells of pattern `a` in iteration 0 of its loops.
fn base(m: &Module, a: Ap) -> Base {
    let ext = m.ap_ext(a);
    let e = if ext.terms.is_empty() {
        m.ap_extent(a)
    } else {
        let mut still = ext.clone();
        still.terms.clear();
        m.ap_extent_with(a, &still)
    };
    Base {
        p0: e.part_lo,
        p1: e.part_hi,
        b0: e.byte_lo,
        b1: e.byte_hi,
        flat: e.flat,
        reg: ext.reg.is_some(),
    }
}

/// `x` scaled by total / simulated executions when the walk stopped early.
fn scale(x: u64, executions: u64, total: u64) -> u64 {
    if executions > 0 && executions < total {
        ((x as u128 * total as u128) / executions as u128).min(u64::MAX as u128) as u64
    } else {
        x
    }
}

/// True when `a` contains every cell of `b`.
fn covers(a: &Rect, b: &Rect) -> bool {
    a.p0 <= b.p0 && b.p1 <= a.p1 && a.lo <= b.lo && b.hi <= a.hi
}

/// The model latency of `i` and its resource index.
fn latency(m: &Module, i: Inst) -> (u64, u16) {
    let t = &m.target;
    let op = m.insts().opcode[i];
    let engine = m.insts().engine[i];
    if engine == Engine::Dma || op.is_dma() {
        let bytes = m
            .outputs(i)
            .chain(m.inputs(i))
            .map(|a| m.ap_bytes(a))
            .max()
            .unwrap_or(0);
        let d = crate::dma::report::dma_descriptors(m, i);
        return (
            t.dma_transfer_cycles(bytes, d),
            COMPUTE_ENGINES as u16 + m.insts().queue[i] as u16,
        );
    }
    let k = engine_slot(engine);
    let elems = |a: Ap| ap::elements(m.ap_dims(a));
    let n = if engine == Engine::Pe {
        m.outputs(i).map(elems).max().unwrap_or(0)
    } else if engine == Engine::Sp {
        0
    } else {
        m.all_aps(i).map(elems).max().unwrap_or(0)
    };
    (t.engine_cycles(k, n), k as u16)
}

/// Executions of the whole program: each block's instructions times the
/// trip counts around it (unknown: 1), saturating.
fn total_executions(m: &Module) -> u64 {
    executions_with(m, |l| m.counted_trip(l))
}

/// The index of `engine` in [`crate::Target::engine_costs`] (PE, ACT, DVE,
/// POOL, then the sequencer; a DMA queue's compute side is the sequencer's).
pub fn engine_slot(engine: Engine) -> usize {
    match engine {
        Engine::Pe => 0,
        Engine::Act => 1,
        Engine::Dve => 2,
        Engine::Pool => 3,
        Engine::Sp | Engine::Dma => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Builder, InstFlags, MemFlags, SubOp};
    use crate::target::Target;
    use crate::testing::mem;
    use crate::verify::placement::Verifier;

    /// `[128 x 1024]` fp32-sized tiles: 256 elements per partition.
    fn tile(bl: &mut Builder<'_>, name: &str, space: Space, flags: MemFlags) -> MemLoc {
        bl.mem(name, space, 128, 1024, 4, flags).unwrap()
    }

    /// Two engines and one reused tile: `%a` (POOL writes it, ACT reads it)
    /// and `%b` (DVE writes it afterwards) share `SB<0,0>`.
    fn reused_tile(share: bool) -> Module {
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let e = tile(&mut bl, "e", Space::Sb, MemFlags::empty());
        let a = tile(&mut bl, "a", Space::Sb, MemFlags::empty());
        let c = tile(&mut bl, "c", Space::Sb, MemFlags::empty());
        let b = tile(&mut bl, "b", Space::Sb, MemFlags::empty());
        let yb = tile(&mut bl, "yb", Space::Dram, MemFlags::OUTPUT);
        let yc = tile(&mut bl, "yc", Space::Dram, MemFlags::OUTPUT);
        bl.func("f").unwrap();
        let fe = bl.full(e);
        let fa = bl.full(a);
        bl.op(Opcode::Memset, &[fe], &[]).unwrap();
        bl.op(Opcode::Memset, &[fa], &[]).unwrap();
        let none = InstFlags::empty();
        bl.compute(Opcode::Activation, SubOp::Exp, c, &[a], none)
            .unwrap();
        bl.compute(Opcode::TensorCopy, SubOp::None, b, &[e], none)
            .unwrap();
        bl.save(yb, b, 0).unwrap();
        bl.save(yc, c, 1).unwrap();
        m.place(e, 0, 2048);
        m.place(a, 0, 0);
        m.place(c, 0, 1024);
        m.place(b, 0, if share { 0 } else { 3072 });
        m
    }

    #[test]
    fn a_reused_tile_costs_what_the_hand_schedule_says() {
        let m = reused_tile(true);
        assert!(Verifier::new().verify(&m).is_clean());
        let t = &m.target;
        // By hand, from the target's figures (256 elements per partition):
        let pool = 64 + 256; // memset on POOL
        let act = 224 + 256; // activation on ACT
        let dve = 64 + 256; // tensor_copy on DVE
                            // A save of 128 x 1024 B: one descriptor per partition.
        let ns = 1300 + 128 * 10 + (128 * 1024u64).div_ceil(27);
        let save = ns * 1400 / 1000;
        assert_eq!((pool, act, dve), (320, 480, 320));
        assert_eq!(t.dma_transfer_cycles(128 * 1024, 128), save);
        // POOL: %e [0, 320), %a [320, 640); ACT: %c from 640 to 1120.
        // Unlimited memory: %b's copy needs only %e (320): [320, 640),
        // its save [640, 640 + save); %c's save [1120, 1120 + save).
        let unlimited = 1120 + save;
        // Shared cells: the copy writes %a's cells, so it waits for the
        // activation that reads them (1120): [1120, 1440), save after.
        let shared = 1440 + save;
        let r = Schedule::new().run(&m, &ScheduleOptions::default());
        assert_eq!(r.executions, 6);
        assert!(!r.extrapolated);
        assert_eq!(r.makespan_unlimited, unlimited);
        assert_eq!(r.makespan, shared);
        assert_eq!(r.loss(), 320);
        assert_eq!(r.placement_waits, 1);
        let d = r.costliest[0];
        assert_eq!(r.costliest.len(), 1);
        assert_eq!(m.insts().opcode[d.inst], Opcode::TensorCopy);
        assert_eq!(m.insts().opcode[d.waits_for], Opcode::Activation);
        assert_eq!(d.engine, Engine::Dve);
        assert_eq!((m.mem_name(d.loc), m.mem_name(d.other)), ("b", "a"));
        // It could have started at 320 and started at 1120.
        assert_eq!((d.cycles, d.waits), (800, 1));
        // Without it the makespan is the unlimited one.
        assert_eq!(d.makespan_cost, Some(320));
    }

    #[test]
    fn cells_of_its_own_remove_the_loss() {
        let m = reused_tile(false);
        assert!(Verifier::new().verify(&m).is_clean());
        let r = Schedule::new().run(&m, &ScheduleOptions::default());
        assert_eq!(r.makespan, r.makespan_unlimited);
        assert_eq!(r.loss(), 0);
        assert!(r.costliest.is_empty());
        assert_eq!(r.placement_waits, 0);
    }

    /// A PSUM tile written by PE and drained by ACT in every iteration of
    /// a loop of 4: its own write after read, so both makespans agree and
    /// the loop runs strictly alternating.
    #[test]
    fn a_loop_runs_its_trip_count_in_sequence() {
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let x = tile(&mut bl, "x", Space::Sb, MemFlags::empty());
        let p = mem(&mut bl, "p", Space::Psum, 128, 1024, 4, MemFlags::empty());
        let o = tile(&mut bl, "o", Space::Sb, MemFlags::empty());
        bl.func("f").unwrap();
        let fx = bl.full(x);
        bl.op(Opcode::Memset, &[fx], &[]).unwrap();
        bl.begin_loop(4).unwrap();
        let none = InstFlags::empty();
        bl.compute(Opcode::Matmul, SubOp::None, p, &[x, x], none)
            .unwrap();
        bl.compute(Opcode::Activation, SubOp::Exp, o, &[p], none)
            .unwrap();
        bl.end_loop().unwrap();
        bl.finish().unwrap();
        m.place(x, 0, 0);
        m.place(o, 0, 1024);
        m.place(p, 0, 0);
        assert!(Verifier::new().verify(&m).is_clean());
        let r = Schedule::new().run(&m, &ScheduleOptions::default());
        assert_eq!((r.executions, r.total_executions), (9, 9));
        // memset 320; each iteration: matmul 64 + 256 after the previous
        // activation, activation 224 + 256 after the matmul.
        assert_eq!(r.makespan, 320 + 4 * (320 + 480));
        assert_eq!(r.makespan_unlimited, r.makespan);
        // Capped at 5 executions: the makespan is scaled by 9 / 5.
        let capped = ScheduleOptions {
            max_executions: 5,
            ..ScheduleOptions::default()
        };
        let r = Schedule::new().run(&m, &capped);
        assert!(r.extrapolated);
        assert_eq!(r.executions, 5);
        assert_eq!(r.makespan, (320 + 2 * 800) * 9 / 5);
    }

    #[test]
    fn run_does_not_allocate_past_its_reserve() {
        let m = reused_tile(true);
        let mut s = Schedule::new();
        s.reserve(&m.capacity(), ScheduleOptions::default().window);
        let before = s.heap_bytes();
        let _ = s.run(&m, &ScheduleOptions::default());
        assert_eq!(s.heap_bytes(), before);
    }
}
