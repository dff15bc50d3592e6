//! The numerical engine of the batch fits: the training states put in order, the random input
//! parameters, and the sufficient statistics (normal matrix, right-hand side, means) of the
//! ridge problems, computed with faer's parallel blocked matrix products and solved with its
//! Cholesky factorization.
//!
//! The scale factor `c` of the input transform (`u = (q − m) / (c·sd)`) enters every unit in a
//! simple way, so the expensive, `c`-independent part is computed once per fit:
//! * additive units: `wᵢ·u + dᵢ = Pₙᵢ / c + dᵢ` with `P = Ũ W` (`Ũ` the positions standardized by
//!   the mean and sd, `W` the raw weights), one `n × d × s` product;
//! * radial units centred at training states: `‖u − cᵢ‖² / ℓ² = D²ₙᵢ / (c²ℓ²)` with `D²` the squared
//!   distances in standardized coordinates, so the scale acts as a width factor.
//!
//! Each grid point then costs an elementwise pass over this `n × s` "base" matrix, the `s × s`
//! normal matrix (only its lower triangle: faer's triangular matrix product) and a Cholesky solve.

use std::ops::Range;

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt;
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, MatMut, MatRef, Par};
use nalgebra::{DMatrix, DVector, Dyn};
use rand_pcg::Pcg64;
use rayon::prelude::*;
use shmc_core::linalg::dot;
use shmc_core::random::uniform_below;
use shmc_core::{InputTransform, Network, NetworkConfig, Nodes, Potential};

use super::options::{DynNetwork, Inputs, TrainOptions};
use crate::random::chain_rng;
use crate::surrogates::FitMethod;
use crate::surrogates::states::TrainingSet;
use crate::{Error, Result};

/// The random stream (of `chain_rng(seed, ·)`) the input parameters are drawn from; chains use
/// small stream numbers, so this one does not collide with theirs.
pub(super) const WEIGHT_STREAM: usize = 0x5EED_7EA1;

/// States per block of the radial score-matching design (`block · d` rows of `s` columns).
const SCORE_BLOCK_ROWS: usize = 4096;

/// Whether state `i` (in push order) is held out: with fraction `f`, the states where
/// `⌊(i+1)f⌋ > ⌊if⌋`, i.e. every `1/f`-th state (for `f = 0.2`: states 4, 9, 14, …).
pub(crate) fn is_held_out(i: usize, fraction: f64) -> bool {
    ((i + 1) as f64 * fraction).floor() > (i as f64 * fraction).floor()
}

/// The state indices, the training states first and the held-out ones after them (each in push
/// order), and the number of training states.
fn training_order(n: usize, holdout_fraction: f64) -> (Vec<usize>, usize) {
    let (mut order, held): (Vec<usize>, Vec<usize>) =
        (0..n).partition(|&i| !is_held_out(i, holdout_fraction));
    let n_train = order.len();
    order.extend(held);
    (order, n_train)
}

/// The mean and the standard deviation of the states' positions, per coordinate, over all the
/// states (held-out ones included), in push order.
fn centre_and_sd(set: &TrainingSet) -> (Vec<f64>, Vec<f64>) {
    let (d, n) = (set.dim(), set.len());
    let mut centre = vec![0.0; d];
    for i in 0..n {
        for (m, &q) in centre.iter_mut().zip(set.position(i)) {
            *m += q;
        }
    }
    centre.iter_mut().for_each(|m| *m /= n as f64);
    let mut sd = vec![0.0; d];
    for i in 0..n {
        for k in 0..d {
            let dev = set.position(i)[k] - centre[k];
            sd[k] += dev * dev;
        }
    }
    for v in sd.iter_mut() {
        let x = (*v / (n - 1) as f64).sqrt();
        // A coordinate the states never moved in carries no information; any scale will do.
        *v = if x.is_finite() && x > 0.0 { x } else { 1.0 };
    }
    (centre, sd)
}

/// The lower Cholesky factor `L` of the covariance of the states (about `centre`), or `None`
/// when it is not positive definite (too few states, or a direction they never moved in).
fn covariance_factor(set: &TrainingSet, order: &[usize], centre: &[f64]) -> Option<DMatrix<f64>> {
    let (d, n) = (centre.len(), order.len());
    if n <= d {
        return None;
    }
    let centred = DMatrix::from_fn(d, n, |k, j| set.position(order[j])[k] - centre[k]);
    let covariance = (&centred * centred.transpose()) / (n - 1) as f64;
    covariance.cholesky().map(|c| c.l())
}

