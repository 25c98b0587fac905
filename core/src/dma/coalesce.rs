//! Coalescing (`internal_dma_coalescing`): merge DMAs whose bytes abut on
//! both sides at real addresses into one wider DMA.
//!
//! Candidates are bucketed by the on-chip base partition (one bucket per
//! partition of the pass's space, plus one sentinel bucket for the rest, as
//! the reference's `addCandidate`) and
//! sorted by (kind, queue, DRAM tensor, partition range, loop, DRAM offset),
//! so that abutting neighbours are adjacent. A group grows from a DMA to its
//! right neighbour while every predicate of the seed holds:
//!
//! - single producer→consumer chain: the tile has exactly one writer (a load:
//!   the load itself, and nothing reads the tile before it);
//! - both full-access: the on-chip side covers its whole location
//!   (`Module::is_full_access`);
//! - both byte-contiguous at real addresses: both sides dense and the next
//!   DMA's DRAM bytes and placed tile start where the group ends;
//! - members under `dma_coalesce_count_limit`;
//! - not `tooLargeForCoalescing`: merged bytes per partition within
//!   `dma_coalesce_budget`, merged descriptors within
//!   `dma_coalesce_max_elements`, element alignment ≤
//!   `dma_coalesce_align_gate`, and (PSUM) inside the banks one tensor may
//!   span;
//! - same loop nest;
//! - the merged read is legal for uninitialized memory.
//!
//! Legality at real addresses: the merged location occupies the union of the
//! tiles from the first member's first access to the last member's last
//! access (the *hull*); no other location may live in those cells during the
//! hull ([`LiveIndex`](super::conflict::LiveIndex) query), and the DRAM bytes
//! whose access moves (a load moves earlier, a save later) must not be
//! written (load) or touched (save) in between. Groups of one round are then
//! checked against each other with
//! [`sweep_claims`](super::conflict::sweep_claims).
//!
//! The merged DMA sits where the first load (last save) was; the tiles join
//! the merged location in the [`MemoryMergeTracker`](super::MemoryMergeTracker)
//! and every consumer is re-pointed (location and offset columns).

use super::conflict::{ap_rect, Claim, Rect};
use super::pass::{
    dma_pair, dma_sides, dma_view, has_room, write_count, write_span, DmaError, DmaOptimization,
    DmaStats, DmaWorkspace, Proposal, Sweep, Vetoes,
};
use super::rewrite::{apply_accepted, insert_like, run_like, whole};
use crate::analysis::{Interval, LinearOrder, MemLiveness};
use crate::ir::{Inst, InstFlags, MemFlags, MemLoc, Module, Space};
use crate::target::Target;

/// One coalescing candidate.
#[derive(Copy, Clone, Debug)]
pub struct Cand {
    inst: Inst,
    pos: u32,
    load: bool,
    /// Sort key: bucket, kind, queue, flags, DRAM loc, partitions, elem, loop.
    key: (u16, u8, u8, u8, u32, u16, u16, u8, u32),
    /// DRAM byte offset inside each partition (relative to its location).
    dram_off: u64,
    /// Physical on-chip byte offset of the tile.
    chip_lo: u64,
    /// Bytes per partition.
    bytes: u64,
    chip_loc: MemLoc,
    /// Live interval of the tile.
    live: Interval,
}

/// The bucket of a candidate whose on-chip base partition is `base`: the
/// partition itself, or the sentinel bucket (one past the last partition of
/// `space` on the target) for a base out of that range.
fn bucket(t: &Target, space: Space, base: u16) -> u16 {
    let partitions = match space {
        Space::Psum => t.psum_partitions,
        _ => t.sb_partitions,
    };
    base.min(partitions)
}

/// Why a DMA of the pass's space moves (see [`moving`]).
enum Moving {
    /// A side has a register term.
    Register,
    /// A side has loop terms or a partition step.
    Loop,
}

