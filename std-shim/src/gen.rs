//! `tusk gen`: writes a synthetic module in the text format.
//!
//! The knobs are those of [`tusk_core::gen::module::GenParams`]; a preset
//! sets them all, and each flag given overrides one.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use tusk_core::gen::module::{generate, GenParams};
use tusk_core::Target;

use crate::console::{self, EXIT_BAD_INPUT, EXIT_OK};

/// Which set of knobs to start from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// Kernel-like modules far below capacity.
    Default,
    /// Many DMAs with coalescing, redundant-load, partial-DMA and dead-store
    /// opportunities.
    DmaHeavy,
    /// Memory and register pressure near and over capacity.
    Tight,
    /// Every construct of real kernels (types, conversions, loop-indexed
    /// tiles, register offsets, broadcasts, reductions, transposes, scans,
    /// bias and scale columns) at a high share.
    Constructs,
}

/// Flags of `tusk gen`.
#[derive(clap::Args, Debug, Clone)]
pub struct GenArgs {
    /// Exact number of instructions.
    #[arg(long, short = 'n', default_value_t = 10_000)]
    pub instructions: usize,
    /// Seed of every random decision (same seed, same module).
    #[arg(long, short = 's', default_value_t = 1)]
    pub seed: u64,
    /// Output file (default: standard output).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// The starting set of knobs.
    #[arg(long, value_enum, default_value_t = Preset::Default)]
    pub preset: Preset,
    /// Target preset (trn1, inf2, trn2, trn3).
    #[arg(long, default_value = "trn2")]
    pub target: String,
    /// Tile sizes in bytes per partition, four comma-separated values.
    #[arg(long, value_delimiter = ',')]
    pub tile_bytes: Option<Vec<u32>>,
    /// Weights of the four tile sizes.
    #[arg(long, value_delimiter = ',')]
    pub tile_weights: Option<Vec<u8>>,
    /// Weights of the partition classes 128, 64, 32, small (1..=16).
    #[arg(long, value_delimiter = ',')]
    pub partition_weights: Option<Vec<u8>>,
    /// Share (%) of regions with bf16 tiles.
    #[arg(long)]
    pub bf16_pct: Option<u8>,
    /// Share (%) of regions with typed locations (bf16, fp16, fp32).
    #[arg(long)]
    pub typed_pct: Option<u8>,
    /// Share (%) of the activations of typed regions that convert.
    #[arg(long)]
    pub cast_pct: Option<u8>,
    /// Share (%) of regions in a loop nest.
    #[arg(long)]
    pub loop_pct: Option<u8>,
    /// Deepest loop nest.
    #[arg(long)]
    pub loop_depth: Option<u8>,
    /// Smallest trip count.
    #[arg(long)]
    pub trip_min: Option<u32>,
    /// Largest trip count.
    #[arg(long)]
    pub trip_max: Option<u32>,
    /// Share (%) of loops of unknown trip count.
    #[arg(long)]
    pub unknown_trip_pct: Option<u8>,
    /// Share (%) of units in loops whose DRAM tiles stream with the loop
    /// index (loop terms), and of accumulate loops whose K tiles do.
    #[arg(long)]
    pub loop_term_pct: Option<u8>,
    /// Share (%) of loop regions gathering a piece of a result into a
    /// loop-indexed slice of an SB tile (an on-chip loop term).
    #[arg(long)]
    pub gather_pct: Option<u8>,
    /// Share (%) of input loads with a register offset and window (half as
    /// many saves).
    #[arg(long)]
    pub dyn_offset_pct: Option<u8>,
    /// Share (%) of input loads reading a sliding window (DRAM partition
    /// step).
    #[arg(long)]
    pub pstep_pct: Option<u8>,
    /// Share (%) of tensor-tensor steps with a partition-broadcast operand.
    #[arg(long)]
    pub broadcast_pct: Option<u8>,
    /// Share (%) of activations with a bias column.
    #[arg(long)]
    pub bias_pct: Option<u8>,
    /// Share (%) of steps scaling by a reduced [P x 1] column
    /// (tensor_reduce, then tensor_scalar).
    #[arg(long)]
    pub column_pct: Option<u8>,
    /// Share (%) of steps that are a tensor_reduce.
    #[arg(long)]
    pub reduce_pct: Option<u8>,
    /// Share (%) of steps that transpose through PSUM.
    #[arg(long)]
    pub transpose_pct: Option<u8>,
    /// Share (%) of steps that are a tensor_scan.
    #[arg(long)]
    pub scan_pct: Option<u8>,
    /// Most units (load, compute chain, save) per loop body.
    #[arg(long)]
    pub units_max: Option<u8>,
    /// Longest compute chain per unit.
    #[arg(long)]
    pub chain_max: Option<u8>,
    /// DMA density: share (%) of binary-op operands loaded fresh.
    #[arg(long)]
    pub dma_pct: Option<u8>,
    /// Share (%) of compute steps that are matmuls into PSUM.
    #[arg(long)]
    pub matmul_pct: Option<u8>,
    /// Share (%) of regions accumulating in PSUM across a loop.
    #[arg(long)]
    pub accumulate_pct: Option<u8>,
    /// PSUM accumulators per accumulate region.
    #[arg(long)]
    pub accumulators: Option<u8>,
    /// Resident SB tiles per region.
    #[arg(long)]
    pub residents: Option<u8>,
    /// Register pressure: share (%) of scalar address arithmetic.
    #[arg(long)]
    pub scalar_pct: Option<u8>,
    /// Register pressure: long-lived scalar values.
    #[arg(long)]
    pub live_scalars: Option<u16>,
    /// Share (%) of units loading abutting slices into separate tiles.
    #[arg(long)]
    pub abutting_pct: Option<u8>,
    /// Share (%) of units loading the same slice twice.
    #[arg(long)]
    pub duplicate_pct: Option<u8>,
    /// Share (%) of units loading twice what they read.
    #[arg(long)]
    pub overbroad_pct: Option<u8>,
    /// Share (%) of units with a dead save to DRAM scratch.
    #[arg(long)]
    pub dead_save_pct: Option<u8>,
}

