//! Loop unrolling for the equivalence tests of issue 13: a module whose
//! loops of known trip count are replaced by their iterations in
//! straight-line code, every loop term folded into the static part of the
//! iteration's pattern.
//!
//! Why here (the test-support crate) and not in tusk-core: the unrolled
//! module exists to be compared with the loop form by the analyses and the
//! checkers; it is no input a user should hand to the allocator (it is
//! larger by the trip product, which is what loop terms exist to avoid),
//! and building it needs only the public module API, so it stays out of
//! the `no_std` core and its storage discipline.
//!
//! What the unrolled module keeps:
//! - every location (name, space, shape, element type, alignment, flags and
//!   placement: a placed module unrolls into a placed module) and every
//!   register (lanes, flags, lane), with the same ids;
//! - the values: a tile (or register) that no iteration reads from another
//!   gets a private copy per iteration, declared after the originals, with
//!   the original's placement (see `Plan::privatize`). A location has one
//!   live interval and one placement, so without the copies the unrolled
//!   form would keep every loop temporary live from the first iteration to
//!   the last, where the loop form (rightly) keeps it live over one
//!   iteration: the copies make the two forms the same allocation problem.
//!   Everything else — module inputs and outputs, tiles carried from one
//!   iteration to the next or read after the loop, DRAM — keeps its name.
//!   A copy of a location buffered in slots of that loop
//!   ([`tusk_core::ir::Module::slots`]) is the slot its iteration uses
//!   (placed there, one slot wide, its patterns rebased onto it), as the
//!   loop form's rules read each slot as a tensor of its own;
//! - every instruction's opcode, sub-operation, engine, queue, flags,
//!   immediate, registers and patterns; iteration `iv` of a loop of known
//!   trip count adds `parts × iv` to a pattern's first partition and
//!   `bytes × iv` to its offset, and drops the term. A register term's
//!   window and a partition step stay as they are (a loop term moves only
//!   the static part, [`tusk_core::ir::pattern`]);
//! - loops of unknown trip count (`loop ?`), as loops (with their names),
//!   their known-trip inner loops unrolled inside them: they cannot be
//!   unrolled, and no pattern moves with them;
//! - scalar code as it is: `$i = alu add $i, $one; branch $i` repeats once
//!   per iteration, which computes the same register values in the same
//!   order as the loop.
//!
//! Instruction ids. The dataflow checker pairs the instructions of an
//! original and its rewrite by id ([`tusk_core::verify::dataflow`]), so
//! [`Unroller`] numbers the copies of the original's instructions once
//! (program order of the unrolled original) and gives every rewrite's copy
//! of original instruction `X` in iteration `v` the id the original's copy
//! of `(X, v)` has; an instruction the rewrite removed keeps its ids,
//! unlinked; instructions the rewrite added take ids after them. Rewrites
//! must keep each original instruction in its loops ([`UnrollError::Moved`]
//! otherwise).
//!
//! Size: the copies of one module are capped at [`MAX_UNROLLED_INSTS`]
//! instructions ([`UnrollError::TooLarge`] above it): debug-mode checkers
//! stay fast, and a test reports the modules it skipped.

use std::collections::{HashMap, HashSet};
use std::fmt;

use tusk_core::ir::{
    ap, pattern, ApSpec, Block, Capacity, Inst, InstSpec, IrError, Loop, MemFlags, MemLoc, Module,
    Opcode, Reg, RegFlags, Space, UNKNOWN_TRIP,
};

/// Most instructions an unrolled module may have.
pub const MAX_UNROLLED_INSTS: u64 = 20_000;

/// Why a module could not be unrolled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnrollError {
    /// The unrolled module would have more than [`MAX_UNROLLED_INSTS`]
    /// instructions.
    TooLarge {
        /// Instructions of the unrolled module.
        instructions: u64,
    },
    /// A rewrite put an original instruction in other loops than the
    /// original's (its copies have no counterpart).
    Moved {
        /// The instruction.
        inst: Inst,
    },
    /// An iteration's pattern cannot be written as a plain pattern (its
    /// first partition or offset leaves the columns' range), or a pattern
    /// moves with a loop that is not unrolled around it.
    Unrepresentable {
        /// The instruction.
        inst: Inst,
        /// Its operand (inputs, then outputs).
        operand: usize,
    },
    /// The module API refused a copy.
    Ir(IrError),
}