/// Whether `i` is a one-to-one DMA between DRAM and `space` whose sides
/// are not both plain, and how it moves.
fn moving(m: &Module, i: Inst, space: Space) -> Option<Moving> {
    let v = dma_pair(m, i, space)?;
    let (a, b) = (v.dram, v.chip);
    if m.ap_is_plain(a) && m.ap_is_plain(b) {
        return None;
    }
    Some(if m.ap_ext(a).is_dynamic() || m.ap_ext(b).is_dynamic() {
        Moving::Register
    } else {
        Moving::Loop
    })
}

/// One coalescing round: find groups, accept a conflict-free subset, apply
/// them. Returns the number of merged DMAs created.
pub fn round(Sweep { pass, m, ws, st }: Sweep<'_>) -> Result<u32, DmaError> {
    collect(pass, m, ws, st);
    propose(pass, m, ws, st);
    let made = apply_accepted(ws, |ws, p| {
        if !has_room(m, 0, true) {
            st.headroom_skipped += 1;
            return Ok(false);
        }
        apply(pass, m, ws, p)?;
        st.coalesced_groups += 1;
        st.coalesced_dmas += p.b;
        Ok(true)
    })?;
    st.vetoes.claim += ws.proposals.refused();
    Ok(made)
}

/// A per-DMA predicate that refused a DMA, by the veto it counts as.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum DmaVeto {
    DynamicOffset,
    LoopIndexed,
    NotFullAccess,
    NotContiguous,
    TooLarge,
    ProducerChain,
}

impl DmaVeto {
    pub(crate) fn count(self, v: &mut Vetoes) {
        match self {
            DmaVeto::DynamicOffset => v.dynamic_offset += 1,
            DmaVeto::LoopIndexed => v.loop_indexed += 1,
            DmaVeto::NotFullAccess => v.not_full_access += 1,
            DmaVeto::NotContiguous => v.not_contiguous += 1,
            DmaVeto::TooLarge => v.too_large += 1,
            DmaVeto::ProducerChain => v.producer_chain += 1,
        }
    }
}

/// What the per-DMA predicates know of a candidate, placed or not.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Facts {
    pub(crate) load: bool,
    /// Sort key without the bucket: kind, queue, flags, DRAM loc,
    /// partitions, elem, loop. Two DMAs may merge only when equal.
    pub(crate) key: (u8, u8, u32, u16, u16, u8, u32),
    pub(crate) flags: u8,
    pub(crate) dram_off: u64,
    pub(crate) bytes: u64,
    pub(crate) chip_loc: MemLoc,
    pub(crate) live: Interval,
}

/// The per-DMA predicates of coalescing on `i` at position `pos`: `None`
/// when `i` is no DMA of `space` this pass looks at, the veto that refuses
/// it, or its facts. With `placed`, both sides must be placed (the pass);
/// without, placement is not looked at (the affinities, before allocation).
pub(crate) fn screen(
    m: &Module,
    live: &MemLiveness,
    pos: u32,
    i: Inst,
    space: Space,
    placed: bool,
) -> Option<Result<Facts, DmaVeto>> {
    let t = &m.target;
    if let Some(veto) = moving(m, i, space) {
        // `dma_view` refuses it; say why.
        return Some(Err(match veto {
            Moving::Register => DmaVeto::DynamicOffset,
            Moving::Loop => DmaVeto::LoopIndexed,
        }));
    }
    let v = if placed {
        dma_view(m, i, space)
    } else {
        dma_sides(m, i, space)
    }?;
    let chip_loc = m.aps().loc[v.chip];
    let dram_loc = m.aps().loc[v.dram];
    if !m.is_full_access(v.chip) {
        return Some(Err(DmaVeto::NotFullAccess));
    }
    if !m.is_contiguous(v.dram) {
        return Some(Err(DmaVeto::NotContiguous));
    }
    let elem = m.aps().elem_size[v.chip];
    if m.aps().elem_size[v.dram] != elem || m.aps().part_count[v.dram] != m.aps().part_count[v.chip]
    {
        return Some(Err(DmaVeto::NotContiguous));
    }
    if elem as u32 > t.dma_coalesce_align_gate {
        return Some(Err(DmaVeto::TooLarge));
    }
    let flags = m.mems().flags[chip_loc];
    let single = write_count(live, chip_loc) == 1
        && (!v.load || live.accesses(chip_loc).first() == Some(&pos));
    if !single || flags.intersects(MemFlags::PINNED | MemFlags::INPUT | MemFlags::OUTPUT) {
        return Some(Err(DmaVeto::ProducerChain));
    }
    let iv = live.interval(chip_loc)?;
    Some(Ok(Facts {
        load: v.load,
        key: (
            m.insts().opcode[i] as u8,
            m.insts().queue[i],
            dram_loc.as_u32(),
            m.aps().part_start[v.dram].into(),
            m.aps().part_count[v.dram].into(),
            elem,
            m.inst_loop(i).as_u32(),
        ),
        flags: m.insts().flags[i].bits(),
        dram_off: m.aps().offset[v.dram] as u64,
        bytes: m.ap_bytes_per_partition(v.chip),
        chip_loc,
        live: iv,
    }))
}

