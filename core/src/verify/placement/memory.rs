//! The memory half of the verifier: the rules one placed location obeys on
//! its own, the pattern rule on every operand, and the sweep that finds
//! interfering locations sharing a cell.
//!
//! # How overlaps are found in O(n log n + findings)
//!
//! Locations are swept in order of their live-interval start; before the
//! location `c` starting at position `p` enters the active set, every
//! location whose interval ended before `p` leaves it. Everything active
//! then is live at `p` together with `c`, so `c` conflicts exactly with the
//! active rectangles that share a cell with it (unless the pair is an
//! in-place handoff). Each pair is examined once, when the later one enters.
//!
//! The active set answers "which active rectangles overlap this one" with a
//! treap per *slab*. The partitions of a space are cut into slabs whose
//! width is the finest start-partition granularity of the target (32 on the
//! presets, so 4 slabs). An active location has one node (a *leaf*) in the
//! treap of every slab it touches (at most 4), keyed by (first byte,
//! location) and holding the largest end byte of its subtree, so entering or
//! leaving is O(log a) for `a` active leaves of the slab. A query for bytes
//! `[b0, b1)` descends only into subtrees whose largest end exceeds `b0` and
//! whose keys start before `b1`: O(log a) plus O(log a) per reported leaf.
//! Reported leaves are checked for partition overlap and deduplicated (a pair
//! is reported only in the slab holding the first partition they share).
//! Locations enter in order of (start, id) (a sort of packed keys) and leave
//! through a heap ordered by their end.
//!
//! Only the active set is ever stored in the treaps: their nodes come from a
//! pool with a free list, so the memory written is proportional to the
//! largest active set (the locations live together, times the slabs each
//! touches), not to the module, and the treaps stay in cache.
//!
//! Why the candidates are few: every rectangle that obeys the start rule and
//! touches slab `s` covers the slab's first partition (it either starts there,
//! starts being a multiple of the slab width, or starts earlier and runs
//! through it). So in a legal placement the active leaves of one slab have
//! pairwise disjoint byte ranges apart from in-place handoffs, and a query
//! reports only real conflicts, handoffs, and rectangles that already broke
//! the start rule (each of which is itself a finding). Hence the sweep costs
//! O(n log n) for sorting and updates plus O(log n) per candidate, with
//! candidates ≤ slabs per rectangle × (findings + in-place handoffs +
//! start-rule breakers) — a pair sharing several slabs is met once per slab.
//! [`Report::candidates`] counts them so tests can check the bound.

use core::cmp::Reverse;

use super::finding::Axis;
use super::{Finding, Verifier};
use crate::ir::{MemFlags, MemLoc, Module, Space, NO_PARTITION};
use crate::verify::treap::{self, TreapPool, NIL};

/// A placed rectangle in cell coordinates: partitions `[p0, p1)`, bytes
/// `[b0, b1)`. DRAM is one partition of flat bytes.
#[derive(Copy, Clone, Debug, Default)]
struct Rect {
    p0: u32,
    p1: u32,
    b0: u64,
    b1: u64,
}

impl Rect {
    /// The cells of placed location `mem` (saturating: a rectangle beyond
    /// every limit is itself a finding, and still swept).
    fn of(m: &Module, mem: MemLoc) -> Rect {
        let parts = m.mems().partitions[mem];
        let bytes = m.mems().bytes[mem] as u64;
        let offset = m.mems().offset[mem];
        match m.mems().space[mem] {
            Space::Dram => Rect {
                p0: 0,
                p1: 1,
                b0: offset,
                b1: offset.saturating_add(parts as u64 * bytes),
            },
            Space::Sb | Space::Psum => {
                let base = m.mems().base_partition[mem] as u32;
                Rect {
                    p0: base,
                    p1: base + parts as u32,
                    b0: offset,
                    b1: offset.saturating_add(bytes),
                }
            }
        }
    }
}

/// The slab geometry of a target: slab width and, per space (indexed by
/// [`Space::slot`]), the number of slabs and the global id of the first.
#[derive(Copy, Clone, Debug, Default)]
pub(super) struct Slabs {
    width: u64,
    count: [u32; 3],
    first: [u32; 3],
}

impl Slabs {
    pub(super) fn of(m: &Module) -> Slabs {
        let count = slabs_per_space(m);
        Slabs {
            width: slab_width(m) as u64,
            count,
            first: [0, count[0], count[0] + count[1]],
        }
    }

    pub(super) fn total(&self) -> usize {
        self.count.iter().map(|&s| s as usize).sum()
    }

    /// The global slab holding partition `p` of `space` (clamped to the
    /// space's last slab, so that out-of-range rectangles still land
    /// somewhere and the map stays monotone).
    fn of_partition(&self, space: Space, p: u32) -> u32 {
        let k = space.slot();
        let within = (p as u64 / self.width).min(self.count[k].max(1) as u64 - 1) as u32;
        self.first[k] + within
    }

