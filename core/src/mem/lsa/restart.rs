//! The scan's last resort: restart from the module as it was, after a
//! split the scan could not make in the middle.
//!
//! The scan spills a live tensor only where its rules allow (see the
//! module doc of [`super`]); inside a loop a tensor accessed earlier in the
//! loop cannot leave, since the back edge reaches its cells, and a slice
//! copy it makes stays in its victim's corner, which may leave no free
//! rectangle large enough. The scan cannot rewrite what it has passed: it
//! has placed the tensors and inserted spill code up to the failure. So it
//! restarts: the module goes back to the copy taken before the scan (the
//! *restart point*) and is split there, the result becomes the new
//! restart point, and the scan runs again, up to [`MAX_RESTARTS`] times
//! and within the copies the module's headroom holds. The split, at the
//! failing position:
//! - first, once per failing instruction, a live-range split round as the
//!   coloring allocator's ([`crate::mem::split_round`]): its copies are
//!   tensors of their own, which the next scan places where it finds room;
//! - then (or where the round splits nothing) the tensors live there whose
//!   split frees the most are split at every access
//!   ([`crate::mem::access_split`]: the value waits in a slot and each
//!   instruction gets a short copy) until what they free covers the
//!   overflow (where what is live fits but no rectangle is free, the
//!   largest tensor accessed there instead, whose copy is placed afresh:
//!   [`access_split::replaced_at`]).
//!
//! Where the wanted space's bound runs over its capacity in more runs of
//! positions than there are restarts (a long module over PSUM in stretch
//! after stretch), each restart serves every run at once instead, by the
//! same round and the same access splits at each run's highest point
//! ([`crate::mem::split_round::RoundPoints`]): a restart per run would
//! be a whole scan per run, and [`MAX_RESTARTS`] would end them first.
//!
//! The order is [`LsaOptions::strategy`]'s: with [`SpillStrategy::Access`]
//! the scan also restarts at its first SB failure to need a victim (it
//! hands it back instead of spilling) and goes straight to the access
//! split, and spills by its rules from the last restart point once no
//! split helps there. Where the workspace keeps two more copies of the
//! module, the other orders run from the module as it was: every one with
//! [`SpillStrategy::Best`], keeping the result whose spills cost fewer
//! cycles; with the others, each only where the ones before it failed.
//!
//! Invariants: the restart point (and the two strategy copies) are copies
//! of the module of the same capacity ([`Module::copy_from`]), so saving
//! and restoring allocate nothing; they are reserved only where the
//! pipeline expects spills (see [`LsaWorkspace::reserve_restart`]), as
//! each costs another module. A failure the restart cannot help (no
//! tensor to split, the headroom or the rounds used up) is the last
//! scan's, with the module as that scan left it.

use super::{scan, LsaError, LsaOptions, LsaReport, LsaWorkspace};
use crate::ir::{Inst, MemLoc, Module, Space};
use crate::mem::access_split;
use crate::mem::best_fit::ManagerError;
use crate::mem::spill_strategy::{SpillStrategy, StrategyCopies};
use crate::mem::split_round::RoundParams;

/// Most restarts of one pass: each splits at least one tensor for good,
/// so restarts end; this bounds the time (a scan per restart).
pub const MAX_RESTARTS: u32 = 64;

/// Why nothing was spilled where the scan could have restarted but was
/// given no restart point (the pipeline keeps none where the storage
/// budget has no room for it).
pub const NO_RESTART_POINT: &str = "every live tensor is pinned, used by this instruction, not \
     used again, or accessed earlier in the enclosing loop, and the scan keeps no copy of the \
     module to restart from after splitting one at every access (the storage budget, \
     --max-memory, has no room for one)";

/// Why nothing was spilled where a restart's split would help but needs
/// more access copies than the restarts have left (their headroom, which
/// a storage budget below the pipeline's `SPILL_ROOM_BUDGET` cuts in
/// proportion).
pub const RESTART_HEADROOM_SPENT: &str = "every live tensor is pinned, used by this instruction, \
     not used again, or accessed earlier in the enclosing loop, and splitting one at every \
     access needs more copies than the scan's restarts have left (a storage budget, \
     --max-memory, below 64 MiB gives them a share in proportion)";

/// Marks the names of what the restarts' splits add
/// (`<tensor>_Restart<what><n>`, and `_<k>` for an access copy): a copy
/// split again is named after its tensor, so names do not grow.
const RESTART_PREFIX: &str = "Restart";

