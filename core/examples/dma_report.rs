//! DMA peephole figures on generated DMA-heavy modules: descriptors before
//! and after `dma_optimization_sb` against the lower bound, the vetoes that
//! explain any gap, and pass time per 100k DMAs.
//!
//! `cargo run --release -p tusk-core --features gen --example dma_report -- [DMAS] [SEED] [--check]`
//! (`--check` also runs the dataflow checker and the placement verifier.)

use std::time::Instant;

use tusk_core::gen::dma::{dma_heavy, DmaGenParams};
use tusk_core::pass::dma::{DmaWorkspace, DMA_OPTIMIZATION_SB};
use tusk_core::report::descriptor_lower_bound;
use tusk_core::Target;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dmas: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let check = args.iter().any(|a| a == "--check");
    for (label, tiled) in [("mix", 55u8), ("tiled-only", 100)] {
        let p = DmaGenParams {
            dmas,
            tiles: 8,
            tiled_pct: tiled,
            seed,
        };
        let orig = dma_heavy(Target::default(), p).expect("generate");
        let mut m = orig.clone();
        let mut scratch = Vec::new();
        let bound_before = descriptor_lower_bound(&m, &mut scratch);
        let mut ws = DmaWorkspace::new();
        ws.reserve(&mut m);
        let t0 = Instant::now();
        let st = DMA_OPTIMIZATION_SB.run(&mut m, &mut ws).expect("pass");
        let dt = t0.elapsed();
        let bound_after = descriptor_lower_bound(&m, &mut scratch);
        println!(
            "== {label}: {} DMAs generated (seed {seed})",
            st.pre.instructions
        );
        println!("{st}");
        println!(
            "descriptors: before {} (bound {}), after {} (bound {}), gap {}",
            st.pre.descriptors,
            bound_before,
            st.post.descriptors,
            bound_after,
            st.post.descriptors - bound_after
        );
        println!("vetoes: {:?}", st.vetoes);
        println!(
            "pass time {:.1} ms, {:.1} ms per 100k DMAs",
            dt.as_secs_f64() * 1e3,
            dt.as_secs_f64() * 1e3 * 100_000.0 / st.pre.instructions.max(1) as f64
        );
        if check {
            let mut cap = tusk_core::verify::DataflowCapacity::estimate(&orig, &m);
            cap.runs *= 8;
            cap.scratch *= 8;
            let mut df = tusk_core::verify::DataflowChecker::with_capacity(cap);
            let r = df.check(&orig, &m).expect("dataflow capacity");
            println!(
                "dataflow clean: {} ({} executions compared)",
                r.is_clean(),
                r.coverage.compared
            );
            let mut v = tusk_core::verify::Verifier::for_module(&m);
            let rep = v.verify(&m);
            println!("placement clean: {}", rep.is_clean());
            if let Some(f) = rep.findings.first() {
                println!("  first finding: {}", f.display(&m));
            }
        }
    }
}
