//! The verifier's access-pattern rule: every cell any iteration of a
//! pattern may touch lies inside its location, and a register term's
//! window too.
//!
//! Computed here on its own, from the pattern's columns and the loops' trip
//! counts (it does not call the IR's extent helper, which the readers and
//! the passes use): a pass that wrote a pattern whose last iteration leaves
//! its tile, or a window that reaches past the location, is a finding even
//! if the helper were wrong.
//!
//! Per pattern: the partitions `[p, p + n)` (one partition for a broadcast)
//! and the bytes `[offset + lo·e, offset + hi·e)` of the dims (`lo`, `hi`
//! their element span, `e` the element size), each moved by `stride ×
//! (trip − 1)` for every loop term whose stride is negative (low end) or
//! positive (high end) — the box hull of all iterations, which the
//! iterations reach (every combination of induction values occurs). A
//! register term replaces the byte range by its window. A DRAM pattern with
//! an explicit partition step is flat: row `p` (moved) times the row, plus
//! `(n − 1) × step`.

use crate::ir::{Ap, Inst, Module, Space, UNKNOWN_TRIP};

/// Where a pattern reaches over all its iterations, relative to its
/// location: partitions `[p0, p1)` and bytes `[b0, b1)` (flat location
/// bytes when `flat`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Reach {
    /// First partition.
    pub p0: i64,
    /// One past the last partition.
    pub p1: i64,
    /// First byte.
    pub b0: i64,
    /// One past the last byte.
    pub b1: i64,
    /// Flat DRAM bytes (a DRAM pattern with an explicit partition step).
    pub flat: bool,
}

/// Where pattern `a` of instruction `i` reaches, when some iteration (or
/// its register window) leaves its location.
pub(super) fn outside(m: &Module, i: Inst, a: Ap) -> Option<Reach> {
    let l = m.aps().loc[a];
    let ext = m.ap_ext(a);
    let es = m.aps().elem_size[a] as i64;
    let (mut lo, mut hi) = (0i64, 0i64);
    for d in m.ap_dims(a) {
        let reach = (d.stride as i64).saturating_mul(d.count.saturating_sub(1) as i64);
        if reach < 0 {
            lo = lo.saturating_add(reach);
        } else {
            hi = hi.saturating_add(reach);
        }
    }
    let off = m.aps().offset[a] as i64;
    let mut b0 = off.saturating_add(lo.saturating_mul(es));
    let mut b1 = off.saturating_add(hi.saturating_add(1).saturating_mul(es));
    let p = m.aps().part_start[a] as i64;
    let n = m.aps().part_count[a] as i64;
    let bcast = ext.pstep == Some(0);
    let (mut p0, mut p1) = (p, p + if bcast { 1 } else { n });
    for t in &ext.terms {
        let trip = match m.loops().trip.get(t.lp) {
            Some(&t) if t != UNKNOWN_TRIP => t.max(1),
            // An unknown trip: every iteration count is possible; the IR
            // refuses such terms, so a pass made it. Any far iteration
            // leaves the location.
            _ => {
                return Some(Reach {
                    p0,
                    p1: i64::MAX,
                    b0,
                    b1: i64::MAX,
                    flat: false,
                })
            }
        };
        let k = (t.indices(trip) - 1) as i64;
        let (db, dp) = (
            t.bytes.saturating_mul(k),
            (t.parts as i64).saturating_mul(k),
        );
        if db < 0 {
            b0 = b0.saturating_add(db);
        } else {
            b1 = b1.saturating_add(db);
        }
        if dp < 0 {
            p0 = p0.saturating_add(dp);
        } else {
            p1 = p1.saturating_add(dp);
        }
    }
    let row = m.mems().bytes[l] as i64;
    let parts = m.mems().partitions[l] as i64;
    if let Some(r) = ext.reg {
        let bad_use = r.use_index as usize >= m.uses(i).len();
        if bad_use || r.window_lo >= r.window_hi || r.window_hi as i64 > row {
            return Some(Reach {
                p0,
                p1,
                b0: r.window_lo as i64,
                b1: r.window_hi as i64,
                flat: false,
            });
        }
        b0 = r.window_lo as i64;
        b1 = r.window_hi as i64;
    }
    if m.mems().space[l] == Space::Dram && ext.pstep.is_some() {
        let step = ext.pstep.unwrap_or(0) as i64;
        let f0 = p0.saturating_mul(row).saturating_add(b0);
        // The first row's last position over the iterations.
        let first_hi = p1 - if bcast { 1 } else { n };
        let f1 = first_hi
            .saturating_mul(row)
            .saturating_add(step.saturating_mul(n - 1))
            .saturating_add(b1);
        return (f0 < 0 || f1 > parts.saturating_mul(row)).then_some(Reach {
            p0: 0,
            p1: 1,
            b0: f0,
            b1: f1,
            flat: true,
        });
    }
    let inside = p0 >= 0 && p1 <= parts && b0 >= 0 && b1 <= row;
    (!inside).then_some(Reach {
        p0,
        p1,
        b0,
        b1,
        flat: false,
    })
}