fn par() -> Par {
    Par::rayon(0)
}

/// The unit inputs at `c = 1`, `n × d` row-major with rows in `order`: `(q − m) / sd`, or
/// `L⁻¹(q − m)` when whitened by the covariance factor `L`.
fn standardize(
    set: &TrainingSet,
    order: &[usize],
    centre: &[f64],
    sd: &[f64],
    whitening: Option<&DMatrix<f64>>,
) -> Vec<f64> {
    let (d, n) = (centre.len(), order.len());
    let mut standardized = vec![0.0; n * d];
    for (row, &i) in standardized.chunks_exact_mut(d).zip(order) {
        for k in 0..d {
            row[k] = set.position(i)[k] - centre[k];
        }
    }
    match whitening {
        // Every row at once: the rows are the columns of a column-major d × n matrix.
        Some(l) => {
            let mut rows = DMatrix::from_column_slice(d, n, &standardized);
            l.solve_lower_triangular_mut(&mut rows);
            standardized.copy_from_slice(rows.as_slice());
        }
        None => standardized.chunks_exact_mut(d).for_each(|row| {
            row.iter_mut().zip(sd).for_each(|(x, s)| *x /= s);
        }),
    }
    standardized
}

/// The raw input parameters `(weights, offsets)` of the `opts.hidden` units, drawn from the
/// weight stream: for additive units as [`Network::random`] draws them, for radial units
/// centres at training states ([`draw_centres`]) and zero offsets.
fn draw_input_parameters(
    opts: &TrainOptions,
    n_train: usize,
    standardized: &[f64],
    d: usize,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let s = opts.hidden;
    let mut rng = chain_rng(opts.seed, WEIGHT_STREAM);
    match opts.nodes {
        Nodes::Additive(_) => {
            let config = NetworkConfig {
                nodes: opts.nodes,
                ..NetworkConfig::default()
            };
            // With the identity transform the stored parameters are the raw draws, exactly.
            let net: DynNetwork =
                Network::random(&config, InputTransform::identity(Dyn(d)), Dyn(s), &mut rng)?;
            Ok((
                net.weights().as_slice().to_vec(),
                net.offsets().as_slice().to_vec(),
            ))
        }
        Nodes::Rbf { .. } => {
            let centres = draw_centres(&mut rng, standardized, n_train, d, s);
            Ok((centres, vec![0.0; s]))
        }
    }
}

/// The `s` radial units' centres (`d × s` column-major, in standardized coordinates): training
/// states drawn without replacement, cycling through fresh permutations if there are more units
/// than training states.
fn draw_centres(
    rng: &mut Pcg64,
    standardized: &[f64],
    n_train: usize,
    d: usize,
    s: usize,
) -> Vec<f64> {
    let mut weights = vec![0.0; d * s];
    let mut perm: Vec<usize> = (0..n_train).collect();
    for (unit, col) in weights.chunks_exact_mut(d).enumerate() {
        let k = unit % n_train;
        let j = k + uniform_below(rng, (n_train - k) as u64) as usize;
        perm.swap(k, j);
        col.copy_from_slice(&standardized[perm[k] * d..(perm[k] + 1) * d]);
    }
    weights
}

/// The `n × s` column-major base matrix, rows in the order of `standardized`: `P = Ũ W` for
/// additive units, the squared distances `D²` to the centres for radial ones.
fn base_matrix(
    nodes: Nodes,
    standardized: &[f64],
    raw_weights: &[f64],
    n: usize,
    d: usize,
    s: usize,
) -> Vec<f64> {
    let mut base = vec![0.0; n * s];
    match nodes {
        Nodes::Additive(_) => matmul(
            MatMut::from_column_major_slice_mut(&mut base, n, s),
            Accum::Replace,
            MatRef::from_row_major_slice(standardized, n, d),
            MatRef::from_column_major_slice(raw_weights, d, s),
            1.0,
            par(),
        ),
        Nodes::Rbf { .. } => {
            base.par_chunks_mut(n).enumerate().for_each(|(i, col)| {
                let c = &raw_weights[i * d..(i + 1) * d];
                for (x, u) in col.iter_mut().zip(standardized.chunks_exact(d)) {
                    *x = u.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum();
                }
            });
        }
    }
    base
}

