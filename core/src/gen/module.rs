//! The module generator: synthetic programs shaped like lowered NKI kernels,
//! of any size, for benchmarks, tests, fuzzing and scale runs.
//!
//! A generated module is a sequence of *regions*. A region has its own DRAM
//! input (`in<r>`), output (`out<r>`) and, when dead saves are enabled, an
//! internal DRAM scratch (`scr<r>`); it loads a few *resident* SB tiles
//! (weights) before an optional loop nest, and the innermost body holds
//! *units*: a DMA load of a tile, a chain of compute steps, and a save to
//! the region's output. A step is a matmul into PSUM and its evacuation
//! back to SB, a transpose through PSUM (and the product of the transposed
//! tile with itself, back to the tile's partitions), a reduction, a scale
//! by a per-partition column, a scan, an activation (with a bias column or
//! a conversion), a tensor-tensor op (with a partition-broadcast operand) or
//! a tensor-scalar op. Scalar registers play their real roles: long-lived
//! values defined at entry (strides, base addresses; every fourth a 64-bit
//! lane pair), loop counters incremented and branched on, and short
//! address-arithmetic chains whose result feeds a `tensor_scalar` or a
//! DMA's dynamic offset. An *accumulate* region keeps PSUM accumulators
//! live across a reduction loop (memset before it, matmul reading and
//! writing the accumulator inside it, evacuation after it).
//!
//! What real kernels say about their data is said here too: a share of the
//! regions is typed (bf16, fp16 or fp32 tiles, fp32 PSUM, with a conversion
//! before a save wherever the tile's type is not its destination's, as
//! inside `nl.store` of an fp32 accumulator); every loop is named, and
//! tiles move with the loops' induction variables — a unit's DRAM input and
//! output streamed tile by tile (`+B*iv` in the bytes, or `+P*iv` in the
//! rows), the K tiles of an accumulation and the stationary slice of its
//! weights, and a piece of a unit's result gathered into its iteration's
//! slice of a tile saved after the loop nest (SB bytes, SB partitions, or
//! a PSUM bank written by a matmul); DMAs carry register offsets with their
//! windows, sliding-window loads a DRAM partition step, and reads partition
//! broadcasts.
//!
//! Invariants of every generated module (tested below):
//! - exactly `instructions` instructions;
//! - every instruction obeys its opcode's operand-shape rule
//!   ([`crate::ir::shape`]): matmul and transpose operands fit the PE array
//!   and write PSUM within one bank, DMAs move equal bytes of one type,
//!   element-wise operands agree in partitions and elements;
//! - every pattern stays inside its location at every iteration of the
//!   loops it moves with, and every register window inside its location
//!   ([`crate::ir::pattern`]; the builder refuses anything else);
//! - every SB and PSUM tensor is written before it is read (no generated
//!   instruction needs the `uninit` flag), and a tile written slice by slice
//!   in a loop is read only after the loop, when every slice is written;
//! - every on-chip tensor belongs to one unit, one region's residents,
//!   gathered tile or accumulators, so it dies at the end of that scope and
//!   the live set stays bounded whatever the module size; with the default
//!   knobs the peak live SB bytes per partition stay far below the usable
//!   SB and every PSUM tensor fits one bank;
//! - sizes are multiples of their element size.
//!
//! Scaling: the generator runs twice over the same deterministic decisions,
//! first into a counting sink that measures exactly how much storage the
//! module needs, then into the [`Builder`] over a module reserved to that
//! capacity. Each region is sized before it is emitted by a dry run into a
//! fresh counter, so the total is linear in the instruction count.

use arrayvec::ArrayVec;
use core::fmt::Write;

use super::rng::Rng;
use crate::ir::{
    ApExt, ApSpec, Builder, Capacity, DType, Dim, InstFlags, InstSpec, IrError, IvTerm, Limits,
    Loop, MemFlags, MemLoc, MemSpec, Module, Opcode, Reg, RegTerm, Space, SubOp, UNKNOWN_TRIP,
};
use crate::target::Target;

/// Deepest loop nest a region may have (the knob's upper bound).
pub const MAX_GEN_DEPTH: u8 = 8;
/// Most resident tiles per region.
pub const MAX_RESIDENTS: u8 = 16;
/// Most units per loop body and accumulators per region.
pub const MAX_UNITS: u8 = 64;
/// Largest tile in bytes per partition.
pub const MAX_TILE_BYTES: u32 = 1 << 20;
/// The first three classes of the partition mix span all, a half and a
/// quarter of the target's SB partitions (the divisors here); the fourth
/// class ("small") draws a power of two in `1..=16`, at most all of them.
pub const PARTITION_DIVISORS: [u16; 3] = [1, 2, 4];
/// DRAM input slices reserved per unit: up to four abutting tiles, and one
/// for operand loads (an over-broad load takes two).
const SLOTS_PER_UNIT: u32 = 5;
/// Largest DRAM stream (bytes per partition) that tiles moving with the
/// loops read or write: the loops a stream moves with are taken from the
/// innermost outwards while every iteration's slot fits, so deep nests of
/// long loops stream over their inner loops only.
const STREAM_CAP: u64 = 1 << 22;
/// Most slots a tile moving with several loops takes an outer loop in for:
/// the checkers walk every loop a term moves with iteration by iteration,
/// so a nest of long loops moves with its innermost loop only.
const MAX_SLOTS: u64 = 16;
/// Elements per partition a unit gathers per iteration, at most.
const GATHER_ELEMS: u32 = 16;
/// Largest gathered SB tile in bytes per partition (it lives over the
/// whole loop nest, like a resident).
const GATHER_CAP: u64 = 2048;

/// The knobs of the generator. Percentages are `0..=100`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenParams {
    /// Exact number of instructions to generate.
    pub instructions: usize,
    /// Seed of every random decision.
    pub seed: u64,
    /// The hardware the module is for (PSUM bank size and partitions).
    pub target: Target,
    /// Tile sizes in bytes per partition to draw from (multiples of 4).
    pub tile_bytes: [u32; 4],
    /// Weights of `tile_bytes`.
    pub tile_weights: [u8; 4],
    /// Weights of the partition classes: all, a half and a quarter of the
    /// target's SB partitions, and small (1..=16); see [`PARTITION_DIVISORS`].
    pub partition_weights: [u8; 4],
    /// Share of regions with 2-byte tiles (bf16 or fp16 when typed); the
    /// rest have 4-byte (fp32) tiles.
    pub bf16_pct: u8,
    /// Share of regions whose locations carry element types (bf16, fp16,
    /// fp32; PSUM and evacuated matmul results fp32); the rest are untyped
    /// (`elem N`).
    pub typed_pct: u8,
    /// Share of the activations of typed regions that convert between the
    /// 2-byte type and fp32.
    pub cast_pct: u8,
    /// Share of regions whose units sit in a loop nest.
    pub loop_pct: u8,
    /// Deepest loop nest of a region (`0..=MAX_GEN_DEPTH`).
    pub max_loop_depth: u8,
    /// Smallest trip count.
    pub trip_min: u32,
    /// Largest trip count.
    pub trip_max: u32,
    /// Share of loops whose trip count is unknown (`loop ?`).
    pub unknown_trip_pct: u8,
    /// Share of the units in loops of known trip count whose input and
    /// output tiles stream through DRAM with the loops' induction variables
    /// (loop terms on the DRAM side, in the bytes or, for tiles that stack
    /// in 128 rows, half the time in the partitions), and of accumulate
    /// loops whose K tiles do (with the stationary slice of the weights
    /// moving on the SB side when the weights hold every K step).
    pub loop_term_pct: u8,
    /// Share of the regions with loops of known trip count whose first unit
    /// gathers a piece of its result into its iteration's slice of a tile
    /// saved after the loop nest (a loop term on the on-chip side): the
    /// bytes or the partitions of an SB tile, or a PSUM bank by a matmul,
    /// a third each.
    pub gather_pct: u8,
    /// Share of plain input loads whose DRAM side moves by a register (the
    /// loop counter or the unit's address arithmetic) inside a declared
    /// window; half as many of the saves do.
    pub dyn_offset_pct: u8,
    /// Share of plain input loads that read a sliding window of their DRAM
    /// row: an explicit DRAM partition step of one element.
    pub pstep_pct: u8,
    /// Share of tensor-tensor steps whose second operand is a partition
    /// broadcast (`step 0`: every partition reads the first).
    pub broadcast_pct: u8,
    /// Share of activations with a bias column `[P x 1]` (from a resident
    /// weight tile, else reduced from the input).
    pub bias_pct: u8,
    /// Share of compute steps that scale by a column: a `tensor_reduce`
    /// into `[P x 1]` and a `tensor_scalar` reading it.
    pub column_pct: u8,
    /// Share of compute steps that are a `tensor_reduce` dividing the
    /// elements per partition.
    pub reduce_pct: u8,
    /// Share of compute steps that transpose the tile through PSUM and
    /// multiply the transposed tile with itself (four instructions).
    pub transpose_pct: u8,
    /// Share of compute steps that are a `tensor_scan` (`add`, or `mul_add`
    /// with a second operand).
    pub scan_pct: u8,
    /// Fewest units per loop body (or straight-line region).
    pub units_min: u8,
    /// Most units per loop body.
    pub units_max: u8,
    /// Fewest compute steps per unit.
    pub chain_min: u8,
    /// Most compute steps per unit.
    pub chain_max: u8,
    /// DMA density: share of binary-op operands loaded fresh from DRAM
    /// instead of taken from a resident tile.
    pub dma_pct: u8,
    /// Share of compute steps that are a matmul into PSUM (plus its
    /// evacuation back to SB).
    pub matmul_pct: u8,
    /// Share of regions that accumulate in PSUM across a reduction loop.
    pub accumulate_pct: u8,
    /// PSUM accumulators live across an accumulate region's loop.
    pub accumulators: u8,
    /// Resident SB tiles loaded before a region's loop nest and read in it.
    pub residents: u8,
    /// Register pressure: share of instructions that are scalar address
    /// arithmetic (`0..=90`).
    pub scalar_pct: u8,
    /// Register pressure: long-lived scalar values defined at entry and used
    /// throughout (every fourth takes a 64-bit lane pair).
    pub live_scalars: u16,
    /// Share of unary steps flagged `inplace`.
    pub inplace_pct: u8,
    /// Share of units that load abutting slices of one DRAM tensor into
    /// separate tiles (coalescing candidates).
    pub abutting_pct: u8,
    /// Share of units that load the same slice twice into the same tile
    /// (redundant-load candidates).
    pub duplicate_pct: u8,
    /// Share of units that load twice the bytes they read (partial-DMA
    /// candidates).
    pub overbroad_pct: u8,
    /// Share of units that also save to an internal DRAM scratch the next
    /// unit overwrites (dead-store candidates).
    pub dead_save_pct: u8,
}

impl Default for GenParams {
    /// Kernel-like modules whose live set stays far below the usable SB: a
    /// few KiB tiles, mostly 128 partitions, shallow loop nests; a third of
    /// the regions typed, a third of the units in loops streaming their
    /// tiles, and a few percent of each rarer construct.
    fn default() -> Self {
        GenParams {
            instructions: 10_000,
            seed: 1,
            target: Target::default(),
            tile_bytes: [512, 1024, 2048, 4096],
            tile_weights: [2, 3, 3, 2],
            partition_weights: [6, 2, 1, 1],
            bf16_pct: 50,
            typed_pct: 30,
            cast_pct: 10,
            loop_pct: 70,
            max_loop_depth: 2,
            trip_min: 2,
            trip_max: 16,
            unknown_trip_pct: 10,
            loop_term_pct: 10,
            gather_pct: 5,
            dyn_offset_pct: 5,
            pstep_pct: 3,
            broadcast_pct: 5,
            bias_pct: 10,
            column_pct: 4,
            reduce_pct: 4,
            transpose_pct: 3,
            scan_pct: 3,
            units_min: 1,
            units_max: 3,
            chain_min: 2,
            chain_max: 5,
            dma_pct: 30,
            matmul_pct: 20,
            accumulate_pct: 25,
            accumulators: 2,
            residents: 1,
            scalar_pct: 20,
            live_scalars: 8,
            inplace_pct: 10,
            abutting_pct: 5,
            duplicate_pct: 5,
            overbroad_pct: 5,
            dead_save_pct: 5,
        }
    }
}

