//! tusk-core: the allocation engine of a tensor-accelerator compiler back end.
//!
//! `#![no_std]`; uses `alloc` only to reserve storage up front (module columns
//! and pass workspaces). Data flows one way: [`ir`] → [`analysis`] →
//! allocators ([`mem`], [`reg`]) → [`dma`] peepholes → [`verify`] → reports.
//!
//! Panic policy: no input reaches a panic. Column indexing by an entity id is
//! the one documented exception: ids are minted by the module that indexes
//! them, so an out-of-range id is a bug in tusk, not in the input.

#![no_std]
#![warn(missing_docs)]

extern crate alloc;

pub mod analysis;
pub mod dma;
#[cfg(any(test, feature = "gen"))]
pub mod gen;
pub mod ir;
pub mod mem;
pub mod pipeline;
pub mod reg;
pub mod target;
pub mod verify;

pub use target::Target;
