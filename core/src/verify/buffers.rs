//! The independent validator of a buffer placement.
//!
//! Checks, for a [`Problem`] and one [`Placement`] per buffer: every buffer
//! inside the capacity, aligned, on a legal base partition (2-D), at its pin
//! when pinned, and no two buffers with overlapping lifetimes sharing a
//! (partition, byte) cell. It shares no placement code with the allocators.
//!
//! Overlaps are found by a sweep in offset order, not by comparing all pairs:
//! the partitions are cut into stripes at every placed buffer's first and
//! last partition; per stripe, the buffers covering it are visited by
//! increasing offset, and a segment tree over the compressed time axis holds,
//! per section, the highest top (and its owner) of the buffers visited so far.
//! A buffer conflicts with an earlier-visited one iff that maximum over its
//! lifetime exceeds its offset; the owner of the maximum is the witness.
//! Cost O(S · n log n) with S ≤ partitions + 1 stripes (1 in linear mode),
//! plus O(1) per finding; each conflicting buffer is reported once per
//! partition range with one witness, so an illegal placement always yields
//! at least one overlap finding, though not necessarily every pair.
//!
//! Storage is reserved by [`Validator::with_capacity`]; checking allocates
//! nothing when the problem fits in it.

use alloc::vec::Vec;
use core::fmt;

use crate::mem::problem::{
    display_by_index, Buffer, BufferNames, NamedDisplay, Placement, Problem, Timeline,
};

/// One violation, with both buffers and the numbers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// The placement list does not have one entry per buffer.
    WrongCount {
        /// Buffers in the problem.
        expected: usize,
        /// Placements given.
        got: usize,
    },
    /// `offset + size` exceeds the capacity.
    OutOfCapacity {
        /// Buffer index.
        buffer: usize,
        /// Its offset.
        offset: u64,
        /// Its size.
        size: u64,
        /// The capacity checked against.
        capacity: u64,
    },
    /// The offset is not a multiple of the alignment.
    Misaligned {
        /// Buffer index.
        buffer: usize,
        /// Its offset.
        offset: u64,
        /// Its alignment.
        align: u64,
    },
    /// The base partition breaks the start-partition rule or the partition count.
    IllegalBase {
        /// Buffer index.
        buffer: usize,
        /// The base given.
        base: u16,
        /// The buffer's partitions.
        partitions: u16,
    },
    /// A pinned buffer was moved.
    PinMoved {
        /// Buffer index.
        buffer: usize,
        /// Where it is pinned.
        pin: Placement,
        /// Where it was placed.
        got: Placement,
    },
    /// Two buffers live at a common instant share a (partition, byte) cell.
    Overlap {
        /// The buffer placed lower (or equal).
        first: usize,
        /// The other buffer.
        second: usize,
        /// First buffer's data.
        a: Buffer,
        /// First buffer's placement.
        pa: Placement,
        /// Second buffer's data.
        b: Buffer,
        /// Second buffer's placement.
        pb: Placement,
    },
}

impl NamedDisplay for Finding {
    fn write_named(&self, names: &dyn BufferNames, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |i: usize| Name { i, names };
        match *self {
            Finding::WrongCount { expected, got } => {
                write!(f, "{got} placements given for {expected} buffers")
            }
            Finding::OutOfCapacity {
                buffer,
                offset,
                size,
                capacity,
            } => write!(
                f,
                "{}: bytes [{offset}, {}) exceed the capacity {capacity}",
                name(buffer),
                offset + size
            ),
            Finding::Misaligned {
                buffer,
                offset,
                align,
            } => write!(
                f,
                "{}: offset {offset} is not a multiple of its alignment {align}",
                name(buffer)
            ),
            Finding::IllegalBase {
                buffer,
                base,
                partitions,
            } => write!(
                f,
                "{}: {partitions} partitions may not start at partition {base}",
                name(buffer)
            ),
            Finding::PinMoved { buffer, pin, got } => write!(
                f,
                "{}: pinned at offset {} partition {}, placed at offset {} partition {}",
                name(buffer),
                pin.offset,
                pin.base,
                got.offset,
                got.base
            ),
            Finding::Overlap {
                first,
                second,
                a,
                pa,
                b,
                pb,
            } => write!(
                f,
                "{} and {} overlap: {}, {}",
                name(first),
                name(second),
                Held(name(first), &a, &pa),
                Held(name(second), &b, &pb)
            ),
        }
    }
}

/// One buffer's designation, for `write!`.
struct Name<'a> {
    i: usize,
    names: &'a dyn BufferNames,
}

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.names.write_name(self.i, f)
    }
}

