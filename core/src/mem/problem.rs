//! The buffer-placement problem (dynamic storage allocation) that every
//! memory allocator of tusk and the exact search share.
//!
//! A buffer lives over the half-open time interval `[lower, upper)` and needs
//! `size` bytes in each of its `partitions` partitions. A placement gives it a
//! byte `offset` (a multiple of `align`) and, in partitioned (2-D, SBUF) mode,
//! a `base` partition obeying the target's start-partition rule. Two buffers
//! whose lifetimes overlap must not share a (partition, byte) cell.
//!
//! Linear (1-D) mode is the case where every buffer spans every partition:
//! PSUM inside a bank, DRAM, and the MiniMalloc CSV problem. There the
//! partition count of every buffer is 1 and every base is 0.
//!
//! Invariants kept by [`Problem::push`]: `lower <= upper`, `align >= 1`,
//! `1 <= partitions <= partitions()` with at least one legal base, a pin is
//! aligned and legal, and the sums of `size * partitions` and of `size +
//! align` over the buffers stay below `u64::MAX / 4` (so lower bounds,
//! areas and the offsets the allocators compute never overflow).

use alloc::vec::Vec;
use core::fmt;

use crate::target::Target;

/// Where a buffer is placed: its byte offset and its base partition.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Placement {
    /// First byte, in every partition the buffer occupies.
    pub offset: u64,
    /// First partition (always 0 in linear mode).
    pub base: u16,
}

/// One buffer to place.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Buffer {
    /// First instant the buffer is live.
    pub lower: u64,
    /// First instant after the buffer's last use (half-open lifetime).
    pub upper: u64,
    /// Bytes per partition.
    pub size: u64,
    /// The offset must be a multiple of this (at least 1).
    pub align: u64,
    /// Partitions spanned (1 in linear mode).
    pub partitions: u16,
    /// A fixed placement the allocators must keep (an obstacle).
    pub pin: Option<Placement>,
}

impl Buffer {
    /// A linear-mode buffer with alignment 1 and no pin.
    pub const fn linear(lower: u64, upper: u64, size: u64) -> Buffer {
        Buffer {
            lower,
            upper,
            size,
            align: 1,
            partitions: 1,
            pin: None,
        }
    }

    /// True when the buffer occupies no cell at any time (it never conflicts).
    pub const fn is_void(&self) -> bool {
        self.size == 0 || self.lower >= self.upper
    }

    /// True when the two lifetimes share an instant.
    pub const fn overlaps_in_time(&self, other: &Buffer) -> bool {
        self.lower < other.upper && other.lower < self.upper
    }
}

/// A placed buffer as a buffer being placed sees it: a range of bytes in
/// a range of partitions. The greedy rules and the colorer
/// collect these from the placed neighbours of a buffer, then search the
/// lowest or best-fitting gap among them.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Obstacle {
    bytes: (u64, u64),
    partitions: (u16, u16),
}

impl Obstacle {
    /// `buffer` placed at `at`.
    pub(crate) const fn of(buffer: &Buffer, at: Placement) -> Obstacle {
        Obstacle {
            bytes: (at.offset, at.offset + buffer.size),
            partitions: (at.base, at.base + buffer.partitions),
        }
    }

    /// Its first byte.
    pub(crate) const fn offset(&self) -> u64 {
        self.bytes.0
    }

    /// One past its last byte.
    pub(crate) const fn top(&self) -> u64 {
        self.bytes.1
    }

    /// True when it holds some of the partitions `[base, end)`.
    pub(crate) const fn meets_partitions(&self, base: u16, end: u16) -> bool {
        self.partitions.0 < end && base < self.partitions.1
    }
}

/// Which kind of memory the problem describes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Geometry {
    /// One flat byte space (every buffer spans all partitions).
    Linear,
    /// SBUF-like: partitions × bytes, with the target's start-partition rule.
    Partitioned(Target),
}

