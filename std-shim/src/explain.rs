//! `tusk run --explain`: the run's decisions, in the user's names.
//!
//! An [`Explanation`] is a list of [`Section`]s, each made by one function
//! from what the run left: the placed module and the [`RunReport`] on
//! success ([`RUN_SECTIONS`]), the module as the failing pass left it and
//! the [`PipelineError`] on failure ([`of_failure`]). Each concern is one
//! function, so a pass that reports more (a list of its spills with their
//! costs, a DMA rewrite's reasons) adds a section by adding a function to
//! the list, without touching the others. Everything is derived from the
//! result: an explanation never claims a reason the module does not show.
//!
//! Per-tensor lines are capped ([`MAX_TENSORS`] per space, the largest
//! first), so a module of millions of tensors explains its large ones and
//! says how many it left out.

use std::fmt::Write as _;

use serde_json::{json, Value};
use tusk_core::analysis::{LinearOrder, MemLiveness};
use tusk_core::ir::{Entity, InstFlags, MemFlags, MemLoc, Module, Opcode, Space};
use tusk_core::options::Pass;
use tusk_core::report::{ColoringError, LsaError};
use tusk_core::verify::{Axis, Finding};
use tusk_core::{PipelineError, RunReport};

use crate::blame;
use crate::text::SourceMap;

/// Tensors explained one by one per space at most (the largest).
pub const MAX_TENSORS: usize = 40;
/// Names listed in one reason at most.
const MAX_NAMES: usize = 4;

/// One part of an explanation: a heading and its lines.
#[derive(Clone, Debug, Default)]
pub struct Section {
    /// The heading.
    pub title: String,
    /// The lines under it.
    pub lines: Vec<String>,
}

/// What `--explain` prints: sections in order.
#[derive(Clone, Debug, Default)]
pub struct Explanation {
    /// The sections.
    pub sections: Vec<Section>,
}

impl Explanation {
    /// The text: each section's heading, then its lines indented.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for sec in &self.sections {
            let _ = writeln!(s, "{}:", sec.title);
            for l in &sec.lines {
                let _ = writeln!(s, "  {l}");
            }
        }
        s
    }

    /// The same as JSON: `[{"title": ..., "lines": [...]}, ...]`.
    pub fn to_json(&self) -> Value {
        Value::Array(
            self.sections
                .iter()
                .map(|s| json!({"title": s.title, "lines": s.lines}))
                .collect(),
        )
    }
}

/// What a section of a successful run reads.
#[derive(Debug)]
pub struct RunFacts<'a> {
    /// The placed module.
    pub module: &'a Module,
    /// The run's report.
    pub report: &'a RunReport,
    /// Per location of the input (by index), whether the input placed it.
    pub input_placed: &'a [bool],
    /// Program order and memory liveness of `module`.
    pub order: LinearOrder,
    /// See `order`.
    pub live: MemLiveness,
}

/// One section of a successful run's explanation (`None`: nothing to say).
pub type RunSection = fn(&RunFacts<'_>) -> Option<Section>;

/// The sections of a successful run, in order.
pub const RUN_SECTIONS: &[RunSection] = &[placements, spills, dma];

/// The explanation of a successful run of `m` (placed), whose input placed
/// the locations `input_placed` marks.
pub fn of_run(m: &Module, report: &RunReport, input_placed: &[bool]) -> Explanation {
    let order = LinearOrder::of(m);
    let live = MemLiveness::of(m, &order);
    let facts = RunFacts {
        module: m,
        report,
        input_placed,
        order,
        live,
    };
    Explanation {
        sections: RUN_SECTIONS.iter().filter_map(|f| f(&facts)).collect(),
    }
}

/// `%a, %b, %c, %d and 3 more`.
fn names(m: &Module, vs: &[MemLoc]) -> String {
    let mut s: Vec<String> = vs
        .iter()
        .take(MAX_NAMES)
        .map(|&v| format!("%{}", m.mem_name(v)))
        .collect();
    if vs.len() > MAX_NAMES {
        s.push(format!("{} more", vs.len() - MAX_NAMES));
    }
    s.join(", ")
}

/// The pass that placed the locations of `space` this run, by its
/// reference name.
fn placer(report: &RunReport, space: Space) -> &'static str {
    for p in &report.passes {
        match p.pass {
            Pass::Coloring(s) | Pass::Exact(s) if s == space => return p.pass.name(),
            Pass::LinearScan if space != Space::Dram => return p.pass.name(),
            _ => {}
        }
    }
    match space {
        Space::Dram => Pass::RegSpillSlots.name(),
        _ => "no allocator (optlevel 7 keeps the input's placements)",
    }
}

