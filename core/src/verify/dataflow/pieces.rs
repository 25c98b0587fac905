//! Value runs: what one operand read, in its traversal order, and the
//! comparison of two such reads.

use alloc::vec::Vec;

use super::report::{DataflowError, Origin, Value};

/// A run of consecutive value bytes: bytes `offset..offset + len` of
/// `origin` (offset 0 for uninitialized memory, which has no order).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Piece {
    pub origin: Origin,
    pub offset: u64,
    pub len: u64,
}

/// A list of value runs that merges a run continuing the last one. Grows
/// (fallibly) when its reserve is exhausted.
#[derive(Debug, Default)]
pub(super) struct Pieces {
    pub v: Vec<Piece>,
}

/// Pushes onto a vector, growing it by doubling through `try_reserve`, and
/// reports a [`DataflowError::Capacity`] naming `what` when the heap says
/// no. The checker runs after the passes (it is a check, not a pass), so
/// it may grow; the estimate it reserves first makes growth rare.
pub(super) fn push_grow<T>(v: &mut Vec<T>, x: T, what: &'static str) -> Result<(), DataflowError> {
    if v.len() == v.capacity() && v.try_reserve(v.len().max(64)).is_err() {
        return Err(DataflowError::Capacity {
            what,
            reserved: v.capacity(),
        });
    }
    v.push(x);
    Ok(())
}

impl Pieces {
    pub fn clear(&mut self) {
        self.v.clear();
    }

    pub fn len(&self) -> usize {
        self.v.len()
    }

    pub fn push(&mut self, origin: Origin, offset: u64, len: u64) -> Result<(), DataflowError> {
        if len == 0 {
            return Ok(());
        }
        if let Some(last) = self.v.last_mut() {
            let continues = last.origin == origin
                && (origin == Origin::Uninit || last.offset.wrapping_add(last.len) == offset);
            if continues {
                last.len += len;
                return Ok(());
            }
        }
        let offset = if origin == Origin::Uninit { 0 } else { offset };
        push_grow(
            &mut self.v,
            Piece {
                origin,
                offset,
                len,
            },
            "one instruction's reads",
        )
    }
}

/// Walks a slice of pieces handing out up to `n` bytes at a time.
pub(super) struct Cursor<'p> {
    pieces: &'p [Piece],
    at: usize,
    used: u64,
}

impl<'p> Cursor<'p> {
    pub fn new(pieces: &'p [Piece]) -> Self {
        Cursor {
            pieces,
            at: 0,
            used: 0,
        }
    }

    /// The next at most `n` bytes that belong to one piece, or `None` at the end.
    pub fn take(&mut self, n: u64) -> Option<Piece> {
        let p = *self.pieces.get(self.at)?;
        let k = (p.len - self.used).min(n);
        let offset = if p.origin == Origin::Uninit {
            0
        } else {
            p.offset.wrapping_add(self.used)
        };
        self.used += k;
        if self.used == p.len {
            self.at += 1;
            self.used = 0;
        }
        Some(Piece {
            origin: p.origin,
            offset,
            len: k,
        })
    }
}

/// The first byte where `found` differs from `expected` (an expected
/// uninitialized byte matches anything), as (byte, expected, found).
pub(super) fn first_difference(expected: &[Piece], found: &[Piece]) -> Option<(u64, Value, Value)> {
    let (mut i, mut j) = (0usize, 0usize);
    let (mut ui, mut uj) = (0u64, 0u64); // bytes used of expected[i], found[j]
    let mut byte: u64 = 0;
    let val = |p: &Piece, used: u64| Value {
        origin: p.origin,
        offset: if p.origin == Origin::Uninit {
            0
        } else {
            p.offset.wrapping_add(used)
        },
    };
    while i < expected.len() && j < found.len() {
        let (e, f) = (&expected[i], &found[j]);
        let n = (e.len - ui).min(f.len - uj);
        let same = e.origin == Origin::Uninit
            || (e.origin == f.origin && e.offset.wrapping_add(ui) == f.offset.wrapping_add(uj));
        if !same {
            return Some((byte, val(e, ui), val(f, uj)));
        }
        byte += n;
        ui += n;
        uj += n;
        if ui == e.len {
            i += 1;
            ui = 0;
        }
        if uj == f.len {
            j += 1;
            uj = 0;
        }
    }
    // Lengths differ only when operand sizes changed.
    let missing = Value {
        origin: Origin::Uninit,
        offset: 0,
    };
    match (expected.get(i), found.get(j)) {
        (Some(e), None) if e.origin != Origin::Uninit => Some((byte, val(e, ui), missing)),
        (None, Some(f)) => Some((byte, missing, val(f, uj))),
        _ => None,
    }
}
