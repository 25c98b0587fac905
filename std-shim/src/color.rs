//! `tusk color FILE.col -k K [-o OUT]`: the register colorer's
//! simplify/select/repair core on a DIMACS graph with unit weights.
//! Prints colors used, uncolored count and time; validates the coloring
//! against the file's edge list (independently of the colorer's graph).

use std::path::PathBuf;
use std::time::Instant;

use tusk_core::regalloc::{ColorConfig, Colorer, InterferenceGraph, NO_COLOR};

use crate::console::{self, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::dimacs;

/// Arguments of `tusk color`.
#[derive(clap::Args, Debug, Clone)]
pub struct ColorArgs {
    /// The DIMACS `.col` file.
    pub file: PathBuf,
    /// Colors (lanes) available.
    #[arg(short = 'k', long = "colors", visible_alias = "k")]
    pub k: u16,
    /// Write the coloring here: one `vertex color` line per vertex
    /// (1-based vertex, color 0..K-1 or -1 when uncolored).
    #[arg(short = 'o', long = "output", visible_alias = "out")]
    pub out: Option<PathBuf>,
    /// Run the textbook Briggs variant (highest-degree potential spill,
    /// first-fit select, no repair) for comparison.
    #[arg(long)]
    pub textbook: bool,
    /// Print one JSON object instead of the summary line: `file`,
    /// `vertices`, `edges`, `k`, `colors_used`, `uncolored`, `micros`,
    /// `uncolored_before_repair`, `repair_moves`, `score`.
    #[arg(long)]
    pub json: bool,
}

/// The outcome of coloring one DIMACS graph.
#[derive(Clone, Debug)]
pub struct ColorOutcome {
    /// First lane per vertex, [`NO_COLOR`] when uncolored.
    pub colors: Vec<u16>,
    /// The colorer's statistics.
    pub stats: tusk_core::regalloc::ColorStats,
    /// Distinct colors used.
    pub colors_used: u32,
    /// Seconds spent building the graph and coloring.
    pub seconds: f64,
}

/// Colors a parsed graph with unit weights; checks the result against the
/// edge list. Errors are messages for the driver.
pub fn color_graph(g: &dimacs::DimacsGraph, cfg: &ColorConfig) -> Result<ColorOutcome, String> {
    let n = g.vertices as usize;
    let t0 = Instant::now();
    let mut graph = InterferenceGraph::with_capacity(n, 2 * g.edges.len());
    let lanes = vec![1u8; n];
    graph
        .build_from_edges(&lanes, &g.edges)
        .map_err(|e| e.to_string())?;
    let mut colorer = Colorer::with_capacity(n, cfg.k);
    let mut colors = vec![NO_COLOR; n];
    let stats = colorer
        .color(&graph, &vec![1.0; n], &vec![NO_COLOR; n], cfg, &mut colors)
        .map_err(|e| e.to_string())?;
    let seconds = t0.elapsed().as_secs_f64();
    for &(u, v) in &g.edges {
        let (cu, cv) = (colors[u as usize], colors[v as usize]);
        if u != v && cu != NO_COLOR && cu == cv {
            return Err(format!(
                "internal error: edge {} {} joins two vertices of color {cu}",
                u + 1,
                v + 1
            ));
        }
    }
    if let Some(&c) = colors.iter().find(|&&c| c != NO_COLOR && c >= cfg.k) {
        return Err(format!(
            "internal error: color {c} is not below K = {}",
            cfg.k
        ));
    }
    let mut used = vec![false; cfg.k as usize];
    for &c in &colors {
        if c != NO_COLOR {
            used[c as usize] = true;
        }
    }
    let colors_used = used.iter().filter(|&&u| u).count() as u32;
    Ok(ColorOutcome {
        colors,
        stats,
        colors_used,
        seconds,
    })
}

/// Runs `tusk color`; returns the exit code (0 all colored, 1 uncolored
/// vertices left, 2 bad input or options, 3 I/O error).
pub fn run(args: &ColorArgs) -> u8 {
    let path = args.file.display();
    if args.k == 0 || args.k > tusk_core::regalloc::MAX_K {
        console::error(format_args!(
            "-k {} is out of range 1..={}",
            args.k,
            tusk_core::regalloc::MAX_K
        ));
        return EXIT_BAD_INPUT;
    }
    if let Some(o) = &args.out {
        let mut outs = vec![("-o", o.as_path())];
        if args.json {
            outs.push(("--json", std::path::Path::new("-")));
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
    let g = match dimacs::parse(&bytes) {
        Ok(g) => g,
        Err(e) => {
            console::error(format_args!("{path}:{e}"));
            return EXIT_BAD_INPUT;
        }
    };
    let cfg = if args.textbook {
        ColorConfig::textbook(args.k)
    } else {
        ColorConfig::tuned(args.k)
    };
    let out = match color_graph(&g, &cfg) {
        Ok(o) => o,
        Err(e) => {
            console::error(format_args!("{path}: {e}"));
            return EXIT_FAILED;
        }
    };
    let code = if out.stats.uncolored > 0 {
        EXIT_FAILED
    } else {
        EXIT_OK
    };
    let summary = if args.json {
        let v = serde_json::json!({
            "file": path.to_string(),
            "vertices": g.vertices,
            "edges": g.edges.len(),
            "k": args.k,
            "colors_used": out.colors_used,
            "uncolored": out.stats.uncolored,
            "micros": (out.seconds * 1e6) as u64,
            "uncolored_before_repair": out.stats.uncolored_before_repair,
            "repair_moves": out.stats.repair_moves,
            "score": out.stats.score,
        });
        format!("{v:#}\n")
    } else {
        format!(
        "{path}: {} vertices, {} edges, K = {}: colors used {}, uncolored {}, time {:.3} ms (select left {}, repair moves {}, REG score {:.4}, lower is better)\n",
        g.vertices,
        g.edges.len(),
        args.k,
        out.colors_used,
        out.stats.uncolored,
        out.seconds * 1e3,
        out.stats.uncolored_before_repair,
        out.stats.repair_moves,
        out.stats.score,
        )
    };
    if let Some(o) = &args.out {
        let mut text = String::with_capacity(out.colors.len() * 8);
        for (v, &c) in out.colors.iter().enumerate() {
            if c == NO_COLOR {
                text.push_str(&format!("{} -1\n", v + 1));
            } else {
                text.push_str(&format!("{} {c}\n", v + 1));
            }
        }
        // Temporary file + rename: a reader never sees a partial coloring.
        if let Err(e) = crate::io::write_atomic(o, text.as_bytes()) {
            return e.report(code);
        }
        if o.as_os_str() == "-" {
            // The coloring owns standard output, so it pipes onward.
            console::eprint(&summary);
            return code;
        }
    }
    console::print_and_finish(code, &summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The chromatic numbers of the coloring table in the data's own
    /// README (`| graph | nodes | edges | chromatic number |`).
    fn documented_chromatic_numbers(data: &Path) -> Vec<(String, u16)> {
        let readme = data.join("README.md");
        let text = std::fs::read_to_string(&readme)
            .unwrap_or_else(|e| panic!("{}: {e}", readme.display()));
        let table = text
            .split("## coloring/")
            .nth(1)
            .unwrap_or_else(|| panic!("{} has no coloring/ section", readme.display()));
        table
            .lines()
            .take_while(|l| !l.starts_with("## "))
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let k = cells.get(4)?.parse().ok()?;
                Some((cells.get(1)?.to_string(), k))
            })
            .collect()
    }

    /// The tests that read the public data: ignored by a plain `cargo
    /// test`, run by CI where `../shared/data` is (`cargo test --workspace
    /// -- --ignored shared_data::`); without the data they fail, naming the
    /// path.
    mod shared_data {
        use super::*;

        #[test]
        #[ignore = "needs ../shared/data/coloring (or TUSK_DATA/coloring); CI runs it"]
        fn dimacs_graphs_colored_at_the_chromatic_number() {
            let data = crate::shared_data::dir();
            let dir = data.join("coloring");
            assert!(
                dir.is_dir(),
                "{} is absent: this test needs the DIMACS graphs (set TUSK_DATA to the data folder)",
                dir.display()
            );
            let graphs = documented_chromatic_numbers(&data);
            assert_eq!(graphs.len(), 11, "the README's coloring table");
            for (name, k) in graphs {
                let bytes = std::fs::read(dir.join(format!("{name}.col"))).unwrap();
                let g = dimacs::parse(&bytes).unwrap();
                let out = color_graph(&g, &ColorConfig::tuned(k)).unwrap();
                assert_eq!(out.stats.uncolored, 0, "{name} at K = {k}");
                // Below χ some vertex must stay uncolored, and the result is
                // still a legal partial coloring (color_graph validates it).
                let out = color_graph(&g, &ColorConfig::tuned(k - 1)).unwrap();
                assert!(out.stats.uncolored > 0, "{name} at K = {}", k - 1);
            }
        }
    }

    #[test]
    fn run_writes_the_coloring_atomically() {
        let dir = std::env::temp_dir().join(format!("tusk-color-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tri.col");
        std::fs::write(&file, "c triangle\np edge 3 3\ne 1 2\ne 2 3\ne 1 3\n").unwrap();
        let out = dir.join("tri.out");
        let mut args = ColorArgs {
            file: file.clone(),
            k: 3,
            out: Some(out.clone()),
            textbook: false,
            json: false,
        };
        assert_eq!(run(&args), 0);
        let text = std::fs::read_to_string(&out).unwrap();
        let mut seen = Vec::new();
        for line in text.lines() {
            let mut it = line.split(' ');
            let v: usize = it.next().unwrap().parse().unwrap();
            let c: i32 = it.next().unwrap().parse().unwrap();
            seen.push((v, c));
        }
        assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), [1, 2, 3]);
        let mut cs: Vec<i32> = seen.iter().map(|s| s.1).collect();
        cs.sort();
        assert_eq!(cs, [0, 1, 2]);
        args.k = 2;
        assert_eq!(run(&args), 1);
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(text.lines().filter(|l| l.ends_with(" -1")).count(), 1);
        std::fs::write(&file, "p edge 3 1\ne 1 9\n").unwrap();
        assert_eq!(run(&args), 2);
        args.file = dir.join("missing.col");
        assert_eq!(run(&args), 3);
        // The input is never the output: refused, and left as it was.
        std::fs::write(&file, "p edge 2 1\ne 1 2\n").unwrap();
        args.file = file.clone();
        args.out = Some(file.clone());
        assert_eq!(run(&args), 2);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "p edge 2 1\ne 1 2\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
