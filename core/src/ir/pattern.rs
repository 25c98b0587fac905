//! Access patterns that move: loop-indexed (affine) terms, a register
//! term with its window, and the partition step.
//!
//! A plain pattern ([`super::ap`]) touches the same cells every time it
//! runs. Real kernels address tiles by the loop's index and DMAs by
//! registers, so a pattern may carry an [`ApExt`]:
//!
//! - **Loop terms** ([`IvTerm`]): the pattern's first partition moves by
//!   `parts × k` and its byte offset by `bytes × k` for the induction
//!   variable `iv = 0, 1, …, trip − 1` of an enclosing loop with a known
//!   trip count, where `k = iv` (affine) or, for a term that wraps,
//!   `k = iv mod wrap` (the slot of a tile buffered `wrap` deep: iteration
//!   `iv` uses slot `iv mod wrap`, so the next iteration's writer does not
//!   wait for this one's readers). Exact: every iteration's cells are
//!   computable, and every analysis evaluates them per iteration
//!   ([`IvTerm::index`]) or in closed form over the distinct indices
//!   ([`IvTerm::indices`]).
//! - **A register term** ([`RegTerm`]): the byte offset moves by
//!   `scale × value(reg)`, where `reg` is one of the instruction's used
//!   registers, and the pattern declares the *window* — the bytes of each
//!   partition row of the location that every access stays in, whatever the
//!   register holds. Inexact: an access is somewhere in its window. The
//!   checkers treat it as a may-access of the whole window.
//! - **The partition step** ([`ApExt::pstep`]): on chip, 1 (consecutive
//!   partitions, the default) or 0 (every partition of the pattern reads
//!   the first one: a partition broadcast, reads only); on DRAM, the bytes
//!   between consecutive partitions of the pattern (default: the
//!   location's row, so partition q is row q).
//!
//! Invariants (checked where a pattern is made, [`check`]): terms name
//! distinct loops with known trip counts that enclose the instruction;
//! every iteration's cells, and the register term's window, lie inside
//! the location; a register term's use index names a used register.

use arrayvec::ArrayVec;

use super::module::{Loop, MemLoc, Module, UNKNOWN_TRIP};
use super::types::Space;

/// Most loop terms one pattern carries (loops nest deeper than this; a
/// tile index needs one term per loop it moves with).
pub const MAX_IV_TERMS: usize = 8;

/// `parts × k` partitions and `bytes × k` bytes added at iteration `iv` of
/// `lp`, where `k` is [`IvTerm::index`]: `iv`, or `iv mod wrap` for a term
/// that wraps.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct IvTerm {
    /// The loop whose induction variable moves the pattern.
    pub lp: Loop,
    /// Partitions per iteration (on-chip and default-pitch DRAM patterns;
    /// `i16` keeps the term at 16 bytes: a pattern holds eight).
    pub parts: i16,
    /// 0: the term is affine (`k = iv`); `N ≥ 2`: it wraps (`k = iv mod
    /// N`, slot `k` of `N` used in turn). 1 is refused
    /// ([`PatternError::BadWrap`]): it would never move.
    pub wrap: u16,
    /// Bytes per iteration.
    pub bytes: i64,
}

// Eight terms per pattern, each pattern extension in the module's pool:
// the term's size is the pool's.
const _: () = assert!(core::mem::size_of::<IvTerm>() == 16);

impl IvTerm {
    /// An affine term: `parts × iv` partitions, `bytes × iv` bytes.
    pub const fn affine(lp: Loop, parts: i16, bytes: i64) -> IvTerm {
        IvTerm {
            lp,
            parts,
            bytes,
            wrap: 0,
        }
    }

    /// True when the term wraps (`iv mod wrap`).
    pub const fn wraps(&self) -> bool {
        self.wrap != 0
    }

    /// The multiplier `k` of iteration `iv`: `iv`, or `iv mod wrap`.
    pub const fn index(&self, iv: u32) -> u32 {
        if self.wrap >= 2 {
            iv % self.wrap as u32
        } else {
            iv
        }
    }

