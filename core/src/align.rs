//! Rounding up to an alignment: the one place every pass, analysis and
//! generator rounds an offset or a size, so that an alignment of 0 and an
//! overflow are handled the same way everywhere.

/// Rounds `x` up to a multiple of `align` (0 counts as 1); `None` when the
/// multiple is beyond `u64`.
#[inline]
pub const fn align_up(x: u64, align: u64) -> Option<u64> {
    let a = if align == 0 { 1 } else { align };
    let r = x % a;
    if r == 0 {
        Some(x)
    } else {
        x.checked_add(a - r)
    }
}

/// [`align_up`] that saturates at `u64::MAX` instead of failing: for the
/// sizes and offsets of a module or a problem, which their limits keep far
/// below `u64::MAX` (bytes per partition are a `u32`, offsets stay within a
/// space's capacity, a problem's sums stay below `u64::MAX / 4`). Were one
/// to reach it, the saturated value shows as a placement off the top, which
/// the peak and the verifier report, rather than wrapping to a small one.
#[inline]
pub const fn align_saturating(x: u64, align: u64) -> u64 {
    match align_up(x, align) {
        Some(v) => v,
        None => u64::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_up_treats_zero_as_one_and_reports_overflow() {
        assert_eq!(align_up(0, 8), Some(0));
        assert_eq!(align_up(9, 8), Some(16));
        assert_eq!(align_up(16, 8), Some(16));
        assert_eq!(align_up(5, 0), Some(5));
        assert_eq!(align_up(u64::MAX - 1, 4), None);
        assert_eq!(align_up(u64::MAX - 3, 4), Some(u64::MAX - 3));
        assert_eq!(align_saturating(u64::MAX - 1, 4), u64::MAX);
        assert_eq!(align_saturating(3, 2048), 2048);
    }
}
