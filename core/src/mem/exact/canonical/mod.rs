//! The canonical search: buffers placed in offset order, each at the lowest
//! offset its placed neighbours leave, with dominance, section inference and
//! decomposition of the timeline where no unplaced buffer crosses.
//!
//! # Canonical placements, and why the search is complete
//! Among the legal placements within the capacity `k`, take one whose sum of
//! offsets is least, and sort its buffers by (offset, rank), the rank being
//! the attempt's static preorder. Then
//! - every buffer sits at the lowest aligned offset, clear of the pins, that
//!   is at or above the tops of the buffers before it sharing a cell with it
//!   (its *minimum offset*): else it could move down, lowering the sum;
//! - when a buffer is placed at `x`, no buffer after it has `minimum offset +
//!   size <= x`: that one could drop to its minimum offset (nothing placed
//!   before it is above that offset in its cells, nothing placed after it is
//!   below `x`), lowering the sum. This is the *dominance* rule: a branch
//!   that leaves a gap some unplaced buffer fits in is never taken, and a
//!   node where such a gap lies under the level is dead.
//!
//! So the search branches, at each node, on the unplaced options whose
//! minimum offset is above the level (the offset placed last), or equal to
//! it with a higher rank, and below the least `minimum offset + size` over
//! the unplaced options; every such sequence is one path, and the least-sum
//! placement is one of them. A buffer all of whose time-overlapping buffers
//! are placed (*hatless*, with a single option) that fails ends its node: the
//! rest of the problem does not depend on it, and every later branch would
//! have to place it at the same offset after a higher key.
//!
//! # Inference
//! An unplaced buffer reaches its minimum offset when that is canonical;
//! otherwise its minimum offset has to be raised by a buffer not yet placed,
//! at or above the level: it reaches at least the level plus the smallest of
//! its neighbours, and nothing when no time-overlapping buffer is left. A
//! node is dead when some buffer reaches no offset at which it fits, or when
//! some section's unplaced area exceeds the room above its cells' least
//! reach (the cross-section inference: on tight instances every section is
//! full, so a gap fails at once).
//!
//! # Decomposition
//! Where no unplaced buffer crosses a section boundary, the unplaced buffers
//! on the two sides share no cell: each part (a *piece*) is solved alone,
//! with its own canonical order from level 0, one after the other. When a
//! later piece fails, no change to an earlier one can help, so the node
//! whose placement cut the timeline fails at once (a backjump).
//!
//! # Orders
//! The rank breaks ties between equal offsets: a static preorder on
//! structural properties of the buffers (`order`), one of three per
//! attempt. Each alone is complete, so the portfolio of them is too.
//!
//! # Storage
//! Branches are not stored: a frame keeps the key of the branch it tried
//! last and the next one is found by a rescan. The frame and scope stacks
//! are bounded by the buffer count, the trail of minimum offsets by the sum
//! over options of their time-overlapping buffers; all reserved by
//! [`ExactWorkspace::reserve_within`](super::ExactWorkspace::reserve_within).

use alloc::vec::Vec;

mod order;

pub(super) use order::RankKey;
pub use order::{Preorder, PREORDERS};

use super::sizing::at_least;
use super::solve::Stop;
use super::{Clock, ExactOptions, ExactWorkspace, Limit, Outcome, NONE, NO_LEVEL};
use crate::mem::problem::{align_offset, Placement, Problem};

/// The canonical strategy's own tables in the workspace (the model's
/// tables it shares with the skyline search stay there).
#[derive(Debug, Default)]
pub(super) struct Canon {
    /// Per cell: the least offset any unplaced option covering it reaches.
    eff: Vec<u64>,
    /// Per option: its minimum offset over the placed buffers.
    minoff: Vec<u64>,
    /// Undo trail of `minoff`.
    mtrail: Vec<(u32, u64)>,
    /// Per buffer: unplaced buffers overlapping it in time.
    nb_left: Vec<u32>,
    cframes: Vec<CanonFrame>,
    /// Per buffer: its place in the attempt's preorder.
    rank: Vec<u32>,
    keys: Vec<RankKey>,
    /// The preorder of the canonical attempt.
    preorder: Preorder,
    /// Scratch of a piece's re-ranking, and the rank undo trail.
    piece_bufs: Vec<u32>,
    piece_ranks: Vec<u32>,
    rtrail: Vec<(u32, u32)>,
    /// Per section boundary s: unplaced buffers live in both s - 1 and s.
    cross: Vec<u32>,
    scopes: Vec<Scope>,
}

