//! The elliptic PDE inverse problem of the journal paper (section 5.2) and the precomputing
//! paper (section 4.4): infer the diffusion coefficient `c` of `∇·(c∇u) = 0` on the unit square
//! from noisy observations of `u`.
//!
//! `log c` has a Gaussian-process prior with the squared-exponential kernel (`σ² = 1`,
//! `ℓ = 0.2`), written by its Karhunen–Loève expansion truncated at `d` modes:
//! `c(x, θ) = exp(Σᵢ θᵢ √λᵢ vᵢ(x))`, `θᵢ ~ N(0, σ_θ²)` (`σ_θ = 0.5` in the journal paper, 1 in
//! the precomputing paper). The forward model solves the PDE by Q1 finite elements on an
//! `n × n` mesh (30×30 in the papers) and reads `u` at the 11×11 uniform grid; the data add
//! `N(0, 0.1²)` noise. So
//!
//! `U(θ) = ‖y − u(θ)‖² / (2 · 0.1²) + ‖θ‖² / (2σ_θ²)`.
//!
//! The data are simulated from a seeded draw of `θ` from the prior, solved on a finer mesh
//! (51×51 for the paper's 30×30, 200×200 for `pde-fine`'s 120×120) so that the model that
//! generates the data is not the one that fits them (the "inverse crime", which makes a
//! posterior look better resolved than it is).
//!
//! Cost: `U` is one forward solve (assembly, sparse Cholesky, one triangular-solve pair), and
//! `∇U` one more triangular-solve pair with the same factor, the adjoint: with `K λ = ∂J/∂u`
//! (`J` the misfit), `∂U/∂θᵢ = −λᵀ (∂K/∂θᵢ) u + θᵢ/σ_θ²`, and `∂K/∂θᵢ` is the stiffness matrix of
//! the coefficient `c √λᵢ vᵢ`, so the whole gradient is one contraction of the per-quadrature-
//! point products `∇λ·∇u` with the tabulated modes. [`EllipticPde::work`] counts the solves.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use nalgebra::{DMatrix, DVector};
use rand::SeedableRng;
use rand_pcg::Pcg64;
use shmc_core::random::fill_standard_normal;
use shmc_core::{Potential, fastmath};

use super::{ModelEntry, ModelOption, ModelSpec};
use crate::metric::{ConstantMetric, RiemannianMetric};
use crate::model::{Generative, Levels, Simulated, indexed_names};
use crate::pde::{KarhunenLoeve, Mesh, Workspace};
use crate::{Error, Model, Result};

/// The registry's entry: the journal paper's elliptic PDE inverse problem.
pub const ENTRY: ModelEntry = ModelEntry {
    name: "elliptic-pde",
    description: "elliptic PDE inverse problem: the diffusion coefficient of div(c grad u) = 0 on the unit square from u observed on an 11x11 grid with noise sd 0.1; Q1 finite elements, log c a Gaussian process (squared exponential, sd 1, length 0.2) by its Karhunen-Loeve modes (journal paper 5.2)",
    parameters: "theta.1 .. theta.d (the mode weights)",
    options: &[
        ModelOption::value("mesh", "N", "30 elements per side"),
        ModelOption::value("kl_modes", "D", "20; 5 in the sparse-grid paper"),
        ModelOption::value("prior_sd", "SD", "0.5; 1 in the sparse-grid paper"),
        ModelOption::value("data_seed", "SEED", "1: the simulated data's seed"),
    ],
    build: |spec| Ok(Box::new(from_spec(spec)?)),
    small: Some(|spec| {
        spec.set("mesh", 8);
        spec.set("kl_modes", 3);
        "8x8 mesh, 3 modes"
    }),
};

/// The elliptic PDE model `spec` describes (its mesh, modes, prior sd and data seed).
pub fn from_spec(spec: &ModelSpec) -> Result<EllipticPde> {
    let defaults = PdeSettings::default();
    EllipticPde::simulate_within(
        PdeSettings {
            mesh: spec.get("mesh")?.unwrap_or(defaults.mesh),
            modes: spec.get("kl_modes")?.unwrap_or(defaults.modes),
            prior_sd: spec.get("prior_sd")?.unwrap_or(defaults.prior_sd),
            data_seed: spec.get("data_seed")?.unwrap_or(defaults.data_seed),
        },
        spec.memory_limit,
    )
}

/// How to build the model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PdeSettings {
    /// Elements per side of the forward model's mesh.
    pub mesh: usize,
    /// Karhunen–Loève modes kept: the dimension `d`.
    pub modes: usize,
    /// The prior standard deviation `σ_θ` of every mode weight.
    pub prior_sd: f64,
    /// The seed of the true `θ` and the noise.
    pub data_seed: u64,
}

impl Default for PdeSettings {
    /// The journal paper's setting: 30×30 mesh, 20 modes, `σ_θ = 0.5`.
    fn default() -> Self {
        Self {
            mesh: EllipticPde::PAPER_MESH,
            modes: EllipticPde::PAPER_MODES,
            prior_sd: EllipticPde::PAPER_PRIOR_SD,
            data_seed: 1,
        }
    }
}

/// The posterior of the Karhunen–Loève weights `θ`.
#[derive(Debug)]
pub struct EllipticPde {
    settings: PdeSettings,
    /// The prior's expansion, which the coarser levels share.
    kl: KarhunenLoeve,
    mesh: Mesh,
    /// `√λᵢ vᵢ` at the mesh's quadrature points, row-major (`point · d + i`).
    modes: Vec<f64>,
    /// The observation operator: four `(node, weight)` pairs per observed point.
    observation: Vec<[(usize, f64); 4]>,
    y: Vec<f64>,
    truth: Vec<f64>,
    /// Elements per side of the mesh the data were simulated on.
    data_mesh: usize,
    /// The coarser levels built so far ([`Levels::coarser`]), coarsest first.
    coarse: Mutex<Vec<Arc<EllipticPde>>>,
    /// One set of buffers per concurrent evaluation (chains run on several threads).
    scratch: Mutex<Vec<Scratch>>,
    forward_solves: AtomicU64,
    adjoint_solves: AtomicU64,
    sensitivity_solves: AtomicU64,
}

