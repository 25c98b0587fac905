//! tusk-shim: the std side of tusk — file formats, the driver, reports.

pub mod batch;
pub mod blame;
pub mod color;
pub mod console;
pub mod csv;
pub mod dimacs;
pub mod dsa;
pub mod explain;
pub mod fmt;
#[cfg(any(test, feature = "fuzz"))]
pub mod fuzz;
pub mod gen;
pub mod heap;
pub mod info;
pub mod inset;
pub mod io;
pub mod json;
pub mod memmap;
pub mod regalloc;
pub mod run;
pub mod shared_data;
pub mod split;
pub mod svg;
pub mod tempfiles;
pub use tusk_text as text;
pub mod textmap;
