//! The random-basis shallow network (an extreme learning machine) used as a surrogate potential:
//! `z(q) = Σᵢ vᵢ φᵢ(q) + b` with `s` hidden units whose input parameters are drawn once at random
//! and never trained; only the output weights `v` and the bias `b` are fitted.
//!
//! Units are either *additive*, `φᵢ(q) = a(wᵢ·u + dᵢ)` with a softplus, sigmoid or tanh
//! activation `a`, or *radial*, `φᵢ(q) = exp(−‖u − cᵢ‖² / 2ℓ²)`, where `u = (q − centre) / scale`
//! is the input after a per-coordinate [`InputTransform`]. The transform decides how wide the
//! random units are relative to the posterior: units that vary slowly over the posterior act as
//! near-quadratic pieces (good for near-Gaussian targets), units that vary fast act as strongly
//! nonlinear ones. It changes acceptance rates a lot, so it is explicit here.
//!
//! The transform is folded into the stored weights at construction (`wᵢ/scale`, `dᵢ − wᵢ·centre/scale`),
//! so evaluation touches each weight once: value and gradient cost O(s·d), the Hessian O(s·d²).
//! Weights are stored column per unit, so the weights a unit reads are contiguous.

use nalgebra::{DefaultAllocator, Dim, OMatrix, OVector, U1, allocator::Allocator};
use rand_core::Rng;

use crate::error::{Error, check_dim, check_positive};
use crate::linalg::{axpy, dot};
use crate::potential::Potential;
use crate::random::{fill_standard_normal, uniform};

/// The activation of additive units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Activation {
    /// `log(1 + eˣ)`: grows linearly far out, as a log-posterior's negative does. The default.
    #[default]
    Softplus,
    /// `1 / (1 + e⁻ˣ)`.
    Sigmoid,
    /// `tanh(x)`.
    Tanh,
}

/// `1 / (1 + e^{-x})` without overflow.
#[inline]
fn logistic(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + libm::exp(-x))
    } else {
        let e = libm::exp(x);
        e / (1.0 + e)
    }
}

impl Activation {
    /// `a(x)`.
    #[inline]
    pub fn value(self, x: f64) -> f64 {
        match self {
            Activation::Softplus => x.max(0.0) + libm::log1p(libm::exp(-libm::fabs(x))),
            Activation::Sigmoid => logistic(x),
            Activation::Tanh => libm::tanh(x),
        }
    }

    /// `a'(x)`.
    #[inline]
    pub fn derivative(self, x: f64) -> f64 {
        match self {
            Activation::Softplus => logistic(x),
            Activation::Sigmoid => {
                let s = logistic(x);
                s * (1.0 - s)
            }
            Activation::Tanh => {
                let t = libm::tanh(x);
                1.0 - t * t
            }
        }
    }

    /// `a''(x)`.
    #[inline]
    pub fn second_derivative(self, x: f64) -> f64 {
        match self {
            Activation::Softplus => {
                let s = logistic(x);
                s * (1.0 - s)
            }
            Activation::Sigmoid => {
                let s = logistic(x);
                s * (1.0 - s) * (1.0 - 2.0 * s)
            }
            Activation::Tanh => {
                let t = libm::tanh(x);
                -2.0 * t * (1.0 - t * t)
            }
        }
    }
}

/// The kind of hidden unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Nodes {
    /// `a(w·u + d)` with the given activation.
    Additive(Activation),
    /// `exp(−‖u − c‖² / 2ℓ²)` with width `ℓ` (in the transformed coordinates `u`).
    Rbf {
        /// The width `ℓ`.
        width: f64,
    },
}

impl Default for Nodes {
    fn default() -> Self {
        Nodes::Additive(Activation::Softplus)
    }
}

/// A distribution for the random input parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WeightDistribution {
    /// `N(0, sd²)`.
    Normal {
        /// The standard deviation.
        sd: f64,
    },
    /// Uniform on `[−half_width, half_width]`.
    Uniform {
        /// Half the interval's width.
        half_width: f64,
    },
}

impl WeightDistribution {
    fn validate(self) -> Result<(), Error> {
        match self {
            WeightDistribution::Normal { sd } => check_positive(sd, "weight sd"),
            WeightDistribution::Uniform { half_width } => {
                check_positive(half_width, "weight half-width")
            }
        }
    }

    /// Fills `out` with draws, each multiplied by `factor`.
    fn fill<R: Rng + ?Sized>(self, rng: &mut R, factor: f64, out: &mut [f64]) {
        match self {
            WeightDistribution::Normal { sd } => {
                fill_standard_normal(rng, out);
                out.iter_mut().for_each(|x| *x *= sd * factor);
            }
            WeightDistribution::Uniform { half_width } => {
                for x in out.iter_mut() {
                    *x = (2.0 * uniform(rng) - 1.0) * half_width * factor;
                }
            }
        }
    }
}