/// What the restarts did, summed over one pass.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Restarts {
    /// Scans restarted.
    pub restarts: u32,
    /// Of the splits, those made by a live-range split round (the others
    /// split at every access).
    pub range_splits: u32,
    /// Reload and access copies made (an access split makes one per
    /// instruction that accessed the tensor).
    pub copies: u32,
    /// The splits of SB tensors.
    pub sb: RestartSplits,
    /// The splits of PSUM tensors.
    pub psum: RestartSplits,
}

/// The splits the restarts made in one space.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RestartSplits {
    /// Tensors split.
    pub splits: u32,
    /// Splits whose reloads read the DRAM the value came from.
    pub remats: u32,
    /// Bytes the inserted reloads and stores move as the program runs.
    pub moved: u64,
    /// Their cycles under the target's model.
    pub cycles: u64,
}

impl Restarts {
    /// Tensors split, in both spaces.
    pub fn splits(&self) -> u32 {
        self.sb.splits + self.psum.splits
    }

    /// Bytes moved by the splits, in both spaces.
    pub fn moved(&self) -> u64 {
        self.sb.moved.saturating_add(self.psum.moved)
    }

    /// Cycles of the splits, in both spaces.
    pub fn cycles(&self) -> u64 {
        self.sb.cycles.saturating_add(self.psum.cycles)
    }

    fn space(&mut self, space: Space) -> &mut RestartSplits {
        if space == Space::Psum {
            &mut self.psum
        } else {
            &mut self.sb
        }
    }
}

/// Where a failed scan wants room, read off the restart point (described
/// by `ws.order` and `ws.live`): the on-chip space (SB, or PSUM, whose
/// accumulators are split the same way: reloaded before each access and
/// stored after it), the position, the bytes per partition missing there,
/// and the tensor that must itself be split (one larger than the space).
/// `None` for a failure a split cannot help.
fn wanted(point: &Module, ws: &LsaWorkspace, e: &LsaError) -> Option<Wanted> {
    match e {
        LsaError::AllocationFailed(f) if f.space.is_on_chip() => Some(Wanted {
            space: f.space,
            at: f.position,
            over: (f.live_bytes + f.needed.bytes).saturating_sub(f.capacity),
            must: None,
            inst: f.instruction,
        }),
        LsaError::Manager {
            tensor,
            error: ManagerError::NeverFits { value, max, .. },
        } if tensor.index() < point.num_mems() && point.mems().space[*tensor].is_on_chip() => {
            Some(Wanted {
                space: point.mems().space[*tensor],
                at: ws.live.interval(*tensor)?.start,
                over: value.saturating_sub(*max),
                must: Some(*tensor),
                inst: Inst::INVALID,
            })
        }
        _ => None,
    }
}

/// Room a failed scan wants ([`wanted`]).
#[derive(Copy, Clone)]
struct Wanted {
    space: Space,
    at: u32,
    over: u64,
    /// A tensor larger than the space, which must itself be split.
    must: Option<MemLoc>,
    /// The instruction where the scan failed (none for `must`).
    inst: Inst,
}

/// The scan by the strategy of `opts` ([`LsaOptions::strategy`]): its
/// orders in turn from the same module where the workspace keeps the
/// copies this takes ([`LsaWorkspace::reserve_strategies`]), else its
/// first order alone.
pub(super) fn run(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    opts: &LsaOptions,
    loop_aware: bool,
) -> Result<LsaReport, LsaError> {
    let (orders, cheapest) = match opts.strategy {
        SpillStrategy::Best => ([Order::Rules, Order::Rounds, Order::Access], true),
        SpillStrategy::Ranges => ([Order::Rules, Order::Rounds, Order::Access], false),
        SpillStrategy::Access => ([Order::Access, Order::Rules, Order::Rounds], false),
    };
    match ws.strategies.take() {
        None => scan_restarting(m, ws, opts, loop_aware, orders[0]),
        Some(mut kept) => {
            let r = in_turn(m, ws, opts, loop_aware, &mut kept, orders, cheapest);
            ws.strategies = Some(kept);
            r
        }
    }
}

/// Which split a scan tries first where it fails in SB for want of a
/// victim.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Order {
    /// The scan's own rules; a restart where they find nothing.
    Rules,
    /// A restart with the coloring allocator's live-range split round
    /// there ([`crate::mem::split_round`]), whose choice is the global one:
    /// the scan's rules see only what is placed at that moment.
    Rounds,
    /// A restart with the split at every access there.
    Access,
}

