//! The placement targets of issue 15, side by side in one run:
//! 1. the eleven MiniMalloc challenging instances (`A..K.1048576.csv`) at
//!    capacity, as given and mirrored / shuffled / scaled (×3), with the
//!    exact search (default portfolio, objective Fit): time and status; and,
//!    when `MINIMALLOC_BIN` names a MiniMalloc binary, its time on the same
//!    dressed instance, with the ratio;
//! 2. the coloring allocator alone (no exact fallback): peak / lower bound
//!    on the eleven, and the mean; then the same placements improved by
//!    window repacking for `DSA_REPACK_MS` (default 2000) ms each;
//! 3. generated trace-like instances (20k and 100k buffers; 1M with
//!    `DSA_TARGETS_1M=1`): greedy by size, the colorer and the linear-scan
//!    portfolio, time, peak / lower bound and workspace bytes per buffer;
//!    the greedy placement improved by window repacking; large first.
//!
//! `TUSK_DATA=/work/shared/data cargo run --release -p tusk-benches --bin dsa_targets`
//!
//! `DSA_BUDGET_MS` (default 4000) is the search's time budget per instance.
//! One run each (the search is deterministic; times are wall clock on a
//! shared machine).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use tusk_core::dsa::{
    peak, place_buffers, Budget, BufferWorkspace, ExactOptions, ExactWorkspace, GcaOptions,
    GcaWorkspace, GreedyRule, GreedyWorkspace, LargeFirstOptions, LargeFirstWorkspace, Objective,
    Placement, Problem, RepackOptions, RepackWorkspace, Timeline, Validator,
};
use tusk_core::gen::dsa::{trace_like, Dress, TraceLike};
use tusk_core::Clock;