impl GenParams {
    /// The default knobs with an instruction count and a seed.
    pub fn new(instructions: usize, seed: u64) -> Self {
        GenParams {
            instructions,
            seed,
            ..GenParams::default()
        }
    }

    /// DMA-heavy modules for the DMA peepholes: many units with short
    /// chains, most operands loaded fresh, and frequent abutting tiled
    /// loads, duplicated loads, over-broad loads and dead saves.
    pub fn dma_heavy() -> Self {
        GenParams {
            units_min: 2,
            units_max: 4,
            chain_min: 1,
            chain_max: 2,
            dma_pct: 80,
            matmul_pct: 10,
            accumulate_pct: 10,
            scalar_pct: 10,
            abutting_pct: 40,
            duplicate_pct: 30,
            overbroad_pct: 30,
            dead_save_pct: 30,
            ..GenParams::default()
        }
    }

    /// Memory pressure near and over capacity, to force spills: 12–32 KiB
    /// fp32 tiles on 128 partitions and five residents per region, so that
    /// the largest regions' live set (residents plus a unit's two or three
    /// tiles, up to 256 KiB per partition) exceeds the usable SB of trn1 and
    /// trn2 while most regions stay below it; nine PSUM accumulators (one
    /// more than the banks) and more long-lived scalars than register lanes.
    pub fn tight() -> Self {
        GenParams {
            // Large fp32 tiles, all on 128 partitions.
            tile_bytes: [12288, 16384, 24576, 32768],
            tile_weights: [1, 2, 2, 1],
            bf16_pct: 0,
            partition_weights: [1, 0, 0, 0],
            // Many tiles live at once: residents beside units of two or
            // three tiles, binary operands taken from the residents.
            residents: 5,
            chain_min: 2,
            chain_max: 4,
            dma_pct: 0,
            // More accumulators than PSUM banks, more scalars than lanes.
            accumulators: 9,
            accumulate_pct: 40,
            live_scalars: 64,
            // Fewer DMA peephole candidates: the preset is about capacity.
            abutting_pct: 0,
            overbroad_pct: 0,
            ..GenParams::default()
        }
    }

    /// Every construct of real kernels the default preset has at a few
    /// percent, at a high share: typed regions and conversions, tiles
    /// moving with the loops (DRAM streams and on-chip gathers), register
    /// offsets, sliding-window and broadcast reads, reductions, transposes,
    /// scans, bias and scale columns. For the tests and fuzz targets that
    /// must reach them often, not for scale runs (the checkers walk every
    /// loop a tile moves with iteration by iteration).
    pub fn constructs() -> Self {
        GenParams {
            typed_pct: 60,
            cast_pct: 40,
            loop_term_pct: 60,
            gather_pct: 60,
            dyn_offset_pct: 30,
            pstep_pct: 30,
            broadcast_pct: 30,
            bias_pct: 30,
            column_pct: 15,
            reduce_pct: 15,
            transpose_pct: 15,
            scan_pct: 15,
            // Narrower tiles more often: a loop stacks its tiles in the
            // partitions only when they fit 128 of them.
            partition_weights: [3, 2, 2, 2],
            ..GenParams::default()
        }
    }

    /// Rejects knobs out of range with the knob's name and bound.
    pub fn validate(&self) -> Result<(), IrError> {
        fn check(what: &'static str, value: u64, min: u64, max: u64) -> Result<(), IrError> {
            if value < min || value > max {
                Err(IrError::BadShape { what, value, max })
            } else {
                Ok(())
            }
        }
        let limits = Limits::default();
        check(
            "generated instruction count",
            self.instructions as u64,
            0,
            limits.instructions as u64,
        )?;
        for &b in &self.tile_bytes {
            // At most 1 MiB: far above any SB partition, and small enough
            // that a region's DRAM tensors (up to 384 tiles) fit in u32.
            check(
                "generated tile bytes per partition",
                b as u64,
                4,
                MAX_TILE_BYTES as u64,
            )?;
            if b % 4 != 0 {
                return Err(IrError::BadShape {
                    what: "generated tile bytes (not a multiple of 4)",
                    value: b as u64,
                    max: MAX_TILE_BYTES as u64,
                });
            }
        }
        if self.tile_weights.iter().all(|&w| w == 0) {
            return Err(IrError::BadOperand {
                what: "every tile-size weight is zero",
            });
        }
        if self.partition_weights.iter().all(|&w| w == 0) {
            return Err(IrError::BadOperand {
                what: "every partition-class weight is zero",
            });
        }
        for (what, v) in [
            ("bf16 share percent", self.bf16_pct),
            ("typed share percent", self.typed_pct),
            ("cast percent", self.cast_pct),
            ("loop-term percent", self.loop_term_pct),
            ("gather percent", self.gather_pct),
            ("dynamic-offset percent", self.dyn_offset_pct),
            ("partition-step percent", self.pstep_pct),
            ("broadcast percent", self.broadcast_pct),
            ("bias percent", self.bias_pct),
            ("column percent", self.column_pct),
            ("reduce percent", self.reduce_pct),
            ("transpose percent", self.transpose_pct),
            ("scan percent", self.scan_pct),
            ("loop share percent", self.loop_pct),
            ("unknown trip percent", self.unknown_trip_pct),
            ("DMA density percent", self.dma_pct),
            ("matmul share percent", self.matmul_pct),
            ("accumulate share percent", self.accumulate_pct),
            ("in-place percent", self.inplace_pct),
            ("abutting-load percent", self.abutting_pct),
            ("duplicate-load percent", self.duplicate_pct),
            ("over-broad-load percent", self.overbroad_pct),
            ("dead-save percent", self.dead_save_pct),
        ] {
            check(what, v as u64, 0, 100)?;
        }
        check("scalar share percent", self.scalar_pct as u64, 0, 90)?;
        check(
            "generated loop depth",
            self.max_loop_depth as u64,
            0,
            MAX_GEN_DEPTH as u64,
        )?;
        check(
            "smallest trip count",
            self.trip_min as u64,
            1,
            u32::MAX as u64 - 1,
        )?;
        check(
            "largest trip count",
            self.trip_max as u64,
            self.trip_min as u64,
            u32::MAX as u64 - 1,
        )?;
        check("fewest units", self.units_min as u64, 1, MAX_UNITS as u64)?;
        check(
            "most units",
            self.units_max as u64,
            self.units_min as u64,
            MAX_UNITS as u64,
        )?;
        check("shortest chain", self.chain_min as u64, 1, MAX_UNITS as u64)?;
        check(
            "longest chain",
            self.chain_max as u64,
            self.chain_min as u64,
            MAX_UNITS as u64,
        )?;
        check(
            "PSUM accumulators",
            self.accumulators as u64,
            1,
            MAX_UNITS as u64,
        )?;
        check(
            "resident tiles",
            self.residents as u64,
            0,
            MAX_RESIDENTS as u64,
        )?;
        check("live scalars", self.live_scalars as u64, 0, 4096)?;
        Ok(())
    }
}

/// Generates a module from the knobs. Deterministic in `params`.
pub fn generate(params: &GenParams) -> Result<Module, IrError> {
    params.validate()?;
    let mut counter = Counter::default();
    drive(params, &mut counter)?;
    let mut module = Module::with_capacity(params.target.clone(), counter.cap);
    {
        let mut sink = Build {
            b: Builder::new(&mut module),
        };
        drive(params, &mut sink)?;
        sink.b.finish()?;
    }
    Ok(module)
}

// --------------------------------------------------------------------------
// Sinks: the same emission code either counts or builds.

/// Where generated entities go.
trait Sink {
    fn func(&mut self, name: &str) -> Result<(), IrError>;
    fn mem(&mut self, spec: &MemSpec<'_>) -> Result<MemLoc, IrError>;
    fn reg(&mut self, name: &str, lanes: u8) -> Result<Reg, IrError>;
    fn inst(&mut self, spec: &InstSpec<'_>) -> Result<(), IrError>;
    /// Opens a loop whose induction variable is `name`.
    fn begin_loop(&mut self, trip: u32, name: &str) -> Result<Loop, IrError>;
    fn end_loop(&mut self) -> Result<(), IrError>;
}

/// Counts what a build would create, mirroring the builder's block labels,
/// so the module can be reserved exactly. Its loop ids are those the build
/// gives (loops are made in the same order), so the patterns that name
/// them are the same in both runs.
#[derive(Copy, Clone, Debug, Default)]
struct Counter {
    cap: Capacity,
    need_block: bool,
}

fn digits(mut n: usize) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

impl Counter {
    fn name(&mut self, len: usize) {
        self.cap.names += 1;
        self.cap.name_bytes += len;
    }
}

impl Sink for Counter {
    fn func(&mut self, name: &str) -> Result<(), IrError> {
        self.cap.funcs += 1;
        self.name(name.len());
        self.need_block = true;
        Ok(())
    }
    fn mem(&mut self, spec: &MemSpec<'_>) -> Result<MemLoc, IrError> {
        self.name(spec.name.len());
        self.cap.mems += 1;
        Ok(MemLoc::new(self.cap.mems - 1))
    }
    fn reg(&mut self, name: &str, _: u8) -> Result<Reg, IrError> {
        self.name(name.len());
        self.cap.regs += 1;
        Ok(Reg::new(self.cap.regs - 1))
    }
    fn inst(&mut self, spec: &InstSpec<'_>) -> Result<(), IrError> {
        if self.need_block {
            self.name("block".len() + digits(self.cap.blocks));
            self.cap.blocks += 1;
            self.need_block = false;
        }
        self.cap.insts += 1;
        self.cap.aps += spec.inputs.len() + spec.outputs.len();
        self.cap.dims += spec
            .inputs
            .iter()
            .chain(spec.outputs)
            .map(|a| if a.dims.len() > 1 { a.dims.len() } else { 0 })
            .sum::<usize>();
        self.cap.ap_exts += spec
            .inputs
            .iter()
            .chain(spec.outputs)
            .filter(|a| !a.ext.is_plain())
            .count();
        self.cap.imms += usize::from(spec.imm != 0);
        self.cap.reg_operands += spec.uses.len() + spec.defs.len();
        Ok(())
    }
    fn begin_loop(&mut self, _: u32, name: &str) -> Result<Loop, IrError> {
        self.cap.loops += 1;
        self.name(name.len());
        self.need_block = true;
        Ok(Loop::new(self.cap.loops - 1))
    }
    fn end_loop(&mut self) -> Result<(), IrError> {
        self.need_block = true;
        Ok(())
    }
}

/// Builds into a module through the IR builder.
struct Build<'m> {
    b: Builder<'m>,
}

impl Sink for Build<'_> {
    fn func(&mut self, name: &str) -> Result<(), IrError> {
        self.b.func(name).map(|_| ())
    }
    fn mem(&mut self, spec: &MemSpec<'_>) -> Result<MemLoc, IrError> {
        let MemSpec {
            name,
            space,
            partitions: parts,
            bytes,
            dtype: ty,
            align: _, // generated locations keep the default alignment
            flags,
        } = *spec;
        let l = self.b.mem(name, space, parts, bytes, ty.size(), flags)?;
        if !ty.is_raw() {
            self.b.module().set_dtype(l, ty)?;
        }
        Ok(l)
    }
    fn reg(&mut self, name: &str, lanes: u8) -> Result<Reg, IrError> {
        self.b.reg(name, lanes)
    }
    fn inst(&mut self, spec: &InstSpec<'_>) -> Result<(), IrError> {
        self.b.inst(spec).map(|_| ())
    }
    fn begin_loop(&mut self, trip: u32, name: &str) -> Result<Loop, IrError> {
        let l = self.b.begin_loop(trip)?;
        self.b.module().set_loop_name(l, name)?;
        Ok(l)
    }
    fn end_loop(&mut self) -> Result<(), IrError> {
        self.b.end_loop()
    }
}