impl Canon {
    /// Heap bytes reserved.
    pub(super) fn heap_bytes(&self) -> u64 {
        crate::heap_bytes!(
            self.eff,
            self.minoff,
            self.mtrail,
            self.nb_left,
            self.cframes,
            self.rank,
            self.keys,
            self.piece_bufs,
            self.piece_ranks,
            self.rtrail,
            self.cross,
            self.scopes
        )
    }
}

/// Total order of the branches of a node: offset, rank, option.
pub(super) type Key = (u64, u32, u32);

/// One node of the canonical search.
#[derive(Copy, Clone, Debug)]
pub(super) struct CanonFrame {
    /// Length of the minimum-offset trail when the node opened.
    mark: u32,
    /// Offset placed last on the path (0 at the root of a piece).
    level: u64,
    /// Rank of the buffer placed last (`NONE` at the root of a piece).
    last: u32,
    /// The sections of the node's part.
    lo: u32,
    hi: u32,
    /// Unplaced buffers in the part.
    left: u32,
    /// Least `minimum offset + size` over the part's unplaced options.
    min_height: u64,
    /// Key of the branch tried last.
    tried: Option<Key>,
    /// The first branch, found when the node opened.
    pending: Option<Key>,
    /// Option placed for the child being explored (`NONE`: none).
    placed: u32,
    /// Length of the scope stack when the node opened.
    scopes: u32,
    /// Length of the rank trail before the node opened (a piece root
    /// re-ranks its piece).
    rmark: u32,
    /// First node of a piece: when it fails, the frame `fail_to` fails
    /// (`NONE`: the whole search).
    root: bool,
    fail_to: u32,
    /// No further branch (hatless pruning).
    done: bool,
}

/// A part of the timeline cut into pieces, solved one after the other.
#[derive(Copy, Clone, Debug)]
pub(super) struct Scope {
    hi: u32,
    /// Level of the node whose placement cut the part: every piece starts
    /// there.
    level: u64,
    /// Where the next piece is looked for.
    cursor: u32,
    /// The frame whose placement cut the part (`NONE`: the root).
    fail_to: u32,
}

/// What opening a node found.
enum Open {
    Pushed,
    /// Dead: when `Some`, the frame to fail to (the node was a piece root).
    Dead(Option<u32>),
}

impl ExactWorkspace {
    /// Reserves this strategy's storage (called by `reserve_within`).
    pub(super) fn reserve_canonical(&mut self, n: usize, cells: usize, opts: usize, trail: usize) {
        at_least(&mut self.canon.rank, n);
        at_least(&mut self.canon.nb_left, n);
        at_least(&mut self.canon.cross, 2 * n + 2);
        at_least(&mut self.canon.scopes, n + 2);
        at_least(&mut self.canon.cframes, n + 2);
        at_least(&mut self.canon.eff, cells);
        at_least(&mut self.canon.minoff, opts);
        at_least(&mut self.canon.keys, n);
        at_least(&mut self.canon.piece_bufs, n);
        at_least(&mut self.canon.piece_ranks, n);
        at_least(&mut self.canon.rtrail, 8 * n + 64);
        at_least(&mut self.canon.mtrail, trail);
    }

    /// Calls `f(option)` for every option of every buffer overlapping buffer
    /// `b` in time (and `b`'s own): those live in its first section, and
    /// those starting inside its lifetime, each once.
    #[inline]
    fn for_neighbour_options(&self, b: usize, mut f: impl FnMut(&Self, usize)) {
        let (lo, hi) = (self.sec_lo[b] as usize, self.sec_hi[b] as usize);
        for k in self.live_at[lo] as usize..self.live_at[lo + 1] as usize {
            f(self, self.live[k] as usize);
        }
        for k in self.start_at[lo + 1] as usize..self.start_at[hi] as usize {
            f(self, self.starting[k] as usize);
        }
    }