/// Why a buffer or a problem was refused.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ProblemError {
    /// More buffers than the problem reserved room for.
    Full {
        /// The reserved buffer count.
        capacity: usize,
    },
    /// `lower > upper`.
    ReversedLifetime {
        /// Index of the buffer.
        index: usize,
        /// Its lower end.
        lower: u64,
        /// Its upper end.
        upper: u64,
    },
    /// Alignment 0.
    ZeroAlignment {
        /// Index of the buffer.
        index: usize,
    },
    /// Partition count 0, above the partitions of the space, or with no
    /// legal start partition.
    BadPartitions {
        /// Index of the buffer.
        index: usize,
        /// The partitions asked for.
        partitions: u16,
        /// Partitions of the space.
        available: u16,
    },
    /// A pin that is misaligned or starts at an illegal partition.
    IllegalPin {
        /// Index of the buffer.
        index: usize,
        /// The pinned placement.
        pin: Placement,
        /// The buffer's alignment.
        align: u64,
    },
    /// Sizes so large that areas or offsets would overflow 64 bits.
    TooLarge {
        /// Index of the buffer.
        index: usize,
    },
}

/// How a message names buffer `i` of a problem. The core knows buffers
/// only by their index; a caller that read them with names (the `id`
/// column of a CSV file) passes those, so that its user reads the names
/// they wrote, never the internal index.
pub trait BufferNames {
    /// Writes the designation of buffer `i` ("buffer 3", "buffer `b7`").
    fn write_name(&self, i: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// Names buffers by their index in the problem (what `Display` uses).
#[derive(Copy, Clone, Debug, Default)]
pub struct ByIndex;

impl BufferNames for ByIndex {
    fn write_name(&self, i: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "buffer {i}")
    }
}

/// Names buffer `i` by the `i`-th string (an index past the end falls back
/// to the index, so a short list never hides a buffer).
impl<S: AsRef<str>> BufferNames for [S] {
    fn write_name(&self, i: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.get(i) {
            Some(s) => write!(f, "buffer `{}`", s.as_ref()),
            None => ByIndex.write_name(i, f),
        }
    }
}

/// A message about buffers that can be written with any [`BufferNames`];
/// its `Display` is [`ByIndex`].
pub trait NamedDisplay {
    /// Writes the message, naming each buffer through `names`.
    fn write_named(&self, names: &dyn BufferNames, f: &mut fmt::Formatter<'_>) -> fmt::Result;

    /// The message with buffers named by `names`.
    fn named<'a, N: BufferNames + ?Sized>(&'a self, names: &'a N) -> WithBufferNames<'a, Self, N> {
        WithBufferNames { item: self, names }
    }
}

/// [`NamedDisplay::named`]: a message about buffers and the names it uses
/// for them (a module's entities are named by [`crate::ir::InModule`]).
pub struct WithBufferNames<'a, T: ?Sized, N: ?Sized> {
    item: &'a T,
    names: &'a N,
}

impl<T: NamedDisplay + ?Sized, N: BufferNames + ?Sized> fmt::Display for WithBufferNames<'_, T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.item.write_named(&ByRef(self.names), f)
    }
}

/// A sized handle on unsized names (a slice), for `&dyn BufferNames`.
struct ByRef<'a, N: ?Sized>(&'a N);

impl<N: BufferNames + ?Sized> BufferNames for ByRef<'_, N> {
    fn write_name(&self, i: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write_name(i, f)
    }
}

impl<T: ?Sized, N: ?Sized> fmt::Debug for WithBufferNames<'_, T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WithBufferNames")
    }
}

/// `Display` for a [`NamedDisplay`] type: buffers named by index.
macro_rules! display_by_index {
    ($($t:ty),*) => {$(
        impl core::fmt::Display for $t {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                $crate::mem::problem::NamedDisplay::write_named(
                    self,
                    &$crate::mem::problem::ByIndex,
                    f,
                )
            }
        }
    )*};
}
pub(crate) use display_by_index;