// --------------------------------------------------------------------------
// Emission.

/// A name made of a prefix and a number.
type NameBuf = heapless::String<32>;

fn name(prefix: &str, n: u32) -> NameBuf {
    let mut s = NameBuf::new();
    // 32 bytes hold every prefix used here plus ten digits.
    let _ = write!(s, "{prefix}{n}");
    s
}

/// A declared tensor and its shape.
#[derive(Copy, Clone, Debug)]
struct Tile {
    loc: MemLoc,
    parts: u16,
    bytes: u32,
    ty: DType,
}

/// How a view moves: a `Copy` form of [`ApExt`] (loop terms, register
/// term, partition step).
#[derive(Copy, Clone, Debug)]
struct Motion {
    terms: [IvTerm; MAX_GEN_DEPTH as usize],
    n_terms: u8,
    reg: Option<RegTerm>,
    pstep: Option<u32>,
}

/// A view that does not move.
const STILL: Motion = Motion {
    terms: [IvTerm::affine(Loop::INVALID, 0, 0); MAX_GEN_DEPTH as usize],
    n_terms: 0,
    reg: None,
    pstep: None,
};

impl Motion {
    /// Moves down `parts` partitions per iteration of `lp`: each iteration
    /// its own rows of a tile that stacks one slice per iteration.
    fn rows_per_iteration(lp: Loop, parts: u16) -> Motion {
        let mut motion = STILL;
        motion.terms[0] = IvTerm::affine(lp, parts as i16, 0);
        motion.n_terms = 1;
        motion
    }

    fn ext(&self) -> ApExt {
        let mut e = ApExt {
            pstep: self.pstep,
            reg: self.reg,
            ..ApExt::default()
        };
        for t in self.terms.iter().take(self.n_terms as usize) {
            // MAX_GEN_DEPTH terms at most, the pattern's limit.
            let _ = e.terms.try_push(*t);
        }
        e
    }
}

/// A contiguous byte range `[lo, lo + len)` of the first `parts`
/// partitions of a tile (all of them but in a tile that stacks one slice
/// per iteration in its partitions), moved by `motion`.
#[derive(Copy, Clone, Debug)]
struct View {
    tile: Tile,
    parts: u16,
    lo: u32,
    len: u32,
    motion: Motion,
}

impl Tile {
    fn elem(self) -> u32 {
        self.ty.size().max(1) as u32
    }
    fn full(self) -> View {
        self.range(0, self.bytes)
    }
    fn range(self, lo: u32, len: u32) -> View {
        View {
            tile: self,
            parts: self.parts,
            lo,
            len,
            motion: STILL,
        }
    }
}

impl View {
    /// Elements per partition.
    fn elems(&self) -> u32 {
        self.len / self.tile.elem()
    }
    /// The first `n` elements of the view (same motion).
    fn first(self, n: u32) -> View {
        View {
            len: n * self.tile.elem(),
            ..self
        }
    }
    fn moving(self, motion: Motion) -> View {
        View { motion, ..self }
    }
    /// The first `parts` partitions only.
    fn rows(self, parts: u16) -> View {
        View { parts, ..self }
    }
    fn ap(&self) -> ApSpec {
        let e = self.tile.elem();
        let elem = if self.lo % e == 0 && self.len % e == 0 {
            e
        } else {
            1
        };
        let mut dims = ArrayVec::new();
        dims.push(Dim::new(1, self.len / elem));
        ApSpec {
            loc: self.tile.loc,
            part_start: 0,
            part_count: self.parts,
            offset: self.lo,
            elem_size: elem as u8,
            dims,
            ext: self.motion.ext(),
        }
    }
}

/// Loop terms that give each iteration of the known-trip loops `loops`
/// (innermost first) its own `piece`-byte slot — slot `iv_0 + T_0 × (iv_1 +
/// T_1 × …)` — taking loops from the innermost outwards while `copies`
/// streams of `T × piece` bytes stay within `cap`. Returns the motion and
/// the slot count `T` (1 and no term when not even the innermost fits).
fn slots(loops: &[(Loop, u32)], piece: u32, copies: u32, cap: u64) -> (Motion, u32) {
    let mut m = STILL;
    let mut t: u64 = 1;
    for &(lp, trip) in loops {
        let next = t * trip as u64;
        let outer = m.n_terms > 0;
        if next * piece as u64 * copies as u64 > cap
            || m.n_terms as usize >= m.terms.len()
            || (outer && next > MAX_SLOTS)
        {
            break;
        }
        m.terms[m.n_terms as usize] = IvTerm::affine(lp, 0, (t * piece as u64) as i64);
        m.n_terms += 1;
        t = next;
    }
    (m, t as u32)
}

/// Naming counters and the long-lived registers; `Copy` so that a dry run
/// works on a copy.
#[derive(Copy, Clone, Debug)]
struct State {
    tiles: u32,
    temps: u32,
    loops: u32,
    regions: u32,
    one: Reg,
    long_first: u32,
    long_count: u32,
    long_next: u32,
}

impl State {
    /// The next long-lived register, round robin (`one` when there is none).
    fn long(&mut self) -> Reg {
        if self.long_count == 0 {
            return self.one;
        }
        let r = Reg::from_u32(self.long_first + self.long_next);
        self.long_next = (self.long_next + 1) % self.long_count;
        r
    }
}

/// Every random decision of a region that changes its size, so that it can
/// be shrunk to fit the remaining instruction budget. Per-unit choices come
/// from `seed`.
#[derive(Copy, Clone, Debug)]
struct RegionPlan {
    seed: u64,
    parts: u16,
    bytes: u32,
    /// The tiles' element type (untyped: `Raw` of the element size).
    ty: DType,
    depth: u8,
    trips: [u32; MAX_GEN_DEPTH as usize + 1],
    units: u8,
    chain: u8,
    residents: u8,
    accumulators: u8,
}

impl RegionPlan {
    fn draw(rng: &mut Rng, p: &GenParams) -> RegionPlan {
        let seed = rng.next_u64();
        let parts = match rng.weighted(&p.partition_weights) {
            i @ 0..=2 => (p.target.sb_partitions / PARTITION_DIVISORS[i]).max(1),
            _ => (1u16 << rng.below(5)).min(p.target.sb_partitions.max(1)),
        };
        let bytes = p.tile_bytes[rng.weighted(&p.tile_weights)];
        let elem = if rng.percent(p.bf16_pct) { 2 } else { 4 };
        let ty = match (rng.percent(p.typed_pct), elem) {
            (false, e) => DType::Raw(e),
            (true, 4) => DType::F32,
            // fp16 is the rarer 2-byte float of the kernels.
            (true, _) if rng.percent(25) => DType::F16,
            (true, _) => DType::Bf16,
        };
        let depth = if p.max_loop_depth > 0 && rng.percent(p.loop_pct) {
            rng.range(1, p.max_loop_depth as u64) as u8
        } else {
            0
        };
        let mut trips = [1; MAX_GEN_DEPTH as usize + 1];
        for t in trips.iter_mut() {
            *t = if rng.percent(p.unknown_trip_pct) {
                UNKNOWN_TRIP
            } else {
                rng.range(p.trip_min as u64, p.trip_max as u64) as u32
            };
        }
        let units = rng.range(p.units_min as u64, p.units_max as u64) as u8;
        // The stationary operand of an accumulation is a [P x P] slice of
        // the weights: a tile of fewer than P elements cannot hold it.
        let accumulators = if rng.percent(p.accumulate_pct) && parts as u32 * elem as u32 <= bytes {
            p.accumulators
        } else {
            0
        };
        let residents = if accumulators > 0 {
            p.residents.max(1)
        } else {
            p.residents
        };
        RegionPlan {
            seed,
            parts,
            bytes,
            ty,
            depth,
            trips,
            units,
            chain: p.chain_max.max(p.chain_min),
            residents,
            accumulators,
        }
    }

    fn typed(&self) -> bool {
        !self.ty.is_raw()
    }

    /// The type of PSUM tiles and of their evacuated copies: fp32 (the PE
    /// accumulates in fp32), untyped 4-byte elements in untyped regions.
    fn acc_ty(&self) -> DType {
        if self.typed() {
            DType::F32
        } else {
            DType::Raw(4)
        }
    }

    /// Makes the region smaller by one step; false when it is minimal.
    fn shrink(&mut self) -> bool {
        if self.units > 1 {
            self.units -= 1;
        } else if self.chain > 1 {
            self.chain -= 1;
        } else if self.accumulators > 1 {
            self.accumulators -= 1;
        } else if self.residents > 1 || (self.residents == 1 && self.accumulators == 0) {
            self.residents -= 1;
        } else if self.depth > 0 {
            self.depth -= 1;
        } else if self.accumulators == 1 {
            self.accumulators = 0;
        } else {
            return false;
        }
        true
    }
}

/// The whole program: entry scalars, then regions until the budget is
/// spent, then scalar filler for the last few instructions.
fn drive<S: Sink>(p: &GenParams, s: &mut S) -> Result<(), IrError> {
    let mut rng = Rng::new(p.seed);
    let budget = p.instructions;
    let mut emitted = 0usize;
    s.func("main")?;
    let mut st = State {
        tiles: 0,
        temps: 0,
        loops: 0,
        regions: 0,
        one: Reg::INVALID,
        long_first: 0,
        long_count: 0,
        long_next: 0,
    };
    if budget == 0 {
        return Ok(());
    }
    st.one = s.reg("one", 1)?;
    imm(s, st.one, 1)?;
    emitted += 1;
    st.long_first = st.one.as_u32() + 1;
    for k in 0..p.live_scalars as u32 {
        if emitted == budget {
            break;
        }
        let lanes = if k % 4 == 3 { 2 } else { 1 };
        let r = s.reg(&name("L", k), lanes)?;
        imm(s, r, 64 * (k as i64 + 1))?;
        st.long_count += 1;
        emitted += 1;
    }
    while emitted < budget {
        let remaining = budget - emitted;
        let mut plan = RegionPlan::draw(&mut rng, p);
        let fits = loop {
            let mut dry = Counter::default();
            let mut dry_state = st;
            region(&mut dry, &mut dry_state, p, &plan)?;
            if dry.cap.insts <= remaining {
                break Some(dry.cap.insts);
            }
            if !plan.shrink() {
                break None;
            }
        };
        match fits {
            Some(n) if n > 0 => {
                region(s, &mut st, p, &plan)?;
                emitted += n;
            }
            _ => {
                for _ in 0..remaining {
                    filler(s, &mut st)?;
                }
                emitted = budget;
            }
        }
    }
    Ok(())
}

fn imm<S: Sink>(s: &mut S, r: Reg, value: i64) -> Result<(), IrError> {
    let mut spec = InstSpec::new(Opcode::ScalarImm);
    let defs = [r];
    spec.defs = &defs;
    spec.imm = value;
    s.inst(&spec)
}

fn alu<S: Sink>(s: &mut S, op: SubOp, def: Reg, uses: &[Reg]) -> Result<(), IrError> {
    let mut spec = InstSpec::new(Opcode::ScalarAlu);
    spec.subop = op;
    let defs = [def];
    spec.defs = &defs;
    spec.uses = uses;
    s.inst(&spec)
}

/// One scalar instruction of the closing filler: a fresh value computed from
/// two long-lived ones.
fn filler<S: Sink>(s: &mut S, st: &mut State) -> Result<(), IrError> {
    let r = s.reg(&name("f", st.temps), 1)?;
    st.temps += 1;
    let (a, b) = (st.long(), st.one);
    alu(s, SubOp::Add, r, &[a, b])
}

/// A DMA; `offset` is the register a register term of `dst` or `src` reads
/// (its use 0).
fn dma<S: Sink>(
    s: &mut S,
    op: Opcode,
    dst: View,
    src: View,
    offset: Option<Reg>,
    queue: u8,
) -> Result<(), IrError> {
    let uses: ArrayVec<Reg, 1> = offset.into_iter().collect();
    let mut head = InstSpec::new(op);
    head.queue = queue;
    emit(s, head, dst, &[src], &uses)
}