/// Partitions `[base, base + partitions)` of a placed on-chip location
/// (DRAM: the one row).
fn parts(m: &Module, v: MemLoc) -> (u32, u32) {
    if m.mems().space[v] == Space::Dram {
        return (0, 1);
    }
    let b = m.mems().base_partition[v] as u32;
    (b, b + m.mems().partitions[v] as u32)
}

/// Why each placed tensor sits where it does: who placed it, what lies
/// under it while it is live (why it is no lower), and which tensors reuse
/// its bytes at other times.
fn placements(f: &RunFacts<'_>) -> Option<Section> {
    let m = f.module;
    let mut lines = Vec::new();
    for space in [Space::Sb, Space::Psum, Space::Dram] {
        let mut placed: Vec<MemLoc> = m
            .mems()
            .space
            .keys()
            .filter(|&v| m.mems().space[v] == space && m.is_placed(v))
            .filter(|&v| f.live.interval(v).is_some())
            .collect();
        if placed.is_empty() {
            continue;
        }
        let total = placed.len();
        placed.sort_by_key(|&v| std::cmp::Reverse(m.mem_footprint(v)));
        let by = placer(f.report, space);
        let kept = placed
            .iter()
            .filter(|&&v| f.input_placed.get(v.index()).copied().unwrap_or(false))
            .count();
        lines.push(format!(
            "{}: {total} placed location{}: {} placed by {by}, {kept} kept where the input placed {}",
            space.upper(),
            if total == 1 { "" } else { "s" },
            total - kept,
            if kept == 1 { "it" } else { "them" }
        ));
        for &v in placed.iter().take(MAX_TENSORS) {
            let Some(iv) = f.live.interval(v) else {
                continue;
            };
            let (p0, p1) = parts(m, v);
            let (o0, o1) = (m.mems().offset[v], m.mems().offset[v] + m.mem_footprint(v));
            let mut under = Vec::new();
            let mut reuse = Vec::new();
            for w in placed.iter().copied().filter(|&w| w != v) {
                let (q0, q1) = parts(m, w);
                if q1 <= p0 || p1 <= q0 {
                    continue;
                }
                let Some(jv) = f.live.interval(w) else {
                    continue;
                };
                let (w0, w1) = (m.mems().offset[w], m.mems().offset[w] + m.mem_footprint(w));
                if iv.overlaps(jv) {
                    if w0 < o0 {
                        under.push(w);
                    }
                } else if w0 < o1 && o0 < w1 {
                    reuse.push(w);
                }
            }
            under.sort_by_key(|&w| m.mems().offset[w]);
            let who = if f.input_placed.get(v.index()).copied().unwrap_or(false) {
                "kept where the input placed it".to_string()
            } else {
                format!("placed by {by}")
            };
            let mut l = format!(
                "{}, live [{}, {}]: {who}",
                m.describe_mem(v),
                iv.start,
                iv.end
            );
            if o0 == 0 {
                l.push_str("; at the bottom of the space");
            } else if !under.is_empty() {
                let _ = write!(l, "; below it while it is live: {}", names(m, &under));
            }
            if !reuse.is_empty() {
                let _ = write!(
                    l,
                    "; its bytes are reused at other times by {}",
                    names(m, &reuse)
                );
            }
            lines.push(l);
        }
        if total > MAX_TENSORS {
            lines.push(format!(
                "… {} smaller {} locations not listed",
                total - MAX_TENSORS,
                space.upper()
            ));
        }
    }
    (!lines.is_empty()).then(|| Section {
        title: "placements".into(),
        lines,
    })
}