impl fmt::Display for UnrollError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnrollError::TooLarge { instructions } => write!(
                f,
                "unrolled, the module has {instructions} instructions (cap {MAX_UNROLLED_INSTS})"
            ),
            UnrollError::Moved { inst } => write!(
                f,
                "the rewrite moved original instruction {} out of its loops",
                inst.index()
            ),
            UnrollError::Unrepresentable { inst, operand } => write!(
                f,
                "operand {operand} of instruction {} has no plain form in some iteration",
                inst.index()
            ),
            UnrollError::Ir(e) => write!(f, "{e}"),
        }
    }
}

impl From<IrError> for UnrollError {
    fn from(e: IrError) -> Self {
        UnrollError::Ir(e)
    }
}

/// The iteration vector of a copy: `(loop, iv)` for every unrolled loop
/// around it, outermost first.
type Iters = Vec<(Loop, u32)>;

/// One copy of an instruction: the source instruction, its iteration and
/// the block of the unrolled module it goes to.
struct Instance {
    inst: Inst,
    iters: usize,
    block: Block,
}

/// The unrolled structure of a module: functions, blocks and kept loops
/// built in the destination, and the instruction copies in program order.
struct Plan {
    dst: Module,
    iters: Vec<Iters>,
    copies: Vec<Instance>,
    /// Copies per destination block, in block order (indices into `copies`).
    by_block: Vec<Vec<usize>>,
    /// The private copy of a location in a group of iterations (see
    /// [`Plan::privatize`]): `(location, group)` to the copy and the bytes
    /// the copy starts after the location (a slot of a location buffered
    /// in slots; else 0).
    mem_copy: HashMap<(u32, usize), (MemLoc, u64)>,
    /// The same for registers.
    reg_copy: HashMap<(u32, usize), Reg>,
    /// Per copy: its group for each loop a location or register is
    /// private to (`(loop, group)`), filled by [`Plan::privatize`].
    groups: Vec<Vec<(Loop, usize)>>,
}

/// Instructions of `m`'s unrolled form, saturating.
fn unrolled_count(m: &Module) -> u64 {
    let mut total = 0u64;
    for b in m.blocks().name.keys() {
        let n = m.block_insts(b).count() as u64;
        let mut mult = 1u64;
        let mut l = m.blocks().loop_[b];
        while l.is_valid() {
            let trip = m.loops().trip[l];
            if trip != UNKNOWN_TRIP {
                mult = mult.saturating_mul(trip as u64);
            }
            l = m.loops().parent[l];
        }
        total = total.saturating_add(n.saturating_mul(mult));
    }
    total
}

/// The child loop of `cur` (or an outermost loop when `cur` is invalid)
/// that starts at block `b`, if any.
fn loop_starting_at(m: &Module, b: Block, cur: Loop) -> Option<Loop> {
    let mut l = m.blocks().loop_[b];
    while l.is_valid() && l != cur {
        if m.loops().parent[l] == cur {
            return (m.loops().first_block[l] == b).then_some(l);
        }
        l = m.loops().parent[l];
    }
    None
}