/// How the random input parameters are drawn.
///
/// For additive units, each weight `wᵢⱼ` is a draw from `weights` divided by `√d`, so that
/// `wᵢ·u` has spread about that of one draw when `u` has unit spread per coordinate (the
/// original RNS code's `w ~ N(0, I/d)` is the default); each offset `dᵢ` is a draw from
/// `offsets` (default `N(0, 1)`). For radial units, centres `cᵢ` are draws from `weights`
/// (not divided by `√d`) and `offsets` is not used.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetworkConfig {
    /// The kind of unit.
    pub nodes: Nodes,
    /// The distribution of the input weights (or radial centres).
    pub weights: WeightDistribution,
    /// The distribution of the additive units' offsets.
    pub offsets: WeightDistribution,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        Self {
            nodes: Nodes::default(),
            weights: WeightDistribution::Normal { sd: 1.0 },
            offsets: WeightDistribution::Normal { sd: 1.0 },
        }
    }
}

/// The map `u = (q − centre) / scale` applied to the input before the units see it.
#[derive(Clone, Debug, PartialEq)]
pub struct InputTransform<D: Dim>
where
    DefaultAllocator: Allocator<D>,
{
    /// Subtracted from `q`.
    pub centre: OVector<f64, D>,
    /// Divides `q − centre`, per coordinate; positive.
    pub scale: OVector<f64, D>,
}

impl<D: Dim> InputTransform<D>
where
    DefaultAllocator: Allocator<D>,
{
    /// The identity map in dimension `dim`.
    pub fn identity(dim: D) -> Self {
        Self {
            centre: OVector::zeros_generic(dim, U1),
            scale: OVector::from_element_generic(dim, U1, 1.0),
        }
    }

    /// A map with the given centre and scale; every scale must be finite and positive.
    pub fn new(centre: OVector<f64, D>, scale: OVector<f64, D>) -> Result<Self, Error> {
        check_dim(centre.len(), scale.len())?;
        for &c in centre.iter() {
            if !c.is_finite() {
                return Err(Error::NotFinite("input centre"));
            }
        }
        for &s in scale.iter() {
            check_positive(s, "input scale")?;
        }
        Ok(Self { centre, scale })
    }
}

/// A random-basis network `z(q) = Σᵢ vᵢ φᵢ(q) + b` with input dimension `D` and `S` units.
#[derive(Clone, Debug)]
pub struct Network<D: Dim, S: Dim>
where
    DefaultAllocator: Allocator<D> + Allocator<S> + Allocator<D, S>,
{
    nodes: Nodes,
    transform: InputTransform<D>,
    /// Additive: column `i` is `wᵢ / scale`. Radial: column `i` is the centre in `q`-space.
    weights: OMatrix<f64, D, S>,
    /// Additive: `dᵢ − (wᵢ/scale)·centre`. Radial: zero.
    offsets: OVector<f64, S>,
    /// Radial: `1 / (scale² ℓ²)` per coordinate, the metric of the exponent.
    precision: OVector<f64, D>,
    output: OVector<f64, S>,
    bias: f64,
}

