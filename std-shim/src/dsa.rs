//! `tusk dsa FILE.csv`: the 1-D buffer-placement problem of a MiniMalloc CSV
//! through one of the memory allocators, validated independently.
//!
//! Exit codes: 0 the placement fits; 1 it does not (or the search proved it
//! cannot, or the placement failed validation); 2 bad input or options;
//! 3 I/O error.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tusk_core::analysis::peak_over_bound;
use tusk_core::dsa::{
    budgeted, peak, place_buffers, Budget, BufferWorkspace, ExactOptions, ExactWorkspace,
    GcaOptions, GcaWorkspace, GreedyRule, GreedyWorkspace, LargeFirstOptions, LargeFirstWorkspace,
    Limit, NamedDisplay, Objective, Placement, Problem, RepackOptions, RepackWorkspace, Status,
    Timeline, Validator,
};
use tusk_core::options::StorageBudget;
use tusk_core::report::StorageReport;
use tusk_core::Clock;

use crate::console::{self, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::csv;

/// The allocators `tusk dsa` can run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    /// Largest first at the lowest feasible offset (XLA / TFLite rule).
    GreedySize,
    /// Start-order scan, best-fitting gap.
    BestFit,
    /// Branch-and-bound search (first solution from the better greedy rule).
    Exact,
    /// The graph-coloring allocator: best-of-N orders plus squeaky-wheel
    /// improvement (the pipeline's `coloring_allocator_*`).
    Coloring,
    /// The largest buffers (1,024) placed by the exact search in tiers of
    /// about 512 that end where the sizes drop (each around the earlier
    /// ones), the rest around them by greedy by size: for traces whose
    /// sizes span orders of magnitude
    /// (`--budget-nodes` / `--budget-ms` bound the searches, shared by the
    /// tiers, each spending half on the least peak and half descending
    /// capacities; default 200,000 nodes).
    LargeFirst,
    /// The linear-scan allocator's best-fit manager: a budgeted portfolio
    /// of start-order scans, best kept (`mem::portfolio::place_buffers`; the
    /// pipeline's `linear_scan_allocator` runs one scan).
    Lsa,
}

/// Arguments of `tusk dsa`.
#[derive(clap::Args, Debug, Clone)]
pub struct DsaArgs {
    /// Buffer CSV: `id,lower,upper,size[,alignment][,offset]`.
    pub file: PathBuf,
    /// Bytes available; default: the number in a file name like `C.1048576.csv`.
    #[arg(long)]
    pub capacity: Option<u64>,
    /// The allocator.
    #[arg(long, value_enum, default_value = "exact")]
    pub algo: Algo,
    /// Write the rows with an `offset` column to this CSV (also when over capacity).
    #[arg(short = 'o', long = "output", value_name = "OUT.csv")]
    pub out: Option<PathBuf>,
    /// Draw the placement as SVG to this file (also when over capacity):
    /// time across, offset up, the peak's live set outlined, an inset at
    /// the peak when the picture alone does not show it readably.
    #[arg(long, value_name = "MAP.svg")]
    pub svg: Option<PathBuf>,
    /// Time budget of the exact search in milliseconds (default 10000 when
    /// no budget is given). When the search does not fit the capacity, half
    /// as much again goes to searches at raised capacities (between the
    /// lower bound and the best peak found), as for `--budget-nodes`.
    #[arg(long)]
    pub budget_ms: Option<u64>,
    /// Node budget of the exact search.
    #[arg(long)]
    pub budget_nodes: Option<u64>,
    /// Exact search: keep searching for the lowest peak after a fit.
    #[arg(long)]
    pub minimize: bool,
    /// Storage budget (bytes, or with K, M, G): the exact search and the
    /// coloring allocator's interference graph run only within their share
    /// of it (see `tusk run --max-memory`); default 1 GiB or 8 × the
    /// problem's storage.
    #[arg(long, value_name = "BYTES", value_parser = crate::io::parse_bytes)]
    pub max_memory: Option<u64>,
    /// Improve the colorer's placement (`--algo coloring`, and the
    /// colorer's answer `--algo exact` falls back to) by window repacking
    /// for up to this many milliseconds: parts of the placement around its
    /// peak re-solved exactly against the rest. 0 (default): off.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub repack_ms: u64,
    /// Print one JSON object instead of the summary: `file`, `buffers`,
    /// `capacity`, `algo`, `peak`, `lower_bound`, `peak_over_bound`,
    /// `fits`, `search` (the allocator's status lines), `storage_skipped`,
    /// `micros`, `validated`.
    #[arg(long)]
    pub json: bool,
    /// After the summary, why each buffer sits where it does (the buffers
    /// under it while it is live, those reusing its bytes), and over the
    /// capacity, what is live at the peak and how many more bytes it
    /// needs. With --json, the object's `explain`.
    #[arg(long)]
    pub explain: bool,
}

