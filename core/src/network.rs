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
//!
//! Value, gradient and the training designs run over the units in blocks of 64: first
//! every argument of the block, into a stack buffer; then the activation and its derivative over
//! the whole buffer in one loop of branch-free [`fastmath`](crate::fastmath) code
//! ([`fastmath32`](crate::fastmath32) in `f32`), which the compiler vectorizes (a library `exp`
//! call per unit cost about as much as the rest of the unit's work); then the directions, four
//! units per pass over the gradient. No allocation: the buffers are `[T; BLOCK]` arrays on the
//! stack. The arguments are dot products ([`dot`]) with four partial sums in `f64` and eight in
//! `f32`, two SSE2 registers either way; with that and the single-precision activations an
//! `f32` gradient runs at up to twice the `f64` throughput (see the crate docs).
//!
//! The network computes in the scalar `T` ([`Real`]; `f64` unless named): one implementation for
//! the host's `f64` and a single-precision device's `f32`. Its configuration ([`NetworkConfig`],
//! [`Nodes`]) is given in `f64` and used only to build it.

use nalgebra::{DefaultAllocator, Dim, OMatrix, OVector, U1, allocator::Allocator};
use rand_core::Rng;

use crate::error::{Error, check_dim, check_positive};
use crate::linalg::{axpy, dot};
use crate::potential::Potential;
use crate::random::{fill_standard_normal, uniform};
use crate::real::Real;

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

impl Activation {
    /// `a(x)`. Branch-free (see [`fastmath`](crate::fastmath) and [`Real`]), accurate to a few
    /// ulp in `f64`, finite for every finite `x` (softplus grows like `x`).
    #[inline(always)]
    pub fn value<T: Real>(self, x: T) -> T {
        match self {
            Activation::Softplus => x.softplus(),
            Activation::Sigmoid => x.logistic(),
            Activation::Tanh => x.tanh_fast(),
        }
    }

    /// `a'(x)`.
    #[inline(always)]
    pub fn derivative<T: Real>(self, x: T) -> T {
        match self {
            Activation::Softplus => x.logistic(),
            Activation::Sigmoid => x.logistic_derivative(),
            Activation::Tanh => x.tanh_derivative(),
        }
    }

    /// `a''(x)`.
    #[inline(always)]
    pub fn second_derivative<T: Real>(self, x: T) -> T {
        match self {
            Activation::Softplus => x.logistic_derivative(),
            Activation::Sigmoid => x.logistic_second_derivative(),
            Activation::Tanh => x.tanh_second_derivative(),
        }
    }