    /// The global slabs `[s0, s1]` rectangle `r` of `space` touches.
    fn range(&self, space: Space, r: Rect) -> (u32, u32) {
        (
            self.of_partition(space, r.p0),
            self.of_partition(space, r.p1.saturating_sub(1).max(r.p0)),
        )
    }
}

impl TreapPool for [Node] {
    fn left(&self, n: u32) -> u32 {
        self[n as usize].left
    }
    fn right(&self, n: u32) -> u32 {
        self[n as usize].right
    }
    fn set_left(&mut self, n: u32, child: u32) {
        self[n as usize].left = child;
    }
    fn set_right(&mut self, n: u32, child: u32) {
        self[n as usize].right = child;
    }
    fn prio(&self, n: u32) -> u32 {
        self[n as usize].prio
    }
}

/// One active leaf: the bytes `[start, end)` of swept location `mem` in one
/// slab, a node of that slab's treap (keyed by `(start, mem)`, heap-ordered
/// by `prio`, `max_end` the largest `end` in its subtree).
#[derive(Copy, Clone, Debug, Default)]
pub(super) struct Node {
    start: u64,
    end: u64,
    max_end: u64,
    mem: u32,
    prio: u32,
    left: u32,
    right: u32,
}

impl Verifier {
    /// The pattern rule ([`super::patterns`]) on every pattern of every
    /// linked instruction: the IR checks patterns where they are made, but
    /// a pass that rewrites columns in place would bypass it.
    pub(super) fn check_patterns(&mut self, m: &Module) {
        for pos in 0..self.order.len() as u32 {
            let i = self.order.inst_at(pos);
            for (k, a) in m.all_aps(i).enumerate() {
                let l = m.aps().loc[a];
                if !self.scope.space(m.mems().space[l]) {
                    continue;
                }
                if let Some(reach) = crate::verify::patterns::outside(m, i, a) {
                    self.push(Finding::PatternOutside {
                        inst: i,
                        pos,
                        operand: k as u8,
                        mem: l,
                        reach,
                    });
                }
            }
        }
    }

    /// Per-location rules; records each swept location (placed, live, in
    /// scope) with its interval start.
    pub(super) fn check_locations(&mut self, m: &Module) {
        self.swept.clear();
        for mem in m.mems().space.keys() {
            let space = m.mems().space[mem];
            if !self.scope.space(space) {
                continue;
            }
            let live = self.mem_live.interval(mem);
            if !m.is_placed(mem) {
                let external = space == Space::Dram
                    && m.mems().flags[mem].intersects(MemFlags::INPUT | MemFlags::OUTPUT);
                if let (Some(iv), false) = (live, external) {
                    let inst = self.order.inst_at(iv.start);
                    self.push(Finding::Unplaced {
                        mem,
                        inst,
                        pos: iv.start,
                    });
                }
                continue;
            }
            location_rules(m, mem, &mut |f| self.push(f));
            if let Some(iv) = live {
                self.swept
                    .push(((iv.start as u64) << 32) | mem.as_u32() as u64);
            }
        }
    }

    /// The sweep over placed live locations (see the module doc).
    pub(super) fn sweep_locations(&mut self, m: &Module) {
        let slabs = Slabs::of(m);
        self.roots.clear();
        self.roots.resize(slabs.total(), NIL);
        self.nodes.clear();
        self.free = NIL;
        self.ending.clear();
        self.rng = seed(self.nodes.as_ptr() as usize);
        self.swept.sort_unstable();
        for si in 0..self.swept.len() {
            let key = self.swept[si];
            let (p, c) = ((key >> 32) as u32, key as u32);
            let cm = MemLoc::from_u32(c);
            // Everything that ended before `p` leaves the active set.
            while let Some(&Reverse(top)) = self.ending.peek() {
                if (top >> 32) as u32 >= p {
                    break;
                }
                self.ending.pop();
                self.leave(m, &slabs, top as u32);
            }
            let Some(civ) = self.mem_live.interval(cm) else {
                continue;
            };
            let space = m.mems().space[cm];
            let rc = Rect::of(m, cm);
            let (s0, s1) = slabs.range(space, rc);
            for s in s0..=s1 {
                self.query(m, &slabs, self.roots[s as usize], c, rc, s, p, space);
            }
            for s in s0..=s1 {
                self.enter(c, rc, s);
            }
            self.ending
                .push(Reverse(((civ.end as u64) << 32) | c as u64));
        }
    }

