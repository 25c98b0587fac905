//! The dataflow check on two threads: the core's [`SplitRunner`] with the
//! original's half on a scoped worker thread and the rewrite's half on the
//! calling one, joined by a bounded queue of read batches (spent batches go
//! back to the worker for reuse, so the queue allocates only while it
//! fills); then the outputs' comparison in two shares, one on a worker.

use std::sync::mpsc::{channel, sync_channel};
use std::thread;

use tusk_core::ir::Module;
use tusk_core::verify::{DataflowError, OriginalHalf, ReadBatch, RewriteHalf, SplitRunner};

/// Batches the worker may run ahead of the comparison: enough to ride out
/// an uneven stretch of either walk, few enough that the runs in flight
/// stay a few megabytes ([`tusk_core::verify::BATCH_RUNS`] each).
pub const QUEUE_BATCHES: usize = 4;

/// The two-thread runner.
#[derive(Copy, Clone, Debug, Default)]
pub struct ThreadSplit;

impl ThreadSplit {
    /// The runner when this machine has a second core to give it, else
    /// `None` (the check then runs on one thread, as it would anyway).
    pub fn if_parallel() -> Option<Box<dyn SplitRunner>> {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        (cores > 1).then(|| Box::new(ThreadSplit) as Box<dyn SplitRunner>)
    }
}

impl SplitRunner for ThreadSplit {
    fn run(
        &self,
        original_half: OriginalHalf<'_>,
        rewrite_half: RewriteHalf<'_>,
        original: &Module,
        rewritten: &Module,
    ) -> Result<(), DataflowError> {
        let (full_tx, full_rx) = sync_channel::<ReadBatch>(QUEUE_BATCHES);
        let (spent_tx, spent_rx) = channel::<ReadBatch>();
        thread::scope(|s| {
            s.spawn(move || {
                original_half.run(original, rewritten, &mut |b| {
                    full_tx.send(b).ok()?;
                    // A spent batch if one came back, else a new one.
                    Some(spent_rx.try_recv().unwrap_or_default())
                });
            });
            // The worker stops at its next send once these are dropped (an
            // early error here), and the scope joins it.
            let r = rewrite_half.run(original, rewritten, &mut |spent| {
                let _ = spent_tx.send(spent);
                full_rx.recv().ok()
            });
            drop(full_rx);
            drop(spent_tx);
            r
        })
    }

    fn both(&self, a: &mut (dyn FnMut() + Send), b: &mut (dyn FnMut() + Send)) {
        thread::scope(|s| {
            s.spawn(a);
            b();
        });
    }
}