/// The inclusive span of positions over which a merged save of members
/// live from `starts` stays live, `None` outside a repeating loop. Its
/// location is written in parts, one per member's producer, and inside a
/// loop liveness carries such a location over the whole loop nest (its
/// loop rule for partial writes), so the cells that must stay free for the
/// merge are that nest's, for the pass and for the finder that places
/// the members beforehand alike.
pub(crate) fn save_nest(m: &Module, order: &LinearOrder, starts: [u32; 2]) -> Option<(u32, u32)> {
    starts
        .iter()
        .filter_map(|&p| order.outermost_loop_span(m, p))
        .reduce(|(s0, e0), (s1, e1)| (s0.min(s1), e0.max(e1)))
}

/// `tooLargeForCoalescing` of a merged DMA of `bytes` per partition over
/// `parts` partitions: over the byte budget or the descriptor ceiling.
pub(crate) fn merged_too_large(t: &Target, parts: u64, bytes: u64) -> bool {
    let descriptors = parts * bytes.div_ceil(t.dma_descriptor_max_bytes.max(1) as u64);
    bytes > t.dma_coalesce_budget as u64
        || descriptors > t.dma_coalesce_max_elements as u64
        || bytes > u32::MAX as u64 / 2
}

/// True when a merged load placed at `merged_pos` would read `dram_loc`
/// before anything initializes it, for a member DMA `inst` that may not
/// read uninitialized memory.
pub(crate) fn reads_uninit(
    m: &Module,
    live: &MemLiveness,
    dram_loc: MemLoc,
    load: bool,
    inst: Inst,
    merged_pos: u32,
) -> bool {
    if !load || m.insts().flags[inst].contains(InstFlags::CAN_READ_UNINIT) {
        return false;
    }
    let input = m.mems().flags[dram_loc].contains(MemFlags::INPUT);
    !(input || write_span(live, dram_loc).is_some_and(|(w0, _)| w0 < merged_pos))
}

fn collect(pass: &DmaOptimization, m: &Module, ws: &mut DmaWorkspace, st: &mut DmaStats) {
    ws.cands.clear();
    let t = &m.target;
    for (pos, &i) in ws.order.insts().iter().enumerate() {
        let f = match screen(m, &ws.live, pos as u32, i, pass.space, true) {
            None => continue,
            Some(Err(veto)) => {
                veto.count(&mut st.vetoes);
                continue;
            }
            Some(Ok(f)) => f,
        };
        let base = m.mems().base_partition[f.chip_loc];
        if ws.cands.len() == ws.cands.capacity() {
            break;
        }
        let k = f.key;
        ws.cands.push(Cand {
            inst: i,
            pos: pos as u32,
            load: f.load,
            key: (
                bucket(t, pass.space, base),
                k.0,
                k.1,
                f.flags,
                k.2,
                k.3,
                k.4,
                k.5,
                k.6,
            ),
            dram_off: f.dram_off,
            chip_lo: m.mems().offset[f.chip_loc],
            bytes: f.bytes,
            chip_loc: f.chip_loc,
            live: f.live,
        });
    }
    ws.cands
        .sort_unstable_by_key(|c| (c.key, c.dram_off, c.pos));
}