impl Plan {
    /// Copies `src`'s declarations and builds its unrolled structure.
    fn of(src: &Module) -> Result<Plan, UnrollError> {
        let n = unrolled_count(src);
        if n > MAX_UNROLLED_INSTS {
            return Err(UnrollError::TooLarge { instructions: n });
        }
        let mut dst = Module::new(src.target.clone());
        dst.limits = src.limits;
        dst.limits.instructions = dst.limits.instructions.max(n as u32 + 1);
        for v in src.mems().space.keys() {
            copy_mem(&mut dst, src, v, src.mem_name(v), None)?;
        }
        for r in src.regs().lanes.keys() {
            copy_reg(&mut dst, src, r, src.reg_name(r))?;
        }
        let mut plan = Plan {
            dst,
            iters: Vec::new(),
            copies: Vec::new(),
            by_block: Vec::new(),
            mem_copy: HashMap::new(),
            reg_copy: HashMap::new(),
            groups: Vec::new(),
        };
        for f in src.funcs().name.keys() {
            plan.dst.add_func(src.func_name(f))?;
            let mut labels = HashSet::new();
            let (s, e) = (
                src.funcs().first_block[f].index(),
                src.funcs().end_block[f].index(),
            );
            let mut iters = Vec::new();
            plan.emit(
                src,
                s,
                e,
                Loop::INVALID,
                Loop::INVALID,
                &mut iters,
                &mut labels,
            )?;
        }
        plan.privatize(src)?;
        Ok(plan)
    }

    /// Emits blocks `[s, e)` of `src`, nested in source loop `cur` (whose
    /// copy in the destination is `dst_loop`), in iteration `iters`.
    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        src: &Module,
        s: usize,
        e: usize,
        cur: Loop,
        dst_loop: Loop,
        iters: &mut Iters,
        labels: &mut HashSet<String>,
    ) -> Result<(), UnrollError> {
        let mut b = s;
        while b < e {
            let blk = Block::new(b);
            if let Some(l) = loop_starting_at(src, blk, cur) {
                let end = src.loops().end_block[l].index().max(b + 1);
                let trip = src.loops().trip[l];
                if trip == UNKNOWN_TRIP {
                    let kept = self.dst.add_loop(dst_loop, UNKNOWN_TRIP)?;
                    if let Some(name) = src.loop_name(l) {
                        self.dst.set_loop_name(kept, name)?;
                    }
                    self.emit(src, b, end, l, kept, iters, labels)?;
                } else {
                    for iv in 0..trip {
                        iters.push((l, iv));
                        self.emit(src, b, end, l, dst_loop, iters, labels)?;
                        iters.pop();
                    }
                }
                b = end;
                continue;
            }
            let mut label = src.block_name(blk).to_string();
            for &(_, iv) in iters.iter() {
                label.push_str(&format!("_{iv}"));
            }
            while !labels.insert(label.clone()) {
                label.push('_');
            }
            let d = self.dst.add_block(&label, dst_loop)?;
            let k = self.iters.len();
            self.iters.push(iters.clone());
            let mut in_block = Vec::new();
            for i in src.block_insts(blk) {
                in_block.push(self.copies.len());
                self.copies.push(Instance {
                    inst: i,
                    iters: k,
                    block: d,
                });
            }
            debug_assert_eq!(self.by_block.len(), d.index());
            self.by_block.push(in_block);
            b += 1;
        }
        Ok(())
    }
}

/// Cells `[p0, p1) × [b0, b1)` of a location.
type Rect = (i64, i64, i64, i64);

/// The cells a plain (folded) pattern may touch: its hull.
fn hull(m: &Module, s: &ApSpec) -> Rect {
    let e = pattern::extent(m, s.plain(), &s.ext);
    if e.flat {
        (0, i64::MAX, 0, i64::MAX)
    } else {
        (e.part_lo, e.part_hi, e.byte_lo, e.byte_hi)
    }
}

/// The cells a folded pattern surely writes: its rectangle when it is one
/// dense run per partition at a static place, else nothing.
fn dense(s: &ApSpec) -> Option<Rect> {
    if s.ext.reg.is_some() || s.ext.pstep.is_some() || !ap::is_contiguous(&s.dims) {
        return None;
    }
    let (lo, hi) = ap::element_span(&s.dims)?;
    let es = s.elem_size as i64;
    let (p0, b0) = (s.part_start as i64, s.offset as i64);
    Some((p0, p0 + s.part_count as i64, b0 + lo * es, b0 + hi * es))
}

