//! The floor: the least capacity per partition any placement of the program
//! could use in an on-chip space, from each instruction's own operands.
//!
//! An instruction needs every location it accesses resident while it runs.
//! What a placement must hold of one location there is the rectangle the
//! instruction's patterns name in one iteration of the loops around it (a
//! register-indexed pattern's whole window, since the register's value is
//! not known ahead): a reload copy may hold one iteration's slice and be
//! loaded again in the next (the spill modules' slice splits do), so the
//! rectangle over every iteration ([`Module::ap_hull`]) is no bound.
//! Patterns are affine in the loop counters, so every iteration's
//! rectangle has the size of the first one's. Per instruction, over its
//! operands of one space (each location once, its rectangles joined):
//! - *stacked bytes*: operands that can only start at partition 0 (the
//!   start-partition rule leaves them no other start) all cover partition 0
//!   up to the narrowest of them, so their bytes add up there;
//! - *area bytes*: the operands' partitions × bytes spread evenly over every
//!   partition, rounded up;
//! - *single bytes*: the widest operand's bytes, which some partition holds;
//! - *shared bytes*: operands too tall to sit side by side must share
//!   partitions. Of operands each taller than `P / (k + 1)` partitions, no
//!   k + 1 fit pairwise apart. Their partition ranges are intervals, and
//!   intervals that avoid k + 1 pairwise-disjoint members fall into at most
//!   k groups with a partition common to each group (interval graphs are
//!   perfect; intervals meeting pairwise share a point), so some partition
//!   holds at least ⌈n / k⌉ of the n operands: at least the ⌈n / k⌉ smallest.
//!
//! An SB side of a DMA that can move onto DRAM unchanged
//! ([`side_moves_to_dram`]) does not count: the tensor can live in a DRAM
//! slot there and the DMA copy DRAM to DRAM.
//!
//! PSUM operands count whole banks (a PSUM tensor starts on a bank
//! boundary). The floor of the space is the largest of the three over every
//! instruction; a capacity below it cannot be met by any allocator, so the
//! pipeline refuses it before allocating and names the instruction. An
//! instruction that writes in place may put an output on a dying input: its
//! inputs and its outputs are counted as two groups and the larger counts.

use crate::ir::DisplayNamed;
use crate::ir::{Inst, InstFlags, MemLoc, Module, Space};
use arrayvec::ArrayVec;

/// Which of the three bounds sets a floor.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum FloorKind {
    /// No instruction accesses the space.
    #[default]
    None,
    /// Operands that must all start at partition 0, stacked there.
    Stacked,
    /// The operands' area over every partition.
    Area,
    /// One operand's bytes per partition.
    Single,
    /// Operands too tall to sit side by side, sharing a partition.
    Shared,
}

/// The floor of one on-chip space and the instruction that sets it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SpaceFloor {
    /// Bytes per partition no placement can go below.
    pub bytes: u64,
    /// The instruction whose operands need them ([`Inst::INVALID`] when no
    /// instruction accesses the space).
    pub inst: Inst,
    /// First partition of the range that needs them.
    pub part_lo: u16,
    /// One past the last partition of that range.
    pub part_hi: u16,
    /// Which bound it is.
    pub kind: FloorKind,
    /// For [`FloorKind::Single`], the operand.
    pub operand: MemLoc,
}

impl Default for SpaceFloor {
    fn default() -> Self {
        Self {
            bytes: 0,
            inst: Inst::INVALID,
            part_lo: 0,
            part_hi: 0,
            kind: FloorKind::None,
            operand: MemLoc::INVALID,
        }
    }
}

/// Floors of the on-chip spaces, by [`Space::slot`] (DRAM's stays empty).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Floor {
    /// Per space.
    pub spaces: [SpaceFloor; 3],
}

impl Floor {
    /// The floor of `m` (no allocation: one walk over the instructions,
    /// each operand compared with the instruction's other operands).
    pub fn of(m: &Module) -> Self {
        let mut f = Self::default();
        for i in m.program_order() {
            for space in [Space::Sb, Space::Psum] {
                let in_place = m.insts().flags[i].contains(InstFlags::IN_PLACE);
                let groups: &[Group] = if in_place {
                    &[Group::Inputs, Group::Outputs]
                } else {
                    &[Group::All]
                };
                for &g in groups {
                    let c = inst_need(m, i, space, g);
                    let sf = &mut f.spaces[space.slot()];
                    if c.bytes > sf.bytes {
                        *sf = c;
                    }
                }
            }
        }
        f
    }

