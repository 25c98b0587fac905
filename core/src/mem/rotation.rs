//! PSUM address rotation (`address_rotation_psum`): after allocation,
//! successive PSUM tiles go round the free banks instead of sharing one.
//!
//! The allocators minimize the peak, so tiles whose lifetimes do not
//! overlap share a bank — typically every transpose and every
//! accumulation group of a kernel lands in bank 0. Each then has to wait
//! for the previous tile's last reader before its first write (a
//! placement-added dependency: [`crate::analysis::schedule`]), and the
//! tensor engine cannot fill bank i + 1 while another engine drains bank
//! i. This pass re-places each PSUM tile, in the order the tiles become
//! live, into the usable bank that has been free the longest — the bank
//! whose last tile died earliest — among the banks where it conflicts with
//! nothing: the property it exploits is that a tile's successor in program
//! order is the one most likely to run concurrently with its readers, so
//! the longest-idle bank is the one whose readers are most likely done.
//!
//! Invariants: only the bank changes (base partition and the offset inside
//! the bank stay); a tile moves only to banks that no other PSUM tile
//! whose live interval overlaps its own uses on a common partition (whole
//! banks are compared, so the result is legal whatever the offsets); the
//! usable banks bound every move (never past capacity); pinned, input and
//! output tiles and tiles that are not live stay where they are and count
//! as occupants. The placement verifier and the dataflow checker see the
//! result like any allocator's.
//!
//! What it does not do: a tile rewritten in every iteration of one loop
//! is one tile here, whichever bank it takes. Giving it banks used in
//! turn (patterns that move by `bank × (iv mod N)`) is the SB rotation's
//! multi-buffering (`mem/sb_rotation/multi_buffer.rs`, `--rotation all`),
//! which prices each depth with the schedule model; a tile so buffered
//! moves here as one tile of `N` banks.
//!
//! Storage: [`Rotation::reserve`] from the location count; [`Rotation::run`]
//! does not allocate after it.

use alloc::vec::Vec;

use crate::analysis::{Interval, MemLiveness};
use crate::ir::{Capacity, MemFlags, MemLoc, Module, Space};

/// What one rotation did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RotationReport {
    /// PSUM tiles considered (placed, live, movable).
    pub tiles: u32,
    /// Tiles that changed bank.
    pub moved: u32,
    /// Banks used before (the highest bank used, plus one).
    pub banks_before: u32,
    /// Banks used after.
    pub banks_after: u32,
}

/// One PSUM tile: its live interval, partitions and banks.
#[derive(Copy, Clone, Debug)]
struct Tile {
    loc: MemLoc,
    live: Interval,
    p0: u32,
    p1: u32,
    /// First bank and bank count.
    bank: u32,
    span: u32,
    movable: bool,
}

/// The pass's storage.
#[derive(Clone, Debug, Default)]
pub struct Rotation {
    tiles: Vec<Tile>,
    active: Vec<u32>,
}

