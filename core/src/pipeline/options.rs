//! Pipeline options and the selection map.
//!
//! [`Options`] carries every flag of the driver (the `tusk run` flags, README). [`Options::normalize`]
//! reproduces the reference dispatcher's normalize-then-switch ("The Selection
//! Map" of the seed, `sub_80D9D0`) exactly, with each of its asserts turned
//! into an [`OptionsError`]:
//!
//! ```text
//! assert(allocator == "" || allocator == "coloring" || allocator == "lsa");
//! if (loopsInBackend) optlevel = (optlevel == 2) ? 6 : 8;
//! if (SmtAllocation)  optlevel = 7;
//! assert(vncNcCount == 1 || (allocator != "lsa" && optlevel != 0 && optlevel != 8));
//! switch (optlevel) { 0 | 1,2,3 | 6 | 7 | 8 }   // then the always-run REG stage
//! ```
//!
//! The allocator-name assert is checked where a name becomes an [`Allocator`]
//! ([`Allocator::from_name`]); an `Allocator` value is valid by construction.
//! The order matters and is kept: the loops-in-backend rewrite comes before
//! the SMT override, and the vNC assert sees the normalized optlevel.

use core::fmt;

pub use crate::mem::spill_strategy::SpillStrategy;
use crate::target::Generation;

/// Which memory-allocator family the user asked for (`--allocator`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Allocator {
    /// No `--allocator` given (the reference's empty string): the optlevel
    /// decides.
    #[default]
    Default,
    /// `coloring`: the graph-coloring allocators.
    Coloring,
    /// `lsa`: the linear-scan allocator.
    Lsa,
    /// `exact`: the exact placement search for SB and PSUM (beyond the
    /// reference, whose assert knows only the three above).
    Exact,
}

impl Allocator {
    /// The spelling on the command line (`""` for the default).
    pub const fn name(self) -> &'static str {
        match self {
            Allocator::Default => "",
            Allocator::Coloring => "coloring",
            Allocator::Lsa => "lsa",
            Allocator::Exact => "exact",
        }
    }

    /// Parses `--allocator`: the reference's first assert.
    pub fn from_name(s: &str) -> Result<Allocator, OptionsError> {
        match s {
            "" => Ok(Allocator::Default),
            "coloring" => Ok(Allocator::Coloring),
            "lsa" => Ok(Allocator::Lsa),
            "exact" => Ok(Allocator::Exact),
            _ => Err(OptionsError::UnknownAllocator),
        }
    }
}

/// The pipeline a normalized optlevel selects (the `switch` of the seed).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Selection {
    /// optlevel 0: the minimal pipeline.
    Minimal,
    /// optlevel 1, 2, 3: the primary cascade with the coloring allocators.
    Coloring,
    /// optlevel 6: `coloring_allocator_with_loop`.
    ColoringWithLoop,
    /// optlevel 7: the reordered coloring pipeline plus the in-place verify.
    ColoringVerified,
    /// optlevel 8: the linear-scan allocator as the sole memory allocator.
    LinearScan,
}

impl Selection {
    /// A one-line description naming the reference pipeline. Every selection
    /// is followed by the always-run low-level stage with the register colorer.
    pub const fn describe(self) -> &'static str {
        match self {
            Selection::Minimal => "optlevel 0: minimal pipeline",
            Selection::Coloring => "optlevel 1/2/3: primary cascade, coloring allocators",
            Selection::ColoringWithLoop => "optlevel 6: coloring_allocator_with_loop",
            Selection::ColoringVerified => {
                "optlevel 7: reordered coloring pipeline + in-place verify"
            }
            Selection::LinearScan => "optlevel 8: linear_scan_allocator (sole)",
        }
    }
}