/// [`ExactWorkspace::raise`] on `problem` from the peak of `placements`
/// (kept lowest), over half of `budget`, from just above the capacity the
/// search found nothing at (or the bound `lb`, if higher); returns its
/// status line and whether it lowered the peak.
fn descend(
    problem: &Problem,
    lb: u64,
    ws: &mut ExactWorkspace,
    budget: Budget,
    placements: &mut [Placement],
    trial: &mut [Placement],
) -> (String, bool) {
    let mut relaxed = problem.clone();
    let floor = lb.max(problem.capacity.saturating_add(1));
    let steps = DESCENT_STEPS;
    let slice = budget.share(2 * steps as u64);
    let mut clock = StdClock(Instant::now());
    let r = ws.raise(
        &mut relaxed,
        floor,
        steps,
        slice,
        &mut clock,
        placements,
        trial,
    );
    (
        format!(
            "raised capacities: {} search{} at capacities in [{floor}, {}) ({} nodes), best peak {}",
            r.steps,
            if r.steps == 1 { "" } else { "es" },
            r.before,
            r.nodes,
            r.peak
        ),
        r.peak < r.before,
    )
}

/// Steps of [`descend`]: each halves the range between the floor and the
/// best peak, so eight take it to 1/256 of the first gap.
const DESCENT_STEPS: u32 = 8;

/// The large-first method into `placements`; its status line.
fn large_first(
    problem: &Problem,
    opts: &LargeFirstOptions,
    placements: &mut [Placement],
    storage: &mut StorageReport,
) -> String {
    let mut ws = LargeFirstWorkspace::new();
    ws.reserve_within(problem, opts, storage.allowance());
    storage.add("large first", ws.heap_bytes());
    let o = ws.place(problem, opts, &mut StdClock(Instant::now()), placements);
    let stopped = o
        .stopped_by
        .map_or_else(String::new, |l| format!("; stopped by the {l}"));
    format!(
        "large first: the {} largest buffers searched in {} tier{} ({}{stopped}; {} nodes; their peak {} over their bound {}), the rest placed greedily by size",
        o.large,
        o.tiers,
        if o.tiers == 1 { "" } else { "s" },
        o.status,
        o.nodes,
        o.large_peak,
        o.large_bound
    )
}

/// Window repacking of `placements` for up to `ms` milliseconds within the
/// storage budget; the status line to print (`None` when `ms` is 0).
fn repack(
    problem: &Problem,
    lb: u64,
    placements: &mut [Placement],
    ms: u64,
    storage: &mut StorageReport,
) -> Option<String> {
    if ms == 0 {
        return None;
    }
    let opts = RepackOptions {
        micros: Some(ms.saturating_mul(1000)),
        ..RepackOptions::default()
    };
    let n = problem.len();
    let need = RepackWorkspace::linear_bytes_for(n)
        .saturating_add(tusk_core::dsa::REPACK_PART_STACK_BYTES);
    if need > storage.allowance() {
        return Some(format!(
            "window repacking: skipped (needs about {need} bytes, the storage budget leaves {})",
            storage.allowance()
        ));
    }
    let mut ws = RepackWorkspace::new();
    ws.reserve(problem, n, &opts);
    storage.add("window repacking", ws.heap_bytes());
    let o = ws.improve(
        problem,
        lb,
        placements,
        &opts,
        &mut StdClock(Instant::now()),
    );
    Some(format!(
        "window repacking: peak {} -> {}; {} parts solved, {} applied, {} proven not to fit; {} search nodes",
        o.peak_before, o.peak, o.windows, o.improved, o.proven, o.nodes
    ))
}

