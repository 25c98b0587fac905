//! Lower bounds on the memory each space needs, from liveness alone.
//!
//! For every position, over the locations of one space live there:
//! - *full-width bytes*: the bytes per partition of the live locations of
//!   more than half the partitions. The start-partition rule puts all of them
//!   at partition 0, so they stack on partition 0 and no placement beats
//!   their sum;
//! - *area bytes*: live (partitions × bytes) divided by the partition count,
//!   rounded up: the height the live area needs if it could be spread
//!   perfectly over all partitions.
//!
//! DRAM is one flat space: both bounds are the live footprint
//! (partitions × bytes) of the locations a DRAM allocator places; unplaced
//! module inputs and outputs are external (the runtime places them) and do
//! not count. PSUM tensors start on a bank boundary, so there a
//! location counts its bytes rounded up to whole banks. The space's lower
//! bound is the larger of the two maxima.

use alloc::vec::Vec;

use super::liveness::MemLiveness;
use super::order::LinearOrder;
use crate::ir::{MemFlags, Module, Space};

/// A peak over its lower bound, the figure of every report (docs/REPORT.md
/// `peak_over_bound`): 1.0 is optimal. A bound of 0 means nothing needed
/// room, which no placement can beat, so the ratio is 1.0 there too.
pub fn peak_over_bound(peak: u64, lower_bound: u64) -> f64 {
    if lower_bound == 0 {
        1.0
    } else {
        peak as f64 / lower_bound as f64
    }
}

/// Lower bounds of one space.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SpaceBound {
    /// Locations of this space that are live somewhere.
    pub locations: u32,
    /// Max over positions of the stacked full-width bytes.
    pub full_width_bytes: u64,
    /// Max over positions of ceil(live area / partitions).
    pub area_bytes: u64,
    /// A position where the lower bound is reached.
    pub peak_pos: u32,
}

impl SpaceBound {
    /// The lower bound: no legal placement has a smaller per-partition peak.
    pub fn lower_bound(&self) -> u64 {
        self.full_width_bytes.max(self.area_bytes)
    }
}

/// Lower bounds of the three spaces, indexed by [`Space::slot`].
#[derive(Clone, Debug, Default)]
pub struct Bounds {
    /// Per space.
    pub spaces: [SpaceBound; 3],
    /// Scratch difference array (full-width, area × partitions) of the
    /// space being summed, one entry per position. Invariant: all zero
    /// between computes (each sweep takes the entries it reads), so a
    /// compute writes only the entries of live intervals instead of
    /// clearing the array first — at millions of positions the clearing
    /// (six arrays of 8 B per position before) cost more than the sums.
    diff: Vec<[i64; 2]>,
}