/// True when the union of `written` covers `r`.
fn covered(written: &[Rect], r: Rect) -> bool {
    if r.0 >= r.1 || r.2 >= r.3 {
        return true;
    }
    if r.1 - r.0 > 4096 {
        return false;
    }
    let mut runs = Vec::new();
    for p in r.0..r.1 {
        runs.clear();
        runs.extend(
            written
                .iter()
                .filter(|w| w.0 <= p && p < w.1)
                .map(|w| (w.2, w.3)),
        );
        runs.sort_unstable();
        let mut reach = r.2;
        for &(lo, hi) in &runs {
            if lo > reach {
                break;
            }
            reach = reach.max(hi);
        }
        if reach < r.3 {
            return false;
        }
    }
    true
}

/// The innermost loop enclosing both `a` and `b` (either may be
/// [`Loop::INVALID`], the function level).
fn common_loop(m: &Module, a: Loop, b: Loop) -> Loop {
    let depth = |l: Loop| if l.is_valid() { m.loops().depth[l] } else { 0 };
    let (mut a, mut b) = (a, b);
    while depth(a) > depth(b) {
        a = m.loops().parent[a];
    }
    while depth(b) > depth(a) {
        b = m.loops().parent[b];
    }
    while a != b {
        a = m.loops().parent[a];
        b = m.loops().parent[b];
    }
    a
}

/// True when a loop of unknown trip count lies between `inner` and
/// `outer` (excluded): what runs there may run no time at all.
fn unknown_between(m: &Module, inner: Loop, outer: Loop) -> bool {
    let mut l = inner;
    while l.is_valid() && l != outer {
        if m.loops().trip[l] == UNKNOWN_TRIP {
            return true;
        }
        l = m.loops().parent[l];
    }
    false
}

/// Whose accesses [`Plan::privatize`] follows.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
enum Item {
    Mem(u32),
    Reg(u32),
}

