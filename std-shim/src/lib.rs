//! tusk-shim: the std side of tusk — file formats, the driver, reports.

pub mod color;
pub mod dimacs;
#[cfg(any(test, feature = "fuzz"))]
pub mod fuzz;
pub mod gen;
pub mod info;
pub mod io;
pub mod json;
pub mod run;
pub mod text;