    /// Enters the leaf of location `c` (cells `r`) in slab `s`.
    fn enter(&mut self, c: u32, r: Rect, s: u32) {
        // Treap priorities from a generator seeded per sweep (see `seed`),
        // independent of the keys and of the location ids: the expected
        // depth is O(log n) whatever the placement.
        crate::rng::xorshift64(&mut self.rng);
        let prio = (self.rng >> 32) as u32;
        let node = Node {
            start: r.b0,
            end: r.b1,
            max_end: r.b1,
            mem: c,
            prio,
            left: NIL,
            right: NIL,
        };
        let n = if self.free != NIL {
            let n = self.free;
            self.free = self.nodes[n as usize].left;
            self.nodes[n as usize] = node;
            n
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        let root = self.roots[s as usize];
        self.roots[s as usize] = self.insert(root, n);
    }

    /// Removes every leaf of location `x` from the active set.
    fn leave(&mut self, m: &Module, slabs: &Slabs, x: u32) {
        let xm = MemLoc::from_u32(x);
        let r = Rect::of(m, xm);
        let (s0, s1) = slabs.range(m.mems().space[xm], r);
        for s in s0..=s1 {
            let root = self.roots[s as usize];
            let (root, gone) = self.remove(root, (r.b0, x));
            if gone != NIL {
                self.nodes[gone as usize].left = self.free;
                self.free = gone;
            }
            self.roots[s as usize] = root;
        }
    }

    // The treap operations are loops, not recursion (see `verify::treap`);
    // nodes whose subtree changed are pulled bottom-up from `path`.

    /// Inserts node `n` into treap `t`; returns the new root.
    fn insert(&mut self, t: u32, n: u32) -> u32 {
        let (key, prio, end) = (
            self.key(n),
            self.nodes[n as usize].prio,
            self.nodes[n as usize].end,
        );
        let (mut parent, mut left_side, mut at) = (NIL, false, t);
        // Down to the first node `n` outranks; every node passed gets `n`
        // in its subtree.
        while at != NIL && prio <= self.nodes[at as usize].prio {
            let x = &mut self.nodes[at as usize];
            x.max_end = x.max_end.max(end);
            parent = at;
            left_side = key < self.key(at);
            at = if left_side {
                self.nodes[at as usize].left
            } else {
                self.nodes[at as usize].right
            };
        }
        let (a, b) = self.split(at, key);
        self.nodes[n as usize].left = a;
        self.nodes[n as usize].right = b;
        self.pull(n);
        if parent == NIL {
            return n;
        }
        if left_side {
            self.nodes[parent as usize].left = n;
        } else {
            self.nodes[parent as usize].right = n;
        }
        t
    }

    /// Removes the node keyed `k` from treap `t`; returns the new root and
    /// the removed node (`NIL` when absent).
    fn remove(&mut self, t: u32, k: (u64, u32)) -> (u32, u32) {
        let mut rpath = core::mem::take(&mut self.rpath);
        rpath.clear();
        let (mut parent, mut left_side, mut at) = (NIL, false, t);
        while at != NIL && self.key(at) != k {
            rpath.push(at);
            parent = at;
            left_side = k < self.key(at);
            at = if left_side {
                self.nodes[at as usize].left
            } else {
                self.nodes[at as usize].right
            };
        }
        let mut root = t;
        if at != NIL {
            let (l, r) = (self.nodes[at as usize].left, self.nodes[at as usize].right);
            let sub = self.merge(l, r);
            if parent == NIL {
                root = sub;
            } else if left_side {
                self.nodes[parent as usize].left = sub;
            } else {
                self.nodes[parent as usize].right = sub;
            }
            for &x in rpath.iter().rev() {
                self.pull(x);
            }
        }
        self.rpath = rpath;
        (root, at)
    }

    fn key(&self, n: u32) -> (u64, u32) {
        let n = &self.nodes[n as usize];
        (n.start, n.mem)
    }

    /// Recomputes `max_end` of node `n` from its children.
    fn pull(&mut self, n: u32) {
        let (l, r) = (self.nodes[n as usize].left, self.nodes[n as usize].right);
        let mut e = self.nodes[n as usize].end;
        if l != NIL {
            e = e.max(self.nodes[l as usize].max_end);
        }
        if r != NIL {
            e = e.max(self.nodes[r as usize].max_end);
        }
        self.nodes[n as usize].max_end = e;
    }

    /// Splits treap `t` into the keys below `k` and the rest.
    fn split(&mut self, t: u32, k: (u64, u32)) -> (u32, u32) {
        self.path.clear();
        let below = |p: &[Node], n: u32| (p[n as usize].start, p[n as usize].mem) < k;
        let halves = treap::split(&mut self.nodes[..], t, below, Some(&mut self.path));
        self.pull_path();
        halves
    }

    /// Joins treaps `a` and `b`, every key of `a` below every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        self.path.clear();
        let root = treap::merge(&mut self.nodes[..], a, b, Some(&mut self.path));
        self.pull_path();
        root
    }

    /// Pulls the nodes of `path` deepest first (each one's changed child
    /// was visited after it).
    fn pull_path(&mut self) {
        let path = core::mem::take(&mut self.path);
        for &x in path.iter().rev() {
            self.pull(x);
        }
        self.path = path;
    }

