//! The lockstep walk split in two halves that can run on two threads.
//!
//! The original program's walk does not depend on the rewrite: which of its
//! executions the rewrite must meet is fixed (the ones of instructions still
//! linked in the rewrite, in the original's order), and its values are its
//! own. So the original's half walks the whole original on its own — reading
//! and writing as the sequential walk does — and sends, for every execution
//! of a linked instruction, its reads, in order, in batches
//! ([`ReadBatch`]); the rewrite's half walks the rewrite and, where the
//! sequential walk would walk the original up to the same execution, takes
//! the next record instead and compares.
//!
//! Same findings, same errors, same order as the sequential walk
//! (`checker`): a record carries the error the original's walk met at that
//! point (the walker, a removed instruction's read or write, a linked one's
//! read, or its write after the comparison), and the rewrite's half raises
//! it exactly where the sequential walk would have met it — before it or
//! after it, the rewrite's own errors come first or last as they do there.
//! The reordering rules are the sequential ones: a linked original
//! execution other than the one the rewrite runs, or none left, or one left
//! at the end, is [`DataflowError::Reordered`].
//!
//! The core has no threads: a [`SplitRunner`] (the std shim's) runs the
//! halves and carries the batches between them. Storage: each half checks
//! its own storage plus the other's, counted as it was when the walk began
//! plus half of what the limit left then, against the limit, and caps its
//! growth at what that leaves; the batches in flight are the runner's
//! bound times [`BATCH_RUNS`] runs.

use alloc::vec::Vec;

use super::checker::{compare, Tally};
use super::pieces::{push_grow, Piece};
use super::report::DataflowError;
use super::side::{ReadsView, Side};
use super::walk::LoopPlan;
use crate::ir::{Inst, Module};

/// Runs sent per batch (a batch is sent when it holds this many, or
/// [`BATCH_RECORDS`] records).
pub const BATCH_RUNS: usize = 1 << 14;
/// Records sent per batch at most.
pub const BATCH_RECORDS: usize = 1 << 12;

/// What the original's walk met at one point of its order.
#[derive(Copy, Clone, Debug)]
enum Record {
    /// An execution of `inst`, linked in the rewrite: its operands are
    /// `ops[op0 ..= op0 + n_ops]` of the batch (boundaries into its runs)
    /// unless its read failed (`read`); `write` is what its write gave.
    Exec {
        inst: Inst,
        op0: u32,
        n_ops: u32,
        read: Option<DataflowError>,
        write: Option<DataflowError>,
    },
    /// The walk failed here (the walker, or the read or write of an
    /// instruction the rewrite removed).
    Fail(DataflowError),
    /// The original's walk ended.
    End,
}

/// A run of the original's records and the reads they name.
#[derive(Debug, Default)]
pub struct ReadBatch {
    pieces: Vec<Piece>,
    ops: Vec<u32>,
    records: Vec<Record>,
}

impl ReadBatch {
    fn clear(&mut self) {
        self.pieces.clear();
        self.ops.clear();
        self.records.clear();
    }

    fn full(&self) -> bool {
        self.pieces.len() >= BATCH_RUNS || self.records.len() >= BATCH_RECORDS
    }

    fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.pieces, self.ops, self.records)
    }

    fn view(&self, op0: u32, n_ops: u32) -> ReadsView<'_> {
        let (a, b) = (op0 as usize, op0 as usize + n_ops as usize + 1);
        ReadsView {
            pieces: &self.pieces,
            ops: self.ops.get(a..b).unwrap_or(&[]),
        }
    }

    /// Appends the reads of `side`'s last read and the record of `inst`.
    fn push_exec(&mut self, side: &Side, inst: Inst) -> Result<(), DataflowError> {
        const WHAT: &str = "the original's reads in flight";
        let v = side.view();
        let base = self.pieces.len() as u32;
        let op0 = self.ops.len() as u32;
        if self.pieces.try_reserve(v.pieces.len()).is_err()
            || self.ops.try_reserve(v.ops.len()).is_err()
        {
            return Err(DataflowError::Capacity {
                what: WHAT,
                reserved: self.pieces.capacity(),
            });
        }
        self.pieces.extend_from_slice(v.pieces);
        self.ops.extend(v.ops.iter().map(|&x| x + base));
        self.push(Record::Exec {
            inst,
            op0,
            n_ops: v.n_operands() as u32,
            read: None,
            write: None,
        })
    }

    fn push(&mut self, r: Record) -> Result<(), DataflowError> {
        push_grow(&mut self.records, r, "the original's reads in flight")
    }
}

