//! tusk-shim: the std side of tusk — file formats, the driver, reports.

pub mod gen;
pub mod text;
