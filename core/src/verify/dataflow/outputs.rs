//! The last step of the check: the final contents of the original's
//! outputs, read at the end of both programs and compared.
//!
//! An output whose cells both final states store alike — the same runs,
//! at the same places relative to the output's first cell, with the same
//! values ([`CellMap::stored_alike`]) — holds the same bytes in both and
//! is not read: the passes leave most outputs so (the same saves, only
//! their sources moved), and reading them was most of this step's cost.
//! Any other output is read and compared byte for byte, as follows.
//!
//! Each output is read in blocks of partitions sized to the scratch
//! reserved for one instruction's reads. A read gives one run per slab and
//! band whatever the partition count when the partitions hold one tile, so
//! an output is usually one read; one written in pieces on each partition
//! gives runs per row, and the most runs a row gave so far shrink the next
//! blocks (down to one row). The first differing byte of an output is its
//! finding; where the blocks fall does not move it (both programs read the
//! same rows in each block, in order).
//!
//! The outputs do not depend on each other and the states are only read,
//! so with a [`SplitRunner`] the comparison runs on two threads
//! ([`compare_split`]): each takes a share of the outputs (cut in the
//! outputs' order where half of their bytes lie before), with scratch of
//! its own within half of the storage the limit leaves, and the two
//! tallies are merged in the outputs' order — the findings of the one-thread
//! comparison, in the same order, the same ones kept and dropped. When a
//! share meets an error (its storage share, a read the state refuses), the
//! comparison runs again on one thread, so the errors are that
//! comparison's too.

use super::checker::{DataflowChecker, Tally};
use super::pieces::{first_difference, Piece, Pieces};
use super::report::{DataflowError, Mismatch};
use super::shape::{loc_rect, Layout, Seg};
use super::split::SplitRunner;
use super::state::{CellMap, ReadScratch};
use crate::ir::{MemFlags, MemLoc, Module};

/// The cells of partitions `[q, q + k)` of location `l` in `m`'s state:
/// region, partitions, and the bytes (a flat location holds its partitions
/// one after the other on one row, in the same traversal order).
fn output_rows(m: &Module, layout: &Layout, l: MemLoc, q: u64, k: u64) -> (usize, u32, u32, Seg) {
    let (r, seg) = loc_rect(m, layout, l);
    let bytes = m.mems().bytes[l] as u64;
    if r.parts() == 1 {
        let a = seg.a.saturating_add(q.saturating_mul(bytes));
        let b = a.saturating_add(k.saturating_mul(bytes));
        (r.region, r.p0, r.p0 + 1, Seg::once(a, b))
    } else {
        (r.region, r.p0 + q as u32, r.p0 + (q + k) as u32, seg)
    }
}

/// The original's output locations, in index order.
fn outputs(original: &Module) -> impl Iterator<Item = MemLoc> + '_ {
    let mems = original.mems();
    mems.space
        .keys()
        .filter(move |&l| mems.flags[l].contains(MemFlags::OUTPUT))
}

/// Bytes of output `l` (all partitions).
fn output_bytes(original: &Module, l: MemLoc) -> u64 {
    let mems = original.mems();
    (mems.partitions[l] as u64).saturating_mul(mems.bytes[l] as u64)
}

/// Most runs a share's block reads (16,384 runs: 640 KiB a buffer).
const SHARE_BLOCK_RUNS: u64 = 1 << 14;

/// Reads blocks of rows of both programs' final states.
trait OutputReader {
    /// Reads partitions `[q, q + n)` of output `l` at the end of program
    /// `side` (0 the original, 1 the rewrite) into that side's buffer.
    fn read(&mut self, side: usize, l: MemLoc, q: u64, n: u64) -> Result<(), DataflowError>;
    /// Runs after the two reads of every block: the storage check.
    fn after_block(&mut self) -> Result<(), DataflowError>;
    /// The runs the last read of `side` gave.
    fn runs(&self, side: usize) -> &[Piece];
    /// Whether output `l` is stored alike in both final states
    /// ([`stored_alike`]).
    fn stored_alike(&self, l: MemLoc) -> bool;
}

/// True when output `l` is stored alike in both final states (the same
/// runs at the same places of its cells: [`CellMap::stored_alike`]): it
/// then holds the same bytes in both, and reading it would find no
/// difference. Outputs the passes left as they were are the common case;
/// any other is read.
fn stored_alike(
    modules: [&Module; 2],
    layouts: [&Layout; 2],
    states: [&CellMap; 2],
    l: MemLoc,
) -> bool {
    let parts = modules[0].mems().partitions[l] as u64;
    let [(r0, p0, p1, s0), (r1, q0, q1, s1)] =
        [0, 1].map(|k| output_rows(modules[k], layouts[k], l, 0, parts));
    p1 - p0 == q1 - q0
        && s0.b - s0.a == s1.b - s1.a
        && states[0].stored_alike(r0, (p0, p1), (s0.a, s0.b), states[1], r1, q0, s1.a)
}

