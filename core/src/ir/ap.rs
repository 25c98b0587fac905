//! Access patterns: which bytes of a location an operand touches.
//!
//! An access pattern (AP) names a location, a partition range relative to the
//! location's first partition, a byte offset inside each partition, an element
//! size, and 1..=[`MAX_DIMS`] `(stride, count)` dimensions, outermost first,
//! strides in elements (an instruction's patterns have at most the target's
//! DMA or compute limit, checked when the instruction is made). Every AP belongs to exactly one operand of one instruction, so a
//! rewrite that re-points an operand edits that AP's columns in place.

use crate::target::{Generation, Target};

/// One dimension of an access pattern.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Dim {
    /// Distance between consecutive indices, in elements.
    pub stride: i32,
    /// Number of indices.
    pub count: u32,
}

impl Dim {
    /// A dimension.
    pub const fn new(stride: i32, count: u32) -> Dim {
        Dim { stride, count }
    }
}

/// Most dimensions an access pattern can hold: the fixed capacity of
/// [`ApSpec::dims`](crate::ir::ApSpec::dims) and of the module's dim storage,
/// an engineering bound. The hardware limits are the target's
/// (`dma_max_dims`, `compute_max_dims`): every preset's fit here (checked at
/// compile time below), and a module refuses instructions on a target whose
/// limits exceed it.
pub const MAX_DIMS: usize = 5;

/// The pool slot of a multi-dimension pattern packs its dim count into 3
/// bits, and every preset's limits must fit the storage.
#[allow(clippy::indexing_slicing)] // const evaluation: a bad index fails the build
const _: () = {
    assert!(MAX_DIMS <= 7);
    let presets = [Generation::Trn1, Generation::Trn2, Generation::Trn3];
    let mut k = 0;
    while k < presets.len() {
        let t = Target::preset(presets[k]);
        assert!(t.dma_max_dims as usize <= MAX_DIMS);
        assert!(t.compute_max_dims as usize <= MAX_DIMS);
        k += 1;
    }
};

/// Number of elements the dims address (the product of the counts).
pub fn elements(dims: &[Dim]) -> u64 {
    dims.iter().map(|d| d.count as u64).product()
}

/// The lowest and one-past-highest element index the dims touch, relative to
/// the AP's offset (negative strides allowed). `None` when a count is zero.
pub fn element_span(dims: &[Dim]) -> Option<(i64, i64)> {
    let mut lo: i64 = 0;
    let mut hi: i64 = 0;
    for d in dims {
        if d.count == 0 {
            return None;
        }
        let reach = d.stride as i64 * (d.count as i64 - 1);
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
    }
    Some((lo, hi + 1))
}

/// True when the dims walk one dense, ascending run of elements: the
/// reference's `IsContiguous`. Dimensions of count 1 are ignored (their
/// stride never applies); the innermost remaining stride is 1 and every outer
/// stride equals the extent of everything inside it.
pub fn is_contiguous(dims: &[Dim]) -> bool {
    let mut extent: i64 = 1;
    for d in dims.iter().rev() {
        if d.count == 0 {
            return false;
        }
        if d.count == 1 {
            continue;
        }
        if d.stride as i64 != extent {
            return false;
        }
        extent *= d.count as i64;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguity() {
        assert!(is_contiguous(&[Dim::new(1, 64)]));
        assert!(is_contiguous(&[Dim::new(64, 4), Dim::new(1, 64)]));
        assert!(is_contiguous(&[Dim::new(999, 1), Dim::new(1, 8)]));
        assert!(!is_contiguous(&[Dim::new(128, 4), Dim::new(1, 64)]));
        assert!(!is_contiguous(&[Dim::new(2, 8)]));
        assert!(!is_contiguous(&[Dim::new(-1, 8)]));
        assert!(!is_contiguous(&[Dim::new(1, 0)]));
    }

    #[test]
    fn spans() {
        assert_eq!(
            element_span(&[Dim::new(64, 4), Dim::new(1, 64)]),
            Some((0, 256))
        );
        assert_eq!(element_span(&[Dim::new(-2, 3)]), Some((-4, 1)));
        assert_eq!(element_span(&[Dim::new(1, 0)]), None);
        assert_eq!(elements(&[Dim::new(64, 4), Dim::new(1, 64)]), 256);
    }
}
