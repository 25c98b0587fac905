//! What the integration tests share to run the pipeline: a deterministic
//! clock, the text parser that names the case on failure, and one run with
//! both checks on.

use tusk_core::ir::Module;
use tusk_core::verify::{DataflowChecker, Verifier};
use tusk_core::{Checks, Clock, Options, PipelineError, RunReport, Workspace};

/// A clock that advances `step` microseconds per reading: the runs are
/// checked, not timed, so time budgets end after a known number of reads.
#[derive(Debug)]
pub struct Ticks {
    now: u64,
    step: u64,
}

impl Ticks {
    /// A clock at 0 that advances `step` microseconds per reading.
    pub fn per_read(step: u64) -> Ticks {
        Ticks { now: 0, step }
    }
}

impl Clock for Ticks {
    fn now_micros(&mut self) -> u64 {
        self.now += self.step;
        self.now
    }
}

/// Parses `src`, panicking with the error and the text.
pub fn parse(src: &str) -> Module {
    tusk_shim::text::parse(src.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// Runs `opts` on `m` with the placement verifier and the dataflow checker
/// against a copy of the input, after reserving for them.
pub fn run_checked(
    m: &mut Module,
    opts: &Options,
    clock: &mut dyn Clock,
) -> Result<RunReport, PipelineError> {
    let original = m.clone();
    let mut ws = Workspace::new();
    ws.reserve(m, opts, Checks::Full { input: &original });
    tusk_core::run(m, opts, &mut ws, clock, Checks::Full { input: &original })
}

/// Runs the pipeline of `optlevel` on `m` with no checks (for a test that
/// checks, or corrupts, the result itself), panicking with the error.
pub fn run_unchecked(m: &mut Module, optlevel: u8, clock: &mut dyn Clock) -> RunReport {
    let opts = Options {
        optlevel,
        ..Options::default()
    }
    .normalize()
    .unwrap_or_else(|e| panic!("optlevel {optlevel}: {e}"));
    let mut ws = Workspace::new();
    ws.reserve(m, &opts, Checks::None)
        .run(clock)
        .unwrap_or_else(|e| panic!("optlevel {optlevel}: {}", e.display(m)))
}

/// The dataflow verdict of `rw` against `orig`: clean, or what the
/// checker said (a check that sampled fails: the modules are too large
/// for a test's verdict).
pub fn dataflow(orig: &Module, rw: &Module) -> Result<(), String> {
    let mut c = DataflowChecker::new();
    match c.check(orig, rw) {
        Ok(r) if r.is_clean() => {
            assert!(
                !r.coverage.sampled,
                "the check sampled: the modules are too large"
            );
            Ok(())
        }
        Ok(r) => Err(format!(
            "{} mismatches, first {}",
            r.mismatches.len() as u64 + r.dropped,
            r.mismatches[0].display(rw)
        )),
        Err(e) => Err(format!("error {e}")),
    }
}

/// The placement verdict of `m`: legal, or the first finding.
pub fn legality(m: &Module) -> Result<(), String> {
    let mut v = Verifier::for_module(m);
    let r = v.verify(m);
    match r.findings.first() {
        None => Ok(()),
        Some(f) => Err(format!(
            "{} findings, first {}",
            r.findings.len(),
            f.display(m)
        )),
    }
}