/// The cells one buffer of an overlap holds, for `write!`: its bytes and
/// partitions as placed and its lifetime.
struct Held<'a>(Name<'a>, &'a Buffer, &'a Placement);

impl fmt::Display for Held<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Held(name, b, p) = self;
        write!(
            f,
            "{name} holds bytes [{}, {}) of partitions [{}, {}) over [{}, {})",
            p.offset,
            p.offset + b.size,
            p.base,
            p.base as u32 + b.partitions as u32,
            b.lower,
            b.upper
        )
    }
}

display_by_index!(Finding);

/// Counts of a check.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct BufferCheck {
    /// All findings (also those not stored).
    pub total: usize,
    /// Overlap findings among them.
    pub overlaps: usize,
    /// Out-of-capacity findings among them.
    pub out_of_capacity: usize,
}

/// Reusable storage of the validator.
#[derive(Debug)]
pub struct Validator {
    timeline: Timeline,
    order: Vec<u32>,
    cuts: Vec<u16>,
    lo: Vec<u32>,
    hi: Vec<u32>,
    tree_top: Vec<u64>,
    tree_tag: Vec<u64>,
    tree_top_id: Vec<u32>,
    tree_tag_id: Vec<u32>,
    findings: Vec<Finding>,
    keep: usize,
}

const NONE: u32 = u32::MAX;

impl Validator {
    /// Storage for problems of up to `buffers` buffers, keeping the first
    /// `keep` findings.
    pub fn with_capacity(buffers: usize, keep: usize) -> Validator {
        let tree = 8 * buffers.max(1);
        Validator {
            timeline: Timeline::with_capacity(buffers),
            order: Vec::with_capacity(buffers),
            cuts: Vec::with_capacity(2 * buffers + 2),
            lo: Vec::with_capacity(buffers),
            hi: Vec::with_capacity(buffers),
            tree_top: Vec::with_capacity(tree),
            tree_tag: Vec::with_capacity(tree),
            tree_top_id: Vec::with_capacity(tree),
            tree_tag_id: Vec::with_capacity(tree),
            findings: Vec::with_capacity(keep),
            keep,
        }
    }

    /// The findings stored by the last check (at most `keep`).
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    fn report(&mut self, sum: &mut BufferCheck, f: Finding) {
        sum.total += 1;
        match f {
            Finding::Overlap { .. } => sum.overlaps += 1,
            Finding::OutOfCapacity { .. } => sum.out_of_capacity += 1,
            _ => {}
        }
        if self.findings.len() < self.keep {
            self.findings.push(f);
        }
    }

    /// Checks `placements` against `problem` with `capacity` bytes per
    /// partition (`u64::MAX` to check legality apart from the capacity).
    pub fn check(
        &mut self,
        problem: &Problem,
        placements: &[Placement],
        capacity: u64,
    ) -> BufferCheck {
        let mut sum = BufferCheck::default();
        self.findings.clear();
        let bufs = problem.buffers();
        if placements.len() != bufs.len() {
            self.report(
                &mut sum,
                Finding::WrongCount {
                    expected: bufs.len(),
                    got: placements.len(),
                },
            );
            return sum;
        }
        let total_parts = problem.partitions();
        self.order.clear();
        self.cuts.clear();
        self.cuts.push(0);
        self.cuts.push(total_parts);
        for (i, (b, p)) in bufs.iter().zip(placements).enumerate() {
            if let Some(pin) = b.pin {
                if pin != *p {
                    self.report(
                        &mut sum,
                        Finding::PinMoved {
                            buffer: i,
                            pin,
                            got: *p,
                        },
                    );
                }
            }
            if p.offset % b.align != 0 {
                self.report(
                    &mut sum,
                    Finding::Misaligned {
                        buffer: i,
                        offset: p.offset,
                        align: b.align,
                    },
                );
            }
            if !problem.is_legal_base(p.base, b.partitions) {
                self.report(
                    &mut sum,
                    Finding::IllegalBase {
                        buffer: i,
                        base: p.base,
                        partitions: b.partitions,
                    },
                );
                continue;
            }
            if b.is_void() {
                continue;
            }
            if exceeds(p.offset.checked_add(b.size), capacity) {
                self.report(
                    &mut sum,
                    Finding::OutOfCapacity {
                        buffer: i,
                        offset: p.offset,
                        size: b.size,
                        capacity,
                    },
                );
                if p.offset.checked_add(b.size).is_none() {
                    continue;
                }
            }
            self.order.push(i as u32);
            self.cuts.push(p.base);
            self.cuts.push(p.base + b.partitions);
        }
        self.cuts.sort_unstable();
        self.cuts.dedup();
        // The time axis over the buffers that take part in the overlap sweep.
        self.timeline.build(problem);
        self.lo.clear();
        self.hi.clear();
        for b in bufs {
            let (lo, hi) = if b.is_void() {
                (0, 0)
            } else {
                (
                    self.timeline.section_of(b.lower) as u32,
                    self.timeline.section_of(b.upper) as u32,
                )
            };
            self.lo.push(lo);
            self.hi.push(hi);
        }
        self.order
            .sort_unstable_by_key(|&i| (placements[i as usize].offset, i));
        let sections = self.timeline.sections().max(1);
        let mut size = 1;
        while size < sections {
            size *= 2;
        }
        for s in 0..self.cuts.len() - 1 {
            let (s_lo, s_hi) = (self.cuts[s], self.cuts[s + 1]);
            self.tree_top.clear();
            self.tree_top.resize(2 * size, 0);
            self.tree_tag.clear();
            self.tree_tag.resize(2 * size, 0);
            self.tree_top_id.clear();
            self.tree_top_id.resize(2 * size, NONE);
            self.tree_tag_id.clear();
            self.tree_tag_id.resize(2 * size, NONE);
            for k in 0..self.order.len() {
                let x = self.order[k] as usize;
                let (b, p) = (&bufs[x], placements[x]);
                if !(p.base <= s_lo && s_hi <= p.base + b.partitions) {
                    continue;
                }
                let (l, r) = (self.lo[x] as usize, self.hi[x] as usize);
                let (top, w) = self.query(1, 0, size, l, r);
                if top > p.offset && w != NONE {
                    let w = w as usize;
                    let first_common = p.base.max(placements[w].base);
                    if s_lo <= first_common && first_common < s_hi {
                        self.report(
                            &mut sum,
                            Finding::Overlap {
                                first: w,
                                second: x,
                                a: bufs[w],
                                pa: placements[w],
                                b: *b,
                                pb: p,
                            },
                        );
                    }
                }
                self.update(1, 0, size, l, r, p.offset + b.size, x as u32);
            }
        }
        sum
    }