/// Compares the final contents of output `l` block by block: its first
/// difference, if any. `per_row` (the most runs one row gave so far)
/// carries over from output to output and sizes the blocks to about
/// `target` runs.
fn compare_output(
    rd: &mut dyn OutputReader,
    original: &Module,
    l: MemLoc,
    target: u64,
    per_row: &mut Option<u64>,
) -> Result<Option<Mismatch>, DataflowError> {
    let (parts, row) = (
        original.mems().partitions[l] as u64,
        original.mems().bytes[l] as u64,
    );
    if rd.stored_alike(l) {
        return Ok(None);
    }
    let mut q = 0u64;
    while q < parts {
        let n = per_row.map_or(1, |r| (target / r).clamp(1, parts - q));
        rd.read(0, l, q, n)?;
        rd.read(1, l, q, n)?;
        rd.after_block()?;
        if let Some((byte, expected, found)) = first_difference(rd.runs(0), rd.runs(1)) {
            return Ok(Some(Mismatch::Output {
                mem: l,
                byte: q * row + byte,
                expected,
                found,
            }));
        }
        let runs = rd.runs(0).len().max(rd.runs(1).len()) as u64;
        *per_row = Some(per_row.unwrap_or(1).max(runs.div_ceil(n)));
        q += n;
    }
    Ok(None)
}

/// The comparison on the checker's own buffers (the sides' read buffers),
/// the storage checked against the checker's limit after every block.
struct OneThread<'c, 'm> {
    checker: &'c mut DataflowChecker,
    modules: [&'m Module; 2],
}

impl OutputReader for OneThread<'_, '_> {
    fn read(&mut self, side: usize, l: MemLoc, q: u64, n: u64) -> Result<(), DataflowError> {
        let (s, m) = match side {
            0 => (&mut self.checker.orig, self.modules[0]),
            _ => (&mut self.checker.rw, self.modules[1]),
        };
        s.reads.clear();
        let (region, p0, p1, seg) = output_rows(m, &s.layout, l, q, n);
        s.state.read(region, p0, p1, &[seg], &mut s.reads)
    }

    fn after_block(&mut self) -> Result<(), DataflowError> {
        self.checker.within_budget()
    }

    fn runs(&self, side: usize) -> &[Piece] {
        match side {
            0 => &self.checker.orig.reads.v,
            _ => &self.checker.rw.reads.v,
        }
    }

