//! The checker's workspace and the lockstep walk that compares the two
//! programs (see the module doc of `dataflow`).

use super::pieces::first_difference;
use super::report::{DataflowError, Mismatch, Operand};
use super::shape::rows;
use super::side::{ReadsView, Side};
use super::walk::{LoopPlan, MAX_EXACT_EXECUTIONS};
use crate::ir::{Ap, Inst, Module};
use alloc::vec::Vec;

/// Most value runs [`DataflowCapacity::estimate`] reserves for one
/// instruction's reads up front (a pattern of more rows grows the scratch
/// when it is read, within the storage limit).
pub const MAX_ESTIMATED_SCRATCH: usize = 1 << 20;

/// Reserved sizes of a [`DataflowChecker`]. Storage the walk finds too
/// small grows (by doubling, fallibly: a refused allocation is a
/// [`DataflowError::Capacity`]); reserving enough up front avoids that.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct DataflowCapacity {
    /// Runs (slabs, and bands) each program's state may hold at once.
    pub runs: usize,
    /// Value runs one instruction's reads may produce.
    pub scratch: usize,
    /// Mismatches kept (the rest are counted).
    pub mismatches: usize,
}

impl DataflowCapacity {
    /// An estimate from the two modules' counts: a run for every location
    /// and register (each program's state holds what was written last, one
    /// slab and band per whole-tile write; the arenas double when a module
    /// fragments more), and two value runs per row an instruction reads
    /// (a read of many partitions is one group per row when the partitions
    /// hold one tile; when they do not, the scratch grows). Linear in the
    /// modules: the rows of one instruction count once, not per partition,
    /// and at most `MAX_ESTIMATED_SCRATCH` (2^20) of them.
    pub fn estimate(original: &Module, rewritten: &Module) -> Self {
        let mut cap = DataflowCapacity {
            mismatches: 64,
            ..Default::default()
        };
        for m in [original, rewritten] {
            let runs = m.num_mems() + m.num_regs();
            let mut widest = 0usize;
            for i in m.program_order() {
                let w: usize = m
                    .inputs(i)
                    .map(|a| rows(m, a))
                    .fold(0usize, |s, x| s.saturating_add(x));
                widest = widest.max(w.saturating_add(m.operands(i).n_use as usize));
            }
            cap.runs = cap.runs.max(4096 + runs);
            cap.scratch = cap.scratch.max(
                4096usize
                    .saturating_add(widest.saturating_mul(2))
                    .min(MAX_ESTIMATED_SCRATCH),
            );
        }
        cap
    }

    /// Heap bytes a checker reserved for `self` holds (both programs).
    pub fn bytes(&self) -> u64 {
        use crate::storage::bytes_of;
        let per_side = (self.runs as u64)
            .saturating_mul(super::state::RUN_BYTES)
            .saturating_add(bytes_of::<super::pieces::Piece>(self.scratch));
        per_side
            .saturating_mul(2)
            .saturating_add(bytes_of::<Mismatch>(self.mismatches))
    }

    /// `self`, scaled down (runs and scratch alike) so that
    /// [`Self::bytes`] stays within `allowance`; a checker reserved for
    /// less grows when a module needs more, up to its storage limit.
    pub fn within(self, allowance: u64) -> Self {
        let b = self.bytes();
        if b <= allowance {
            return self;
        }
        let scale = |n: usize| ((n as u128 * allowance as u128) / b.max(1) as u128) as usize;
        DataflowCapacity {
            runs: scale(self.runs),
            scratch: scale(self.scratch),
            mismatches: self.mismatches.min(scale(self.mismatches).max(1)),
        }
    }

    /// Four times the storage that `what` (a [`DataflowError::Capacity`]
    /// name) ran out of (at least 4096 entries, so that a buffer that
    /// started empty grows too); all of it for a name not listed.
    pub fn grown(self, what: &str) -> Self {
        let x4 = |n: usize| n.saturating_mul(4).max(4096);
        let mut c = self;
        match what {
            "the value-run state" => c.runs = x4(c.runs),
            "one instruction's reads" => c.scratch = x4(c.scratch),
            _ => {
                c.runs = x4(c.runs);
                c.scratch = x4(c.scratch);
            }
        }
        c
    }
}