    /// How many distinct multipliers `trip` iterations take: `k` runs over
    /// `0..indices(trip)`.
    pub const fn indices(&self, trip: u32) -> u32 {
        if self.wrap >= 2 && (self.wrap as u32) < trip {
            self.wrap as u32
        } else {
            trip
        }
    }
}

/// `scale × value($reg)` bytes added to the offset, every access inside
/// bytes `[window_lo, window_hi)` of each partition row.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RegTerm {
    /// Index of the register among the instruction's used registers.
    pub use_index: u8,
    /// Bytes per unit of the register's value.
    pub scale: i32,
    /// First byte of the window (relative to the location's row).
    pub window_lo: u32,
    /// One past the last byte of the window.
    pub window_hi: u32,
}

/// What a pattern adds to the plain form (see the module doc). The default
/// is "nothing": a plain pattern.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ApExt {
    /// Partition step: `None` is the default (1 on chip, the row on DRAM).
    pub pstep: Option<u32>,
    /// Loop terms, at most one per loop.
    pub terms: ArrayVec<IvTerm, MAX_IV_TERMS>,
    /// The register term, if any.
    pub reg: Option<RegTerm>,
}

#[cfg(feature = "defmt")]
impl defmt::Format for ApExt {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "ApExt {{ pstep: {}, terms: {}, reg: {} }}",
            self.pstep,
            self.terms.as_slice(),
            self.reg
        );
    }
}

impl ApExt {
    /// True when the pattern is plain.
    pub fn is_plain(&self) -> bool {
        self.pstep.is_none() && self.terms.is_empty() && self.reg.is_none()
    }

    /// True when the pattern's cells depend on a register (inexact).
    pub fn is_dynamic(&self) -> bool {
        self.reg.is_some()
    }

    /// The term of loop `l`, if any.
    pub fn term(&self, l: Loop) -> Option<&IvTerm> {
        self.terms.iter().find(|t| t.lp == l)
    }

    /// True for an on-chip partition broadcast (step 0).
    pub fn is_broadcast(&self, space: Space) -> bool {
        space.is_on_chip() && self.pstep == Some(0)
    }
}

/// How a location buffered in slots used in turn is laid out
/// ([`crate::ir::Module::slots`]): slot `k` of `count` holds bytes
/// `[k × stride, k × stride + width)` of each partition row, and
/// iteration `iv` of `lp` uses slot `iv mod count`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Slots {
    /// The loop whose iterations take the slots in turn.
    pub lp: Loop,
    /// Bytes between consecutive slots.
    pub stride: u64,
    /// Slots.
    pub count: u16,
    /// Bytes of each slot that its accesses use.
    pub width: u64,
}

/// The cells a pattern may touch over every iteration (and, with a
/// register term, anywhere in its window), relative to its location:
/// partitions `[part_lo, part_hi)` and bytes `[byte_lo, byte_hi)` of each
/// of them; or, for a DRAM pattern with an explicit partition step, the
/// flat bytes `[byte_lo, byte_hi)` of the location (partitions 0..1).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Extent {
    /// First partition.
    pub part_lo: i64,
    /// One past the last partition.
    pub part_hi: i64,
    /// First byte.
    pub byte_lo: i64,
    /// One past the last byte.
    pub byte_hi: i64,
    /// True when the bytes are flat location bytes (DRAM with a pitch).
    pub flat: bool,
}

/// The range `[lo, hi]` that `stride × iv` covers for `iv` in
/// `0..trip` (the trip is known and at least 1 when the term is legal).
fn term_range(stride: i64, trip: u32) -> (i64, i64) {
    let reach = stride.saturating_mul(trip.saturating_sub(1) as i64);
    (reach.min(0), reach.max(0))
}

/// What [`check`] found wrong with a pattern.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PatternError {
    /// A loop term names a loop twice.
    DuplicateLoop,
    /// A loop term names a loop whose trip count is unknown.
    UnknownTrip,
    /// A loop term names a loop without a variable name (the text could
    /// not say which loop it is).
    UnnamedLoop,
    /// A loop term names a loop that does not enclose the instruction.
    NotEnclosing,
    /// A register term names a use the instruction does not have.
    NoSuchUse,
    /// A register term's window is empty or outside the location's row.
    BadWindow,
    /// A partition broadcast on a DRAM pattern or on an output.
    BadStep,
    /// A loop term wraps at 1 (`iv mod 1` never moves: write no term).
    BadWrap,
    /// Some iteration touches cells outside the location.
    Outside {
        /// The extent over all iterations.
        extent: Extent,
    },
}