/// Runs the two halves of a split check: [`OriginalHalf::run`] on another
/// thread, [`RewriteHalf::run`] on this one, carrying batches from the
/// first to the second (and spent ones back, for reuse) through a bounded
/// queue. Returns the rewrite half's result.
pub trait SplitRunner: core::fmt::Debug + Send + Sync {
    /// Runs both halves to their end (see the trait doc).
    fn run(
        &self,
        original_half: OriginalHalf<'_>,
        rewrite_half: RewriteHalf<'_>,
        original: &Module,
        rewritten: &Module,
    ) -> Result<(), DataflowError>;

    /// Runs `a` and `b` to their ends, at the same time where the runner
    /// can (`a` on another thread); by default one after the other.
    fn both(&self, a: &mut (dyn FnMut() + Send), b: &mut (dyn FnMut() + Send)) {
        a();
        b();
    }
}

/// The original program's half of a split check.
#[derive(Debug)]
pub struct OriginalHalf<'c> {
    side: &'c mut Side,
    plan: &'c LoopPlan,
    limit: u64,
    others: u64,
}

/// The rewrite's half of a split check.
#[derive(Debug)]
pub struct RewriteHalf<'c> {
    side: &'c mut Side,
    tally: &'c mut Tally,
    plan: &'c LoopPlan,
    limit: u64,
    others: u64,
}

/// The two halves over a checker's sides, both begun.
pub(super) fn halves<'c>(
    orig: &'c mut Side,
    rw: &'c mut Side,
    tally: &'c mut Tally,
    plan: &'c LoopPlan,
    limit: u64,
) -> (OriginalHalf<'c>, RewriteHalf<'c>) {
    let shared = plan.heap_bytes().saturating_add(tally.heap_bytes());
    let (o_bytes, r_bytes) = (orig.heap_bytes(), rw.heap_bytes());
    // Each half may grow by half of what the limit leaves now: the other
    // half is counted at its share's end, so that both stay within it
    // together while neither sees the other's storage.
    let share = if limit == u64::MAX {
        0
    } else {
        limit
            .saturating_sub(o_bytes.saturating_add(r_bytes).saturating_add(shared))
            .div_ceil(2)
    };
    (
        OriginalHalf {
            side: orig,
            plan,
            limit,
            others: r_bytes.saturating_add(shared).saturating_add(share),
        },
        RewriteHalf {
            side: rw,
            tally,
            plan,
            limit,
            others: o_bytes
                .saturating_add(plan.heap_bytes())
                .saturating_add(share),
        },
    )
}

/// What `limit` leaves a half holding `bytes` (`None` without a limit):
/// its growth in the next execution is capped at that
/// ([`Side::cap_growth`]).
fn slack(bytes: u64, limit: u64) -> Option<u64> {
    (limit != u64::MAX).then(|| limit.saturating_sub(bytes))
}

fn within(bytes: u64, limit: u64) -> Result<(), DataflowError> {
    if bytes > limit {
        return Err(DataflowError::OverBudget { bytes, limit });
    }
    Ok(())
}