    /// Max (top, owner) over sections `[l, r)`.
    fn query(&self, node: usize, nl: usize, nr: usize, l: usize, r: usize) -> (u64, u32) {
        if r <= nl || nr <= l {
            return (0, NONE);
        }
        if l <= nl && nr <= r {
            return (self.tree_top[node], self.tree_top_id[node]);
        }
        let mid = (nl + nr) / 2;
        let mut best = (self.tree_tag[node], self.tree_tag_id[node]);
        for c in [
            self.query(2 * node, nl, mid, l, r),
            self.query(2 * node + 1, mid, nr, l, r),
        ] {
            if c.0 > best.0 {
                best = c;
            }
        }
        best
    }

    /// Raises the top of sections `[l, r)` to at least `top` (owner `id`).
    #[allow(clippy::too_many_arguments)]
    fn update(&mut self, node: usize, nl: usize, nr: usize, l: usize, r: usize, top: u64, id: u32) {
        if r <= nl || nr <= l {
            return;
        }
        if l <= nl && nr <= r {
            if top > self.tree_tag[node] {
                self.tree_tag[node] = top;
                self.tree_tag_id[node] = id;
            }
            if top > self.tree_top[node] {
                self.tree_top[node] = top;
                self.tree_top_id[node] = id;
            }
            return;
        }
        let mid = (nl + nr) / 2;
        self.update(2 * node, nl, mid, l, r, top, id);
        self.update(2 * node + 1, mid, nr, l, r, top, id);
        let (a, b) = (2 * node, 2 * node + 1);
        let mut best = (self.tree_tag[node], self.tree_tag_id[node]);
        for c in [a, b] {
            if self.tree_top[c] > best.0 {
                best = (self.tree_top[c], self.tree_top_id[c]);
            }
        }
        self.tree_top[node] = best.0;
        self.tree_top_id[node] = best.1;
    }
}