impl core::fmt::Display for PatternError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PatternError::DuplicateLoop => f.write_str("names a loop in two terms"),
            PatternError::UnknownTrip => {
                f.write_str("moves with a loop whose trip count is unknown (`loop ?`)")
            }
            PatternError::UnnamedLoop => {
                f.write_str("moves with a loop that has no variable name (`loop NAME in N`)")
            }
            PatternError::NotEnclosing => {
                f.write_str("moves with a loop that does not enclose the instruction")
            }
            PatternError::NoSuchUse => f.write_str("names a register the instruction does not use"),
            PatternError::BadWrap => f.write_str("has a loop term that wraps at 1 (`mod 1`)"),
            PatternError::BadWindow => {
                f.write_str("has a register window that is empty or outside its location")
            }
            PatternError::BadStep => f.write_str(
                "has a partition step of 0 (a broadcast) where only on-chip reads may have one",
            ),
            PatternError::Outside { extent } => {
                if extent.flat {
                    write!(
                        f,
                        "reaches flat bytes [{}, {}) over its iterations, outside its location",
                        extent.byte_lo, extent.byte_hi
                    )
                } else {
                    write!(
                        f,
                        "reaches partitions [{}, {}) and bytes [{}, {}) over its iterations, outside its location",
                        extent.part_lo, extent.part_hi, extent.byte_lo, extent.byte_hi
                    )
                }
            }
        }
    }
}

/// The fields every access pattern has, besides its extension: what
/// [`extent`] and [`check`] read of a pattern, whether it is stored in a
/// module or only described (an `ApSpec`).
#[derive(Copy, Clone, Debug)]
pub struct PlainFields<'a> {
    /// The location accessed.
    pub loc: MemLoc,
    /// First partition, relative to the location.
    pub part_start: u16,
    /// Partitions accessed.
    pub part_count: u16,
    /// Byte offset inside each partition, relative to the location.
    pub offset: u32,
    /// Element size in bytes.
    pub elem_size: u8,
    /// Dims, outermost first, strides in elements.
    pub dims: &'a [super::Dim],
}

/// The extent of a pattern with the given plain fields and extension, in
/// a module whose loops give the trip counts (see [`Extent`]). Computed in
/// `i64` with saturation: a hostile pattern saturates, never overflows.
pub fn extent(m: &Module, plain: PlainFields<'_>, ext: &ApExt) -> Extent {
    let PlainFields {
        loc,
        part_start,
        part_count,
        offset,
        elem_size,
        dims,
    } = plain;
    let (lo, hi) = super::ap::element_span(dims).unwrap_or((0, 0));
    let es = elem_size as i64;
    let mut b0 = (offset as i64).saturating_add(lo.saturating_mul(es));
    let mut b1 = (offset as i64).saturating_add(hi.saturating_mul(es));
    let mut p0 = part_start as i64;
    let step = match ext.pstep {
        Some(s) => s as i64,
        None => 1,
    };
    let mut p1 = p0.saturating_add(if step == 0 { 1 } else { part_count as i64 });
    for t in &ext.terms {
        let trip = m.loops().trip.get(t.lp).copied().unwrap_or(1);
        let trip = if trip == UNKNOWN_TRIP { 1 } else { trip };
        let trip = t.indices(trip);
        let (bl, bh) = term_range(t.bytes, trip);
        b0 = b0.saturating_add(bl);
        b1 = b1.saturating_add(bh);
        let (pl, ph) = term_range(t.parts as i64, trip);
        p0 = p0.saturating_add(pl);
        p1 = p1.saturating_add(ph);
    }
    if let Some(r) = ext.reg {
        b0 = r.window_lo as i64;
        b1 = r.window_hi as i64;
    }
    let dram = m.mems().space.get(loc).copied() == Some(Space::Dram);
    if dram && ext.pstep.is_some() {
        // Flat: row `part_start` (moved by the partition terms) plus
        // q × pitch for the pattern's partitions.
        let row = m.mems().bytes.get(loc).copied().unwrap_or(0) as i64;
        let pitch = step.saturating_mul(part_count.saturating_sub(1) as i64);
        // The first row's hull over the iterations: [p0, p1 - width].
        let width = if step == 0 { 1 } else { part_count as i64 };
        let first_hi = p1.saturating_sub(width);
        return Extent {
            part_lo: 0,
            part_hi: 1,
            byte_lo: p0.saturating_mul(row).saturating_add(b0),
            byte_hi: first_hi
                .saturating_mul(row)
                .saturating_add(pitch)
                .saturating_add(b1),
            flat: true,
        };
    }
    Extent {
        part_lo: p0,
        part_hi: p1,
        byte_lo: b0,
        byte_hi: b1,
        flat: false,
    }
}