fn compute<S: Sink>(
    s: &mut S,
    op: Opcode,
    sub: SubOp,
    dst: View,
    srcs: &[View],
    uses: &[Reg],
    flags: InstFlags,
) -> Result<(), IrError> {
    let mut head = InstSpec::new(op);
    head.subop = sub;
    head.flags = flags;
    emit(s, head, dst, srcs, uses)
}

/// Emits `head` (its opcode, sub-op, flags, queue) writing `dst` from the
/// first three of `srcs`, with the register operands `uses`.
fn emit<S: Sink>(
    s: &mut S,
    head: InstSpec<'_>,
    dst: View,
    srcs: &[View],
    uses: &[Reg],
) -> Result<(), IrError> {
    let outs = [dst.ap()];
    let mut ins: ArrayVec<ApSpec, 3> = ArrayVec::new();
    for v in srcs.iter().take(3) {
        ins.push(v.ap());
    }
    s.inst(&InstSpec {
        inputs: &ins,
        outputs: &outs,
        uses,
        ..head
    })
}

/// [`compute`] with no register operand and no flag: the common case.
fn compute_plain<S: Sink>(
    s: &mut S,
    op: Opcode,
    sub: SubOp,
    dst: View,
    srcs: &[View],
) -> Result<(), IrError> {
    compute(s, op, sub, dst, srcs, &[], InstFlags::empty())
}

/// How the first unit of a region gathers a piece of its result, one slice
/// per iteration of the loops around it, into a tile saved after them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Gather {
    /// It does not.
    No,
    /// Into the bytes of an SB tile (`+g*iv`).
    Bytes,
    /// Into the partitions of an SB tile (`+P*iv`, `P` partitions per
    /// iteration), when the innermost loop's slices fit 128 partitions.
    Parts,
    /// Into the bytes of a PSUM bank, by a matmul (the result's `[P x P]`
    /// slice times a `[P x g]` operand), evacuated after the loops.
    Psum,
}

/// DRAM tensors that units streaming with the loops read and write: slot
/// `rank × slots + iteration` of `bytes` each.
#[derive(Copy, Clone, Debug)]
struct Stream {
    input: Tile,
    output: Tile,
    motion: Motion,
    /// Bytes of one unit's stream (every iteration's slot).
    span: u32,
}

/// The per-region context shared by its units.
struct Ctx {
    input: Tile,
    output: Tile,
    scratch: Option<Tile>,
    residents: ArrayVec<Tile, { MAX_RESIDENTS as usize }>,
    /// PSUM tile bytes: the tile size capped at one bank.
    psum_bytes: u32,
    queue: u8,
    /// The resident the next binary step reads (round robin, so that every
    /// resident is read and stays live over the loop nest).
    next_resident: usize,
    /// The loops of known trip count around the units, innermost first.
    known: ArrayVec<(Loop, u32), { MAX_GEN_DEPTH as usize }>,
    /// The innermost loop's counter (the induction variable in a register).
    counter: Option<Reg>,
    /// Units whose tiles stream with the loops (bit `j`).
    streaming: u64,
    stream: Option<Stream>,
    /// How the first unit gathers into a loop-indexed tile, and the tile
    /// once it did.
    gather: Gather,
    gathered: Option<(Tile, Space)>,
}

/// Declares the location `spec` and returns it as a tile.
fn mem_tile<S: Sink>(s: &mut S, spec: MemSpec<'_>) -> Result<Tile, IrError> {
    let loc = s.mem(&spec)?;
    Ok(Tile {
        loc,
        parts: spec.partitions,
        bytes: spec.bytes,
        ty: spec.dtype,
    })
}

fn tile<S: Sink>(
    s: &mut S,
    st: &mut State,
    space: Space,
    parts: u16,
    bytes: u32,
    ty: DType,
) -> Result<Tile, IrError> {
    let prefix = if space == Space::Psum { "p" } else { "t" };
    let t = mem_tile(
        s,
        MemSpec {
            name: &name(prefix, st.tiles),
            space,
            partitions: parts,
            bytes,
            dtype: ty,
            align: 0,
            flags: MemFlags::empty(),
        },
    )?;
    st.tiles += 1;
    Ok(t)
}

/// Opens a counted, named loop: `$iN = imm 0; loop ivN in T {`.
fn open_loop<S: Sink>(s: &mut S, st: &mut State, trip: u32) -> Result<(Reg, Loop), IrError> {
    let i = s.reg(&name("i", st.loops), 1)?;
    imm(s, i, 0)?;
    let l = s.begin_loop(trip, &name("iv", st.loops))?;
    st.loops += 1;
    Ok((i, l))
}

/// Closes a counted loop: `$iN = alu add $iN, $one; branch $iN }`.
fn close_loop<S: Sink>(s: &mut S, st: &State, i: Reg) -> Result<(), IrError> {
    alu(s, SubOp::Add, i, &[i, st.one])?;
    let mut spec = InstSpec::new(Opcode::Branch);
    let uses = [i];
    spec.uses = &uses;
    s.inst(&spec)?;
    s.end_loop()
}

fn region<S: Sink>(
    s: &mut S,
    st: &mut State,
    p: &GenParams,
    plan: &RegionPlan,
) -> Result<(), IrError> {
    let mut rng = Rng::new(plan.seed);
    let r = st.regions;
    st.regions += 1;
    let (parts, bytes, ty) = (plan.parts, plan.bytes, plan.ty);
    let bank = p.target.psum_bank_bytes.max(4) & !3;
    // Units own input slots `j * SLOTS_PER_UNIT ..` and output slot `j`;
    // accumulator `n` owns the input and output slots after them, so no
    // two loads of a region read the same slice unless a DMA pattern asks.
    let (units, accs) = (plan.units as u32, plan.accumulators as u32);
    let dram = |s: &mut S, prefix: &str, n: u32, flags| {
        mem_tile(
            s,
            MemSpec {
                name: &name(prefix, r),
                space: Space::Dram,
                partitions: parts,
                bytes: bytes * n,
                dtype: ty,
                align: 0,
                flags,
            },
        )
    };
    let input = dram(s, "in", units * SLOTS_PER_UNIT + accs, MemFlags::INPUT)?;
    let output = dram(s, "out", units + accs, MemFlags::OUTPUT)?;
    let scratch = if p.dead_save_pct > 0 {
        Some(dram(s, "scr", 1, MemFlags::INTERNAL)?)
    } else {
        None
    };
    let mut ctx = Ctx {
        input,
        output,
        scratch,
        residents: ArrayVec::new(),
        psum_bytes: bytes.min(bank),
        queue: (r % p.target.dma_queues_per_engine.max(1) as u32) as u8,
        next_resident: 0,
        known: ArrayVec::new(),
        counter: None,
        streaming: 0,
        stream: None,
        gather: Gather::No,
        gathered: None,
    };
    if plan.residents > 0 {
        let wd = dram(s, "w", plan.residents as u32, MemFlags::INPUT)?;
        for k in 0..plan.residents as u32 {
            let t = tile(s, st, Space::Sb, parts, bytes, ty)?;
            dma(
                s,
                Opcode::Load,
                t.full(),
                wd.range(k * bytes, bytes),
                None,
                ctx.queue,
            )?;
            ctx.residents.push(t);
        }
    }
    let mut counters: ArrayVec<(Reg, Loop, u32), { MAX_GEN_DEPTH as usize }> = ArrayVec::new();
    for d in 0..plan.depth as usize {
        let (i, l) = open_loop(s, st, plan.trips[d])?;
        counters.push((i, l, plan.trips[d]));
    }
    for &(_, l, trip) in counters.iter().rev() {
        if trip != UNKNOWN_TRIP {
            ctx.known.push((l, trip));
        }
    }
    ctx.counter = counters.last().map(|c| c.0);
    // Which units stream their tiles with the loops, and whether the first
    // unit gathers: drawn for every region, so that the draws that follow
    // do not depend on the loops.
    for j in 0..units.min(64) {
        if rng.percent(p.loop_term_pct) {
            ctx.streaming |= 1 << j;
        }
    }
    let gather = rng.percent(p.gather_pct);
    let kind = rng.below(3);
    // Streams stack their tiles in the DRAM rows (partitions) instead of
    // the bytes when the innermost loop's tiles fit the target's partitions.
    let stacked = rng.percent(50);
    if gather && !ctx.known.is_empty() {
        ctx.gather = [Gather::Bytes, Gather::Parts, Gather::Psum][kind as usize];
    }
    let n_stream = ctx.streaming.count_ones();
    if let (true, Some(&(lp, trip))) = (n_stream > 0, ctx.known.first()) {
        if stacked && trip as u64 * parts as u64 <= p.target.sb_partitions as u64 {
            let motion = Motion::rows_per_iteration(lp, parts);
            let rows = trip as u16 * parts;
            let stream = |s: &mut S, prefix: &str, flags| {
                let bytes = n_stream * bytes;
                mem_tile(
                    s,
                    MemSpec {
                        name: &name(prefix, r),
                        space: Space::Dram,
                        partitions: rows,
                        bytes,
                        dtype: ty,
                        align: 0,
                        flags,
                    },
                )
            };
            ctx.stream = Some(Stream {
                input: stream(s, "xs", MemFlags::INPUT)?,
                output: stream(s, "ys", MemFlags::OUTPUT)?,
                motion,
                span: bytes,
            });
        } else {
            let (motion, t) = slots(&ctx.known, bytes, n_stream, STREAM_CAP);
            if motion.n_terms > 0 {
                ctx.stream = Some(Stream {
                    input: dram(s, "xs", n_stream * t, MemFlags::INPUT)?,
                    output: dram(s, "ys", n_stream * t, MemFlags::OUTPUT)?,
                    motion,
                    span: t * bytes,
                });
            }
        }
    }
    if plan.accumulators > 0 {
        accumulate(s, st, p, &ctx, plan, &mut rng, r)?;
    }
    for j in 0..plan.units as u32 {
        unit(s, st, p, plan, &mut ctx, &mut rng, j)?;
    }
    while let Some((i, _, _)) = counters.pop() {
        close_loop(s, st, i)?;
    }
    // The gathered tile holds every iteration's slice now: save it whole
    // (from SB: a PSUM tile is evacuated first).
    if let Some((mut g, space)) = ctx.gathered {
        if space == Space::Psum {
            let o = tile(s, st, Space::Sb, g.parts, g.bytes, g.ty)?;
            compute_plain(
                s,
                Opcode::Activation,
                SubOp::Identity,
                o.full(),
                &[g.full()],
            )?;
            g = o;
        }
        let out = mem_tile(
            s,
            MemSpec {
                name: &name("go", r),
                space: Space::Dram,
                partitions: g.parts,
                bytes: g.bytes,
                dtype: g.ty,
                align: 0,
                flags: MemFlags::OUTPUT,
            },
        )?;
        dma(s, Opcode::Save, out.full(), g.full(), None, ctx.queue)?;
    }
    Ok(())
}