/// The scan by each of `orders` from the same module. With `cheapest`
/// ([`SpillStrategy::Best`]) every order runs and the result whose spills
/// cost fewer cycles (then bytes) is kept (the first one's when it spilled
/// nothing); without, the next order runs only where the one before
/// failed (the strategy names the order a user prefers, but a failure
/// above the floor is not a preference). Of results that all fail, the
/// first one's stands. `kept` holds the module before the pass and the
/// best result so far.
fn in_turn(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    opts: &LsaOptions,
    loop_aware: bool,
    kept: &mut StrategyCopies,
    orders: [Order; 3],
    cheapest: bool,
) -> Result<LsaReport, LsaError> {
    let StrategyCopies { before, first } = kept;
    before.copy_from(m);
    let mut best = scan_restarting(m, ws, opts, loop_aware, orders[0]);
    let cost = |r: &LsaReport| {
        (
            r.sb.spill_cycles.saturating_add(r.psum.spill_cycles),
            r.sb.spill_bytes.saturating_add(r.psum.spill_bytes),
        )
    };
    let done = |best: &Result<LsaReport, LsaError>| {
        best.as_ref()
            .is_ok_and(|r| !cheapest || r.sb.spills + r.psum.spills == 0)
    };
    if done(&best) {
        return best;
    }
    first.copy_from(m);
    // True while `m` holds the best result.
    let mut holds_best = true;
    for (k, &order) in orders.iter().enumerate().skip(1) {
        if !cheapest && best.is_ok() {
            break;
        }
        m.copy_from(before);
        ws.current = false;
        ws.bounds_current = false;
        let r = scan_restarting(m, ws, opts, loop_aware, order);
        let better = match (&best, &r) {
            (Ok(a), Ok(b)) => cost(b) < cost(a),
            (Err(_), Ok(_)) => true,
            _ => false,
        };
        holds_best = better;
        if better {
            best = r;
            if k + 1 < orders.len() {
                first.copy_from(m);
            }
        }
    }
    if !holds_best {
        m.copy_from(first);
    }
    best
}