/// Every option of a run (the driver's `tusk run` flags, README). Build one
/// with [`Options::default`] and field updates, then call
/// [`Options::normalize`] before use:
///
/// ```
/// use tusk_core::options::Selection;
/// use tusk_core::Options;
///
/// let o = Options { loops_in_backend: true, ..Options::default() };
/// // The selection map: loops in the back end turn optlevel 2 into 6.
/// let o = o.normalize()?;
/// assert_eq!((o.optlevel, o.selection()), (6, Some(Selection::ColoringWithLoop)));
/// // An optlevel outside the map is an error value, not a panic.
/// assert!(Options { optlevel: 5, ..Options::default() }.normalize().is_err());
/// # Ok::<(), tusk_core::options::OptionsError>(())
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Options {
    /// `--optlevel`: one of 0, 1, 2, 3, 6, 7, 8.
    pub optlevel: u8,
    /// `--allocator`.
    pub allocator: Allocator,
    /// `--smt-allocation`: forces optlevel 7.
    pub smt_allocation: bool,
    /// `--loops-in-backend`: optlevel 2 becomes 6, anything else 8.
    pub loops_in_backend: bool,
    /// `--vnc-count`: virtual NeuronCores sharing the program (at least 1).
    pub vnc_count: u32,
    /// `--gca-dma-optlevel`: how eagerly the colorer inserts spill/reload
    /// DMAs, -1..=2.
    pub gca_dma_optlevel: i8,
    /// `--target`: the preset to allocate for, or `None` to keep the
    /// module's own `target` line.
    pub target: Option<Generation>,
    /// `--max-regs`: overrides the target's `MaxRegNumPerEngine`.
    pub max_regs: Option<u16>,
    /// Run the schedule model on the result (default on). An embedder
    /// with a tight storage budget (the firmware) turns it off: its tables
    /// are then not reserved and the report has no `schedule`.
    pub schedule_model: bool,
    /// Spills the linear scan may insert (`LsaOptions::max_spills`);
    /// `None`: `lsa::default_spill_limit`.
    pub lsa_max_spills: Option<u32>,
    /// Spill temporaries the register colorer may insert
    /// (`RegAllocator::set_max_spill_temporaries`); `None`:
    /// `reg::alloc::default_spill_temporaries`.
    pub reg_max_spill_temporaries: Option<u32>,
    /// `--max-memory`: the storage budget of the run
    /// ([`crate::storage::StorageBudget`]); `None`: the default for the
    /// module ([`crate::storage::StorageBudget::default_for`]).
    pub storage_limit: Option<u64>,
    /// `--rotation`: the address-rotation pass after allocation
    /// (the rotation pass); off keeps the allocators' placements.
    pub rotation: Rotation,
    /// `--dma-affinity`: the SB colorer tries to place coalescing
    /// candidates side by side (optlevels whose pipeline colors SB before
    /// the SB DMA pass: 2, 3 and 6); off keeps the plain placements.
    pub dma_affinity: DmaAffinity,
    /// `--spill-strategy`: in which order the SB allocators try their
    /// splits where the input needs more SB than it has.
    pub spill_strategy: SpillStrategy,
    /// `--dataflow-executions`: the executions the dataflow check may walk
    /// through the loops that access patterns move with before it samples
    /// them (iterations 0, 1 and the last, reported as a partial check:
    /// [`crate::verify::DataflowCoverage`]). `u64::MAX` walks every
    /// iteration.
    pub dataflow_walk_limit: u64,
}

/// `--dma-affinity {off,on}`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DmaAffinity {
    /// The allocators minimize the peak only.
    #[default]
    Off,
    /// DMA pairs whose DRAM sides abut become placement affinities
    /// (`mem::affinity`).
    On,
}

impl DmaAffinity {
    /// Parses the option's value (`off`, `on`).
    pub fn from_name(s: &str) -> Option<DmaAffinity> {
        match s {
            "off" => Some(DmaAffinity::Off),
            "on" => Some(DmaAffinity::On),
            _ => None,
        }
    }
}

/// `--rotation {off,psum,all}`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Rotation {
    /// The allocators' placements as they are.
    #[default]
    Off,
    /// Successive PSUM tiles go round the free banks
    /// (`address_rotation_psum`).
    Psum,
    /// PSUM as [`Rotation::Psum`], and SB tiles whose shared cells cost
    /// the schedule model's makespan moved to cells of their own, within
    /// a headroom over the peak (`address_rotation_sb`, `mem/sb_rotation/`).
    All,
}