/// The buffers of one evaluation.
#[derive(Debug)]
struct Scratch {
    workspace: Workspace,
    /// The coefficient at the quadrature points.
    coefficient: Vec<f64>,
    /// The solution, a nodal vector.
    u: Vec<f64>,
    /// The adjoint (or a sensitivity), a nodal vector.
    dual: Vec<f64>,
    /// Per-quadrature-point products.
    products: Vec<f64>,
    /// Right-hand sides over the unknowns.
    rhs: Vec<f64>,
}

impl EllipticPde {
    /// The papers' mesh, 30×30.
    pub const PAPER_MESH: usize = 30;
    /// The journal paper's truncation, 20 modes.
    pub const PAPER_MODES: usize = 20;
    /// The precomputing paper's truncation, 5 modes.
    pub const SPARSE_GRID_MODES: usize = 5;
    /// The journal paper's prior sd of the mode weights.
    pub const PAPER_PRIOR_SD: f64 = 0.5;
    /// The precomputing paper's prior sd of the mode weights.
    pub const SPARSE_GRID_PRIOR_SD: f64 = 1.0;
    /// The mesh the data are simulated on (finer than the model's: no inverse crime).
    pub const DATA_MESH: usize = 51;
    /// The `pde-fine` problem's mesh ([`EllipticPde::fine`]).
    pub const FINE_MESH: usize = 120;
    /// The mesh `pde-fine`'s data are simulated on.
    pub const FINE_DATA_MESH: usize = 200;
    /// Observed points per side of the uniform observation grid.
    pub const OBSERVATION_GRID: usize = 11;
    /// The observation noise sd.
    pub const NOISE_SD: f64 = 0.1;
    /// The prior covariance's variance `σ²`.
    pub const KERNEL_VARIANCE: f64 = 1.0;
    /// The prior covariance's length scale `ℓ`.
    pub const LENGTH_SCALE: f64 = 0.2;

    /// Builds the model with data simulated as `settings` says. Fails on a mesh below 2×2, no
    /// modes, or a prior sd that is not positive and finite.
    pub fn simulate(settings: PdeSettings) -> Result<Self> {
        Self::simulate_within(settings, u64::MAX)
    }

    /// [`EllipticPde::simulate`], refusing with [`Error::MemoryLimit`] (driven by `mesh`) a
    /// model that would take more than `memory_limit` bytes: the mesh's tables, the modes
    /// tabulated at its quadrature points and one chain's solve buffers are sized before they
    /// are allocated, then the sparse factor once the symbolic analysis knows its fill. (Each
    /// chain running at the same time holds solve buffers of its own.)
    pub fn simulate_within(settings: PdeSettings, memory_limit: u64) -> Result<Self> {
        Self::simulate_on(settings, Self::DATA_MESH, memory_limit)
    }

    /// The issue's `pde-fine` problem: the paper's inverse problem (20 modes, prior sd 0.5) on
    /// a [`EllipticPde::FINE_MESH`] mesh, one solve of which costs tens of milliseconds, with
    /// its data simulated on the finer [`EllipticPde::FINE_DATA_MESH`] (the paper's ratio of
    /// data mesh to model mesh, 51/30, kept roughly: 200/120).
    pub fn fine(data_seed: u64, memory_limit: u64) -> Result<Self> {
        let settings = PdeSettings {
            mesh: Self::FINE_MESH,
            data_seed,
            ..PdeSettings::default()
        };
        Self::simulate_on(settings, Self::FINE_DATA_MESH, memory_limit)
    }

    /// [`EllipticPde::simulate_within`] with the data simulated on a `data_mesh` mesh (finer
    /// than the model's, or the fit commits the inverse crime), memory-checked as the model's.
    pub fn simulate_on(settings: PdeSettings, data_mesh: usize, memory_limit: u64) -> Result<Self> {
        if !(settings.prior_sd.is_finite() && settings.prior_sd > 0.0) {
            return Err(Error::invalid(format!(
                "the prior sd of the mode weights must be positive and finite, got {}",
                settings.prior_sd
            )));
        }
        let kl = KarhunenLoeve::new(Self::KERNEL_VARIANCE, Self::LENGTH_SCALE, settings.modes)?;
        let (mesh, modes, observation) = discretize(&kl, settings, memory_limit)?;
        let points = observation_points();

        let mut rng = Pcg64::seed_from_u64(settings.data_seed);
        let mut truth = vec![0.0; settings.modes];
        fill_standard_normal(&mut rng, &mut truth);
        truth.iter_mut().for_each(|t| *t *= settings.prior_sd);
        let data_settings = PdeSettings {
            mesh: data_mesh,
            ..settings
        };
        let (fine, fine_modes, _) = discretize(&kl, data_settings, memory_limit)?;
        let u = solve_log_coefficient(&fine, &fine_modes, &truth)?;
        let mut noise = vec![0.0; points.len()];
        fill_standard_normal(&mut rng, &mut noise);
        let y = points
            .iter()
            .zip(&noise)
            .map(|(&x, e)| Ok(fine.interpolate(&u, x)? + Self::NOISE_SD * e))
            .collect::<Result<Vec<_>>>()?;

        Ok(
            Self::from_parts(settings, kl, (mesh, modes, observation), y, truth)
                .with_data_mesh(data_mesh),
        )
    }

    /// The model on `mesh` with its tabulated modes and observation operator (from
    /// [`discretize`] with `kl`), given the data `y` and the `truth` they were simulated from.
    fn from_parts(
        settings: PdeSettings,
        kl: KarhunenLoeve,
        (mesh, modes, observation): Discretized,
        y: Vec<f64>,
        truth: Vec<f64>,
    ) -> Self {
        Self {
            settings,
            kl,
            mesh,
            modes,
            observation,
            y,
            truth,
            data_mesh: Self::DATA_MESH,
            coarse: Mutex::new(Vec::new()),
            scratch: Mutex::new(Vec::new()),
            forward_solves: AtomicU64::new(0),
            adjoint_solves: AtomicU64::new(0),
            sensitivity_solves: AtomicU64::new(0),
        }
    }

