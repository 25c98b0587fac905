//! `tusk run`: the allocation pipeline over a module, with the human summary
//! and the JSON report (docs/REPORT.md).

use std::time::Instant;

use serde_json::{json, Value};
use tusk_core::analysis::{CostlyDep, ScheduleReport};
use tusk_core::ir::{Engine, Entity, Module, Space};
use tusk_core::options::passes;
use tusk_core::report::{AffinityReport, SbRotationReport};
use tusk_core::steps::EndSteps;
use tusk_core::{Checks, Clock, Options, PipelineError, RunReport, Workspace};

use crate::blame;
use crate::text::SourceMap;

/// A wall clock for pass timing.
#[derive(Debug)]
pub struct WallClock(Instant);

impl Default for WallClock {
    fn default() -> Self {
        WallClock(Instant::now())
    }
}

impl Clock for WallClock {
    fn now_micros(&mut self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

/// Where the dataflow check's input comes from.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum CheckInput {
    /// [`CheckInput::Reread`] where the input can be read again and is at
    /// least [`REREAD_FROM_BYTES`] long, [`CheckInput::Copy`] elsewhere.
    /// The copy is held through the passes, and the run's peak is in the
    /// passes at every optlevel once the result's name index is freed for
    /// the end steps (the SB colorer's tables, the linear scan, the DMA
    /// pass, each beside the copy); the second parse's peak comes after
    /// theirs are gone. The copy and the second parse both grow with the
    /// input, so the trade (about a tenth of the peak for a parse's time)
    /// is the same at every size; the threshold keeps the faster run for
    /// the inputs whose peak is far from any machine's memory.
    #[default]
    Auto,
    /// A copy of the module taken before the passes and held through them.
    Copy,
    /// The input read again after the passes (its file must not change in
    /// between): no copy while the passes run, one more parse after them.
    Reread,
}

impl CheckInput {
    /// The setting named `s` (`auto`, `copy`, `reread`).
    pub fn from_name(s: &str) -> Option<CheckInput> {
        match s {
            "auto" => Some(CheckInput::Auto),
            "copy" => Some(CheckInput::Copy),
            "reread" => Some(CheckInput::Reread),
            _ => None,
        }
    }