impl NamedDisplay for ProblemError {
    fn write_named(&self, names: &dyn BufferNames, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let index = match *self {
            ProblemError::Full { capacity } => {
                return write!(
                    f,
                    "buffer problem is full: room for {capacity} buffers was reserved"
                )
            }
            ProblemError::ReversedLifetime { index, .. }
            | ProblemError::ZeroAlignment { index }
            | ProblemError::BadPartitions { index, .. }
            | ProblemError::IllegalPin { index, .. }
            | ProblemError::TooLarge { index } => index,
        };
        names.write_name(index, f)?;
        match *self {
            ProblemError::Full { .. } => Ok(()),
            ProblemError::ReversedLifetime { lower, upper, .. } => {
                write!(f, ": lifetime [{lower}, {upper}) ends before it starts")
            }
            ProblemError::ZeroAlignment { .. } => f.write_str(": alignment must be at least 1"),
            ProblemError::BadPartitions {
                partitions,
                available,
                ..
            } => write!(
                f,
                ": {partitions} partitions has no legal start in a space of {available} partitions"
            ),
            ProblemError::IllegalPin { pin, align, .. } => write!(
                f,
                ": pinned at offset {} partition {} which is not a legal placement (alignment {align})",
                pin.offset, pin.base
            ),
            ProblemError::TooLarge { .. } => {
                f.write_str(": sizes are too large (offsets or areas would overflow 64 bits)")
            }
        }
    }
}

display_by_index!(ProblemError);

impl core::error::Error for ProblemError {}

impl ProblemError {
    /// What is wrong with the buffer, without its index: for a caller that
    /// names the buffer in its own terms (a tensor of a module).
    pub const fn reason(&self) -> &'static str {
        match self {
            ProblemError::Full { .. } => "the buffer problem is full",
            ProblemError::ReversedLifetime { .. } => "its lifetime ends before it starts",
            ProblemError::ZeroAlignment { .. } => "its alignment is 0",
            ProblemError::BadPartitions { .. } => {
                "its partition count has no legal start partition in the space"
            }
            ProblemError::IllegalPin { .. } => {
                "it is pinned at an illegal placement (misaligned or at an illegal start partition)"
            }
            ProblemError::TooLarge { .. } => {
                "its sizes are too large (offsets or areas would overflow 64 bits)"
            }
        }
    }
}

/// Offsets and sizes are kept below this so `offset + size` and sums of
/// areas never overflow.
pub const MAX_BYTES: u64 = 1 << 56;

/// A buffer-placement problem: buffers, geometry and the capacity (bytes per
/// partition) a solution should fit in.
#[derive(Clone, Debug)]
pub struct Problem {
    geometry: Geometry,
    /// Bytes per partition a placement should stay within.
    pub capacity: u64,
    buffers: Vec<Buffer>,
    total_area: u64,
    /// Sum of `size + align` over the buffers: bounds every offset an
    /// allocator computes ([`align_offset`]).
    total_extent: u64,
}