/// Why the flags do not make a parameter set.
fn params(a: &GenArgs) -> Result<GenParams, String> {
    let mut p = match a.preset {
        Preset::Default => GenParams::default(),
        Preset::DmaHeavy => GenParams::dma_heavy(),
        Preset::Tight => GenParams::tight(),
        Preset::Constructs => GenParams::constructs(),
    };
    if a.instructions == 0 {
        return Err(format!(
            "--instructions 0: a module needs at least 1 instruction (1..={})",
            tusk_core::ir::Limits::default().instructions
        ));
    }
    p.instructions = a.instructions;
    p.seed = a.seed;
    p.target = Target::by_name(&a.target).ok_or_else(|| {
        format!(
            "unknown target `{}` (known: trn1, inf2, trn2, trn3)",
            a.target
        )
    })?;
    fn four<T: Copy>(v: &Option<Vec<T>>, into: &mut [T; 4], what: &str) -> Result<(), String> {
        if let Some(v) = v {
            *into = v
                .as_slice()
                .try_into()
                .map_err(|_| format!("--{what} takes exactly four values, got {}", v.len()))?;
        }
        Ok(())
    }
    four(&a.tile_bytes, &mut p.tile_bytes, "tile-bytes")?;
    four(&a.tile_weights, &mut p.tile_weights, "tile-weights")?;
    four(
        &a.partition_weights,
        &mut p.partition_weights,
        "partition-weights",
    )?;
    macro_rules! set {
        ($($flag:ident => $field:ident),*) => {$(
            if let Some(v) = a.$flag { p.$field = v; }
        )*};
    }
    set!(bf16_pct => bf16_pct, loop_pct => loop_pct, loop_depth => max_loop_depth,
        trip_min => trip_min, trip_max => trip_max, units_max => units_max,
        chain_max => chain_max, dma_pct => dma_pct, matmul_pct => matmul_pct,
        accumulate_pct => accumulate_pct, accumulators => accumulators,
        residents => residents, scalar_pct => scalar_pct, live_scalars => live_scalars,
        abutting_pct => abutting_pct, duplicate_pct => duplicate_pct,
        overbroad_pct => overbroad_pct, dead_save_pct => dead_save_pct,
        typed_pct => typed_pct, cast_pct => cast_pct, unknown_trip_pct => unknown_trip_pct,
        loop_term_pct => loop_term_pct, gather_pct => gather_pct,
        dyn_offset_pct => dyn_offset_pct, pstep_pct => pstep_pct,
        broadcast_pct => broadcast_pct, bias_pct => bias_pct, column_pct => column_pct,
        reduce_pct => reduce_pct, transpose_pct => transpose_pct, scan_pct => scan_pct);
    // Lowering a maximum below the preset's minimum lowers the minimum too.
    p.units_min = p.units_min.min(p.units_max);
    p.chain_min = p.chain_min.min(p.chain_max);
    p.trip_min = p.trip_min.min(p.trip_max);
    p.validate()
        .map_err(|e| format!("invalid generator knobs: {e}"))?;
    Ok(p)
}