/// The additive units' directions in `q` at `c = 1` (`d × s` column-major): `wₖᵢ / sdₖ`, or
/// `L⁻ᵀwᵢ` when whitened. Radial units have none (an empty vector).
fn unit_directions(
    nodes: Nodes,
    whitening: Option<&DMatrix<f64>>,
    raw_weights: &[f64],
    sd: &[f64],
    d: usize,
    s: usize,
) -> Vec<f64> {
    match (nodes, whitening) {
        (Nodes::Rbf { .. }, _) => Vec::new(),
        (Nodes::Additive(_), Some(l)) => {
            let mut w = DMatrix::from_column_slice(d, s, raw_weights);
            l.tr_solve_lower_triangular_mut(&mut w);
            w.as_slice().to_vec()
        }
        (Nodes::Additive(_), None) => raw_weights
            .chunks_exact(d)
            .flat_map(|w| w.iter().zip(sd).map(|(w, s)| w / s))
            .collect(),
    }
}

/// What score matching needs beyond the base matrix: the exact gradients `G` (`n × d` row-major,
/// rows in `order`) and, for additive units, `R = G W̃` (`n × s` column-major) and the
/// directions' Gram matrix `M = W̃ᵀW̃` (`s × s` column-major); both empty for radial units.
fn score_terms(
    set: &TrainingSet,
    order: &[usize],
    nodes: Nodes,
    directions: &[f64],
    d: usize,
    s: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = order.len();
    let mut gradients = vec![0.0; n * d];
    for (row, &i) in gradients.chunks_exact_mut(d).zip(order) {
        row.copy_from_slice(set.gradient(i).expect("validated: all gradients present"));
    }
    if let Nodes::Rbf { .. } = nodes {
        return (gradients, Vec::new(), Vec::new());
    }
    let directions = MatRef::from_column_major_slice(directions, d, s);
    let mut gradient_projection = vec![0.0; n * s];
    matmul(
        MatMut::from_column_major_slice_mut(&mut gradient_projection, n, s),
        Accum::Replace,
        MatRef::from_row_major_slice(&gradients, n, d),
        directions,
        1.0,
        par(),
    );
    let mut direction_gram = vec![0.0; s * s];
    matmul(
        MatMut::from_column_major_slice_mut(&mut direction_gram, s, s),
        Accum::Replace,
        directions.transpose(),
        directions,
        1.0,
        par(),
    );
    (gradients, gradient_projection, direction_gram)
}

/// Everything about a fit that does not depend on the scale factor `c`.
pub(super) struct Prepared<'a> {
    set: &'a TrainingSet,
    method: FitMethod,
    nodes: Nodes,
    dim: usize,
    hidden: usize,
    n: usize,
    n_train: usize,
    /// State indices: the training states first, then the held-out ones.
    order: Vec<usize>,
    centre: Vec<f64>,
    sd: Vec<f64>,
    /// `n × d` row-major, rows in `order`: the unit inputs at `c = 1`, `(q − m) / sd` or, when
    /// whitened, `L⁻¹(q − m)`.
    standardized: Vec<f64>,
    /// `d × s` column-major. Additive: the raw weights `wᵢ`. Radial: the centres in standardized
    /// coordinates (the raw centres at `c = 1`).
    raw_weights: Vec<f64>,
    /// Additive units: `d × s` column-major, each unit's direction in `q` at `c = 1`, so that
    /// `wᵢ·u = w̃ᵢ·(q − m)`: `wₖᵢ / sdₖ`, or `L⁻ᵀwᵢ` when whitened. The network stores these.
    directions: Vec<f64>,
    /// The raw offsets `dᵢ` (zero for radial units).
    raw_offsets: Vec<f64>,
    /// `n × s` column-major, rows in `order`: `P` (additive) or `D²` (radial).
    base: Vec<f64>,
    /// Exact potentials, in `order`.
    targets: Vec<f64>,
    /// Exact gradients, `n × d` row-major in `order` (score matching only).
    gradients: Vec<f64>,
    /// Additive score matching: `R = G W̃` (`n × s` column-major), `G` the exact gradients.
    gradient_projection: Vec<f64>,
    /// Additive score matching: `M = W̃ᵀW̃` (`s × s` column-major): the inner products of the
    /// units' directions at `c = 1`.
    direction_gram: Vec<f64>,
}