/// The scan, restarted after splits while it fails in SB or PSUM and a
/// split can help (see the module doc); by `order`, it also restarts at
/// its first SB failure to need a victim, and spills by its rules once no
/// split helps there. The report counts the splits among the spills of
/// their space.
fn scan_restarting(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    opts: &LsaOptions,
    loop_aware: bool,
    order: Order,
) -> Result<LsaReport, LsaError> {
    let restarting = opts.restart_copies > 0 && ws.restart_point.is_some();
    if let (true, Some(point)) = (restarting, ws.restart_point.as_mut()) {
        point.copy_from(m);
    }
    // The scan hands its first failures for want of a victim back.
    let mut access_first = order != Order::Rules && restarting;
    let rounds = order != Order::Access;
    let mut done = Restarts::default();
    // The instructions where a live-range split round ran.
    let mut ranged: heapless::Vec<Inst, { MAX_RESTARTS as usize }> = heapless::Vec::new();
    // The spill limit of the module as the pass got it: the default grows
    // with the on-chip locations and accesses, which splits add (an SB
    // slot's copies access two on-chip locations each).
    let max_spills = Some(
        opts.max_spills
            .unwrap_or_else(|| super::default_spill_limit(m)),
    );
    loop {
        // Each scan reserves (a no-op within the pipeline's reservation)
        // the headroom the restarts have left.
        let o = LsaOptions {
            restart_copies: opts.restart_copies.saturating_sub(done.copies),
            max_spills,
            ..*opts
        };
        ws.access_first = access_first;
        let scanned = scan::scan(m, ws, &o, loop_aware);
        ws.access_first = false;
        let e = match scanned {
            Ok(mut rep) => {
                for (r, d) in [(&mut rep.sb, done.sb), (&mut rep.psum, done.psum)] {
                    r.spills += d.splits;
                    r.remats += d.remats;
                    r.spill_bytes += d.moved;
                    r.spill_cycles += d.cycles;
                }
                rep.restarts = done;
                return Ok(rep);
            }
            Err(e) => e,
        };
        let point = match ws.restart_point.take() {
            Some(p) if restarting && done.restarts < MAX_RESTARTS => p,
            Some(p) if access_first => {
                // Out of restarts: spill by the rules from the last point.
                access_first = false;
                restore(m, ws, p);
                continue;
            }
            p => {
                let kept = p.is_some();
                ws.restart_point = p;
                let withheld = opts.restarts_withheld || (opts.restart_copies > 0 && !kept);
                return Err(match e {
                    LsaError::AllocationFailed(mut f) if withheld && f.space.is_on_chip() => {
                        f.reason = NO_RESTART_POINT;
                        LsaError::AllocationFailed(f)
                    }
                    e => e,
                });
            }
        };
        // The candidates are read off the restart point: `m` keeps the
        // failed scan (and the error its meaning) unless a split follows.
        ws.order.compute(&point);
        ws.live.compute(&point, &ws.order);
        // SB's bound, for a PSUM tensor's slot ([`access_split::slot_space`]).
        ws.bounds.compute(&point, &ws.order, &ws.live);
        let want = wanted(&point, ws, &e);
        // More runs over the wanted space's capacity than restarts: each
        // restart serves all of them at once (the scan would fail at each
        // in turn, a whole scan per run).
        let many = want
            .filter(|w| w.must.is_none())
            .is_some_and(|w| many_runs(&point, ws, w.space));
        // A live-range split round first, once per failing instruction:
        // its copies are tensors of their own, which the scan places where
        // it finds room (a slice copy it makes itself stays in its victim's
        // corner, which can cut the space into pieces too small).
        let ranges = want.filter(|w| {
            rounds && w.must.is_none() && w.inst.is_valid() && !ranged.contains(&w.inst)
        });
        let mut point = point;
        if let Some(w) = ranges {
            let _ = ranged.push(w.inst);
            // On the restart point itself: where the round splits nothing,
            // `m` still holds the failed scan (the error names its tensors).
            let split = range_round(&mut point, ws, w, many, opts.restart_copies, &mut done);
            if !matches!(split, Ok(false)) {
                restore(m, ws, point);
                split?;
                done.restarts += 1;
                continue;
            }
        }
        if let (Some(w), true) = (want, many) {
            // Every run's tensors split at every access, on the restart
            // point itself (unchanged where nothing is split).
            let split = runs_split(&mut point, ws, w.space, opts.restart_copies, &mut done);
            if !matches!(split, Ok(false)) {
                restore(m, ws, point);
                split?;
                done.restarts += 1;
                continue;
            }
        }
        // True when the split that would help needs more access copies
        // than the restarts have left.
        let mut spent = false;
        let first = want.and_then(|w| {
            let Wanted {
                space, at, over, ..
            } = w;
            let (v, _) = match w.must {
                Some(v) => access_split::frees_at(&point, &ws.order, &ws.live, space, v, at)
                    .map(|f| (v, f))?,
                None => {
                    let (o, l) = (&ws.order, &ws.live);
                    access_split::best_at(&point, o, l, space, at, &[]).or_else(|| {
                        // Fragmented (what is live fits): a copy placed
                        // afresh may find the rectangle.
                        let v = (over == 0)
                            .then(|| access_split::replaced_at(&point, o, l, space, at))??;
                        Some((v, 0))
                    })?
                }
            };
            let need = access_split::access_count(&ws.live, v) + 1;
            spent = done.copies.saturating_add(need) > opts.restart_copies;
            (!spent).then_some((w, v))
        });
        let Some((w, v)) = first else {
            if access_first {
                // No split helps here: spill by the rules from this point.
                access_first = false;
                restore(m, ws, point);
                continue;
            }
            ws.restart_point = Some(point);
            return Err(match e {
                LsaError::AllocationFailed(mut f) if spent && f.space.is_on_chip() => {
                    f.reason = RESTART_HEADROOM_SPENT;
                    LsaError::AllocationFailed(f)
                }
                e => e,
            });
        };
        m.copy_from(&point);
        let split = split_at(m, ws, w, v, opts.restart_copies, &mut done);
        point.copy_from(m);
        // The next scan computes the order, liveness and bounds of the
        // split module.
        restore(m, ws, point);
        split?;
        done.restarts += 1;
    }
}

/// Makes `m` the restart `point` again (which the workspace keeps), for a
/// scan that computes its analyses anew.
fn restore(m: &mut Module, ws: &mut LsaWorkspace, point: Module) {
    m.copy_from(&point);
    ws.restart_point = Some(point);
    ws.current = false;
    ws.bounds_current = false;
}