struct Wall(Instant);
impl Clock for Wall {
    fn now_micros(&mut self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn load(path: &Path) -> Problem {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let t = tusk_shim::csv::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut p = t.problem;
    p.capacity = tusk_shim::csv::capacity_from_name(path).expect("capacity in the file name");
    p
}

fn legal(p: &Problem, out: &[Placement]) {
    let mut v = Validator::with_capacity(p.len(), 4);
    assert_eq!(v.check(p, out, u64::MAX).total, 0, "illegal placement");
}

/// MiniMalloc's seconds on `p` (written to a temporary CSV), if a binary
/// is given.
fn minimalloc(bin: &Path, p: &Problem, name: &str) -> Option<f64> {
    let dir = std::env::temp_dir().join(format!("dsa_targets_{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let input = dir.join(format!("{name}.csv"));
    let mut text = String::from("id,lower,upper,size\n");
    for (i, b) in p.buffers().iter().enumerate() {
        text.push_str(&format!("{i},{},{},{}\n", b.lower, b.upper, b.size));
    }
    std::fs::write(&input, text).ok()?;
    let out = Command::new(bin)
        .arg(format!("--capacity={}", p.capacity))
        .arg(format!("--input={}", input.display()))
        .arg(format!("--output={}", dir.join("out.csv").display()))
        .arg("--timeout=60s")
        .output()
        .ok()?;
    let err = String::from_utf8_lossy(&out.stderr);
    let at = err.find("Elapsed time ")? + "Elapsed time ".len();
    err[at..].split('s').next()?.trim().parse().ok()
}

fn main() {
    let data = tusk_shim::shared_data::dir().join("dsa");
    let budget_ms = env_u64("DSA_BUDGET_MS", 4000);
    let mm = std::env::var_os("MINIMALLOC_BIN").map(PathBuf::from);
    let names = ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"];
    let mut files = Vec::new();
    for n in names {
        let path = data.join(format!("{n}.1048576.csv"));
        if path.exists() {
            files.push((n, load(&path)));
        } else {
            println!("{}: absent, skipped", path.display());
        }
    }

    println!("## 1. Exact search at capacity (budget {budget_ms} ms)\n");
    println!("| instance | dress | buffers | tusk ms | status | nodes | MiniMalloc s | tusk / MiniMalloc |");
    println!("|---|---|---|---|---|---|---|---|");
    let dresses: [(&str, Option<Dress>); 4] = [
        ("as given", None),
        ("mirrored", Some(Dress::Mirror)),
        ("shuffled", Some(Dress::Shuffle(0x5eed))),
        ("scaled x3", Some(Dress::Scale(3))),
    ];
    let (mut fits, mut within, mut runs) = (0, 0, 0);
    for (name, p) in &files {
        for (label, d) in dresses {
            let mut q = p.clone();
            if let Some(d) = d {
                let mut from = Vec::new();
                d.apply(p, &mut q, &mut from).expect("dressed");
            }
            let mut ws = ExactWorkspace::new();
            ws.reserve_for(&q);
            let mut out = vec![Placement::default(); q.len()];
            let opts = ExactOptions {
                budget: Budget {
                    nodes: None,
                    micros: Some(budget_ms * 1000),
                },
                objective: Objective::Fit,
                ..ExactOptions::default()
            };
            let t = Instant::now();
            let o = ws.solve(&q, &opts, &mut Wall(t), &mut out);
            let s = t.elapsed().as_secs_f64();
            legal(&q, &out);
            let mm_s = mm
                .as_ref()
                .and_then(|b| minimalloc(b, &q, &format!("{name}_{runs}")));
            runs += 1;
            fits += o.status.fits() as u32;
            let ratio = mm_s.map(|m| s / m);
            within += (o.status.fits() && ratio.is_some_and(|r| r <= 0.1)) as u32;
            println!(
                "| {name} | {label} | {} | {:.1} | {} | {} | {} | {} |",
                q.len(),
                s * 1e3,
                o.status,
                o.nodes,
                mm_s.map_or("-".into(), |m| format!("{m:.3}")),
                ratio.map_or("-".into(), |r| format!("{r:.3}")),
            );
        }
    }
    println!("\nfit at capacity: {fits} of {runs}; within 1/10 of MiniMalloc's time: {within}\n");

    println!("## 2. Coloring allocator alone (GcaOptions::default(), no exact fallback)\n");
    let repack_ms = env_u64("DSA_REPACK_MS", 2000);
    let repack_opts = RepackOptions {
        micros: Some(repack_ms * 1000),
        ..RepackOptions::default()
    };
    println!("| instance | peak / lower bound | ms | + window repacking ({repack_ms} ms) | ms |");
    println!("|---|---|---|---|---|");
    let mut sum = 0.0;
    let mut sum_repacked = 0.0;
    for (name, p) in &files {
        let mut ws = GcaWorkspace::new();
        ws.reserve_for(p, 0, 0);
        let mut out = vec![Placement::default(); p.len()];
        let t = Instant::now();
        let o = ws.solve(p, &GcaOptions::default(), &mut out);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        legal(p, &out);
        let r = o.peak as f64 / o.lower_bound as f64;
        sum += r;
        let mut rw = RepackWorkspace::new();
        rw.reserve(p, p.len(), &repack_opts);
        let t = Instant::now();
        let ro = rw.improve(p, o.lower_bound, &mut out, &repack_opts, &mut Wall(t));
        let rms = t.elapsed().as_secs_f64() * 1e3;
        legal(p, &out);
        let rr = ro.peak as f64 / o.lower_bound as f64;
        sum_repacked += rr;
        println!("| {name} | {r:.4} | {ms:.1} | {rr:.4} | {rms:.0} |");
    }
    if !files.is_empty() {
        let k = files.len() as f64;
        println!("| mean | {:.4} | | {:.4} | |\n", sum / k, sum_repacked / k);
    }

    println!("## 3. Trace-like instances (gen::dsa::trace_like)\n");
    println!("| buffers | method | ms | peak / lower bound | workspace bytes / buffer |");
    println!("|---|---|---|---|---|");
    let mut sizes = vec![20_000usize, 100_000];
    if std::env::var_os("DSA_TARGETS_1M").is_some() {
        sizes.push(1_000_000);
    }
    for n in sizes {
        let mut p = Problem::linear(u64::MAX / 8, n);
        trace_like(&TraceLike::new(n), 1, &mut p).expect("generated");
        let lb = p.lower_bound(&mut Timeline::with_capacity(n)).bytes;
        let mut out = vec![Placement::default(); n];
        let row = |method: &str, ms: f64, pk: u64, bytes: u64| {
            println!(
                "| {n} | {method} | {ms:.0} | {:.4} | {:.0} |",
                pk as f64 / lb as f64,
                bytes as f64 / n as f64
            );
        };
        let mut g = GreedyWorkspace::new();
        g.reserve_for(&p);
        let t = Instant::now();
        let pk = g.place(&p, GreedyRule::BySize, &mut out);
        row(
            "greedy by size",
            t.elapsed().as_secs_f64() * 1e3,
            pk,
            g.heap_bytes(),
        );
        legal(&p, &out);
        let mut rw = RepackWorkspace::new();
        rw.reserve(&p, n, &repack_opts);
        let t = Instant::now();
        let ro = rw.improve(&p, lb, &mut out, &repack_opts, &mut Wall(t));
        row(
            "greedy by size + window repacking",
            t.elapsed().as_secs_f64() * 1e3,
            ro.peak,
            rw.heap_bytes(),
        );
        legal(&p, &out);
        let mut c = GcaWorkspace::new();
        c.reserve_for(&p, 0, 0);
        let t = Instant::now();
        let o = c.solve(&p, &GcaOptions::default(), &mut out);
        row(
            "coloring",
            t.elapsed().as_secs_f64() * 1e3,
            o.peak,
            c.heap_bytes(),
        );
        legal(&p, &out);
        debug_assert_eq!(o.peak, peak(&p, &out));
        let lf_opts = LargeFirstOptions::default();
        let mut lf = LargeFirstWorkspace::new();
        lf.reserve(&p, &lf_opts);
        let t = Instant::now();
        let lo = lf.place(&p, &lf_opts, &mut Wall(t), &mut out);
        row(
            &format!(
                "large first ({} searched in {} tiers, {}k nodes)",
                lo.large,
                lo.tiers,
                lf_opts.budget.nodes.unwrap_or(0) / 1000
            ),
            t.elapsed().as_secs_f64() * 1e3,
            lo.peak,
            lf.heap_bytes(),
        );
        legal(&p, &out);
        let mut l = BufferWorkspace::with_capacity(n);
        let mut off = vec![0u64; n];
        let t = Instant::now();
        let r = place_buffers(p.buffers(), p.capacity, &mut l, &mut off).expect("placed");
        row(
            "linear-scan portfolio",
            t.elapsed().as_secs_f64() * 1e3,
            r.peak,
            0,
        );
    }
}
