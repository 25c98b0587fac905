//! `tusk dsa` end to end, and the shipped MiniMalloc files.

use std::path::{Path, PathBuf};

use tusk_core::dsa::{
    peak, place_buffers, Budget, BufferOutcome, BufferWorkspace, ExactOptions, ExactWorkspace,
    GreedyRule, GreedyWorkspace, Objective, Placement, Problem, Status, Timeline, Validator,
};
use tusk_core::gen::dsa::{perfect_packing, trace_like, PerfectPacking, TraceLike};
use tusk_core::pass::best_fit::Policy;
use tusk_core::NoClock;
use tusk_shim::dsa::{run, Algo, DsaArgs};

#[allow(dead_code)] // each test binary uses a part of the helpers
mod common;
use common::write_csv;

/// The public DSA instances: `dsa/` in the public data folder
/// (`tusk_shim::shared_data::dir`: `$TUSK_DATA`, else `../shared/data`
/// beside the checkout, where CI has it). Missing data fails the test
/// loudly: a test that needs it never passes on nothing.
fn data_dir() -> PathBuf {
    let dir = tusk_shim::shared_data::dir().join("dsa");
    assert!(
        dir.is_dir(),
        "{} is absent: these tests need the public DSA instances (set TUSK_DATA to the data folder)",
        dir.display()
    );
    dir
}

fn load(dir: &Path, name: &str) -> Problem {
    let path = dir.join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut t = tusk_shim::csv::parse(&bytes).expect("shipped file parses");
    t.problem.capacity = tusk_shim::csv::capacity_from_name(&path).expect("capacity in name");
    t.problem
}

/// The lower bound (max live bytes) that the data's own README
/// (`dir/../README.md`, the table of the dsa instances) gives for `name`.
fn documented_lower_bound(dir: &Path, name: &str) -> u64 {
    let readme = dir.join("../README.md");
    let text =
        std::fs::read_to_string(&readme).unwrap_or_else(|e| panic!("{}: {e}", readme.display()));
    let row = text
        .lines()
        .find(|l| l.starts_with(&format!("| {name} |")))
        .unwrap_or_else(|| panic!("{} has no row for {name}", readme.display()));
    // | file | buffers | lower bound (max live bytes) | ... |
    let cell = row.split('|').nth(3).unwrap_or_default().trim();
    cell.parse()
        .unwrap_or_else(|e| panic!("{}: lower bound of {name} `{cell}`: {e}", readme.display()))
}

fn exact(p: &Problem, nodes: u64) -> (Status, Vec<Placement>) {
    let mut ws = ExactWorkspace::new();
    ws.reserve_for(p);
    let mut out = vec![Placement::default(); p.len()];
    let options = ExactOptions {
        budget: Budget {
            nodes: Some(nodes),
            micros: None,
        },
        objective: Objective::Fit,
        ..ExactOptions::default()
    };
    let o = ws.solve(p, &options, &mut NoClock, &mut out);
    (o.status, out)
}

fn assert_fits(p: &Problem, out: &[Placement]) {
    let mut v = Validator::with_capacity(p.len(), 4);
    let r = v.check(p, out, p.capacity);
    assert_eq!(r.total, 0, "{:?}", v.findings());
}

fn args(file: PathBuf, capacity: Option<u64>, out: Option<PathBuf>, algo: Algo) -> DsaArgs {
    DsaArgs {
        file,
        capacity,
        algo,
        out,
        svg: None,
        budget_ms: None,
        budget_nodes: Some(100_000),
        minimize: false,
        repack_ms: 0,
        max_memory: None,
        json: false,
        explain: false,
    }
}