/// What a [`DataflowChecker::check`] found.
#[derive(Copy, Clone, Debug)]
pub struct DataflowReport<'c> {
    /// The first mismatches, in the rewritten program's order.
    pub mismatches: &'c [Mismatch],
    /// Mismatches beyond the cap, counted.
    pub dropped: u64,
    /// How much of the programs the walk covered.
    pub coverage: DataflowCoverage,
}

/// How much of the programs a dataflow check walked: all of it unless
/// [`Self::sampled`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct DataflowCoverage {
    /// Original instruction executions compared.
    pub compared: u64,
    /// Loops walked iteration by iteration (loop terms move with them).
    pub exact_loops: u32,
    /// True when those loops were sampled (iterations 0, 1 and the last)
    /// instead of walked in full, because their full walk would take more
    /// than `walk_limit` executions: the check is partial, and a finding
    /// in the other iterations would go unseen.
    pub sampled: bool,
    /// Executions a full walk takes (an upper bound; 0 without exact
    /// loops).
    pub walk: u64,
    /// The limit the walk was planned under
    /// ([`DataflowChecker::set_walk_limit`]).
    pub walk_limit: u64,
}

impl DataflowReport<'_> {
    /// True when every read sees its original value.
    pub fn is_clean(&self) -> bool {
        self.mismatches.is_empty() && self.dropped == 0
    }
}

/// What the comparisons found: the mismatches kept, the ones counted past
/// them, the executions compared.
#[derive(Debug, Default)]
pub(super) struct Tally {
    pub mismatches: Vec<Mismatch>,
    pub max_mismatches: usize,
    pub dropped: u64,
    pub compared: u64,
}

impl Tally {
    /// An empty tally that keeps `max` mismatches.
    pub fn with_limit(max: usize) -> Tally {
        Tally {
            max_mismatches: max,
            ..Tally::default()
        }
    }

    /// Keeps `x`, or counts it once `max_mismatches` are kept.
    pub fn report(&mut self, x: Mismatch) {
        if self.mismatches.len() < self.max_mismatches {
            self.mismatches.push(x);
        } else {
            self.dropped += 1;
        }
    }

    fn clear(&mut self) {
        self.mismatches.clear();
        self.dropped = 0;
        self.compared = 0;
    }

    pub fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(self.mismatches)
    }
}

/// The reusable workspace of the dataflow checker (see the module doc).
#[derive(Debug)]
pub struct DataflowChecker {
    pub(super) orig: Side,
    pub(super) rw: Side,
    pub(super) tally: Tally,
    /// Heap bytes the checker may grow to ([`DataflowError::OverBudget`]
    /// beyond); `u64::MAX` unless set.
    storage_limit: u64,
    /// Executions a full walk of the exact loops may take before they are
    /// sampled (`walk::MAX_EXACT_EXECUTIONS` unless set).
    walk_limit: u64,
    /// Outputs stored alike in both final states are taken as equal
    /// without reading them (`outputs::stored_alike`); see
    /// [`DataflowChecker::set_read_every_output`].
    pub(super) skip_alike_outputs: bool,
    /// How each loop is walked (both programs alike).
    plan: LoopPlan,
}

impl Default for DataflowChecker {
    fn default() -> Self {
        DataflowChecker {
            orig: Side::default(),
            rw: Side::default(),
            tally: Tally::default(),
            storage_limit: u64::MAX,
            walk_limit: MAX_EXACT_EXECUTIONS,
            skip_alike_outputs: true,
            plan: LoopPlan::default(),
        }
    }
}

impl DataflowChecker {
    /// Heap bytes reserved.
    pub fn heap_bytes(&self) -> u64 {
        self.tally
            .heap_bytes()
            .saturating_add(self.orig.heap_bytes())
            .saturating_add(self.rw.heap_bytes())
            .saturating_add(self.plan.heap_bytes())
    }

    /// An empty workspace; [`DataflowChecker::check`] reserves from the
    /// modules' counts on first use.
    pub fn new() -> Self {
        Self::default()
    }

    /// Limits the heap bytes the checker may grow to while it walks: beyond
    /// them the check stops with [`DataflowError::OverBudget`]. The value
    /// states, which grow with the module, never grow past what the limit
    /// leaves them; the small per-instruction buffers are checked after
    /// every execution (a few capacities are read), so they may overshoot
    /// by what one execution grows.
    pub fn set_storage_limit(&mut self, bytes: u64) {
        self.storage_limit = bytes;
    }