    /// Places option `o` at `x`: raises its neighbours' minimum offsets
    /// (trailed), updates the section areas and the boundary counts.
    /// Returns (hatless, cut): whether no unplaced buffer overlaps it in
    /// time, and whether some boundary inside its lifetime lost its last
    /// crossing buffer.
    fn place_canonical(
        &mut self,
        problem: &Problem,
        o: usize,
        x: u64,
    ) -> Result<(bool, bool), Limit> {
        let bufs = problem.buffers();
        let opt = self.opts[o];
        let b = opt.buffer as usize;
        let top = x + bufs[b].size;
        self.placed[b] = true;
        self.unplaced -= 1;
        self.current[b] = Placement {
            offset: x,
            base: opt.base,
        };
        let mut hat = false;
        let mut full = false;
        let (lo, hi) = (self.sec_lo[b] as usize, self.sec_hi[b] as usize);
        let pinned = !self.pins.is_empty();
        // Visit the neighbours (a closure cannot borrow self mutably while
        // iterating self's lists: walk the two ranges by index).
        let ranges = [
            (
                true,
                self.live_at[lo] as usize,
                self.live_at[lo + 1] as usize,
            ),
            (
                false,
                self.start_at[lo + 1] as usize,
                self.start_at[hi] as usize,
            ),
        ];
        for (live, from, to) in ranges {
            for k in from..to {
                let oc = if live { self.live[k] } else { self.starting[k] } as usize;
                let copt = self.opts[oc];
                let c = copt.buffer as usize;
                if self.placed[c] {
                    continue;
                }
                hat = true;
                if oc == self.opt_at[c] as usize {
                    self.canon.nb_left[c] -= 1;
                }
                if copt.st_lo < opt.st_hi && opt.st_lo < copt.st_hi {
                    let need = align_offset(top, bufs[c].align);
                    if self.canon.minoff[oc] < need {
                        if self.canon.mtrail.len() == self.canon.mtrail.capacity() {
                            full = true;
                            continue;
                        }
                        self.canon.mtrail.push((oc as u32, self.canon.minoff[oc]));
                        self.canon.minoff[oc] = if pinned {
                            self.lowest(problem, &copt, need)
                        } else {
                            need
                        };
                    }
                }
            }
        }
        for s in lo..hi {
            self.remaining[s] -= self.area[b];
        }
        let mut cut = false;
        for s in lo + 1..hi {
            self.canon.cross[s] -= 1;
            cut |= self.canon.cross[s] == 0;
        }
        if full {
            return Err(Limit::Storage);
        }
        Ok((!hat, cut))
    }

    /// Undoes [`Self::place_canonical`] of option `o`, except the trail
    /// (restored by the frame).
    fn unplace_canonical(&mut self, o: usize) {
        let b = self.opts[o].buffer as usize;
        self.placed[b] = false;
        self.unplaced += 1;
        let (lo, hi) = (self.sec_lo[b] as usize, self.sec_hi[b] as usize);
        for s in lo..hi {
            self.remaining[s] += self.area[b];
        }
        for s in lo + 1..hi {
            self.canon.cross[s] += 1;
        }
        let mut nb = core::mem::take(&mut self.canon.nb_left);
        self.for_neighbour_options(b, |ws, oc| {
            let c = ws.opts[oc].buffer as usize;
            if !ws.placed[c] && oc == ws.opt_at[c] as usize {
                nb[c] += 1;
            }
        });
        self.canon.nb_left = nb;
    }

    /// Restores the minimum offsets to `mark`.
    fn restore_minoff(&mut self, mark: u32) {
        while self.canon.mtrail.len() > mark as usize {
            if let Some((o, old)) = self.canon.mtrail.pop() {
                self.canon.minoff[o as usize] = old;
            }
        }
    }