    /// `self`, saying its data came from a `data_mesh` mesh (a coarse level's are the fine
    /// model's).
    fn with_data_mesh(mut self, data_mesh: usize) -> Self {
        self.data_mesh = data_mesh;
        self
    }

    /// The settings it was built with.
    pub fn settings(&self) -> PdeSettings {
        self.settings
    }

    /// The `θ` the data were simulated from.
    pub fn truth(&self) -> &[f64] {
        &self.truth
    }

    /// Elements per side of the mesh the data were simulated on.
    pub fn data_mesh(&self) -> usize {
        self.data_mesh
    }

    /// The observations, row by row of the 11×11 grid (`x₁` fastest).
    pub fn observations(&self) -> &[f64] {
        &self.y
    }

    /// The forward model: `u(θ)` at the observed points.
    pub fn forward(&self, theta: &[f64]) -> Result<Vec<f64>> {
        self.check_dim(theta)?;
        self.with_scratch(|s| {
            self.solve(theta, s)?;
            Ok(self.observe(&s.u))
        })
    }

    /// `Jᵀ w`, the gradient of `w · u(θ)` (`J = ∂u/∂θ` at the observed points): one forward
    /// and one adjoint solve, `Kλ = Oᵀw`, whatever the number of observations. A served
    /// forward model answers UM-Bridge's Gradient with it.
    pub fn forward_gradient(&self, theta: &[f64], w: &[f64]) -> Result<Vec<f64>> {
        self.check_dim(theta)?;
        self.check_observations(w)?;
        let d = self.modes();
        self.with_scratch(|s| {
            self.solve(theta, s)?;
            s.dual.fill(0.0);
            for (point, &weight) in self.observation.iter().zip(w) {
                for &(node, a) in point {
                    s.dual[node] += a * weight;
                }
            }
            self.adjoint_products(s);
            let mut out = vec![0.0; d];
            for (p, row) in s.products.iter().zip(self.modes.chunks_exact(d)) {
                for (o, m) in out.iter_mut().zip(row) {
                    *o -= p * m;
                }
            }
            Ok(out)
        })
    }

    /// `J v`, the change of `u(θ)` at the observed points along `v`: one forward and one
    /// sensitivity solve, `K s = −(Σᵢ vᵢ ∂K/∂θᵢ) u`. A served forward model answers
    /// UM-Bridge's ApplyJacobian with it.
    pub fn forward_jacobian_action(&self, theta: &[f64], v: &[f64]) -> Result<Vec<f64>> {
        self.check_dim(theta)?;
        if v.len() != self.modes() || !v.iter().all(|x| x.is_finite()) {
            return Err(Error::invalid(format!(
                "the direction must hold {} finite numbers",
                self.modes()
            )));
        }
        let n = self.mesh.unknowns();
        self.with_scratch(|s| {
            self.solve(theta, s)?;
            // ∂K/∂θᵢ has the coefficient c φᵢ, so the direction's has c (φ · v).
            let weight: Vec<f64> = s
                .coefficient
                .iter()
                .zip(self.modes.chunks_exact(self.modes()))
                .map(|(c, row)| -c * row.iter().zip(v).map(|(m, x)| m * x).sum::<f64>())
                .collect();
            s.rhs[..n].fill(0.0);
            self.mesh.apply_weighted(&weight, &s.u, &mut s.rhs[..n]);
            self.mesh.solve_again(&mut s.workspace, &mut s.rhs[..n]);
            self.sensitivity_solves.fetch_add(1, Ordering::Relaxed);
            self.mesh.expand_homogeneous(&s.rhs[..n], &mut s.dual);
            Ok(self.observe(&s.dual))
        })
    }

    /// The number of observed points: the length of [`EllipticPde::forward`]'s output.
    pub fn observation_count(&self) -> usize {
        self.observation.len()
    }

    /// The diagonal of the Hessian of `U` at `θ` (the journal paper's RMHMC metric for this
    /// problem): `1/σ_θ² + Σⱼ (∂uⱼ/∂θᵢ)²/σ_y² − Σⱼ (rⱼ/σ_y²) ∂²uⱼ/∂θᵢ²`, with `r = y − u`. It
    /// takes the forward solve, the adjoint and `d` sensitivity solves with one factorization.
    /// The last term can make an entry negative far from the data; see
    /// [`EllipticPde::gauss_newton_diagonal`] for a form that never is.
    pub fn hessian_diagonal(&self, theta: &[f64]) -> Result<Vec<f64>> {
        self.curvature(theta, true)
    }

    /// The Gauss–Newton part of [`EllipticPde::hessian_diagonal`],
    /// `1/σ_θ² + Σⱼ (∂uⱼ/∂θᵢ)²/σ_y²`: positive everywhere, and equal to the Hessian's diagonal
    /// where the residuals vanish.
    pub fn gauss_newton_diagonal(&self, theta: &[f64]) -> Result<Vec<f64>> {
        self.curvature(theta, false)
    }

