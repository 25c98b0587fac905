//! tusk-shim: the std side of tusk — file formats, the driver, reports.

pub mod csv;
pub mod dsa;