/// Every spill store, reload and recompute the allocators inserted, with
/// its bytes and its cost by the target's model (a DMA's, an engine
/// copy's, a memset's).
fn spills(f: &RunFacts<'_>) -> Option<Section> {
    let m = f.module;
    let mut lines = Vec::new();
    let mut total_cycles = 0u64;
    let mut n = 0usize;
    for pos in 0..f.order.len() as u32 {
        let i = f.order.inst_at(pos);
        let fl = m.insts().flags[i];
        let what = if fl.contains(InstFlags::SPILL) {
            "spill store"
        } else if fl.contains(InstFlags::RELOAD) && recomputes(m, i) {
            "recompute"
        } else if fl.contains(InstFlags::RELOAD) {
            "reload"
        } else {
            continue;
        };
        let bytes: u64 = m.outputs(i).map(|a| m.ap_bytes(a)).sum();
        let cycles = tusk_core::pass::spill::inst_cycles(m, i);
        total_cycles += cycles;
        n += 1;
        if n <= MAX_TENSORS * 4 {
            lines.push(format!(
                "{what} at position {pos}: {} — {bytes} B, ~{cycles} cycles",
                m.describe_inst(i)
            ));
        }
    }
    if n > MAX_TENSORS * 4 {
        lines.push(format!("… {} more not listed", n - MAX_TENSORS * 4));
    }
    if n > 0 {
        lines.push(format!(
            "{n} spill and reload instruction{}, ~{total_cycles} cycles in all",
            if n == 1 { "" } else { "s" }
        ));
    }
    let regs = f.report.reg.as_ref().map_or(0, |g| g.spilled_registers);
    if regs > 0 {
        lines.push(format!(
            "{regs} register{} spilled by the register colorer",
            if regs == 1 { "" } else { "s" }
        ));
    }
    if lines.is_empty() {
        lines.push("none: every tensor and register fit without spilling".into());
    }
    Some(Section {
        title: "spills".into(),
        lines,
    })
}

/// True when the reload `i` makes its value on chip rather than reading a
/// slot or DRAM: a memset set again, or an engine copy of a tile that is
/// not a spill slot (a resident tile copied again).
fn recomputes(m: &Module, i: tusk_core::ir::Inst) -> bool {
    match m.insts().opcode[i] {
        Opcode::Memset => true,
        Opcode::TensorCopy => m.inputs(i).all(|a| {
            let l = m.aps().loc[a];
            m.mems().space[l].is_on_chip() && !m.mems().flags[l].contains(MemFlags::SPILL)
        }),
        _ => false,
    }
}

/// What the DMA passes changed, per pass, and what kept them from more.
fn dma(f: &RunFacts<'_>) -> Option<Section> {
    let mut lines = Vec::new();
    for (d, name) in f
        .report
        .dma
        .iter()
        .zip(["dma_optimization_psum", "dma_optimization_sb"])
    {
        let Some(d) = d else { continue };
        if d.skipped {
            lines.push(format!("{name}: skipped (nothing to rewrite)"));
            continue;
        }
        let did: Vec<String> = [
            (d.coalesced_dmas, "DMAs coalesced into neighbours"),
            (d.loads_merged, "loads merged"),
            (d.stores_removed, "dead stores removed"),
            (d.partial_shrunk, "DMAs shrunk to the bytes read"),
            (d.loads_transformed, "loads made on-chip copies"),
            (d.psum_spills_removed, "PSUM spill pairs removed"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        let mut l = if did.is_empty() {
            format!("{name}: no rewrite")
        } else {
            format!("{name}: {}", did.join(", "))
        };
        if d.partial_bytes_saved > 0 {
            let _ = write!(l, " ({} B less moved)", d.partial_bytes_saved);
        }
        let v = crate::run::vetoes(&d.vetoes);
        if !v.is_empty() {
            let list: Vec<String> = v.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let _ = write!(l, "; coalescing refused by {}", list.join(", "));
        }
        lines.push(l);
    }
    (!lines.is_empty()).then(|| Section {
        title: "DMA".into(),
        lines,
    })
}

/// Where a failure's lines point: the input's name and, for a text input,
/// where it wrote each entity. A line about an entity the text wrote
/// starts with `FILE:LINE:COL: `, as the error does.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    /// The input as messages name it.
    pub file: &'a str,
    /// Its positions (`None` for a JSON input).
    pub map: Option<&'a SourceMap>,
}

impl Source<'_> {
    /// `FILE:LINE:COL: ` when the text wrote `e`, else nothing.
    fn prefix(&self, e: Entity) -> String {
        match blame::position(self.map, [e]) {
            Some(p) => format!("{}: ", blame::at(self.file, Some(p))),
            None => String::new(),
        }
    }
}