    /// The model's solves so far: forward (one per `U`), adjoint (one per `∇U`) and
    /// sensitivity (`d` per Hessian diagonal), each sharing its factorization with a forward one.
    pub fn solves(&self) -> [(&'static str, u64); 3] {
        [
            (
                "forward solves",
                self.forward_solves.load(Ordering::Relaxed),
            ),
            (
                "adjoint solves",
                self.adjoint_solves.load(Ordering::Relaxed),
            ),
            (
                "sensitivity solves",
                self.sensitivity_solves.load(Ordering::Relaxed),
            ),
        ]
    }

    /// The dimension `d`: one weight per Karhunen–Loève mode.
    fn modes(&self) -> usize {
        self.settings.modes
    }

    fn check_dim(&self, theta: &[f64]) -> Result<()> {
        if theta.len() != self.modes() {
            return Err(Error::invalid(format!(
                "the PDE model has {} parameters, got {}",
                self.modes(),
                theta.len()
            )));
        }
        if !theta.iter().all(|t| t.is_finite()) {
            return Err(Error::invalid("a mode weight is not finite"));
        }
        Ok(())
    }

    /// Runs `f` with a scratch set of its own, taken from (and returned to) the pool.
    fn with_scratch<T>(&self, f: impl FnOnce(&mut Scratch) -> T) -> T {
        let taken = self
            .scratch
            .lock()
            .map(|mut pool| pool.pop())
            .ok()
            .flatten();
        let mut scratch = taken.unwrap_or_else(|| Scratch {
            workspace: self.mesh.workspace(self.modes()),
            coefficient: vec![0.0; self.mesh.quadrature_len()],
            u: vec![0.0; self.mesh.nodes()],
            dual: vec![0.0; self.mesh.nodes()],
            products: vec![0.0; self.mesh.quadrature_len()],
            rhs: vec![0.0; self.mesh.unknowns() * self.modes()],
        });
        let out = f(&mut scratch);
        if let Ok(mut pool) = self.scratch.lock() {
            pool.push(scratch);
        }
        out
    }

    /// The coefficient at the quadrature points and the forward solution into `s`.
    fn solve(&self, theta: &[f64], s: &mut Scratch) -> Result<()> {
        let d = self.modes();
        for (c, row) in s.coefficient.iter_mut().zip(self.modes.chunks_exact(d)) {
            let log_c: f64 = row.iter().zip(theta).map(|(m, t)| m * t).sum();
            *c = fastmath::exp(log_c);
        }
        if !s.coefficient.iter().all(|c| c.is_finite() && *c > 0.0) {
            return Err(Error::invalid(
                "the diffusion coefficient overflows or vanishes at these mode weights",
            ));
        }
        self.forward_solves.fetch_add(1, Ordering::Relaxed);
        self.mesh.solve(&s.coefficient, &mut s.workspace, &mut s.u)
    }

    fn check_observations(&self, w: &[f64]) -> Result<()> {
        if w.len() != self.observation.len() || !w.iter().all(|x| x.is_finite()) {
            return Err(Error::invalid(format!(
                "the weights of the observed points must be {} finite numbers",
                self.observation.len()
            )));
        }
        Ok(())
    }

    /// `u` at the observed points.
    fn observe(&self, u: &[f64]) -> Vec<f64> {
        self.observation
            .iter()
            .map(|w| w.iter().map(|&(node, a)| a * u[node]).sum())
            .collect()
    }

    /// The misfit part of `U` for the solution in `s`.
    fn misfit(&self, u: &[f64]) -> f64 {
        let scale = 0.5 / (Self::NOISE_SD * Self::NOISE_SD);
        self.observation
            .iter()
            .zip(&self.y)
            .map(|(w, y)| {
                let r = y - w.iter().map(|&(node, a)| a * u[node]).sum::<f64>();
                r * r
            })
            .sum::<f64>()
            * scale
    }

    fn prior(&self, theta: &[f64]) -> f64 {
        let v = self.settings.prior_sd * self.settings.prior_sd;
        theta.iter().map(|t| t * t).sum::<f64>() / (2.0 * v)
    }

    /// The adjoint `λ` (nodal, zero on the Dirichlet sides) of the solution in `s`:
    /// `K λ = ∂J/∂u = −Oᵀ r / σ_y²`, and the products `c · (λᵀ G_k u)` per quadrature point
    /// (see [`EllipticPde::adjoint_products`]).
    fn adjoint(&self, s: &mut Scratch) {
        let inv_var = 1.0 / (Self::NOISE_SD * Self::NOISE_SD);
        s.dual.fill(0.0);
        for (w, y) in self.observation.iter().zip(&self.y) {
            let r = y - w.iter().map(|&(node, a)| a * s.u[node]).sum::<f64>();
            for &(node, a) in w {
                s.dual[node] -= a * r * inv_var;
            }
        }
        self.adjoint_products(s);
    }

    /// Solves `K λ = b` for the nodal right-hand side `b` in `s.dual` (replaced by `λ`, zero
    /// on the Dirichlet sides), and sets the products `c · (λᵀ G_k u)` per quadrature point:
    /// the gradient of the functional whose derivative in `u` is `b` is `−Σ_k products_k φ_k`.
    fn adjoint_products(&self, s: &mut Scratch) {
        let n = self.mesh.unknowns();
        self.mesh.restrict(&s.dual, &mut s.rhs[..n]);
        self.mesh.solve_again(&mut s.workspace, &mut s.rhs[..n]);
        self.adjoint_solves.fetch_add(1, Ordering::Relaxed);
        self.mesh.expand_homogeneous(&s.rhs[..n], &mut s.dual);
        self.mesh.gradient_products(&s.dual, &s.u, &mut s.products);
        for (p, c) in s.products.iter_mut().zip(&s.coefficient) {
            *p *= c;
        }
    }

    fn curvature(&self, theta: &[f64], exact: bool) -> Result<Vec<f64>> {
        self.check_dim(theta)?;
        let d = self.modes();
        let n = self.mesh.unknowns();
        let inv_var = 1.0 / (Self::NOISE_SD * Self::NOISE_SD);
        let prior_precision = 1.0 / (self.settings.prior_sd * self.settings.prior_sd);
        self.with_scratch(|s| {
            self.solve(theta, s)?;
            self.adjoint(s);
            // Sensitivities sᵢ = −K⁻¹ (∂K/∂θᵢ u), all d in one multi-column solve.
            s.rhs.fill(0.0);
            let mut weight = vec![0.0; self.mesh.quadrature_len()];
            for i in 0..d {
                for ((w, c), row) in weight
                    .iter_mut()
                    .zip(&s.coefficient)
                    .zip(self.modes.chunks_exact(d))
                {
                    *w = -c * row[i];
                }
                self.mesh
                    .apply_weighted(&weight, &s.u, &mut s.rhs[i * n..(i + 1) * n]);
            }
            self.mesh.solve_again(&mut s.workspace, &mut s.rhs);
            self.sensitivity_solves
                .fetch_add(d as u64, Ordering::Relaxed);
            let lambda = s.dual.clone();
            let mut sensitivity = vec![0.0; self.mesh.nodes()];
            let mut cross = vec![0.0; self.mesh.quadrature_len()];
            let mut out = vec![prior_precision; d];
            for (i, h) in out.iter_mut().enumerate() {
                self.mesh
                    .expand_homogeneous(&s.rhs[i * n..(i + 1) * n], &mut sensitivity);
                let os = self.observe(&sensitivity);
                *h += os.iter().map(|v| v * v).sum::<f64>() * inv_var;
                if exact {
                    // λᵀ K ∂²u = −λᵀ (2 ∂K_i sᵢ + ∂²K_ii u), with ∂K_i = Σ c φᵢ G and
                    // ∂²K_ii = Σ c φᵢ² G; s.products already holds c · (λᵀ G u).
                    self.mesh
                        .gradient_products(&lambda, &sensitivity, &mut cross);
                    let mut second = 0.0;
                    for (((x, p), c), row) in cross
                        .iter()
                        .zip(&s.products)
                        .zip(&s.coefficient)
                        .zip(self.modes.chunks_exact(d))
                    {
                        let phi = row[i];
                        second += 2.0 * c * phi * x + phi * phi * p;
                    }
                    *h -= second;
                }
            }
            Ok(out)
        })
    }
}

/// A mesh with the modes tabulated at its quadrature points and the observation operator.
type Discretized = (Mesh, Vec<f64>, Vec<[(usize, f64); 4]>);

/// The `settings.mesh` mesh, `kl`'s modes at its quadrature points and its observation
/// operator, refused with [`Error::MemoryLimit`] (driven by `mesh`) past `memory_limit` bytes:
/// the mesh's tables, the modes tabulated at its quadrature points and one chain's solve
/// buffers are sized before they are allocated, then the sparse factor once the symbolic
/// analysis knows its fill.
fn discretize(kl: &KarhunenLoeve, settings: PdeSettings, memory_limit: u64) -> Result<Discretized> {
    let (n, d) = (settings.mesh, settings.modes);
    let what = format!("a {n}×{n} finite-element mesh with {d} Karhunen–Loève modes");
    // The modes and products at 4n² quadrature points, the solution and its dual at
    // (n + 1)² nodes, and as many right-hand sides as modes.
    let before_analysis = Mesh::table_bytes(n).and_then(|tables| {
        let points = crate::memory::f64s([4, n, n, d + 2])?;
        let nodes = crate::memory::f64s([n + 1, n + 1, d + 2])?;
        tables.checked_add(points)?.checked_add(nodes)
    });
    crate::memory::check(&what, "mesh", before_analysis, memory_limit)?;
    let mesh = Mesh::new(n)?;
    let total = before_analysis.and_then(|b| b.checked_add(mesh.workspace_bytes(d)));
    crate::memory::check(&what, "mesh", total, memory_limit)?;
    let modes = kl.tabulate(&mesh.quadrature_points());
    let observation = observation_points()
        .iter()
        .map(|&x| mesh.interpolation_weights(x))
        .collect::<Result<Vec<_>>>()?;
    Ok((mesh, modes, observation))
}

/// The uniform 11×11 observation grid, `x₁` fastest.
fn observation_points() -> Vec<[f64; 2]> {
    let m = EllipticPde::OBSERVATION_GRID;
    let step = 1.0 / (m - 1) as f64;
    (0..m)
        .flat_map(|j| (0..m).map(move |i| [i as f64 * step, j as f64 * step]))
        .collect()
}

/// The solution on `mesh` for `log c = modes · θ` at its quadrature points (the data's truth).
fn solve_log_coefficient(mesh: &Mesh, modes: &[f64], theta: &[f64]) -> Result<Vec<f64>> {
    let coefficient: Vec<f64> = modes
        .chunks_exact(theta.len())
        .map(|row| row.iter().zip(theta).map(|(m, t)| m * t).sum::<f64>().exp())
        .collect();
    let mut u = vec![0.0; mesh.nodes()];
    mesh.solve(&coefficient, &mut mesh.workspace(1), &mut u)?;
    Ok(u)
}

impl Potential for EllipticPde {
    fn dim(&self) -> usize {
        self.modes()
    }