/// Runs `tusk gen`; returns the exit code (0 written, 2 bad knobs, 3 I/O).
pub fn run(args: &GenArgs) -> u8 {
    let p = match params(args) {
        Ok(p) => p,
        Err(e) => {
            console::error(e);
            return EXIT_BAD_INPUT;
        }
    };
    let module = match generate(&p) {
        Ok(m) => m,
        Err(e) => {
            console::error(format_args!("cannot generate the module: {e}"));
            return EXIT_BAD_INPUT;
        }
    };
    let text = crate::text::print(&module);
    // Written atomically (temporary file + rename): no partial module on
    // error; standard output when no file is given.
    let dest = args.output.as_deref().unwrap_or(Path::new("-"));
    match crate::io::write_atomic(dest, text.as_bytes()) {
        Ok(()) => EXIT_OK,
        Err(e) => e.report(EXIT_OK),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        gen: GenArgs,
    }

    fn args(line: &[&str]) -> GenArgs {
        Cli::try_parse_from(std::iter::once("gen").chain(line.iter().copied()))
            .unwrap()
            .gen
    }

    #[test]
    fn flags_override_the_preset() {
        let p = params(&args(&[
            "--preset",
            "dma-heavy",
            "-n",
            "500",
            "--seed",
            "9",
            "--dma-pct",
            "100",
            "--tile-bytes",
            "256,512,768,1024",
            "--target",
            "trn3",
            "--typed-pct",
            "100",
            "--loop-term-pct",
            "40",
            "--transpose-pct",
            "7",
        ]))
        .unwrap();
        assert_eq!(p.instructions, 500);
        assert_eq!(p.seed, 9);
        assert_eq!(p.dma_pct, 100);
        assert_eq!(p.tile_bytes, [256, 512, 768, 1024]);
        assert_eq!(p.abutting_pct, GenParams::dma_heavy().abutting_pct);
        assert_eq!(p.target, Target::by_name("trn3").unwrap());
        assert_eq!(
            (p.typed_pct, p.loop_term_pct, p.transpose_pct),
            (100, 40, 7)
        );
        assert_eq!(p.scan_pct, GenParams::dma_heavy().scan_pct);
    }

    #[test]
    fn bad_knobs_exit_2_and_writes_exit_0() {
        assert_eq!(run(&args(&["--scalar-pct", "99"])), 2);
        assert_eq!(run(&args(&["--gather-pct", "101"])), 2);
        assert_eq!(run(&args(&["--target", "trn9"])), 2);
        let dir = std::env::temp_dir().join(format!("tusk-gen-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("m.tusk");
        assert_eq!(run(&args(&["-n", "300", "-o", out.to_str().unwrap()])), 0);
        assert!(!std::fs::read_to_string(&out).unwrap().is_empty());
        let missing = dir.join("no/such/dir/m.tusk");
        assert_eq!(run(&args(&["-n", "3", "-o", missing.to_str().unwrap()])), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