/// The state of a group while it grows.
struct Group {
    lo_dram: u64,
    hi_dram: u64,
    lo_chip: u64,
    hi_chip: u64,
    merged_pos: u32,
    hull: Interval,
    members: u32,
}

fn propose(pass: &DmaOptimization, m: &Module, ws: &mut DmaWorkspace, st: &mut DmaStats) {
    ws.proposals.clear();
    let n = ws.cands.len();
    let mut k = 0;
    while k < n {
        let first = ws.cands[k];
        let mut g = Group {
            lo_dram: first.dram_off,
            hi_dram: first.dram_off + first.bytes,
            lo_chip: first.chip_lo,
            hi_chip: first.chip_lo + first.bytes,
            merged_pos: first.pos,
            hull: first.live,
            members: 1,
        };
        mark(ws, first.chip_loc, k as u32 + 1);
        let mut j = k + 1;
        while j < n {
            let c = ws.cands[j];
            if c.key != first.key {
                let (a, b) = (c.key, first.key);
                let same_but_loop = (a.0, a.1, a.2, a.3, a.4, a.5, a.6, a.7)
                    == (b.0, b.1, b.2, b.3, b.4, b.5, b.6, b.7);
                if same_but_loop && (c.dram_off == g.hi_dram || c.dram_off + c.bytes == g.lo_dram) {
                    st.vetoes.loop_boundary += 1;
                }
                break;
            }
            if c.dram_off != g.hi_dram {
                break;
            }
            if c.chip_lo != g.hi_chip {
                // Abutting DRAM bytes, same partitions and loop nest, but
                // the tile does not start where the group's tiles end.
                st.vetoes.not_adjacent += 1;
                break;
            }
            match admit(pass, m, ws, (k, j), &g, &c, k as u32 + 1) {
                Ok(ng) => {
                    g = ng;
                    mark(ws, c.chip_loc, k as u32 + 1);
                    j += 1;
                }
                Err(v) => {
                    veto(st, v);
                    break;
                }
            }
        }
        if g.members >= 2 {
            let fl = first.chip_loc;
            let base = m.mems().base_partition[fl] as u32;
            let parts = m.mems().partitions[fl] as u32;
            let dram_ap_parts = (first.key.5 as u32, first.key.5 as u32 + first.key.6 as u32);
            let p = Proposal {
                inst: first.inst,
                other: Inst::INVALID,
                a: k as u32,
                b: g.members,
            };
            let claim = Claim {
                win: g.hull,
                rect: Rect {
                    p0: base,
                    p1: base + parts,
                    lo: g.lo_chip,
                    hi: g.hi_chip,
                },
                owner: fl,
                dram: Rect {
                    p0: dram_ap_parts.0,
                    p1: dram_ap_parts.1,
                    lo: g.lo_dram,
                    hi: g.hi_dram,
                },
                dram_loc: MemLoc::from_u32(first.key.4),
                dram_write: !first.load,
                id: 0,
                ok: false,
            };
            ws.proposals.propose(p, claim);
        }
        for q in k..j {
            mark(ws, ws.cands[q].chip_loc, 0);
        }
        k = j.max(k + 1);
    }
}

fn mark(ws: &mut DmaWorkspace, l: MemLoc, v: u32) {
    if let Some(x) = ws.mark.get_mut(l.index()) {
        *x = v;
    }
}

#[derive(Copy, Clone, Debug)]
enum Veto {
    Count,
    TooLarge,
    Uninit,
    Conflict,
}