/// The explanation of a failed run: what is live where it failed, how much
/// more room it needs and where, and what could give it room.
/// `m` is the module as the failing pass left it.
pub fn of_failure(m: &Module, e: &PipelineError, src: Source<'_>) -> Explanation {
    let mut sections = Vec::new();
    if let Some(s) = illegal_input(m, e, src) {
        sections.push(s);
    }
    if let PipelineError::UnplacedPsum { .. } = e {
        sections.push(unplaced_psum(m, src));
    }
    if let Some(s) = pressure(m, e, src) {
        sections.push(s);
    }
    if sections.is_empty() {
        sections.push(Section {
            title: "failure".into(),
            lines: vec![
                "this failure names no position or tensor: the error above is all there is".into(),
            ],
        });
    }
    Explanation { sections }
}

/// An input placement that breaks a rule: the nearest legal one.
fn illegal_input(m: &Module, e: &PipelineError, src: Source<'_>) -> Option<Section> {
    let PipelineError::IllegalInputPlacement { first, .. } = e else {
        return None;
    };
    let mut lines = Vec::new();
    match *first {
        Finding::OutOfBounds {
            mem,
            axis: Axis::Bytes,
            end,
            limit,
        } => {
            let size = end - m.mems().offset[mem];
            lines.push(format!(
                "%{} ends {} B beyond the {limit} its space has per partition; it fits at offsets 0..={} (it is {size} B)",
                m.mem_name(mem),
                end - limit,
                limit.saturating_sub(size)
            ));
        }
        Finding::OutOfBounds {
            mem,
            axis: Axis::Partitions,
            end,
            limit,
        } => lines.push(format!(
            "%{} reaches partition {end} of {limit}: start it at a partition at most {}",
            m.mem_name(mem),
            limit.saturating_sub(m.mems().partitions[mem] as u64)
        )),
        Finding::Misaligned { mem, offset, align } => {
            let a = align as u64;
            lines.push(format!(
                "%{} at offset {offset}: the nearest offsets aligned to {a} are {} and {}",
                m.mem_name(mem),
                offset / a * a,
                offset.div_ceil(a) * a
            ));
        }
        Finding::PsumOffBank {
            mem,
            offset,
            bank_bytes,
        } => {
            let b = bank_bytes as u64;
            lines.push(format!(
                "%{} at byte {offset} of PSUM: a PSUM tensor starts on a bank, bank {} (byte {}) or bank {} (byte {})",
                m.mem_name(mem),
                offset / b,
                offset / b * b,
                offset.div_ceil(b),
                offset.div_ceil(b) * b
            ));
        }
        Finding::BadStartPartition {
            mem,
            base,
            granularity,
            ..
        } => {
            let g = granularity.max(1);
            lines.push(format!(
                "%{} starts at partition {base}: legal starts are multiples of {g}, the nearest {} and {}",
                m.mem_name(mem),
                base / g * g,
                base.div_ceil(g) * g
            ));
        }
        _ => lines.push(format!("{}", first.display(m))),
    }
    if let (Some(l), Some(&b)) = (lines.first_mut(), first.blamed().first()) {
        l.insert_str(0, &src.prefix(b));
    }
    lines.push("every pass keeps the input's placements: change it in the input, or remove the `@ ...` to let the allocator place it".into());
    Some(Section {
        title: "the illegal input placement".into(),
        lines,
    })
}