    /// The floor of one space.
    pub fn space(&self, s: Space) -> &SpaceFloor {
        &self.spaces[s.slot()]
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Group {
    All,
    Inputs,
    Outputs,
}

/// The operand hulls of `i` in `space`: calls `f(location, rows, bytes)`
/// once per location, its patterns' hulls joined.
fn each_operand(m: &Module, i: Inst, space: Space, g: Group, mut f: impl FnMut(MemLoc, u16, u64)) {
    let n_in = m.inputs(i).len();
    let in_group = |k: usize| match g {
        Group::All => true,
        Group::Inputs => k < n_in,
        Group::Outputs => k >= n_in,
    };
    // Inputs come first in `all_aps`.
    for (k, a) in m.all_aps(i).enumerate() {
        let l = m.aps().loc[a];
        if !in_group(k) || m.mems().space[l] != space {
            continue;
        }
        if m.all_aps(i)
            .take(k)
            .enumerate()
            .any(|(j, b)| in_group(j) && m.aps().loc[b] == l)
        {
            continue; // counted with its first pattern
        }
        if m.all_aps(i)
            .enumerate()
            .all(|(j, b)| !in_group(j) || m.aps().loc[b] != l || side_moves_to_dram(m, i, b))
        {
            continue; // the DMA can move it to or from DRAM instead
        }
        let (mut r0, mut r1, mut lo, mut hi) = iteration_rect(m, a);
        for (j, b) in m.all_aps(i).enumerate().skip(k + 1) {
            if in_group(j) && m.aps().loc[b] == l {
                let (q0, q1, c0, c1) = iteration_rect(m, b);
                r0 = r0.min(q0);
                r1 = r1.max(q1);
                lo = lo.min(c0);
                hi = hi.max(c1);
            }
        }
        if r1 > r0 && hi > lo {
            f(l, r1 - r0, hi - lo);
        }
    }
}

/// True when pattern `a` of DMA `i` is an SB side that can move onto DRAM
/// unchanged: no register term, no partition step (a DRAM location of the
/// tile's shape then means the same cells). The access split
/// ([`crate::mem::access_split`]) turns such a DMA into a DRAM-to-DRAM
/// `dma_copy` of the tensor's slot, so the floor does not count the side.
pub fn side_moves_to_dram(m: &Module, i: Inst, a: crate::ir::Ap) -> bool {
    let e = m.ap_ext(a);
    m.insts().opcode[i].is_dma()
        && m.mems().space[m.aps().loc[a]] == Space::Sb
        && e.reg.is_none()
        && e.pstep.is_none()
}

/// The rectangle of its location `a` names in the first iteration of the
/// loops around it: partitions `[r0, r1)` and bytes `[lo, hi)` per
/// partition, as [`Module::ap_hull`] gives over every iteration but with
/// the loop terms left out (the register window and the partition step
/// stay). Clamped to the location.
fn iteration_rect(m: &Module, a: crate::ir::Ap) -> (u16, u16, u64, u64) {
    let ext = m.ap_ext(a);
    if ext.terms.is_empty() {
        return m.ap_hull(a);
    }
    let mut first = ext.clone();
    first.terms.clear();
    let l = m.aps().loc[a];
    let bytes = m.mems().bytes[l] as u64;
    let rows = m.mems().partitions[l];
    let e = m.ap_extent_with(a, &first);
    if e.flat {
        return (0, rows, 0, bytes);
    }
    let clamp_rows = |x: i64| x.clamp(0, rows as i64) as u16;
    let clamp_bytes = |x: i64| x.clamp(0, bytes as i64) as u64;
    let (r0, mut r1) = (clamp_rows(e.part_lo), clamp_rows(e.part_hi));
    if first.is_broadcast(m.mems().space[l]) {
        r1 = r1
            .saturating_add((m.aps().part_count[a] as u16).saturating_sub(1))
            .min(rows);
    }
    (r0, r1, clamp_bytes(e.byte_lo), clamp_bytes(e.byte_hi))
}

/// What `i`'s operands of group `g` need in `space` by themselves.
fn inst_need(m: &Module, i: Inst, space: Space, g: Group) -> SpaceFloor {
    let t = &m.target;
    let total = match space {
        Space::Psum => t.psum_partitions,
        _ => t.sb_partitions,
    }
    .max(1);
    let (mut stacked, mut narrowest, mut area) = (0u64, u16::MAX, 0u64);
    let (mut single, mut single_loc, mut single_parts) = (0u64, MemLoc::INVALID, 0u16);
    // Every operand's (bytes, rows): at most one entry per access pattern,
    // and the module limits those per instruction to a u8.
    let mut tall: ArrayVec<(u64, u16), 256> = ArrayVec::new();
    each_operand(m, i, space, g, |l, rows, bytes| {
        let bytes = match space {
            Space::Psum => t.psum_footprint(bytes),
            _ => bytes,
        };
        if only_at_zero(m, space, rows, total) {
            stacked += bytes;
            narrowest = narrowest.min(rows);
        }
        area += rows as u64 * bytes;
        let _ = tall.try_push((bytes, rows));
        if bytes > single {
            (single, single_loc, single_parts) = (bytes, l, rows);
        }
    });
    let area = area.div_ceil(total as u64);
    let shared = shared_bytes(&mut tall, total);
    // On a tie the more specific bound names the witness: one operand,
    // then the stack at partition 0, then the area.
    let mut best = SpaceFloor {
        inst: i,
        ..SpaceFloor::default()
    };
    let bounds = [
        (single, single_parts, FloorKind::Single, single_loc),
        (stacked, narrowest, FloorKind::Stacked, MemLoc::INVALID),
        (area, total, FloorKind::Area, MemLoc::INVALID),
        (shared, total, FloorKind::Shared, MemLoc::INVALID),
    ];
    for (bytes, part_hi, kind, operand) in bounds {
        if bytes > best.bytes {
            best = SpaceFloor {
                bytes,
                inst: i,
                part_lo: 0,
                part_hi,
                kind,
                operand,
            };
        }
    }
    best
}

/// The shared-bytes bound of the module doc over `ops` (bytes, rows), for
/// every k: the ⌈n / k⌉ smallest of the n operands taller than
/// `total / (k + 1)`.
fn shared_bytes(ops: &mut [(u64, u16)], total: u16) -> u64 {
    ops.sort_unstable();
    let mut best = 0u64;
    for k in 1..=ops.len() as u64 {
        let taller = |r: u16| r as u64 * (k + 1) > total as u64;
        let n = ops.iter().filter(|&&(_, r)| taller(r)).count() as u64;
        let sum = ops
            .iter()
            .filter(|&&(_, r)| taller(r))
            .take(n.div_ceil(k) as usize)
            .map(|&(b, _)| b)
            .sum::<u64>();
        best = best.max(sum);
    }
    best
}

/// True when a rectangle of `rows` partitions has no legal start but 0.
fn only_at_zero(m: &Module, space: Space, rows: u16, total: u16) -> bool {
    match space {
        Space::Sb => match m.target.start_granularity(rows) {
            Some(g) => g as u32 + rows as u32 > total as u32,
            None => true,
        },
        // PSUM follows the rule of the lower bounds: more than half the
        // partitions start at 0.
        _ => rows as u32 * 2 > total as u32,
    }
}

crate::ir::display_named!(FloorDisplay for SpaceFloor);

/// The floor as a sentence naming the instruction with `m`'s names:
/// instruction `…` (block b, 1st) needs N bytes per partition in partitions
/// P..Q by itself.
impl DisplayNamed for SpaceFloor {
    fn fmt_named(&self, m: &Module, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let x = self;
        if !x.inst.is_valid() {
            return write!(f, "no instruction accesses the space");
        }
        write!(
            f,
            "instruction {} needs {} bytes per partition in partitions {}..{} by itself",
            m.describe_inst(x.inst),
            x.bytes,
            x.part_lo,
            x.part_hi.saturating_sub(1)
        )?;
        match x.kind {
            FloorKind::Stacked => write!(
                f,
                " (its operands that can only start at partition 0, stacked)"
            ),
            FloorKind::Area => write!(f, " (its operands' area spread over every partition)"),
            FloorKind::Shared => write!(
                f,
                " (its operands too tall to sit side by side, sharing a partition)"
            ),
            FloorKind::Single if x.operand.is_valid() => {
                write!(f, " (its operand %{})", m.mem_name(x.operand))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Builder, MemFlags, Opcode};
    use crate::target::Target;
    use crate::testing::{add, mem};

    /// An add of `n` tiles of 64 partitions × 4096 bytes (inputs and output).
    fn half_height_tiles(n: usize) -> SpaceFloor {
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let names = ["a", "b", "c", "d"];
        let t: alloc::vec::Vec<MemLoc> = names[..n]
            .iter()
            .map(|x| mem(&mut bl, x, Space::Sb, 64, 4096, 1, MemFlags::empty()))
            .collect();
        bl.func("f").unwrap();
        for &x in &t[..n - 1] {
            bl.op(Opcode::Memset, &[bl.full(x)], &[]).unwrap();
        }
        add(&mut bl, t[n - 1], &t[..n - 1]);
        *Floor::of(&m).space(Space::Sb)
    }

    #[test]
    fn tiles_too_tall_to_sit_side_by_side_share_a_partition() {
        // Two half-height tiles sit side by side: one tile's bytes.
        assert_eq!(half_height_tiles(2).bytes, 4096);
        // Of three, two share partitions whatever their starts: 8192, where
        // the area over every partition says 6144.
        let three = half_height_tiles(3);
        assert_eq!(three.bytes, 8192);
        assert_eq!(three.kind, FloorKind::Shared);
        // Four half-height tiles: two per partition again.
        assert_eq!(half_height_tiles(4).bytes, 8192);
    }

    #[test]
    fn a_loop_indexed_operand_counts_one_iteration() {
        // `w` (8192 bytes) is written and read a quarter per iteration,
        // beside `b` (2048): a copy of one quarter per iteration serves
        // the add, so it needs 2048 + 2048 stacked at partition 0, not the
        // 8192 + 2048 its operands name over every iteration (which a
        // linear-scan placement with a reloaded slice undercuts).
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let w = mem(&mut bl, "w", Space::Sb, 128, 8192, 1, MemFlags::empty());
        let b = mem(&mut bl, "b", Space::Sb, 128, 2048, 1, MemFlags::empty());
        bl.func("f").unwrap();
        let lp = bl.begin_loop(4).unwrap();
        bl.module().set_loop_name(lp, "k").unwrap();
        let mut quarter = bl.slice(w, 0, 128, 0, 2048);
        quarter
            .ext
            .terms
            .push(crate::ir::IvTerm::affine(lp, 0, 2048));
        bl.op(Opcode::Memset, core::slice::from_ref(&quarter), &[])
            .unwrap();
        let ins = [quarter.clone(), quarter];
        let outs = [bl.full(b)];
        let mut spec = crate::ir::InstSpec::new(Opcode::TensorTensor);
        spec.subop = crate::ir::SubOp::Add;
        spec.inputs = &ins;
        spec.outputs = &outs;
        bl.inst(&spec).unwrap();
        bl.end_loop().unwrap();
        let sb = *Floor::of(&m).space(Space::Sb);
        assert_eq!(sb.bytes, 4096);
        assert_eq!(sb.kind, FloorKind::Stacked);
    }

    #[test]
    fn floor_is_the_largest_instruction_by_geometry() {
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let a = mem(&mut bl, "a", Space::Sb, 128, 100, 1, MemFlags::empty());
        let b = mem(&mut bl, "b", Space::Sb, 128, 300, 1, MemFlags::empty());
        let c = mem(&mut bl, "c", Space::Sb, 32, 4000, 1, MemFlags::empty());
        let d = mem(&mut bl, "d", Space::Sb, 128, 50, 1, MemFlags::empty());
        bl.func("f").unwrap();
        for x in [a, b, c] {
            bl.op(Opcode::Memset, &[bl.full(x)], &[]).unwrap();
        }
        // Full-width a + b + d stack at partition 0: 450; c alone: 4000.
        add(&mut bl, d, &[a, b]);
        add(&mut bl, d, &[d, c]);
        let f = Floor::of(&m);
        let sb = f.space(Space::Sb);
        assert_eq!(sb.bytes, 4000);
        assert_eq!(sb.kind, FloorKind::Single);
        assert_eq!(sb.operand, c);
        assert_eq!((sb.part_lo, sb.part_hi), (0, 32));
        // Without c the stack of the add decides.
        let mut m2 = Module::new(Target::default());
        let mut bl = Builder::new(&mut m2);
        let a = mem(&mut bl, "a", Space::Sb, 128, 100, 1, MemFlags::empty());
        let b = mem(&mut bl, "b", Space::Sb, 100, 300, 1, MemFlags::empty());
        let d = mem(&mut bl, "d", Space::Sb, 128, 50, 1, MemFlags::empty());
        bl.func("f").unwrap();
        for x in [a, b] {
            bl.op(Opcode::Memset, &[bl.full(x)], &[]).unwrap();
        }
        add(&mut bl, d, &[a, b]);
        let sb = *Floor::of(&m2).space(Space::Sb);
        assert_eq!(sb.bytes, 450);
        assert_eq!(sb.kind, FloorKind::Stacked);
        assert_eq!((sb.part_lo, sb.part_hi), (0, 100));
        let text = alloc::format!("{}", sb.display(&m2));
        assert!(
            text.starts_with("instruction `%d = tensor_tensor")
                && text.contains("needs 450 bytes per partition in partitions 0..99 by itself"),
            "{text}"
        );
    }
}
