//! Value runs: what one operand read, in its traversal order, and the
//! comparison of two such reads.

use alloc::vec::Vec;

use super::report::{DataflowError, Origin, Value};

/// A group of `reps` runs of `len` consecutive value bytes, one after the
/// other in traversal order, run k holding `len` bytes of `origin` from
/// byte `offset + k × stride` on — the runs a read of a column slice gives, one per
/// partition, in one entry. Uninitialized memory is one run (`reps` 1,
/// offset 0): it has no order. A group whose runs abut (`stride == len`)
/// is stored as one run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Piece {
    pub origin: Origin,
    pub offset: u64,
    pub len: u64,
    pub reps: u64,
    pub stride: u64,
}

impl Piece {
    /// One run.
    pub fn run(origin: Origin, offset: u64, len: u64) -> Self {
        Piece {
            origin,
            offset,
            len,
            reps: 1,
            stride: 0,
        }
    }

    /// Bytes of all its runs.
    pub fn bytes(&self) -> u64 {
        self.len.saturating_mul(self.reps)
    }
}

/// A list of value runs that merges a run continuing the last one. Grows
/// (fallibly) when its reserve is exhausted, never past its cap.
#[derive(Debug, Default)]
pub(super) struct Pieces {
    pub v: Vec<Piece>,
    /// Runs before this index belong to an earlier operand: never extended.
    fence: usize,
    /// Most runs it may grow to (its share of a storage limit, set before
    /// each execution: [`Self::set_cap`]); `None`: no limit.
    cap: Option<usize>,
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

/// [`push_grow`] for a buffer whose growth is its share of a storage
/// limit: never past `cap` entries (`None`: no cap), each `unit` bytes; a
/// buffer that needs more is over its share ([`DataflowError::OverBudget`]).
pub(super) fn push_capped<T>(
    v: &mut Vec<T>,
    x: T,
    cap: Option<usize>,
    unit: u64,
    what: &'static str,
) -> Result<(), DataflowError> {
    if let (Some(cap), true) = (cap, v.len() == v.capacity()) {
        let room = cap.saturating_sub(v.len());
        if room == 0 {
            return Err(DataflowError::OverBudget {
                bytes: (cap as u64).saturating_add(1).saturating_mul(unit),
                limit: (cap as u64).saturating_mul(unit),
            });
        }
        let _ = v.try_reserve_exact(v.len().max(64).min(room));
    }
    push_grow(v, x, what)
}

impl Pieces {
    /// Caps the runs it may grow to (`None`: no cap).
    pub fn set_cap(&mut self, cap: Option<usize>) {
        self.cap = cap;
    }

    pub fn clear(&mut self) {
        self.v.clear();
        self.fence = 0;
    }

    /// Starts a new operand: the runs so far are closed.
    pub fn fence(&mut self) {
        self.fence = self.v.len();
    }

    pub fn len(&self) -> usize {
        self.v.len()
    }

    /// Appends one run.
    pub fn push(&mut self, origin: Origin, offset: u64, len: u64) -> Result<(), DataflowError> {
        self.push_group(origin, offset, len, 1, 0)
    }

    /// Appends `reps` runs of `len` bytes, run k at `offset + k × stride`.
    pub fn push_group(
        &mut self,
        origin: Origin,
        offset: u64,
        len: u64,
        reps: u64,
        stride: u64,
    ) -> Result<(), DataflowError> {
        if len == 0 || reps == 0 {
            return Ok(());
        }
        let (offset, len, reps, stride) = if origin == Origin::Uninit {
            (0, len.saturating_mul(reps), 1, 0)
        } else if reps == 1 || stride == len {
            (offset, len.saturating_mul(reps), 1, 0)
        } else {
            (offset, len, reps, stride)
        };
        let open = self.v.len() > self.fence;
        if let Some(last) = self.v.last_mut().filter(|_| open) {
            if last.origin == origin {
                if origin == Origin::Uninit {
                    last.len = last.len.saturating_add(len);
                    return Ok(());
                }
                let next = last
                    .offset
                    .wrapping_add(last.reps.wrapping_mul(last.stride));
                // One run continuing a run.
                if last.reps == 1 && reps == 1 && last.offset.wrapping_add(last.len) == offset {
                    last.len = last.len.saturating_add(len);
                    return Ok(());
                }
                if last.len == len {
                    // A group (or run) continuing a group with its stride.
                    if last.reps > 1 && (reps == 1 || stride == last.stride) && offset == next {
                        last.reps += reps;
                        return Ok(());
                    }
                    // Two runs, or a run and a group, forming a group.
                    if last.reps == 1 {
                        let d = offset.wrapping_sub(last.offset);
                        if reps == 1 || stride == d {
                            last.stride = d;
                            last.reps += reps;
                            return Ok(());
                        }
                    }
                }
            }
        }
        let piece = Piece {
            origin,
            offset,
            len,
            reps,
            stride,
        };
        let size = core::mem::size_of::<Piece>() as u64;
        push_capped(
            &mut self.v,
            piece,
            self.cap,
            size,
            "one instruction's reads",
        )
    }
}

/// Walks a slice of pieces run by run, handing out bytes.
pub(super) struct Cursor<'p> {
    pieces: &'p [Piece],
    at: usize,
    /// The run of `pieces[at]`, and the bytes of it already handed out.
    rep: u64,
    used: u64,
}

