//! How the process's allocator hands freed memory back to the system.
//!
//! A run holds a few very large tables for a phase and frees them before
//! the next (the input copy, a pass's workspace, the checker's state).
//! glibc's malloc raises its mmap threshold to the size of any large block
//! freed, so after the first phase every later large table comes from the
//! heap, and when it is freed its pages stay resident: the peak is then
//! the sum of phases instead of the largest phase. Fixing the threshold at
//! glibc's own initial value keeps every block of at least that size in a
//! mapping of its own, returned to the system on free. The allocations of
//! the passes happen before they run (storage is reserved once), so the
//! extra mapping calls are per table, not per step.

/// glibc's initial mmap threshold (its `DEFAULT_MMAP_THRESHOLD_MIN`): the
/// value fixed here, so that only the dynamic raising is switched off.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 128 * 1024;

/// Keeps large blocks in their own mappings for the rest of the process
/// (see the module doc). Call it first in `main`. Returns whether the
/// allocator took the setting: always false where the allocator is not
/// glibc's, which keeps its own policy.
pub fn return_large_blocks_on_free() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // The driver's one unsafe block (the workspace denies unsafe code).
        // SAFETY: mallopt only changes a parameter of the allocator; it is
        // called before any other thread exists.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_takes_the_fixed_threshold() {
        assert!(super::return_large_blocks_on_free());
    }
}