    /// `+∞` where the solve fails (a non-finite `θ`, or a coefficient that overflows): the
    /// sampler rejects such a proposal as divergent.
    fn value(&self, q: &[f64]) -> f64 {
        if self.check_dim(q).is_err() {
            return f64::INFINITY;
        }
        self.with_scratch(|s| match self.solve(q, s) {
            Ok(()) => self.misfit(&s.u) + self.prior(q),
            Err(_) => f64::INFINITY,
        })
    }

    fn value_and_gradient(&self, q: &[f64], grad: &mut [f64]) -> f64 {
        if self.check_dim(q).is_err() {
            grad.fill(f64::NAN);
            return f64::INFINITY;
        }
        let d = self.modes();
        let prior_var = self.settings.prior_sd * self.settings.prior_sd;
        self.with_scratch(|s| {
            if self.solve(q, s).is_err() {
                grad.fill(f64::NAN);
                return f64::INFINITY;
            }
            let u = self.misfit(&s.u) + self.prior(q);
            self.adjoint(s);
            for (g, t) in grad.iter_mut().zip(q) {
                *g = t / prior_var;
            }
            for (p, row) in s.products.iter().zip(self.modes.chunks_exact(d)) {
                for (g, m) in grad.iter_mut().zip(row) {
                    *g -= p * m;
                }
            }
            u
        })
    }
}

/// `θ ~ N(0, σ_θ² I)` and data `u(θ) + N(0, 0.1²)` at the observed points, solved on this
/// model's own mesh: calibration asks whether the sampler finds the posterior of the model as
/// written, so here the data come from the very model that fits them (unlike
/// [`EllipticPde::simulate`], which avoids that on purpose). From the stream, in order: the `d`
/// normals behind `θ`, then the 121 behind the noise.
impl Generative for EllipticPde {
    fn simulate(&self, seed: u64) -> Result<Simulated> {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut truth = vec![0.0; self.modes()];
        fill_standard_normal(&mut rng, &mut truth);
        truth.iter_mut().for_each(|t| *t *= self.settings.prior_sd);
        let mut y = self.forward(&truth)?;
        let mut noise = vec![0.0; y.len()];
        fill_standard_normal(&mut rng, &mut noise);
        y.iter_mut()
            .zip(&noise)
            .for_each(|(v, e)| *v += Self::NOISE_SD * e);
        let posterior = Self::from_parts(
            PdeSettings {
                data_seed: seed,
                ..self.settings
            },
            self.kl.clone(),
            (
                Mesh::new(self.settings.mesh)?,
                self.modes.clone(),
                self.observation.clone(),
            ),
            y,
            truth.clone(),
        );
        Ok(Simulated {
            truth,
            posterior: Box::new(posterior),
        })
    }
}

impl Model for EllipticPde {
    fn generative(&self) -> Option<&dyn Generative> {
        Some(self)
    }

