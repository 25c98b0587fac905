//! tusk-core: the allocation engine of a tensor-accelerator compiler back end.
//!
//! `#![no_std]`; uses `alloc` only to reserve storage up front (module columns
//! and pass workspaces). Data flows one way: [`ir`] → [`analysis`] →
//! allocators ([`mem`], [`reg`]) → [`dma`] peepholes → [`verify`] → reports.
//!
//! # Quick start
//!
//! Build a [`Module`](ir::Module) with the [`Builder`](ir::Builder) (or read
//! one: the text and JSON readers live in the `tusk-shim` crate,
//! `tusk_shim::text::parse`), reserve a [`Workspace`](pipeline::Workspace)
//! for it once, run the pipeline an optimization level selects with a clock
//! of your own, and read the [`RunReport`](pipeline::RunReport). Given a copy
//! of the input, the run ends with the independent placement verifier and
//! the dataflow checker; the [`Verifier`](verify::placement::Verifier) can
//! also be run on its own.
//!
//! ```
//! use tusk_core::ir::{Builder, InstFlags, MemFlags, Module, Opcode, Space, SubOp};
//! use tusk_core::mem::exact::Clock;
//! use tusk_core::pipeline::{self, Options, Workspace};
//! use tusk_core::verify::placement::Verifier;
//! use tusk_core::Target;
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
//! let mut ws = Workspace::new();
//! // Reserves every pass's storage for `m`, then runs: the passes do not
//! // allocate. A failure is a value that names tensors as the module does.
//! let report = pipeline::reserve_and_run(&mut m, &opts, &mut ws, &mut Ticks(0), Some(&input))
//!     .map_err(|err| err.display(&m).to_string())?;
//!
//! assert!(report.verified && report.findings == 0);
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
//! runs later), call [`Workspace::reserve`](pipeline::Workspace::reserve),
//! then [`pipeline::run()`]: after the reservation no pass touches the heap.
//! Failures are values
//! ([`PipelineError`](pipeline::PipelineError)), never panics;
//! [`PipelineError::site`](pipeline::PipelineError::site) says where.
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

#[allow(clippy::indexing_slicing)] // ids and reserved workspace positions (see above)
pub mod analysis;
#[allow(clippy::indexing_slicing)] // ids and reserved workspace positions (see above)
pub mod dma;
#[cfg(any(test, feature = "gen"))]
#[allow(clippy::indexing_slicing)] // fixed tables and the module ids they build
pub mod gen;
pub mod ir;
#[allow(clippy::indexing_slicing)] // ids and reserved workspace positions (see above)
pub mod mem;
pub mod pipeline;
#[allow(clippy::indexing_slicing)] // ids and reserved workspace positions (see above)
pub mod reg;
mod rng;
pub mod storage;
pub mod target;
#[cfg(test)]
mod testing;
#[allow(clippy::indexing_slicing)] // ids and reserved workspace positions (see above)
pub mod verify;

pub use target::Target;