impl Plan {
    /// Gives a location or register a private copy per iteration of the
    /// innermost unrolled loop `K` around all its accesses when no value
    /// flows from one iteration of `K` to another: in the straight-line
    /// code of every iteration, each read touches only cells the same
    /// iteration surely wrote before (dense static writes, outside loops of
    /// unknown trip count nested in the innermost loop around all the
    /// accesses: such a loop may not run; when that innermost loop is
    /// itself of unknown trip count, each of its iterations runs its body
    /// in the order checked, so its writes count). Such a location is, in the loop form,
    /// one that liveness need not carry around `K`'s back edge; renamed, it
    /// has one interval per iteration in the unrolled form as well, instead
    /// of one interval over all of them (a location has one interval and
    /// one placement, so an unrolled copy that kept the name would be far
    /// stricter than its loop). The copies keep the placement, so a placed
    /// module's cells, and so the dataflow of its rewrite, are unchanged;
    /// an unplaced location's copies are private cells, and no read sees
    /// what another iteration wrote, so its dataflow is unchanged too.
    /// Module inputs, outputs and pinned locations and registers keep
    /// their names.
    fn privatize(&mut self, src: &Module) -> Result<(), UnrollError> {
        // The innermost loop around every access, per item.
        let mut around: HashMap<Item, Loop> = HashMap::new();
        for i in src.program_order() {
            let l = src.inst_loop(i);
            let mut note = |x: Item| {
                around
                    .entry(x)
                    .and_modify(|k| *k = common_loop(src, *k, l))
                    .or_insert(l);
            };
            for a in src.all_aps(i) {
                note(Item::Mem(src.aps().loc[a].index() as u32));
            }
            for &r in src.uses(i).iter().chain(src.defs(i)) {
                note(Item::Reg(r.index() as u32));
            }
        }
        // Up to the nearest unrolled loop; fixed names stay.
        let mut candidates: HashMap<Item, (Loop, Loop)> = HashMap::new();
        for (&x, &l) in &around {
            let fixed = match x {
                Item::Mem(v) => {
                    let v = MemLoc::new(v as usize);
                    !src.mems().space[v].is_on_chip()
                        || src.mems().flags[v]
                            .intersects(MemFlags::INPUT | MemFlags::OUTPUT | MemFlags::PINNED)
                }
                Item::Reg(r) => src.regs().flags[Reg::new(r as usize)].contains(RegFlags::PINNED),
            };
            let mut k = l;
            while k.is_valid() && src.loops().trip[k] == UNKNOWN_TRIP {
                k = src.loops().parent[k];
            }
            if !fixed && k.is_valid() {
                candidates.insert(x, (k, l));
            }
        }
        // Groups: the iteration prefixes up to each candidate loop.
        let mut group_ids: HashMap<Vec<(u32, u32)>, usize> = HashMap::new();
        self.groups = self
            .copies
            .iter()
            .map(|c| {
                let it = &self.iters[c.iters];
                it.iter()
                    .enumerate()
                    .map(|(n, &(l, _))| {
                        let prefix: Vec<(u32, u32)> = it[..=n]
                            .iter()
                            .map(|&(l, iv)| (l.index() as u32, iv))
                            .collect();
                        let next = group_ids.len();
                        (l, *group_ids.entry(prefix).or_insert(next))
                    })
                    .collect()
            })
            .collect();
        // Walk the copies in program order: per item, the cells its
        // current group wrote.
        let mut state: HashMap<Item, (usize, Vec<Rect>)> = HashMap::new();
        let mut failed: HashSet<Item> = HashSet::new();
        for (k, c) in self.copies.iter().enumerate() {
            let (inputs, outputs) = folded(src, c.inst, &self.iters[c.iters])?;
            let il = src.inst_loop(c.inst);
            let mut step = |x: Item, cells: Option<Rect>, write: bool| {
                let Some(&(lp, inner)) = candidates.get(&x) else {
                    return;
                };
                if failed.contains(&x) {
                    return;
                }
                let Some(&(_, g)) = self.groups[k].iter().find(|&&(l, _)| l == lp) else {
                    failed.insert(x);
                    return;
                };
                let st = state.entry(x).or_insert((g, Vec::new()));
                if st.0 != g {
                    *st = (g, Vec::new());
                }
                if write {
                    if let Some(r) = cells {
                        if !unknown_between(src, il, inner) {
                            st.1.push(r);
                        }
                    }
                } else if !cells.is_some_and(|r| covered(&st.1, r)) {
                    failed.insert(x);
                }
            };
            for s in &inputs {
                step(Item::Mem(s.loc.index() as u32), Some(hull(src, s)), false);
            }
            for &r in src.uses(c.inst) {
                step(Item::Reg(r.index() as u32), Some((0, 1, 0, 1)), false);
            }
            for s in &outputs {
                step(Item::Mem(s.loc.index() as u32), dense(s), true);
            }
            for &r in src.defs(c.inst) {
                step(Item::Reg(r.index() as u32), Some((0, 1, 0, 1)), true);
            }
        }
        // The copies, in a deterministic order (by item, then group).
        let mut private: Vec<(Item, Loop)> = candidates
            .into_iter()
            .filter(|(x, _)| !failed.contains(x))
            .map(|(x, (k, _))| (x, k))
            .collect();
        private.sort_by_key(|&(x, _)| match x {
            Item::Mem(v) => (0, v),
            Item::Reg(r) => (1, r),
        });
        let mut prefixes: Vec<(usize, Vec<(u32, u32)>)> =
            group_ids.into_iter().map(|(p, g)| (g, p)).collect();
        prefixes.sort();
        for (x, lp) in private {
            for (g, prefix) in &prefixes {
                if prefix.last().map(|&(l, _)| l) != Some(lp.index() as u32) {
                    continue;
                }
                let mut suffix = String::from(".u");
                for (n, &(_, iv)) in prefix.iter().enumerate() {
                    if n > 0 {
                        suffix.push('_');
                    }
                    suffix.push_str(&iv.to_string());
                }
                match x {
                    Item::Mem(v) => {
                        let v = MemLoc::new(v as usize);
                        let mut name = format!("{}{suffix}", src.mem_name(v));
                        while self.dst.mem_by_name(&name).is_some() {
                            name.push('_');
                        }
                        // A location buffered in slots of this loop: the
                        // copy is the iteration's slot, so each copy is
                        // what one iteration uses (and, in PSUM, one
                        // tensor of the bank rule, as in the loop form).
                        let slot = src.slots(v).filter(|s| s.lp == lp).map(|s| {
                            let iv = prefix.last().map_or(0, |&(_, iv)| iv);
                            (s.stride * (iv % s.count as u32) as u64, s.width)
                        });
                        let w = copy_mem(&mut self.dst, src, v, &name, slot)?;
                        if let Some((_, width)) = slot {
                            // The original is no longer accessed: it keeps
                            // the first slot, as the copies each keep one.
                            self.dst.set_mem_bytes(v, width as u32)?;
                        }
                        let shift = slot.map_or(0, |(at, _)| at);
                        self.mem_copy.insert((v.index() as u32, *g), (w, shift));
                    }
                    Item::Reg(r) => {
                        let r = Reg::new(r as usize);
                        let mut name = format!("{}{suffix}", src.reg_name(r));
                        while self.dst.reg_by_name(&name).is_some() {
                            name.push('_');
                        }
                        let s = copy_reg(&mut self.dst, src, r, &name)?;
                        self.reg_copy.insert((r.index() as u32, *g), s);
                    }
                }
            }
        }
        Ok(())
    }

