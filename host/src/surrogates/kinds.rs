//! Every kind of surrogate a file can hold, by the name it is saved under. Loading dispatches on
//! the name, so a saved surrogate comes back as the kind it was, and a new kind is one more line
//! here.

use std::path::Path;

use super::anchored::{self, Anchored};
use super::file::SurrogateFile;
use super::grids::{FORCE_GRID_KIND, ForceGrid, SPARSE_GRID_KIND, SparseGrid};
use super::network::{self, NetworkSurrogate};
use super::{Surrogate, SurrogateMeta};
use crate::Result;

/// The kinds this build reads.
const KINDS: [&str; 4] = [
    network::KIND,
    FORCE_GRID_KIND,
    SPARSE_GRID_KIND,
    anchored::KIND,
];

/// Reads the surrogate file `path` (written by [`Surrogate::save`]) for a model of dimension
/// `dim`: the surrogate, of the kind the file names, and the meta of its fit.
///
/// A file that is not a surrogate file, of a kind this build does not know, for another
/// dimension, or whose record is inconsistent is an error naming the file.
pub fn load(path: &Path, dim: usize) -> Result<(Box<dyn Surrogate>, SurrogateMeta)> {
    read(SurrogateFile::open(path)?, dim)
}

/// The surrogate an opened surrogate file holds, for a model of dimension `dim`, with the meta
/// of its fit: what [`load`] does once the file is read (and what a caller holding the text in
/// memory uses, through [`SurrogateFile::parse`]).
pub fn read(file: SurrogateFile, dim: usize) -> Result<(Box<dyn Surrogate>, SurrogateMeta)> {
    let (surrogate, meta): (Box<dyn Surrogate>, SurrogateMeta) =
        match file.kind().unwrap_or(network::KIND) {
            network::KIND => {
                let (network, meta) = NetworkSurrogate::read(&file)?;
                (Box::new(network), meta)
            }
            FORCE_GRID_KIND => {
                let (grid, meta) = ForceGrid::read(&file)?;
                (Box::new(grid), meta)
            }
            SPARSE_GRID_KIND => {
                let (grid, meta) = SparseGrid::read(&file)?;
                (Box::new(grid), meta)
            }
            anchored::KIND => {
                let (surrogate, meta) = Anchored::read(&file)?;
                (Box::new(surrogate), meta)
            }
            other => {
                return Err(file.invalid(format!(
                    "unknown surrogate kind {other:?} (this build reads {})",
                    KINDS.join(", ")
                )));
            }
        };
    if surrogate.dim() != dim {
        return Err(file.invalid(format!(
            "the surrogate is for dimension {}, but the model has dimension {dim}",
            surrogate.dim()
        )));
    }
    Ok((surrogate, meta))
}