/// True when an end offset overflowed or lies above `limit`.
fn exceeds(end: Option<u64>, limit: u64) -> bool {
    match end {
        None => true,
        Some(v) => v > limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Target;
    use alloc::string::ToString;
    use alloc::vec;

    fn lin(bufs: &[(u64, u64, u64)]) -> Problem {
        let mut p = Problem::linear(100, bufs.len());
        for &(l, u, s) in bufs {
            p.push(Buffer::linear(l, u, s)).unwrap();
        }
        p
    }

    fn at(offsets: &[u64]) -> Vec<Placement> {
        offsets
            .iter()
            .map(|&offset| Placement { offset, base: 0 })
            .collect()
    }

    #[test]
    fn legal_placement_has_no_findings() {
        let p = lin(&[(0, 10, 4), (5, 15, 6), (10, 20, 4), (0, 5, 6)]);
        let mut v = Validator::with_capacity(4, 4);
        let r = v.check(&p, &at(&[0, 4, 0, 4]), 10);
        assert_eq!(r, BufferCheck::default());
    }

    #[test]
    fn overlap_names_both_buffers_and_numbers() {
        let p = lin(&[(0, 10, 4), (5, 15, 6)]);
        let mut v = Validator::with_capacity(2, 4);
        let r = v.check(&p, &at(&[0, 3]), 100);
        assert_eq!(r.overlaps, 1);
        let text = v.findings()[0].to_string();
        assert!(text.contains("buffer 0 and buffer 1 overlap"), "{text}");
        assert!(text.contains("[3, 9)"), "{text}");
        assert_eq!(
            text,
            "buffer 0 and buffer 1 overlap: buffer 0 holds bytes [0, 4) of partitions [0, 1) \
             over [0, 10), buffer 1 holds bytes [3, 9) of partitions [0, 1) over [5, 15)"
        );
        // A caller with names gets them, and no index.
        let names = ["lhs", "acc"];
        let named = v.findings()[0].named(&names[..]).to_string();
        assert!(
            named.starts_with("buffer `lhs` and buffer `acc` overlap: buffer `lhs` holds"),
            "{named}"
        );
        assert!(
            !named.contains(" 0 ") && named.contains("[3, 9)"),
            "{named}"
        );
        // Touching lifetimes ([0,10) and [10,20)) do not conflict.
        let q = lin(&[(0, 10, 4), (10, 20, 4)]);
        assert_eq!(v.check(&q, &at(&[0, 0]), 100).total, 0);
    }

    #[test]
    fn finds_overlap_hidden_under_a_long_low_buffer() {
        // Buffer 2 overlaps 1 only; buffer 0 is below both and long-lived.
        let p = lin(&[(0, 100, 2), (10, 20, 10), (15, 30, 10)]);
        let mut v = Validator::with_capacity(3, 4);
        let r = v.check(&p, &at(&[0, 2, 11]), 100);
        assert_eq!(r.overlaps, 1);
        assert!(matches!(
            v.findings()[0],
            Finding::Overlap {
                first: 1,
                second: 2,
                ..
            }
        ));
    }

    #[test]
    fn capacity_alignment_pin_and_count() {
        let mut p = Problem::linear(10, 3);
        p.push(Buffer::linear(0, 10, 8)).unwrap();
        p.push(Buffer {
            align: 4,
            ..Buffer::linear(10, 20, 4)
        })
        .unwrap();
        p.push(Buffer {
            pin: Some(Placement { offset: 0, base: 0 }),
            ..Buffer::linear(20, 30, 4)
        })
        .unwrap();
        let mut v = Validator::with_capacity(3, 8);
        let r = v.check(&p, &at(&[5, 2, 1]), 10);
        assert_eq!(r.out_of_capacity, 1);
        assert_eq!(r.total, 3, "{:?}", v.findings());
        assert!(v
            .findings()
            .iter()
            .any(|f| matches!(f, Finding::Misaligned { buffer: 1, .. })));
        assert!(v
            .findings()
            .iter()
            .any(|f| matches!(f, Finding::PinMoved { buffer: 2, .. })));
        assert_eq!(v.check(&p, &at(&[0]), 10).total, 1);
    }

    #[test]
    fn two_d_partitions_and_start_rule() {
        let t = Target::default();
        let mut p = Problem::partitioned(&t, 100, 3);
        for parts in [32u16, 32, 40] {
            p.push(Buffer {
                partitions: parts,
                ..Buffer::linear(0, 10, 10)
            })
            .unwrap();
        }
        let mut v = Validator::with_capacity(3, 8);
        let at = |offset, base| Placement { offset, base };
        // Side by side in partitions: legal at the same offset.
        let ok = vec![at(0, 0), at(0, 32), at(0, 64)];
        assert_eq!(v.check(&p, &ok, 100).total, 0);
        // The 40-partition buffer at 0 covers partitions 0..40: overlaps both,
        // each pair reported once.
        let bad = vec![at(0, 0), at(0, 32), at(5, 0)];
        let r = v.check(&p, &bad, 100);
        assert_eq!(r.overlaps, 2, "{:?}", v.findings());
        // 32 partitions may not start at 16.
        let illegal = vec![at(0, 16), at(0, 32), at(0, 64)];
        let r = v.check(&p, &illegal, 100);
        assert!(matches!(
            v.findings()[0],
            Finding::IllegalBase { buffer: 0, .. }
        ));
        assert_eq!(r.total, 1);
    }
}