impl Rotation {
    /// Parses the option's value (`off`, `psum`, `all`).
    pub fn from_name(s: &str) -> Option<Rotation> {
        match s {
            "off" => Some(Rotation::Off),
            "psum" => Some(Rotation::Psum),
            "all" => Some(Rotation::All),
            _ => None,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            optlevel: 2,
            allocator: Allocator::Default,
            smt_allocation: false,
            loops_in_backend: false,
            vnc_count: 1,
            gca_dma_optlevel: 1,
            target: None,
            max_regs: None,
            schedule_model: true,
            lsa_max_spills: None,
            reg_max_spill_temporaries: None,
            storage_limit: None,
            rotation: Rotation::Off,
            dma_affinity: DmaAffinity::Off,
            spill_strategy: SpillStrategy::Best,
            dataflow_walk_limit: crate::verify::MAX_EXACT_EXECUTIONS,
        }
    }
}

/// Optlevels the dispatcher has a case for.
pub const OPTLEVELS: [u8; 7] = [0, 1, 2, 3, 6, 7, 8];

/// Range of `--max-regs` (the same bounds as the `max-regs` target override).
pub const MAX_REGS_RANGE: (u16, u16) = (2, 4096);

/// An option the selection map refuses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OptionsError {
    /// `--allocator` is not `coloring` or `lsa`.
    UnknownAllocator,
    /// `--optlevel` has no case in the dispatcher.
    BadOptlevel {
        /// The value given.
        optlevel: u8,
    },
    /// `--vnc-count 0`.
    ZeroVncCount,
    /// LSA, optlevel 0 and optlevel 8 are single-vNC only.
    MultiVncForbidden {
        /// The vNC count given.
        vnc_count: u32,
        /// The optlevel after normalization.
        optlevel: u8,
        /// True when the linear-scan allocator was asked for.
        lsa: bool,
    },
    /// `--gca-dma-optlevel` outside -1..=2.
    BadGcaDmaOptlevel {
        /// The value given.
        value: i8,
    },
    /// `--max-regs` outside `MAX_REGS_RANGE` (2..=4096).
    BadMaxRegs {
        /// The value given.
        value: u16,
    },
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            OptionsError::UnknownAllocator => {
                f.write_str("--allocator must be `coloring`, `lsa` or `exact` (or absent)")
            }
            OptionsError::BadOptlevel { optlevel } => write!(
                f,
                "--optlevel {optlevel} is not supported: it must be one of 0, 1, 2, 3, 6, 7, 8"
            ),
            OptionsError::ZeroVncCount => f.write_str("--vnc-count must be at least 1"),
            OptionsError::MultiVncForbidden {
                vnc_count,
                optlevel,
                lsa,
            } => {
                write!(f, "--vnc-count {vnc_count} is not allowed with ")?;
                if lsa {
                    f.write_str("--allocator lsa")?;
                } else {
                    write!(f, "optlevel {optlevel} (after normalization)")?;
                }
                f.write_str(
                    ": the linear-scan allocator, optlevel 0 and optlevel 8 run on a single \
                     vNC core only (use --vnc-count 1)",
                )
            }
            OptionsError::BadGcaDmaOptlevel { value } => {
                write!(
                    f,
                    "--gca-dma-optlevel {value} is out of range (must be -1..=2)"
                )
            }
            OptionsError::BadMaxRegs { value } => write!(
                f,
                "--max-regs {value} is out of range (must be {}..={})",
                MAX_REGS_RANGE.0, MAX_REGS_RANGE.1
            ),
        }
    }
}

impl core::error::Error for OptionsError {}