fn veto(st: &mut DmaStats, v: Veto) {
    match v {
        Veto::Count => st.vetoes.count_limit += 1,
        Veto::TooLarge => st.vetoes.too_large += 1,
        Veto::Uninit => st.vetoes.uninit += 1,
        Veto::Conflict => st.vetoes.conflict += 1,
    }
}

/// Checks every pair/group predicate for adding `c` to `g`.
fn admit(
    pass: &DmaOptimization,
    m: &Module,
    ws: &DmaWorkspace,
    (k, j): (usize, usize),
    g: &Group,
    c: &Cand,
    gid: u32,
) -> Result<Group, Veto> {
    let t = &m.target;
    let first = &ws.cands[k];
    if g.members + 1 >= t.dma_coalesce_count_limit {
        return Err(Veto::Count);
    }
    let bytes = g.hi_chip + c.bytes - g.lo_chip;
    if merged_too_large(t, first.key.6 as u64, bytes) {
        return Err(Veto::TooLarge);
    }
    if pass.space == Space::Psum {
        let bank = t.psum_bank_bytes.max(1) as u64;
        let span = (g.hi_chip + c.bytes - 1) / bank - g.lo_chip / bank;
        if span >= t.psum_max_banks_per_tensor as u64 {
            return Err(Veto::TooLarge);
        }
    }
    let merged_pos = if first.load {
        g.merged_pos.min(c.pos)
    } else {
        g.merged_pos.max(c.pos)
    };
    // The merged read: every member's source must be initialized at the
    // merged position, unless the member may read uninitialized memory.
    let dram_loc = MemLoc::from_u32(first.key.4);
    let uninit =
        |cand: &Cand| reads_uninit(m, &ws.live, dram_loc, first.load, cand.inst, merged_pos);
    if uninit(c) || (merged_pos != g.merged_pos && ws.cands[k..j].iter().any(uninit)) {
        return Err(Veto::Uninit);
    }
    let mut hull = Interval {
        start: g.hull.start.min(c.live.start).min(merged_pos),
        end: g.hull.end.max(c.live.end).max(merged_pos),
    };
    if !first.load {
        if let Some((ls, le)) = save_nest(m, &ws.order, [first.live.start, c.live.start]) {
            hull.start = hull.start.min(ls);
            hull.end = hull.end.max(le);
        }
    }
    // Cells: nobody else may live in the union of the tiles during the hull.
    let base = m.mems().base_partition[c.chip_loc] as u32;
    let p1 = base + m.mems().partitions[c.chip_loc] as u32;
    let union = Rect {
        p0: base,
        p1,
        lo: g.lo_chip,
        hi: g.hi_chip + c.bytes,
    };
    let own = |l: MemLoc| ws.mark.get(l.index()).is_some_and(|&x| x == gid) || l == c.chip_loc;
    if ws.index.find(m, &ws.live, hull, &union, &own).is_some() {
        return Err(Veto::Conflict);
    }
    // DRAM: the bytes whose access moves must not change in between.
    let dram_rect = |cand: &Cand| -> Option<Rect> {
        let a = dma_view(m, cand.inst, pass.space)?.dram;
        ap_rect(m, a)
    };
    let moved = |cand: &Cand, from: u32, to: u32| -> bool {
        let Some(r) = dram_rect(cand) else {
            return true;
        };
        let (a, b) = if from < to { (from, to) } else { (to, from) };
        let own_loc = m.aps().loc
            [dma_view(m, cand.inst, pass.space).map_or(crate::ir::Ap::INVALID, |v| v.dram)];
        // Same location: exact per-partition check on its access list.
        let local = {
            let v = dma_view(m, cand.inst, pass.space);
            v.is_some_and(|v| {
                let span = m.ap_byte_span(v.dram);
                let ps = m.aps().part_start[v.dram] as u64;
                let pc = m.aps().part_count[v.dram] as u64;
                span.is_some_and(|(lo, hi)| {
                    touched_between(m, ws, own_loc, ps, pc, lo, hi, a, b, first.load)
                })
            })
        };
        // Other DRAM locations placed over the same bytes.
        let w = Interval { start: a, end: b };
        let alias = ws
            .dram_index
            .find(m, &ws.live, w, &r, &|l: MemLoc| l == own_loc)
            .is_some();
        local || alias
    };
    if moved(c, c.pos, merged_pos) {
        return Err(Veto::Conflict);
    }
    if merged_pos != g.merged_pos {
        // The merged DMA moved: re-check the members already in the group
        // over the extension (they sit between old and new merged position).
        if ws.cands[k..j]
            .iter()
            .any(|e| moved(e, g.merged_pos, merged_pos))
        {
            return Err(Veto::Conflict);
        }
    }
    Ok(Group {
        lo_dram: g.lo_dram,
        hi_dram: g.hi_dram + c.bytes,
        lo_chip: g.lo_chip,
        hi_chip: g.hi_chip + c.bytes,
        merged_pos,
        hull,
        members: g.members + 1,
    })
}