    /// `a'''(x)`, for the derivatives of the network's Hessian (a Riemannian metric's `∂ᵢG`).
    /// From `σ = σ(x)` (softplus, sigmoid) or `t = tanh x`: `σ(1−σ)(1−2σ)`,
    /// `σ(1−σ)(1−6σ+6σ²)`, `(6t²−2)(1−t²)`. `σ(1−σ)` is taken from the cancellation-free
    /// form of [`fastmath`](crate::fastmath), so the tails are exact zeros, not rounding noise.
    #[inline(always)]
    pub fn third_derivative<T: Real>(self, x: T) -> T {
        let (one, six) = (T::one(), T::of(6.0));
        match self {
            Activation::Softplus => x.logistic_second_derivative(),
            Activation::Sigmoid => {
                let s = x.logistic();
                x.logistic_derivative() * (one - six * s * (one - s))
            }
            Activation::Tanh => {
                let t = x.tanh_fast();
                (six * t * t - T::of(2.0)) * x.tanh_derivative()
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

impl Nodes {
    /// The unit's output `φ` as a function of its argument `x` (the pre-activation, or the
    /// squared scaled distance of a radial unit).
    #[inline(always)]
    fn value<T: Real>(self, x: T) -> T {
        match self {
            Nodes::Additive(a) => a.value(x),
            Nodes::Rbf { .. } => (T::of(-0.5) * x).exp_fast(),
        }
    }

    /// The factor `c` with `∇φ = c · wᵢ` (additive) or `∇φ = c · precision ⊙ (q − cᵢ)` (radial)
    /// at argument `x`: `a'(x)`, or `−φ` for a radial unit.
    #[inline(always)]
    fn slope<T: Real>(self, x: T) -> T {
        match self {
            Nodes::Additive(a) => a.derivative(x),
            Nodes::Rbf { .. } => -(T::of(-0.5) * x).exp_fast(),
        }
    }
}

/// Runs `$body` with `$kind` bound to a copy of `$nodes` whose variant the compiler sees as a
/// constant, one copy of `$body` per kind of unit: the `match` on the kind inside
/// [`Nodes::value`] and [`Nodes::slope`] then folds away, and a loop over a block of units is
/// one activation's straight-line code, which vectorizes. With the `compact` feature, one copy
/// that matches per unit instead (a quarter of the code, for a device's flash).
#[cfg(not(feature = "compact"))]
macro_rules! specialize {
    ($nodes:expr, $kind:ident => $body:block) => {
        match $nodes {
            Nodes::Additive(Activation::Softplus) => {
                let $kind = Nodes::Additive(Activation::Softplus);
                $body
            }
            Nodes::Additive(Activation::Sigmoid) => {
                let $kind = Nodes::Additive(Activation::Sigmoid);
                $body
            }
            Nodes::Additive(Activation::Tanh) => {
                let $kind = Nodes::Additive(Activation::Tanh);
                $body
            }
            Nodes::Rbf { width } => {
                let $kind = Nodes::Rbf { width };
                $body
            }
        }
    };
}

/// See the other definition: one copy of `$body` for every kind.
#[cfg(feature = "compact")]
macro_rules! specialize {
    ($nodes:expr, $kind:ident => $body:block) => {{
        let $kind = $nodes;
        $body
    }};
}

/// Units per block of the blocked loops. A block of 64 units of d = 50 weights is 25.6 kB, so
/// it is still in a 32 kB L1 cache when the directions re-read it after the arguments.
const BLOCK: usize = 64;

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
    fn fill<T: Real, R: Rng + ?Sized>(self, rng: &mut R, factor: f64, out: &mut [T]) {
        match self {
            WeightDistribution::Normal { sd } => {
                fill_standard_normal(rng, out);
                let scale = T::of(sd * factor);
                out.iter_mut().for_each(|x| *x *= scale);
            }
            WeightDistribution::Uniform { half_width } => {
                for x in out.iter_mut() {
                    *x = T::of((2.0 * uniform(rng) - 1.0) * half_width * factor);
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
pub struct InputTransform<D: Dim, T: Real = f64>
where
    DefaultAllocator: Allocator<D>,
{
    /// Subtracted from `q`.
    pub centre: OVector<T, D>,
    /// Divides `q − centre`, per coordinate; positive.
    pub scale: OVector<T, D>,
}

impl<D: Dim, T: Real> InputTransform<D, T>
where
    DefaultAllocator: Allocator<D>,
{
    /// The identity map in dimension `dim`.
    pub fn identity(dim: D) -> Self {
        Self {
            centre: OVector::zeros_generic(dim, U1),
            scale: OVector::from_element_generic(dim, U1, T::one()),
        }
    }

    /// A map with the given centre and scale; every scale must be finite and positive.
    pub fn new(centre: OVector<T, D>, scale: OVector<T, D>) -> Result<Self, Error> {
        check_dim(centre.len(), scale.len())?;
        for c in centre.iter() {
            if !c.is_finite() {
                return Err(Error::NotFinite("input centre"));
            }
        }
        for &s in scale.iter() {
            check_positive(s.to_f64(), "input scale")?;
        }
        Ok(Self { centre, scale })
    }
}

/// A random-basis network `z(q) = Σᵢ vᵢ φᵢ(q) + b` with input dimension `D` and `S` units.
#[derive(Clone, Debug)]
pub struct Network<D: Dim, S: Dim, T: Real = f64>
where
    DefaultAllocator: Allocator<D> + Allocator<S> + Allocator<D, S>,
{
    nodes: Nodes,
    transform: InputTransform<D, T>,
    /// Additive: column `i` is `wᵢ / scale`. Radial: column `i` is the centre in `q`-space.
    weights: OMatrix<T, D, S>,
    /// Additive: `dᵢ − (wᵢ/scale)·centre`. Radial: zero.
    offsets: OVector<T, S>,
    /// Radial: `1 / (scale² ℓ²)` per coordinate, the metric of the exponent.
    precision: OVector<T, D>,
    output: OVector<T, S>,
    bias: T,
}

impl<D: Dim, S: Dim, T: Real> Network<D, S, T>
where
    DefaultAllocator: Allocator<D> + Allocator<S> + Allocator<D, S>,
{
    /// A network with random input parameters drawn from `config`, applied after `transform`,
    /// with `hidden` units and zero output weights. The draws are the same for both scalars
    /// (made in `f64`, then rounded).
    pub fn random<R: Rng + ?Sized>(
        config: &NetworkConfig,
        transform: InputTransform<D, T>,
        hidden: S,
        rng: &mut R,
    ) -> Result<Self, Error> {
        config.weights.validate()?;
        config.offsets.validate()?;
        let dim = D::from_usize(transform.centre.len());
        let mut raw = OMatrix::<T, D, S>::zeros_generic(dim, hidden);
        let mut offsets = OVector::<T, S>::zeros_generic(hidden, U1);
        let d = dim.value();
        if d == 0 {
            return Err(Error::NotPositive("input dimension"));
        }
        let weight_factor = match config.nodes {
            Nodes::Additive(_) => 1.0 / libm::sqrt(d as f64),
            Nodes::Rbf { .. } => 1.0,
        };
        for (col, offset) in raw
            .as_mut_slice()
            .chunks_exact_mut(d)
            .zip(offsets.iter_mut())
        {
            config.weights.fill(rng, weight_factor, col);
            if let Nodes::Additive(_) = config.nodes {
                config.offsets.fill(rng, 1.0, core::slice::from_mut(offset));
            }
        }
        Self::from_raw(config.nodes, transform, raw, offsets)
    }

    /// A network from input parameters given in transformed coordinates: for additive units
    /// column `i` of `raw_weights` is `wᵢ` and `raw_offsets[i]` is `dᵢ`; for radial units column
    /// `i` is the centre `cᵢ` and the offsets are ignored. Output weights start at zero.
    pub fn from_raw(
        nodes: Nodes,
        transform: InputTransform<D, T>,
        raw_weights: OMatrix<T, D, S>,
        raw_offsets: OVector<T, S>,
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
        let d = dim.value();
        if d == 0 {
            return Err(Error::NotPositive("input dimension"));
        }
        let mut weights = raw_weights;
        let mut offsets = raw_offsets;
        let mut precision = OVector::<T, D>::zeros_generic(dim, U1);
        let (centre, scale) = (transform.centre.as_slice(), transform.scale.as_slice());
        match nodes {
            Nodes::Additive(_) => {
                let columns = weights.as_mut_slice().chunks_exact_mut(d);
                for (col, offset) in columns.zip(offsets.iter_mut()) {
                    for (w, &s) in col.iter_mut().zip(scale) {
                        *w /= s;
                    }
                    *offset -= dot(col, centre);
                }
            }
            Nodes::Rbf { width } => {
                check_positive(width, "RBF width")?;
                let width = T::of(width);
                for (p, &s) in precision.iter_mut().zip(scale) {
                    *p = T::one() / (s * s * width * width);
                }
                for col in weights.as_mut_slice().chunks_exact_mut(d) {
                    for ((w, &c), &s) in col.iter_mut().zip(centre).zip(scale) {
                        *w = c + s * *w;
                    }
                }
                offsets.fill(T::zero());
            }
        }
        Ok(Self {
            nodes,
            transform,
            weights,
            offsets,
            precision,
            output: OVector::zeros_generic(hidden, U1),
            bias: T::zero(),
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
    pub fn transform(&self) -> &InputTransform<D, T> {
        &self.transform
    }

    /// The stored input weights (column per unit, transform folded in; see the field docs).
    pub fn weights(&self) -> &OMatrix<T, D, S> {
        &self.weights
    }

    /// The stored unit offsets (transform folded in).
    pub fn offsets(&self) -> &OVector<T, S> {
        &self.offsets
    }

    /// The output weights `v`.
    pub fn output(&self) -> &OVector<T, S> {
        &self.output
    }

    /// The output bias `b`. It does not change the gradient, only the level of `z`.
    pub fn bias(&self) -> T {
        self.bias
    }

    /// Sets the output weights and bias.
    pub fn set_output(&mut self, output: &[T], bias: T) -> Result<(), Error> {
        check_dim(self.output.len(), output.len())?;
        if !bias.is_finite() || output.iter().any(|x| !x.is_finite()) {
            return Err(Error::NotFinite("output weights"));
        }
        for (v, &x) in self.output.iter_mut().zip(output) {
            *v = x;
        }
        self.bias = bias;
        Ok(())
    }

    /// The units from `start` on: each one's stored weights (a contiguous column) and offset.
    #[inline]
    fn units_from(&self, start: usize) -> impl Iterator<Item = (&[T], T)> {
        // `random`/`from_raw` refuse d = 0, so the chunks have a positive size.
        let d = self.weights.nrows().max(1);
        let weights = self.weights.as_slice().get(start * d..).unwrap_or_default();
        let offsets = self.offsets.as_slice().get(start..).unwrap_or_default();
        weights.chunks_exact(d).zip(offsets.iter().copied())
    }

    /// The argument of the unit with weights `w` and offset `offset` at `q`.
    #[inline]
    fn argument_of(&self, w: &[T], offset: T, q: &[T]) -> T {
        match self.nodes {
            Nodes::Additive(_) => dot(w, q) + offset,
            Nodes::Rbf { .. } => {
                // Four partial sums, as in `dot`, so the adds are not one dependent chain.
                let p = self.precision.as_slice();
                let (w4, w_tail) = w.as_chunks::<4>();
                let (q4, q_tail) = q.as_chunks::<4>();
                let (p4, p_tail) = p.as_chunks::<4>();
                let mut acc = [T::zero(); 4];
                for ((wc, qc), pc) in w4.iter().zip(q4).zip(p4) {
                    for k in 0..4 {
                        let diff = qc[k] - wc[k];
                        acc[k] += diff * diff * pc[k];
                    }
                }
                let mut tail = T::zero();
                for ((&wk, &qk), &pk) in w_tail.iter().zip(q_tail).zip(p_tail) {
                    let diff = qk - wk;
                    tail += diff * diff * pk;
                }
                (acc[0] + acc[2]) + (acc[1] + acc[3]) + tail
            }
        }
    }

    /// Writes the arguments of units `start, …, start + out.len() − 1` at `q` into `out`.
    ///
    /// One unit at a time: each dot product already runs at two loads per cycle, the limit of
    /// the load ports, and interleaving four units to share the loads of `q` was no faster.
    #[inline]
    fn arguments(&self, start: usize, q: &[T], out: &mut [T]) {
        for (x, (w, offset)) in out.iter_mut().zip(self.units_from(start)) {
            *x = self.argument_of(w, offset, q);
        }
    }

    /// Adds `Σⱼ cⱼ · ∇(argument of unit start + j)` to `g`, for `j < c.len()`: `cⱼ wᵢ`
    /// (additive) or `cⱼ · precision ⊙ (q − cᵢ)` (radial), four units per pass over `g`.
    #[inline]
    fn add_directions(&self, start: usize, c: &[T], q: &[T], g: &mut [T]) {
        let d = self.dim().max(1);
        let (c4, rest) = c.as_chunks::<4>();
        let done = 4 * c4.len();
        let w = self.weights.as_slice().get(start * d..).unwrap_or_default();
        match self.nodes {
            Nodes::Additive(_) => {
                for (cs, w4) in c4.iter().zip(w.chunks_exact(4 * d)) {
                    axpy4(*cs, w4, g);
                }
            }
            Nodes::Rbf { .. } => {
                let p = self.precision.as_slice();
                for (cs, w4) in c4.iter().zip(w.chunks_exact(4 * d)) {
                    let Some([w0, w1, w2, w3]) = four_columns(w4, d) else {
                        break;
                    };
                    let columns = w0.iter().zip(w1).zip(w2).zip(w3);
                    let coordinates = g.iter_mut().zip(q).zip(p);
                    for (((gk, &qk), &pk), (((&a0, &a1), &a2), &a3)) in coordinates.zip(columns) {
                        let sum = (cs[0] * (qk - a0) + cs[1] * (qk - a1))
                            + (cs[2] * (qk - a2) + cs[3] * (qk - a3));
                        *gk += pk * sum;
                    }
                }
            }
        }
        let tail = w.chunks_exact(d).skip(done);
        for (&cj, wj) in rest.iter().zip(tail) {
            self.add_direction_of(wj, cj, q, g);
        }
    }

    /// Writes the hidden-unit outputs `φᵢ(q)` into `h` (length `s`): one row of the design
    /// matrix for training the output weights.
    pub fn features(&self, q: &[T], h: &mut [T]) {
        debug_assert_eq!(h.len(), self.hidden());
        self.arguments(0, q, h);
        specialize!(self.nodes, kind => {
            for x in h.iter_mut() {
                *x = kind.value(*x);
            }
        });
    }

    /// Adds `c · ∇(argument)` of the unit with weights `w` to `g`: `c·w` or
    /// `c · precision ⊙ (q − w)`.
    #[inline]
    fn add_direction_of(&self, w: &[T], c: T, q: &[T], g: &mut [T]) {
        match self.nodes {
            Nodes::Additive(_) => axpy(c, w, g),
            Nodes::Rbf { .. } => {
                let coordinates = g.iter_mut().zip(self.precision.iter()).zip(q).zip(w);
                for (((gk, &pk), &qk), &wk) in coordinates {
                    *gk += c * pk * (qk - wk);
                }
            }
        }
    }

    /// Writes the gradients of the hidden units, `∇φᵢ(q)`, as the columns of `a` (a `d × s`
    /// column-major buffer): the rows of the score-matching design.
    pub fn feature_gradients(&self, q: &[T], a: &mut [T]) {
        let d = self.dim().max(1);
        debug_assert_eq!(a.len(), d * self.hidden());
        let mut buf = [T::zero(); BLOCK];
        for (b, cols) in a.chunks_mut(BLOCK * d).enumerate() {
            let start = b * BLOCK;
            let slopes = buf.get_mut(..cols.len() / d).unwrap_or_default();
            self.arguments(start, q, slopes);
            specialize!(self.nodes, kind => {
                for x in slopes.iter_mut() {
                    *x = kind.slope(*x);
                }
            });
            let units = self.units_from(start);
            for ((col, &slope), (w, _)) in cols.chunks_exact_mut(d).zip(&*slopes).zip(units) {
                col.fill(T::zero());
                self.add_direction_of(w, slope, q, col);
            }
        }
    }

    /// Writes the Hessian `∇²z(q)` into `out` (a `d × d` buffer; symmetric, so either order).
    /// Costs O(s·d²); used as a Riemannian metric.
    pub fn hessian(&self, q: &[T], out: &mut [T]) {
        let d = self.dim();
        debug_assert_eq!(out.len(), d * d);
        out.fill(T::zero());
        for ((w, offset), &v) in self.units_from(0).zip(self.output.iter()) {
            let x = self.argument_of(w, offset, q);
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
                    let phi = (T::of(-0.5) * x).exp_fast();
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

    /// Writes `second[i] = vᵢ a''(xᵢ)` and `third[i] = vᵢ a'''(xᵢ)` for every unit at `q`
    /// (`xᵢ = wᵢ·q + dᵢ`, `wᵢ` the stored column) when the units are additive, and returns
    /// `true`. With them the Hessian is a sum of rank-one terms, `∇²z = Σᵢ second[i] wᵢwᵢᵀ`, and
    /// so are its derivatives, `∂ₖ∇²z = Σᵢ third[i] wᵢₖ wᵢwᵢᵀ`: a Riemannian metric built from
    /// them assembles the Hessian by one matrix product and contracts the derivatives with a
    /// vector in O(s·d) (`uᵀ∂ₖ∇²z u = Σᵢ third[i] (wᵢ·u)² wᵢₖ`), where [`Network::hessian`] and
    /// [`Network::hessian_derivative_trace`] loop in O(s·d²). Radial units' Hessians are not
    /// rank one: for them it writes nothing and returns `false`.
    pub fn unit_curvatures(&self, q: &[T], second: &mut [T], third: &mut [T]) -> bool {
        let Nodes::Additive(activation) = self.nodes else {
            return false;
        };
        debug_assert_eq!(second.len(), self.hidden());
        debug_assert_eq!(third.len(), self.hidden());
        self.arguments(0, q, second);
        let v = self.output.as_slice();
        // One loop per activation, so that each is straight-line code that vectorizes.
        match activation {
            Activation::Softplus => curvatures_of(Activation::Softplus, v, second, third),
            Activation::Sigmoid => curvatures_of(Activation::Sigmoid, v, second, third),
            Activation::Tanh => curvatures_of(Activation::Tanh, v, second, third),
        }
        true
    }

    /// Writes the diagonal of the Hessian, `∂ⱼ²z = Σᵢ vᵢ a''(xᵢ) wᵢⱼ²`, into `diagonal` and
    /// `third[i] = vᵢ a'''(xᵢ)` (as [`Network::unit_curvatures`]) when the units are additive,
    /// and returns `true`; radial units: nothing written, `false`. One pass over the weights in
    /// blocks, four units per pass over `diagonal`, O(s·d) as the gradient is, where the
    /// diagonal of [`Network::hessian`] costs O(s·d²): what a diagonal Riemannian metric
    /// evaluates at every iteration of its position solves.
    pub fn hessian_diagonal(&self, q: &[T], diagonal: &mut [T], third: &mut [T]) -> bool {
        let Nodes::Additive(activation) = self.nodes else {
            return false;
        };
        let d = self.dim().max(1);
        debug_assert_eq!(diagonal.len(), self.dim());
        debug_assert_eq!(third.len(), self.hidden());
        diagonal.fill(T::zero());
        let mut second = [T::zero(); BLOCK];
        let w = self.weights.as_slice();
        let v = self.output.as_slice();
        for (b, (third, vb)) in third.chunks_mut(BLOCK).zip(v.chunks(BLOCK)).enumerate() {
            let second = second.get_mut(..third.len()).unwrap_or_default();
            self.arguments(b * BLOCK, q, second);
            match activation {
                Activation::Softplus => curvatures_of(Activation::Softplus, vb, second, third),
                Activation::Sigmoid => curvatures_of(Activation::Sigmoid, vb, second, third),
                Activation::Tanh => curvatures_of(Activation::Tanh, vb, second, third),
            }
            let block = w.get(b * BLOCK * d..).unwrap_or_default();
            let (c4, rest) = second.as_chunks::<4>();
            for (cs, w4) in c4.iter().zip(block.chunks_exact(4 * d)) {
                let Some([w0, w1, w2, w3]) = four_columns(w4, d) else {
                    break;
                };
                let columns = w0.iter().zip(w1).zip(w2).zip(w3);
                for (h, (((&a0, &a1), &a2), &a3)) in diagonal.iter_mut().zip(columns) {
                    *h += (cs[0] * a0 * a0 + cs[1] * a1 * a1) + (cs[2] * a2 * a2 + cs[3] * a3 * a3);
                }
            }
            let tail = block.chunks_exact(d).skip(4 * c4.len());
            for (&c, wi) in rest.iter().zip(tail) {
                for (h, &a) in diagonal.iter_mut().zip(wi) {
                    *h += c * a * a;
                }
            }
        }
        true
    }

    /// Writes `outₖ = Σⱼ mⱼ ∂ₖ∂ⱼ²z = Σᵢ third[i] (Σⱼ mⱼ wᵢⱼ²) wᵢₖ` for the coefficients `third`
    /// of additive units at a point ([`Network::hessian_diagonal`]): the diagonal Hessian's
    /// derivatives contracted with a vector, both contractions a diagonal metric needs. One pass
    /// over the weights, O(s·d).
    pub fn hessian_diagonal_derivative(&self, third: &[T], m: &[T], out: &mut [T]) {
        debug_assert!(matches!(self.nodes, Nodes::Additive(_)));
        let d = self.dim().max(1);
        debug_assert_eq!(third.len(), self.hidden());
        debug_assert_eq!(m.len(), self.dim());
        out.fill(T::zero());
        let w = self.weights.as_slice();
        let mut c = [T::zero(); BLOCK];
        for (b, tb) in third.chunks(BLOCK).enumerate() {
            let c = c.get_mut(..tb.len()).unwrap_or_default();
            let block = w.get(b * BLOCK * d..).unwrap_or_default();
            for ((ci, &t), wi) in c.iter_mut().zip(tb).zip(block.chunks_exact(d)) {
                let mut acc = [T::zero(); 4];
                let (w4, w_tail) = wi.as_chunks::<4>();
                let (m4, m_tail) = m.as_chunks::<4>();
                for (wc, mc) in w4.iter().zip(m4) {
                    for k in 0..4 {
                        acc[k] += mc[k] * wc[k] * wc[k];
                    }
                }
                let mut sum = (acc[0] + acc[2]) + (acc[1] + acc[3]);
                for (&a, &mk) in w_tail.iter().zip(m_tail) {
                    sum += mk * a * a;
                }
                *ci = t * sum;
            }
            self.add_directions(b * BLOCK, c, &[], out);
        }
    }

    /// Writes the derivative of the Hessian along `u`, `Σₖ uₖ ∂ₖ∇²z(q)` (a symmetric `d × d`
    /// matrix), into `out`: the network's third derivatives contracted with a vector, as a
    /// Riemannian metric built from the Hessian needs them. Costs O(s·d²), as [`Network::hessian`].
    ///
    /// Additive unit: `v a'''(x) (w·u) w wᵀ`. Radial unit, with `y = precision ⊙ (q − c)` and
    /// `P = diag(precision)`: `v φ [(Pu) yᵀ + y (Pu)ᵀ − (y·u)(y yᵀ − P)]`.
    pub fn hessian_derivative(&self, q: &[T], u: &[T], out: &mut [T]) {
        let d = self.dim();
        debug_assert_eq!(out.len(), d * d);
        out.fill(T::zero());
        for ((w, offset), &v) in self.units_from(0).zip(self.output.iter()) {
            let x = self.argument_of(w, offset, q);
            match self.nodes {
                Nodes::Additive(act) => {
                    let c = v * act.third_derivative(x) * dot(w, u);
                    for col in 0..d {
                        axpy(c * w[col], w, &mut out[col * d..(col + 1) * d]);
                    }
                }
                Nodes::Rbf { .. } => {
                    let p = &self.precision;
                    let c = v * (T::of(-0.5) * x).exp_fast();
                    let mut yu = T::zero();
                    for k in 0..d {
                        yu += p[k] * (q[k] - w[k]) * u[k];
                    }
                    for col in 0..d {
                        let ycol = p[col] * (q[col] - w[col]);
                        let pucol = p[col] * u[col];
                        for row in 0..d {
                            let yrow = p[row] * (q[row] - w[row]);
                            let purow = p[row] * u[row];
                            out[col * d + row] +=
                                c * (purow * ycol + yrow * pucol - yu * yrow * ycol);
                        }
                        out[col * d + col] += c * yu * p[col];
                    }
                }
            }
        }
    }

    /// Writes `outₖ = Σₐᵦ mₐᵦ ∂ₖ(∇²z)ₐᵦ = tr(M ∂ₖ∇²z(q))` for a symmetric `d × d` matrix `m`
    /// into `out` (length `d`): the third derivatives contracted with a matrix. A metric built
    /// from the Hessian needs exactly this form twice per point, for `tr(G⁻¹∂ₖG)` and for
    /// `(G⁻¹p)ᵀ∂ₖG(G⁻¹p)`, and it costs O(s·d²) for all `k` at once, where `d` separate
    /// [`Network::hessian_derivative`]s would cost O(s·d³).
    ///
    /// Additive unit: `v a'''(x) (wᵀMw) wₖ`. Radial unit: `v φ [2 pₖ (My)ₖ − yₖ (yᵀMy − Σₐ mₐₐ pₐ)]`.
    pub fn hessian_derivative_trace(&self, q: &[T], m: &[T], out: &mut [T]) {
        let d = self.dim();
        debug_assert_eq!(m.len(), d * d);
        debug_assert_eq!(out.len(), d);
        out.fill(T::zero());
        for ((w, offset), &v) in self.units_from(0).zip(self.output.iter()) {
            let x = self.argument_of(w, offset, q);
            match self.nodes {
                Nodes::Additive(act) => {
                    let mut quad = T::zero();
                    for col in 0..d {
                        quad += w[col] * dot(&m[col * d..(col + 1) * d], w);
                    }
                    axpy(v * act.third_derivative(x) * quad, w, out);
                }
                Nodes::Rbf { .. } => {
                    let p = &self.precision;
                    let c = v * (T::of(-0.5) * x).exp_fast();
                    let (mut quad, mut trace) = (T::zero(), T::zero());
                    for col in 0..d {
                        let ycol = p[col] * (q[col] - w[col]);
                        let mut my = T::zero();
                        for row in 0..d {
                            my += m[col * d + row] * p[row] * (q[row] - w[row]);
                        }
                        quad += ycol * my;
                        trace += m[col * d + col] * p[col];
                        out[col] += c * T::of(2.0) * p[col] * my;
                    }
                    for k in 0..d {
                        out[k] -= c * p[k] * (q[k] - w[k]) * (quad - trace);
                    }
                }
            }
        }
    }

    /// `z = b + Σᵢ vᵢ φᵢ` from the partial sums of [`add_outputs`].
    #[inline]
    fn output_value(&self, sums: [T; 4]) -> T {
        self.bias + ((sums[0] + sums[2]) + (sums[1] + sums[3]))
    }
}

/// Adds `vⱼ φⱼ` to `sums[j mod 4]`: four partial sums, so the additions are not one dependent
/// chain. Blocks start at multiples of four, so unit `i` always goes to `sums[i mod 4]`.
#[inline(always)]
fn add_outputs<T: Real>(sums: &mut [T; 4], v: &[T], phi: &[T]) {
    let (v4, v_rest) = v.as_chunks::<4>();
    let (p4, p_rest) = phi.as_chunks::<4>();
    for (vc, pc) in v4.iter().zip(p4) {
        for k in 0..4 {
            sums[k] += vc[k] * pc[k];
        }
    }
    for (sum, (&vk, &pk)) in sums.iter_mut().zip(v_rest.iter().zip(p_rest)) {
        *sum += vk * pk;
    }
}

/// Turns the arguments in `second` into `vᵢ a''(xᵢ)`, writing `vᵢ a'''(xᵢ)` into `third`.
#[inline(always)]
fn curvatures_of<T: Real>(activation: Activation, v: &[T], second: &mut [T], third: &mut [T]) {
    for ((c2, c3), &vi) in second.iter_mut().zip(third.iter_mut()).zip(v) {
        let x = *c2;
        *c2 = vi * activation.second_derivative(x);
        *c3 = vi * activation.third_derivative(x);
    }
}

/// `g += Σₖ cₖ wₖ` over the four consecutive columns `wₖ` in `w` (each of length `g.len()`):
/// `g` is loaded and stored once per four units.
#[inline(always)]
fn axpy4<T: Real>(c: [T; 4], w: &[T], g: &mut [T]) {
    let Some([w0, w1, w2, w3]) = four_columns(w, g.len()) else {
        return;
    };
    for ((((gk, &x0), &x1), &x2), &x3) in g.iter_mut().zip(w0).zip(w1).zip(w2).zip(w3) {
        *gk += (c[0] * x0 + c[1] * x1) + (c[2] * x2 + c[3] * x3);
    }
}

/// The four consecutive columns of length `d` at the start of `w` (`None` if `w` is shorter).
#[inline(always)]
fn four_columns<T>(w: &[T], d: usize) -> Option<[&[T]; 4]> {
    let (w0, rest) = w.split_at_checked(d)?;
    let (w1, rest) = rest.split_at_checked(d)?;
    let (w2, rest) = rest.split_at_checked(d)?;
    let (w3, _) = rest.split_at_checked(d)?;
    Some([w0, w1, w2, w3])
}

impl<D: Dim, S: Dim, T: Real> Potential<T> for Network<D, S, T>
where
    DefaultAllocator: Allocator<D> + Allocator<S> + Allocator<D, S>,
{
    fn dim(&self) -> usize {
        self.weights.nrows()
    }

    fn value(&self, q: &[T]) -> T {
        let mut sums = [T::zero(); 4];
        let mut phi = [T::zero(); BLOCK];
        let v = self.output.as_slice();
        for (b, vb) in v.chunks(BLOCK).enumerate() {
            let phi = phi.get_mut(..vb.len()).unwrap_or_default();
            self.arguments(b * BLOCK, q, phi);
            specialize!(self.nodes, kind => {
                for x in phi.iter_mut() {
                    *x = kind.value(*x);
                }
            });
            add_outputs(&mut sums, vb, phi);
        }
        self.output_value(sums)
    }

    fn value_and_gradient(&self, q: &[T], grad: &mut [T]) -> T {
        grad.fill(T::zero());
        let mut sums = [T::zero(); 4];
        let mut phi = [T::zero(); BLOCK];
        let mut c = [T::zero(); BLOCK];
        let v = self.output.as_slice();
        for (b, vb) in v.chunks(BLOCK).enumerate() {
            let phi = phi.get_mut(..vb.len()).unwrap_or_default();
            let c = c.get_mut(..vb.len()).unwrap_or_default();
            self.arguments(b * BLOCK, q, c);
            // The same expressions as `value` and `gradient`, so the results are bit-identical.
            specialize!(self.nodes, kind => {
                for ((p, cj), &vj) in phi.iter_mut().zip(c.iter_mut()).zip(vb) {
                    let x = *cj;
                    *p = kind.value(x);
                    *cj = vj * kind.slope(x);
                }
            });
            add_outputs(&mut sums, vb, phi);
            self.add_directions(b * BLOCK, c, q, grad);
        }
        self.output_value(sums)
    }

    fn gradient(&self, q: &[T], grad: &mut [T]) {
        grad.fill(T::zero());
        let mut c = [T::zero(); BLOCK];
        let v = self.output.as_slice();
        for (b, vb) in v.chunks(BLOCK).enumerate() {
            let c = c.get_mut(..vb.len()).unwrap_or_default();
            self.arguments(b * BLOCK, q, c);
            specialize!(self.nodes, kind => {
                for (cj, &vj) in c.iter_mut().zip(vb) {
                    *cj = vj * kind.slope(*cj);
                }
            });
            self.add_directions(b * BLOCK, c, q, grad);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SplitMix64;
    use nalgebra::Dyn;
    use std::vec;
    use std::vec::Vec;

    const KINDS: [Nodes; 4] = [
        Nodes::Additive(Activation::Softplus),
        Nodes::Additive(Activation::Sigmoid),
        Nodes::Additive(Activation::Tanh),
        Nodes::Rbf { width: 1.7 },
    ];

    fn network(nodes: Nodes, d: usize, s: usize, seed: u64) -> Network<Dyn, Dyn> {
        let mut rng = SplitMix64(seed);
        let config = NetworkConfig {
            nodes,
            ..NetworkConfig::default()
        };
        let mut centre = vec![0.0; d];
        fill_standard_normal(&mut rng, &mut centre);
        let scale: Vec<f64> = (0..d).map(|k| 0.5 + 0.25 * k as f64).collect();
        let transform = InputTransform::new(
            OVector::<f64, Dyn>::from_column_slice(&centre),
            OVector::<f64, Dyn>::from_column_slice(&scale),
        )
        .unwrap();
        let mut net = Network::random(&config, transform, Dyn(s), &mut rng).unwrap();
        let mut v = vec![0.0; s];
        fill_standard_normal(&mut rng, &mut v);
        net.set_output(&v, 0.3).unwrap();
        net
    }

    /// Unit `i`'s argument, output and gradient at `q`, one unit at a time from the definitions.
    fn naive_unit(net: &Network<Dyn, Dyn>, i: usize, q: &[f64]) -> (f64, Vec<f64>) {
        let w = net.units_from(i).next().unwrap().0;
        match net.nodes {
            Nodes::Additive(a) => {
                let x: f64 = w.iter().zip(q).map(|(wk, qk)| wk * qk).sum::<f64>() + net.offsets[i];
                (
                    a.value(x),
                    w.iter().map(|wk| a.derivative(x) * wk).collect(),
                )
            }
            Nodes::Rbf { .. } => {
                let p = net.precision.as_slice();
                let x: f64 = (0..q.len()).map(|k| p[k] * (q[k] - w[k]).powi(2)).sum();
                let phi = libm::exp(-0.5 * x);
                (
                    phi,
                    (0..q.len()).map(|k| -phi * p[k] * (q[k] - w[k])).collect(),
                )
            }
        }
    }

    /// The blocked loops (several blocks, a last block that is not a multiple of four, a
    /// dimension with a tail) agree with the unit-by-unit definitions, and value, gradient and
    /// their fused version agree bit for bit.
    #[test]
    fn blocked_evaluation_matches_unit_by_unit_definitions() {
        for (n, nodes) in KINDS.into_iter().enumerate() {
            for (d, s) in [(7, 150), (4, 64), (1, 3), (5, 129)] {
                let net = network(nodes, d, s, 10 * n as u64 + s as u64);
                let mut rng = SplitMix64(99 + d as u64);
                let mut q = vec![0.0; d];
                fill_standard_normal(&mut rng, &mut q);
                let v = net.output().as_slice();
                let mut z_ref = net.bias();
                let mut g_ref = vec![0.0; d];
                let mut h = vec![0.0; s];
                let mut a = vec![0.0; d * s];
                net.features(&q, &mut h);
                net.feature_gradients(&q, &mut a);
                let mut size = 1.0;
                for i in 0..s {
                    let (phi, grad) = naive_unit(&net, i, &q);
                    z_ref += v[i] * phi;
                    size += (v[i] * phi).abs() + grad.iter().map(|g| (v[i] * g).abs()).sum::<f64>();
                    assert!((h[i] - phi).abs() <= 1e-13, "{nodes:?} s={s}: φ_{i}");
                    for k in 0..d {
                        g_ref[k] += v[i] * grad[k];
                        assert!(
                            (a[i * d + k] - grad[k]).abs() <= 1e-13 * (1.0 + grad[k].abs()),
                            "{nodes:?} s={s}: ∂φ_{i}/∂q_{k}"
                        );
                    }
                }
                let z = net.value(&q);
                assert!(
                    (z - z_ref).abs() <= 1e-13 * size,
                    "{nodes:?} s={s}: {z} vs {z_ref}"
                );
                let mut g = vec![f64::NAN; d];
                net.gradient(&q, &mut g);
                for k in 0..d {
                    assert!(
                        (g[k] - g_ref[k]).abs() <= 1e-13 * size,
                        "{nodes:?} s={s}: ∂z/∂q_{k}"
                    );
                }
                let mut g2 = vec![f64::NAN; d];
                let z2 = net.value_and_gradient(&q, &mut g2);
                assert_eq!(z.to_bits(), z2.to_bits(), "{nodes:?} s={s}");
                let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&g), bits(&g2), "{nodes:?} s={s}");
            }
        }
    }

    /// Far from the units (arguments of ±10⁴, distances of 10⁸), everything stays finite.
    #[test]
    fn evaluation_is_finite_far_out() {
        for nodes in KINDS {
            let net = network(nodes, 3, 70, 5);
            for scale in [1e4, -1e4, 1e8] {
                let q = [scale, -0.5 * scale, 0.25 * scale];
                let mut g = [0.0; 3];
                let z = net.value_and_gradient(&q, &mut g);
                assert!(
                    z.is_finite() && g.iter().all(|x| x.is_finite()),
                    "{nodes:?} {scale}"
                );
            }
        }
    }

    /// The third derivatives, along a vector and traced against a matrix, match central
    /// differences of the Hessian for every kind of unit (the error of a central difference with
    /// h = 1e-5 is O(h²) ≈ 1e-10 relative, far below the 1e-6 allowed).
    #[test]
    fn third_derivatives_match_differences_of_the_hessian() {
        for (n, nodes) in KINDS.into_iter().enumerate() {
            let (d, s) = (4, 37);
            let net = network(nodes, d, s, 7 + n as u64);
            let mut rng = SplitMix64(5 + n as u64);
            let (mut q, mut u, mut m) = (vec![0.0; d], vec![0.0; d], vec![0.0; d * d]);
            fill_standard_normal(&mut rng, &mut q);
            fill_standard_normal(&mut rng, &mut u);
            fill_standard_normal(&mut rng, &mut m);
            for a in 0..d {
                for b in 0..a {
                    m[a * d + b] = m[b * d + a];
                }
            }
            let h = 1e-5;
            let shifted_hessian = |dir: &[f64], sign: f64| {
                let x: Vec<f64> = q
                    .iter()
                    .zip(dir)
                    .map(|(qk, dk)| qk + sign * h * dk)
                    .collect();
                let mut out = vec![0.0; d * d];
                net.hessian(&x, &mut out);
                out
            };
            let difference = |dir: &[f64]| -> Vec<f64> {
                let (plus, minus) = (shifted_hessian(dir, 1.0), shifted_hessian(dir, -1.0));
                plus.iter()
                    .zip(&minus)
                    .map(|(p, m)| (p - m) / (2.0 * h))
                    .collect()
            };
            let mut analytic = vec![0.0; d * d];
            net.hessian_derivative(&q, &u, &mut analytic);
            let numeric = difference(&u);
            let size = numeric.iter().fold(1e-3f64, |a, x| a.max(x.abs()));
            for (a, b) in analytic.iter().zip(&numeric) {
                assert!((a - b).abs() < 1e-6 * size, "{nodes:?}: {a} vs {b}");
            }
            let mut traced = vec![0.0; d];
            net.hessian_derivative_trace(&q, &m, &mut traced);
            for k in 0..d {
                let mut e = vec![0.0; d];
                e[k] = 1.0;
                let dk = difference(&e);
                let numeric: f64 = dk.iter().zip(&m).map(|(x, y)| x * y).sum();
                let size = dk.iter().fold(1e-3f64, |a, x| a.max(x.abs())) * d as f64;
                assert!(
                    (traced[k] - numeric).abs() < 1e-6 * size,
                    "{nodes:?} k = {k}: {} vs {numeric}",
                    traced[k]
                );
            }
        }
    }

    /// The rank-one form: `Σᵢ second[i] wᵢwᵢᵀ` is the Hessian and `Σᵢ third[i] (wᵢ·u) wᵢwᵢᵀ`
    /// its derivative along `u`, and the one-pass diagonal and diagonal derivatives agree with
    /// them, for every additive activation (several blocks of units, a dimension with a tail);
    /// radial units have no such form and are refused.
    #[test]
    fn unit_curvatures_rebuild_the_hessian_and_its_derivative() {
        for (n, nodes) in KINDS.into_iter().enumerate() {
            let (d, s) = (5, 150);
            let net = network(nodes, d, s, 30 + n as u64);
            let mut rng = SplitMix64(40 + n as u64);
            let (mut q, mut u) = (vec![0.0; d], vec![0.0; d]);
            fill_standard_normal(&mut rng, &mut q);
            fill_standard_normal(&mut rng, &mut u);
            let (mut second, mut third) = (vec![0.0; s], vec![0.0; s]);
            if !net.unit_curvatures(&q, &mut second, &mut third) {
                assert!(matches!(nodes, Nodes::Rbf { .. }));
                assert!(!net.hessian_diagonal(&q, &mut vec![0.0; d], &mut third));
                assert!(second.iter().chain(&third).all(|x| *x == 0.0));
                continue;
            }
            let (mut hessian, mut derivative) = (vec![0.0; d * d], vec![0.0; d * d]);
            net.hessian(&q, &mut hessian);
            net.hessian_derivative(&q, &u, &mut derivative);
            let (mut rebuilt, mut rebuilt_derivative) = (vec![0.0; d * d], vec![0.0; d * d]);
            for (i, (w, _)) in net.units_from(0).enumerate() {
                let along: f64 = w.iter().zip(&u).map(|(a, b)| a * b).sum();
                for a in 0..d {
                    for b in 0..d {
                        rebuilt[a * d + b] += second[i] * w[a] * w[b];
                        rebuilt_derivative[a * d + b] += third[i] * along * w[a] * w[b];
                    }
                }
            }
            for (mine, theirs) in [(&rebuilt, &hessian), (&rebuilt_derivative, &derivative)] {
                let size = theirs.iter().fold(1.0f64, |m, x| m.max(x.abs()));
                for (a, b) in mine.iter().zip(theirs.iter()) {
                    assert!((a - b).abs() < 1e-12 * size, "{nodes:?}: {a} vs {b}");
                }
            }
            // The diagonal alone, and its derivatives contracted with a vector m, from the
            // blocked one-pass loops.
            let (mut diagonal, mut third_again) = (vec![0.0; d], vec![0.0; s]);
            assert!(net.hessian_diagonal(&q, &mut diagonal, &mut third_again));
            assert_eq!(third_again, third);
            let mut contracted = vec![0.0; d];
            net.hessian_diagonal_derivative(&third, &u, &mut contracted);
            for k in 0..d {
                let size = hessian.iter().fold(1.0f64, |m, x| m.max(x.abs()));
                assert!((diagonal[k] - hessian[k * d + k]).abs() < 1e-12 * size);
                let mut e = vec![0.0; d];
                e[k] = 1.0;
                net.hessian_derivative(&q, &e, &mut derivative);
                let expected: f64 = (0..d).map(|j| u[j] * derivative[j * d + j]).sum();
                let size = derivative.iter().fold(1.0f64, |m, x| m.max(x.abs()));
                assert!((contracted[k] - expected).abs() < 1e-12 * size * d as f64);
            }
        }
    }
}