impl Problem {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.buffers)
    }

    /// A linear (1-D) problem with room for `reserve` buffers.
    pub fn linear(capacity: u64, reserve: usize) -> Problem {
        Problem::with_geometry(Geometry::Linear, capacity, reserve)
    }

    /// A partitioned (2-D SBUF) problem over `target`'s partitions and start
    /// rule, with room for `reserve` buffers.
    pub fn partitioned(target: &Target, capacity: u64, reserve: usize) -> Problem {
        Problem::with_geometry(Geometry::Partitioned(target.clone()), capacity, reserve)
    }

    /// An empty problem of `geometry` with room for `reserve` buffers.
    pub fn with_geometry(geometry: Geometry, capacity: u64, reserve: usize) -> Problem {
        Problem {
            geometry,
            capacity,
            buffers: Vec::with_capacity(reserve),
            total_area: 0,
            total_extent: 0,
        }
    }

    /// Drops every buffer, keeping the reservation and the geometry.
    pub fn clear(&mut self) {
        self.buffers.clear();
        self.total_area = 0;
        self.total_extent = 0;
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The buffers, in index order.
    pub fn buffers(&self) -> &[Buffer] {
        &self.buffers
    }

    /// Number of buffers.
    pub fn len(&self) -> usize {
        self.buffers.len()
    }

    /// True when there are no buffers.
    pub fn is_empty(&self) -> bool {
        self.buffers.is_empty()
    }

    /// Partitions of the space (1 in linear mode).
    pub fn partitions(&self) -> u16 {
        match &self.geometry {
            Geometry::Linear => 1,
            Geometry::Partitioned(t) => t.sb_partitions,
        }
    }

    /// True in partitioned (2-D) mode.
    pub fn is_partitioned(&self) -> bool {
        matches!(self.geometry, Geometry::Partitioned(_))
    }

    /// Spacing of the legal base partitions of a buffer of `partitions`
    /// partitions, or `None` when it has none. Linear mode: 1 (base 0 only).
    pub fn base_step(&self, partitions: u16) -> Option<u16> {
        match &self.geometry {
            Geometry::Linear => (partitions == 1).then_some(1),
            Geometry::Partitioned(t) => t.start_granularity(partitions),
        }
    }

    /// True when `base` is a legal start partition for `partitions`.
    pub fn is_legal_base(&self, base: u16, partitions: u16) -> bool {
        match &self.geometry {
            Geometry::Linear => base == 0 && partitions == 1,
            Geometry::Partitioned(t) => t.is_legal_start(base, partitions),
        }
    }

    /// The legal base partitions of a buffer of `partitions`, lowest first.
    pub fn legal_bases(&self, partitions: u16) -> impl Iterator<Item = u16> + '_ {
        let step = self.base_step(partitions).unwrap_or(0);
        let total = self.partitions();
        let count = if step == 0 || partitions > total {
            0
        } else {
            (total - partitions) / step + 1
        };
        (0..count)
            .map(move |i| i * step)
            .filter(move |&b| self.is_legal_base(b, partitions))
    }

    /// Adds a buffer, returning its index. Fails without growing when the
    /// reservation is full or the buffer breaks an invariant of the module
    /// doc.
    pub fn push(&mut self, buffer: Buffer) -> Result<usize, ProblemError> {
        let index = self.buffers.len();
        if index == self.buffers.capacity() {
            return Err(ProblemError::Full {
                capacity: self.buffers.capacity(),
            });
        }
        if buffer.lower > buffer.upper {
            return Err(ProblemError::ReversedLifetime {
                index,
                lower: buffer.lower,
                upper: buffer.upper,
            });
        }
        if buffer.align == 0 {
            return Err(ProblemError::ZeroAlignment { index });
        }
        if self.legal_bases(buffer.partitions).next().is_none() {
            return Err(ProblemError::BadPartitions {
                index,
                partitions: buffer.partitions,
                available: self.partitions(),
            });
        }
        if buffer.size > MAX_BYTES || buffer.align > MAX_BYTES {
            return Err(ProblemError::TooLarge { index });
        }
        if let Some(pin) = buffer.pin {
            if pin.offset > MAX_BYTES {
                return Err(ProblemError::TooLarge { index });
            }
            if pin.offset % buffer.align != 0 || !self.is_legal_base(pin.base, buffer.partitions) {
                return Err(ProblemError::IllegalPin {
                    index,
                    pin,
                    align: buffer.align,
                });
            }
        }
        let area = buffer
            .size
            .checked_mul(buffer.partitions as u64)
            .and_then(|a| a.checked_add(self.total_area))
            .filter(|&t| t <= u64::MAX / 4)
            .ok_or(ProblemError::TooLarge { index })?;
        let extent = (buffer.size + buffer.align)
            .checked_add(self.total_extent)
            .filter(|&t| t <= u64::MAX / 4)
            .ok_or(ProblemError::TooLarge { index })?;
        self.total_area = area;
        self.total_extent = extent;
        self.buffers.push(buffer);
        Ok(index)
    }

    /// The lower bound on the peak of any legal placement (module doc of
    /// [`LowerBound`]).
    pub fn lower_bound(&self, scratch: &mut Timeline) -> LowerBound {
        scratch.build(self);
        let parts = self.partitions() as u64;
        let n = scratch.sections();
        scratch.a.clear();
        scratch.a.resize(n + 1, 0);
        scratch.b.clear();
        scratch.b.resize(n + 1, 0);
        let mut largest = 0u64;
        for buf in &self.buffers {
            if let Some(pin) = buf.pin {
                largest = largest.max(pin.offset + buf.size);
            }
            if buf.is_void() {
                continue;
            }
            largest = largest.max(buf.size);
            let lo = scratch.section_of(buf.lower);
            let hi = scratch.section_of(buf.upper);
            let area = buf.size * buf.partitions as u64;
            scratch.a[lo] = scratch.a[lo].wrapping_add(area);
            scratch.a[hi] = scratch.a[hi].wrapping_sub(area);
            // Buffers with a single legal base that covers partition 0 all
            // share that partition: their bytes stack in it.
            if self
                .base_step(buf.partitions)
                .map(|s| s as u32 + buf.partitions as u32)
                > Some(parts as u32)
                || parts == 1
            {
                scratch.b[lo] = scratch.b[lo].wrapping_add(buf.size);
                scratch.b[hi] = scratch.b[hi].wrapping_sub(buf.size);
            }
        }
        let (mut area, mut shared) = (0u64, 0u64);
        let mut bound = LowerBound {
            bytes: largest,
            at: 0,
        };
        for s in 0..n {
            area = area.wrapping_add(scratch.a[s]);
            shared = shared.wrapping_add(scratch.b[s]);
            let live = area.div_ceil(parts).max(shared);
            if live > bound.bytes {
                bound = LowerBound {
                    bytes: live,
                    at: scratch.times[s],
                };
            }
        }
        bound
    }
}