    /// The limit [`Self::set_storage_limit`] set (`u64::MAX` for none).
    pub fn storage_limit(&self) -> u64 {
        self.storage_limit
    }

    /// Sets the executions a full walk of the loops that patterns move
    /// with may take before the check samples them instead (iterations 0,
    /// 1 and the last: a partial check, which its report says):
    /// [`MAX_EXACT_EXECUTIONS`] by default, `u64::MAX` to walk every
    /// iteration whatever it costs (the check's time is linear in it).
    pub fn set_walk_limit(&mut self, executions: u64) {
        self.walk_limit = executions;
    }

    /// The limit [`Self::set_walk_limit`] set.
    pub fn walk_limit(&self) -> u64 {
        self.walk_limit
    }

    /// Whether the walk keeps every location's values to the end instead of
    /// dropping those of a location it is done with (`release`: the same
    /// findings, a state that holds only what later executions may read).
    /// Off by default; on, the check is the reference a test compares with.
    pub fn set_keep_all(&mut self, on: bool) {
        self.orig.release.keep_all = on;
        self.rw.release.keep_all = on;
    }

    /// Whether the last step reads every output of both programs, even one
    /// whose cells both final states store alike (the same runs at the
    /// same places: equal bytes, found without reading them). Off by
    /// default; on, the comparison is the reference a test compares with.
    pub fn set_read_every_output(&mut self, on: bool) {
        self.skip_alike_outputs = !on;
    }

    /// A workspace with explicit reserved sizes.
    pub fn with_capacity(cap: DataflowCapacity) -> Self {
        let mut c = Self::new();
        c.reserve(cap);
        c
    }

    /// Grows every buffer to at least `cap` (as far as the heap allows: a
    /// refused reservation is left to the walk's growth, which reports it).
    pub fn reserve(&mut self, cap: DataflowCapacity) {
        self.orig.reserve(cap.runs, cap.scratch);
        self.rw.reserve(cap.runs, cap.scratch);
        let t = &mut self.tally;
        let _ = t
            .mismatches
            .try_reserve(cap.mismatches.saturating_sub(t.mismatches.len()));
        t.max_mismatches = t.max_mismatches.max(cap.mismatches);
    }