/// PSUM accumulators live across a reduction loop: memset before it,
/// `acc = matmul w, x, acc` inside (stationary: a `[P x P]` slice of the
/// first resident; moving: a fresh `[P x N]` tile, `N` fp32 filling at
/// most a bank), evacuation and save after it. With a known trip, the K
/// tiles may stream from DRAM with the loop, and the stationary slice move
/// through the weights when they hold every K step.
fn accumulate<S: Sink>(
    s: &mut S,
    st: &mut State,
    p: &GenParams,
    ctx: &Ctx,
    plan: &RegionPlan,
    rng: &mut Rng,
    r: u32,
) -> Result<(), IrError> {
    let (parts, bytes, ty) = (plan.parts, plan.bytes, plan.ty);
    let e = ty.size() as u32;
    let w = match ctx.residents.first() {
        Some(&w) => w,
        None => return Ok(()),
    };
    let n = ctx.psum_bytes / 4;
    let xbytes = n * e;
    let mut accs: ArrayVec<Tile, { MAX_UNITS as usize }> = ArrayVec::new();
    for _ in 0..plan.accumulators {
        let a = tile(s, st, Space::Psum, parts, n * 4, plan.acc_ty())?;
        let mut spec = InstSpec::new(Opcode::Memset);
        let outs = [a.full().ap()];
        spec.outputs = &outs;
        s.inst(&spec)?;
        accs.push(a);
    }
    let trip = plan.trips[MAX_GEN_DEPTH as usize];
    let (k, lp) = open_loop(s, st, trip)?;
    let stream = rng.percent(p.loop_term_pct) && trip != UNKNOWN_TRIP;
    let mut ka: Option<(Tile, Motion, u32)> = None;
    let mut stationary = STILL;
    if stream {
        let (motion, t) = slots(&[(lp, trip)], xbytes, accs.len() as u32, STREAM_CAP);
        if motion.n_terms > 0 {
            let x = mem_tile(
                s,
                MemSpec {
                    name: &name("ka", r),
                    space: Space::Dram,
                    partitions: parts,
                    bytes: accs.len() as u32 * t * xbytes,
                    dtype: ty,
                    align: 0,
                    flags: MemFlags::INPUT,
                },
            )?;
            ka = Some((x, motion, t * xbytes));
        }
        let (m, _) = slots(&[(lp, trip)], parts as u32 * e, 1, bytes as u64);
        stationary = m;
    }
    for (j, &a) in accs.iter().enumerate() {
        let x = tile(s, st, Space::Sb, parts, xbytes, ty)?;
        let src = match ka {
            Some((t, motion, span)) => t.range(j as u32 * span, xbytes).moving(motion),
            None => {
                let slot = plan.units as u32 * SLOTS_PER_UNIT + j as u32;
                ctx.input.range(slot * bytes, xbytes)
            }
        };
        dma(s, Opcode::Load, x.full(), src, None, ctx.queue)?;
        compute_plain(
            s,
            Opcode::Matmul,
            SubOp::None,
            a.full(),
            &[
                w.range(0, parts as u32 * e).moving(stationary),
                x.full(),
                a.full(),
            ],
        )?;
    }
    close_loop(s, st, k)?;
    for (j, &a) in accs.iter().enumerate() {
        let o = tile(s, st, Space::Sb, parts, n * 4, plan.acc_ty())?;
        compute_plain(
            s,
            Opcode::Activation,
            SubOp::Identity,
            o.full(),
            &[a.full()],
        )?;
        let o = convert(s, st, plan, o.full(), ty)?;
        let out = ctx
            .output
            .range((plan.units as u32 + j as u32) * bytes, o.len);
        dma(s, Opcode::Save, out, o, None, ctx.queue)?;
    }
    Ok(())
}

/// `v` in type `to`: itself when it has that type (or the region is
/// untyped: a DMA copies untyped bytes of any size), else a `tensor_copy`
/// that converts it.
fn convert<S: Sink>(
    s: &mut S,
    st: &mut State,
    plan: &RegionPlan,
    v: View,
    to: DType,
) -> Result<View, IrError> {
    if !plan.typed() || v.tile.ty == to {
        return Ok(v);
    }
    let n = v.elems();
    let t = tile(s, st, Space::Sb, plan.parts, n * to.size() as u32, to)?;
    compute_plain(s, Opcode::TensorCopy, SubOp::None, t.full(), &[v])?;
    Ok(t.full())
}

const ACTIVATIONS: [SubOp; 8] = [
    SubOp::Exp,
    SubOp::Relu,
    SubOp::Gelu,
    SubOp::Tanh,
    SubOp::Sigmoid,
    SubOp::Identity,
    SubOp::Square,
    SubOp::Rsqrt,
];
const BINARY: [SubOp; 5] = [SubOp::Add, SubOp::Sub, SubOp::Mul, SubOp::Max, SubOp::Min];
const SCALAR_OPS: [SubOp; 3] = [SubOp::Mul, SubOp::Add, SubOp::Max];
/// What a per-partition column does to its rows (normalizing by a sum or a
/// maximum, centering).
const COLUMN_OPS: [SubOp; 4] = [SubOp::Sub, SubOp::Mul, SubOp::Div, SubOp::Max];
const REDUCTIONS: [SubOp; 3] = [SubOp::Add, SubOp::Max, SubOp::Min];
const ALU_OPS: [SubOp; 4] = [SubOp::Add, SubOp::Mul, SubOp::Shl, SubOp::And];

/// What one compute step needs besides its operands: the region, the
/// knobs, the unit's operand slice.
struct StepCtx<'a> {
    p: &'a GenParams,
    plan: &'a RegionPlan,
    /// The DRAM slice a fresh operand is loaded from.
    operand_src: View,
    bank: u32,
}

impl StepCtx<'_> {
    /// True when a step may put a transient tile in PSUM: the region's
    /// accumulators, live across its loop, leave a bank free (a region
    /// with one accumulator per bank would otherwise ask for more banks
    /// than the target has, which no placement can give).
    fn psum_bank_free(&self) -> bool {
        (self.plan.accumulators as u32) < self.p.target.psum_usable_banks as u32
    }
}

/// A compute step's emitter: where entities go, the generator's state, the
/// step's region and unit, the random source. The steps call each other
/// (a step that does not fit falls back to an activation) through it.
struct Step<'a, 'p, S> {
    s: &'a mut S,
    st: &'a mut State,
    c: &'a StepCtx<'p>,
    ctx: &'a mut Ctx,
    rng: &'a mut Rng,
}

impl<S: Sink> Step<'_, '_, S> {
    /// An activation of `cur` (maybe with a bias column, maybe converting).
    fn activation(&mut self, cur: View, inplace: InstFlags) -> Result<View, IrError> {
        let from = cur.tile.ty;
        let to = if self.c.plan.typed() && self.rng.percent(self.c.p.cast_pct) {
            if from == DType::F32 {
                if self.c.plan.ty == DType::F32 {
                    DType::Bf16
                } else {
                    self.c.plan.ty
                }
            } else {
                DType::F32
            }
        } else {
            from
        };
        let bias = if self.rng.percent(self.c.p.bias_pct) {
            // A per-partition bias vector among the weights, else the input's
            // row maximum (softmax's shift).
            Some(match self.ctx.residents.first() {
                Some(&w) => w.range(0, w.elem()),
                None => reduced_column(self.s, self.st, self.rng, cur)?,
            })
        } else {
            None
        };
        let nx = fresh(self.s, self.st, &cur, cur.elems(), to)?;
        let f = if to == from {
            inplace
        } else {
            InstFlags::empty()
        };
        let sub = self.rng.pick(&ACTIVATIONS, SubOp::Identity);
        match bias {
            Some(b) => compute(
                self.s,
                Opcode::Activation,
                sub,
                nx.full(),
                &[cur, b],
                &[],
                f,
            )?,
            None => compute(self.s, Opcode::Activation, sub, nx.full(), &[cur], &[], f)?,
        }
        Ok(nx.full())
    }

    /// `matmul` of a `[P x P]` stationary slice of `cur` with a `[P x N]`
    /// operand into PSUM, evacuated to SB; an activation when `cur` holds
    /// fewer than `P` elements.
    fn matmul(&mut self, cur: View) -> Result<View, IrError> {
        let parts = cur.tile.parts as u32;
        if parts > self.c.p.target.sb_partitions as u32
            || cur.elems() < parts
            || self.c.bank < 4
            || !self.c.psum_bank_free()
        {
            return self.activation(cur, InstFlags::empty());
        }
        let rhs = self.operand()?;
        let n = rhs.elems().min(self.c.bank / 4);
        let acc = self.c.plan.acc_ty();
        let ps = tile(self.s, self.st, Space::Psum, cur.tile.parts, n * 4, acc)?;
        compute_plain(
            self.s,
            Opcode::Matmul,
            SubOp::None,
            ps.full(),
            &[cur.first(parts), rhs.first(n)],
        )?;
        evacuated(self.s, self.st, self.rng, ps)
    }

    /// `transpose` of the first `F <= 128` elements of `cur` (`[P x F]` to
    /// PSUM `[F x P]`), its evacuation, and the product of the transposed tile
    /// with itself (stationary and moving `[F x P]`, PSUM `[P x P]`), evacuated:
    /// the attention-score shape, back on `P` partitions. An activation when
    /// `P` fp32 do not fit a PSUM bank.
    fn transpose(&mut self, cur: View) -> Result<View, IrError> {
        let parts = cur.tile.parts;
        let pe = self.c.p.target.sb_partitions as u32;
        if parts as u32 > pe || parts as u32 * 4 > self.c.bank || !self.c.psum_bank_free() {
            return self.activation(cur, InstFlags::empty());
        }
        let f = cur.elems().min(pe).max(1) as u16;
        let acc = self.c.plan.acc_ty();
        let pb = parts as u32 * 4;
        let tt = tile(self.s, self.st, Space::Psum, f, pb, acc)?;
        compute_plain(
            self.s,
            Opcode::Transpose,
            SubOp::None,
            tt.full(),
            &[cur.first(f as u32)],
        )?;
        let sb = tile(self.s, self.st, Space::Sb, f, pb, acc)?;
        compute_plain(
            self.s,
            Opcode::TensorCopy,
            SubOp::None,
            sb.full(),
            &[tt.full()],
        )?;
        let g = tile(self.s, self.st, Space::Psum, parts, pb, acc)?;
        compute_plain(
            self.s,
            Opcode::Matmul,
            SubOp::None,
            g.full(),
            &[sb.full(), sb.full()],
        )?;
        evacuated(self.s, self.st, self.rng, g)
    }

    /// The first unit's gather (see [`Gather`]): `g <= GATHER_ELEMS` elements
    /// of `cur` per iteration into their own slice of a tile that lives over
    /// the loops, stacked in bytes, in partitions (the innermost loop's), or in
    /// a PSUM bank through a matmul. A kind that does not fit falls back to
    /// bytes; nothing when not even the innermost loop's slices fit.
    fn gather(&mut self, cur: View) -> Result<(), IrError> {
        let parts = cur.parts;
        let acc = self.c.plan.acc_ty();
        let pe = self.c.p.target.sb_partitions as u32;
        let mut kind = self.ctx.gather;
        if kind == Gather::Psum
            && (cur.elems() < parts as u32 || parts as u32 > pe || !self.c.psum_bank_free())
        {
            kind = Gather::Bytes;
        }
        if kind == Gather::Psum {
            let rhs = self.operand()?;
            let g = cur.elems().min(rhs.elems()).min(GATHER_ELEMS);
            let (motion, t) = slots(&self.ctx.known, g * 4, 1, self.c.bank as u64);
            if motion.n_terms == 0 {
                return Ok(());
            }
            let gp = tile(self.s, self.st, Space::Psum, parts, t * g * 4, acc)?;
            let dst = gp.range(0, g * 4).moving(motion);
            let srcs = [cur.first(parts as u32), rhs.first(g)];
            compute_plain(self.s, Opcode::Matmul, SubOp::None, dst, &srcs)?;
            self.ctx.gathered = Some((gp, Space::Psum));
            return Ok(());
        }
        let g = cur.elems().min(GATHER_ELEMS);
        // The SB tile and this iteration's slice of it: stacked in the
        // partitions when the innermost loop's slices fit them, else in bytes.
        let stacked = match (kind, self.ctx.known.first()) {
            (Gather::Parts, Some(&(lp, trip))) => {
                Some((lp, trip as u64 * parts as u64)).filter(|&(_, rows)| rows <= pe as u64)
            }
            _ => None,
        };
        let (gt, dst) = if let Some((lp, rows)) = stacked {
            let gt = tile(self.s, self.st, Space::Sb, rows as u16, g * 4, acc)?;
            let motion = Motion::rows_per_iteration(lp, parts);
            (gt, gt.full().rows(parts).moving(motion))
        } else {
            let (motion, t) = slots(&self.ctx.known, g * 4, 1, GATHER_CAP);
            if motion.n_terms == 0 {
                return Ok(());
            }
            let gt = tile(self.s, self.st, Space::Sb, parts, t * g * 4, acc)?;
            (gt, gt.range(0, g * 4).moving(motion))
        };
        compute_plain(
            self.s,
            Opcode::TensorCopy,
            SubOp::None,
            dst,
            &[cur.first(g)],
        )?;
        self.ctx.gathered = Some((gt, Space::Sb));
        Ok(())
    }