/// Optlevel 7 without PSUM placements: each unplaced PSUM tile and the
/// banks they need.
fn unplaced_psum(m: &Module, src: Source<'_>) -> Section {
    let bank = m.target.psum_bank_bytes.max(1) as u64;
    let mut lines = Vec::new();
    let mut banks = 0u64;
    for v in m.mems().space.keys() {
        if m.mems().space[v] != Space::Psum || m.is_placed(v) {
            continue;
        }
        let b = (m.mems().bytes[v] as u64).div_ceil(bank);
        banks += b;
        lines.push(format!(
            "{}%{} ({} x {} B): {b} bank{}",
            src.prefix(Entity::Mem(v)),
            m.mem_name(v),
            m.mems().partitions[v],
            m.mems().bytes[v],
            if b == 1 { "" } else { "s" }
        ));
    }
    lines.push(format!(
        "{banks} bank{} of {} in all if none shares one; `tusk run FILE --optlevel 2 -o placed.tusk` writes a placement to start from",
        if banks == 1 { "" } else { "s" },
        m.target.psum_banks
    ));
    Section {
        title: "unplaced PSUM locations (optlevel 7 places none)".into(),
        lines,
    }
}

/// An allocator that ran out of room: the live set at the failure with
/// sizes, the room it needs per partition, and the tensors whose spill
/// would free bytes there.
fn pressure(m: &Module, e: &PipelineError, src: Source<'_>) -> Option<Section> {
    let site = e.site()?;
    let order = LinearOrder::of(m);
    let live = MemLiveness::of(m, &order);
    let n = order.len() as u32;
    let pos = site
        .position
        .or_else(|| site.inst.map(|i| order.pos(i)))
        .filter(|&p| p < n)?;
    let space = site
        .space
        .or_else(|| site.tensor.map(|t| m.mems().space[t]))?;
    let capacity = match space {
        Space::Sb => m.target.sb_usable_bytes as u64,
        Space::Psum => m.target.psum_usable_bytes() as u64,
        Space::Dram => m.target.dram_bytes,
    };
    let bank = m.target.psum_bank_bytes.max(1) as u64;
    let bytes_of = |v: MemLoc| match space {
        Space::Psum => (m.mems().bytes[v] as u64).div_ceil(bank) * bank,
        _ => m.mems().bytes[v] as u64,
    };
    let mut here: Vec<MemLoc> = m
        .mems()
        .space
        .keys()
        .filter(|&v| m.mems().space[v] == space)
        .filter(|&v| live.interval(v).is_some_and(|iv| iv.contains(pos)) || site.tensor == Some(v))
        .collect();
    here.sort_by_key(|&v| std::cmp::Reverse(bytes_of(v) * m.mems().partitions[v] as u64));
    let mut lines = vec![format!(
        "{}at position {pos}, {}: {} {} location{} live",
        src.prefix(Entity::Inst(order.inst_at(pos))),
        m.describe_inst(order.inst_at(pos)),
        here.len(),
        space.upper(),
        if here.len() == 1 { "" } else { "s" }
    )];
    // Bytes per partition live there: placed ones where they are, the
    // unplaced over the partitions they would take from 0.
    let np = match space {
        Space::Sb => m.target.sb_partitions as usize,
        Space::Psum => m.target.psum_partitions as usize,
        Space::Dram => 1,
    }
    .max(1);
    let mut per = vec![0u64; np];
    for &v in &here {
        let (b, e) = if m.is_placed(v) {
            parts(m, v)
        } else {
            (0, m.mems().partitions[v] as u32)
        };
        for p in per.iter_mut().take((e as usize).min(np)).skip(b as usize) {
            *p += bytes_of(v);
        }
        let accessed = live.accesses(v).binary_search(&pos).is_ok();
        let pinned =
            m.mems().flags[v].intersects(MemFlags::PINNED | MemFlags::INPUT | MemFlags::OUTPUT);
        let note = if site.tensor == Some(v) {
            " — the one that did not fit"
        } else if accessed {
            " — accessed here"
        } else if pinned {
            " — pinned or an input/output"
        } else {
            ""
        };
        lines.push(format!(
            "  {}: {} B per partition{}{note}",
            m.describe_mem(v),
            bytes_of(v),
            if m.is_placed(v) { "" } else { ", unplaced" }
        ));
    }
    let max = per.iter().copied().max().unwrap_or(0);
    let hot: Vec<usize> = (0..np).filter(|&p| per[p] == max).collect();
    let range = match (hot.first(), hot.last()) {
        (Some(a), Some(b)) if a == b => format!("partition {a}"),
        (Some(a), Some(b)) => format!("partitions {a}\u{2013}{b}"),
        _ => String::new(),
    };
    if let PipelineError::Lsa(l) = e {
        if let LsaError::AllocationFailed(a) = &**l {
            lines.push(format!(
                "the instruction needs a free {} for %{}; the largest free rectangle there is {}",
                a.needed, a.tensor_name, a.largest_free
            ));
        }
    }
    if max > capacity {
        lines.push(format!(
            "{max} B per partition are live in {range}: it needs {} more bytes per partition there than the {capacity} {} has",
            max - capacity,
            space.upper()
        ));
    } else {
        lines.push(format!(
            "{max} B per partition are live in {range}, within the {capacity} of {}: the free bytes are not contiguous where the tensor needs them",
            space.upper()
        ));
    }
    if let PipelineError::Coloring(ColoringError::DoesNotFit { peak, capacity, .. }) = e {
        if *peak > *capacity {
            lines.push(format!(
                "the best placement found needs {} more bytes per partition ({peak} against {capacity})",
                peak - capacity
            ));
        }
    }
    let mut free: Vec<(MemLoc, u64)> = here
        .iter()
        .copied()
        .filter(|&v| site.tensor != Some(v))
        .filter(|&v| live.accesses(v).binary_search(&pos).is_err())
        .filter(|&v| {
            !m.mems().flags[v].intersects(MemFlags::PINNED | MemFlags::INPUT | MemFlags::OUTPUT)
        })
        .map(|v| (v, bytes_of(v)))
        .collect();
    free.sort_by_key(|&(_, b)| std::cmp::Reverse(b));
    if free.is_empty() {
        lines.push("no live tensor is idle here: each is accessed by this instruction or pinned, so only smaller tiles or a larger target make room".into());
    } else {
        lines.push("live but not accessed here (spilling one around this point frees its bytes here; the allocator's spill rules said why it did not):".into());
        for &(v, b) in free.iter().take(MAX_TENSORS) {
            lines.push(format!(
                "  %{}: frees {b} B per partition in {} partition{}",
                m.mem_name(v),
                m.mems().partitions[v],
                if m.mems().partitions[v] == 1 { "" } else { "s" }
            ));
        }
    }
    Some(Section {
        title: format!("where {} ran out of room", space.upper()),
        lines,
    })
}