    /// The location copy `k` accesses for `v`, and the bytes to take off
    /// its patterns' offsets (the copy's start in `v`).
    fn mem_of(&self, k: usize, v: MemLoc) -> (MemLoc, u64) {
        self.groups[k]
            .iter()
            .find_map(|&(_, g)| self.mem_copy.get(&(v.index() as u32, g)).copied())
            .unwrap_or((v, 0))
    }

    /// The register copy `k` accesses for `r`.
    fn reg_of(&self, k: usize, r: Reg) -> Reg {
        self.groups[k]
            .iter()
            .find_map(|&(_, g)| self.reg_copy.get(&(r.index() as u32, g)).copied())
            .unwrap_or(r)
    }
}

/// Declares location `v` of `src` in `dst` as `name`, with its shape, type,
/// alignment, flags and placement; with `slot = (start, width)`, only
/// bytes `[start, start + width)` of it.
fn copy_mem(
    dst: &mut Module,
    src: &Module,
    v: MemLoc,
    name: &str,
    slot: Option<(u64, u64)>,
) -> Result<MemLoc, UnrollError> {
    let (start, bytes) = slot.map_or((0, src.mems().bytes[v]), |(s, w)| (s, w as u32));
    let w = dst.add_mem(name, src.mems().space[v], src.mems().partitions[v], bytes)?;
    dst.set_dtype(w, src.mems().dtype[v])?;
    dst.set_align(w, src.mems().align[v])?;
    dst.set_mem_flags(w, src.mems().flags[v]);
    if src.is_placed(v) {
        dst.place(
            w,
            src.mems().base_partition[v],
            src.mems().offset[v] + start,
        );
    }
    Ok(w)
}

/// Declares register `r` of `src` in `dst` as `name`, with its lanes,
/// flags and lane.
fn copy_reg(dst: &mut Module, src: &Module, r: Reg, name: &str) -> Result<Reg, UnrollError> {
    let s = dst.add_reg(name, src.regs().lanes[r])?;
    dst.set_reg_flags(s, src.regs().flags[r]);
    dst.set_reg_lane(s, src.regs().lane[r]);
    Ok(s)
}

/// The id key of a copy: the source instruction and its iteration.
fn key(inst: Inst, iters: &Iters) -> (u32, Vec<(u32, u32)>) {
    (
        inst.index() as u32,
        iters
            .iter()
            .map(|&(l, iv)| (l.index() as u32, iv))
            .collect(),
    )
}