impl Bounds {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.diff)
    }

    /// Empty storage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bounds of `m` (allocates its storage).
    pub fn of(m: &Module, order: &LinearOrder, live: &MemLiveness) -> Self {
        let mut b = Self::new();
        b.compute(m, order, live);
        b
    }

    /// The bound of one space.
    pub fn space(&self, s: Space) -> &SpaceBound {
        &self.spaces[s.slot()]
    }

    /// Sizes the storage for a module of up to `cap` entities (totals, e.g.
    /// [`crate::ir::Module::capacity`]): one difference entry per position.
    /// Afterwards [`Bounds::compute`] on any module within `cap` does not
    /// allocate.
    pub fn reserve(&mut self, cap: &crate::ir::Capacity) {
        crate::storage::grow(&mut self.diff, cap.insts + 1);
    }

    /// Recomputes, reusing storage.
    pub fn compute(&mut self, m: &Module, order: &LinearOrder, live: &MemLiveness) {
        self.spaces = [SpaceBound::default(); 3];
        // One space at a time: one difference array instead of six.
        for space in Space::ALL {
            let mut sb = SpaceBound::default();
            let mut best = 0u64;
            sb.locations = self.sweep(m, order, live, space, |p, f, a| {
                sb.full_width_bytes = sb.full_width_bytes.max(f);
                sb.area_bytes = sb.area_bytes.max(a);
                if f.max(a) > best {
                    best = f.max(a);
                    sb.peak_pos = p;
                }
            });
            self.spaces[space.slot()] = sb;
        }
    }

    /// Where the bound of `space` runs over `cap`: per maximal run of
    /// positions whose bound (the larger of the two) exceeds `cap`, the
    /// first position of its highest bound and how far that is over `cap`,
    /// handed to `each` in position order. Allocates nothing once reserved
    /// ([`Self::reserve`]).
    pub fn over_capacity(
        &mut self,
        m: &Module,
        order: &LinearOrder,
        live: &MemLiveness,
        space: Space,
        cap: u64,
        mut each: impl FnMut(u32, u64),
    ) {
        // The run being walked: its highest bound and where.
        let mut run: Option<(u32, u64)> = None;
        self.sweep(m, order, live, space, |p, f, a| {
            let need = f.max(a);
            if need <= cap {
                if let Some((q, top)) = run.take() {
                    each(q, top - cap);
                }
            } else if run.map_or(true, |(_, top)| need > top) {
                run = Some((p, need));
            }
        });
        if let Some((q, top)) = run {
            each(q, top - cap);
        }
    }

    /// Sums the bounds of `space` over the positions of `order`, calling
    /// `at(position, full-width bytes, area bytes)` at each in order;
    /// returns how many locations of `space` are live somewhere.
    fn sweep(
        &mut self,
        m: &Module,
        order: &LinearOrder,
        live: &MemLiveness,
        space: Space,
        mut at: impl FnMut(u32, u64, u64),
    ) -> u32 {
        let n = order.len();
        if self.diff.len() < n + 1 {
            self.diff.resize(n + 1, [0, 0]);
        }
        let t = &m.target;
        let total_parts = match space {
            Space::Sb => t.sb_partitions,
            Space::Psum => t.psum_partitions,
            Space::Dram => 1,
        };
        let mut locations = 0;
        for v in m.mems().space.keys() {
            if m.mems().space[v] != space {
                continue;
            }
            let Some(iv) = live.interval(v) else { continue };
            let external = m.mems().flags[v].intersects(MemFlags::INPUT | MemFlags::OUTPUT);
            if space == Space::Dram && external && !m.is_placed(v) {
                continue;
            }
            let parts = m.mems().partitions[v] as u64;
            let mut bytes = m.mems().bytes[v] as u64;
            let (full, area) = match space {
                Space::Dram => (parts * bytes, parts * bytes),
                Space::Sb | Space::Psum => {
                    if space == Space::Psum {
                        bytes = t.psum_footprint(bytes);
                    }
                    let full = if parts * 2 > total_parts as u64 {
                        bytes
                    } else {
                        0
                    };
                    (full, parts * bytes)
                }
            };
            locations += 1;
            let (s, e) = (iv.start as usize, (iv.end as usize + 1).min(n));
            self.diff[s][0] += full as i64;
            self.diff[s][1] += area as i64;
            self.diff[e][0] -= full as i64;
            self.diff[e][1] -= area as i64;
        }
        let parts = (total_parts as i64).max(1) as u64;
        let (mut full, mut area) = (0i64, 0i64);
        for p in 0..n {
            let [df, da] = core::mem::take(&mut self.diff[p]);
            full += df;
            area += da;
            at(
                p as u32,
                full.max(0) as u64,
                (area.max(0) as u64).div_ceil(parts),
            );
        }
        // Ends one past the last position land at `n`.
        self.diff[n] = [0, 0];
        locations
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Builder, Opcode, SubOp};
    use crate::target::Target;
    use crate::testing::{add, mem, tiles};

    #[test]
    fn hand_computed_bounds() {
        // a(128x100) b(32x400) c(32x400) d(128x50) live together at one point.
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let a = mem(&mut bl, "a", Space::Sb, 128, 100, 1, MemFlags::empty());
        let [b, c] = tiles(&mut bl, Space::Sb, ["b", "c"], 32, 400, 1);
        let d = mem(&mut bl, "d", Space::Sb, 128, 50, 1, MemFlags::empty());
        let p = mem(&mut bl, "p", Space::Psum, 128, 100, 4, MemFlags::empty());
        bl.func("f").unwrap();
        for x in [a, b, c] {
            bl.op(Opcode::Memset, &[bl.full(x)], &[]).unwrap();
        }
        add(&mut bl, d, &[a, b, c]);
        bl.compute(Opcode::Matmul, SubOp::None, p, &[d], Default::default())
            .unwrap();
        let o = LinearOrder::of(&m);
        let l = MemLiveness::of(&m, &o);
        let bounds = Bounds::of(&m, &o, &l);
        let sb = bounds.space(Space::Sb);
        // At position 3: full width a + d = 150; area (12800 + 12800 + 12800 + 6400)/128 = 350.
        assert_eq!(sb.full_width_bytes, 150);
        assert_eq!(sb.area_bytes, 350);
        assert_eq!(sb.lower_bound(), 350);
        assert_eq!(sb.peak_pos, 3);
        // PSUM rounds 100 bytes up to one 2 KiB bank.
        assert_eq!(bounds.space(Space::Psum).lower_bound(), 2048);
    }

    #[test]
    fn each_run_over_the_capacity_is_named_once_at_its_highest_point() {
        // Three PSUM banks live at position 2 (a, b and c) and again at 5
        // (d, e and f), two between: with room for two banks, two runs
        // over by a bank each.
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let [a, b, c, d, e, f] = tiles(
            &mut bl,
            Space::Psum,
            ["a", "b", "c", "d", "e", "f"],
            128,
            2048,
            1,
        );
        bl.func("f").unwrap();
        for x in [a, b] {
            bl.op(Opcode::Memset, &[bl.full(x)], &[]).unwrap();
        }
        bl.compute(
            Opcode::TensorTensor,
            SubOp::Add,
            c,
            &[a, b],
            Default::default(),
        )
        .unwrap();
        bl.compute(Opcode::Activation, SubOp::Exp, d, &[c], Default::default())
            .unwrap();
        bl.op(Opcode::Memset, &[bl.full(e)], &[]).unwrap();
        bl.compute(
            Opcode::TensorTensor,
            SubOp::Add,
            f,
            &[d, e],
            Default::default(),
        )
        .unwrap();
        let o = LinearOrder::of(&m);
        let l = MemLiveness::of(&m, &o);
        let mut bounds = Bounds::of(&m, &o, &l);
        let mut runs = |cap: u64| {
            let mut out = Vec::new();
            bounds.over_capacity(&m, &o, &l, Space::Psum, cap, |p, over| out.push((p, over)));
            out
        };
        assert_eq!(runs(2 * 2048), [(2, 2048), (5, 2048)]);
        // Nothing over a capacity at the bound.
        assert!(runs(3 * 2048).is_empty());
        // With room for one bank, positions 1 to 5 are one run (two banks
        // or more everywhere), named once at its first highest point.
        assert_eq!(runs(2048), [(2, 4096)]);
        // The sums left the scratch clean: the bounds are as before.
        assert_eq!(bounds.spaces, Bounds::of(&m, &o, &l).spaces);
    }
}