    /// The least branch of node `f` whose key is above `after`; with
    /// `infer`, also checks the node (`Err(())`: dead) and computes its
    /// least height.
    fn scan_canonical(
        &mut self,
        problem: &Problem,
        f: &mut CanonFrame,
        after: Option<Key>,
        infer: bool,
    ) -> Result<Option<Key>, ()> {
        let bufs = problem.buffers();
        let (lo, hi) = (f.lo as usize, f.hi as usize);
        let nsec = self.nsec;
        let level = f.level;
        let k = self.k;
        if infer {
            for st in 0..self.nst {
                self.canon.eff[st * nsec + lo..st * nsec + hi].fill(NO_LEVEL);
            }
        }
        let mut min_height = if infer { NO_LEVEL } else { f.min_height };
        let mut best: Option<Key> = None;
        let mut cur = NONE;
        let mut cur_ok = true;
        for i in self.start_at[lo] as usize..self.start_at[hi] as usize {
            let o = self.starting[i] as usize;
            let opt = self.opts[o];
            let b = opt.buffer as usize;
            if self.placed[b] {
                continue;
            }
            if infer && cur != b as u32 {
                if !cur_ok {
                    return Err(());
                }
                cur = b as u32;
                cur_ok = false;
            }
            let m = self.canon.minoff[o];
            let size = bufs[b].size;
            let r = self.canon.rank[b];
            let canonical = m > level || (m == level && (f.last == NONE || r > f.last));
            if infer {
                min_height = min_height.min(m.saturating_add(size));
                let reach = if canonical {
                    m
                } else if self.canon.nb_left[b] > 0 && self.min_neighbour[b] != NO_LEVEL {
                    self.lowest(problem, &opt, level.saturating_add(self.min_neighbour[b]))
                } else {
                    NO_LEVEL
                };
                if reach != NO_LEVEL && reach.saturating_add(size) <= k {
                    cur_ok = true;
                    let (blo, bhi) = (self.sec_lo[b] as usize, self.sec_hi[b] as usize);
                    for st in opt.st_lo as usize..opt.st_hi as usize {
                        for e in &mut self.canon.eff[st * nsec + blo..st * nsec + bhi] {
                            *e = (*e).min(reach);
                        }
                    }
                }
            }
            if !canonical || m.saturating_add(size) > k || (!infer && m >= min_height) {
                continue;
            }
            // Identical buffers are interchangeable: they go in index order
            // (their ranks follow it), one of each symmetric pair of paths.
            let tw = self.twin_prev[b];
            if tw != NONE && !self.placed[tw as usize] {
                continue;
            }
            let key = (m, r, o as u32);
            if after.is_some_and(|a| key <= a) {
                continue;
            }
            if best.map_or(true, |x| key < x) {
                best = Some(key);
            }
        }
        if !infer {
            return Ok(best);
        }
        if !cur_ok || min_height <= level {
            return Err(());
        }
        for s in lo..hi {
            let need = self.remaining[s];
            if need == 0 {
                continue;
            }
            let mut room = 0u64;
            for st in 0..self.nst {
                let e = self.canon.eff[st * nsec + s];
                if e < k {
                    room += (k - e) * self.width[st];
                }
            }
            if room < need {
                return Err(());
            }
        }
        f.min_height = min_height;
        Ok(best.filter(|key| key.0 < min_height))
    }

    /// Opens a node over sections `[lo, hi)` at `level` after rank `last`.
    #[allow(clippy::too_many_arguments)]
    fn open_canonical(
        &mut self,
        problem: &Problem,
        (lo, hi): (u32, u32),
        level: u64,
        last: u32,
        left: u32,
        root: Option<u32>,
    ) -> Result<Open, Limit> {
        let rmark = self.canon.rtrail.len() as u32;
        if root.is_some() {
            self.rank_piece(problem, lo as usize, hi as usize);
        }
        let mut f = CanonFrame {
            rmark,
            mark: self.canon.mtrail.len() as u32,
            level,
            last,
            lo,
            hi,
            left,
            min_height: NO_LEVEL,
            tried: None,
            pending: None,
            placed: NONE,
            scopes: self.canon.scopes.len() as u32,
            root: root.is_some(),
            fail_to: root.unwrap_or(NONE),
            done: false,
        };
        match self.scan_canonical(problem, &mut f, None, true) {
            Ok(Some(first)) => {
                if self.canon.cframes.len() == self.canon.cframes.capacity() {
                    return Err(Limit::Storage);
                }
                f.pending = Some(first);
                self.canon.cframes.push(f);
                Ok(Open::Pushed)
            }
            _ => {
                self.restore_ranks(rmark);
                Ok(Open::Dead(root))
            }
        }
    }

    /// Unplaced buffers whose lifetime starts in sections `[lo, hi)`.
    fn unplaced_in(&self, lo: usize, hi: usize) -> u32 {
        let mut n = 0;
        for i in self.start_at[lo] as usize..self.start_at[hi] as usize {
            let o = self.starting[i] as usize;
            let b = self.opts[o].buffer as usize;
            n += (!self.placed[b] && o == self.opt_at[b] as usize) as u32;
        }
        n
    }