impl Options {
    /// Applies the selection map's rewrites and asserts. The result has an
    /// optlevel in [`OPTLEVELS`] that [`Options::selection`] maps to a
    /// pipeline.
    pub fn normalize(self) -> Result<Options, OptionsError> {
        let mut o = self;
        if !OPTLEVELS.contains(&o.optlevel) {
            return Err(OptionsError::BadOptlevel {
                optlevel: o.optlevel,
            });
        }
        if !(-1..=2).contains(&o.gca_dma_optlevel) {
            return Err(OptionsError::BadGcaDmaOptlevel {
                value: o.gca_dma_optlevel,
            });
        }
        if let Some(r) = o.max_regs {
            if r < MAX_REGS_RANGE.0 || r > MAX_REGS_RANGE.1 {
                return Err(OptionsError::BadMaxRegs { value: r });
            }
        }
        if o.vnc_count == 0 {
            return Err(OptionsError::ZeroVncCount);
        }
        // L818, then L815: SMT allocation wins over loops-in-backend.
        // The rewrites are applied once: the flags are cleared so that
        // normalizing normalized options changes nothing.
        if o.loops_in_backend {
            o.optlevel = if o.optlevel == 2 { 6 } else { 8 };
            o.loops_in_backend = false;
        }
        if o.smt_allocation {
            o.optlevel = 7;
            o.smt_allocation = false;
        }
        // L853: LSA, opt0 and opt8 are single-vNC only.
        let single_only = o.allocator == Allocator::Lsa || o.optlevel == 0 || o.optlevel == 8;
        if o.vnc_count != 1 && single_only {
            return Err(OptionsError::MultiVncForbidden {
                vnc_count: o.vnc_count,
                optlevel: o.optlevel,
                lsa: o.allocator == Allocator::Lsa,
            });
        }
        Ok(o)
    }