    /// Whether a run on an input of `bytes` reads it again, given that it
    /// can.
    pub fn rereads(self, bytes: u64) -> bool {
        match self {
            CheckInput::Copy => false,
            CheckInput::Reread => true,
            CheckInput::Auto => bytes >= REREAD_FROM_BYTES,
        }
    }
}

/// The input size from which [`CheckInput::Auto`] reads the input again
/// (about 3.5 million instructions of `tusk gen`'s text): where the copy
/// alone is hundreds of MB and the whole run takes GBs, the size at which
/// a run's peak starts to decide whether it fits the machine. The trade
/// at both sides of it is measured in BENCHMARKS.md §1.
pub const REREAD_FROM_BYTES: u64 = 256 << 20;

/// Makes the run's input again after the passes: the module exactly as the
/// passes got it, or the exit code and message of why it cannot.
pub type Reread<'r> = &'r dyn Fn() -> Result<Module, (u8, String)>;

/// Why [`allocate`] failed.
#[derive(Debug)]
pub enum AllocateError {
    /// The pipeline or a check failed.
    Pipeline(PipelineError),
    /// The input could not be made again for the dataflow check: the exit
    /// code and the message.
    Input(u8, String),
}

impl From<PipelineError> for AllocateError {
    fn from(e: PipelineError) -> Self {
        AllocateError::Pipeline(e)
    }
}

/// Runs the pipeline of `opts` on `m` in place, then, if `verify`, both
/// checks. The dataflow check's input is a copy taken here (without the
/// name index: it is only read, and it is held through every pass), or,
/// given `reread`, the module `reread` makes after the passes, once their
/// storage is gone ([`Checks::Deferred`]). The check runs on
/// `check_threads` threads (1 or 2; `None`: 2 when the machine has a
/// second core). On two threads the end steps of the run (the schedule
/// model, the placement verifier, the dataflow check) run at the same
/// time ([`end_concurrently`]), with the result the one-thread run gives.
pub fn allocate(
    m: &mut Module,
    opts: &Options,
    verify: bool,
    check_threads: Option<u8>,
    reread: Option<Reread<'_>>,
) -> Result<RunReport, AllocateError> {
    let reread = reread.filter(|_| verify);
    let original = (verify && reread.is_none()).then(|| m.read_only_copy());
    let mut ws = Workspace::new();
    // One run per workspace: each pass's storage goes once it is spent.
    ws.set_release_spent(true);
    // The dataflow check walks the two programs on two cores when it can.
    let split = match check_threads {
        None => crate::split::ThreadSplit::if_parallel(),
        Some(1) => None,
        Some(_) => Some(Box::new(crate::split::ThreadSplit) as Box<_>),
    };
    let parallel = split.is_some();
    ws.set_split_runner(split);
    let mut clock = WallClock::default();
    let checks = match (&original, reread) {
        (Some(input), _) => Checks::Full { input },
        (None, Some(_)) => Checks::Deferred,
        (None, None) => Checks::None,
    };
    let passed = ws.reserve(m, opts, checks).run_passes(&mut clock)?;
    // Nothing looks a name up from here on (the checks, the report and the
    // printer read names by id), and the end steps' storage peaks beside
    // the module.
    m.drop_name_index();
    let mut steps = ws.end_steps(passed, &mut clock);
    let Some(reread) = reread else {
        return Ok(if parallel {
            end_concurrently(steps, m, &mut clock)?
        } else {
            steps.run_in_order(m, &mut clock)?
        });
    };
    let input = if parallel {
        // The verifier and the schedule model need only the result: they
        // run while the input is read again.
        let EndSteps {
            schedule,
            placement,
            ..
        } = &mut steps;
        std::thread::scope(|s| {
            s.spawn(|| {
                placement.run(m);
                schedule.run(m);
            });
            reread()
        })
    } else {
        // The verifier first: its storage goes before the input is read.
        steps.placement_clean(m);
        reread()
    };
    match &input {
        Ok(input) => steps.give_input(input),
        // A finding of the verifier is the run's error before this one.
        Err(_) if !steps.placement_clean(m) => {}
        Err((code, message)) => return Err(AllocateError::Input(*code, message.clone())),
    }
    if parallel {
        Ok(end_concurrently(steps, m, &mut clock)?)
    } else {
        Ok(steps.finish(m, &mut clock)?)
    }
}

/// Runs the end steps of a run on `m` side by side and finishes: the
/// dataflow check (itself on two threads, its critical path the rewrite's
/// walk) here, and the placement verifier then the schedule model on a
/// scoped thread, where they fill the time the original's walk leaves its
/// core idle. The steps only read `m` and each writes its own storage; the
/// findings and the result are those of the steps run in order
/// ([`EndSteps::finish`]). Steps that ran already are not run again.
pub fn end_concurrently(
    mut steps: EndSteps<'_, '_>,
    m: &Module,
    clock: &mut dyn Clock,
) -> Result<RunReport, PipelineError> {
    std::thread::scope(|s| {
        let EndSteps {
            schedule,
            placement,
            dataflow,
            ..
        } = &mut steps;
        s.spawn(|| {
            placement.run(m);
            schedule.run(m);
        });
        dataflow.run(m);
    });
    steps.finish(m, clock)
}

/// The pass names `opts` runs, one per line.
pub fn pipeline_text(opts: &Options) -> String {
    let mut s = String::new();
    if let Some(sel) = opts.selection() {
        s.push_str(&format!("pipeline: {}\n", sel.describe()));
    }
    for (k, p) in passes(opts).iter().enumerate() {
        s.push_str(&format!("  {:2}. {}\n", k + 1, p.name()));
    }
    s
}

/// `1 spill`, `2 spills`: a count and its noun, singular for one.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// The short human summary every run ends with.
pub fn summary(file: &str, m: &Module, r: &RunReport) -> String {
    let mut s = format!(
        "{file}: optlevel {}, {} passes in {:.2} ms\n",
        r.optlevel,
        r.passes.len(),
        ms(r.pass_micros())
    );
    for space in [Space::Sb, Space::Psum, Space::Dram] {
        let x = r.space(space);
        if x.placed == 0 && x.lower_bound == 0 && x.input_lower_bound == 0 {
            continue;
        }
        // Both of the result; the input's bound beside them when the
        // passes' rewrites (spills, DMA rewrites) changed it.
        let input = if x.input_lower_bound != x.lower_bound {
            format!("; input's bound {}", x.input_lower_bound)
        } else {
            String::new()
        };
        s.push_str(&format!(
            "  {:<5} peak {} / bound {} ({:.3}{input}){}, {:.1}% of {}, {}{} ({} B, ~{} cycles)\n",
            space.upper(),
            x.peak,
            x.lower_bound,
            x.peak_over_bound(),
            if space.is_on_chip() {
                format!(" / floor {}", x.floor)
            } else {
                String::new()
            },
            x.utilization_pct(),
            x.capacity,
            count(x.spills as u64, "spill"),
            if x.remats > 0 {
                format!(" ({} rematerialized)", x.remats)
            } else {
                String::new()
            },
            x.spill_bytes,
            x.spill_cycles
        ));
    }
    if let Some(p) = &r.sb_portfolio {
        let kept = if p.kept_scan {
            "the linear scan's"
        } else {
            "the colorer's"
        };
        let cost = |x: Option<(u64, u64)>| match x {
            Some((c, b)) => format!("~{c} cycles ({b} B)"),
            None => "failed".to_string(),
        };
        s.push_str(&format!(
            "  SB    spills: colorer {}, linear scan {}; kept {kept} placement\n",
            cost(p.colorer),
            cost(p.scan)
        ));
    }
    // Each DMA pass measures the whole module's DMAs before and after it
    // runs: one line for the module, from before the first pass that ran
    // to after the last, with the rewrites of both passes summed.
    let ran: Vec<&tusk_core::report::DmaStats> =
        r.dma.iter().flatten().filter(|d| !d.skipped).collect();
    if let (Some(first), Some(last)) = (ran.first(), ran.last()) {
        let sum =
            |f: fn(&tusk_core::report::DmaStats) -> u32| ran.iter().map(|d| f(d)).sum::<u32>();
        s.push_str(&format!(
            "  DMA   {} DMAs / {} descriptors / {} B -> {} / {} / {} B ({} merged, {} loads dropped, {} stores dropped, {} shrunk)\n",
            first.pre.instructions,
            first.pre.descriptors,
            first.pre.bytes,
            last.post.instructions,
            last.post.descriptors,
            last.post.bytes,
            sum(|d| d.coalesced_dmas),
            sum(|d| d.loads_merged),
            sum(|d| d.stores_removed),
            sum(|d| d.partial_shrunk)
        ));
    }
    for (k, name) in ["PSUM", "SB"].iter().enumerate() {
        if let Some(d) = &r.dma[k] {
            if d.skipped {
                continue;
            }
            if d.loads_transformed + d.psum_spills_removed > 0 {
                s.push_str(&format!(
                    "  DMA {:<4} {} loads transformed to copies, {} PSUM spill pairs removed\n",
                    name, d.loads_transformed, d.psum_spills_removed
                ));
            }
            if d.headroom_skipped > 0 {
                s.push_str(&format!(
                    "  DMA {:<4} {} rewrites skipped: the reserved headroom was used up\n",
                    name, d.headroom_skipped
                ));
            }
            let v = vetoes(&d.vetoes);
            if !v.is_empty() {
                let refused = affinity(r).map(affinity_causes).unwrap_or_default();
                let list: Vec<String> = v
                    .iter()
                    .map(|&(k, n)| match (k, *name) {
                        ("not_adjacent", "SB") if !refused.is_empty() => {
                            format!("{k} {n} (affinity refused: {})", refused.join(", "))
                        }
                        _ => format!("{k} {n}"),
                    })
                    .collect();
                s.push_str(&format!(
                    "  DMA {:<4} coalescing vetoes: {}\n",
                    name,
                    list.join(", ")
                ));
            }
        }
    }
    if let Some(a) = affinity(r) {
        let causes = affinity_causes(a);
        s.push_str(&format!(
            "  SB    affinity: {} DMA pair{} abut in DRAM, {} placed side by side, {} apart{} ({})\n",
            a.pairs,
            if a.pairs == 1 { "" } else { "s" },
            a.honoured,
            a.apart(),
            if causes.is_empty() {
                String::new()
            } else {
                format!(": {}", causes.join(", "))
            },
            count(a.trials as u64, "coloring")
        ));
    }
    if let Some(g) = &r.reg {
        s.push_str(&format!(
            "  REG   {} registers, {} spilled (~{} cycles), {:.1}% lane utilization, {} round{}\n",
            m.num_regs(),
            g.spilled_registers,
            g.spill_cycles,
            g.lane_utilization_pct,
            g.rounds,
            if g.rounds == 1 { "" } else { "s" }
        ));
    }
    if let Some(x) = &r.rotation {
        s.push_str(&format!(
            "  PSUM  rotation: {} of {} tiles moved, banks used {} -> {}\n",
            x.moved, x.tiles, x.banks_before, x.banks_after
        ));
    }
    if let Some(x) = &r.sb_rotation {
        s.push_str(&format!(
            "  SB    rotation: {} of {} movable tiles moved ({} tried), peak {} -> {} B (limit {}), makespan {} -> {} cycles (unlimited memory {})\n",
            x.moved,
            x.movable,
            x.tried,
            x.peak_before,
            x.peak_after,
            x.limit,
            x.makespan_before,
            x.makespan_after,
            x.makespan_unlimited
        ));
        s.push_str(&rest_fit_line(
            x.rest,
            x.rest_tried,
            x.rest_fitted,
            x.rest_stopped,
        ));
        s.push_str(&buffering_line(x));
        if let Some(p) = &x.probe {
            s.push_str(&format!(
                "        the rest of the loss: a peak of {} B would take the makespan to {} cycles ({} more move{})\n",
                p.peak,
                p.makespan,
                p.moves,
                if p.moves == 1 { "" } else { "s" }
            ));
        }
    }
    if let Some(x) = &r.schedule {
        s.push_str(&schedule_lines(m, x));
    }
    s.push_str(&storage_lines(&r.storage, "  "));
    if let Some(micros) = r.checks_micros {
        match r.dataflow {
            Some(d) if d.sampled => s.push_str(&format!(
                "  verified in part: placement check clean, dataflow check clean on a sample ({:.2} ms)\n  \
                 note: the dataflow check walked only iterations 0, 1 and the last of {} that \
                 access patterns move with (walking every iteration takes up to {} executions, \
                 over --dataflow-executions {}): a fault in the other iterations would go \
                 unseen; `--dataflow-executions all` walks them all\n",
                ms(micros),
                count(d.exact_loops as u64, "loop"),
                d.walk,
                d.walk_limit
            )),
            _ => s.push_str(&format!(
                "  verified: placement and dataflow checks clean ({:.2} ms)\n",
                ms(micros)
            )),
        }
    } else {
        s.push_str("  not verified (--no-verify)\n");
    }
    s
}

/// Where an instruction runs, as the text format spells it.
fn resource(d: &CostlyDep) -> String {
    if d.engine == Engine::Dma {
        format!("dma queue {}", d.queue)
    } else {
        d.engine.keyword().to_string()
    }
}

/// How many of the costliest placement-added dependencies the summary lists
/// (the JSON report has them all).
const SUMMARY_COSTLY: usize = 3;

/// The SB rotation's rest-fit line: the rest length of the placement
/// kept, how many of the placements tried fitted, and whether the work
/// bound stopped them.
fn rest_fit_line(rest: Option<u32>, tried: u32, fitted: u32, stopped: bool) -> String {
    if tried == 0 {
        return "        rest-fit: not tried (no placement loss, or no tile may move)\n".into();
    }
    let kept = match rest {
        Some(u32::MAX) => "cells rest as long as room allows".to_string(),
        Some(g) => format!("cells rest {g}+ positions"),
        None => "none kept".to_string(),
    };
    let stopped = if stopped {
        ", stopped at its work bound"
    } else {
        ""
    };
    format!("        rest-fit: {kept} ({fitted} of {tried} placements fit{stopped})\n")
}

/// The SB rotation's multi-buffering line: how many tiles rewritten in
/// every iteration of a loop could take slots, how many did and how
/// deep, the model runs that priced them, and whether the search for room
/// stopped at its bound.
fn buffering_line(x: &SbRotationReport) -> String {
    if x.buffer_candidates == 0 {
        return "        slots: no tile rewritten in every iteration of a loop may take them\n"
            .into();
    }
    let plural = |n: u32| if n == 1 { "" } else { "s" };
    let stopped = if x.buffer_stopped {
        ", stopped at its work bound"
    } else {
        ""
    };
    let runs = format!(
        "{} model run{}{stopped}",
        x.buffer_tried,
        plural(x.buffer_tried)
    );
    if x.buffered == 0 {
        return format!(
            "        slots: none given ({} candidate{}, {runs}: no depth paid for its memory)\n",
            x.buffer_candidates,
            plural(x.buffer_candidates),
        );
    }
    let psum = if x.psum_buffered > 0 {
        format!(", {} in PSUM at a bank per slot", x.psum_buffered)
    } else {
        String::new()
    };
    format!(
        "        slots: {} of {} loop tiles take up to {} slots in turn{psum} ({runs}; paid for by the makespan, within the usable memory)\n",
        x.buffered, x.buffer_candidates, x.slots
    )
}

/// The schedule model's lines of the summary.
fn schedule_lines(m: &Module, x: &ScheduleReport) -> String {
    let mut s = format!(
        "  model makespan {} cycles, {} with unlimited memory: placement loss {} ({:.1}%), {} wait{}{}\n",
        x.makespan,
        x.makespan_unlimited,
        x.loss(),
        x.loss_pct(),
        x.placement_waits,
        if x.placement_waits == 1 { "" } else { "s" },
        if x.extrapolated {
            format!(
                " (extrapolated from {} of {} executions)",
                x.executions, x.total_executions
            )
        } else {
            String::new()
        }
    );
    // A wait that costs the makespan nothing (its engine had slack) is in
    // the JSON report only.
    let costly = x.costliest.iter().filter(|d| d.makespan_cost != Some(0));
    for d in costly.take(SUMMARY_COSTLY) {
        let cost = d
            .makespan_cost
            .map_or(String::from("not priced"), |c| format!("makespan +{c}"));
        s.push_str(&format!(
            "  model wait {} ({} cycles over {} wait{}): {} on {} waits for {}: %{} and %{} share cells\n",
            cost,
            d.cycles,
            d.waits,
            if d.waits == 1 { "" } else { "s" },
            m.describe_inst(d.inst),
            resource(d),
            m.describe_inst(d.waits_for),
            m.mem_name(d.loc),
            m.mem_name(d.other)
        ));
    }
    s
}

/// The schedule model in the JSON report (`map`: where a text input wrote
/// the instructions it names).
fn schedule_json(m: &Module, x: &ScheduleReport, map: Option<&SourceMap>) -> Value {
    let inst_at = |i| blame::line_col(blame::position(map, [Entity::Inst(i)]));
    json!({
        "makespan_cycles": x.makespan,
        "makespan_unlimited_memory_cycles": x.makespan_unlimited,
        "loss_cycles": x.loss(),
        "loss_pct": x.loss_pct(),
        "placement_waits": x.placement_waits,
        "executions": x.executions,
        "total_executions": x.total_executions,
        "extrapolated": x.extrapolated,
        "evicted": x.evicted,
        "costliest": x.costliest.iter().map(|d| {
            let (line, col) = inst_at(d.inst);
            let (waits_for_line, waits_for_col) = inst_at(d.waits_for);
            json!({
            "instruction": m.describe_inst(d.inst).to_string(),
            "line": line,
            "col": col,
            "engine": resource(d),
            "waits_for": m.describe_inst(d.waits_for).to_string(),
            "waits_for_line": waits_for_line,
            "waits_for_col": waits_for_col,
            "location": m.mem_name(d.loc),
            "shares_cells_with": m.mem_name(d.other),
            "delay_cycles": d.cycles,
            "waits": d.waits,
            "makespan_cost_cycles": d.makespan_cost,
        })}).collect::<Vec<_>>(),
    })
}

/// The non-zero coalescing veto counts, by predicate, in the order of
/// [`Vetoes`](tusk_core::report::Vetoes)' fields: a golden or a report shows
/// which predicate kept a DMA unmerged.
pub fn vetoes(v: &tusk_core::report::Vetoes) -> Vec<(&'static str, u32)> {
    [
        ("not_full_access", v.not_full_access),
        ("not_contiguous", v.not_contiguous),
        ("producer_chain", v.producer_chain),
        ("count_limit", v.count_limit),
        ("too_large", v.too_large),
        ("loop_boundary", v.loop_boundary),
        ("uninit", v.uninit),
        ("conflict", v.conflict),
        ("claim", v.claim),
        ("dynamic_offset", v.dynamic_offset),
        ("loop_indexed", v.loop_indexed),
        ("not_adjacent", v.not_adjacent),
    ]
    .into_iter()
    .filter(|&(_, n)| n > 0)
    .collect()
}

/// The SB colorer's affinity report, when `--dma-affinity on` ran it.
fn affinity(r: &RunReport) -> Option<&AffinityReport> {
    r.coloring[Space::Sb.slot()].as_ref()?.affinity.as_ref()
}

/// Why affinity pairs stayed apart, the causes with a count.
fn affinity_causes(a: &AffinityReport) -> Vec<String> {
    [
        ("capacity", a.capacity),
        ("lifetime", a.lifetime),
        ("placed", a.placed),
        ("alignment", a.alignment),
        ("untried", a.untried),
    ]
    .into_iter()
    .filter(|&(_, n)| n > 0)
    .map(|(k, n)| format!("{k} {n}"))
    .collect()
}

/// The summary's `storage:` lines, each after `indent`: every method the
/// budget skipped or cut short, and how many more were not listed.
pub(crate) fn storage_lines(st: &tusk_core::report::StorageReport, indent: &str) -> String {
    let mut s = String::new();
    for k in &st.skipped {
        s.push_str(&format!("{indent}storage: {k}\n"));
    }
    if st.skipped_unlisted > 0 {
        s.push_str(&format!(
            "{indent}storage: {} of methods skipped or cut short for the budget, not listed\n",
            count(st.skipped_unlisted as u64, "more record")
        ));
    }
    s
}

/// The reservation's make-up and what the budget left out.
fn storage_json(st: &tusk_core::report::StorageReport) -> Value {
    json!({
        "limit": st.limit,
        "room": st.room,
        "reserved": st.total(),
        "parts": st.parts.iter().map(|p| json!({"what": p.what, "bytes": p.bytes})).collect::<Vec<_>>(),
        "skipped": st.skipped.iter().map(|k| json!({
            "method": k.method,
            "instead": k.instead,
            "needed": k.needed,
            "available": k.available,
            "cut_short": k.cut_short,
        })).collect::<Vec<_>>(),
        "skipped_unlisted": st.skipped_unlisted,
    })
}

/// The SB rotation's part of the JSON report.
fn sb_rotation_json(x: &SbRotationReport) -> Value {
    json!({
        "movable": x.movable,
        "tried": x.tried,
        "moved": x.moved,
        "peak_before": x.peak_before,
        "peak_after": x.peak_after,
        "limit": x.limit,
        "makespan_before": x.makespan_before,
        "makespan_after": x.makespan_after,
        "makespan_unlimited": x.makespan_unlimited,
        "rest": x.rest,
        "rest_tried": x.rest_tried,
        "rest_fitted": x.rest_fitted,
        "rest_stopped": x.rest_stopped,
        "buffer_candidates": x.buffer_candidates,
        "buffer_tried": x.buffer_tried,
        "buffered": x.buffered,
        "psum_buffered": x.psum_buffered,
        "slots": x.slots,
        "buffer_stopped": x.buffer_stopped,
        "probe": x.probe.as_ref().map(|p| json!({
            "peak": p.peak,
            "makespan": p.makespan,
            "moves": p.moves,
        })),
    })
}

/// The JSON report (docs/REPORT.md); `map` (a text input's) gives the
/// `line` and `col` of the instructions it names.
pub fn report_json(file: &str, m: &Module, r: &RunReport, map: Option<&SourceMap>) -> Value {
    let floor_inst = |sp: Space| {
        let f = r.floor.space(sp);
        f.inst
            .is_valid()
            .then(|| format!("{}", m.describe_inst(f.inst)))
    };
    let spaces: Vec<Value> = [Space::Sb, Space::Psum, Space::Dram]
        .iter()
        .map(|&sp| {
            let x = r.space(sp);
            let f = r.floor.space(sp).inst;
            let (floor_line, floor_col) = blame::line_col(
                f.is_valid()
                    .then(|| blame::position(map, [Entity::Inst(f)]))
                    .flatten(),
            );
            json!({
                "space": sp.upper(),
                "placed": x.placed,
                "peak": x.peak,
                "lower_bound": x.lower_bound,
                "input_lower_bound": x.input_lower_bound,
                "floor": x.floor,
                "floor_instruction": floor_inst(sp),
                "floor_line": floor_line,
                "floor_col": floor_col,
                "peak_over_bound": x.peak_over_bound(),
                "capacity": x.capacity,
                "utilization_pct": x.utilization_pct(),
                "spills": x.spills,
                "remats": x.remats,
                "spill_bytes": x.spill_bytes,
                "spill_cycles": x.spill_cycles,
            })
        })
        .collect();
    let passes: Vec<Value> = r
        .passes
        .iter()
        .map(|p| json!({"pass": p.pass.name(), "micros": p.micros}))
        .collect();
    let dma: Vec<Value> = ["dma_optimization_psum", "dma_optimization_sb"]
        .iter()
        .zip(&r.dma)
        .filter_map(|(name, d)| {
            let d = d.as_ref()?;
            let rep = |x: &tusk_core::report::DmaReport| {
                json!({
                    "instructions": x.instructions,
                    "bytes": x.bytes,
                    "descriptors": x.descriptors,
                    "average_dma_bytes": x.average_dma_bytes(),
                    "dram_bytes_loaded": x.dram_bytes_loaded,
                    "dram_bytes_saved": x.dram_bytes_saved,
                })
            };
            Some(json!({
                "pass": name,
                "skipped": d.skipped,
                "pre": rep(&d.pre),
                "post": rep(&d.post),
                "loads_merged": d.loads_merged,
                "loads_transformed": d.loads_transformed,
                "stores_removed": d.stores_removed,
                "coalesced_groups": d.coalesced_groups,
                "coalesced_dmas": d.coalesced_dmas,
                "partial_shrunk": d.partial_shrunk,
                "partial_bytes_saved": d.partial_bytes_saved,
                "psum_spills_removed": d.psum_spills_removed,
                "headroom_skipped": d.headroom_skipped,
                "vetoes": vetoes(&d.vetoes)
                    .into_iter()
                    .map(|(k, n)| (k.to_string(), json!(n)))
                    .collect::<serde_json::Map<_, _>>(),
            }))
        })
        .collect();
    let reg = r.reg.as_ref().map(|g| {
        json!({
            "registers": m.num_regs(),
            "spilled_registers": g.spilled_registers,
            "spill_instructions": g.spill_instructions,
            "spill_cycles": g.spill_cycles,
            "lane_utilization_pct": g.lane_utilization_pct,
            "rounds": g.rounds,
            "score": g.score,
            "coalesced": g.coalesced,
            "copies_removed": g.copies_removed,
        })
    });
    let coloring: Vec<Value> = Space::ALL
        .iter()
        .filter_map(|&sp| {
            let c = r.coloring[sp.slot()].as_ref()?;
            Some(json!({
                "pass": tusk_core::report::pass_name(sp),
                "placed": c.placed,
                "pins": c.pins,
                "peak": c.peak,
                "lower_bound": c.lower_bound,
                "sweeps": c.sweeps,
                "replays": c.replays,
                "edges": c.edges,
                "exact_used": c.exact_used,
                "exact_status": c.exact_status.map(|s| s.to_string()),
                "spill_rounds": c.spill_rounds,
                "spills": c.spills,
                "remats": c.remats,
            }))
        })
        .collect();
    let lsa = r.lsa.as_ref().map(|l| {
        let one = |x: &tusk_core::report::SpaceReport| {
            json!({
                "placed": x.placed,
                "peak": x.peak,
                "lower_bound": x.lower_bound,
                "spills": x.spills,
                "remats": x.remats,
                "spill_bytes": x.spill_bytes,
                "spill_cycles": x.spill_cycles,
                "fragmentation": {
                    "samples": x.fragmentation.samples,
                    "p50": x.fragmentation.p50,
                    "p90": x.fragmentation.p90,
                    "p99": x.fragmentation.p99,
                },
            })
        };
        let k = &l.restarts;
        json!({"psum": one(&l.psum), "sb": one(&l.sb), "restarts": {
            "restarts": k.restarts,
            "splits": k.splits(),
            "range_splits": k.range_splits,
            "psum_splits": k.psum.splits,
            "copies": k.copies,
            "spill_bytes": k.moved(),
            "spill_cycles": k.cycles(),
        }})
    });
    let insts = m.num_live_insts();
    // Reserved (with the passes' headroom, mostly never touched) and in use.
    let storage = m.instruction_storage_bytes();
    let in_use = m.instruction_bytes_in_use().total();
    json!({
        "file": file,
        "status": "ok",
        "optlevel": r.optlevel,
        "instructions": insts,
        "instruction_storage_bytes": storage,
        "storage_bytes_per_instruction": storage as f64 / insts.max(1) as f64,
        "instruction_bytes_in_use": in_use,
        "bytes_in_use_per_instruction": in_use as f64 / insts.max(1) as f64,
        "passes": passes,
        "pass_micros": r.pass_micros(),
        "spaces": spaces,
        "coloring": coloring,
        "linear_scan": lsa,
        "dma": dma,
        "reg": reg,
        "verified": r.verified(),
        "verify_micros": r.checks_micros.unwrap_or(0),
        "dataflow_check": r.dataflow.map(|d| json!({
            "compared": d.compared,
            "exact_loops": d.exact_loops,
            "sampled": d.sampled,
            "walk_executions": d.walk,
            "walk_limit": d.walk_limit,
        })),
        "storage": storage_json(&r.storage),
        "schedule": r.schedule.as_ref().map(|x| schedule_json(m, x, map)),
        "dma_affinity": affinity(r).map(|a| json!({
            "pairs": a.pairs,
            "honoured": a.honoured,
            "apart": a.apart(),
            "refused": {
                "capacity": a.capacity,
                "lifetime": a.lifetime,
                "placed": a.placed,
                "alignment": a.alignment,
                "untried": a.untried,
            },
            "colorings": a.trials,
        })),
        "sb_portfolio": r.sb_portfolio.as_ref().map(|p| json!({
            "colorer_spill_cycles": p.colorer.map(|c| c.0),
            "colorer_spill_bytes": p.colorer.map(|c| c.1),
            "scan_spill_cycles": p.scan.map(|s| s.0),
            "scan_spill_bytes": p.scan.map(|s| s.1),
            "kept": if p.kept_scan { "linear_scan" } else { "coloring" },
        })),
        "rotation": r.rotation.as_ref().map(|x| json!({
            "tiles": x.tiles,
            "moved": x.moved,
            "banks_before": x.banks_before,
            "banks_after": x.banks_after,
        })),
        "sb_rotation": r.sb_rotation.as_ref().map(sb_rotation_json),
    })
}