impl Rotation {
    #[cfg(test)]
    /// Empty storage.
    pub fn new() -> Self {
        Self::default()
    }

    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.tiles, self.active)
    }

    /// Sizes the storage for up to `cap.mems` locations.
    pub fn reserve(&mut self, cap: &Capacity) {
        crate::storage::grow(&mut self.tiles, cap.mems);
        crate::storage::grow(&mut self.active, cap.mems);
    }

    /// Rotates the PSUM tiles of `m`; `live` must describe `m`.
    pub fn run(&mut self, m: &mut Module, live: &MemLiveness) -> RotationReport {
        let t = &m.target;
        let bank_bytes = t.psum_bank_bytes.max(1) as u64;
        let usable = (t.psum_usable_banks as u32).min(t.psum_banks as u32);
        let mut rep = RotationReport::default();
        self.tiles.clear();
        for v in m.mems().space.keys() {
            if m.mems().space[v] != Space::Psum || !m.is_placed(v) {
                continue;
            }
            let Some(iv) = live.interval(v) else { continue };
            let off = m.mems().offset[v];
            let bank = (off / bank_bytes) as u32;
            let end = off % bank_bytes + m.mems().bytes[v] as u64;
            let span = end.div_ceil(bank_bytes).max(1) as u32;
            let p0 = m.mems().base_partition[v] as u32;
            let fixed = MemFlags::PINNED | MemFlags::INPUT | MemFlags::OUTPUT;
            let movable = !m.mems().flags[v].intersects(fixed) && bank + span <= usable;
            rep.banks_before = rep.banks_before.max(bank + span);
            rep.tiles += movable as u32;
            if self.tiles.len() == self.tiles.capacity() {
                // Not reserved for this many: the rest stay put.
                return rep_unchanged(rep);
            }
            self.tiles.push(Tile {
                loc: v,
                live: iv,
                p0,
                p1: p0 + m.mems().partitions[v] as u32,
                bank,
                span,
                movable,
            });
        }
        self.tiles
            .sort_unstable_by_key(|x| (x.live.start, x.live.end, x.loc.as_u32()));
        // Per bank: the last position a processed tile there was live at
        // (+1; 0 = never used).
        let mut last_end = [0u64; 256];
        self.active.clear();
        for k in 0..self.tiles.len() {
            let x = self.tiles[k];
            // Processed tiles that may still overlap x (sorted by start).
            self.active
                .retain(|&j| self.tiles[j as usize].live.end >= x.live.start);
            if x.movable {
                let mut best: Option<(u64, bool, u32)> = None;
                for b in 0..=usable.saturating_sub(x.span) {
                    if !self.free_for(k, b) {
                        continue;
                    }
                    let idle = (b..b + x.span)
                        .map(|q| last_end[q as usize])
                        .max()
                        .unwrap_or(0);
                    // Longest idle first; then the bank it has; then the lowest.
                    let key = (idle, b != x.bank, b);
                    if best.map_or(true, |bk| key < bk) {
                        best = Some(key);
                    }
                }
                if let Some((_, _, b)) = best {
                    if b != x.bank {
                        let v = x.loc;
                        let off = m.mems().offset[v] % bank_bytes + b as u64 * bank_bytes;
                        m.place(v, m.mems().base_partition[v], off);
                        self.tiles[k].bank = b;
                        rep.moved += 1;
                    }
                }
            }
            let x = self.tiles[k];
            for q in x.bank..x.bank + x.span {
                if let Some(e) = last_end.get_mut(q as usize) {
                    *e = (*e).max(x.live.end as u64 + 1);
                }
            }
            rep.banks_after = rep.banks_after.max(x.bank + x.span);
            if self.active.len() < self.active.capacity() {
                self.active.push(k as u32);
            }
        }
        rep
    }

    /// True when tile `k` may occupy banks `[b, b + span)`: no processed
    /// tile still live with it (at its new bank) and no later tile live
    /// with it (at its current bank) shares a partition and a bank.
    fn free_for(&self, k: usize, b: u32) -> bool {
        let x = self.tiles[k];
        let clash = |y: &Tile| {
            y.live.start <= x.live.end
                && x.live.start <= y.live.end
                && y.p0 < x.p1
                && x.p0 < y.p1
                && y.bank < b + x.span
                && b < y.bank + y.span
        };
        if self.active.iter().any(|&j| clash(&self.tiles[j as usize])) {
            return false;
        }
        !self.tiles[k + 1..]
            .iter()
            .take_while(|y| y.live.start <= x.live.end)
            .any(clash)
    }
}