    /// Checks that `rewritten` reads, at every surviving original
    /// instruction and at the outputs, the values `original` reads.
    /// Reserves from [`DataflowCapacity::estimate`] first (a no-op when
    /// large enough); storage that proves too small grows.
    pub fn check(
        &mut self,
        original: &Module,
        rewritten: &Module,
    ) -> Result<DataflowReport<'_>, DataflowError> {
        let cap = DataflowCapacity::estimate(original, rewritten);
        self.check_growing(original, rewritten, cap)
    }

    /// [`Self::check`] starting from `start` instead of the estimate, for a
    /// memory-tight caller (firmware) that would rather grow from small
    /// buffers than reserve the estimate.
    pub fn check_growing(
        &mut self,
        original: &Module,
        rewritten: &Module,
        start: DataflowCapacity,
    ) -> Result<DataflowReport<'_>, DataflowError> {
        self.prepare(original, rewritten, start)?;
        self.walk(original, rewritten)?;
        super::outputs::compare(self, original, rewritten)?;
        Ok(self.report())
    }

    /// [`Self::check_growing`] with the original's half of the lockstep
    /// walk on another thread: `runner` runs it there and the rewrite's
    /// half here, joined by a queue of the original's reads
    /// (`super::split`). The same findings and errors as
    /// [`Self::check_growing`]; each half may grow by half of what the
    /// storage limit leaves when the walk begins.
    pub fn check_split(
        &mut self,
        original: &Module,
        rewritten: &Module,
        start: DataflowCapacity,
        runner: &dyn super::split::SplitRunner,
    ) -> Result<DataflowReport<'_>, DataflowError> {
        self.prepare(original, rewritten, start)?;
        self.begin(original, rewritten)?;
        let (o, r) = super::split::halves(
            &mut self.orig,
            &mut self.rw,
            &mut self.tally,
            &self.plan,
            self.storage_limit,
        );
        runner.run(o, r, original, rewritten)?;
        super::outputs::compare_split(self, original, rewritten, runner)?;
        Ok(self.report())
    }

    /// Checks the two modules are a rewrite pair, reserves, plans the
    /// loops and clears the tally.
    fn prepare(
        &mut self,
        original: &Module,
        rewritten: &Module,
        start: DataflowCapacity,
    ) -> Result<(), DataflowError> {
        if rewritten.num_mems() < original.num_mems() {
            return Err(DataflowError::NotARewrite { what: "locations" });
        }
        if rewritten.num_regs() < original.num_regs() {
            return Err(DataflowError::NotARewrite { what: "registers" });
        }
        if rewritten.num_insts() < original.num_insts() {
            return Err(DataflowError::NotARewrite {
                what: "instructions",
            });
        }
        self.orig.walker.reserve(original.num_loops());
        self.rw.walker.reserve(rewritten.num_loops());
        self.plan
            .reserve(original.num_loops().max(rewritten.num_loops()));
        self.plan.compute(original, rewritten, self.walk_limit)?;
        self.reserve(start);
        self.cap_state();
        self.tally.clear();
        Ok(())
    }

    fn report(&self) -> DataflowReport<'_> {
        DataflowReport {
            mismatches: &self.tally.mismatches,
            dropped: self.tally.dropped,
            coverage: DataflowCoverage {
                compared: self.tally.compared,
                exact_loops: self.plan.exact_loops,
                sampled: self.plan.sampled,
                walk: self.plan.walk,
                walk_limit: self.walk_limit,
            },
        }
    }

    /// How much of each buffer the last check used (high-water marks, for
    /// sizing a later [`Self::check_growing`]).
    pub fn used(&self) -> DataflowCapacity {
        DataflowCapacity {
            runs: self.orig.state.used().max(self.rw.state.used()),
            scratch: self.orig.reads_high.max(self.rw.reads_high),
            mismatches: self.tally.mismatches.len(),
        }
    }

    /// The lockstep walk. The rewritten program leads; when it reaches an
    /// instruction of the original (the same [`Inst`] id, linked in both:
    /// rewrites never reuse ids), the original program is walked up to the
    /// same execution of it — executing on the way the original
    /// instructions the rewrite removed, which must not be linked in the
    /// rewrite, or the order changed — and the two executions' reads are
    /// compared. Instructions the rewrite added are executed, not
    /// compared. At the end the rest of the original runs and the final
    /// contents of its outputs are compared.
    fn walk(&mut self, original: &Module, rewritten: &Module) -> Result<(), DataflowError> {
        self.begin(original, rewritten)?;
        while let Some((i, walk)) = self.rw.walker.next(rewritten, &self.plan)? {
            self.within_budget()?;
            self.rw.read(rewritten, i)?;
            let is_original =
                i.index() < original.num_insts() && original.insts().block[i].is_valid();
            if is_original {
                loop {
                    let Some((e, _)) = self.orig.walker.next(original, &self.plan)? else {
                        return Err(DataflowError::Reordered {
                            expected: Inst::INVALID,
                            found: i,
                        });
                    };
                    if e != i && rewritten.insts().block[e].is_valid() {
                        return Err(DataflowError::Reordered {
                            expected: e,
                            found: i,
                        });
                    }
                    self.orig.read(original, e)?;
                    if e == i {
                        compare(
                            &mut self.tally,
                            original,
                            rewritten,
                            i,
                            walk,
                            self.orig.view(),
                            self.rw.view(),
                        )?;
                    }
                    self.orig.write(original, e)?;
                    if e == i {
                        break;
                    }
                }
            }
            self.rw.write(rewritten, i)?;
        }
        while let Some((e, _)) = self.orig.walker.next(original, &self.plan)? {
            if rewritten.insts().block[e].is_valid() {
                return Err(DataflowError::Reordered {
                    expected: e,
                    found: Inst::INVALID,
                });
            }
            self.orig.read(original, e)?;
            self.orig.write(original, e)?;
        }
        Ok(())
    }

    /// Sets both sides to their programs' start. Each side's memo of
    /// patterns' cells (a speed-up, not needed for the check) may take a
    /// thirty-second of what the storage limit leaves.
    fn begin(&mut self, original: &Module, rewritten: &Module) -> Result<(), DataflowError> {
        let memo = self.storage_limit.saturating_sub(self.heap_bytes()) / 32;
        self.orig.begin(original, memo)?;
        self.rw.begin(rewritten, memo)
    }

    /// Under a storage limit, caps the growth of the buffers that grow
    /// with the module (the two states' arenas, the two sides' reads) at
    /// what the limit leaves now, half to each side
    /// ([`Side::cap_growth`]), so that they stop at the limit instead of
    /// doubling past it.
    fn cap_state(&mut self) {
        let bytes = self.heap_bytes();
        self.cap_growth(bytes);
    }

    /// [`Self::cap_state`] with the checker's heap bytes `bytes`.
    fn cap_growth(&mut self, bytes: u64) {
        let slack =
            (self.storage_limit != u64::MAX).then(|| self.storage_limit.saturating_sub(bytes) / 2);
        self.orig.cap_growth(slack);
        self.rw.cap_growth(slack);
    }

    /// [`DataflowError::OverBudget`] when the storage grew past its limit;
    /// else caps the next execution's growth at what the limit leaves
    /// ([`Self::cap_state`]). Called before every execution: the small
    /// scratch buffers, which it does not cap, overshoot by at most what
    /// one execution grows them.
    pub(super) fn within_budget(&mut self) -> Result<(), DataflowError> {
        let bytes = self.heap_bytes();
        if bytes > self.storage_limit {
            return Err(DataflowError::OverBudget {
                bytes,
                limit: self.storage_limit,
            });
        }
        self.cap_growth(bytes);
        Ok(())
    }
}