    /// The second operand of a binary step: a fresh load from the unit's
    /// operand slice (DMA density) or a resident tile.
    fn operand(&mut self) -> Result<View, IrError> {
        if !self.ctx.residents.is_empty() && !self.rng.percent(self.c.p.dma_pct) {
            let k = self.ctx.next_resident % self.ctx.residents.len();
            self.ctx.next_resident = k + 1;
            if let Some(t) = self.ctx.residents.get(k) {
                return Ok(t.full());
            }
        }
        let t = tile(
            self.s,
            self.st,
            Space::Sb,
            self.c.plan.parts,
            self.c.plan.bytes,
            self.c.plan.ty,
        )?;
        dma(
            self.s,
            Opcode::Load,
            t.full(),
            self.c.operand_src,
            None,
            self.ctx.queue,
        )?;
        Ok(t.full())
    }
}

/// A new SB tile with `v`'s partitions, `n` elements of type `ty`.
fn fresh<S: Sink>(s: &mut S, st: &mut State, v: &View, n: u32, ty: DType) -> Result<Tile, IrError> {
    tile(s, st, Space::Sb, v.parts, n * ty.size() as u32, ty)
}

/// `tensor_scalar` of `ins` (scaled by the registers `regs`, or by the
/// per-partition column among `ins`) into `nx`, its op picked from `ops`.
fn tensor_scalar<S: Sink>(
    s: &mut S,
    rng: &mut Rng,
    nx: Tile,
    ops: &[SubOp],
    ins: &[View],
    regs: &[Reg],
    f: InstFlags,
) -> Result<View, IrError> {
    let sub = rng.pick(ops, SubOp::Mul);
    compute(s, Opcode::TensorScalar, sub, nx.full(), ins, regs, f)?;
    Ok(nx.full())
}

/// A `[P x 1]` column reduced from `cur` (`tensor_reduce` into one element
/// per partition).
fn reduced_column<S: Sink>(
    s: &mut S,
    st: &mut State,
    rng: &mut Rng,
    cur: View,
) -> Result<View, IrError> {
    let col = fresh(s, st, &cur, 1, cur.tile.ty)?;
    compute_plain(
        s,
        Opcode::TensorReduce,
        rng.pick(&REDUCTIONS, SubOp::Max),
        col.full(),
        &[cur],
    )?;
    Ok(col.full())
}

/// The PSUM result `ps` evacuated to a fresh SB tile of its shape by an
/// activation: the chain continues in SB.
fn evacuated<S: Sink>(s: &mut S, st: &mut State, rng: &mut Rng, ps: Tile) -> Result<View, IrError> {
    let nx = tile(s, st, Space::Sb, ps.parts, ps.bytes, ps.ty)?;
    compute_plain(
        s,
        Opcode::Activation,
        rng.pick(&ACTIVATIONS, SubOp::Identity),
        nx.full(),
        &[ps.full()],
    )?;
    Ok(nx.full())
}

/// A unit: load, compute chain, save. Tensors defined here die here (a
/// resident may be read, never written), except the gathered tile, which
/// the region saves after its loop nest.
fn unit<S: Sink>(
    s: &mut S,
    st: &mut State,
    p: &GenParams,
    plan: &RegionPlan,
    ctx: &mut Ctx,
    rng: &mut Rng,
    j: u32,
) -> Result<(), IrError> {
    let (parts, bytes, ty) = (plan.parts, plan.bytes, plan.ty);
    let e = ty.size() as u32;
    let q = ctx.queue;
    let chain = rng.range(p.chain_min.min(plan.chain) as u64, plan.chain as u64) as u32;
    let slot = j * SLOTS_PER_UNIT;
    let input = ctx.input;
    let slice = |k: u32, len: u32| input.range((slot + k) * bytes, len);
    let c = StepCtx {
        p,
        plan,
        operand_src: slice(4, bytes),
        bank: p.target.psum_bank_bytes.max(4) & !3,
    };
    let mut g = Step {
        s,
        st,
        c: &c,
        ctx,
        rng,
    };
    // This unit's stream and its place in it.
    let stream = match g.ctx.stream {
        Some(x) if j < 64 && g.ctx.streaming & (1 << j) != 0 => {
            let rank = (g.ctx.streaming & ((1u64 << j) - 1)).count_ones();
            Some((x, rank * x.span))
        }
        _ => None,
    };

    // Address arithmetic: a short chain of scalar temporaries whose last
    // value scales the first compute step.
    let pct = p.scalar_pct as u64;
    let mut temp: Option<Reg> = None;
    if pct > 0 {
        let tensor_insts = chain as u64 + 2;
        let num = tensor_insts * pct;
        let den = 100 - pct;
        let n = num / den + u64::from(g.rng.below(den) < num % den);
        for _ in 0..n {
            let t = g.s.reg(&name("s", g.st.temps), 1)?;
            g.st.temps += 1;
            let a = temp.unwrap_or_else(|| g.st.long());
            let b = g.st.long();
            alu(g.s, g.rng.pick(&ALU_OPS, SubOp::Add), t, &[a, b])?;
            temp = Some(t);
        }
    }

    // The input: a plain load (streamed with the loops, at a register
    // offset, or a sliding window), abutting tiles combined, or an
    // over-broad load of which only the first half is read.
    let mut dup_of: Option<(Tile, View, Option<Reg>)> = None;
    let mut cur: View;
    if g.rng.percent(p.abutting_pct) {
        let k = g.rng.range(2, 4) as u32;
        let mut tiles: ArrayVec<Tile, 4> = ArrayVec::new();
        for i in 0..k {
            let t = tile(g.s, g.st, Space::Sb, parts, bytes, ty)?;
            dma(g.s, Opcode::Load, t.full(), slice(i, bytes), None, q)?;
            tiles.push(t);
        }
        cur = tiles[0].full();
        for t in tiles.iter().skip(1) {
            let nx = tile(g.s, g.st, Space::Sb, parts, bytes, ty)?;
            compute_plain(
                g.s,
                Opcode::TensorTensor,
                SubOp::Add,
                nx.full(),
                &[cur, t.full()],
            )?;
            cur = nx.full();
        }
    } else if g.rng.percent(p.overbroad_pct) {
        let big = tile(g.s, g.st, Space::Sb, parts, 2 * bytes, ty)?;
        dma(g.s, Opcode::Load, big.full(), slice(0, 2 * bytes), None, q)?;
        cur = big.range(0, bytes);
    } else {
        let a = tile(g.s, g.st, Space::Sb, parts, bytes, ty)?;
        let (src, offset) = if let Some((x, at)) = stream {
            (x.input.range(at, bytes).rows(parts).moving(x.motion), None)
        } else if g.rng.percent(p.dyn_offset_pct) {
            // `+$r*B` over the unit's own slots: the register is the loop
            // counter (a tile index) or the unit's address arithmetic.
            let r = g.ctx.counter.or(temp).unwrap_or_else(|| g.st.long());
            let lo = slot * bytes;
            let mut m = STILL;
            m.reg = Some(RegTerm {
                use_index: 0,
                scale: bytes as i32,
                window_lo: lo,
                window_hi: lo + SLOTS_PER_UNIT * bytes,
            });
            (slice(0, bytes).moving(m), Some(r))
        } else if g.rng.percent(p.pstep_pct)
            && (parts as u64 - 1) * e as u64 + ((slot + 1) * bytes) as u64 <= input.bytes as u64
        {
            // Partition q reads the row from element q on (a sliding
            // window, as a convolution's im2col load), all inside row 0.
            let mut m = STILL;
            m.pstep = Some(e);
            (slice(0, bytes).moving(m), None)
        } else {
            (slice(0, bytes), None)
        };
        dma(g.s, Opcode::Load, a.full(), src, offset, q)?;
        if g.rng.percent(p.duplicate_pct) {
            dup_of = Some((a, src, offset));
        }
        cur = a.full();
    }

    for step in 0..chain {
        let reused = dup_of.is_some() && step == 0;
        let inplace = |rng: &mut Rng| {
            if !reused && rng.percent(p.inplace_pct) {
                InstFlags::IN_PLACE
            } else {
                InstFlags::empty()
            }
        };
        if let (0, Some(t)) = (step, temp) {
            let nx = fresh(g.s, g.st, &cur, cur.elems(), cur.tile.ty)?;
            let f = inplace(g.rng);
            cur = tensor_scalar(g.s, g.rng, nx, &SCALAR_OPS, &[cur], &[t], f)?;
        } else if g.rng.percent(p.matmul_pct) {
            cur = g.matmul(cur)?;
        } else if g.rng.percent(p.transpose_pct) {
            cur = g.transpose(cur)?;
        } else if g.rng.percent(p.reduce_pct) {
            // Each output element reduces `d` neighbours (a pooling), or
            // the whole row when nothing smaller divides it.
            let n = cur.elems();
            let d = [4, 2]
                .into_iter()
                .find(|&d| n % d == 0 && n > d)
                .unwrap_or(n.max(1));
            let nx = fresh(g.s, g.st, &cur, n / d, cur.tile.ty)?;
            compute_plain(
                g.s,
                Opcode::TensorReduce,
                g.rng.pick(&REDUCTIONS, SubOp::Add),
                nx.full(),
                &[cur],
            )?;
            cur = nx.full();
        } else if g.rng.percent(p.column_pct) {
            let col = reduced_column(g.s, g.st, g.rng, cur)?;
            let nx = fresh(g.s, g.st, &cur, cur.elems(), cur.tile.ty)?;
            let f = inplace(g.rng);
            cur = tensor_scalar(g.s, g.rng, nx, &COLUMN_OPS, &[cur, col], &[], f)?;
        } else if g.rng.percent(p.scan_pct) {
            if g.rng.percent(50) {
                // out[i] = a[i]·out[i-1] + b[i]: a recurrence over the row.
                let other = g.operand()?;
                let n = cur.elems().min(other.elems());
                let nx = fresh(g.s, g.st, &cur, n, cur.tile.ty)?;
                compute_plain(
                    g.s,
                    Opcode::TensorScan,
                    SubOp::MulAdd,
                    nx.full(),
                    &[cur.first(n), other.first(n)],
                )?;
                cur = nx.full();
            } else {
                let nx = fresh(g.s, g.st, &cur, cur.elems(), cur.tile.ty)?;
                compute_plain(g.s, Opcode::TensorScan, SubOp::Add, nx.full(), &[cur])?;
                cur = nx.full();
            }
        } else {
            match g.rng.weighted(&[40, 35, 25]) {
                0 => {
                    let f = inplace(g.rng);
                    cur = g.activation(cur, f)?;
                }
                1 => {
                    let other = g.operand()?;
                    let n = cur.elems().min(other.elems());
                    let mut b = other.first(n);
                    if g.rng.percent(p.broadcast_pct) {
                        // Every partition reads the operand's first (a
                        // row vector broadcast over the partitions).
                        b.motion.pstep = Some(0);
                    }
                    let nx = fresh(g.s, g.st, &cur, n, cur.tile.ty)?;
                    compute_plain(
                        g.s,
                        Opcode::TensorTensor,
                        g.rng.pick(&BINARY, SubOp::Add),
                        nx.full(),
                        &[cur.first(n), b],
                    )?;
                    cur = nx.full();
                }
                _ => {
                    let nx = fresh(g.s, g.st, &cur, cur.elems(), cur.tile.ty)?;
                    let f = inplace(g.rng);
                    let r = g.st.long();
                    cur = tensor_scalar(g.s, g.rng, nx, &SCALAR_OPS, &[cur], &[r], f)?;
                }
            }
        }
        // A redundant reload of the unit's input into the same tile, read
        // once more: nothing wrote the tile since the first load.
        if let (0, Some((a, src, offset))) = (step, dup_of) {
            dma(g.s, Opcode::Load, a.full(), src, offset, q)?;
            let n = cur.elems().min(a.full().elems());
            let nx = fresh(g.s, g.st, &cur, n, cur.tile.ty)?;
            compute_plain(
                g.s,
                Opcode::TensorTensor,
                SubOp::Add,
                nx.full(),
                &[cur.first(n), a.full().first(n)],
            )?;
            cur = nx.full();
        }
    }

    // The first unit's piece of the result, in this iteration's slice of a
    // tile the region saves after its loops (converted to fp32).
    if j == 0 && g.ctx.gather != Gather::No {
        g.gather(cur)?;
    }

    // A DMA does not convert: the result in the output's type first.
    let cur = convert(g.s, g.st, plan, cur, ty)?;
    // A save to the region's scratch that the next unit overwrites with the
    // same access pattern before anything reads it.
    if let Some(scr) = g.ctx.scratch {
        if g.rng.percent(p.dead_save_pct) {
            let len = g.ctx.psum_bytes.min(cur.len);
            dma(
                g.s,
                Opcode::Save,
                scr.range(0, len),
                cur.tile.range(cur.lo, len),
                None,
                q,
            )?;
        }
    }
    let len = cur.len.min(bytes);
    let src = cur.tile.range(cur.lo, len);
    if let Some((x, at)) = stream {
        return dma(
            g.s,
            Opcode::Save,
            x.output.range(at, len).rows(parts).moving(x.motion),
            src,
            None,
            q,
        );
    }
    if g.rng.percent(p.dyn_offset_pct / 2) {
        let r = g.ctx.counter.or(temp).unwrap_or_else(|| g.st.long());
        let mut m = STILL;
        m.reg = Some(RegTerm {
            use_index: 0,
            scale: bytes as i32,
            window_lo: j * bytes,
            window_hi: (j + 1) * bytes,
        });
        let dst = g.ctx.output.range(j * bytes, len).moving(m);
        return dma(g.s, Opcode::Save, dst, src, Some(r), q);
    }
    dma(
        g.s,
        Opcode::Save,
        g.ctx.output.range(j * bytes, len),
        src,
        None,
        q,
    )
}