/// Checks the invariants of the module doc for a pattern of an instruction
/// in loop `inner` (innermost enclosing loop) with `n_use` used registers,
/// as an input (`read`) or output.
pub fn check(
    m: &Module,
    inner: Loop,
    n_use: usize,
    read: bool,
    plain: PlainFields<'_>,
    ext: &ApExt,
) -> Result<(), PatternError> {
    let loc = plain.loc;
    if ext.is_plain() {
        return Ok(());
    }
    for (k, t) in ext.terms.iter().enumerate() {
        if ext.terms.iter().take(k).any(|u| u.lp == t.lp) {
            return Err(PatternError::DuplicateLoop);
        }
        if t.wrap == 1 {
            return Err(PatternError::BadWrap);
        }
        match m.loops().trip.get(t.lp) {
            Some(&trip) if trip != UNKNOWN_TRIP => {}
            Some(_) => return Err(PatternError::UnknownTrip),
            None => return Err(PatternError::NotEnclosing),
        }
        if m.loop_name(t.lp).is_none() {
            return Err(PatternError::UnnamedLoop);
        }
        let mut l = inner;
        while l.is_valid() && l != t.lp {
            l = m.loops().parent.get(l).copied().unwrap_or(Loop::INVALID);
        }
        if !l.is_valid() {
            return Err(PatternError::NotEnclosing);
        }
    }
    let space = m.mems().space.get(loc).copied().unwrap_or(Space::Dram);
    if ext.pstep == Some(0) && (!read || !space.is_on_chip()) {
        return Err(PatternError::BadStep);
    }
    if space.is_on_chip() && ext.pstep.is_some_and(|s| s > 1) {
        return Err(PatternError::BadStep);
    }
    let row = m.mems().bytes.get(loc).copied().unwrap_or(0);
    if let Some(r) = ext.reg {
        if r.use_index as usize >= n_use {
            return Err(PatternError::NoSuchUse);
        }
        if r.window_lo >= r.window_hi || r.window_hi > row {
            return Err(PatternError::BadWindow);
        }
    }
    let e = extent(m, plain, ext);
    let parts = m.mems().partitions.get(loc).copied().unwrap_or(0) as i64;
    let inside = if e.flat {
        e.byte_lo >= 0 && e.byte_hi <= parts.saturating_mul(row as i64)
    } else {
        e.part_lo >= 0 && e.part_hi <= parts && e.byte_lo >= 0 && e.byte_hi <= row as i64
    };
    if !inside {
        return Err(PatternError::Outside { extent: e });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_ranges_cover_every_iteration() {
        assert_eq!(term_range(1024, 4), (0, 3072));
        assert_eq!(term_range(-128, 3), (-256, 0));
        assert_eq!(term_range(7, 1), (0, 0));
    }

    #[test]
    fn a_wrapped_term_cycles_through_its_slots() {
        let t = IvTerm {
            wrap: 3,
            ..IvTerm::affine(Loop::new(0), 0, 512)
        };
        let ks: [u32; 7] = core::array::from_fn(|iv| t.index(iv as u32));
        assert_eq!(ks, [0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(t.indices(8), 3);
        assert_eq!(t.indices(2), 2);
        let a = IvTerm::affine(Loop::new(0), 0, 512);
        assert_eq!((a.index(7), a.indices(8)), (7, 8));
    }
}