/// The sufficient statistics of a ridge problem over some of the states.
///
/// Potential matching (columns centred): `gram = H_cᵀH_c`, `rhs = H_cᵀ(T − t̄)`. Score matching:
/// `gram = Σ AₙᵀAₙ`, `rhs = Σ Aₙᵀ∇Uₙ`. In both, `feature_mean` is the mean of the unit outputs
/// and `target_mean` that of `U`, which fix the bias. Only the lower triangle of `gram` is valid.
#[derive(Clone)]
pub(super) struct Stats {
    n: usize,
    gram: Vec<f64>,
    rhs: Vec<f64>,
    feature_mean: Vec<f64>,
    target_mean: f64,
}

impl<'a> Prepared<'a> {
    /// Orders the states, standardizes them, draws the input parameters and computes the base
    /// matrix. The set and the options must already be validated.
    pub(super) fn new(
        set: &'a TrainingSet,
        opts: &TrainOptions,
        method: FitMethod,
    ) -> Result<Self> {
        let (d, n, s) = (set.dim(), set.len(), opts.hidden);
        let (order, n_train) = training_order(n, opts.holdout_fraction);
        let (centre, sd) = centre_and_sd(set);
        let whitening = match (opts.nodes, opts.inputs) {
            (Nodes::Additive(_), Inputs::Whitened) => covariance_factor(set, &order, &centre),
            _ => None,
        };
        let standardized = standardize(set, &order, &centre, &sd, whitening.as_ref());
        let targets: Vec<f64> = order.iter().map(|&i| set.potential(i)).collect();
        let (raw_weights, raw_offsets) = draw_input_parameters(opts, n_train, &standardized, d)?;
        let base = base_matrix(opts.nodes, &standardized, &raw_weights, n, d, s);
        let directions = unit_directions(opts.nodes, whitening.as_ref(), &raw_weights, &sd, d, s);
        let (gradients, gradient_projection, direction_gram) = match method {
            FitMethod::Score => score_terms(set, &order, opts.nodes, &directions, d, s),
            FitMethod::Potential => (Vec::new(), Vec::new(), Vec::new()),
        };

        Ok(Self {
            set,
            method,
            nodes: opts.nodes,
            dim: d,
            hidden: s,
            n,
            n_train,
            order,
            centre,
            sd,
            standardized,
            raw_weights,
            directions,
            raw_offsets,
            base,
            targets,
            gradients,
            gradient_projection,
            direction_gram,
        })
    }

    /// The number of training (not held-out) states.
    #[cfg(test)]
    pub(super) fn n_train(&self) -> usize {
        self.n_train
    }

    /// The number of held-out states.
    pub(super) fn n_holdout(&self) -> usize {
        self.n - self.n_train
    }

    /// The rows of the training states.
    pub(super) fn train_rows(&self) -> Range<usize> {
        0..self.n_train
    }

    /// The rows of the held-out states.
    pub(super) fn holdout_rows(&self) -> Range<usize> {
        self.n_train..self.n
    }

    /// Whether some held-out state has an exact gradient.
    pub(super) fn holdout_has_gradients(&self) -> bool {
        self.order[self.n_train..]
            .iter()
            .any(|&i| self.set.gradient(i).is_some())
    }

    /// The network with scale factor `c` and zero output weights.
    pub(super) fn network(&self, c: f64) -> Result<DynNetwork> {
        // Additive units carry their directions in `q`, so their transform only centres and
        // applies `c`; radial units keep the per-coordinate scale their distances need.
        let (scale, raw) = match self.nodes {
            Nodes::Additive(_) => (vec![c; self.dim], self.directions.clone()),
            Nodes::Rbf { .. } => (
                self.sd.iter().map(|s| c * s).collect(),
                self.raw_weights.iter().map(|x| x / c).collect(),
            ),
        };
        let transform = InputTransform::new(
            DVector::from_column_slice(&self.centre),
            DVector::from_vec(scale),
        )?;
        Ok(Network::from_raw(
            self.nodes,
            transform,
            DMatrix::from_vec(self.dim, self.hidden, raw),
            DVector::from_column_slice(&self.raw_offsets),
        )?)
    }