    /// Reports, in order of first byte, every active leaf of subtree `t`
    /// (in slab `slab`) sharing a byte with `rc`, the cells of `c`: an
    /// in-order walk (an explicit stack, see the treap operations) that
    /// skips subtrees ending at or before `rc` and stops at the first leaf
    /// starting at or after its end.
    #[allow(clippy::too_many_arguments)]
    fn query(
        &mut self,
        m: &Module,
        slabs: &Slabs,
        t: u32,
        c: u32,
        rc: Rect,
        slab: u32,
        pos: u32,
        space: Space,
    ) {
        let mut stack = core::mem::take(&mut self.path);
        stack.clear();
        let mut at = t;
        loop {
            while at != NIL && self.nodes[at as usize].max_end > rc.b0 {
                stack.push(at);
                at = self.nodes[at as usize].left;
            }
            let Some(x) = stack.pop() else {
                break;
            };
            let n = self.nodes[x as usize];
            if n.start >= rc.b1 {
                break;
            }
            if n.end > rc.b0 {
                self.candidate(m, slabs, n.mem, c, rc, slab, pos, space);
            }
            at = n.right;
        }
        self.path = stack;
    }

    #[allow(clippy::too_many_arguments)]
    fn candidate(
        &mut self,
        m: &Module,
        slabs: &Slabs,
        other: u32,
        c: u32,
        rc: Rect,
        slab: u32,
        pos: u32,
        space: Space,
    ) {
        self.candidates += 1;
        let (a, b) = (MemLoc::from_u32(other), MemLoc::from_u32(c));
        let ro = Rect::of(m, a);
        let q0 = ro.p0.max(rc.p0);
        let q1 = ro.p1.min(rc.p1);
        if q0 >= q1 || slabs.of_partition(space, q0) != slab {
            return;
        }
        if !self.mem_live.interferes(m, &self.order, a, b) {
            return;
        }
        self.push(Finding::Overlap {
            a,
            b,
            inst: self.order.inst_at(pos),
            pos,
            partition: if space.is_on_chip() { q0 } else { 0 },
            byte: ro.b0.max(rc.b0),
        });
    }
}

// Treap priorities: the verifier's only random numbers, generated here and
// nowhere else in this folder.

/// A non-zero xorshift64 seed from `salt` (the address of the node pool:
/// with address-space randomization it differs from run to run, so an input
/// cannot be crafted against the priority sequence; without it, e.g. on
/// firmware, the sequence is fixed). The priorities only shape the treaps:
/// the findings, their order included, do not depend on them.
fn seed(salt: usize) -> u64 {
    crate::rng::mix64(salt as u64) | 1
}

/// Slab width: the finest start-partition granularity of the target.
fn slab_width(m: &Module) -> u16 {
    m.target
        .start_rules
        .iter()
        .map(|r| r.granularity)
        .min()
        .unwrap_or(1)
        .max(1)
}

/// Slabs of each space, indexed by [`Space::slot`] (PSUM, SB, DRAM).
fn slabs_per_space(m: &Module) -> [u32; 3] {
    let g = slab_width(m) as u32;
    let t = &m.target;
    [
        (t.psum_partitions as u32).div_ceil(g).max(1),
        (t.sb_partitions as u32).div_ceil(g).max(1),
        1,
    ]
}

pub(super) fn max_slabs_per_rect(m: &Module) -> usize {
    let s = slabs_per_space(m);
    s[0].max(s[1]) as usize
}

/// The rules one placed location obeys on its own, whatever else is live:
/// inside its space, a legal start partition, aligned, and in PSUM on bank
/// boundaries within the banks one tensor may span. Each broken rule is
/// handed to `push`, in the order [`Verifier::verify`] reports them.
fn location_rules(m: &Module, mem: MemLoc, push: &mut dyn FnMut(Finding)) {
    let t = &m.target;
    let space = m.mems().space[mem];
    let parts = m.mems().partitions[mem];
    let base = m.mems().base_partition[mem];
    let offset = m.mems().offset[mem];
    let align = m.mems().align[mem].max(1);
    let rect = Rect::of(m, mem);
    match space {
        Space::Dram => {
            if rect.b1 > t.dram_bytes {
                push(Finding::OutOfBounds {
                    mem,
                    axis: Axis::Bytes,
                    end: rect.b1,
                    limit: t.dram_bytes,
                });
            }
        }
        Space::Sb | Space::Psum => {
            let (space_parts, usable) = if space == Space::Sb {
                (t.sb_partitions, t.sb_usable_bytes as u64)
            } else {
                (t.psum_partitions, t.psum_usable_bytes() as u64)
            };
            if base == NO_PARTITION || rect.p1 > space_parts as u32 {
                push(Finding::OutOfBounds {
                    mem,
                    axis: Axis::Partitions,
                    end: rect.p1 as u64,
                    limit: space_parts as u64,
                });
            } else if !t.is_legal_start(base, parts) {
                push(Finding::BadStartPartition {
                    mem,
                    base,
                    partitions: parts,
                    granularity: t.start_granularity(parts).unwrap_or(0),
                });
            }
            if rect.b1 > usable {
                push(Finding::OutOfBounds {
                    mem,
                    axis: Axis::Bytes,
                    end: rect.b1,
                    limit: usable,
                });
            }
            if space == Space::Psum {
                psum_bank_rules(m, mem, offset, rect.b1, push);
            }
        }
    }
    if offset % align as u64 != 0 {
        push(Finding::Misaligned { mem, offset, align });
    }
}

