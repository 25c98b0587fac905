//! Analyses over a module: linear program order, loop nest, liveness of
//! memory locations and registers, lower bounds per space.