    /// Unit `i`'s argument at scale `c` from its base value.
    #[inline]
    fn argument(&self, i: usize, base: f64, c: f64) -> f64 {
        match self.nodes {
            Nodes::Additive(_) => base / c + self.raw_offsets[i],
            Nodes::Rbf { width } => base / (c * c * width * width),
        }
    }

    /// A unit's output from its argument.
    #[inline]
    fn value(&self, x: f64) -> f64 {
        match self.nodes {
            Nodes::Additive(a) => a.value(x),
            Nodes::Rbf { .. } => (-0.5 * x).exp(),
        }
    }

    /// The statistics of the states in `rows` (of `order`) at scale factor `c`.
    pub(super) fn stats(&self, c: f64, rows: Range<usize>) -> Stats {
        match (self.method, self.nodes) {
            (FitMethod::Potential, _) => self.potential_stats(c, rows),
            (FitMethod::Score, Nodes::Additive(_)) => self.additive_score_stats(c, rows),
            (FitMethod::Score, Nodes::Rbf { .. }) => self.radial_score_stats(c, rows),
        }
    }

    /// Potential matching: the centred design `H_c` (built column by column in parallel), then
    /// `H_cᵀH_c` (lower triangle) and `H_cᵀ(T − t̄)`.
    fn potential_stats(&self, c: f64, rows: Range<usize>) -> Stats {
        let (n, s, m) = (self.n, self.hidden, rows.len());
        let targets = &self.targets[rows.clone()];
        let target_mean = targets.iter().sum::<f64>() / m as f64;
        let centred: Vec<f64> = targets.iter().map(|t| t - target_mean).collect();
        let mut design = vec![0.0; m * s];
        let mut feature_mean = vec![0.0; s];
        let mut rhs = vec![0.0; s];
        design
            .par_chunks_mut(m)
            .zip(feature_mean.par_iter_mut())
            .zip(rhs.par_iter_mut())
            .enumerate()
            .for_each(|(i, ((col, mean), r))| {
                let base = &self.base[i * n + rows.start..i * n + rows.end];
                for (h, &b) in col.iter_mut().zip(base) {
                    *h = self.value(self.argument(i, b, c));
                }
                let mu = col.iter().sum::<f64>() / m as f64;
                col.iter_mut().for_each(|h| *h -= mu);
                *mean = mu;
                *r = dot(col, &centred);
            });
        let mut gram = vec![0.0; s * s];
        lower_gram(&mut gram, &design, m, s, Accum::Replace);
        Stats {
            n: m,
            gram,
            rhs,
            feature_mean,
            target_mean,
        }
    }

    /// Score matching with additive units: `∇φᵢ(qₙ) = a'ₙᵢ wᵢ / (c·sd)`, so
    /// `Σₙ AₙᵀAₙ = (S'ᵀS') ⊙ M / c²` with `S'` the `n × s` matrix of `a'` and `M` the directions'
    /// Gram matrix, and `(Σₙ Aₙᵀ∇Uₙ)ᵢ = Σₙ a'ₙᵢ Rₙᵢ / c`: O(n·s²) instead of O(n·d·s²).
    fn additive_score_stats(&self, c: f64, rows: Range<usize>) -> Stats {
        let Nodes::Additive(act) = self.nodes else {
            unreachable!("additive score statistics for radial units")
        };
        let (n, s, m) = (self.n, self.hidden, rows.len());
        let mut slopes = vec![0.0; m * s];
        let mut feature_mean = vec![0.0; s];
        let mut rhs = vec![0.0; s];
        slopes
            .par_chunks_mut(m)
            .zip(feature_mean.par_iter_mut())
            .zip(rhs.par_iter_mut())
            .enumerate()
            .for_each(|(i, ((col, mean), r))| {
                let range = i * n + rows.start..i * n + rows.end;
                let base = &self.base[range.clone()];
                let proj = &self.gradient_projection[range];
                let mut phi_sum = 0.0;
                for (a, &b) in col.iter_mut().zip(base) {
                    let x = self.argument(i, b, c);
                    *a = act.derivative(x);
                    phi_sum += act.value(x);
                }
                *mean = phi_sum / m as f64;
                *r = dot(col, proj) / c;
            });
        let mut gram = vec![0.0; s * s];
        lower_gram(&mut gram, &slopes, m, s, Accum::Replace);
        let inv_c2 = 1.0 / (c * c);
        gram.par_chunks_mut(s)
            .zip(self.direction_gram.par_chunks(s))
            .enumerate()
            .for_each(|(j, (col, mcol))| {
                for i in j..s {
                    col[i] *= mcol[i] * inv_c2;
                }
            });
        Stats {
            n: m,
            gram,
            rhs,
            feature_mean,
            target_mean: self.targets[rows].iter().sum::<f64>() / m as f64,
        }
    }