/// The constructs of real kernels [`Census`] counts, in its order.
pub const CONSTRUCTS: [&str; 15] = [
    "typed locations",
    "conversions",
    "DRAM loop terms",
    "SB loop terms",
    "PSUM loop terms",
    "partition loop terms",
    "register terms",
    "DRAM partition steps",
    "partition broadcasts",
    "tensor_reduce",
    "transpose",
    "tensor_scan add",
    "tensor_scan mul_add",
    "activation bias columns",
    "tensor_scalar columns",
];

/// How many of each construct of [`CONSTRUCTS`] a module holds: what the
/// tests, the end-to-end matrix and the fuzz smoke runs check that the
/// generator reaches.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// Per construct, in the order of [`CONSTRUCTS`].
    pub counts: [usize; CONSTRUCTS.len()],
    /// Loops without an induction variable name.
    pub unnamed_loops: usize,
}

impl Census {
    /// The census of `m`.
    pub fn of(m: &Module) -> Census {
        let mut n = [0usize; CONSTRUCTS.len()];
        n[0] = m.mems().dtype.values().filter(|t| !t.is_raw()).count();
        for i in m.program_order() {
            let op = m.insts().opcode[i];
            let n_in = m.operands(i).n_in;
            let ty = |a| m.mems().dtype[m.aps().loc[a]];
            if matches!(op, Opcode::Activation | Opcode::TensorCopy) {
                if let (Some(a), Some(b)) = (m.inputs(i).next(), m.outputs(i).next()) {
                    n[1] += usize::from(!ty(a).is_raw() && !ty(b).is_raw() && ty(a) != ty(b));
                }
            }
            for a in m.all_aps(i) {
                let x = m.ap_ext(a);
                let space = m.mems().space[m.aps().loc[a]];
                let dram = space == Space::Dram;
                if !x.terms.is_empty() {
                    n[match space {
                        Space::Dram => 2,
                        Space::Sb => 3,
                        Space::Psum => 4,
                    }] += 1;
                }
                n[5] += usize::from(x.terms.iter().any(|t| t.parts != 0));
                n[6] += usize::from(x.reg.is_some());
                n[7] += usize::from(dram && x.pstep.is_some_and(|s| s > 0));
                n[8] += usize::from(x.is_broadcast(space));
            }
            let k = match op {
                Opcode::TensorReduce => 9,
                Opcode::Transpose => 10,
                Opcode::TensorScan if m.insts().subop[i] == SubOp::MulAdd => 12,
                Opcode::TensorScan => 11,
                Opcode::Activation if n_in >= 2 => 13,
                Opcode::TensorScalar if n_in == 2 => 14,
                _ => continue,
            };
            n[k] += 1;
        }
        Census {
            counts: n,
            unnamed_loops: (0..m.num_loops())
                .filter(|&l| m.loop_name(Loop::new(l)).is_none())
                .count(),
        }
    }

    /// Adds another module's counts.
    pub fn add(&mut self, o: &Census) {
        for (a, b) in self.counts.iter_mut().zip(o.counts) {
            *a += b;
        }
        self.unnamed_loops += o.unnamed_loops;
    }