/// True when the bound of `space` in the restart point `m` (described by
/// `ws.order`, `ws.live` and `ws.bounds`) runs over its capacity in more
/// runs of positions than a pass has restarts; then `ws.points` holds
/// those runs (as many as it has room for), ready for a round.
fn many_runs(m: &Module, ws: &mut LsaWorkspace, space: Space) -> bool {
    if ws.bounds.space(space).lower_bound() <= m.target.capacity(space) {
        return false;
    }
    let runs = ws
        .points
        .fill_runs(&mut ws.bounds, m, &ws.order, &ws.live, space, 0);
    if runs <= MAX_RESTARTS || ws.points.list.is_empty() {
        return false;
    }
    ws.points.prepare(m, &ws.live, space);
    true
}

/// Runs a live-range split round ([`crate::mem::split_round`]) in the
/// restart point `m` (described by `ws.order` and `ws.live`) at the
/// position `w` wants room, or with `many` at every run in `ws.points`
/// ([`many_runs`]), within the copies `limit` leaves; adds what it split
/// to `done`. False when it split nothing (`m` unchanged).
fn range_round(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    w: Wanted,
    many: bool,
    limit: u32,
    done: &mut Restarts,
) -> Result<bool, LsaError> {
    let params = RoundParams {
        space: w.space,
        at: w.at,
        overflow: w.over,
        reloads_left: limit.saturating_sub(done.copies) as usize,
        by_bytes: false,
        first: done.splits(),
        prefix: RESTART_PREFIX,
    };
    let o = if many {
        ws.round
            .run_points(m, &ws.order, &ws.live, &mut ws.points, &params)?
    } else {
        ws.round.run(m, &ws.order, &ws.live, &params)?
    };
    done.copies += o.reloads;
    done.range_splits += o.spills;
    let d = done.space(w.space);
    d.splits += o.spills;
    d.remats += o.remats;
    d.moved = d.moved.saturating_add(o.bytes);
    d.cycles = d.cycles.saturating_add(o.cycles);
    Ok(o.spills > 0)
}

/// Splits at every access, in the restart point `m`, the tensors of
/// `space` live at each run in `ws.points` ([`many_runs`]) whose split
/// frees the most there ([`access_split::split_at_points`]), within the
/// copies `limit` leaves; adds them to `done`. False when it split
/// nothing (`m` unchanged).
fn runs_split(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    space: Space,
    limit: u32,
    done: &mut Restarts,
) -> Result<bool, LsaError> {
    let names = access_split::SplitNames {
        prefix: RESTART_PREFIX,
        first: done.splits(),
        copies_left: limit.saturating_sub(done.copies),
    };
    let sb_bound = ws.bounds.space(Space::Sb).lower_bound();
    let o = access_split::split_at_points(
        m,
        &ws.order,
        &ws.live,
        space,
        &mut ws.points,
        sb_bound,
        &names,
    )?;
    done.copies += o.copies;
    let d = done.space(space);
    d.splits += o.splits;
    d.moved = d.moved.saturating_add(o.moved);
    d.cycles = d.cycles.saturating_add(o.cycles);
    Ok(o.splits > 0)
}

/// Splits, in `m` (equal to the restart point, described by `ws.order` and
/// `ws.live`), `first`, then the tensors of the wanted space live at its
/// position whose split frees the most, until they free the bytes per
/// partition wanted there, the round holds
/// [`access_split::MAX_SPLITS_AT_POINT`], or
/// the access copies would pass `limit` in all
/// ([`access_split::split_at_point`]); adds them to `done`.
fn split_at(
    m: &mut Module,
    ws: &mut LsaWorkspace,
    w: Wanted,
    first: MemLoc,
    limit: u32,
    done: &mut Restarts,
) -> Result<(), LsaError> {
    let names = access_split::SplitNames {
        prefix: RESTART_PREFIX,
        first: done.splits(),
        copies_left: limit.saturating_sub(done.copies),
    };
    let mut out = access_split::PointSplits::default();
    let mut split: heapless::Vec<MemLoc, { access_split::MAX_SPLITS_AT_POINT }> =
        heapless::Vec::new();
    ws.sb_slots.clear();
    let mut sb = access_split::SbSlots {
        bound: ws.bounds.space(Space::Sb).lower_bound(),
        made: &mut ws.sb_slots,
    };
    let r = access_split::split_at_point(
        m,
        &ws.order,
        &ws.live,
        w.space,
        (w.at, w.over),
        Some(first),
        None,
        &mut sb,
        &names,
        &mut out,
        &mut split,
    );
    done.copies += out.copies;
    let d = done.space(w.space);
    d.splits += out.splits;
    d.moved = d.moved.saturating_add(out.moved);
    d.cycles = d.cycles.saturating_add(out.cycles);
    r?;
    Ok(())
}