    /// The pipeline the (normalized) optlevel selects, or `None` for an
    /// optlevel the dispatcher has no case for.
    pub fn selection(&self) -> Option<Selection> {
        Some(match self.optlevel {
            0 => Selection::Minimal,
            1..=3 => Selection::Coloring,
            6 => Selection::ColoringWithLoop,
            7 => Selection::ColoringVerified,
            8 => Selection::LinearScan,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn opts(optlevel: u8) -> Options {
        Options {
            optlevel,
            ..Options::default()
        }
    }

    #[test]
    fn defaults_are_the_drivers() {
        let o = Options::default();
        assert_eq!(o.gca_dma_optlevel, 1);
        assert_eq!(o.vnc_count, 1);
        assert_eq!(o.allocator, Allocator::Default);
        assert_eq!(o.normalize(), Ok(o));
    }

    #[test]
    fn normalize_is_idempotent() {
        for (lib, smt, level) in [
            (true, false, 2),
            (true, false, 3),
            (false, true, 1),
            (true, true, 2),
        ] {
            let o = Options {
                optlevel: level,
                loops_in_backend: lib,
                smt_allocation: smt,
                ..Options::default()
            };
            let once = o.normalize().unwrap();
            assert_eq!(once.normalize(), Ok(once));
        }
    }

    #[test]
    fn allocator_names_are_the_first_assert() {
        assert_eq!(Allocator::from_name(""), Ok(Allocator::Default));
        assert_eq!(Allocator::from_name("coloring"), Ok(Allocator::Coloring));
        assert_eq!(Allocator::from_name("lsa"), Ok(Allocator::Lsa));
        assert_eq!(
            Allocator::from_name("LSA"),
            Err(OptionsError::UnknownAllocator)
        );
        // `exact` is beyond the reference (issue 7); anything else is refused.
        assert_eq!(Allocator::from_name("exact"), Ok(Allocator::Exact));
        assert_eq!(
            Allocator::from_name("smt"),
            Err(OptionsError::UnknownAllocator)
        );
        for a in [
            Allocator::Default,
            Allocator::Coloring,
            Allocator::Lsa,
            Allocator::Exact,
        ] {
            assert_eq!(Allocator::from_name(a.name()), Ok(a));
        }
    }

    #[test]
    fn only_dispatched_optlevels_are_accepted() {
        for l in 0..=20u8 {
            let r = opts(l).normalize();
            if OPTLEVELS.contains(&l) {
                assert_eq!(r.map(|o| o.optlevel), Ok(l));
            } else {
                assert_eq!(r, Err(OptionsError::BadOptlevel { optlevel: l }));
            }
        }
    }

    #[test]
    fn loops_in_backend_maps_two_to_six_and_the_rest_to_eight() {
        for l in OPTLEVELS {
            let o = Options {
                loops_in_backend: true,
                ..opts(l)
            }
            .normalize()
            .unwrap();
            assert_eq!(o.optlevel, if l == 2 { 6 } else { 8 }, "from optlevel {l}");
        }
    }

    #[test]
    fn smt_allocation_forces_seven_even_after_loops_in_backend() {
        for l in OPTLEVELS {
            for lib in [false, true] {
                let o = Options {
                    smt_allocation: true,
                    loops_in_backend: lib,
                    ..opts(l)
                }
                .normalize()
                .unwrap();
                assert_eq!(o.optlevel, 7);
            }
        }
    }

    #[test]
    fn multi_vnc_is_refused_for_lsa_opt0_and_opt8() {
        for l in OPTLEVELS {
            let r = Options {
                vnc_count: 2,
                ..opts(l)
            }
            .normalize();
            if l == 0 || l == 8 {
                assert!(matches!(r, Err(OptionsError::MultiVncForbidden { .. })));
            } else {
                assert_eq!(r.map(|o| o.vnc_count), Ok(2));
            }
        }
        let lsa = Options {
            vnc_count: 4,
            allocator: Allocator::Lsa,
            ..opts(2)
        };
        assert_eq!(
            lsa.normalize(),
            Err(OptionsError::MultiVncForbidden {
                vnc_count: 4,
                optlevel: 2,
                lsa: true
            })
        );
        // The assert sees the normalized optlevel: loops-in-backend turns 1
        // into 8, which is single-vNC only; 2 becomes 6, which is not.
        let lib = |l| Options {
            vnc_count: 2,
            loops_in_backend: true,
            ..opts(l)
        };
        assert!(matches!(
            lib(1).normalize(),
            Err(OptionsError::MultiVncForbidden { optlevel: 8, .. })
        ));
        assert_eq!(lib(2).normalize().map(|o| o.optlevel), Ok(6));
        // And SMT rescues optlevel 0 from the single-vNC rule.
        let smt = Options {
            vnc_count: 2,
            smt_allocation: true,
            ..opts(0)
        };
        assert_eq!(smt.normalize().map(|o| o.optlevel), Ok(7));
        assert_eq!(
            Options {
                vnc_count: 0,
                ..opts(2)
            }
            .normalize(),
            Err(OptionsError::ZeroVncCount)
        );
    }

    #[test]
    fn gca_dma_optlevel_and_max_regs_ranges() {
        for v in -1..=2 {
            let o = Options {
                gca_dma_optlevel: v,
                ..opts(2)
            };
            assert!(o.normalize().is_ok());
        }
        for v in [-2i8, 3, i8::MIN, i8::MAX] {
            let o = Options {
                gca_dma_optlevel: v,
                ..opts(2)
            };
            assert_eq!(
                o.normalize(),
                Err(OptionsError::BadGcaDmaOptlevel { value: v })
            );
        }
        for (v, ok) in [
            (1u16, false),
            (2, true),
            (62, true),
            (4096, true),
            (4097, false),
        ] {
            let o = Options {
                max_regs: Some(v),
                ..opts(2)
            };
            assert_eq!(o.normalize().is_ok(), ok, "max-regs {v}");
        }
    }

    #[test]
    fn selection_follows_the_switch() {
        let sel = |l| opts(l).normalize().unwrap().selection().unwrap();
        assert_eq!(sel(0), Selection::Minimal);
        assert_eq!(sel(1), Selection::Coloring);
        assert_eq!(sel(2), Selection::Coloring);
        assert_eq!(sel(3), Selection::Coloring);
        assert_eq!(sel(6), Selection::ColoringWithLoop);
        assert_eq!(sel(7), Selection::ColoringVerified);
        assert_eq!(sel(8), Selection::LinearScan);
        assert_eq!(opts(5).selection(), None);
    }

    #[test]
    fn errors_name_the_option_and_the_numbers() {
        let e = Options {
            vnc_count: 2,
            ..opts(0)
        }
        .normalize()
        .unwrap_err()
        .to_string();
        assert!(e.contains("--vnc-count 2"), "{e}");
        assert!(e.contains("optlevel 0"), "{e}");
        let e = opts(4).normalize().unwrap_err().to_string();
        assert!(e.contains("--optlevel 4"), "{e}");
        let e = Options {
            vnc_count: 3,
            allocator: Allocator::Lsa,
            ..opts(1)
        }
        .normalize()
        .unwrap_err()
        .to_string();
        assert!(e.contains("--allocator lsa"), "{e}");
        assert!(OptionsError::UnknownAllocator
            .to_string()
            .contains("coloring"));
    }
}