#[test]
fn dsa_writes_offsets_and_reports_by_exit_code() {
    let dir = std::env::temp_dir().join(format!("tusk-dsa-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("tiny.8.csv");
    std::fs::write(&input, "id,lower,upper,size\na,0,4,4\nb,2,6,4\nc,4,8,4\n").unwrap();
    let out = dir.join("out.csv");
    // Capacity from the file name: fits.
    assert_eq!(
        run(&args(input.clone(), None, Some(out.clone()), Algo::Exact)),
        0
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("id,lower,upper,size,offset\n"), "{text}");
    assert_eq!(text.lines().count(), 4);
    // Below the lower bound: proven infeasible, still written, exit 1.
    std::fs::remove_file(&out).unwrap();
    assert_eq!(
        run(&args(
            input.clone(),
            Some(7),
            Some(out.clone()),
            Algo::Exact
        )),
        1
    );
    assert!(out.exists());
    // The greedy rules run too.
    assert_eq!(
        run(&args(input.clone(), Some(8), None, Algo::GreedySize)),
        0
    );
    assert_eq!(run(&args(input.clone(), Some(8), None, Algo::BestFit)), 0);
    // Bad input, no capacity, missing file.
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "id,lower,upper,size\na,0,x,4\n").unwrap();
    assert_eq!(run(&args(bad.clone(), Some(8), None, Algo::Exact)), 2);
    std::fs::write(&bad, "id,lower,upper,size\na,0,1,4\n").unwrap();
    assert_eq!(run(&args(bad, None, None, Algo::Exact)), 2);
    assert_eq!(
        run(&args(dir.join("missing.csv"), Some(8), None, Algo::Exact)),
        3
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Peak of the placement `tusk dsa -o` wrote.
fn written_peak(out: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(out).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<u64> = l.split(',').skip(1).map(|x| x.parse().unwrap()).collect();
            let (lower, upper, size, offset) = (f[0], f[1], f[2], f[3]);
            if lower < upper && size > 0 {
                offset + size
            } else {
                0
            }
        })
        .max()
        .unwrap_or(0)
}

/// The placement `tusk dsa -o` wrote is legal: re-read with its offsets as
/// pins, which the validator checks.
fn assert_written_legal(out: &Path) {
    let table = tusk_shim::csv::parse(&std::fs::read(out).unwrap()).unwrap();
    let placed: Vec<Placement> = table
        .problem
        .buffers()
        .iter()
        .map(|b| b.pin.expect("an offset per row"))
        .collect();
    let mut v = Validator::with_capacity(placed.len(), 4);
    assert_eq!(v.check(&table.problem, &placed, u64::MAX).total, 0);
}

/// `--repack-ms` on a generated perfect packing: the colorer's written
/// placement, improved, is legal and no higher than without it.
#[test]
fn window_repacking_writes_a_legal_placement_no_higher() {
    let dir = std::env::temp_dir().join(format!("tusk-dsa-repack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = write_csv(&dir, "perfect.csv", &perfect(150, 4));
    let plain = dir.join("plain.csv");
    let repacked = dir.join("repacked.csv");
    let cap = Some(u64::MAX / 8);
    assert_eq!(
        run(&args(
            input.clone(),
            cap,
            Some(plain.clone()),
            Algo::Coloring
        )),
        0
    );
    let mut a = args(input, cap, Some(repacked.clone()), Algo::Coloring);
    a.repack_ms = 300;
    assert_eq!(run(&a), 0);
    assert!(written_peak(&repacked) <= written_peak(&plain));
    assert_written_legal(&repacked);
    std::fs::remove_dir_all(&dir).ok();
}

/// `--algo large-first` on a trace-like problem larger than its large set:
/// legal, and below greedy by size (whose mistakes on the huge buffers it
/// exists to avoid: 2.6% above the bound on this trace). Not a law: where
/// greedy by size is already at the bound (seed 2 of this size) the rest
/// placed around the searched tiers can land a little above it.
#[test]
fn large_first_writes_a_legal_placement_below_greedy_by_size() {
    let dir = std::env::temp_dir().join(format!("tusk-dsa-large-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut p = Problem::linear(u64::MAX / 8, 3000);
    trace_like(&TraceLike::new(3000), 1, &mut p).unwrap();
    let input = write_csv(&dir, "trace.csv", &p);
    let greedy = dir.join("greedy.csv");
    let large = dir.join("large.csv");
    let cap = Some(u64::MAX / 8);
    assert_eq!(
        run(&args(
            input.clone(),
            cap,
            Some(greedy.clone()),
            Algo::GreedySize
        )),
        0
    );
    assert_eq!(
        run(&args(input, cap, Some(large.clone()), Algo::LargeFirst)),
        0
    );
    assert!(written_peak(&large) < written_peak(&greedy));
    assert_written_legal(&large);
    std::fs::remove_dir_all(&dir).ok();
}

/// The tests that read the shipped instances: ignored by a plain `cargo
/// test`, run by CI where `../shared/data` is (`cargo test --workspace --
/// --ignored shared_data::`); without the data they fail, naming the path.
mod shared_data {
    use super::*;

    #[test]
    #[ignore = "needs ../shared/data/dsa (or TUSK_DATA/dsa); CI runs it"]
    fn portfolio_places_the_shipped_files_legally() {
        let dir = data_dir();
        for name in ["C.1048576.csv", "G.1048576.csv", "K.1048576.csv"] {
            let p = load(&dir, name);
            let r = portfolio(&p, p.capacity, &|_| {});
            assert!(r.peak >= r.lower_bound, "{name}");
            assert_eq!(r.lower_bound, p.lower_bound(&mut Timeline::default()).bytes);
            println!(
                "{name}: peak {} lb {} ratio {:.3} rounds {}",
                r.peak,
                r.lower_bound,
                r.peak as f64 / r.lower_bound as f64,
                r.rounds
            );
        }
        // `input.12.csv`: the portfolio reaches its lower bound, which fits.
        let small = load(&dir, "input.12.csv");
        let r = portfolio(&small, small.capacity, &|_| {});
        assert_eq!(r.peak, r.lower_bound);
        assert!(r.fits);
    }

    #[test]
    #[ignore = "needs ../shared/data/dsa (or TUSK_DATA/dsa); CI runs it"]
    fn greedy_rules_are_legal_on_the_shipped_files() {
        let dir = data_dir();
        for name in [
            "C.1048576.csv",
            "G.1048576.csv",
            "K.1048576.csv",
            "input.12.csv",
        ] {
            let p = load(&dir, name);
            let lb = p.lower_bound(&mut Timeline::default()).bytes;
            assert!(lb <= p.capacity, "{name}");
            for rule in [GreedyRule::BySize, GreedyRule::StartBestFit] {
                let mut ws = GreedyWorkspace::new();
                ws.reserve(p.len());
                let mut out = vec![Placement::default(); p.len()];
                let peak = ws.place(&p, rule, &mut out);
                assert!(peak >= lb);
                let mut v = Validator::with_capacity(p.len(), 4);
                assert_eq!(v.check(&p, &out, u64::MAX).total, 0, "{name} {rule:?}");
            }
        }
    }

    #[test]
    #[ignore = "needs ../shared/data/dsa (or TUSK_DATA/dsa); CI runs it"]
    fn exact_fits_c_at_its_lower_bound_and_g_at_capacity() {
        let dir = data_dir();
        let mut c = load(&dir, "C.1048576.csv");
        // C's lower bound is below its capacity: the search must fit it there.
        c.capacity = c.lower_bound(&mut Timeline::default()).bytes;
        assert_eq!(c.capacity, documented_lower_bound(&dir, "C.1048576.csv"));
        let (status, out) = exact(&c, 1_000_000);
        assert_eq!(status, Status::Optimal);
        assert_fits(&c, &out);
        let g = load(&dir, "G.1048576.csv");
        let (status, out) = exact(&g, 5_000_000);
        assert_eq!(status, Status::Optimal);
        assert_fits(&g, &out);
        let small = load(&dir, "input.12.csv");
        let (status, out) = exact(&small, 1000);
        assert_eq!(status, Status::Optimal);
        assert_fits(&small, &out);
    }

    #[test]
    #[ignore = "needs ../shared/data/dsa (or TUSK_DATA/dsa); CI runs it"]
    fn lower_bounds_are_the_documented_ones() {
        let dir = data_dir();
        for name in ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"] {
            let file = format!("{name}.1048576.csv");
            let p = load(&dir, &file);
            let lb = p.lower_bound(&mut Timeline::default()).bytes;
            assert_eq!(lb, documented_lower_bound(&dir, &file), "{file}");
        }
    }

    #[test]
    #[ignore = "needs ../shared/data/dsa (or TUSK_DATA/dsa); CI runs it"]
    fn exact_is_never_worse_than_the_heuristics_on_the_eleven_instances() {
        // A short budget: where the search does not fit, the answer written is
        // still the best of the search, the colorer and the linear scan.
        let dir = data_dir();
        let tmp = std::env::temp_dir().join(format!("tusk-dsa-eleven-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        for name in ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"] {
            let file = dir.join(format!("{name}.1048576.csv"));
            let p = load(&dir, &format!("{name}.1048576.csv"));
            let out = tmp.join(format!("{name}.out.csv"));
            let mut a = args(file, None, Some(out.clone()), Algo::Exact);
            a.budget_nodes = Some(20_000);
            let code = run(&a);
            let got = written_peak(&out);
            assert_eq!(code, if got <= p.capacity { 0 } else { 1 }, "{name}");
            let mut gws = tusk_core::dsa::GcaWorkspace::new();
            gws.reserve_for(&p, 0, 0);
            let mut g = vec![Placement::default(); p.len()];
            let colored = gws.solve(&p, &tusk_core::dsa::GcaOptions::default(), &mut g);
            let mut greedy = GreedyWorkspace::new();
            greedy.reserve(p.len());
            let by_size = greedy.place(&p, GreedyRule::BySize, &mut g);
            assert!(
                got <= colored.peak && got <= by_size,
                "{name}: {got} > colorer {} or greedy {by_size}",
                colored.peak
            );
        }
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}

/// The linear-scan portfolio on `p` with `capacity` bytes, configured by
/// `cfg`: its placement passes the independent validator and its reported
/// peak is the placement's.
fn portfolio(p: &Problem, capacity: u64, cfg: &dyn Fn(&mut BufferWorkspace)) -> BufferOutcome {
    let mut ws = BufferWorkspace::with_capacity(p.len());
    cfg(&mut ws);
    let mut off = vec![0u64; p.len()];
    let r = place_buffers(p.buffers(), capacity, &mut ws, &mut off).expect("placed");
    let out: Vec<Placement> = off
        .iter()
        .map(|&offset| Placement { offset, base: 0 })
        .collect();
    let mut v = Validator::with_capacity(p.len(), 4);
    assert_eq!(v.check(p, &out, u64::MAX).total, 0, "{:?}", v.findings());
    assert_eq!(peak(p, &out), r.peak);
    r
}

/// A perfect packing of `n` buffers (its lower bound is its optimum).
fn perfect(n: usize, seed: u64) -> Problem {
    let mut p = Problem::linear(0, n);
    let mut sol = Vec::new();
    perfect_packing(&PerfectPacking::new(n), seed, &mut p, &mut sol).expect("generated");
    p
}

#[test]
#[ignore = "quality survey, needs ../shared/data/dsa: cargo test -p tusk-shim --release --test dsa_files -- --ignored dsa_policy_survey --nocapture"]
fn dsa_policy_survey() {
    let dir = data_dir();
    let files: Vec<(&str, Problem)> = ["C", "G", "K"]
        .into_iter()
        .map(|n| (n, load(&dir, &format!("{n}.1048576.csv"))))
        .collect();
    let mut packings = Vec::new();
    for n in [100, 300, 1000] {
        for seed in 0..6u64 {
            packings.push(perfect(n, seed));
        }
    }
    let ratio = |p: &Problem, cfg: &dyn Fn(&mut BufferWorkspace)| -> f64 {
        let r = portfolio(p, 1 << 20, cfg);
        r.peak as f64 / r.lower_bound as f64
    };
    type Cfg = (&'static str, fn(&mut BufferWorkspace));
    let configs: [Cfg; 7] = [
        ("plain best fit, 1 scan", |w| {
            w.tighten_rounds = 0;
            w.policy = Policy {
                candidates: 1,
                lifetime_aware: false,
                outliving_first: false,
            };
        }),
        ("code 0 (closest death), 1 scan + 12 rescans", |w| {
            w.portfolio = &[0]
        }),
        ("code 3 (outliving first), 1 scan", |w| w.tighten_rounds = 0),
        ("code 3 + 12 rescans", |w| w.variants = 1),
        ("portfolio, 3 variants", |w| w.variants = 3),
        ("portfolio, 9 variants", |w| w.variants = 9),
        ("portfolio, 36 variants (default)", |_| {}),
    ];
    for (label, cfg) in configs {
        let mut line = String::new();
        let (mut f, mut p, mut held) = (0.0, 0.0, 0.0);
        for (name, bufs) in &files {
            let r = ratio(bufs, &cfg);
            f += r / 3.0;
            line += &format!(" {name}={r:.3}");
        }
        for (k, bufs) in packings.iter().enumerate() {
            let r = ratio(bufs, &cfg);
            if k % 6 < 3 {
                p += r / 9.0;
            } else {
                held += r / 9.0;
            }
        }
        println!("{label:<48} C/G/K mean {f:.3}{line} | perfect seeds 0-2 {p:.3}, 3-5 {held:.3}");
    }
    // Larger perfect packings, where the budget cuts the portfolio.
    for n in [3000, 10_000, 30_000] {
        let bufs = perfect(n, 0);
        let mut line = format!("perfect n={n} seed 0:");
        for (label, codes) in [("code 0", &[0u8][..]), ("portfolio", &[][..])] {
            let r = portfolio(&bufs, 1 << 20, &|w| w.portfolio = codes);
            line += &format!(
                " {label} {:.3} ({} variants, {} scans)",
                r.peak as f64 / r.lower_bound as f64,
                r.variants,
                r.rounds
            );
        }
        println!("{line}");
    }
}
