//! Sizing large allocations against a memory limit before making them. A request the machine
//! cannot meet does not fail politely: Rust aborts the process ("memory allocation failed"), or
//! the kernel kills it once the pages are touched. So everything whose size a user drives (a
//! data set's dense matrix, a PDE mesh, a grid, a network's training, the draws kept in memory)
//! is sized first and refused with [`crate::Error::MemoryLimit`], which names the setting that
//! drives the size so that a front end can say which option to change.

use crate::{Error, Result};

/// `Ok` when `bytes` fits in `limit` and in this machine's address space, otherwise the error
/// stating both (`None`: the count overflowed 128 bits). `what` names the allocation in the
/// message, `driver` the setting that drives its size.
pub fn check(what: &str, driver: &'static str, bytes: Option<u128>, limit: u64) -> Result<()> {
    const GIB: f64 = (1u64 << 30) as f64;
    let limit_text = format!("{limit} bytes ({:.3} GiB)", limit as f64 / GIB);
    match bytes {
        Some(b) if b <= u128::from(limit) => match usize::try_from(b) {
            Ok(_) => Ok(()),
            Err(_) => Err(Error::invalid(format!(
                "{what} would need {b} bytes, more than this machine can address"
            ))),
        },
        Some(b) => Err(Error::MemoryLimit {
            message: format!(
                "{what} would need {b} bytes ({:.3e} GiB), above the memory limit of {limit_text}",
                b as f64 / GIB
            ),
            driver,
        }),
        None => Err(Error::MemoryLimit {
            message: format!(
                "{what} would need more than 2^128 bytes, above the memory limit of {limit_text}"
            ),
            driver,
        }),
    }
}

/// The bytes of `count` values of 8 bytes each, for [`check`] (`None` on overflow).
pub fn f64s(count: impl IntoIterator<Item = usize>) -> Option<u128> {
    count
        .into_iter()
        .try_fold(8u128, |bytes, factor| bytes.checked_mul(factor as u128))
}

/// The vectors of a model's dimension one chain holds at once (position, momentum, gradient,
/// their proposals, the metric and its running estimate, a draw's row, ...): an allowance
/// rather than a count, so that a dimension no chain could hold is refused up front.
pub const CHAIN_VECTORS: usize = 16;

/// The bytes of a parameter's name (a `String` and its text, `theta.123456`).
const NAME_BYTES: u128 = 48;

/// The bytes a model of `dim` parameters takes whatever its data: its parameter names and one
/// chain's [`CHAIN_VECTORS`] (`None` on overflow). A model whose dimension the user sets
/// (`gaussian-32`'s `d`) is refused on it before anything of that size is allocated.
pub fn dimension(dim: usize) -> Option<u128> {
    f64s([dim, CHAIN_VECTORS])?.checked_add(NAME_BYTES.checked_mul(dim as u128)?)
}

/// Half of this machine's memory (4 GiB if `/proc/meminfo` cannot be read): the front ends'
/// default memory limit (the command line's `--memory-limit`, the Python package's
/// `memory_limit`). The library's own default stays unlimited.
pub fn machine_default_limit() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024 / 2)
        })
        .unwrap_or(4 << 30)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_within_the_limit_pass_and_others_name_their_driver() {
        assert_eq!(f64s([3, 4]), Some(96));
        assert_eq!(f64s([usize::MAX, usize::MAX, usize::MAX]), None);
        assert!(check("a thing", "draws", f64s([10]), 80).is_ok());
        match check("a thing", "draws", f64s([11]), 80).unwrap_err() {
            Error::MemoryLimit { message, driver } => {
                assert_eq!(driver, "draws");
                assert!(
                    message.starts_with("a thing would need 88 bytes"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(check("a thing", "draws", None, 80).is_err());
    }
}