impl<'p> Cursor<'p> {
    pub fn new(pieces: &'p [Piece]) -> Self {
        Cursor {
            pieces,
            at: 0,
            rep: 0,
            used: 0,
        }
    }

    /// The current position: (origin, value offset, bytes left in the
    /// run), or `None` at the end.
    fn here(&self) -> Option<(Origin, u64, u64)> {
        let p = self.pieces.get(self.at)?;
        let offset = if p.origin == Origin::Uninit {
            0
        } else {
            p.offset
                .wrapping_add(self.rep.wrapping_mul(p.stride))
                .wrapping_add(self.used)
        };
        Some((p.origin, offset, p.len - self.used))
    }

    fn advance(&mut self, n: u64) {
        let Some(p) = self.pieces.get(self.at) else {
            return;
        };
        self.used += n;
        if self.used == p.len {
            self.used = 0;
            self.rep += 1;
            if self.rep == p.reps {
                self.rep = 0;
                self.at += 1;
            }
        }
    }

    /// Skips `n` whole runs of the current group (at a run start, `n` at
    /// most the runs left).
    fn skip_runs(&mut self, n: u64) {
        self.rep += n;
        if self.pieces.get(self.at).is_some_and(|p| self.rep == p.reps) {
            self.rep = 0;
            self.at += 1;
        }
    }

    /// The next at most `n` bytes that belong to one run, or `None` at the end.
    pub fn take(&mut self, n: u64) -> Option<Piece> {
        let (origin, offset, left) = self.here()?;
        let k = left.min(n);
        self.advance(k);
        Some(Piece::run(origin, offset, k))
    }

    /// When both cursors stand at the start of a run of groups with the
    /// same runs (origin, length, stride, current offset): skips the runs
    /// both have left, returning the bytes skipped.
    fn skip_alike(&mut self, other: &mut Cursor<'_>) -> u64 {
        if self.used != 0 || other.used != 0 {
            return 0;
        }
        let (Some(p), Some(q)) = (self.pieces.get(self.at), other.pieces.get(other.at)) else {
            return 0;
        };
        if p.reps - self.rep < 2 || q.reps - other.rep < 2 {
            return 0;
        }
        let alike = p.origin == q.origin
            && p.len == q.len
            && p.stride == q.stride
            && p.offset.wrapping_add(self.rep.wrapping_mul(p.stride))
                == q.offset.wrapping_add(other.rep.wrapping_mul(q.stride));
        if !alike {
            return 0;
        }
        let n = (p.reps - self.rep).min(q.reps - other.rep);
        self.skip_runs(n);
        other.skip_runs(n);
        n * p.len
    }
}

/// The first byte where `found` differs from `expected` (an expected
/// uninitialized byte matches anything), as (byte, expected, found).
pub(super) fn first_difference(expected: &[Piece], found: &[Piece]) -> Option<(u64, Value, Value)> {
    let (mut e, mut f) = (Cursor::new(expected), Cursor::new(found));
    let mut byte: u64 = 0;
    let val = |(origin, offset, _): (Origin, u64, u64)| Value { origin, offset };
    loop {
        byte += e.skip_alike(&mut f);
        match (e.here(), f.here()) {
            (Some(x), Some(y)) => {
                let same = x.0 == Origin::Uninit || val(x).same_as(&val(y));
                if !same {
                    return Some((byte, val(x), val(y)));
                }
                let n = x.2.min(y.2);
                byte += n;
                e.advance(n);
                f.advance(n);
            }
            // Lengths differ only when operand sizes changed; expected
            // uninitialized bytes match even missing ones.
            (Some(x), None) if x.0 != Origin::Uninit => {
                return Some((byte, val(x), Value::UNINIT));
            }
            (Some(x), None) => {
                byte += x.2;
                e.advance(x.2);
            }
            (None, Some(y)) => return Some((byte, Value::UNINIT, val(y))),
            _ => return None,
        }
    }
}