fn psum_bank_rules(m: &Module, mem: MemLoc, offset: u64, end: u64, push: &mut dyn FnMut(Finding)) {
    let t = &m.target;
    let bank_bytes = t.psum_bank_bytes.max(1);
    let bb = bank_bytes as u64;
    if offset % bb != 0 {
        push(Finding::PsumOffBank {
            mem,
            offset,
            bank_bytes,
        });
    }
    let first_bank = offset / bb;
    let last_bank = end.saturating_sub(1).max(offset) / bb;
    let spans = |end: u64| end.saturating_sub(1).max(offset) / bb - first_bank + 1;
    let max = t.psum_max_banks_per_tensor as u64;
    // A tile buffered in slots is one tensor per slot (a whole number of
    // banks apart, so each slot starts on a bank boundary).
    let slot_ok = || {
        m.slots(mem)
            .is_some_and(|s| s.stride % bb == 0 && spans(offset + s.width) <= max)
    };
    if spans(end) > max && !slot_ok() {
        push(Finding::PsumBankSpan {
            mem,
            first_bank,
            last_bank,
            max_banks: t.psum_max_banks_per_tensor,
        });
    }
    let bank = m.mems().bank[mem];
    if bank as u64 != first_bank {
        push(Finding::PsumBankMismatch {
            mem,
            bank,
            expected: first_bank,
        });
    }
}