/// The lower bound on the peak: the largest, over time, of the live bytes
/// (linear mode) or of the live area divided by the partitions (2-D), and of
/// the bytes of the buffers that all must share partition 0; at least the
/// largest buffer and the top of every pin.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LowerBound {
    /// Bytes per partition.
    pub bytes: u64,
    /// An instant at which the bound is reached (0 when set by one buffer).
    pub at: u64,
}

/// The peak of a placement: the largest `offset + size` (0 when empty).
/// `placements` is indexed like the problem's buffers; void buffers count.
pub fn peak(problem: &Problem, placements: &[Placement]) -> u64 {
    problem
        .buffers
        .iter()
        .zip(placements)
        .filter(|(b, _)| b.size > 0 && b.lower < b.upper)
        .map(|(b, p)| p.offset.saturating_add(b.size))
        .max()
        .unwrap_or(0)
}

/// The compressed time axis of a problem: the sorted distinct lifetime ends.
/// Section `i` is `[times[i], times[i+1])`. Storage is reused across builds.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    times: Vec<u64>,
    a: Vec<u64>,
    b: Vec<u64>,
}

impl Timeline {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.times, self.a, self.b)
    }

    /// Storage for problems of up to `buffers` buffers.
    pub fn with_capacity(buffers: usize) -> Timeline {
        Timeline {
            times: Vec::with_capacity(2 * buffers),
            a: Vec::with_capacity(2 * buffers + 1),
            b: Vec::with_capacity(2 * buffers + 1),
        }
    }

    /// Grows the storage to problems of up to `buffers` buffers (never
    /// shrinks it: one timeline serves the problems of every space).
    pub fn reserve(&mut self, buffers: usize) {
        use crate::storage::grow;
        grow(&mut self.times, 2 * buffers);
        grow(&mut self.a, 2 * buffers + 1);
        grow(&mut self.b, 2 * buffers + 1);
    }

    /// Rebuilds the axis from the non-void buffers of `problem`.
    pub fn build(&mut self, problem: &Problem) {
        self.times.clear();
        for b in problem.buffers.iter().filter(|b| !b.is_void()) {
            self.times.push(b.lower);
            self.times.push(b.upper);
        }
        self.times.sort_unstable();
        self.times.dedup();
    }

    /// Number of sections (one less than the distinct instants).
    pub fn sections(&self) -> usize {
        self.times.len().saturating_sub(1)
    }

    /// The instants, sorted and distinct.
    pub fn times(&self) -> &[u64] {
        &self.times
    }

    /// The section starting at instant `t` (`t` must be a lifetime end of a
    /// non-void buffer; the upper end of the last section maps to
    /// `sections()`).
    pub fn section_of(&self, t: u64) -> usize {
        self.times.partition_point(|&x| x < t)
    }
}