/// True when an instruction strictly between positions `a` and `b` touches
/// bytes `[lo, hi)` of partitions `[ps, ps + pc)` of DRAM location `l`
/// (writes only when `writes_only`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn touched_between(
    m: &Module,
    ws: &DmaWorkspace,
    l: MemLoc,
    ps: u64,
    pc: u64,
    lo: u64,
    hi: u64,
    a: u32,
    b: u32,
    writes_only: bool,
) -> bool {
    if writes_only && write_count(&ws.live, l) == 0 {
        return false;
    }
    let acc = ws.live.accesses(l);
    let from = acc.partition_point(|&p| p <= a);
    for &p in &acc[from..] {
        if p >= b {
            break;
        }
        let i = ws.order.inst_at(p);
        let hit = |x: crate::ir::Ap| {
            if m.aps().loc[x] != l {
                return false;
            }
            let (x0, x1) = m.ap_rows(x);
            let (xs, xc) = (x0 as u64, x1.saturating_sub(x0) as u64);
            if xs >= ps + pc || ps >= xs + xc {
                return false;
            }
            m.ap_byte_span(x)
                .map_or(true, |(xl, xh)| xl < hi && lo < xh)
        };
        if m.outputs(i).any(hit) || (!writes_only && m.inputs(i).any(hit)) {
            return true;
        }
    }
    false
}

fn apply(
    pass: &DmaOptimization,
    m: &mut Module,
    ws: &mut DmaWorkspace,
    p: Proposal,
) -> Result<(), DmaError> {
    let k = p.a as usize;
    let n = p.b as usize;
    let first = ws.cands[k];
    let Some(v) = dma_view(m, first.inst, pass.space) else {
        return Ok(());
    };
    let fl = first.chip_loc;
    let total: u64 = ws.cands[k..k + n].iter().map(|c| c.bytes).sum();
    let elem = m.aps().elem_size[v.chip].max(1);
    let parts = m.mems().partitions[fl];
    let new_loc = ws.add_loc(m, pass.name, "c", fl, total as u32, first.chip_lo)?;
    let dram = run_like(m, v.dram, first.dram_off as u32, elem, total);
    let chip = whole(new_loc, parts, elem, total);
    let members = &ws.cands[k..k + n];
    let at = if first.load {
        members.iter().min_by_key(|c| c.pos).map(|c| c.inst)
    } else {
        members.iter().max_by_key(|c| c.pos).map(|c| c.inst)
    };
    let at = at.unwrap_or(first.inst);
    insert_like(pass.name, m, first.inst, at, first.load, dram, chip)?;
    for q in k..k + n {
        let c = ws.cands[q];
        m.remove_inst(c.inst);
        ws.tracker
            .join(c.chip_loc, new_loc, (c.chip_lo - first.chip_lo) as u32);
    }
    Ok(())
}