/// Unrolls an original module and any rewrite of it with matching
/// instruction ids (see the module doc).
///
/// ```
/// use tusk_tests::unroll::Unroller;
/// let m = tusk_shim::text::parse_str(
///     "dram %x [128 x 2048] input\n\
///      dram %y [128 x 2048] output\n\
///      sb %t [128 x 1024]\n\
///      func @main {\n\
///      entry:\n\
///        loop i in 2 {\n\
///        body:\n\
///          %t = load %x[p0:128, 0:1024 +1024*i]\n\
///          %y[p0:128, 0:1024 +1024*i] = save %t\n\
///        }\n\
///      }\n",
/// )
/// .unwrap();
/// let flat = Unroller::new(&m).unwrap().unroll(&m).unwrap();
/// let text = tusk_shim::text::print(&flat);
/// assert!(text.contains("%t.u1 = load %x[p0:128, 1024:2048]"), "{text}");
/// assert_eq!(flat.num_loops(), 0);
/// ```
#[derive(Debug)]
pub struct Unroller {
    /// Id of the original's copy of `(inst, iteration)`.
    ids: HashMap<(u32, Vec<(u32, u32)>), u32>,
    /// Instructions the original's copies count.
    originals: u32,
    /// Instructions of the original (ids below are originals when linked).
    source_insts: usize,
    /// Linked in the original, per instruction.
    linked: Vec<bool>,
    /// Locations and registers of the original's unrolled form: a
    /// rewrite's has at least as many (the checker's rule), padded with
    /// unused ones when its copies are fewer.
    mems: usize,
    regs: usize,
}

impl Unroller {
    /// Numbers the copies of `original`'s instructions.
    pub fn new(original: &Module) -> Result<Unroller, UnrollError> {
        let plan = Plan::of(original)?;
        let mut ids = HashMap::new();
        for (k, c) in plan.copies.iter().enumerate() {
            ids.insert(key(c.inst, &plan.iters[c.iters]), k as u32);
        }
        Ok(Unroller {
            ids,
            originals: plan.copies.len() as u32,
            source_insts: original.num_insts(),
            linked: (0..original.num_insts())
                .map(|i| original.insts().block[Inst::new(i)].is_valid())
                .collect(),
            mems: plan.dst.num_mems(),
            regs: plan.dst.num_regs(),
        })
    }