/// Compares the reads of `i` in both programs (read, not yet written):
/// `expected` the original's, `found` the rewrite's.
pub(super) fn compare(
    tally: &mut Tally,
    original: &Module,
    rewritten: &Module,
    i: Inst,
    walk: u8,
    expected: ReadsView<'_>,
    found: ReadsView<'_>,
) -> Result<(), DataflowError> {
    tally.compared += 1;
    let ro = rewritten.operands(i);
    let expected_n = expected.n_operands() as u32;
    let found_n = found.n_operands() as u32;
    if expected_n != found_n {
        return Err(DataflowError::OperandsChanged {
            inst: i,
            expected: expected_n,
            found: found_n,
        });
    }
    // The register terms: kept, with the same scale, the same window
    // size, and the static part at the same place in the window (what
    // the value of the register selects). Loop terms need no rule of
    // their own: every iteration's cells are compared.
    for (k, (a, b)) in original.all_aps(i).zip(rewritten.all_aps(i)).enumerate() {
        let (x, y) = (original.ap_ext(a).reg, rewritten.ap_ext(b).reg);
        let same = match (x, y) {
            (None, None) => true,
            (Some(x), Some(y)) => {
                x.scale == y.scale
                    && x.window_hi - x.window_lo == y.window_hi - y.window_lo
                    && original.aps().offset[a] as i64 - x.window_lo as i64
                        == rewritten.aps().offset[b] as i64 - y.window_lo as i64
            }
            _ => false,
        };
        if !same {
            tally.report(Mismatch::Term {
                inst: i,
                operand: k as u8,
                dropped: y.is_none(),
            });
        }
    }
    let n_in = ro.n_in as usize;
    let n_use = ro.n_use as usize;
    for k in 0..found_n as usize {
        let diff = first_difference(expected.operand(k), found.operand(k));
        if let Some((byte, expected, found)) = diff {
            let reads = if k < n_in {
                Operand::Mem(rewritten.aps().loc[Ap::from_u32(ro.ap_start + k as u32)])
            } else if k < n_in + n_use {
                Operand::Reg(rewritten.uses(i)[k - n_in])
            } else {
                // A may-written window of an output (after the uses).
                let nth = k - n_in - n_use;
                let a = rewritten
                    .outputs(i)
                    .filter(|&a| rewritten.ap_ext(a).is_dynamic())
                    .nth(nth);
                Operand::Mem(a.map_or(crate::ir::MemLoc::INVALID, |a| rewritten.aps().loc[a]))
            };
            tally.report(Mismatch::Read {
                inst: i,
                operand: k as u8,
                reads,
                walk,
                byte,
                expected,
                found,
            });
        }
    }
    Ok(())
}
