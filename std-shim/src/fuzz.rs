//! Fuzz checks (feature `fuzz`; always compiled for the shim's own tests).
//!
//! Each `check_*` function takes arbitrary bytes and panics exactly when it
//! finds a bug: a panic inside tusk, a broken round trip, an internal error,
//! a verifier finding or a dataflow mismatch on an allocated module. Input
//! that tusk refuses with a clean error is not a bug. The cargo-fuzz targets
//! in `targets/fuzz` are one-line wrappers around these functions, and the
//! smoke tests below run each of them over a few hundred deterministic
//! pseudo-random inputs (mutations of the seed corpus) and over every crash
//! input found so far, so that `cargo test` covers what the fuzzer found.

use arbitrary::{Arbitrary, Unstructured};
use tusk_core::dsa::{GreedyRule, GreedyWorkspace, Placement, Timeline, Validator};
use tusk_core::gen::module::{generate, GenParams};
use tusk_core::ir::{Module, Space};
use tusk_core::options::{Allocator, DmaAffinity, Rotation, OPTLEVELS};
use tusk_core::regalloc::{ColorConfig, RegAllocError, NO_COLOR};
use tusk_core::report::{ColoringError, LsaError};
use tusk_core::target::Generation;
use tusk_core::verify::{Finding, Verifier};
use tusk_core::{Checks, Clock, Options, PipelineError, Target, Workspace};

use crate::{color, csv, dimacs, info, json, text};

/// Largest module the pipeline target generates, in instructions: enough for
/// loop nests, spills and DMA rewrites, small enough for thousands of runs a
/// minute.
pub const MAX_FUZZ_INSTRUCTIONS: u16 = 240;

/// Largest DIMACS graph the DIMACS target also colors (parsing has no such
/// bound).
const MAX_COLOR_VERTICES: u32 = 4096;
/// Most edges of a graph the DIMACS target colors.
const MAX_COLOR_EDGES: usize = 1 << 16;

/// Text must round-trip exactly through the printer and the parser, and
/// through JSON; the structure check, the verifier and the analyses of
/// `tusk info` must not panic on any module the parser accepts.
pub fn check_text(data: &[u8]) {
    let m = match text::parse(data) {
        Ok(m) => m,
        Err(e) => {
            // The error's message must render (it names lines and values).
            let _ = e.to_string();
            return;
        }
    };
    check_module_round_trips(&m);
    check_module_analyses(&m);
}

/// A JSON document becomes a module or a clean error; an accepted module
/// round-trips through text and JSON.
pub fn check_json(data: &[u8]) {
    let m = match json::parse_json(data) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    check_module_round_trips(&m);
    check_module_analyses(&m);
}