    /// The constructs it has none of.
    pub fn missing(&self) -> impl Iterator<Item = &'static str> + '_ {
        CONSTRUCTS
            .iter()
            .zip(self.counts)
            .filter(|(_, n)| *n == 0)
            .map(|(w, _)| *w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{pattern, shape, Inst};
    use alloc::format;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Live ranges in program-order positions with the loop rule of docs/SEMANTICS.md §1
    /// (a value accessed in a loop but defined before it is live over the
    /// whole loop), written independently of the generator.
    struct Liveness {
        order: Vec<Inst>,
        mem_def: Vec<usize>,
        mem_end: Vec<usize>,
        reg_def: Vec<usize>,
        reg_end: Vec<usize>,
        /// Position of the first read that preceded every write, per mem.
        read_before_write: Vec<bool>,
    }

    const NONE: usize = usize::MAX;

    fn liveness(m: &Module) -> Liveness {
        let order: Vec<Inst> = m.program_order().collect();
        let mut span = vec![(NONE, 0usize); m.num_loops()];
        for (p, &i) in order.iter().enumerate() {
            let mut l = m.inst_loop(i);
            while l.is_valid() {
                let s = &mut span[l.index()];
                s.0 = s.0.min(p);
                s.1 = s.1.max(p);
                l = m.loops().parent[l];
            }
        }
        let mut mem_def = vec![NONE; m.num_mems()];
        let mut mem_end = vec![0; m.num_mems()];
        let mut reg_def = vec![NONE; m.num_regs()];
        let mut reg_end = vec![0; m.num_regs()];
        let mut rbw = vec![false; m.num_mems()];
        for (p, &i) in order.iter().enumerate() {
            for a in m.inputs(i) {
                let l = m.aps().loc[a].index();
                if mem_def[l] == NONE
                    && !m.insts().flags[i].contains(InstFlags::CAN_READ_UNINIT)
                    && !m.mems().flags[m.aps().loc[a]].contains(MemFlags::INPUT)
                {
                    rbw[l] = true;
                }
                mem_end[l] = mem_end[l].max(p);
            }
            for a in m.outputs(i) {
                let l = m.aps().loc[a].index();
                if mem_def[l] == NONE {
                    mem_def[l] = p;
                }
                mem_end[l] = mem_end[l].max(p);
            }
            for &r in m.uses(i) {
                reg_end[r.index()] = reg_end[r.index()].max(p);
            }
            for &r in m.defs(i) {
                if reg_def[r.index()] == NONE {
                    reg_def[r.index()] = p;
                }
                reg_end[r.index()] = reg_end[r.index()].max(p);
            }
        }
        // The loop rule.
        for (p, &i) in order.iter().enumerate() {
            let mut l: Loop = m.inst_loop(i);
            while l.is_valid() {
                let (s, e) = span[l.index()];
                for a in m.all_aps(i) {
                    let x = m.aps().loc[a].index();
                    if mem_def[x] < s {
                        mem_end[x] = mem_end[x].max(e);
                    }
                }
                for &r in m.uses(i).iter().chain(m.defs(i)) {
                    if reg_def[r.index()] < s {
                        reg_end[r.index()] = reg_end[r.index()].max(e);
                    }
                }
                l = m.loops().parent[l];
            }
            let _ = p;
        }
        Liveness {
            order,
            mem_def,
            mem_end,
            reg_def,
            reg_end,
            read_before_write: rbw,
        }
    }

    /// Peak over positions of the summed weight of live items.
    fn peak(n: usize, items: impl Iterator<Item = (usize, usize, u64)>) -> u64 {
        let mut diff = vec![0i64; n + 1];
        for (d, e, w) in items {
            if d == NONE {
                continue;
            }
            diff[d] += w as i64;
            diff[e + 1] -= w as i64;
        }
        let (mut cur, mut best) = (0i64, 0i64);
        for x in diff {
            cur += x;
            best = best.max(cur);
        }
        best as u64
    }

    struct Peaks {
        sb_bytes: u64,
        psum_tensors: u64,
        reg_lanes: u64,
    }

    fn peaks(m: &Module, lv: &Liveness) -> Peaks {
        let n = lv.order.len();
        let mems = |space: Space, w: &dyn Fn(MemLoc) -> u64| {
            peak(
                n,
                (0..m.num_mems())
                    .map(MemLoc::new)
                    .filter(|&l| m.mems().space[l] == space)
                    .map(|l| (lv.mem_def[l.index()], lv.mem_end[l.index()], w(l))),
            )
        };
        Peaks {
            sb_bytes: mems(Space::Sb, &|l| m.mems().bytes[l] as u64),
            psum_tensors: mems(Space::Psum, &|_| 1),
            reg_lanes: peak(
                n,
                (0..m.num_regs()).map(|r| {
                    (
                        lv.reg_def[r],
                        lv.reg_end[r],
                        m.regs().lanes[Reg::new(r)] as u64,
                    )
                }),
            ),
        }
    }

    fn gen(p: &GenParams) -> Module {
        let m = generate(p).unwrap();
        m.check_structure().unwrap();
        m
    }

    #[test]
    fn emits_exactly_the_requested_instruction_count() {
        for preset in [
            GenParams::default(),
            GenParams::dma_heavy(),
            GenParams::tight(),
        ] {
            for (n, seed) in [
                (0, 1),
                (1, 2),
                (5, 3),
                (9, 4),
                (37, 5),
                (1000, 6),
                (7777, 7),
            ] {
                let m = gen(&GenParams {
                    instructions: n,
                    seed,
                    ..preset.clone()
                });
                assert_eq!(m.num_live_insts(), n, "n={n} seed={seed}");
                assert_eq!(m.num_insts(), n);
            }
        }
    }

    #[test]
    fn same_params_same_module_other_seed_other_module() {
        let a = gen(&GenParams::new(3000, 11));
        let b = gen(&GenParams::new(3000, 11));
        let c = gen(&GenParams::new(3000, 12));
        assert_eq!(format!("{:?}", a.insts()), format!("{:?}", b.insts()));
        assert_eq!(format!("{:?}", a.mems()), format!("{:?}", b.mems()));
        assert_ne!(format!("{:?}", a.insts()), format!("{:?}", c.insts()));
    }

    #[test]
    fn storage_is_reserved_exactly_up_front() {
        let m = gen(&GenParams::new(20_000, 3));
        assert_eq!(m.insts().opcode.capacity(), m.insts().opcode.len());
        assert_eq!(m.aps().loc.capacity(), m.aps().loc.len());
        assert_eq!(m.capacity().dims, m.counts().dims);
        assert_eq!(m.insts().imms.capacity(), m.insts().imms.len());
        assert_eq!(m.capacity().reg_operands, m.counts().reg_operands);
        assert_eq!(m.mems().space.capacity(), m.mems().space.len());
        assert_eq!(m.regs().lanes.capacity(), m.regs().lanes.len());
        assert_eq!(m.capacity().ap_exts, m.counts().ap_exts);
        assert!(m.counts().ap_exts > 0);
        assert_eq!(m.capacity().loops, m.counts().loops);
    }

    /// The operand-shape rule of every instruction and the pattern rule of
    /// every access pattern, checked again on the built module (the builder
    /// checks patterns as it adds them; the shape rule only the readers).
    fn assert_legal(m: &Module, what: &str) {
        for i in m.program_order() {
            if let Err(e) = shape::check(m, i) {
                panic!("{what}: {} {i}: {e}", m.insts().opcode[i]);
            }
            let n_in = m.operands(i).n_in as usize;
            for (k, a) in m.all_aps(i).enumerate() {
                let sp = m.ap_spec(a);
                let r = pattern::check(
                    m,
                    m.inst_loop(i),
                    m.uses(i).len(),
                    k < n_in,
                    sp.plain(),
                    &sp.ext,
                );
                assert!(r.is_ok(), "{what}: {i} operand {k}: {r:?}");
                let x = m.ap_extent(a);
                let l = sp.loc;
                let (parts, row) = (m.mems().partitions[l] as i64, m.mems().bytes[l] as i64);
                let inside = if x.flat {
                    x.byte_lo >= 0 && x.byte_hi <= parts * row
                } else {
                    x.part_lo >= 0 && x.part_hi <= parts && x.byte_lo >= 0 && x.byte_hi <= row
                };
                assert!(inside, "{what}: {i} operand {k} reaches {x:?}");
            }
        }
    }

    #[test]
    fn every_instruction_obeys_the_shape_and_pattern_rules() {
        for (name, preset) in [
            ("default", GenParams::default()),
            ("dma_heavy", GenParams::dma_heavy()),
            ("tight", GenParams::tight()),
            ("constructs", GenParams::constructs()),
        ] {
            for seed in 0..12u64 {
                for n in [300, 3000] {
                    let target = ["trn1", "trn2", "trn3"][seed as usize % 3];
                    let m = gen(&GenParams {
                        instructions: n,
                        seed,
                        target: Target::by_name(target).unwrap(),
                        ..preset.clone()
                    });
                    assert_legal(&m, &format!("{name} seed {seed} n {n} {target}"));
                }
            }
        }
    }

    #[test]
    fn the_default_module_has_every_construct() {
        for seed in 1..4 {
            let c = Census::of(&gen(&GenParams::new(20_000, seed)));
            assert_eq!(c.unnamed_loops, 0, "seed {seed}");
            let missing: Vec<&str> = c.missing().collect();
            assert!(
                missing.is_empty(),
                "seed {seed}: none of {missing:?}: {c:?}"
            );
        }
    }

    #[test]
    fn constructs_stay_out_when_their_knobs_are_zero() {
        let m = gen(&GenParams {
            typed_pct: 0,
            cast_pct: 0,
            loop_term_pct: 0,
            gather_pct: 0,
            dyn_offset_pct: 0,
            pstep_pct: 0,
            broadcast_pct: 0,
            bias_pct: 0,
            column_pct: 0,
            reduce_pct: 0,
            transpose_pct: 0,
            scan_pct: 0,
            ..GenParams::new(20_000, 2)
        });
        assert_eq!(Census::of(&m).counts, [0; CONSTRUCTS.len()]);
        assert!(m.num_loops() > 10);
    }

    #[test]
    fn tensors_are_written_before_read_and_sized_in_elements() {
        for preset in [
            GenParams::default(),
            GenParams::dma_heavy(),
            GenParams::tight(),
        ] {
            for seed in 0..6 {
                let m = gen(&GenParams {
                    instructions: 4000,
                    seed,
                    ..preset.clone()
                });
                let lv = liveness(&m);
                for l in (0..m.num_mems()).map(MemLoc::new) {
                    assert!(
                        !lv.read_before_write[l.index()],
                        "{} read before written (seed {seed})",
                        m.mem_name(l)
                    );
                    assert_eq!(m.mems().bytes[l] % m.elem_size(l) as u32, 0);
                    if m.mems().space[l] == Space::Psum {
                        assert!(m.mems().bytes[l] <= m.target.psum_bank_bytes);
                    }
                    if m.mems().space[l] != Space::Dram {
                        assert!(m.mems().flags[l].is_empty());
                    }
                }
            }
        }
    }

    #[test]
    fn default_live_set_stays_far_below_capacity() {
        for seed in 0..9 {
            let target = ["trn1", "trn2", "trn3"][seed as usize % 3];
            let m = gen(&GenParams {
                target: Target::by_name(target).unwrap(),
                ..GenParams::new(20_000, seed)
            });
            let lv = liveness(&m);
            let pk = peaks(&m, &lv);
            // Far below: under a quarter of the usable SB, whatever the size.
            assert!(
                pk.sb_bytes * 4 < m.target.sb_usable_bytes as u64,
                "seed {seed}: {} live SB bytes per partition",
                pk.sb_bytes
            );
            assert!(pk.psum_tensors <= m.target.psum_usable_banks as u64);
            assert!(pk.reg_lanes < m.target.max_regs as u64);
        }
    }

    #[test]
    fn live_set_does_not_grow_with_module_size() {
        let small = gen(&GenParams::new(2_000, 5));
        let big = gen(&GenParams::new(60_000, 5));
        let ps = peaks(&small, &liveness(&small));
        let pb = peaks(&big, &liveness(&big));
        // The big module repeats the same kind of regions; its peak is
        // bounded by the largest region, not by the module.
        let bound = 2 * 4096 * (1 + 2 + 4 + 3) as u64;
        assert!(
            ps.sb_bytes <= bound && pb.sb_bytes <= bound,
            "{}",
            pb.sb_bytes
        );
    }

    #[test]
    fn tight_exceeds_capacity_somewhere() {
        let m = gen(&GenParams {
            instructions: 20_000,
            ..GenParams::tight()
        });
        let pk = peaks(&m, &liveness(&m));
        assert!(
            pk.sb_bytes > m.target.sb_usable_bytes as u64,
            "{}",
            pk.sb_bytes
        );
        assert!(pk.psum_tensors > m.target.psum_usable_banks as u64);
        assert!(pk.reg_lanes > m.target.max_regs as u64);
    }

    #[test]
    fn loops_nest_and_scalars_play_their_roles() {
        let m = gen(&GenParams::new(20_000, 9));
        assert!(m.num_loops() > 10);
        assert!(m.loops().depth.iter().any(|(_, &d)| d >= 2));
        assert!(m.loops().trip.iter().any(|(_, &t)| t == UNKNOWN_TRIP));
        assert!(m.regs().lanes.iter().any(|(_, &l)| l == 2));
        let count = |op: Opcode| {
            m.program_order()
                .filter(|&i| m.insts().opcode[i] == op)
                .count()
        };
        assert_eq!(count(Opcode::Branch), m.num_loops());
        let scalar = m
            .program_order()
            .filter(|&i| m.insts().opcode[i].is_scalar())
            .count();
        // scalar_pct 20 of the tensor instructions plus loop control.
        let share = scalar * 100 / m.num_live_insts();
        assert!((15..=40).contains(&share), "scalar share {share}%");
        assert!(count(Opcode::Matmul) > 0 && count(Opcode::Memset) > 0);
        assert!(m
            .program_order()
            .any(|i| m.insts().flags[i].contains(InstFlags::IN_PLACE)));
    }

    /// Counts the DMA-peephole opportunities the dma-heavy preset plants.
    #[test]
    fn dma_heavy_plants_every_dma_pattern() {
        let m = gen(&GenParams {
            instructions: 20_000,
            ..GenParams::dma_heavy()
        });
        let d = gen(&GenParams::new(20_000, 1));
        let dma_share = |m: &Module| {
            m.program_order()
                .filter(|&i| m.insts().opcode[i].is_dma())
                .count()
                * 100
                / m.num_live_insts()
        };
        assert!(dma_share(&m) > dma_share(&d) + 10);
        let order: Vec<Inst> = m.program_order().collect();
        let src = |i: Inst| m.inputs(i).next().unwrap();
        let dst = |i: Inst| m.outputs(i).next().unwrap();
        let key = |a| (m.aps().loc[a], m.aps().offset[a], m.ap_bytes(a));
        let (mut abut, mut dup, mut dead) = (0, 0, 0);
        for w in order.windows(2) {
            let (a, b) = (w[0], w[1]);
            let loads = m.insts().opcode[a] == Opcode::Load && m.insts().opcode[b] == Opcode::Load;
            if loads
                && m.aps().loc[src(a)] == m.aps().loc[src(b)]
                && m.aps().offset[src(a)] as u64 + m.ap_bytes_per_partition(src(a))
                    == m.aps().offset[src(b)] as u64
            {
                abut += 1;
            }
        }
        let mut last_load: Vec<Option<(MemLoc, u32, u64)>> = vec![None; m.num_mems()];
        let mut last_scr_save: Vec<Option<(u32, u64)>> = vec![None; m.num_mems()];
        for &i in &order {
            match m.insts().opcode[i] {
                Opcode::Load => {
                    let t = m.aps().loc[dst(i)].index();
                    let k = key(src(i));
                    if last_load[t] == Some(k) {
                        dup += 1;
                    }
                    last_load[t] = Some(k);
                }
                Opcode::Save => {
                    let o = m.aps().loc[dst(i)];
                    if m.mems().flags[o].contains(MemFlags::INTERNAL) {
                        let k = (m.aps().offset[dst(i)], m.ap_bytes(dst(i)));
                        if last_scr_save[o.index()] == Some(k) {
                            dead += 1;
                        }
                        last_scr_save[o.index()] = Some(k);
                    }
                }
                _ => {}
            }
        }
        // Over-broad: an SB tile loaded in full and read only in its first half.
        let mut read_hi = vec![0u64; m.num_mems()];
        for &i in &order {
            for a in m.inputs(i) {
                let (_, hi) = m.ap_byte_span(a).unwrap();
                let l = m.aps().loc[a].index();
                read_hi[l] = read_hi[l].max(hi);
            }
        }
        let broad = (0..m.num_mems())
            .map(MemLoc::new)
            .filter(|&l| {
                m.mems().space[l] == Space::Sb && read_hi[l.index()] * 2 == m.mems().bytes[l] as u64
            })
            .count();
        assert!(abut > 50, "abutting pairs {abut}");
        assert!(dup > 20, "duplicated loads {dup}");
        assert!(dead > 20, "dead saves {dead}");
        assert!(broad > 20, "over-broad loads {broad}");
    }

    #[test]
    fn bad_knobs_are_refused() {
        let bad = [
            GenParams {
                scalar_pct: 95,
                ..GenParams::default()
            },
            GenParams {
                tile_bytes: [512, 1023, 2048, 4096],
                ..GenParams::default()
            },
            GenParams {
                trip_min: 5,
                trip_max: 4,
                ..GenParams::default()
            },
            GenParams {
                partition_weights: [0; 4],
                ..GenParams::default()
            },
            GenParams {
                max_loop_depth: MAX_GEN_DEPTH + 1,
                ..GenParams::default()
            },
            GenParams {
                units_min: 0,
                ..GenParams::default()
            },
        ];
        for p in bad {
            assert!(generate(&p).is_err(), "{p:?}");
        }
    }

    /// Generating at the scale of BENCHMARKS.md §1: `cargo test -p
    /// tusk-core --features gen --release -- --ignored five_million` (time it
    /// with `/usr/bin/time -v`).
    #[test]
    #[ignore = "slow: 5M instructions (~1 GB); a scale run, not a unit test"]
    fn five_million_instructions() {
        let m = generate(&GenParams::new(5_000_000, 1)).unwrap();
        assert_eq!(m.num_live_insts(), 5_000_000);
        m.check_structure().unwrap();
    }
}