    /// Score matching with radial units: the stacked design blocks `Aₙ` (`d` rows per state) of a
    /// few thousand rows at a time, accumulated into `Σ AₙᵀAₙ` by faer's triangular product.
    fn radial_score_stats(&self, c: f64, rows: Range<usize>) -> Stats {
        let Nodes::Rbf { width } = self.nodes else {
            unreachable!("radial score statistics for additive units")
        };
        let (n, s, d, m) = (self.n, self.hidden, self.dim, rows.len());
        let factor = 1.0 / (c * c * width * width);
        let block = (SCORE_BLOCK_ROWS / d).max(1);
        let mut gram = vec![0.0; s * s];
        let mut rhs = vec![0.0; s];
        let mut phi_sum = vec![0.0; s];
        let mut design = Vec::new();
        let mut start = rows.start;
        while start < rows.end {
            let states = start..(start + block).min(rows.end);
            let height = states.len() * d;
            design.clear();
            design.resize(height * s, 0.0);
            design
                .par_chunks_mut(height)
                .zip(rhs.par_iter_mut())
                .zip(phi_sum.par_iter_mut())
                .enumerate()
                .for_each(|(i, ((col, r), ps))| {
                    let centre = &self.raw_weights[i * d..(i + 1) * d];
                    for (local, state) in states.clone().enumerate() {
                        let phi = (-0.5 * self.base[i * n + state] * factor).exp();
                        *ps += phi;
                        let u = &self.standardized[state * d..(state + 1) * d];
                        let g = &self.gradients[state * d..(state + 1) * d];
                        let out = &mut col[local * d..(local + 1) * d];
                        for k in 0..d {
                            // ∂φ/∂q_k = −φ (q_k − centre_k) / (c² sd_k² ℓ²), in standardized units.
                            out[k] = -phi * (u[k] - centre[k]) * factor / self.sd[k];
                            *r += out[k] * g[k];
                        }
                    }
                });
            lower_gram(&mut gram, &design, height, s, Accum::Add);
            start = states.end;
        }
        Stats {
            n: m,
            gram,
            rhs,
            feature_mean: phi_sum.iter().map(|p| p / m as f64).collect(),
            target_mean: self.targets[rows].iter().sum::<f64>() / m as f64,
        }
    }

    /// The held-out errors of `network`: the relative RMS gradient error
    /// `√(Σ‖∇z − ∇U‖² / Σ‖∇U‖²)` over the held-out states with gradients (NaN if none) and the
    /// RMS of `z − U` over all held-out states (NaN if none).
    pub(super) fn holdout_errors(&self, network: &DynNetwork) -> (f64, f64) {
        holdout_errors(self.set, &self.order[self.n_train..], network)
    }
}

/// The held-out errors of `network` on the states `held` of `set` (see
/// [`Prepared::holdout_errors`]). Per-state terms are computed in parallel and summed in order,
/// so the result does not depend on the thread count.
pub(super) fn holdout_errors(
    set: &TrainingSet,
    held: &[usize],
    network: &DynNetwork,
) -> (f64, f64) {
    let d = set.dim();
    let terms: Vec<(f64, Option<(f64, f64)>)> = held
        .par_iter()
        .map(|&i| {
            let mut grad = vec![0.0; d];
            let z = network.value_and_gradient(set.position(i), &mut grad);
            let dz = z - set.potential(i);
            let g = set.gradient(i).map(|gu| {
                let err: f64 = grad.iter().zip(gu).map(|(a, b)| (a - b) * (a - b)).sum();
                let norm: f64 = gu.iter().map(|b| b * b).sum();
                (err, norm)
            });
            (dz * dz, g)
        })
        .collect();
    let (mut sv, mut se, mut sn, mut count) = (0.0, 0.0, 0.0, 0usize);
    for (v, g) in terms {
        sv += v;
        if let Some((e, n)) = g {
            se += e;
            sn += n;
            count += 1;
        }
    }
    let value_rmse = if held.is_empty() {
        f64::NAN
    } else {
        (sv / held.len() as f64).sqrt()
    };
    let gradient_error = if count == 0 {
        f64::NAN
    } else {
        (se / sn).sqrt()
    };
    (gradient_error, value_rmse)
}