/// A DIMACS file becomes a graph with in-range edges or a clean error; small
/// graphs are also colored (the colorer's result is checked against the
/// edge list by [`color::color_graph`]).
pub fn check_dimacs(data: &[u8]) {
    let g = match dimacs::parse(data) {
        Ok(g) => g,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    for &(u, v) in &g.edges {
        assert!(
            u < g.vertices && v < g.vertices,
            "edge ({u}, {v}) out of range for {} vertices",
            g.vertices
        );
    }
    if g.vertices > MAX_COLOR_VERTICES || g.edges.len() > MAX_COLOR_EDGES {
        return;
    }
    // K from the input, so the fuzzer explores both easy and hard K.
    let k = 1 + (data.len() % 16) as u16;
    for cfg in [ColorConfig::tuned(k), ColorConfig::textbook(k)] {
        match color::color_graph(&g, &cfg) {
            Ok(out) => {
                assert_eq!(out.colors.len(), g.vertices as usize);
                assert!(out.colors.iter().all(|&c| c == NO_COLOR || c < cfg.k));
            }
            Err(e) => assert!(
                !e.starts_with("internal error"),
                "colorer: {e} (K = {k}, {} vertices, {} edges)",
                g.vertices,
                g.edges.len()
            ),
        }
    }
}

/// Largest CSV table the CSV target also places and writes back.
const MAX_PLACE_BUFFERS: usize = 4096;

/// A MiniMalloc CSV becomes a buffer table or a clean error; a small table
/// is placed by the greedy allocator, the placement passes the independent
/// validator (when no pins may conflict), and the table written back with
/// the offsets reads back as the same buffers pinned at those offsets.
pub fn check_csv(data: &[u8]) {
    let mut table = match csv::parse(data) {
        Ok(t) => t,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let n = table.problem.len();
    assert_eq!(table.ids.len(), n, "one id per buffer");
    if n > MAX_PLACE_BUFFERS {
        return;
    }
    table.problem.capacity = u64::MAX;
    let problem = &table.problem;
    let _ = problem.lower_bound(&mut Timeline::with_capacity(n));
    let mut placements = vec![Placement::default(); n];
    let mut ws = GreedyWorkspace::new();
    ws.reserve_for(problem);
    // By size reads the occupancy tree (linear tables), best fit walks the
    // neighbours; the later placement is the one written back.
    for rule in [GreedyRule::BySize, GreedyRule::StartBestFit] {
        ws.place(problem, rule, &mut placements);
        if problem.buffers().iter().all(|b| b.pin.is_none()) {
            let mut v = Validator::with_capacity(n, 4);
            let r = v.check(problem, &placements, u64::MAX);
            assert!(
                r.total == 0,
                "{} placement of a parsed table is illegal: {:?}",
                rule.name(),
                v.findings().first()
            );
        }
    }
    let mut out = Vec::new();
    if let Err(e) = csv::write(&mut out, &table, &placements) {
        panic!("writing to memory failed: {e}");
    }
    let back = match csv::parse(&out) {
        Ok(t) => t,
        Err(e) => panic!(
            "the written table does not parse: {e}\n{}",
            String::from_utf8_lossy(&out)
        ),
    };
    assert_eq!(back.ids, table.ids, "ids change in a write/read round trip");
    assert_eq!(back.problem.len(), n);
    for ((a, b), p) in table
        .problem
        .buffers()
        .iter()
        .zip(back.problem.buffers())
        .zip(&placements)
    {
        assert_eq!(
            (a.lower, a.upper, a.size, a.align),
            (b.lower, b.upper, b.size, b.align),
            "a buffer changes in a write/read round trip"
        );
        assert_eq!(b.pin.map(|q| q.offset), Some(p.offset));
    }
}

/// The knobs of one pipeline case: a generated module (the generator's
/// knobs, each either kept from a preset or set by the fuzzer within the
/// generator's valid range) and the driver's options.
#[derive(Clone, Debug, Arbitrary)]
pub struct PipelineCase {
    /// Instruction count, taken modulo [`MAX_FUZZ_INSTRUCTIONS`] + 1.
    pub instructions: u16,
    /// The generator's seed.
    pub seed: u64,
    /// Base preset: default, DMA-heavy, tight or constructs (modulo 4).
    pub preset: u8,
    /// Target generation (modulo 3).
    pub generation: u8,
    /// Index into [`OPTLEVELS`].
    pub optlevel: u8,
    /// `--allocator` (modulo 4: default, coloring, lsa, exact).
    pub allocator: u8,
    /// `--smt-allocation`.
    pub smt_allocation: bool,
    /// `--loops-in-backend`.
    pub loops_in_backend: bool,
    /// `--gca-dma-optlevel` (modulo 4, minus 1).
    pub gca_dma_optlevel: u8,
    /// `--max-regs` (2 + value modulo 63), when given.
    pub max_regs: Option<u8>,
    /// Tile sizes: values below 128 keep the preset's size.
    pub tiles: [u8; 4],
    /// Tile-size and partition-class weights (kept when all zero).
    pub weights: [u8; 8],
    /// Percent knobs: values above 200 keep the preset's value.
    pub pct: [u8; 12],
    /// Shape knobs: loop depth, trips, units, chains, accumulators,
    /// residents, live scalars; values above 200 keep the preset's.
    pub shape: [u8; 9],
    /// The knobs of the constructs of real kernels: typed regions,
    /// conversions, loop terms, gathers, register offsets, DRAM partition
    /// steps, broadcasts, bias columns, scale columns, reductions,
    /// transposes, scans; values above 200 keep the preset's. Last, so that
    /// inputs written before it existed keep their meaning for the fields
    /// above (they run with these at 0).
    pub constructs: [u8; 12],
    /// `--rotation` (modulo 3: off, psum, all) and, bit 2,
    /// `--dma-affinity on`. Last, like `constructs`, so that older inputs
    /// keep their meaning (they run with both switches off).
    pub placement: u8,
    /// The driver's one-shot run (`tusk run`): each pass's storage
    /// released once spent, the result's name index freed after the
    /// passes, and the dataflow check's input given then
    /// ([`Checks::Deferred`]). Last, like the fields above.
    pub one_shot: bool,
    /// The dataflow check's walk limit at 0 executions, so that it samples
    /// every loop a pattern moves with (iterations 0, 1 and the last), as
    /// a run over the limit does. Last, like the fields above.
    pub sample_loops: bool,
}

impl PipelineCase {
    /// The generator's knobs, all within [`GenParams::validate`]'s ranges.
    pub fn params(&self) -> GenParams {
        let mut p = match self.preset % 4 {
            0 => GenParams::default(),
            1 => GenParams::dma_heavy(),
            2 => GenParams::tight(),
            _ => GenParams::constructs(),
        };
        p.instructions = (self.instructions % (MAX_FUZZ_INSTRUCTIONS + 1)) as usize;
        p.seed = self.seed;
        p.target = Target::preset(self.generation());
        for (b, &t) in p.tile_bytes.iter_mut().zip(&self.tiles) {
            if t >= 128 {
                *b = (t as u32 - 127) * 512;
            }
        }
        let (tw, pw) = self.weights.split_at(4);
        if tw.iter().any(|&w| w != 0) {
            p.tile_weights.copy_from_slice(tw);
        }
        if pw.iter().any(|&w| w != 0) {
            p.partition_weights.copy_from_slice(pw);
        }
        let keep = |v: u8, base: u8, modulus: u8| if v > 200 { base } else { v % modulus };
        let q = &self.pct;
        p.bf16_pct = keep(q[0], p.bf16_pct, 101);
        p.loop_pct = keep(q[1], p.loop_pct, 101);
        p.unknown_trip_pct = keep(q[2], p.unknown_trip_pct, 101);
        p.dma_pct = keep(q[3], p.dma_pct, 101);
        p.matmul_pct = keep(q[4], p.matmul_pct, 101);
        p.accumulate_pct = keep(q[5], p.accumulate_pct, 101);
        p.inplace_pct = keep(q[6], p.inplace_pct, 101);
        p.abutting_pct = keep(q[7], p.abutting_pct, 101);
        p.duplicate_pct = keep(q[8], p.duplicate_pct, 101);
        p.overbroad_pct = keep(q[9], p.overbroad_pct, 101);
        p.dead_save_pct = keep(q[10], p.dead_save_pct, 101);
        p.scalar_pct = keep(q[11], p.scalar_pct, 91);
        let s = &self.shape;
        p.max_loop_depth = keep(s[0], p.max_loop_depth, 4);
        p.trip_min = keep(s[1], p.trip_min.min(200) as u8, 8).max(1) as u32;
        p.trip_max = p.trip_min + keep(s[2], 15, 16) as u32;
        p.units_min = keep(s[3], p.units_min, 4).max(1);
        p.units_max = p.units_min + keep(s[4], 2, 4);
        p.chain_min = keep(s[5], p.chain_min, 4).max(1);
        p.chain_max = p.chain_min + keep(s[6], 3, 5);
        p.accumulators = keep(s[7], p.accumulators, 11).max(1);
        p.residents = keep(s[8], p.residents, 7);
        let c = &self.constructs;
        p.typed_pct = keep(c[0], p.typed_pct, 101);
        p.cast_pct = keep(c[1], p.cast_pct, 101);
        p.loop_term_pct = keep(c[2], p.loop_term_pct, 101);
        p.gather_pct = keep(c[3], p.gather_pct, 101);
        p.dyn_offset_pct = keep(c[4], p.dyn_offset_pct, 101);
        p.pstep_pct = keep(c[5], p.pstep_pct, 101);
        p.broadcast_pct = keep(c[6], p.broadcast_pct, 101);
        p.bias_pct = keep(c[7], p.bias_pct, 101);
        p.column_pct = keep(c[8], p.column_pct, 101);
        p.reduce_pct = keep(c[9], p.reduce_pct, 101);
        p.transpose_pct = keep(c[10], p.transpose_pct, 101);
        p.scan_pct = keep(c[11], p.scan_pct, 101);
        p
    }

    /// The target generation.
    pub fn generation(&self) -> Generation {
        match self.generation % 3 {
            0 => Generation::Trn1,
            1 => Generation::Trn2,
            _ => Generation::Trn3,
        }
    }

    /// The driver's options (not yet normalized).
    pub fn options(&self) -> Options {
        let allocator = match self.allocator % 4 {
            0 => Allocator::Default,
            1 => Allocator::Coloring,
            2 => Allocator::Lsa,
            _ => Allocator::Exact,
        };
        Options {
            optlevel: OPTLEVELS[self.optlevel as usize % OPTLEVELS.len()],
            allocator,
            smt_allocation: self.smt_allocation,
            loops_in_backend: self.loops_in_backend,
            vnc_count: 1,
            gca_dma_optlevel: (self.gca_dma_optlevel % 4) as i8 - 1,
            target: None,
            max_regs: self.max_regs.map(|r| 2 + (r % 63) as u16),
            rotation: match self.placement % 3 {
                0 => Rotation::Off,
                1 => Rotation::Psum,
                _ => Rotation::All,
            },
            dma_affinity: if self.placement & 4 != 0 {
                DmaAffinity::On
            } else {
                DmaAffinity::Off
            },
            dataflow_walk_limit: if self.sample_loops {
                0
            } else {
                Options::default().dataflow_walk_limit
            },
            ..Options::default()
        }
    }
}

/// A deterministic clock for the pipeline target: every reading advances
/// 20 ms, so the exact search's time budget ends after a bounded number of
/// nodes whatever the machine's speed, and runs are reproducible.
#[derive(Debug, Default)]
struct StepClock(u64);

impl Clock for StepClock {
    fn now_micros(&mut self) -> u64 {
        self.0 += 20_000;
        self.0
    }
}

/// True for the failures a legal module may meet: it does not fit the
/// target (memory or registers), the spill code exceeds its documented,
/// configurable limit (`Options::lsa_max_spills`,
/// `Options::reg_max_spill_temporaries`), a tensor cannot be placed at all, or (at
/// optlevel 7, which expects PSUM fixed by the SMT allocator and runs no
/// PSUM colorer) a PSUM location has no fixed address.
fn is_clean_failure(m: &Module, e: &PipelineError) -> bool {
    match e {
        PipelineError::Verify {
            pass: "check_in_place",
            first: Finding::Unplaced { mem, .. },
            ..
        } => m.mems().space[*mem] == Space::Psum,
        // Optlevel 7 on a module with PSUM tiles: it has no PSUM allocator.
        PipelineError::UnplacedPsum { first, .. } => m.mems().space[*first] == Space::Psum,
        PipelineError::Options(_) | PipelineError::BelowFloor { .. } => true,
        PipelineError::Lsa(e) => matches!(
            **e,
            LsaError::AllocationFailed(_)
                | LsaError::Manager { .. }
                | LsaError::SpillHeadroom { .. }
        ),
        PipelineError::Coloring(e) => matches!(
            e,
            ColoringError::DoesNotFit { .. } | ColoringError::Unplaceable { .. }
        ),
        PipelineError::Reg(e) => matches!(
            e,
            RegAllocError::RegisterPressure { .. } | RegAllocError::SpillHeadroom { .. }
        ),
        _ => false,
    }
}

/// The whole pipeline over a generated module: the generated module
/// round-trips through text, the pipeline either succeeds — and then the
/// placement verifier and the dataflow checker (run by the pipeline) found
/// nothing and the allocated module round-trips through text — or fails
/// with a clean out-of-room error.
pub fn check_pipeline(data: &[u8]) {
    let Ok(case) = PipelineCase::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let _ = run_case(&case);
}

/// How a pipeline case ended (when it did not panic).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CaseOutcome {
    /// Allocated, verified and dataflow-checked.
    Allocated,
    /// A clean failure (see `is_clean_failure`).
    Refused,
}

/// Runs one pipeline case (see [`check_pipeline`]).
pub fn run_case(case: &PipelineCase) -> CaseOutcome {
    let params = case.params();
    let mut m = match generate(&params) {
        Ok(m) => m,
        Err(e) => panic!("the generator refused valid knobs: {e}\n{params:?}"),
    };
    let opts = case.options();
    if let Some(r) = opts.max_regs {
        if let Err(e) = m.target.set("max-regs", r as u64) {
            panic!("--max-regs {r} in range is refused: {e}");
        }
    }
    check_module_round_trips(&m);
    let original = m.clone();
    let mut ws = Workspace::new();
    let mut clock = StepClock::default();
    let result = if case.one_shot {
        ws.set_release_spent(true);
        match ws
            .reserve(&mut m, &opts, Checks::Deferred)
            .run_passes(&mut clock)
        {
            Ok(passed) => {
                m.drop_name_index();
                let mut steps = ws.end_steps(passed, &mut clock);
                steps.give_input(&original);
                steps.run_in_order(&m, &mut clock)
            }
            Err(e) => Err(e),
        }
    } else {
        ws.reserve(&mut m, &opts, Checks::Full { input: &original });
        tusk_core::run(
            &mut m,
            &opts,
            &mut ws,
            &mut clock,
            Checks::Full { input: &original },
        )
    };
    match result {
        Ok(report) => {
            assert!(report.verified());
            // The report says whether the check sampled, and it did exactly
            // when the full walk was over the limit.
            let d = report.dataflow.expect("the dataflow check ran");
            assert_eq!(d.sampled, d.walk > d.walk_limit, "{d:?}");
            check_module_round_trips(&m);
            CaseOutcome::Allocated
        }
        Err(e) => {
            let msg = e.display(&m).to_string();
            assert!(
                is_clean_failure(&m, &e),
                "pipeline failed: {msg}\n{opts:?}\n{params:?}"
            );
            CaseOutcome::Refused
        }
    }
}

/// Print → parse → print is the identity, and so is text → JSON → text.
fn check_module_round_trips(m: &Module) {
    let t1 = text::print(m);
    let m2 = match text::parse(t1.as_bytes()) {
        Ok(m2) => m2,
        Err(e) => panic!("printed text does not parse: {e}\n{t1}"),
    };
    let t2 = text::print(&m2);
    assert!(t1 == t2, "print/parse round trip differs:\n{t1}\n---\n{t2}");
    let j = json::to_json_string(m);
    let m3 = match json::parse_json(j.as_bytes()) {
        Ok(m3) => m3,
        Err(e) => panic!("printed JSON does not parse: {e}\n{j}"),
    };
    let t3 = text::print(&m3);
    assert!(t1 == t3, "JSON round trip differs:\n{t1}\n---\n{t3}");
}

/// The checks `tusk check` and `tusk info` run must not panic on any module
/// the readers accept.
fn check_module_analyses(m: &Module) {
    if m.check_structure().is_err() {
        return;
    }
    let mut v = Verifier::for_module(m);
    let r = v.verify(m);
    for f in r.findings {
        let _ = f.display(m).to_string();
    }
    let _ = info::info_text(m);
}

#[cfg(test)]
mod tests {
    //! Smoke tests: each check over its seed corpus, a few hundred seeded
    //! mutations of it, and every crash input found so far. Deterministic;
    //! the mutation rounds are sized to a couple of seconds in debug.

    use super::*;
    use std::path::{Path, PathBuf};
    use tusk_core::gen::module::Census;
    use tusk_core::gen::rng::Rng;

    /// `targets/fuzz/<dir>/<target>` of the workspace.
    fn fuzz_dir(dir: &str, target: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../targets/fuzz")
            .join(dir)
            .join(target)
    }

    /// The files of a corpus or regression folder, sorted by name (empty
    /// when the folder is absent).
    fn inputs(dir: &str, target: &str) -> Vec<(String, Vec<u8>)> {
        let Ok(rd) = std::fs::read_dir(fuzz_dir(dir, target)) else {
            return Vec::new();
        };
        let mut v: Vec<(String, Vec<u8>)> = rd
            .filter_map(Result::ok)
            .filter(|e| e.path().is_file())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                std::fs::read(e.path()).ok().map(|b| (name, b))
            })
            .collect();
        v.sort();
        v
    }

    /// A seeded mutation of `base`: byte flips, insertions, deletions,
    /// duplicated slices and splices of interesting tokens.
    fn mutate(rng: &mut Rng, base: &[u8], tokens: &[&[u8]]) -> Vec<u8> {
        let mut v = base.to_vec();
        let rounds = 1 + rng.below(4);
        for _ in 0..rounds {
            let len = v.len() as u64;
            let at = rng.below(len + 1) as usize;
            match rng.below(6) {
                0 if at < v.len() => v[at] = rng.next_u64() as u8,
                1 => v.insert(at, rng.next_u64() as u8),
                2 if at < v.len() => {
                    let end = (at + 1 + rng.below(16) as usize).min(v.len());
                    v.drain(at..end);
                }
                3 if at < v.len() => {
                    let end = (at + 1 + rng.below(32) as usize).min(v.len());
                    let piece = v[at..end].to_vec();
                    let to = rng.below(v.len() as u64 + 1) as usize;
                    v.splice(to..to, piece);
                }
                4 if !tokens.is_empty() => {
                    let t = tokens[rng.below(tokens.len() as u64) as usize];
                    v.splice(at..at, t.iter().copied());
                }
                _ if at < v.len() => {
                    // A digit run: numbers at their limits.
                    v.splice(at..at, b"4294967296".iter().copied());
                }
                _ => v.push(b'\n'),
            }
        }
        v
    }

    /// Runs `check` over the corpus, `rounds` mutations and the regressions.
    fn smoke(target: &str, check: fn(&[u8]), rounds: usize, tokens: &[&[u8]]) {
        smoke_with(target, check, check, rounds, tokens);
    }

    /// [`smoke`] with a cheaper `check` for the corpus and its mutations;
    /// the regressions go through `regress`, the fuzz target's own check.
    fn smoke_with(
        target: &str,
        check: fn(&[u8]),
        regress: fn(&[u8]),
        rounds: usize,
        tokens: &[&[u8]],
    ) {
        let corpus = inputs("corpus", target);
        assert!(
            !corpus.is_empty(),
            "the seed corpus targets/fuzz/corpus/{target} is missing"
        );
        for (_, b) in &corpus {
            check(b);
        }
        let mut rng = Rng::new(0x7u64 ^ target.len() as u64);
        for _ in 0..rounds {
            let (_, base) = &corpus[rng.below(corpus.len() as u64) as usize];
            check(&mutate(&mut rng, base, tokens));
        }
        for (name, b) in inputs("regressions", target) {
            eprintln!("regression {target}/{name}");
            regress(&b);
        }
    }

    const TEXT_TOKENS: &[&[u8]] = &[
        b"loop ? {\n",
        b"loop 3 {\n",
        b"loop iv0 in 4 {\n",
        b" +512*iv0",
        b" -64*iv0",
        b" +$one*4 in 0:4096",
        b" step 0",
        b" step 4",
        b" bf16",
        b" fp32",
        b" fp8e4m3",
        b"tensor_reduce add ",
        b"transpose ",
        b"tensor_scan mul_add ",
        b"}\n",
        b"func f {\n",
        b"block b:\n",
        b"[0:128, 0, 4, [1, 512]]",
        b" inplace",
        b" @ 0",
        b" @ 4096",
        b"%",
        b"$",
        b"psum",
        b"sb",
        b"dram",
        b"18446744073709551616",
        b"\xff",
    ];

    #[test]
    fn smoke_text() {
        smoke("text", check_text, 400, TEXT_TOKENS);
    }

    #[test]
    fn smoke_json() {
        smoke(
            "json",
            check_json,
            400,
            &[
                b"{", b"}", b"[", b"]", b",", b"\"", b":", b"null", b"-1", b"1e99",
            ],
        );
    }

    #[test]
    fn smoke_dimacs() {
        smoke(
            "dimacs",
            check_dimacs,
            400,
            &[b"e 1 2\n", b"p edge 5 4\n", b"c x\n", b"e 0 0\n", b"\r\n"],
        );
    }

    #[test]
    fn smoke_csv() {
        smoke(
            "csv",
            check_csv,
            400,
            &[
                b",",
                b"\n",
                b"\r\n",
                b",,",
                b"0",
                b"-1",
                b"18446744073709551615",
                b" ",
            ],
        );
    }

    #[test]
    fn smoke_pipeline() {
        // Debug builds are slow: the corpus and its mutations run with at
        // most 60 instructions; regressions replay exactly.
        fn small(data: &[u8]) {
            if let Ok(mut case) = PipelineCase::arbitrary_take_rest(Unstructured::new(data)) {
                case.instructions %= 61;
                let _ = run_case(&case);
            }
        }
        smoke_with("pipeline", small, check_pipeline, 40, &[]);
        // Plus seeded random cases, each optlevel and preset.
        let mut rng = Rng::new(11);
        let mut allocated = 0;
        let mut census = Census::default();
        for k in 0..40u64 {
            let mut bytes = [0u8; 96];
            for b in bytes.iter_mut() {
                *b = rng.next_u64() as u8;
            }
            let mut case = match PipelineCase::arbitrary(&mut Unstructured::new(&bytes)) {
                Ok(c) => c,
                Err(e) => panic!("96 bytes must make a case: {e}"),
            };
            case.optlevel = k as u8;
            case.preset = (k / 7) as u8;
            // Every setting of the two placement switches.
            case.placement = (k % 3) as u8 | (((k / 3) % 2) as u8) << 2;
            // The driver's one-shot run and the reusable workspace's.
            case.one_shot = k % 2 == 1;
            // Loops sampled in some cases of both kinds of run.
            case.sample_loops = (k / 2) % 2 == 1;
            case.instructions %= 100;
            if let Ok(m) = generate(&case.params()) {
                census.add(&Census::of(&m));
            }
            if run_case(&case) == CaseOutcome::Allocated {
                allocated += 1;
            }
        }
        // The cases must exercise the allocators, not only their refusals,
        // and reach every construct of the IR.
        assert!(allocated >= 10, "only {allocated} of 40 cases allocated");
        let missing: Vec<&str> = census.missing().collect();
        assert!(missing.is_empty(), "no case has {missing:?}");
    }

    /// Found by the pipeline smoke test: at optlevel 7 the in-place check
    /// ran before the register colorer and reported every register as
    /// having no lane. A module without PSUM tensors must allocate.
    #[test]
    fn regression_opt7_in_place_check_skips_uncolored_registers() {
        for seed in 0..6 {
            let case = PipelineCase {
                instructions: 40 + seed as u16 * 20,
                seed,
                preset: 0,
                generation: seed as u8,
                optlevel: 0,
                allocator: 0,
                smt_allocation: true,
                loops_in_backend: false,
                gca_dma_optlevel: 2,
                max_regs: None,
                tiles: [0; 4],
                weights: [0; 8],
                // No matmul, no accumulation: no PSUM tensor to be fixed.
                pct: [255, 255, 255, 255, 0, 0, 255, 255, 255, 255, 255, 90],
                shape: [255; 9],
                // No transpose either (it writes PSUM).
                constructs: [255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 0, 255],
                placement: 0,
                one_shot: seed % 2 == 1,
                sample_loops: seed % 3 == 1,
            };
            assert_eq!(run_case(&case), CaseOutcome::Allocated, "seed {seed}");
        }
    }

    /// Found by a run over random pipeline cases: the linear scan spilled a
    /// tile that a later step reads as a partition broadcast (`[p0:128 step
    /// 0, …]`) into a copy of the one partition the read touches, and
    /// re-pointed the 128-partition read to it: the allocated module
    /// printed a pattern its own reader refuses.
    #[test]
    fn regression_lsa_copy_holds_the_partitions_a_broadcast_names() {
        let case = PipelineCase {
            instructions: 34143,
            seed: 7131209360239118303,
            preset: 0,
            generation: 231,
            optlevel: 60,
            allocator: 172,
            smt_allocation: false,
            loops_in_backend: true,
            gca_dma_optlevel: 38,
            max_regs: Some(232),
            tiles: [66, 199, 123, 41],
            weights: [174, 244, 249, 15, 155, 189, 198, 83],
            pct: [1, 174, 190, 17, 144, 135, 41, 65, 59, 231, 110, 146],
            shape: [93, 19, 90, 154, 214, 249, 140, 101, 37],
            constructs: [106, 54, 223, 71, 57, 253, 168, 4, 216, 234, 225, 207],
            placement: 0,
            one_shot: false,
            sample_loops: false,
        };
        assert_eq!(run_case(&case), CaseOutcome::Allocated);
    }

    #[test]
    fn clean_failures_are_not_crashes() {
        // A tight module on few registers fails cleanly or succeeds; both
        // are fine, neither panics.
        let mut rng = Rng::new(3);
        let mut bytes = [0u8; 96];
        for b in bytes.iter_mut() {
            *b = rng.next_u64() as u8;
        }
        let mut case = match PipelineCase::arbitrary(&mut Unstructured::new(&bytes)) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        case.preset = 2;
        case.max_regs = Some(0);
        case.instructions = 200;
        let _ = run_case(&case);
    }
}
