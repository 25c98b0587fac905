//! tusk-core: the allocation engine of a tensor-accelerator compiler back end.
//!
//! `#![no_std]`; uses `alloc` only to reserve storage up front (module columns
//! and pass workspaces). Data flows one way: [`ir`] → [`analysis`] →
//! allocators ([`mem`], [`reg`]) → [`dma`] peepholes → [`verify`] → reports.
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
pub mod storage;
pub mod target;
#[allow(clippy::indexing_slicing)] // ids and reserved workspace positions (see above)
pub mod verify;

pub use target::Target;
