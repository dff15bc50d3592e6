//! The core's error values: small, `Copy`, and returned by constructors that validate their
//! input, so that the hot paths (gradients, leapfrog, updates) cannot fail.

use core::fmt;

/// What a constructor or setter of the core rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Two sizes that must agree do not (for example a point of the wrong dimension).
    DimensionMismatch {
        /// The size that was required.
        expected: usize,
        /// The size that was given.
        found: usize,
    },
    /// A step size that is not a finite positive number.
    InvalidStepSize,
    /// A trajectory length of zero steps.
    ZeroSteps,
    /// A range of trajectory lengths whose smallest exceeds its largest.
    EmptyStepRange,
    /// A scale, width, mass or regularization that must be finite and positive is not.
    NotPositive(&'static str),
    /// A value that must be finite is not.
    NotFinite(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::DimensionMismatch { expected, found } => {
                write!(f, "dimension mismatch: expected {expected}, found {found}")
            }
            Error::InvalidStepSize => f.write_str("step size must be finite and positive"),
            Error::ZeroSteps => f.write_str("number of leapfrog steps must be at least 1"),
            Error::EmptyStepRange => {
                f.write_str("the smallest number of leapfrog steps exceeds the largest")
            }
            Error::NotPositive(what) => write!(f, "{what} must be finite and positive"),
            Error::NotFinite(what) => write!(f, "{what} must be finite"),
        }
    }
}

impl core::error::Error for Error {}

/// Checks that `found == expected`, as a [`Error::DimensionMismatch`] otherwise.
pub(crate) fn check_dim(expected: usize, found: usize) -> Result<(), Error> {
    if expected == found {
        Ok(())
    } else {
        Err(Error::DimensionMismatch { expected, found })
    }
}

/// Checks that `x` is finite and positive, naming it in the error otherwise.
pub(crate) fn check_positive(x: f64, what: &'static str) -> Result<(), Error> {
    if x.is_finite() && x > 0.0 {
        Ok(())
    } else {
        Err(Error::NotPositive(what))
    }
}