/// A report for a module the storage was not reserved for: nothing moved.
fn rep_unchanged(mut rep: RotationReport) -> RotationReport {
    rep.moved = 0;
    rep.banks_after = rep.banks_before;
    rep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::schedule::{Schedule, ScheduleOptions};
    use crate::analysis::LinearOrder;
    use crate::ir::{Builder, InstFlags, Opcode, SubOp};
    use crate::target::Target;
    use crate::testing::{assert_same_dataflow, assert_sound, mem, tiles};
    use crate::verify::placement::Verifier;

    /// Four transposes into PSUM tiles all in bank 0, each drained by ACT
    /// into an SB tile of its own; the tiles' lifetimes do not overlap.
    fn transposes() -> Module {
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let x = mem(&mut bl, "x", Space::Sb, 128, 512, 4, MemFlags::empty());
        let mut ps = [MemLoc::INVALID; 4];
        let mut outs = [MemLoc::INVALID; 4];
        for k in 0..4 {
            let n = alloc::format!("ps{k}");
            ps[k] = bl
                .mem(&n, Space::Psum, 128, 512, 4, MemFlags::empty())
                .unwrap();
            let n = alloc::format!("o{k}");
            outs[k] = bl
                .mem(&n, Space::Sb, 128, 512, 4, MemFlags::OUTPUT)
                .unwrap();
        }
        bl.func("f").unwrap();
        let fx = bl.full(x);
        bl.op(Opcode::Memset, &[fx], &[]).unwrap();
        let none = InstFlags::empty();
        for k in 0..4 {
            bl.compute(Opcode::Transpose, SubOp::None, ps[k], &[x], none)
                .unwrap();
            bl.compute(Opcode::Activation, SubOp::Exp, outs[k], &[ps[k]], none)
                .unwrap();
        }
        m.place(x, 0, 0);
        for k in 0..4 {
            m.place(ps[k], 0, 0);
            m.place(outs[k], 0, 512 + 512 * k as u64);
        }
        m
    }

    fn rotate(m: &mut Module) -> RotationReport {
        let o = LinearOrder::of(m);
        let live = MemLiveness::of(m, &o);
        let mut r = Rotation::new();
        r.reserve(&m.capacity());
        r.run(m, &live)
    }

    #[test]
    fn successive_tiles_go_round_the_banks_and_stay_legal() {
        let before = transposes();
        let mut m = before.clone();
        let s0 = Schedule::new().run(&m, &ScheduleOptions::default());
        let rep = rotate(&mut m);
        assert_eq!((rep.tiles, rep.moved), (4, 3));
        assert_eq!((rep.banks_before, rep.banks_after), (1, 4));
        let banks: alloc::vec::Vec<u8> = (0..4)
            .map(|k| m.mems().bank[m.mem_by_name(&alloc::format!("ps{k}")).unwrap()])
            .collect();
        assert_eq!(banks, [0, 1, 2, 3]);
        assert_sound(&before, &m);
        // The transposes no longer wait for the previous tile's reader.
        let s1 = Schedule::new().run(&m, &ScheduleOptions::default());
        assert!(s0.loss() > 0);
        assert_eq!(s1.loss(), 0);
        assert!(s1.makespan < s0.makespan);
        assert_eq!(s1.makespan_unlimited, s0.makespan_unlimited);
    }

    #[test]
    fn never_past_the_usable_banks() {
        let before = transposes();
        let mut m = before.clone();
        m.target.set("psum-banks", 2).unwrap();
        let rep = rotate(&mut m);
        assert_eq!(rep.banks_after, 2);
        assert_same_dataflow(&before, &m);
        let banks: alloc::vec::Vec<u8> = (0..4)
            .map(|k| m.mems().bank[m.mem_by_name(&alloc::format!("ps{k}")).unwrap()])
            .collect();
        assert_eq!(banks, [0, 1, 0, 1]);
        assert!(Verifier::new().verify(&m).is_clean());
    }

    #[test]
    fn tiles_live_together_keep_their_own_banks() {
        // Two tiles read by one instruction: live together, already apart.
        let mut m = Module::new(Target::default());
        let mut bl = Builder::new(&mut m);
        let x = mem(&mut bl, "x", Space::Sb, 128, 512, 4, MemFlags::empty());
        let [a, b] = tiles(&mut bl, Space::Psum, ["a", "b"], 128, 512, 4);
        let o = mem(&mut bl, "o", Space::Sb, 128, 512, 4, MemFlags::OUTPUT);
        bl.func("f").unwrap();
        let fx = bl.full(x);
        bl.op(Opcode::Memset, &[fx], &[]).unwrap();
        let none = InstFlags::empty();
        bl.compute(Opcode::Transpose, SubOp::None, a, &[x], none)
            .unwrap();
        bl.compute(Opcode::Transpose, SubOp::None, b, &[x], none)
            .unwrap();
        bl.compute(Opcode::TensorTensor, SubOp::Add, o, &[a, b], none)
            .unwrap();
        m.place(x, 0, 0);
        m.place(o, 0, 512);
        m.place(a, 0, 2048);
        m.place(b, 0, 0);
        let before = m.clone();
        let rep = rotate(&mut m);
        assert_sound(&before, &m);
        assert_ne!(m.mems().bank[a], m.mems().bank[b]);
        assert_eq!(rep.banks_after, 2);
    }
}