impl<D: Dim, S: Dim> Network<D, S>
where
    DefaultAllocator: Allocator<D> + Allocator<S> + Allocator<D, S>,
{
    /// A network with random input parameters drawn from `config`, applied after `transform`,
    /// with `hidden` units and zero output weights.
    pub fn random<R: Rng + ?Sized>(
        config: &NetworkConfig,
        transform: InputTransform<D>,
        hidden: S,
        rng: &mut R,
    ) -> Result<Self, Error> {
        config.weights.validate()?;
        config.offsets.validate()?;
        let dim = D::from_usize(transform.centre.len());
        let mut raw = OMatrix::<f64, D, S>::zeros_generic(dim, hidden);
        let mut offsets = OVector::<f64, S>::zeros_generic(hidden, U1);
        let d = dim.value();
        let weight_factor = match config.nodes {
            Nodes::Additive(_) => 1.0 / libm::sqrt(d as f64),
            Nodes::Rbf { .. } => 1.0,
        };
        for i in 0..hidden.value() {
            config.weights.fill(
                rng,
                weight_factor,
                &mut raw.as_mut_slice()[i * d..(i + 1) * d],
            );
            if let Nodes::Additive(_) = config.nodes {
                config
                    .offsets
                    .fill(rng, 1.0, core::slice::from_mut(&mut offsets[i]));
            }
        }
        Self::from_raw(config.nodes, transform, raw, offsets)
    }

    /// A network from input parameters given in transformed coordinates: for additive units
    /// column `i` of `raw_weights` is `wᵢ` and `raw_offsets[i]` is `dᵢ`; for radial units column
    /// `i` is the centre `cᵢ` and the offsets are ignored. Output weights start at zero.
    pub fn from_raw(
        nodes: Nodes,
        transform: InputTransform<D>,
        raw_weights: OMatrix<f64, D, S>,
        raw_offsets: OVector<f64, S>,
    ) -> Result<Self, Error> {
        // The transform's fields are public, so check it here as `InputTransform::new` does.
        let transform = InputTransform::new(transform.centre, transform.scale)?;
        check_dim(transform.centre.len(), raw_weights.nrows())?;
        check_dim(raw_weights.ncols(), raw_offsets.len())?;
        if raw_weights
            .iter()
            .chain(raw_offsets.iter())
            .any(|x| !x.is_finite())
        {
            return Err(Error::NotFinite("network input parameters"));
        }
        let (dim, hidden) = raw_weights.shape_generic();
        let mut weights = raw_weights;
        let mut offsets = raw_offsets;
        let mut precision = OVector::<f64, D>::zeros_generic(dim, U1);
        match nodes {
            Nodes::Additive(_) => {
                let d = dim.value();
                for (i, col) in weights.as_mut_slice().chunks_exact_mut(d).enumerate() {
                    for k in 0..d {
                        col[k] /= transform.scale[k];
                    }
                    offsets[i] -= dot(col, transform.centre.as_slice());
                }
            }
            Nodes::Rbf { width } => {
                check_positive(width, "RBF width")?;
                for k in 0..dim.value() {
                    let s = transform.scale[k];
                    precision[k] = 1.0 / (s * s * width * width);
                }
                let d = dim.value();
                for col in weights.as_mut_slice().chunks_exact_mut(d) {
                    for k in 0..d {
                        col[k] = transform.centre[k] + transform.scale[k] * col[k];
                    }
                }
                offsets.fill(0.0);
            }
        }
        Ok(Self {
            nodes,
            transform,
            weights,
            offsets,
            precision,
            output: OVector::zeros_generic(hidden, U1),
            bias: 0.0,
        })
    }

    /// The input dimension `d`.
    pub fn dim(&self) -> usize {
        self.weights.nrows()
    }

    /// The number of hidden units `s`.
    pub fn hidden(&self) -> usize {
        self.weights.ncols()
    }

    /// The kind of hidden unit.
    pub fn nodes(&self) -> Nodes {
        self.nodes
    }

    /// The input transform the network was built with.
    pub fn transform(&self) -> &InputTransform<D> {
        &self.transform
    }

    /// The stored input weights (column per unit, transform folded in; see the field docs).
    pub fn weights(&self) -> &OMatrix<f64, D, S> {
        &self.weights
    }

    /// The stored unit offsets (transform folded in).
    pub fn offsets(&self) -> &OVector<f64, S> {
        &self.offsets
    }

    /// The output weights `v`.
    pub fn output(&self) -> &OVector<f64, S> {
        &self.output
    }

    /// The output bias `b`. It does not change the gradient, only the level of `z`.
    pub fn bias(&self) -> f64 {
        self.bias
    }

    /// Sets the output weights and bias.
    pub fn set_output(&mut self, output: &[f64], bias: f64) -> Result<(), Error> {
        check_dim(self.hidden(), output.len())?;
        if !bias.is_finite() || output.iter().any(|x| !x.is_finite()) {
            return Err(Error::NotFinite("output weights"));
        }
        self.output.as_mut_slice().copy_from_slice(output);
        self.bias = bias;
        Ok(())
    }

    /// The stored weights of unit `i` (a contiguous column).
    #[inline]
    fn unit(&self, i: usize) -> &[f64] {
        let d = self.weights.nrows();
        &self.weights.as_slice()[i * d..(i + 1) * d]
    }

    /// Unit `i`'s pre-activation (additive) or squared scaled distance (radial) at `q`.
    #[inline]
    fn argument(&self, i: usize, q: &[f64]) -> f64 {
        let w = self.unit(i);
        match self.nodes {
            Nodes::Additive(_) => dot(w, q) + self.offsets[i],
            Nodes::Rbf { .. } => {
                let mut r2 = 0.0;
                for k in 0..q.len() {
                    let diff = q[k] - w[k];
                    r2 += diff * diff * self.precision[k];
                }
                r2
            }
        }
    }

    /// Writes the hidden-unit outputs `φᵢ(q)` into `h` (length `s`): one row of the design
    /// matrix for training the output weights.
    pub fn features(&self, q: &[f64], h: &mut [f64]) {
        debug_assert_eq!(h.len(), self.hidden());
        for (i, hi) in h.iter_mut().enumerate() {
            let x = self.argument(i, q);
            *hi = match self.nodes {
                Nodes::Additive(a) => a.value(x),
                Nodes::Rbf { .. } => libm::exp(-0.5 * x),
            };
        }
    }

    /// Unit `i`'s value and the factor `c` with `∇φᵢ(q) = c · wᵢ` (additive) or
    /// `∇φᵢ(q) = c · precision ⊙ (q − cᵢ)` (radial).
    #[inline]
    fn unit_value_and_slope(&self, i: usize, q: &[f64]) -> (f64, f64) {
        let x = self.argument(i, q);
        match self.nodes {
            Nodes::Additive(a) => (a.value(x), a.derivative(x)),
            Nodes::Rbf { .. } => {
                let phi = libm::exp(-0.5 * x);
                (phi, -phi)
            }
        }
    }

    /// Adds `c · ∇(argument of unit i)` shape to `g`: `c·wᵢ` or `c · precision ⊙ (q − cᵢ)`.
    #[inline]
    fn add_direction(&self, i: usize, c: f64, q: &[f64], g: &mut [f64]) {
        let w = self.unit(i);
        match self.nodes {
            Nodes::Additive(_) => axpy(c, w, g),
            Nodes::Rbf { .. } => {
                for k in 0..g.len() {
                    g[k] += c * self.precision[k] * (q[k] - w[k]);
                }
            }
        }
    }

    /// Writes the gradients of the hidden units, `∇φᵢ(q)`, as the columns of `a` (a `d × s`
    /// column-major buffer): the rows of the score-matching design.
    pub fn feature_gradients(&self, q: &[f64], a: &mut [f64]) {
        let d = self.dim();
        debug_assert_eq!(a.len(), d * self.hidden());
        for (i, col) in a.chunks_exact_mut(d).enumerate() {
            col.fill(0.0);
            let slope = match self.nodes {
                Nodes::Additive(act) => act.derivative(self.argument(i, q)),
                Nodes::Rbf { .. } => self.unit_value_and_slope(i, q).1,
            };
            self.add_direction(i, slope, q, col);
        }
    }

    /// Writes the Hessian `∇²z(q)` into `out` (a `d × d` buffer; symmetric, so either order).
    /// Costs O(s·d²); used as a Riemannian metric.
    pub fn hessian(&self, q: &[f64], out: &mut [f64]) {
        let d = self.dim();
        debug_assert_eq!(out.len(), d * d);
        out.fill(0.0);
        for i in 0..self.hidden() {
            let v = self.output[i];
            let x = self.argument(i, q);
            let w = self.unit(i);
            match self.nodes {
                Nodes::Additive(act) => {
                    let c = v * act.second_derivative(x);
                    for col in 0..d {
                        axpy(c * w[col], w, &mut out[col * d..(col + 1) * d]);
                    }
                }
                Nodes::Rbf { .. } => {
                    // φ = exp(−x/2), ∇φ = −φ y, ∇²φ = φ (y yᵀ − diag(precision)),
                    // with y = precision ⊙ (q − c).
                    let phi = libm::exp(-0.5 * x);
                    for col in 0..d {
                        let ycol = self.precision[col] * (q[col] - w[col]);
                        for row in 0..d {
                            let yrow = self.precision[row] * (q[row] - w[row]);
                            out[col * d + row] += v * phi * yrow * ycol;
                        }
                        out[col * d + col] -= v * phi * self.precision[col];
                    }
                }
            }
        }
    }
}