/// Appends `line` and a newline to `summary`.
fn say(summary: &mut String, line: String) {
    summary.push_str(&line);
    summary.push('\n');
}

/// A [`Clock`] on `std::time::Instant`.
#[derive(Debug)]
pub struct StdClock(pub Instant);

impl Clock for StdClock {
    fn now_micros(&mut self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

/// Runs `tusk dsa` and returns the exit code.
pub fn run(args: &DsaArgs) -> u8 {
    let path = args.file.display();
    let mut outs: Vec<(&str, &Path)> = Vec::new();
    if let Some(out) = &args.out {
        outs.push(("-o", out.as_path()));
    }
    if let Some(svg) = &args.svg {
        outs.push(("--svg", svg.as_path()));
    }
    if !outs.is_empty() {
        if args.json {
            outs.push(("--json", Path::new("-")));
        }
        if let Err(msg) = crate::io::check_outputs(Some(&args.file), &outs) {
            console::error(msg);
            return EXIT_BAD_INPUT;
        }
    }
    // Bounded like every input: a huge or endless file is refused (exit 2).
    let bytes = match crate::io::read_limited(&args.file, crate::text::MAX_TEXT_BYTES) {
        Ok(b) => b,
        Err(e) => return e.report(EXIT_OK),
    };
    let mut table = match csv::parse(&bytes) {
        Ok(t) => t,
        Err(e) => {
            console::error(format_args!("{path}:{e}"));
            return EXIT_BAD_INPUT;
        }
    };
    let Some(capacity) = args
        .capacity
        .or_else(|| csv::capacity_from_name(&args.file))
    else {
        console::error(format_args!(
            "no capacity for {path}: give --capacity N or name the file like NAME.<capacity>.csv"
        ));
        return EXIT_BAD_INPUT;
    };
    table.problem.capacity = capacity;
    let problem = &table.problem;
    let n = problem.len();
    let lb = problem.lower_bound(&mut Timeline::with_capacity(n)).bytes;
    let mut placements = vec![Placement::default(); n];
    let start = Instant::now();
    let mut status_line = String::new();
    let budget = match args.max_memory {
        Some(b) => StorageBudget::bytes(b),
        None => StorageBudget::default_for(problem.heap_bytes()),
    };
    let mut storage = StorageReport::new(budget);
    storage.add("problem", problem.heap_bytes());
    storage.add("placements", (n * std::mem::size_of::<Placement>()) as u64);
    match args.algo {
        Algo::GreedySize | Algo::BestFit => {
            let rule = if args.algo == Algo::GreedySize {
                GreedyRule::BySize
            } else {
                GreedyRule::StartBestFit
            };
            let mut ws = GreedyWorkspace::new();
            ws.reserve_for(problem);
            ws.place(problem, rule, &mut placements);
        }
        Algo::Coloring => {
            let mut ws = GcaWorkspace::new();
            let tables = budgeted::graph_tables(&mut ws, problem, 0);
            storage.add("coloring: per-buffer tables", tables);
            let graph = budgeted::graph(
                &mut ws,
                problem,
                0,
                0,
                &mut storage,
                "the interference graph",
            );
            storage.add("coloring: interference graph", graph);
            let tree = ws.reserve_occupancy_within(problem, 0, storage.allowance());
            if tree > 0 {
                storage.add("coloring: occupancy tree", tree);
            }
            let o = ws.solve(problem, &GcaOptions::default(), &mut placements);
            status_line = format!(
                "coloring: best order {}, {} sweeps, {} improvement replays, {} interference edges",
                o.best_rule, o.sweeps, o.replays, o.edges
            );
            if let Some(line) = repack(problem, lb, &mut placements, args.repack_ms, &mut storage) {
                status_line.push('\n');
                status_line.push_str(&line);
            }
        }
        Algo::LargeFirst => {
            let mut opts = LargeFirstOptions::default();
            if args.budget_nodes.is_some() || args.budget_ms.is_some() {
                opts.budget = Budget {
                    nodes: args.budget_nodes,
                    micros: args.budget_ms.map(|ms| ms.saturating_mul(1000)),
                };
            }
            status_line = large_first(problem, &opts, &mut placements, &mut storage);
        }
        Algo::Lsa => {
            if problem.buffers().iter().any(|b| b.pin.is_some()) {
                console::error(format_args!("{path}: --algo lsa does not take pinned buffers (an `offset` column); use coloring or exact"));
                return EXIT_BAD_INPUT;
            }
            match lsa_portfolio(problem, &table.ids, &mut placements) {
                Ok(rounds) => status_line = format!("linear scan: {rounds} scans"),
                Err(e) => {
                    console::error(format_args!("{path}: {e}"));
                    return EXIT_FAILED;
                }
            }
        }
        Algo::Exact => {
            let mut ws = ExactWorkspace::new();
            let tables = budgeted::search_tables(&mut ws, problem);
            storage.add("exact search: per-buffer tables", tables);
            let search = budgeted::search(
                &mut ws,
                problem,
                &mut storage,
                1,
                "the exact placement search",
                "the better greedy placement",
            );
            storage.add("exact search", search);
            let budget = Budget {
                nodes: args.budget_nodes,
                micros: match (args.budget_ms, args.budget_nodes) {
                    (Some(ms), _) => Some(ms.saturating_mul(1000)),
                    (None, Some(_)) => None,
                    (None, None) => Some(10_000_000),
                },
            };
            let options = ExactOptions {
                budget,
                objective: if args.minimize {
                    Objective::MinimizePeak
                } else {
                    Objective::Fit
                },
                ..ExactOptions::default()
            };
            let o = ws.solve(problem, &options, &mut StdClock(start), &mut placements);
            status_line = format!("status: {}", o.status);
            if o.status == Status::Feasible && !args.minimize && o.stopped_by.is_none() {
                status_line.push_str(" (stopped at the first fit; --minimize searches further)");
            }
            if let Some(l) = o.stopped_by {
                status_line.push_str(&format!("; stopped by the {l}"));
            }
            status_line.push_str(&format!(
                "; greedy peak {}; {} search nodes",
                o.greedy_peak, o.nodes
            ));
            if let Some((nodes, us)) = o.first_fit {
                status_line.push_str(&format!(
                    "; first fit after {nodes} nodes, {:.3} ms",
                    us as f64 / 1000.0
                ));
            }
            // Never worse than a heuristic: when the search did not prove
            // its answer optimal, the colorer and the linear-scan portfolio
            // run too and the lowest peak is kept.
            let mut by = if o.nodes == 0 || o.peak == o.greedy_peak {
                "greedy"
            } else {
                "search"
            };
            if o.status != Status::Optimal {
                let mut trial = vec![Placement::default(); n];
                let mut gws = GcaWorkspace::new();
                let g = gws.reserve_within(problem, 0, 0, storage.allowance());
                if !g.refused {
                    gws.solve(problem, &GcaOptions::default(), &mut trial);
                    if let Some(line) =
                        repack(problem, lb, &mut trial, args.repack_ms, &mut storage)
                    {
                        status_line.push('\n');
                        status_line.push_str(&line);
                    }
                    if peak(problem, &trial) < peak(problem, &placements) {
                        placements.copy_from_slice(&trial);
                        by = "coloring";
                    }
                }
                // Above one tier's size, the search on the largest buffers
                // (in tiers) with the rest placed around them.
                let opts = LargeFirstOptions::default();
                if n > opts.tier as usize {
                    let line = large_first(problem, &opts, &mut trial, &mut storage);
                    status_line.push('\n');
                    status_line.push_str(&line);
                    if peak(problem, &trial) < peak(problem, &placements) {
                        placements.copy_from_slice(&trial);
                        by = "large first";
                    }
                }
                let pinned = problem.buffers().iter().any(|b| b.pin.is_some());
                if !pinned
                    && lsa_portfolio(problem, &table.ids, &mut trial).is_ok()
                    && peak(problem, &trial) < peak(problem, &placements)
                {
                    placements.copy_from_slice(&trial);
                    by = "linear scan";
                }
                // Not fitted at the capacity: the search again at raised
                // capacities, between the bound and the best peak so far.
                if !o.status.fits()
                    && !matches!(o.stopped_by, Some(Limit::Size) | Some(Limit::Budget))
                {
                    let line = descend(problem, lb, &mut ws, budget, &mut placements, &mut trial);
                    status_line.push('\n');
                    status_line.push_str(&line.0);
                    if line.1 {
                        by = "search at a raised capacity";
                    }
                }
            }
            let best = peak(problem, &placements);
            let proof = match o.status {
                Status::Optimal => "proven optimal",
                Status::Infeasible => "proven: no placement fits the capacity",
                _ if best == lb => "optimal (at the lower bound)",
                _ => "not proven optimal",
            };
            status_line.push_str(&format!(
                "\nbest found by: {by}; gap to the lower bound: {} bytes ({:.3}%); {proof}",
                best - lb.min(best),
                if lb == 0 {
                    0.0
                } else {
                    (best - lb.min(best)) as f64 * 100.0 / lb as f64
                }
            ));
        }
    }
    let elapsed = start.elapsed();
    let p = peak(problem, &placements);
    let mut validator = Validator::with_capacity(n, 8);
    let check = validator.check(problem, &placements, u64::MAX);
    // The summary goes out last, once the output file is in place.
    let mut summary = String::new();
    say(
        &mut summary,
        format!("file: {path}  buffers: {n}  capacity: {capacity}"),
    );
    let algo = clap::ValueEnum::to_possible_value(&args.algo)
        .map_or_else(String::new, |v| v.get_name().to_string());
    say(&mut summary, format!("algo: {algo}"));
    say(
        &mut summary,
        format!(
            "peak: {p}  lower bound: {lb}  peak/LB: {:.4}",
            peak_over_bound(p, lb)
        ),
    );
    let fits = p <= capacity;
    if fits {
        say(
            &mut summary,
            format!("fits: yes ({} bytes to spare)", capacity - p),
        );
    } else {
        say(
            &mut summary,
            format!(
                "fits: no (peak exceeds the capacity by {} bytes)",
                p - capacity
            ),
        );
    }
    if !status_line.is_empty() {
        say(&mut summary, status_line.clone());
    }
    summary.push_str(&crate::run::storage_lines(&storage, ""));
    say(
        &mut summary,
        format!("time: {:.3} ms", elapsed.as_secs_f64() * 1000.0),
    );
    let explained = args
        .explain
        .then(|| crate::explain::of_buffers(problem, &table.ids, &placements));
    if let (Some(x), false) = (&explained, args.json) {
        summary.push_str(&x.render());
    }
    if args.json {
        // The same figures, as one object.
        let mut v = serde_json::json!({
            "file": path.to_string(),
            "buffers": n,
            "capacity": capacity,
            "algo": algo,
            "peak": p,
            "lower_bound": lb,
            "peak_over_bound": peak_over_bound(p, lb),
            "fits": p <= capacity,
            "search": status_line.lines().collect::<Vec<_>>(),
            "storage_skipped": storage.skipped.iter().map(|k| k.to_string()).collect::<Vec<_>>(),
            "storage_skipped_unlisted": storage.skipped_unlisted,
            "micros": elapsed.as_micros() as u64,
            "validated": check.total == 0,
        });
        if let Some(x) = &explained {
            v["explain"] = x.to_json();
        }
        summary = format!("{v:#}\n");
    }
    if check.total > 0 {
        let mut msg = format!(
            "internal error: the placement failed validation ({})\n",
            crate::run::count(check.total as u64, "finding")
        );
        for f in validator.findings() {
            msg.push_str(&format!("  {}\n", f.named(table.ids.as_slice())));
        }
        console::error(msg.trim_end());
        return console::print_and_finish(EXIT_FAILED, &summary);
    }
    if !args.json {
        say(
            &mut summary,
            format!("validated: legal ({n} buffers, no overlap)"),
        );
    }
    let code = if fits { EXIT_OK } else { EXIT_FAILED };
    // The picture on standard output owns it, as the placement does.
    let mut svg_on_stdout = false;
    if let Some(out) = &args.svg {
        let rects: Vec<crate::svg::BufferRect> = problem
            .buffers()
            .iter()
            .zip(&placements)
            .zip(&table.ids)
            .map(|((b, pl), id)| crate::svg::BufferRect {
                lower: b.lower,
                upper: b.upper,
                offset: pl.offset,
                size: b.size,
                label: id.clone(),
            })
            .collect();
        let doc = crate::svg::buffer_map(&path.to_string(), &rects, Some(capacity)).to_string();
        if let Err(e) = crate::io::write_atomic_with(out, |w| w.write_all(doc.as_bytes())) {
            return e.report(code);
        }
        if out.as_os_str() == "-" {
            svg_on_stdout = true;
        } else if !args.json {
            say(&mut summary, format!("wrote {}", out.display()));
        }
    }
    if let Some(out) = &args.out {
        let on_stdout = out.as_os_str() == "-";
        if let Err(e) = csv::write_file(out, &table, &placements) {
            return e.report(code);
        }
        if !fits {
            console::error(format_args!(
                "wrote {} although the placement does not fit: peak {p} > capacity {capacity}",
                out.display()
            ));
        }
        if on_stdout {
            // The placement owns standard output, so it pipes onward.
            console::eprint(&summary);
            return code;
        }
        if fits && !args.json {
            say(&mut summary, format!("wrote {}", out.display()));
        }
    }
    if svg_on_stdout {
        console::eprint(&summary);
        return code;
    }
    console::print_and_finish(code, &summary)
}

/// The linear-scan portfolio on the non-void buffers of `problem` (which has
/// no pins); void buffers stay at offset 0. Returns the scans run, or the
/// portfolio's error with the buffer named by its id.
fn lsa_portfolio(
    problem: &tusk_core::dsa::Problem,
    ids: &[String],
    placements: &mut [Placement],
) -> Result<u32, String> {
    let n = problem.len();
    let live: Vec<usize> = (0..n)
        .filter(|&i| !problem.buffers()[i].is_void())
        .collect();
    let bufs: Vec<_> = live.iter().map(|&i| problem.buffers()[i]).collect();
    let mut ws = BufferWorkspace::with_capacity(bufs.len());
    let mut offsets = vec![0u64; bufs.len()];
    let o = place_buffers(&bufs, problem.capacity, &mut ws, &mut offsets).map_err(|e| {
        // The portfolio numbers the non-void buffers it was given.
        let names: Vec<&str> = live.iter().map(|&i| ids[i].as_str()).collect();
        e.named(names.as_slice()).to_string()
    })?;
    placements.fill(Placement::default());
    for (k, &i) in live.iter().enumerate() {
        placements[i] = Placement {
            offset: offsets[k],
            base: 0,
        };
    }
    Ok(o.rounds)
}