    /// The first piece in `[from, hi)`: sections joined by crossing
    /// unplaced buffers, starting at the first section with unplaced area.
    fn piece(&self, from: usize, hi: usize) -> Option<(usize, usize)> {
        let start = (from..hi).find(|&s| self.remaining[s] > 0)?;
        let mut end = start + 1;
        while end < hi && self.canon.cross[end] > 0 {
            end += 1;
        }
        Some((start, end))
    }

    /// After a piece is complete: opens the next one, leaving finished
    /// scopes. `Ok(None)`: every piece is placed.
    fn next_piece(&mut self, problem: &Problem) -> Result<Option<Open>, Limit> {
        while let Some(sc) = self.canon.scopes.last().copied() {
            if let Some((a, b)) = self.piece(sc.cursor as usize, sc.hi as usize) {
                if let Some(top) = self.canon.scopes.last_mut() {
                    top.cursor = b as u32;
                }
                let left = self.unplaced_in(a, b);
                let part = (a as u32, b as u32);
                return self
                    .open_canonical(problem, part, sc.level, NONE, left, Some(sc.fail_to))
                    .map(Some);
            }
            self.canon.scopes.pop();
        }
        Ok(None)
    }

    /// Leaves the frames above `to`, undoing their placements.
    fn jump_canonical(&mut self, to: usize) {
        while self.canon.cframes.len() > to + 1 {
            if let Some(f) = self.canon.cframes.pop() {
                if f.placed != NONE {
                    self.unplace_canonical(f.placed as usize);
                }
                self.restore_minoff(f.mark);
                self.restore_ranks(f.rmark);
            }
        }
    }

    /// Initial minimum offsets, neighbour counts and boundary counts of the
    /// state `setup` built.
    fn init_canonical(&mut self, problem: &Problem) {
        let nopt = self.opts.len();
        self.canon.minoff.clear();
        for o in 0..nopt {
            let opt = self.opts[o];
            let m = if self.pins.is_empty() {
                0
            } else {
                self.lowest(problem, &opt, 0)
            };
            self.canon.minoff.push(m);
        }
        let n = problem.len();
        self.canon.nb_left.clear();
        self.canon.nb_left.resize(n, 0);
        let mut nb = core::mem::take(&mut self.canon.nb_left);
        for (b, slot) in nb.iter_mut().enumerate() {
            if self.placed[b] {
                continue;
            }
            let mut count = 0u32;
            self.for_neighbour_options(b, |ws, oc| {
                let c = ws.opts[oc].buffer as usize;
                count += (c != b && !ws.placed[c] && oc == ws.opt_at[c] as usize) as u32;
            });
            *slot = count;
        }
        self.canon.nb_left = nb;
        self.canon.cross.clear();
        self.canon.cross.resize(self.nsec + 1, 0);
        for b in 0..n {
            if !self.placed[b] {
                for s in self.sec_lo[b] as usize + 1..self.sec_hi[b] as usize {
                    self.canon.cross[s] += 1;
                }
            }
        }
        self.canon.eff.clear();
        self.canon.eff.resize(self.nst * self.nsec, NO_LEVEL);
        self.canon.mtrail.clear();
        self.canon.cframes.clear();
        self.canon.scopes.clear();
    }