/// `tusk dsa --explain`: why each buffer sits where it does (the buffers
/// under it during its lifetime, the ones reusing its bytes at other
/// times; the [`MAX_TENSORS`] largest), and, when the peak is over the
/// capacity, the instant of the peak with the buffers live there and how
/// many more bytes it needs. `ids` names the buffers (the CSV's `id`
/// column), `placements` are the allocator's offsets.
pub fn of_buffers(
    problem: &tusk_core::dsa::Problem,
    ids: &[String],
    placements: &[tusk_core::dsa::Placement],
) -> Explanation {
    let b = problem.buffers();
    let name = |i: usize| ids.get(i).cloned().unwrap_or_else(|| format!("#{i}"));
    let list = |v: &[usize]| {
        let mut s: Vec<String> = v.iter().take(MAX_NAMES).map(|&i| name(i)).collect();
        if v.len() > MAX_NAMES {
            s.push(format!("{} more", v.len() - MAX_NAMES));
        }
        s.join(", ")
    };
    let mut order: Vec<usize> = (0..b.len()).filter(|&i| !b[i].is_void()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(b[i].size.saturating_mul(b[i].upper - b[i].lower)));
    let mut lines = Vec::new();
    for &i in order.iter().take(MAX_TENSORS) {
        let (o0, o1) = (placements[i].offset, placements[i].offset + b[i].size);
        let mut under = Vec::new();
        let mut reuse = Vec::new();
        for &j in &order {
            if j == i {
                continue;
            }
            let (p0, p1) = (placements[j].offset, placements[j].offset + b[j].size);
            let together = b[j].lower < b[i].upper && b[i].lower < b[j].upper;
            if together && p0 < o0 {
                under.push(j);
            } else if !together && p0 < o1 && o0 < p1 {
                reuse.push(j);
            }
        }
        under.sort_by_key(|&j| placements[j].offset);
        let mut l = format!(
            "{} at [{o0}, {o1}), live [{}, {}){}",
            name(i),
            b[i].lower,
            b[i].upper,
            if b[i].pin.is_some() {
                ": pinned by its offset column"
            } else {
                ""
            }
        );
        if o0 == 0 {
            l.push_str("; at offset 0");
        } else if !under.is_empty() {
            let _ = write!(l, "; below it while it is live: {}", list(&under));
        }
        if !reuse.is_empty() {
            let _ = write!(
                l,
                "; its bytes are reused at other times by {}",
                list(&reuse)
            );
        }
        lines.push(l);
    }
    if order.len() > MAX_TENSORS {
        lines.push(format!(
            "… {} smaller buffers not listed",
            order.len() - MAX_TENSORS
        ));
    }
    let mut sections = vec![Section {
        title: "placements".into(),
        lines,
    }];
    // The instant where the placement is highest, and what is live there.
    let top = |i: usize| placements[i].offset + b[i].size;
    if let Some(&hi) = order.iter().max_by_key(|&&i| top(i)) {
        let peak = top(hi);
        if peak > problem.capacity {
            let t = b[hi].lower;
            let mut live: Vec<usize> = order
                .iter()
                .copied()
                .filter(|&j| b[j].lower <= t && t < b[j].upper)
                .collect();
            live.sort_by_key(|&j| std::cmp::Reverse(b[j].size));
            let sum: u64 = live.iter().map(|&j| b[j].size).sum();
            let mut lines = vec![format!(
                "the placement reaches {peak}, {} above the capacity {}, with {} ending at {peak} (live from {t})",
                peak - problem.capacity,
                problem.capacity,
                name(hi)
            )];
            lines.push(format!(
                "at instant {t}, {} buffers are live with {sum} bytes in all{}",
                live.len(),
                if sum > problem.capacity {
                    format!(
                        ": no placement fits there, it needs {} more bytes",
                        sum - problem.capacity
                    )
                } else {
                    ": they would fit side by side; the gaps between them are what is lost"
                        .to_string()
                }
            ));
            for &j in live.iter().take(MAX_TENSORS) {
                lines.push(format!(
                    "  {}: {} bytes, live [{}, {})",
                    name(j),
                    b[j].size,
                    b[j].lower,
                    b[j].upper
                ));
            }
            sections.push(Section {
                title: "over the capacity".into(),
                lines,
            });
        }
    }
    Explanation { sections }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_render_in_order_with_their_lines() {
        let e = Explanation {
            sections: vec![
                Section {
                    title: "a".into(),
                    lines: vec!["one".into(), "two".into()],
                },
                Section {
                    title: "b".into(),
                    lines: vec![],
                },
            ],
        };
        assert_eq!(e.render(), "a:\n  one\n  two\nb:\n");
        assert_eq!(e.to_json()[0]["lines"][1], "two");
    }
}