/// `gram ← (or +=) XᵀX`, lower triangle only; `x` is `m × s` column-major.
pub(super) fn lower_gram(gram: &mut [f64], x: &[f64], m: usize, s: usize, accum: Accum) {
    let x = MatRef::from_column_major_slice(x, m, s);
    triangular::matmul(
        MatMut::from_column_major_slice_mut(gram, s, s),
        BlockStructure::TriangularLower,
        accum,
        x.transpose(),
        BlockStructure::Rectangular,
        x,
        BlockStructure::Rectangular,
        1.0,
        par(),
    );
}

impl Stats {
    /// The statistics of the union of two disjoint sets of states.
    ///
    /// Score matching: plain sums. Potential matching works with centred columns, so the sums
    /// gain the between-group terms: with `w = n_a n_b / n` and `δ = μ_a − μ_b`,
    /// `G = G_a + G_b + w δδᵀ` and `r = r_a + r_b + w δ (t̄_a − t̄_b)` (Chan et al.'s pairwise update).
    pub(super) fn combine(mut self, other: &Stats, method: FitMethod) -> Stats {
        let s = self.rhs.len();
        let (na, nb) = (self.n as f64, other.n as f64);
        let n = na + nb;
        let w = na * nb / n;
        let delta: Vec<f64> = self
            .feature_mean
            .iter()
            .zip(&other.feature_mean)
            .map(|(a, b)| a - b)
            .collect();
        let dt = self.target_mean - other.target_mean;
        let centred = method == FitMethod::Potential;
        self.gram
            .par_chunks_mut(s)
            .zip(other.gram.par_chunks(s))
            .enumerate()
            .for_each(|(j, (col, ocol))| {
                for i in j..s {
                    col[i] += ocol[i];
                    if centred {
                        col[i] += w * delta[i] * delta[j];
                    }
                }
            });
        for i in 0..s {
            self.rhs[i] += other.rhs[i];
            if centred {
                self.rhs[i] += w * delta[i] * dt;
            }
            self.feature_mean[i] = (na * self.feature_mean[i] + nb * other.feature_mean[i]) / n;
        }
        self.target_mean = (na * self.target_mean + nb * other.target_mean) / n;
        self.n += other.n;
        self
    }

    /// The ridge solution `v = (gram + λI)⁻¹ rhs` by Cholesky, and the bias
    /// `b = t̄ − μ·v` (the mean of `z − U` over the states is zero).
    pub(super) fn solve(&self, ridge: f64) -> Result<(Vec<f64>, f64)> {
        let s = self.rhs.len();
        let mut a = self.gram.clone();
        for i in 0..s {
            a[i * s + i] += ridge;
        }
        let mut mem = MemBuffer::new(llt::factor::cholesky_in_place_scratch::<f64>(
            s,
            par(),
            Default::default(),
        ));
        let stack = MemStack::new(&mut mem);
        llt::factor::cholesky_in_place(
            MatMut::from_column_major_slice_mut(&mut a, s, s),
            Default::default(),
            par(),
            stack,
            Default::default(),
        )
        .map_err(|llt::factor::LltError::NonPositivePivot { index }| {
            Error::invalid(format!(
                "the ridge normal equations ({s} output weights, ridge {ridge:e}) are not \
                 numerically positive definite (pivot {index}); increase the ridge"
            ))
        })?;
        let mut v = self.rhs.clone();
        let l = MatRef::from_column_major_slice(&a, s, s);
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            l,
            MatMut::from_column_major_slice_mut(&mut v, s, 1),
            par(),
        );
        faer::linalg::triangular_solve::solve_upper_triangular_in_place(
            l.transpose(),
            MatMut::from_column_major_slice_mut(&mut v, s, 1),
            par(),
        );
        if v.iter().any(|x| !x.is_finite()) {
            return Err(Error::invalid(
                "the ridge solution is not finite; increase the ridge",
            ));
        }
        let bias = self.target_mean - dot(&self.feature_mean, &v);
        Ok((v, bias))
    }
}