    /// One attempt of the canonical search at the capacity `self.k` that
    /// `setup` set, with the preorder `pre`. Stops at the first placement.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn search_canonical(
        &mut self,
        problem: &Problem,
        pre: Preorder,
        options: &ExactOptions,
        clock: &mut dyn Clock,
        t0: u64,
        cap: u64,
        outcome: &mut Outcome,
    ) -> (Stop, bool) {
        let mut found = false;
        self.init_canonical(problem);
        self.canon.preorder = pre;
        let n = problem.len();
        self.canon.rank.clear();
        self.canon.rank.extend(0..n as u32);
        self.canon.keys.clear();
        self.canon.keys.resize(n, RankKey::default());
        self.canon.rtrail.clear();
        if self.unplaced == 0 {
            self.record(problem, clock, t0, cap, outcome, &mut found);
            return (Stop::Done, true);
        }
        self.canon.scopes.push(Scope {
            hi: self.nsec as u32,
            level: 0,
            cursor: 0,
            fail_to: NONE,
        });
        match self.next_piece(problem) {
            Ok(Some(Open::Pushed)) => {}
            Ok(_) => return (Stop::Done, false),
            Err(l) => return (Stop::Limit(l), false),
        }
        let single = |ws: &Self, o: usize| {
            let b = ws.opts[o].buffer as usize;
            ws.opt_at[b + 1] - ws.opt_at[b] == 1
        };
        loop {
            let Some(fi) = self.canon.cframes.len().checked_sub(1) else {
                return (Stop::Done, found);
            };
            if let Some(stop) = self.count_node(options, clock, t0, outcome) {
                return (stop, found);
            }
            let mut f = self.canon.cframes[fi];
            if f.placed != NONE {
                self.unplace_canonical(f.placed as usize);
                self.restore_minoff(f.mark);
                self.canon.scopes.truncate(f.scopes as usize);
                f.placed = NONE;
            }
            let next = if f.done {
                None
            } else {
                match f.pending.take() {
                    Some(key) => Some(key),
                    None => {
                        let after = f.tried;
                        self.scan_canonical(problem, &mut f, after, false)
                            .ok()
                            .flatten()
                    }
                }
            };
            let Some(key) = next else {
                self.canon.cframes[fi] = f;
                if f.root {
                    if f.fail_to == NONE {
                        return (Stop::Done, found);
                    }
                    self.jump_canonical(f.fail_to as usize);
                } else {
                    self.canon.cframes.pop();
                    self.restore_ranks(f.rmark);
                }
                continue;
            };
            let o = key.2 as usize;
            f.tried = Some(key);
            f.placed = o as u32;
            let placed = self.place_canonical(problem, o, key.0);
            self.canon.cframes[fi] = f;
            let (hatless, cut) = match placed {
                Ok(x) => x,
                Err(l) => return (Stop::Limit(l), found),
            };
            if hatless && single(self, o) {
                self.canon.cframes[fi].done = true;
            }
            let b = self.opts[o].buffer as usize;
            let rank = self.canon.rank[b];
            let opened = if f.left == 1 {
                match self.next_piece(problem) {
                    Ok(Some(open)) => open,
                    Ok(None) => {
                        self.record(problem, clock, t0, cap, outcome, &mut found);
                        return (Stop::Done, true);
                    }
                    Err(l) => return (Stop::Limit(l), found),
                }
            } else {
                let (lo, hi) = (f.lo as usize, f.hi as usize);
                let mut part = (f.lo, f.hi);
                let mut root = None;
                if cut {
                    if let Some((a, e)) = self.piece(lo, hi) {
                        part = (a as u32, e as u32);
                        if self.piece(e, hi).is_some() {
                            root = Some(fi as u32);
                        }
                    }
                }
                let r = match root {
                    Some(_) => {
                        // The whole part first, as one node: a later piece
                        // that cannot fit fails here, before the earlier
                        // ones are searched.
                        let mut probe = CanonFrame {
                            lo: f.lo,
                            hi: f.hi,
                            level: key.0,
                            last: rank,
                            ..f
                        };
                        if self
                            .scan_canonical(problem, &mut probe, None, true)
                            .is_err()
                        {
                            Ok(Open::Dead(None))
                        } else if self.canon.scopes.len() == self.canon.scopes.capacity() {
                            return (Stop::Limit(Limit::Storage), found);
                        } else {
                            self.canon.scopes.push(Scope {
                                hi: hi as u32,
                                level: key.0,
                                cursor: part.1,
                                fail_to: fi as u32,
                            });
                            let left = self.unplaced_in(part.0 as usize, part.1 as usize);
                            self.open_canonical(problem, part, key.0, NONE, left, root)
                        }
                    }
                    None => self.open_canonical(problem, part, key.0, rank, f.left - 1, None),
                };
                match r {
                    Ok(open) => open,
                    Err(l) => return (Stop::Limit(l), found),
                }
            };
            match opened {
                Open::Pushed | Open::Dead(None) => {}
                Open::Dead(Some(to)) => {
                    if to == NONE {
                        return (Stop::Done, found);
                    }
                    self.jump_canonical(to as usize);
                }
            }
        }
    }
}
