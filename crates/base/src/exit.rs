//! Process exit codes, and the one policy that turns what happened in a run into one of
//! them (design.md: 0 ok, 1 measured but failed a check, 2 usage or environment error;
//! 130 interrupted, after writing what was measured).
//!
//! A run can end with several things true at once: Ctrl-C arrived after `--check` had
//! already found wrong data, or a peer died after a check failed. The code must say the
//! most important one, the same way in every tool, so scripts can rely on it:
//!
//! 1. [`Outcome::Error`] (2): a usage or environment error, or a lost peer. The results
//!    are not trustworthy as a whole, whatever else happened.
//! 2. [`Outcome::CheckFailed`] (1): measured, and a check failed (wrong elements or
//!    bytes). A finding about the fabric; an interrupt after it does not erase it.
//! 3. [`Outcome::Interrupted`] (130): stopped early on request; what was measured is
//!    written, marked incomplete, and none of it failed.
//! 4. [`Outcome::Ok`] (0).
//!
//! Tools collect the outcomes of a run and call [`code`] (or [`Outcome::worst`] and
//! [`Outcome::code`]) instead of ordering `if`s themselves.

/// Everything ran and every check passed.
pub const OK: i32 = 0;
/// Everything ran and a check failed (a bound, a correctness check, a failed pair).
pub const CHECK_FAILED: i32 = 1;
/// The run could not do what was asked (bad options, a missing device, a dead peer).
pub const ERROR: i32 = 2;
/// Stopped by SIGINT/SIGTERM (128 + SIGINT, as shells report it); what was measured is kept.
pub const INTERRUPTED: i32 = 130;

/// What one run (or one part of it) ended with. The order of the variants is the policy:
/// a later variant outranks an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Outcome {
    /// Nothing to report: exit [`OK`].
    #[default]
    Ok,
    /// Stopped by a signal: exit [`INTERRUPTED`].
    Interrupted,
    /// A check failed: exit [`CHECK_FAILED`].
    CheckFailed,
    /// The run could not do what was asked: exit [`ERROR`].
    Error,
}

impl Outcome {
    /// The process exit code of this outcome.
    pub fn code(self) -> i32 {
        match self {
            Outcome::Ok => OK,
            Outcome::Interrupted => INTERRUPTED,
            Outcome::CheckFailed => CHECK_FAILED,
            Outcome::Error => ERROR,
        }
    }

    /// The outcome that decides the exit code among several (`Ok` for none).
    pub fn worst(outcomes: impl IntoIterator<Item = Outcome>) -> Outcome {
        outcomes.into_iter().max().unwrap_or_default()
    }
}

/// The exit code of a run from everything that happened in it:
/// `exit::code([interrupted.then_some(Outcome::Interrupted), ...].into_iter().flatten())`,
/// or simply `exit::code(outcomes)` with a `Vec<Outcome>`.
pub fn code(outcomes: impl IntoIterator<Item = Outcome>) -> i32 {
    Outcome::worst(outcomes).code()
}

/// The common case in one call: a run that may have failed, found wrong data, or been
/// interrupted (any combination).
pub fn code_for(error: bool, check_failed: bool, interrupted: bool) -> i32 {
    code(
        [
            error.then_some(Outcome::Error),
            check_failed.then_some(Outcome::CheckFailed),
            interrupted.then_some(Outcome::Interrupted),
        ]
        .into_iter()
        .flatten(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_outcome_decides() {
        assert_eq!(code([]), OK);
        assert_eq!(code([Outcome::Ok, Outcome::Ok]), OK);
        assert_eq!(code([Outcome::Interrupted]), INTERRUPTED);
        // Wrong data found before Ctrl-C is still wrong data.
        assert_eq!(
            code([Outcome::Interrupted, Outcome::CheckFailed]),
            CHECK_FAILED
        );
        assert_eq!(
            code([Outcome::CheckFailed, Outcome::Interrupted]),
            CHECK_FAILED
        );
        // An error outranks everything.
        assert_eq!(
            code([Outcome::CheckFailed, Outcome::Error, Outcome::Interrupted]),
            ERROR
        );
    }

    #[test]
    fn code_for_covers_every_combination() {
        for e in [false, true] {
            for c in [false, true] {
                for i in [false, true] {
                    let want = if e {
                        ERROR
                    } else if c {
                        CHECK_FAILED
                    } else if i {
                        INTERRUPTED
                    } else {
                        OK
                    };
                    assert_eq!(code_for(e, c, i), want, "error {e} check {c} interrupt {i}");
                }
            }
        }
    }
}
