//! `tusk regalloc FILE|DIR -k K [--json] [-o OUT] [--no-check]`: the CFG
//! register colorer on functions in the `regalloc-vregs-only-v1` JSON
//! format (../shared/data/regalloc/README.md; docs/REGALLOC.md), each
//! output checked by the independent symbolic checker unless `--no-check`.
//!
//! Exit codes: 0 every function allocated (and checked); 1 some function
//! could not be allocated or its output was rejected by the checker (no
//! `-o` file is written); 2 a malformed file or bad options (nothing is
//! written); 3 I/O error. `-o -` writes the allocations to standard output
//! and the summary to standard error.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Deserialize;

use crate::console::{self, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_IO, EXIT_OK};
use serde_json::{json, Value};
use tusk_core::regalloc::{
    validate, Block, CfgAllocator, CfgChecker, CfgFunction, CfgInst, CfgStats, EditPoint,
    FunctionBuf, Location, TiedPair, VReg,
};

/// The format tag of an input function.
pub const FORMAT: &str = "regalloc-vregs-only-v1";

/// Arguments of `tusk regalloc`.
#[derive(clap::Args, Debug, Clone)]
pub struct RegallocArgs {
    /// A function file, or a directory of `*.json` function files.
    pub input: PathBuf,
    /// Registers available (all interchangeable: `0..K`).
    #[arg(short = 'k', long = "registers", visible_alias = "k")]
    pub k: u16,
    /// Print one JSON object with the totals and `per_function` instead of
    /// the text summary.
    #[arg(long)]
    pub json: bool,
    /// Write the allocations (operand and parameter locations, edits) as
    /// JSON to this file (atomically, only when every function succeeded).
    #[arg(short = 'o', long = "output", visible_alias = "out")]
    pub out: Option<PathBuf>,
    /// Skip the symbolic checker (the `checked` count is then 0).
    #[arg(long)]
    pub no_check: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionJson {
    format: String,
    #[serde(default)]
    #[allow(dead_code)]
    source: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    orig_insts: Option<u64>,
    num_vregs: u64,
    #[serde(default)]
    #[allow(dead_code)]
    orig_vreg: Option<Vec<Option<u64>>>,
    entry: u64,
    blocks: Vec<BlockJson>,
    insts: Vec<InstJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockJson {
    insts: [u64; 2],
    succs: Vec<u64>,
    params: Vec<u64>,
    args: Vec<Vec<u64>>,
    depth: u64,
    #[serde(default)]
    #[allow(dead_code)]
    orig: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstJson {
    uses: Vec<u64>,
    defs: Vec<u64>,
    #[serde(default)]
    tied: Vec<[u64; 2]>,
    #[serde(default, rename = "move")]
    is_move: bool,
    #[serde(default)]
    #[allow(dead_code)]
    orig: Option<u64>,
}

/// Largest index accepted from a file (the core's limit).
const MAX_INDEX: u64 = tusk_core::regalloc::MAX_ITEMS as u64;

fn index(x: u64, what: &str) -> Result<u32, String> {
    if x > MAX_INDEX {
        return Err(format!("{what} {x} is out of range (at most {MAX_INDEX})"));
    }
    Ok(x as u32)
}

fn vregs(xs: &[u64], what: &str) -> Result<Vec<VReg>, String> {
    xs.iter().map(|&x| index(x, what).map(VReg)).collect()
}

/// Reads one function: the JSON shape (with line:column), then the
/// function's structure through the core's validation. Errors name the
/// block, instruction and vreg by their indices in the file.
pub fn parse_function(bytes: &[u8]) -> Result<FunctionBuf, String> {
    let j: FunctionJson =
        serde_json::from_slice(bytes).map_err(|e| format!("{}:{}: {e}", e.line(), e.column()))?;
    if j.format != FORMAT {
        return Err(format!(
            "format is \"{}\"; this reader takes \"{FORMAT}\"",
            j.format
        ));
    }
    let mut f = FunctionBuf::new();
    f.num_vregs = index(j.num_vregs, "num_vregs")?;
    f.entry = Block(index(j.entry, "entry block")?);
    for (n, i) in j.insts.iter().enumerate() {
        let at = |what: &str| format!("instruction {n}: {what}");
        let uses = vregs(&i.uses, "vreg").map_err(|e| at(&e))?;
        let defs = vregs(&i.defs, "vreg").map_err(|e| at(&e))?;
        let mut tied = Vec::with_capacity(i.tied.len());
        for &[d, u] in &i.tied {
            if d > u16::MAX as u64 || u > u16::MAX as u64 {
                return Err(at(&format!("tied pair [{d}, {u}] is out of range")));
            }
            tied.push(TiedPair {
                def: d as u16,
                use_: u as u16,
            });
        }
        f.push_inst(&uses, &defs, &tied, i.is_move);
    }
    for (n, b) in j.blocks.iter().enumerate() {
        let at = |what: &str| format!("block {n}: {what}");
        if b.args.len() != b.succs.len() {
            return Err(at(&format!(
                "{} successors but {} argument lists (one per successor)",
                b.succs.len(),
                b.args.len()
            )));
        }
        let range = (
            index(b.insts[0], "instruction").map_err(|e| at(&e))?,
            index(b.insts[1], "instruction").map_err(|e| at(&e))?,
        );
        if b.depth > 30 {
            return Err(at(&format!(
                "loop depth {} is out of range (at most 30)",
                b.depth
            )));
        }
        let params = vregs(&b.params, "vreg").map_err(|e| at(&e))?;
        let mut succ_args = Vec::with_capacity(b.succs.len());
        for (s, a) in b.succs.iter().zip(&b.args) {
            let s = Block(index(*s, "successor block").map_err(|e| at(&e))?);
            succ_args.push((s, vregs(a, "vreg").map_err(|e| at(&e))?));
        }
        let succs: Vec<(Block, &[VReg])> =
            succ_args.iter().map(|(s, a)| (*s, a.as_slice())).collect();
        f.push_block(range, b.depth as u32, &params, &succs);
    }
    f.finish();
    validate(&f).map_err(|e| e.to_string())?;
    // Dominance too (a read reachable without its definition), so that
    // every malformed function is refused here, before any allocation.
    CfgAllocator::new()
        .check_function(&f)
        .map_err(|e| e.to_string())?;
    Ok(f)
}

/// The outcome of one function.
#[derive(Clone, Debug)]
pub struct FunctionOutcome {
    /// The file.
    pub file: PathBuf,
    /// The allocation's figures (default when it failed).
    pub stats: CfgStats,
    /// Blocks and vregs of the function.
    pub blocks: u32,
    /// Vregs of the function.
    pub vregs: u32,
    /// Microseconds of allocation (parsing and checking excluded).
    pub micros: u64,
    /// True when the checker accepted the output.
    pub checked: bool,
    /// Why the allocation failed or was rejected.
    pub error: Option<String>,
    /// The allocation as JSON (only when `-o` is given and it succeeded).
    pub output: Option<Value>,
}

/// Allocates `f` with `k` registers; checks it unless `no_check`.
pub fn allocate_function(
    file: &Path,
    f: &FunctionBuf,
    k: u16,
    no_check: bool,
    keep_output: bool,
    alloc: &mut CfgAllocator,
    checker: &mut CfgChecker,
) -> FunctionOutcome {
    let mut o = FunctionOutcome {
        file: file.to_path_buf(),
        stats: CfgStats::default(),
        blocks: f.num_blocks() as u32,
        vregs: f.num_vregs() as u32,
        micros: 0,
        checked: false,
        error: None,
        output: None,
    };
    let t0 = Instant::now();
    let r = alloc.allocate_growing(f, k);
    o.micros = t0.elapsed().as_micros() as u64;
    let a = match r {
        Ok(a) => a,
        Err(e) => {
            o.error = Some(e.to_string());
            return o;
        }
    };
    o.stats = a.stats;
    if !no_check {
        match checker.check(f, a) {
            Ok(()) => o.checked = true,
            Err(e) => {
                o.error = Some(format!("the checker rejected the allocation: {e}"));
                return o;
            }
        }
    }
    if keep_output {
        o.output = Some(allocation_json(file, f, a));
    }
    o
}

fn loc(l: Location) -> String {
    l.to_string()
}

/// The allocation of `f` as JSON (docs/REGALLOC.md).
fn allocation_json(file: &Path, f: &FunctionBuf, a: &tusk_core::regalloc::CfgAllocation) -> Value {
    let operands: Vec<Value> = (0..f.num_insts())
        .map(|i| {
            let ls: Vec<String> = a
                .operand_locations(CfgInst(i as u32))
                .iter()
                .map(|&l| loc(l))
                .collect();
            json!(ls)
        })
        .collect();
    let params: Vec<Value> = (0..f.num_blocks())
        .map(|b| {
            let n = f.params(Block(b as u32)).len();
            let ls: Vec<String> = (0..n)
                .filter_map(|j| a.param_location(Block(b as u32), j))
                .map(loc)
                .collect();
            json!(ls)
        })
        .collect();
    let edits: Vec<Value> = a
        .edits()
        .iter()
        .map(|e| {
            let mut v = match e.point {
                EditPoint::Before(i) => json!({"at": "before", "inst": i.0}),
                EditPoint::After(i) => json!({"at": "after", "inst": i.0}),
                EditPoint::Edge { from, succ } => {
                    json!({"at": "edge", "block": from.0, "succ": succ})
                }
            };
            v["from"] = json!(loc(e.from));
            v["to"] = json!(loc(e.to));
            v["lanes"] = json!(e.lanes);
            v
        })
        .collect();
    json!({
        "file": file.display().to_string(),
        "k": a.k,
        "slot_lanes": a.slot_lanes,
        "operands": operands,
        "params": params,
        "edits": edits,
    })
}

/// The `*.json` files of `input` (itself when a file), sorted by name.
pub fn input_files(input: &Path) -> Result<Vec<PathBuf>, String> {
    if !input.is_dir() {
        return Ok(vec![input.to_path_buf()]);
    }
    let rd = std::fs::read_dir(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let mut files: Vec<PathBuf> = Vec::new();
    for ent in rd {
        let p = ent.map_err(|e| format!("{}: {e}", input.display()))?.path();
        if p.is_file() && p.extension().is_some_and(|e| e == "json") {
            files.push(p);
        }
    }
    files.sort();
    Ok(files)
}

/// The totals and per-function figures as one JSON object.
pub fn report_json(k: u16, outcomes: &[FunctionOutcome]) -> Value {
    let mut per = Vec::with_capacity(outcomes.len());
    let (mut ins, mut sp, mut rl, mut mi, mut mk, mut us) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut wc = 0.0f64;
    let (mut failed, mut checked) = (0u64, 0u64);
    for o in outcomes {
        let s = &o.stats;
        ins += s.instructions as u64;
        sp += s.spills as u64;
        rl += s.reloads as u64;
        mi += s.moves_inserted as u64;
        mk += s.moves_kept as u64;
        wc += s.weighted_cost;
        us += o.micros;
        failed += o.error.is_some() as u64;
        checked += o.checked as u64;
        per.push(json!({
            "file": o.file.display().to_string(),
            "k": k,
            "instructions": s.instructions,
            "blocks": o.blocks,
            "vregs": o.vregs,
            "max_live": s.max_live,
            "rounds": s.rounds,
            "spilled_values": s.spilled,
            "spills": s.spills,
            "reloads": s.reloads,
            "moves_inserted": s.moves_inserted,
            "moves_kept": s.moves_kept,
            "weighted_cost": s.weighted_cost,
            "micros": o.micros,
            "checked": o.checked,
            "error": o.error,
        }));
    }
    json!({
        "functions": outcomes.len(),
        "failed": failed,
        "checked": checked,
        "instructions": ins,
        "spills": sp,
        "reloads": rl,
        "moves_inserted": mi,
        "moves_kept": mk,
        "weighted_cost": wc,
        "micros": us,
        "per_function": per,
    })
}

/// Runs `tusk regalloc`; returns the exit code (see the module doc).
pub fn run(args: &RegallocArgs) -> u8 {
    let max_k = tusk_core::regalloc::MAX_K;
    if args.k == 0 || args.k > max_k {
        console::error(format_args!("-k {} is out of range 1..={max_k}", args.k));
        return EXIT_BAD_INPUT;
    }
    let files = match input_files(&args.input) {
        Ok(f) => f,
        Err(e) => {
            console::error(e);
            return EXIT_IO;
        }
    };
    if files.is_empty() {
        console::error(format_args!(
            "{} has no *.json function files",
            args.input.display()
        ));
        return EXIT_BAD_INPUT;
    }
    if let Some(o) = &args.out {
        for f in &files {
            if let Err(msg) = crate::io::check_outputs(Some(f), &[("-o", o)]) {
                console::error(msg);
                return EXIT_BAD_INPUT;
            }
        }
    }
    // Parse everything first: a malformed file stops the run before any
    // output.
    let mut funcs = Vec::with_capacity(files.len());
    let mut bad = false;
    for file in &files {
        let bytes = match crate::io::read_limited(file, crate::text::MAX_TEXT_BYTES) {
            Ok(b) => b,
            Err(e) => {
                let code = e.report(EXIT_OK);
                if code == EXIT_BAD_INPUT {
                    bad = true;
                    continue;
                }
                return code;
            }
        };
        match parse_function(&bytes) {
            Ok(f) => funcs.push(f),
            Err(e) => {
                console::eprint(&format!("{}: {e}\n", file.display()));
                bad = true;
            }
        }
    }
    if bad {
        return EXIT_BAD_INPUT;
    }
    let mut alloc = CfgAllocator::new();
    let mut checker = CfgChecker::new();
    let outcomes: Vec<FunctionOutcome> = files
        .iter()
        .zip(&funcs)
        .map(|(file, f)| {
            allocate_function(
                file,
                f,
                args.k,
                args.no_check,
                args.out.is_some(),
                &mut alloc,
                &mut checker,
            )
        })
        .collect();
    let failed = outcomes.iter().filter(|o| o.error.is_some()).count();
    let code = if failed > 0 { EXIT_FAILED } else { EXIT_OK };
    let report = report_json(args.k, &outcomes);
    let mut text = String::new();
    if args.json {
        text.push_str(&format!("{report}\n"));
    } else {
        for o in &outcomes {
            let s = &o.stats;
            match &o.error {
                Some(e) => text.push_str(&format!("{}: failed: {e}\n", o.file.display())),
                None => text.push_str(&format!(
                    "{}: {} instructions, MaxLive {}, K = {}: spills {}, reloads {}, moves inserted \
                     {}, moves kept {}, weighted cost {}, {} µs{}\n",
                    o.file.display(),
                    s.instructions,
                    s.max_live,
                    args.k,
                    s.spills,
                    s.reloads,
                    s.moves_inserted,
                    s.moves_kept,
                    s.weighted_cost,
                    o.micros,
                    if o.checked { ", checked" } else { "" }
                )),
            }
        }
        text.push_str(&format!(
            "total: {} functions, {} failed, {} checked, {} instructions, spills {}, reloads {}, \
             moves inserted {}, moves kept {}, weighted cost {}, {} µs\n",
            outcomes.len(),
            failed,
            report["checked"],
            report["instructions"],
            report["spills"],
            report["reloads"],
            report["moves_inserted"],
            report["moves_kept"],
            report["weighted_cost"],
            report["micros"]
        ));
    }
    for o in &outcomes {
        if let Some(e) = &o.error {
            console::eprint(&format!("{}: {e}\n", o.file.display()));
        }
    }
    // Files before standard output (console's rule); nothing when a
    // function failed.
    if let (Some(out), 0) = (&args.out, failed) {
        let all: Vec<Value> = outcomes.iter().filter_map(|o| o.output.clone()).collect();
        let doc = json!({"format": "tusk-regalloc-output-v1", "k": args.k, "functions": all});
        if out.as_os_str() == "-" {
            // The allocations own standard output; the summary goes to
            // standard error.
            console::eprint(&text);
            return console::print_and_finish(code, &format!("{doc}\n"));
        }
        if let Err(e) = crate::io::write_atomic(out, doc.to_string().as_bytes()) {
            return e.report(code);
        }
    }
    console::print_and_finish(code, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"format":"regalloc-vregs-only-v1","num_vregs":4,"entry":0,
      "blocks":[{"insts":[0,2],"succs":[1],"params":[],"args":[[0]],"depth":0},
                {"insts":[2,4],"succs":[],"params":[1],"args":[],"depth":0}],
      "insts":[{"uses":[],"defs":[0]},{"uses":[],"defs":[]},
               {"uses":[1],"defs":[2],"move":true},{"uses":[2],"defs":[]}]}"#;

    fn err(text: &str) -> String {
        parse_function(text.as_bytes()).unwrap_err()
    }

    #[test]
    fn reads_the_format_and_allocates() {
        let f = parse_function(GOOD.as_bytes()).unwrap();
        assert_eq!((f.num_blocks(), f.num_insts(), f.num_vregs()), (2, 4, 4));
        let mut a = CfgAllocator::new();
        let mut c = CfgChecker::new();
        let o = allocate_function(Path::new("good.json"), &f, 2, false, true, &mut a, &mut c);
        assert!(o.checked && o.error.is_none(), "{:?}", o.error);
        assert_eq!(o.stats.moves_kept + o.stats.moves_inserted, 0);
    }

    #[test]
    fn the_json_report_has_the_named_totals() {
        let f = parse_function(GOOD.as_bytes()).unwrap();
        let mut a = CfgAllocator::new();
        let mut c = CfgChecker::new();
        let o = allocate_function(Path::new("good.json"), &f, 2, false, false, &mut a, &mut c);
        let v = report_json(2, &[o.clone(), o]);
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "checked",
                "failed",
                "functions",
                "instructions",
                "micros",
                "moves_inserted",
                "moves_kept",
                "per_function",
                "reloads",
                "spills",
                "weighted_cost"
            ]
        );
        assert_eq!(v["functions"], 2);
        assert_eq!(v["checked"], 2);
        assert_eq!(v["instructions"], 8);
        assert_eq!(v["per_function"].as_array().unwrap().len(), 2);
        assert_eq!(v["per_function"][0]["max_live"], 1);
        assert_eq!(v["per_function"][0]["k"], 2);
    }

    #[test]
    fn malformed_functions_get_clear_errors() {
        // Unknown block.
        let e = err(&GOOD.replace(r#""succs":[1]"#, r#""succs":[9]"#));
        assert!(e.contains("block 0: successor 9 is not a block"), "{e}");
        // Argument count.
        let e = err(&GOOD.replace(r#""args":[[0]]"#, r#""args":[[0, 0]]"#));
        assert!(
            e.contains("passes 2 values but block 1 has 1 parameters"),
            "{e}"
        );
        // A vreg defined twice.
        let e = err(&GOOD.replace(r#"{"uses":[],"defs":[]}"#, r#"{"uses":[],"defs":[0]}"#));
        assert!(e.contains("vreg 0 is defined twice"), "{e}");
        // A critical edge: block 0 gets a second successor into block 1's
        // join... build one from scratch.
        let crit = r#"{"format":"regalloc-vregs-only-v1","num_vregs":0,"entry":0,
          "blocks":[{"insts":[0,1],"succs":[1,2],"params":[],"args":[[],[]],"depth":0},
                    {"insts":[1,2],"succs":[2],"params":[],"args":[[]],"depth":0},
                    {"insts":[2,3],"succs":[],"params":[],"args":[],"depth":0}],
          "insts":[{"uses":[],"defs":[]},{"uses":[],"defs":[]},{"uses":[],"defs":[]}]}"#;
        let e = err(crit);
        assert!(e.contains("critical edge from block 0"), "{e}");
        // Successor and argument lists of different lengths.
        let e = err(&GOOD.replace(r#""args":[[0]]"#, r#""args":[]"#));
        assert!(
            e.contains("block 0: 1 successors but 0 argument lists"),
            "{e}"
        );
        // JSON errors carry line:column; unknown fields and formats are named.
        let e = err(&GOOD.replace(r#""depth":0}],"#, r#""depth":-1}],"#));
        assert!(e.starts_with("3:"), "{e}");
        let e = err(&GOOD.replace(r#""move":true"#, r#""mvoe":true"#));
        assert!(e.contains("unknown field `mvoe`"), "{e}");
        let e = err(&GOOD.replace("vregs-only-v1", "vregs-only-v0"));
        assert!(e.contains("this reader takes"), "{e}");
        // A read on a path that misses the definition: block 1 reads vreg 0
        // defined in block 0... made reachable without it by defining it in
        // block 1's twin instead.
        let nodom = r#"{"format":"regalloc-vregs-only-v1","num_vregs":1,"entry":0,
          "blocks":[{"insts":[0,1],"succs":[1,2],"params":[],"args":[[],[]],"depth":0},
                    {"insts":[1,3],"succs":[3],"params":[],"args":[[]],"depth":0},
                    {"insts":[3,4],"succs":[3],"params":[],"args":[[]],"depth":0},
                    {"insts":[4,5],"succs":[],"params":[],"args":[],"depth":0}],
          "insts":[{"uses":[],"defs":[]},{"uses":[],"defs":[0]},{"uses":[],"defs":[]},
                   {"uses":[],"defs":[]},{"uses":[0],"defs":[]}]}"#;
        let e = err(nodom);
        assert!(
            e.contains("vreg 0 (defined by instruction 1) is read on a path"),
            "{e}"
        );
        // A read before the definition in the same block.
        let e = err(&GOOD.replace(
            r#"{"uses":[],"defs":[0]},{"uses":[],"defs":[]}"#,
            r#"{"uses":[0],"defs":[]},{"uses":[],"defs":[0]}"#,
        ));
        assert!(
            e.contains("instruction 0: vreg 0 is read before its definition"),
            "{e}"
        );
    }

    #[test]
    fn run_exits_by_outcome_and_writes_atomically() {
        let dir = std::env::temp_dir().join(format!("tusk-regalloc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f.json");
        std::fs::write(&file, GOOD).unwrap();
        let out = dir.join("out.json");
        let mut args = RegallocArgs {
            input: dir.clone(),
            k: 2,
            json: true,
            out: Some(out.clone()),
            no_check: false,
        };
        assert_eq!(run(&args), 0);
        let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(v["functions"].as_array().unwrap().len(), 1);
        // K = 0 is refused; a malformed file is exit 2 and writes nothing.
        args.k = 0;
        assert_eq!(run(&args), 2);
        args.k = 2;
        std::fs::remove_file(&out).unwrap();
        std::fs::write(dir.join("g.json"), "{").unwrap();
        assert_eq!(run(&args), 2);
        assert!(!out.exists());
        std::fs::remove_file(dir.join("g.json")).unwrap();
        // The output is never the input.
        args.out = Some(file.clone());
        assert_eq!(run(&args), 2);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), GOOD);
        args.input = dir.join("missing.json");
        args.out = None;
        assert_eq!(run(&args), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The tests that read the public data: ignored by a plain `cargo
    /// test`, run by CI where `../shared/data` is (`cargo test --workspace
    /// -- --ignored shared_data::`); without the data they fail, naming the
    /// path.
    mod shared_data {
        use super::*;

        /// Every bz2-wasm function allocates and checks at K = 25 and 64, with
        /// no spill where MaxLive ≤ K.
        #[test]
        #[ignore = "needs ../shared/data/regalloc/bz2-wasm (or TUSK_DATA/regalloc); CI runs it"]
        fn bz2_functions_allocate_and_check() {
            let dir = crate::shared_data::dir().join("regalloc/bz2-wasm");
            let files = input_files(&dir).unwrap_or_default();
            assert!(
                files.len() == 54,
                "{} must hold the 54 bz2-wasm functions (set TUSK_DATA to the shared data folder)",
                dir.display()
            );
            let mut a = CfgAllocator::new();
            let mut c = CfgChecker::new();
            for k in [25u16, 64] {
                for file in &files {
                    let f = parse_function(&std::fs::read(file).unwrap()).unwrap();
                    let o = allocate_function(file, &f, k, false, false, &mut a, &mut c);
                    assert!(o.checked, "{} at K = {k}: {:?}", file.display(), o.error);
                    if o.stats.max_live <= k as u32 {
                        assert_eq!(o.stats.spilled, 0, "{} at K = {k}", file.display());
                    }
                }
            }
        }
    }
}