    fn stored_alike(&self, l: MemLoc) -> bool {
        let c = &*self.checker;
        c.skip_alike_outputs
            && stored_alike(
                self.modules,
                [&c.orig.layout, &c.rw.layout],
                [&c.orig.state, &c.rw.state],
                l,
            )
    }
}

/// Blocks of the scratch both sides reserved for one instruction's reads.
fn block_target(c: &DataflowChecker) -> u64 {
    c.orig
        .reads
        .v
        .capacity()
        .min(c.rw.reads.v.capacity())
        .max(1) as u64
}

/// Compares the final contents of the original's outputs on this thread,
/// the checker's storage limit checked after every block.
pub(super) fn compare(
    c: &mut DataflowChecker,
    original: &Module,
    rewritten: &Module,
) -> Result<(), DataflowError> {
    let target = block_target(c);
    // Unknown until a first row was read: the first block is one row, so
    // that a fragmented output never asks the scratch for all of its rows
    // at once (a device's heap may not hold them).
    let mut per_row: Option<u64> = None;
    for l in outputs(original) {
        let mut rd = OneThread {
            checker: c,
            modules: [original, rewritten],
        };
        if let Some(x) = compare_output(&mut rd, original, l, target, &mut per_row)? {
            c.tally.report(x);
        }
    }
    Ok(())
}

/// One thread's share of a split comparison: read-only views of both final
/// states, and scratch and a tally of its own.
struct Share<'a> {
    modules: [&'a Module; 2],
    states: [&'a CellMap; 2],
    layouts: [&'a Layout; 2],
    bufs: [Pieces; 2],
    scratch: ReadScratch,
    /// Heap bytes its scratch may hold.
    limit: u64,
    tally: Tally,
    /// The checker's `skip_alike_outputs`.
    skip_alike: bool,
}

impl<'a> Share<'a> {
    /// A share over `c`'s final states, its buffers reserved to `target`
    /// runs each and capped at `limit` bytes between them (`None` when the
    /// heap refuses the reservation).
    fn new(
        c: &'a DataflowChecker,
        modules: [&'a Module; 2],
        limit: u64,
        target: u64,
    ) -> Option<Self> {
        let mut s = Share {
            modules,
            states: [&c.orig.state, &c.rw.state],
            layouts: [&c.orig.layout, &c.rw.layout],
            bufs: [Pieces::default(), Pieces::default()],
            scratch: ReadScratch::default(),
            limit,
            tally: Tally::with_limit(c.tally.max_mismatches),
            skip_alike: c.skip_alike_outputs,
        };
        let runs =
            usize::try_from(limit / core::mem::size_of::<Piece>() as u64 / 2).unwrap_or(usize::MAX);
        for b in &mut s.bufs {
            b.v.try_reserve(target as usize).ok()?;
            b.set_cap(Some(runs));
        }
        s.tally
            .mismatches
            .try_reserve(s.tally.max_mismatches)
            .ok()?;
        Some(s)
    }

    fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.bufs[0].v, self.bufs[1].v)
            .saturating_add(self.scratch.heap_bytes())
            .saturating_add(self.tally.heap_bytes())
    }

    /// Compares the outputs from the `from`-th to before the `to`-th.
    fn run(&mut self, from: usize, to: usize, target: u64) -> Result<(), DataflowError> {
        let original = self.modules[0];
        let mut per_row: Option<u64> = None;
        for l in outputs(original).take(to).skip(from) {
            if let Some(x) = compare_output(self, original, l, target, &mut per_row)? {
                self.tally.report(x);
            }
        }
        Ok(())
    }
}

impl OutputReader for Share<'_> {
    fn read(&mut self, side: usize, l: MemLoc, q: u64, n: u64) -> Result<(), DataflowError> {
        let s = side.min(1);
        let buf = &mut self.bufs[s];
        buf.clear();
        let (region, p0, p1, seg) = output_rows(self.modules[s], self.layouts[s], l, q, n);
        self.states[s].read_with(region, p0, p1, &[seg], buf, &mut self.scratch)
    }

    fn after_block(&mut self) -> Result<(), DataflowError> {
        let bytes = self.heap_bytes();
        if bytes > self.limit {
            return Err(DataflowError::OverBudget {
                bytes,
                limit: self.limit,
            });
        }
        Ok(())
    }

    fn runs(&self, side: usize) -> &[Piece] {
        &self.bufs[side.min(1)].v
    }

    fn stored_alike(&self, l: MemLoc) -> bool {
        self.skip_alike && stored_alike(self.modules, self.layouts, self.states, l)
    }
}

/// [`compare`] on two threads when `runner` runs two closures at once and
/// the storage limit leaves room for a second scratch (see the module doc);
/// the same findings, or error, as [`compare`].
pub(super) fn compare_split(
    c: &mut DataflowChecker,
    original: &Module,
    rewritten: &Module,
    runner: &dyn SplitRunner,
) -> Result<(), DataflowError> {
    // A share's blocks are at most SHARE_BLOCK_RUNS runs (so that its own
    // buffers stay small beside the checker's); where the blocks fall
    // does not change the findings.
    let target = block_target(c).min(SHARE_BLOCK_RUNS);
    let room = c.storage_limit().saturating_sub(c.heap_bytes());
    // Each share's buffers start at `target` runs and may grow to half the
    // room between them.
    let start_bytes = target.saturating_mul(2 * core::mem::size_of::<Piece>() as u64);
    let limit = room / 2;
    let (total, n) = outputs(original).fold((0u64, 0usize), |(b, n), l| {
        (b.saturating_add(output_bytes(original, l)), n + 1)
    });
    if n < 2 || limit < start_bytes.saturating_mul(2) {
        return compare(c, original, rewritten);
    }
    // The cut: the first output at or past half of the bytes.
    let mut before = 0u64;
    let cut = outputs(original)
        .position(|l| {
            before = before.saturating_add(output_bytes(original, l));
            before >= total / 2
        })
        .map_or(n, |k| (k + 1).min(n - 1));
    let modules = [original, rewritten];
    let (Some(mut first), Some(mut second)) = (
        Share::new(c, modules, limit, target),
        Share::new(c, modules, limit, target),
    ) else {
        return compare(c, original, rewritten);
    };
    let (mut a, mut b) = (Ok(()), Ok(()));
    runner.both(&mut || a = first.run(0, cut, target), &mut || {
        b = second.run(cut, n, target)
    });
    if a.is_err() || b.is_err() {
        drop((first, second));
        return compare(c, original, rewritten);
    }
    let (Share { tally: ta, .. }, Share { tally: tb, .. }) = (first, second);
    for t in [ta, tb] {
        for x in t.mismatches {
            c.tally.report(x);
        }
        c.tally.dropped += t.dropped;
    }
    Ok(())
}