/// The first placement of `m` that breaks a rule of a location on its own
/// (out of bounds, misaligned, an illegal start partition, off a PSUM bank),
/// with the number of such findings, in the order and with the findings
/// [`Verifier::verify`] (and so `tusk check`) reports. Needs no analysis
/// and no storage: a pipeline asks it before any pass, because the
/// allocators keep every placement the input fixes, so such a placement
/// can never become legal and an allocator failing around it would blame
/// another tensor.
pub fn first_illegal_placement(m: &Module) -> Option<(Finding, u64)> {
    let mut first = None;
    let mut total = 0u64;
    for mem in m.mems().space.keys() {
        if !m.is_placed(mem) {
            continue;
        }
        location_rules(m, mem, &mut |f| {
            total += 1;
            first.get_or_insert(f);
        });
    }
    first.map(|f| (f, total))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{chain, sb, texts};
    use super::*;
    use crate::analysis::{LinearOrder, MemLiveness};
    use crate::ir::{Builder, InstFlags, Opcode, SubOp};
    use crate::target::Target;
    use alloc::format;

    #[test]
    fn legal_placement_with_disjoint_lifetimes_sharing_space_passes() {
        let (mut m, [_, _, t, u, v], _) = chain();
        // t and v never live together (t dies at 1, v is born at 2): same cells.
        m.place(t, 0, 0);
        m.place(u, 0, 4096);
        m.place(v, 0, 0);
        let mut ver = Verifier::new();
        let r = ver.verify(&m);
        assert!(r.is_clean(), "{}", texts(&m, &r));
        assert_eq!(r.candidates, 0);
    }

    #[test]
    fn overlap_of_interfering_tensors_names_both_and_an_instruction() {
        let (mut m, [_, _, t, u, v], [_, i1, _, _]) = chain();
        m.place(t, 0, 0);
        m.place(u, 0, 2048); // overlaps t's bytes 2048..4096 while both live at i1
        m.place(v, 0, 8192);
        let mut ver = Verifier::new();
        let r = ver.verify(&m);
        assert_eq!(r.findings.len(), 1, "{}", texts(&m, &r));
        assert_eq!(
            r.findings[0],
            Finding::Overlap {
                a: t,
                b: u,
                inst: i1,
                pos: 1,
                partition: 0,
                byte: 2048
            }
        );
        let s = texts(&m, &r);
        assert!(s.contains("%t@SB<0,0>(128 x 4096) and %u@SB<0,2048>(128 x 4096)"));
        assert!(
            s.contains("`%u = activation exp %t` (block block0, 2nd)"),
            "{s}"
        );
        assert_eq!(r.findings[0].kind(), "overlap");
    }

    #[test]
    fn in_place_handoff_may_share_cells() {
        let mut m = Module::new(Target::default());
        let mut b = Builder::new(&mut m);
        let a = sb(&mut b, "a", 128, 64);
        let c = sb(&mut b, "c", 128, 64);
        let d = sb(&mut b, "d", 128, 64);
        b.func("f").unwrap();
        b.op(Opcode::Memset, &[b.full(a)], &[]).unwrap();
        b.compute(Opcode::Activation, SubOp::Exp, c, &[a], InstFlags::IN_PLACE)
            .unwrap();
        let i2 = b
            .compute(Opcode::Activation, SubOp::Exp, d, &[c], InstFlags::empty())
            .unwrap();
        m.place(a, 0, 0);
        m.place(c, 0, 0);
        m.place(d, 0, 64);
        let mut ver = Verifier::new();
        let r = ver.verify(&m);
        assert!(r.is_clean(), "{}", texts(&m, &r));
        // The handoff pair is the only candidate, met once in each of the
        // 4 slabs the 128-partition tensors cover.
        assert_eq!(r.candidates, 4);
        // Without the in-place flag on the consumer, c and d may not share.
        m.place(d, 0, 0);
        let r = ver.verify(&m);
        assert_eq!(r.findings.len(), 1);
        assert!(
            matches!(r.findings[0], Finding::Overlap { a: x, b: y, inst, .. }
            if x == c && y == d && inst == i2)
        );
    }

    #[test]
    fn partition_disjoint_tensors_share_bytes_and_partial_overlap_is_found() {
        let mut m = Module::new(Target::default());
        let mut b = Builder::new(&mut m);
        let q = [
            sb(&mut b, "q0", 32, 512),
            sb(&mut b, "q1", 32, 512),
            sb(&mut b, "q2", 32, 512),
            sb(&mut b, "q3", 32, 512),
        ];
        let h = sb(&mut b, "h", 64, 256);
        let all = sb(&mut b, "all", 128, 16);
        b.func("f").unwrap();
        for &x in q.iter().chain([h, all].iter()) {
            b.op(Opcode::Memset, &[b.full(x)], &[]).unwrap();
        }
        let ins: alloc::vec::Vec<_> = q
            .iter()
            .chain([h, all].iter())
            .map(|&x| b.full(x))
            .collect();
        let out = [b.full(all)];
        let mut spec = crate::ir::InstSpec::new(Opcode::TensorTensor);
        spec.inputs = &ins[..5];
        spec.outputs = &out;
        let last = b.inst(&spec).unwrap();
        for (k, &x) in q.iter().enumerate() {
            m.place(x, 32 * k as u16, 0);
        }
        m.place(h, 64, 1024);
        m.place(all, 0, 4096);
        let mut ver = Verifier::new();
        let r = ver.verify(&m);
        assert!(r.is_clean(), "{}", texts(&m, &r));
        // h over partitions 64..128 at bytes 256..512 hits q2 and q3.
        m.place(h, 64, 256);
        let r = ver.verify(&m);
        let s = texts(&m, &r);
        assert_eq!(r.findings.len(), 2, "{s}");
        assert!(
            s.contains("%q2@SB<64,0>(32 x 512) and %h@SB<64,256>(64 x 256)"),
            "{s}"
        );
        assert!(s.contains("cell SB<64,256>"), "{s}");
        assert!(s.contains("cell SB<96,256>"), "{s}");
        let _ = last;
    }

    #[test]
    fn out_of_bounds_misaligned_and_bad_start() {
        let mut m = Module::new(Target::default());
        let usable = m.target.sb_usable_bytes;
        let mut b = Builder::new(&mut m);
        let big = sb(&mut b, "big", 128, 4096);
        let al = b
            .mem("al", Space::Sb, 64, 256, 4, MemFlags::empty())
            .unwrap();
        let st = sb(&mut b, "st", 64, 128);
        let tall = sb(&mut b, "tall", 32, 128);
        b.func("f").unwrap();
        for x in [big, al, st, tall] {
            b.op(Opcode::Memset, &[b.full(x)], &[]).unwrap();
        }
        m.place(big, 0, usable as u64 - 4095);
        m.place(al, 0, 8194);
        m.place(st, 32, 16384);
        m.place(tall, 112, 32768);
        let mut ver = Verifier::new();
        let r = ver.verify(&m);
        let s = texts(&m, &r);
        assert!(r.findings.contains(&Finding::OutOfBounds {
            mem: big,
            axis: Axis::Bytes,
            end: usable as u64 + 1,
            limit: usable as u64
        }));
        assert!(r.findings.contains(&Finding::Misaligned {
            mem: al,
            offset: 8194,
            align: 4
        }));
        assert!(r.findings.contains(&Finding::BadStartPartition {
            mem: st,
            base: 32,
            partitions: 64,
            granularity: 64
        }));
        assert!(r.findings.contains(&Finding::OutOfBounds {
            mem: tall,
            axis: Axis::Partitions,
            end: 144,
            limit: 128
        }));
        assert!(
            s.contains("Allocated memory out of bound %big@SB<0,208889>(128 x 4096)"),
            "{s}"
        );
        assert!(
            s.contains("%st@SB<32,16384>(64 x 128) starts at partition 32"),
            "{s}"
        );
        assert_eq!(r.findings.len(), 4, "{s}");
        // The pipeline's up-front check finds the same first finding (and
        // count) without analyses: these rules do not depend on liveness.
        assert_eq!(first_illegal_placement(&m), Some((r.findings[0], 4)));
        m.unplace(big);
        m.unplace(al);
        m.unplace(st);
        m.unplace(tall);
        assert_eq!(first_illegal_placement(&m), None);
    }

    #[test]
    fn psum_bank_rules() {
        let mut m = Module::new(Target::default());
        let bank = m.target.psum_bank_bytes as u64;
        let mut b = Builder::new(&mut m);
        let ok = b
            .mem("ok", Space::Psum, 128, 2048, 4, MemFlags::empty())
            .unwrap();
        let off = b
            .mem("off", Space::Psum, 128, 512, 4, MemFlags::empty())
            .unwrap();
        let wide = b
            .mem("wide", Space::Psum, 128, 4096, 4, MemFlags::empty())
            .unwrap();
        let beyond = b
            .mem("beyond", Space::Psum, 128, 2048, 4, MemFlags::empty())
            .unwrap();
        b.func("f").unwrap();
        for x in [ok, off, wide, beyond] {
            b.op(Opcode::Memset, &[b.full(x)], &[]).unwrap();
        }
        m.target.psum_usable_banks = 7;
        m.place(ok, 0, 0);
        m.place(off, 0, bank + 512);
        m.place(wide, 0, 2 * bank);
        m.place(beyond, 0, 7 * bank);
        let mut ver = Verifier::new();
        let r = ver.verify(&m);
        let s = texts(&m, &r);
        assert!(r.findings.contains(&Finding::PsumOffBank {
            mem: off,
            offset: bank + 512,
            bank_bytes: bank as u32
        }));
        assert!(r.findings.contains(&Finding::PsumBankSpan {
            mem: wide,
            first_bank: 2,
            last_bank: 3,
            max_banks: 1
        }));
        assert!(r.findings.contains(&Finding::OutOfBounds {
            mem: beyond,
            axis: Axis::Bytes,
            end: 8 * bank,
            limit: 7 * bank
        }));
        assert_eq!(r.findings.len(), 3, "{s}");
        assert!(s.contains("%off@PSUM<0,bank 1+512>(128 x 512)"), "{s}");
        // trn3 lets one tensor span consecutive banks.
        m.target.psum_max_banks_per_tensor = 8;
        m.place(off, 0, bank);
        m.place(beyond, 0, 4 * bank);
        let r = ver.verify(&m);
        assert!(r.is_clean(), "{}", texts(&m, &r));
        // A bank column that disagrees with the offset is found.
        m.columns_mut().mems.bank[ok] = 5;
        let r = ver.verify(&m);
        assert_eq!(
            r.findings,
            &[Finding::PsumBankMismatch {
                mem: ok,
                bank: 5,
                expected: 0
            }]
        );
    }

    #[test]
    fn dram_overlap_and_unplaced() {
        let (mut m, [x, y, t, u, v], [i0, _, _, _]) = chain();
        let s1 = m.add_mem("s1", Space::Dram, 128, 64).unwrap();
        let s2 = m.add_mem("s2", Space::Dram, 128, 64).unwrap();
        let mut b = Builder::new(&mut m);
        b.func("g").unwrap();
        let w = b.op(Opcode::Memset, &[b.full(s1)], &[]).unwrap();
        b.save(s2, t, 0).unwrap();
        b.compute(
            Opcode::TensorTensor,
            SubOp::Add,
            u,
            &[s1, s2],
            InstFlags::empty(),
        )
        .unwrap();
        m.place(u, 0, 4096);
        m.place(v, 0, 8192);
        m.place(s1, 0, 0);
        m.place(s2, 0, 128 * 64 - 64);
        let mut ver = Verifier::new();
        let r = ver.verify(&m);
        let s = texts(&m, &r);
        // t is live but unplaced; x and y are external DRAM I/O and may stay unplaced.
        assert!(r.findings.contains(&Finding::Unplaced {
            mem: t,
            inst: i0,
            pos: 0
        }));
        assert!(
            s.contains("%t@SB<?>(128 x 4096) is live at `%t = load %x` (block block0, 1st)"),
            "{s}"
        );
        assert!(!r
            .findings
            .iter()
            .any(|f| f.mems().contains(&x) || f.mems().contains(&y)));
        let ov = r
            .findings
            .iter()
            .find(|f| f.kind() == "overlap")
            .copied()
            .unwrap();
        assert_eq!(ov.mems().as_slice(), &[s1, s2]);
        assert!(s.contains("byte DRAM<8128>"), "{s}");
        assert!(ov.inst().is_some() && ov.inst() != Some(w));
        assert_eq!(r.findings.len(), 2, "{s}");
    }

    /// The sweep against an all-pairs check on random modules and placements.
    #[test]
    fn sweep_matches_all_pairs_on_random_placements() {
        let (pairs, clean) = sweep_against_all_pairs(60, 20, 12, 0x2545_F491_4F6C_DD1D);
        // Neither vacuous nor saturated.
        assert!(
            pairs > 20 && clean > 0,
            "{pairs} pairs, {clean} clean cases"
        );
    }

    /// The same with hundreds of locations live together: deep treaps,
    /// many removals from their middle.
    #[test]
    fn sweep_matches_all_pairs_with_large_active_sets() {
        let (pairs, _) = sweep_against_all_pairs(3, 400, 400, 0x9E37_79B9_7F4A_7C15);
        assert!(pairs > 100, "{pairs} pairs");
    }

    /// `cases` random modules of 4 to 4 + `extra` locations, placed at one
    /// of `offsets` 64-byte slots (fewer slots: more overlaps); returns the
    /// overlapping pairs found and the clean cases.
    fn sweep_against_all_pairs(
        cases: usize,
        extra: u64,
        offsets: u64,
        seed: u64,
    ) -> (usize, usize) {
        let mut seed = seed;
        let mut rnd = |n: u64| crate::rng::xorshift64(&mut seed) % n;
        let mut ver = Verifier::new();
        let (mut pairs, mut clean) = (0usize, 0usize);
        for _case in 0..cases {
            let mut m = Module::new(Target::default());
            let mut b = Builder::new(&mut m);
            let n = 4 + rnd(extra) as usize;
            let mut xs = alloc::vec::Vec::new();
            for k in 0..n {
                let (space, parts) = match rnd(3) {
                    0 => (Space::Dram, 1 + rnd(4) as u16),
                    1 => (Space::Psum, [16u16, 32, 64, 128][rnd(4) as usize]),
                    _ => (Space::Sb, [1u16, 32, 48, 64, 128][rnd(5) as usize]),
                };
                let bytes = 64 * (1 + rnd(8) as u32);
                xs.push(
                    b.mem(&format!("m{k}"), space, parts, bytes, 1, MemFlags::empty())
                        .unwrap(),
                );
            }
            b.func("f").unwrap();
            for _ in 0..2 * n {
                let d = xs[rnd(n as u64) as usize];
                let s = xs[rnd(n as u64) as usize];
                let flags = if rnd(4) == 0 {
                    InstFlags::IN_PLACE
                } else {
                    InstFlags::empty()
                };
                if s == d {
                    b.op(Opcode::Memset, &[b.full(d)], &[]).unwrap();
                } else {
                    b.compute(Opcode::TensorCopy, SubOp::None, d, &[s], flags)
                        .unwrap();
                }
            }
            for &x in &xs {
                let parts = m.mems().partitions[x];
                let base = match parts {
                    1..=32 => 32 * rnd(4) as u16,
                    33..=64 => 64 * rnd(2) as u16,
                    _ => 0,
                };
                let off = 64 * rnd(offsets);
                let off = if m.mems().space[x] == Space::Psum {
                    off * 32 % 16384
                } else {
                    off
                };
                m.place(x, base, off);
            }
            let got: alloc::vec::Vec<(MemLoc, MemLoc)> = ver
                .verify(&m)
                .findings
                .iter()
                .filter_map(|f| match *f {
                    Finding::Overlap { a, b, .. } => Some((a.min(b), a.max(b))),
                    _ => None,
                })
                .collect();
            let order = LinearOrder::of(&m);
            let live = MemLiveness::of(&m, &order);
            let mut want = alloc::vec::Vec::new();
            for i in 0..n {
                for j in i + 1..n {
                    let (a, c) = (xs[i], xs[j]);
                    if m.mems().space[a] != m.mems().space[c] || !live.interferes(&m, &order, a, c)
                    {
                        continue;
                    }
                    let cells = |x: MemLoc| -> (u64, u64, u64, u64) {
                        let (p, o) = (m.mems().base_partition[x] as u64, m.mems().offset[x]);
                        let (np, nb) = (m.mems().partitions[x] as u64, m.mems().bytes[x] as u64);
                        if m.mems().space[x] == Space::Dram {
                            (0, 1, o, o + np * nb)
                        } else {
                            (p, p + np, o, o + nb)
                        }
                    };
                    let (ra, rc) = (cells(a), cells(c));
                    if ra.0 < rc.1 && rc.0 < ra.1 && ra.2 < rc.3 && rc.2 < ra.3 {
                        want.push((a.min(c), a.max(c)));
                    }
                }
            }
            let mut got = got;
            got.sort();
            want.sort();
            assert_eq!(got, want);
            pairs += want.len();
            clean += want.is_empty() as usize;
        }
        (pairs, clean)
    }
}