    /// One [`Scratch`]: each chain evaluating at once takes its own from the pool.
    fn bytes_per_chain(&self) -> u128 {
        let vectors = 2 * self.mesh.quadrature_len()
            + 2 * self.mesh.nodes()
            + self.mesh.unknowns() * self.modes();
        self.mesh.workspace_bytes(self.modes()) + 8 * vectors as u128
    }

    fn parameter_names(&self) -> Vec<String> {
        indexed_names("theta", self.modes())
    }

    fn notes(&self) -> Vec<String> {
        let s = self.settings;
        vec![format!(
            "{}x{} Q1 mesh, {} Karhunen-Loeve modes with prior sd {}, {} observations (noise sd \
             {}) simulated on a {}x{} mesh from data seed {}",
            s.mesh,
            s.mesh,
            s.modes,
            s.prior_sd,
            self.y.len(),
            Self::NOISE_SD,
            self.data_mesh,
            self.data_mesh,
            s.data_seed
        )]
    }

    /// Its own solves, then each coarser level's forward and adjoint solves, coarsest first,
    /// named by their mesh ("forward solves (10x10)").
    fn work(&self) -> Vec<(&'static str, u64)> {
        let mut work = self.solves().to_vec();
        for level in self
            .coarse
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let [forward, adjoint] = level_names(level.settings.mesh);
            let [(_, f), (_, a), _] = level.solves();
            work.extend([(forward, f), (adjoint, a)]);
        }
        work
    }

    fn levels(&self) -> Option<&dyn Levels> {
        Some(self)
    }

    /// The Gauss–Newton diagonal (the Fisher information's diagonal plus the prior precision)
    /// at `start`, frozen there: a constant diagonal metric, so RMHMC here is HMC with that mass
    /// matrix. The papers' RMHMC uses the full Fisher metric at every point; its derivatives
    /// need second-order sensitivities (`d²` more solves per point), which this model does not
    /// compute, and a metric whose derivatives are approximated would make the integrator
    /// irreversible and the chain inexact.
    fn riemannian_metric(&self, start: &[f64]) -> Option<Box<dyn RiemannianMetric + '_>> {
        let diagonal = self.gauss_newton_diagonal(start).ok()?;
        let metric = ConstantMetric::new(DMatrix::from_diagonal(&DVector::from_vec(diagonal)));
        Some(Box::new(metric.ok()?))
    }
}

/// The coarser levels are the same inverse problem on a coarser mesh: the same Karhunen–Loève
/// modes (tabulated at the coarse mesh's quadrature points), prior, observation points (read
/// through the coarse mesh's own interpolation) and data. Only the discretization differs, so
/// a coarse level's posterior differs from this one's by its discretization error, `O(h²)` in
/// the observed values.
impl Levels for EllipticPde {
    fn resolution(&self) -> usize {
        self.settings.mesh
    }

    fn coarser(&self, resolution: usize, memory_limit: u64) -> Result<Arc<dyn Model>> {
        Ok(self.level(resolution, memory_limit)?)
    }
}

impl EllipticPde {
    /// [`Levels::coarser`], as the PDE model it is.
    pub fn level(&self, resolution: usize, memory_limit: u64) -> Result<Arc<EllipticPde>> {
        let n = self.settings.mesh;
        if !(2..n).contains(&resolution) {
            return Err(Error::setting(
                "levels",
                format!(
                    "must lie between 2 and {} elements per side (coarser than the {n}x{n} \
                     mesh), got {resolution}",
                    n - 1
                ),
            ));
        }
        let mut built = self.coarse.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(level) = built.iter().find(|l| l.settings.mesh == resolution) {
            return Ok(level.clone());
        }
        let settings = PdeSettings {
            mesh: resolution,
            ..self.settings
        };
        let level = Arc::new(
            Self::from_parts(
                settings,
                self.kl.clone(),
                discretize(&self.kl, settings, memory_limit)?,
                self.y.clone(),
                self.truth.clone(),
            )
            .with_data_mesh(self.data_mesh),
        );
        built.push(level.clone());
        built.sort_by_key(|l| l.settings.mesh);
        Ok(level)
    }
}