impl<D: Dim, S: Dim> Potential for Network<D, S>
where
    DefaultAllocator: Allocator<D> + Allocator<S> + Allocator<D, S>,
{
    fn dim(&self) -> usize {
        self.weights.nrows()
    }

    fn value(&self, q: &[f64]) -> f64 {
        let mut z = self.bias;
        for i in 0..self.hidden() {
            let x = self.argument(i, q);
            let phi = match self.nodes {
                Nodes::Additive(a) => a.value(x),
                Nodes::Rbf { .. } => libm::exp(-0.5 * x),
            };
            z += self.output[i] * phi;
        }
        z
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        grad.fill(0.0);
        let mut z = self.bias;
        for i in 0..self.hidden() {
            let (phi, slope) = self.unit_value_and_slope(i, q);
            z += self.output[i] * phi;
            self.add_direction(i, self.output[i] * slope, q, grad);
        }
        z
    }

    fn gradient(&self, q: &[f64], grad: &mut [f64]) {
        grad.fill(0.0);
        for i in 0..self.hidden() {
            let slope = match self.nodes {
                Nodes::Additive(act) => act.derivative(self.argument(i, q)),
                Nodes::Rbf { .. } => self.unit_value_and_slope(i, q).1,
            };
            self.add_direction(i, self.output[i] * slope, q, grad);
        }
    }
}
