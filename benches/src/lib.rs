//! Shared benchmark helpers.
