//! tusk-core: the allocation engine of a tensor-accelerator compiler back end.
//!
//! `#![no_std]`; uses `alloc` only to reserve storage up front (module columns
//! and pass workspaces). Data flows one way: [`ir`] → [`analysis`] →
//! allocators (`mem`, `reg`) → `dma` peepholes → [`verify`] → reports
//! (ARCHITECTURE.md at the repository root maps the folders).
//!
//! # Quick start
//!
//! The front door is this page: build a [`Module`] with the [`Builder`] (or
//! read one: the text and JSON readers live in the `tusk-shim` crate,
//! `tusk_shim::text::parse`), pick [`Options`] (an optimization level picks
//! the pipeline), reserve a [`Workspace`] for the module once, [`run()`] with a
//! [`Clock`] of your own and the [`Checks`] to end with, and read the
//! [`RunReport`]. A failure is a [`PipelineError`] that names tensors as the
//! module does.
//!
//! ```
//! use tusk_core::ir::{InstFlags, MemFlags, Opcode, Space, SubOp};
//! use tusk_core::verify::Verifier;
//! use tusk_core::{Builder, Checks, Clock, Module, Options, Target, Workspace};
//!
//! /// The passes time themselves with the caller's clock (no_std has none):
//! /// here a counter, on a host `std::time::Instant`, on a device a timer.
//! struct Ticks(u64);
//! impl Clock for Ticks {
//!     fn now_micros(&mut self) -> u64 {
//!         self.0 += 1;
//!         self.0
//!     }
//! }
//!
//! // exp(x) of a [128 x 1024] fp32 tile: DRAM -> SB, the activation, SB -> DRAM.
//! let mut m = Module::new(Target::default());
//! let mut b = Builder::new(&mut m);
//! let x = b.mem("x", Space::Dram, 128, 4096, 4, MemFlags::INPUT)?;
//! let y = b.mem("y", Space::Dram, 128, 4096, 4, MemFlags::OUTPUT)?;
//! let t = b.mem("t", Space::Sb, 128, 4096, 4, MemFlags::empty())?;
//! let e = b.mem("e", Space::Sb, 128, 4096, 4, MemFlags::empty())?;
//! b.func("main")?;
//! b.load(t, x, 0)?;
//! b.compute(Opcode::Activation, SubOp::Exp, e, &[t], InstFlags::empty())?;
//! b.save(y, e, 0)?;
//! b.finish()?;
//!
//! let opts = Options::default(); // optlevel 2: the coloring pipeline
//! let input = m.clone(); // what the dataflow checker compares against
//! let checks = Checks::Full { input: &input };
//! let mut ws = Workspace::new();
//! // Reserves every pass's storage for `m`, then runs: the passes do not
//! // allocate.
//! let report = ws
//!     .reserve(&mut m, &opts, checks)
//!     .run(&mut Ticks(0))
//!     .map_err(|err| err.display(&m).to_string())?;
//!
//! assert!(report.verified());
//! let sb = report.space(Space::Sb);
//! assert_eq!(sb.placed, 2);
//! // Both tiles are live together at the activation: 8 KiB per partition.
//! assert_eq!(sb.lower_bound, 8192);
//! assert!(sb.peak >= sb.lower_bound);
//! assert!(m.is_placed(t) && m.is_placed(e));
//! assert!(Verifier::for_module(&m).verify(&m).is_clean());
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```
//!
//! To reserve apart from running (a device that reserves at start-up and
//! runs later), call [`Workspace::reserve`], then [`run()`]: after the
//! reservation no pass touches the heap. Failures are values, never
//! panics; [`PipelineError::site`] says where.
//!
//! Beyond the front door, each a module of its own:
//! - [`ir`]: the program's vocabulary (tensors, instructions, access
//!   patterns, loops), what the [`Builder`] speaks;
//! - [`analysis`]: the analyses the passes share (order, liveness, bounds,
//!   the floor, the schedule model), for an embedder's own reports;
//! - [`verify`]: the independent checkers on their own;
//! - [`dsa`]: one-dimensional buffer placement (`tusk dsa`);
//! - [`regalloc`]: the register allocators on their own (the CFG allocator
//!   and the module's register colorer);
//! - [`options`]: what [`Options`] is made of (the selection map, the
//!   allocator families, the switches, the storage budget);
//! - [`steps`]: the run in steps (the passes, then the end steps apart,
//!   as the driver runs them on two threads);
//! - [`target`]: the hardware model's parts and its override keys;
//! - [`pass`]: each pass on its own; [`report`]: the report's parts;
//! - `gen` (feature `gen`): seeded generators of modules and problems for
//!   tests, benchmarks and fuzzing.
//!
//! Panic policy: no input reaches a panic. Column indexing by an entity id is
//! the one documented exception: ids are minted by the module that indexes
//! them, so an out-of-range id is a bug in tusk, not in the input.
//!
//! Enforced by clippy outside tests: `unwrap_used`, `expect_used` and
//! `panic` are denied everywhere (no exception). `indexing_slicing` is
//! denied too, and allowed — the documented exceptions — on the modules
//! whose algorithms index columns by typed ids minted by the same module
//! and workspace arrays by positions below the sizes their `reserve`
//! computed: the analyses, the allocators, the DMA passes, the checkers,
//! the generators, `ir::{builder, column, module, names, shape}` and
//! `pipeline::run`. It stays denied in `target`, `ir::{ap, entity, types}`
//! and `pipeline::{options, passes}`. Input never indexes directly: the
//! readers (std-shim) resolve names and numbers into ids through checked
//! lookups first, and the fuzz targets (`targets/fuzz`) test that.

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

extern crate alloc;

pub(crate) mod align;
#[allow(clippy::indexing_slicing)] // ids and reserved workspace positions (see above)
pub mod analysis;
#[allow(clippy::indexing_slicing)] // node ids minted by the pool they index
pub(crate) mod collections;
pub mod digest;
#[allow(clippy::indexing_slicing)] // ids and reserved workspace positions (see above)
pub(crate) mod dma;
pub mod dsa;
#[cfg(any(test, feature = "gen"))]
#[allow(clippy::indexing_slicing)] // fixed tables and the module ids they build
pub mod gen;
pub mod ir;
#[allow(clippy::indexing_slicing)] // ids and reserved workspace positions (see above)
pub(crate) mod mem;
pub mod options;
pub mod pass;
pub(crate) mod pipeline;
#[allow(clippy::indexing_slicing)] // ids and reserved workspace positions (see above)
pub(crate) mod reg;
pub mod regalloc;
pub mod report;
mod rng;
pub mod steps;
pub(crate) mod storage;
pub mod target;
#[cfg(test)]
mod testing;
#[allow(clippy::indexing_slicing)] // ids and reserved workspace positions (see above)
pub mod verify;

pub(crate) use ir::entity::entity_id;
pub use ir::{Builder, Module};
pub use mem::exact::{Clock, NoClock};
pub use pipeline::{run, Checks, Options, PipelineError, Reserved, RunReport, Workspace};
pub(crate) use storage::heap_bytes;
pub use target::Target;