/// [`align_up`](crate::align::align_up) for the offsets the allocators of a [`Problem`] compute
/// (the greedy rules, the colorer, the exact search): each is the top of
/// a stack of the problem's buffers, each at its alignment, on a pin, or a
/// level of the exact search (at most its capacity, clamped to
/// `u64::MAX / 4`, plus one buffer). [`Problem::push`] keeps every sum of
/// `size + align` below `u64::MAX / 4` and pins and sizes below
/// [`MAX_BYTES`], so no such offset reaches `u64::MAX / 2` and the
/// rounding cannot overflow; were it to, the offset saturates (a
/// placement off the top, which the peak and the verifier report) rather
/// than wrapping.
#[inline]
pub(crate) const fn align_offset(x: u64, align: u64) -> u64 {
    crate::align::align_saturating(x, align)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_bound_is_max_live_bytes() {
        let mut p = Problem::linear(100, 8);
        p.push(Buffer::linear(0, 10, 4)).unwrap();
        p.push(Buffer::linear(5, 15, 6)).unwrap();
        p.push(Buffer::linear(10, 20, 3)).unwrap();
        let lb = p.lower_bound(&mut Timeline::with_capacity(8));
        assert_eq!(lb, LowerBound { bytes: 10, at: 5 });
    }

    #[test]
    fn lower_bound_2d_uses_area_and_shared_partition() {
        let t = Target::default();
        let mut p = Problem::partitioned(&t, 1000, 8);
        let b = |parts, size| Buffer {
            lower: 0,
            upper: 10,
            size,
            align: 1,
            partitions: parts,
            pin: None,
        };
        // Four 32-partition buffers of 100 bytes fit side by side: area/128 = 100.
        for _ in 0..4 {
            p.push(b(32, 100)).unwrap();
        }
        assert_eq!(p.lower_bound(&mut Timeline::default()).bytes, 100);
        // Two 65-partition buffers both start at 0: they stack.
        p.clear();
        p.push(b(65, 100)).unwrap();
        p.push(b(65, 100)).unwrap();
        assert_eq!(p.lower_bound(&mut Timeline::default()).bytes, 200);
    }

    #[test]
    fn push_refuses_alignments_whose_stack_could_overflow_offsets() {
        // Each buffer alone is within MAX_BYTES, but a stack of them all
        // at their alignment would pass u64: the sum of size + align is
        // bounded instead, so every offset the allocators round stays far
        // below u64::MAX.
        let mut p = Problem::linear(u64::MAX, 300);
        let b = Buffer {
            align: MAX_BYTES,
            ..Buffer::linear(0, 1, 1)
        };
        let refused = (0..300).find(|_| p.push(b).is_err());
        assert_eq!(refused, Some(63));
        assert_eq!(p.len(), 63);
        assert_eq!(p.push(b), Err(ProblemError::TooLarge { index: 63 }));
    }

    #[test]
    fn push_refuses_bad_buffers_without_growing() {
        let mut p = Problem::linear(10, 1);
        assert!(matches!(
            p.push(Buffer::linear(5, 4, 1)),
            Err(ProblemError::ReversedLifetime { .. })
        ));
        let mut b = Buffer::linear(0, 1, 1);
        b.align = 0;
        assert_eq!(p.push(b), Err(ProblemError::ZeroAlignment { index: 0 }));
        b.align = 4;
        b.pin = Some(Placement { offset: 2, base: 0 });
        assert!(matches!(p.push(b), Err(ProblemError::IllegalPin { .. })));
        p.push(Buffer::linear(0, 1, 1)).unwrap();
        assert_eq!(
            p.push(Buffer::linear(0, 1, 1)),
            Err(ProblemError::Full { capacity: 1 })
        );
        let t = Target::default();
        let mut q = Problem::partitioned(&t, 10, 2);
        let mut c = Buffer::linear(0, 1, 1);
        c.partitions = 129;
        assert!(matches!(q.push(c), Err(ProblemError::BadPartitions { .. })));
        assert_eq!(q.legal_bases(40).collect::<alloc::vec::Vec<_>>(), [0, 64]);
        assert_eq!(q.legal_bases(100).collect::<alloc::vec::Vec<_>>(), [0]);
    }
}