impl OriginalHalf<'_> {
    /// Walks the original to its end (or its first error), sending each
    /// full batch through `send`, which hands back an empty one to fill
    /// next, or `None` when the rewrite's half stopped listening (then the
    /// walk stops). The last batch sent ends with the end or the error.
    pub fn run(
        mut self,
        original: &Module,
        rewritten: &Module,
        send: &mut dyn FnMut(ReadBatch) -> Option<ReadBatch>,
    ) {
        let mut batch = ReadBatch::default();
        loop {
            let last = self.step(original, rewritten, &mut batch);
            if last.is_err() || batch.full() {
                let stop = last.is_err();
                match send(core::mem::take(&mut batch)) {
                    Some(mut b) if !stop => {
                        b.clear();
                        batch = b;
                    }
                    _ => return,
                }
            }
        }
    }

    /// One execution of the original into `batch`; `Err` once the batch
    /// holds its last record.
    fn step(
        &mut self,
        original: &Module,
        rewritten: &Module,
        batch: &mut ReadBatch,
    ) -> Result<(), ()> {
        let fail = |batch: &mut ReadBatch, e| {
            // A record that cannot be stored still ends the walk: the
            // rewrite's half sees the batch end without an end and reports
            // the half as failed.
            let _ = batch.push(Record::Fail(e));
            Err(())
        };
        let bytes = self
            .side
            .heap_bytes()
            .saturating_add(batch.heap_bytes())
            .saturating_add(self.others);
        if let Err(e) = within(bytes, self.limit) {
            return fail(batch, e);
        }
        self.side.cap_growth(slack(bytes, self.limit));
        let (e, _) = match self.side.walker.next(original, self.plan) {
            Err(e) => return fail(batch, e),
            Ok(None) => {
                let _ = batch.push(Record::End);
                return Err(());
            }
            Ok(Some(x)) => x,
        };
        if !rewritten.insts().block[e].is_valid() {
            let r = self
                .side
                .read(original, e)
                .and_then(|()| self.side.write(original, e));
            return match r {
                Ok(()) => Ok(()),
                Err(x) => fail(batch, x),
            };
        }
        if let Err(x) = self.side.read(original, e) {
            let r = Record::Exec {
                inst: e,
                op0: 0,
                n_ops: 0,
                read: Some(x),
                write: None,
            };
            let _ = batch.push(r);
            return Err(());
        }
        if let Err(x) = batch.push_exec(self.side, e) {
            return fail(batch, x);
        }
        // The write runs before the rewrite's half compares; the reads sent
        // are a copy, and the write's error is raised after the comparison.
        if let Err(x) = self.side.write(original, e) {
            if let Some(Record::Exec { write, .. }) = batch.records.last_mut() {
                *write = Some(x);
            }
            return Err(());
        }
        Ok(())
    }
}

/// The half-failed error: the original's half ended without its last
/// record (it could not store it, or its thread is gone).
const HALF_GONE: DataflowError = DataflowError::Capacity {
    what: "the original's reads in flight",
    reserved: 0,
};

/// The rewrite's cursor over the records the original's half sent.
struct Records<'f> {
    batch: ReadBatch,
    at: usize,
    recv: &'f mut dyn FnMut(ReadBatch) -> Option<ReadBatch>,
}

impl Records<'_> {
    /// The next record, taking the next batch when this one is spent.
    fn next(&mut self) -> Result<Record, DataflowError> {
        while self.at >= self.batch.records.len() {
            let spent = core::mem::take(&mut self.batch);
            self.batch = (self.recv)(spent).ok_or(HALF_GONE)?;
            self.at = 0;
        }
        self.at += 1;
        Ok(self.batch.records[self.at - 1])
    }
}

impl RewriteHalf<'_> {
    /// Walks the rewrite and compares each original execution with the
    /// record the original's half sent for it. `recv` hands back a spent
    /// batch (empty at first) and returns the next one, or `None` when the
    /// original's half is gone.
    pub fn run(
        self,
        original: &Module,
        rewritten: &Module,
        recv: &mut dyn FnMut(ReadBatch) -> Option<ReadBatch>,
    ) -> Result<(), DataflowError> {
        let mut records = Records {
            batch: ReadBatch::default(),
            at: 0,
            recv,
        };
        while let Some((i, walk)) = self.side.walker.next(rewritten, self.plan)? {
            let bytes = self
                .side
                .heap_bytes()
                .saturating_add(self.tally.heap_bytes())
                .saturating_add(records.batch.heap_bytes())
                .saturating_add(self.others);
            within(bytes, self.limit)?;
            self.side.cap_growth(slack(bytes, self.limit));
            self.side.read(rewritten, i)?;
            let is_original =
                i.index() < original.num_insts() && original.insts().block[i].is_valid();
            if is_original {
                match records.next()? {
                    Record::End => {
                        return Err(DataflowError::Reordered {
                            expected: Inst::INVALID,
                            found: i,
                        })
                    }
                    Record::Fail(e) => return Err(e),
                    Record::Exec {
                        inst,
                        op0,
                        n_ops,
                        read,
                        write,
                    } => {
                        if inst != i {
                            return Err(DataflowError::Reordered {
                                expected: inst,
                                found: i,
                            });
                        }
                        if let Some(e) = read {
                            return Err(e);
                        }
                        compare(
                            self.tally,
                            original,
                            rewritten,
                            i,
                            walk,
                            records.batch.view(op0, n_ops),
                            self.side.view(),
                        )?;
                        if let Some(e) = write {
                            return Err(e);
                        }
                    }
                }
            }
            self.side.write(rewritten, i)?;
        }
        match records.next()? {
            Record::End => Ok(()),
            Record::Fail(e) => Err(e),
            Record::Exec { inst, .. } => Err(DataflowError::Reordered {
                expected: inst,
                found: Inst::INVALID,
            }),
        }
    }
}