/// The names of a coarse level's counters in [`Model::work`], "forward solves (10x10)" and
/// "adjoint solves (10x10)": made once per mesh size and kept for the process, because the
/// counters' names are `&'static str` (a few bytes per mesh size ever asked for).
fn level_names(mesh: usize) -> [&'static str; 2] {
    static NAMES: Mutex<BTreeMap<usize, [&'static str; 2]>> = Mutex::new(BTreeMap::new());
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    *names.entry(mesh).or_insert_with(|| {
        ["forward", "adjoint"]
            .map(|kind| &*Box::leak(format!("{kind} solves ({mesh}x{mesh})").into_boxed_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::fd_check::assert_gradient_matches_central_differences;

    fn small(modes: usize) -> EllipticPde {
        EllipticPde::simulate(PdeSettings {
            mesh: 12,
            modes,
            prior_sd: 0.5,
            data_seed: 3,
        })
        .unwrap()
    }

    fn random_theta(d: usize, seed: u64) -> Vec<f64> {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut q = vec![0.0; d];
        fill_standard_normal(&mut rng, &mut q);
        q.iter().map(|v| 0.5 * v).collect()
    }

    #[test]
    fn adjoint_gradient_matches_central_differences() {
        let model = small(8);
        for seed in 1..=3 {
            let q = random_theta(8, seed);
            assert_gradient_matches_central_differences(&model, &q, 1e-5, 1e-5);
        }
        let solves = model.solves();
        assert!(solves[0].1 > 0 && solves[1].1 == 3, "{solves:?}");
    }

    #[test]
    fn forward_jacobian_actions_match_differences_of_the_forward_map() {
        let model = small(5);
        let q = random_theta(5, 4);
        let v = random_theta(5, 5);
        let m = model.observation_count();
        let w: Vec<f64> = (0..m).map(|j| ((j as f64) * 0.37).sin()).collect();
        let h = 1e-6;
        let step = |sign: f64| -> Vec<f64> {
            let x: Vec<f64> = q.iter().zip(&v).map(|(a, b)| a + sign * h * b).collect();
            model.forward(&x).unwrap()
        };
        let (up, down) = (step(1.0), step(-1.0));
        let jv = model.forward_jacobian_action(&q, &v).unwrap();
        let scale = jv.iter().fold(0.0f64, |a, x| a.max(x.abs()));
        assert!(scale > 1e-3, "J v vanishes: {scale}");
        for j in 0..m {
            let fd = (up[j] - down[j]) / (2.0 * h);
            assert!(
                (jv[j] - fd).abs() <= 1e-6 * scale,
                "J v at {j}: {} vs {fd}",
                jv[j]
            );
        }
        // wᵀ(J v) = (Jᵀw)ᵀ v: the adjoint action is the transpose of the forward one.
        let jtw = model.forward_gradient(&q, &w).unwrap();
        let lhs: f64 = w.iter().zip(&jv).map(|(a, b)| a * b).sum();
        let rhs: f64 = jtw.iter().zip(&v).map(|(a, b)| a * b).sum();
        assert!(
            (lhs - rhs).abs() <= 1e-9 * lhs.abs().max(1.0),
            "{lhs} vs {rhs}"
        );
        assert!(model.forward_gradient(&q, &w[1..]).is_err());
        assert!(model.forward_jacobian_action(&q, &[f64::NAN; 5]).is_err());
    }

    #[test]
    fn hessian_diagonal_matches_differences_of_the_gradient() {
        let model = small(6);
        let q = random_theta(6, 7);
        let diag = model.hessian_diagonal(&q).unwrap();
        let gn = model.gauss_newton_diagonal(&q).unwrap();
        let h = 1e-4;
        let mut up = vec![0.0; 6];
        let mut down = vec![0.0; 6];
        for i in 0..6 {
            let (mut a, mut b) = (q.clone(), q.clone());
            a[i] += h;
            b[i] -= h;
            model.value_and_gradient(&a, &mut up);
            model.value_and_gradient(&b, &mut down);
            let fd = (up[i] - down[i]) / (2.0 * h);
            assert!(
                (diag[i] - fd).abs() <= 1e-5 * fd.abs().max(1.0),
                "i = {i}: {} vs {fd}",
                diag[i]
            );
            assert!(gn[i] > 0.0);
        }
        // The residual term is not negligible here, so the two forms differ: the exact one is
        // really computed, not the Gauss–Newton one twice.
        let gap = diag
            .iter()
            .zip(&gn)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(gap > 1e-3, "gap {gap}");
    }

    /// The coarse levels' solutions at the observed points converge to a fine one at `O(h²)`:
    /// the slope of the log error against `log h` over 10×10, 20×20 and 40×40 (the paper's
    /// coarse mesh and two refinements; the observed points are nodes of all three), against a
    /// 160×160 reference (whose own error is a sixteenth of the 40×40's), lies within 0.3 of 2.
    #[test]
    fn coarse_levels_converge_at_second_order_at_the_observed_points() {
        let fine = EllipticPde::simulate(PdeSettings {
            mesh: 160,
            modes: 8,
            prior_sd: 0.5,
            data_seed: 3,
        })
        .unwrap();
        let theta = random_theta(8, 9);
        let reference = fine.forward(&theta).unwrap();
        let points: Vec<[f64; 2]> = [10, 20, 40]
            .into_iter()
            .map(|n| {
                let u = fine.level(n, u64::MAX).unwrap().forward(&theta).unwrap();
                let error = u
                    .iter()
                    .zip(&reference)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
                [(1.0 / n as f64).ln(), error.ln()]
            })
            .collect();
        let mean = |k: usize| points.iter().map(|p| p[k]).sum::<f64>() / 3.0;
        let (mx, my) = (mean(0), mean(1));
        let slope = points
            .iter()
            .map(|p| (p[0] - mx) * (p[1] - my))
            .sum::<f64>()
            / points.iter().map(|p| (p[0] - mx).powi(2)).sum::<f64>();
        assert!((slope - 2.0).abs() < 0.3, "slope {slope}, {points:?}");
    }

    /// Each level counts its own solves, reported in the fine model's work by mesh, exactly;
    /// asking for a level again gives the same one (one set of counters), and a level that is
    /// not coarser is refused.
    #[test]
    fn solves_are_counted_per_level_exactly() {
        let fine = small(4);
        let coarse = fine.coarser(6, u64::MAX).unwrap();
        let q = random_theta(4, 1);
        let mut g = vec![0.0; 4];
        for _ in 0..3 {
            coarse.value(&q);
        }
        fine.coarser(6, u64::MAX)
            .unwrap()
            .value_and_gradient(&q, &mut g);
        coarse.value_and_gradient(&q, &mut g);
        fine.value(&q);
        let work = fine.work();
        let count = |name: &str| work.iter().find(|(n, _)| *n == name).map(|w| w.1);
        assert_eq!(count("forward solves (6x6)"), Some(5), "{work:?}");
        assert_eq!(count("adjoint solves (6x6)"), Some(2), "{work:?}");
        assert_eq!(count("forward solves"), Some(1), "{work:?}");
        assert_eq!(count("adjoint solves"), Some(0), "{work:?}");
        assert_eq!(work.len(), 5, "{work:?}");
        for bad in [12, 13, 1] {
            let message = fine.coarser(bad, u64::MAX).err().unwrap().to_string();
            assert!(
                message.contains("between 2 and 11 elements per side"),
                "{message}"
            );
        }
        match fine.coarser(4, 1000).err().unwrap() {
            Error::MemoryLimit { driver, .. } => assert_eq!(driver, "mesh"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn data_potential_and_gradient_are_reproducible_from_the_seed() {
        let (a, b) = (small(5), small(5));
        assert_eq!(a.observations(), b.observations());
        assert_eq!(a.truth(), b.truth());
        let q = random_theta(5, 2);
        let (mut ga, mut gb) = (vec![0.0; 5], vec![0.0; 5]);
        assert_eq!(
            a.value_and_gradient(&q, &mut ga).to_bits(),
            b.value_and_gradient(&q, &mut gb).to_bits()
        );
        assert_eq!(ga, gb);
        let other = EllipticPde::simulate(PdeSettings {
            data_seed: 4,
            ..a.settings()
        })
        .unwrap();
        assert_ne!(a.observations(), other.observations());
    }

    /// pde-fine builds on its 120×120 mesh, and its data are the 200×200 solution at the truth
    /// plus the seeded noise (the stream's `d` normals behind the truth, then the noise's), not
    /// the model's own solution: the data-generating model is not the fitted one.
    #[test]
    fn the_fine_problem_takes_its_data_from_the_finer_mesh() {
        let model = EllipticPde::fine(1, u64::MAX).unwrap();
        assert_eq!((model.settings().mesh, model.data_mesh()), (120, 200));
        let mut rng = Pcg64::seed_from_u64(1);
        let mut noise = vec![0.0; model.settings().modes];
        fill_standard_normal(&mut rng, &mut noise);
        noise = vec![0.0; model.observation_count()];
        fill_standard_normal(&mut rng, &mut noise);
        let gap = |u: &[f64]| {
            u.iter()
                .zip(&noise)
                .zip(model.observations())
                .map(|((u, e), y)| (y - EllipticPde::NOISE_SD * e - u).abs())
                .fold(0.0, f64::max)
        };
        let data_mesh = EllipticPde::simulate(PdeSettings {
            mesh: 200,
            ..model.settings()
        })
        .unwrap();
        let from_data_mesh = gap(&data_mesh.forward(model.truth()).unwrap());
        let from_own_mesh = gap(&model.forward(model.truth()).unwrap());
        assert!(
            from_data_mesh < 1e-9 && from_own_mesh > 1e-6,
            "{from_data_mesh:e} {from_own_mesh:e}"
        );
    }

    #[test]
    fn the_data_fit_the_truth_to_the_noise_level() {
        // Observations minus the (finer-mesh) truth are the noise: their mean square is
        // σ² = 0.01 up to its sampling error (√(2/121) relative) and the mesh difference.
        let model = EllipticPde::simulate(PdeSettings::default()).unwrap();
        let u = model.forward(model.truth()).unwrap();
        let ms = u
            .iter()
            .zip(model.observations())
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            / u.len() as f64;
        let sd = 0.01 * (2.0f64 / 121.0).sqrt();
        assert!((ms - 0.01).abs() < 4.0 * sd, "mean square residual {ms}");
    }

    #[test]
    fn bad_input_is_an_error_or_an_infinite_potential() {
        let bad = |s: PdeSettings| EllipticPde::simulate(s).err().unwrap().to_string();
        let base = PdeSettings::default();
        // Refused before the mesh is built, and after the analysis sized the factor.
        for (mesh, limit) in [(4000, 1 << 30), (30, 1_000_000)] {
            let settings = PdeSettings { mesh, ..base };
            match EllipticPde::simulate_within(settings, limit).err().unwrap() {
                Error::MemoryLimit { message, driver } => {
                    assert_eq!(driver, "mesh");
                    assert!(
                        message.starts_with(&format!("a {mesh}×{mesh} finite")),
                        "{message}"
                    );
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(EllipticPde::simulate_within(base, 1 << 30).is_ok());
        assert!(bad(PdeSettings { mesh: 1, ..base }).contains("at least 2×2"));
        assert!(bad(PdeSettings { modes: 0, ..base }).contains("modes"));
        assert!(
            bad(PdeSettings {
                prior_sd: -1.0,
                ..base
            })
            .contains("prior sd")
        );
        let model = small(3);
        let mut g = vec![0.0; 3];
        assert_eq!(model.value(&[f64::NAN, 0.0, 0.0]), f64::INFINITY);
        assert_eq!(
            model.value_and_gradient(&[0.0, f64::INFINITY, 0.0], &mut g),
            f64::INFINITY
        );
        // exp overflows: a rejected proposal, not a panic.
        assert_eq!(model.value(&[1e6, 0.0, 0.0]), f64::INFINITY);
        assert!(model.forward(&[0.0; 2]).is_err());
    }
}