    /// The unrolled form of `m`: the original this unroller was made for,
    /// or a rewrite of it.
    pub fn unroll(&self, m: &Module) -> Result<Module, UnrollError> {
        let mut plan = Plan::of(m)?;
        for k in plan.dst.num_mems()..self.mems {
            let name = format!("unroll.pad{k}");
            plan.dst.add_mem(&name, Space::Sb, 1, 4)?;
        }
        for k in plan.dst.num_regs()..self.regs {
            plan.dst.add_reg(&format!("unroll.pad{k}"), 1)?;
        }
        // The id of every copy.
        let mut added = self.originals;
        let mut id_of = Vec::with_capacity(plan.copies.len());
        for c in &plan.copies {
            let i = c.inst.index();
            let original = i < self.source_insts && self.linked[i];
            let id = if original {
                *self
                    .ids
                    .get(&key(c.inst, &plan.iters[c.iters]))
                    .ok_or(UnrollError::Moved { inst: c.inst })?
            } else {
                added += 1;
                added - 1
            };
            id_of.push(id);
        }
        // Creation order: by id; ids without a copy are unlinked fillers.
        let total = added as usize;
        let mut copy_of = vec![usize::MAX; total];
        for (k, &id) in id_of.iter().enumerate() {
            copy_of[id as usize] = k;
        }
        let mut cap = Capacity {
            insts: total,
            ..Capacity::default()
        };
        for c in &plan.copies {
            let o = m.operands(c.inst);
            cap.aps += (o.n_in + o.n_out) as usize;
            cap.reg_operands += (o.n_use + o.n_def) as usize;
            cap.imms += 1;
            for a in m.all_aps(c.inst) {
                cap.dims += m.ap_dims(a).len();
                cap.ap_exts += 1;
            }
        }
        plan.dst.reserve(cap);
        let mut made: Vec<Vec<Option<Inst>>> =
            plan.by_block.iter().map(|v| vec![None; v.len()]).collect();
        let mut position = vec![0usize; plan.copies.len()];
        for v in &plan.by_block {
            for (p, &k) in v.iter().enumerate() {
                position[k] = p;
            }
        }
        for (id, &k) in copy_of.iter().enumerate() {
            if k == usize::MAX {
                filler(&mut plan.dst)?;
                continue;
            }
            let c = &plan.copies[k];
            let (mut inputs, mut outputs) = folded(m, c.inst, &plan.iters[c.iters])?;
            for s in inputs.iter_mut().chain(outputs.iter_mut()) {
                let (loc, shift) = plan.mem_of(k, s.loc);
                s.loc = loc;
                let bad = UnrollError::Unrepresentable {
                    inst: c.inst,
                    operand: 0,
                };
                let off = (s.offset as u64).checked_sub(shift).ok_or(bad.clone())?;
                s.offset = u32::try_from(off).map_err(|_| bad)?;
            }
            let uses: Vec<Reg> = m.uses(c.inst).iter().map(|&r| plan.reg_of(k, r)).collect();
            let defs: Vec<Reg> = m.defs(c.inst).iter().map(|&r| plan.reg_of(k, r)).collect();
            let mut spec = InstSpec::new(m.insts().opcode[c.inst]);
            spec.subop = m.insts().subop[c.inst];
            spec.engine = m.insts().engine[c.inst];
            spec.queue = m.insts().queue[c.inst];
            spec.flags = m.insts().flags[c.inst];
            spec.imm = m.imm(c.inst);
            spec.inputs = &inputs;
            spec.outputs = &outputs;
            spec.uses = &uses;
            spec.defs = &defs;
            let b = c.block.index();
            let p = position[k];
            let row = &made[b];
            let before = row[..p].iter().rev().find_map(|x| *x);
            let after = row[p + 1..].iter().find_map(|x| *x);
            let i = match (before, after) {
                (_, None) => plan.dst.append_inst(c.block, &spec)?,
                (Some(x), Some(_)) => plan.dst.insert_after(x, &spec)?,
                (None, Some(y)) => plan.dst.insert_before(y, &spec)?,
            };
            assert_eq!(i.index(), id, "copies are created in id order");
            // The builder reads a DMA's lone register without a term as
            // the legacy offset spelling; a rewrite that left it plain
            // stays plain.
            for (j, s) in inputs.iter().chain(&outputs).enumerate() {
                let a = plan.dst.all_aps(i).nth(j).expect("the operand");
                if plan.dst.ap_ext(a) != &s.ext {
                    plan.dst.set_ap_ext(i, j, s.ext.clone())?;
                }
            }
            made[b][p] = Some(i);
        }
        Ok(plan.dst)
    }
}

/// An instruction created and unlinked at once: the id of an original
/// instruction the rewrite removed.
fn filler(m: &mut Module) -> Result<(), UnrollError> {
    let b = Block::new(0);
    let i = m.append_inst(b, &InstSpec::new(Opcode::SyncWait))?;
    m.remove_inst(i);
    Ok(())
}

/// The patterns of instruction `i` in iteration `iters`, loop terms folded.
fn folded(m: &Module, i: Inst, iters: &Iters) -> Result<(Vec<ApSpec>, Vec<ApSpec>), UnrollError> {
    let n_in = m.operands(i).n_in as usize;
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    for (k, a) in m.all_aps(i).enumerate() {
        let mut s = m.ap_spec(a);
        let bad = UnrollError::Unrepresentable {
            inst: i,
            operand: k,
        };
        let mut part = s.part_start as i64;
        let mut off = s.offset as i64;
        for t in &s.ext.terms {
            let iv = iters
                .iter()
                .find(|&&(l, _)| l == t.lp)
                .map(|&(_, iv)| t.index(iv) as i64)
                .ok_or(bad.clone())?;
            part += t.parts as i64 * iv;
            off += t.bytes * iv;
        }
        s.ext.terms.clear();
        s.part_start = u8::try_from(part).map_err(|_| bad.clone())? as u16;
        s.offset = u32::try_from(off).map_err(|_| bad.clone())?;
        if k < n_in {
            inputs.push(s);
        } else {
            outputs.push(s);
        }
    }
    Ok((inputs, outputs))
}
