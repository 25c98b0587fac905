//! Containers the crate's passes and checkers share, kept in storage that
//! is reserved once: their operations never allocate, and a full container
//! is an error value, not growth.

pub(crate) mod treap;
