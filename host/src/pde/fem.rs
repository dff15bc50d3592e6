//! Bilinear (Q1) finite elements for `∇·(c∇u) = 0` on the unit square with the papers' boundary
//! conditions: `u = x₁` on `x₂ = 0`, `u = 1 − x₁` on `x₂ = 1`, zero flux on `x₁ = 0` and `x₁ = 1`
//! (natural, so those sides need nothing).
//!
//! The mesh is uniform, `n × n` square elements of side `h = 1/n`; node `(i, j)` sits at
//! `(i h, j h)` and has number `i + (n + 1) j`. The coefficient enters only through its values
//! at the 2×2 Gauss points of each element ([`Mesh::quadrature_points`]), so a model that
//! tabulates `log c` there pays nothing per solve to evaluate it elsewhere.
//!
//! On a uniform mesh every element is the same square, so the element stiffness is
//! `K_e = Σ_k c_{e,k} G_k` with four fixed 4×4 matrices `G_k = w_k ∇φ_a·∇φ_b` (the `h²` of the
//! area and the `1/h²` of the two gradients cancel in 2-D). Assembly scatters these into the
//! upper triangle of the free-node matrix through a table built once.
//!
//! The system is solved by faer's sparse Cholesky: the symbolic analysis (AMD ordering,
//! elimination tree, the factor's pattern, and from 60×60 up the supernodal form, whose dense
//! blocks factor a 120×120 system two to three times faster) is done once per mesh in
//! [`Mesh::new`]; every solve
//! reuses it with a numeric factorization into a [`Workspace`] of its own, sequential because a
//! 30×30 system is far too small to share between threads (the chains run in parallel instead).

use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::sparse::linalg::SupernodalThreshold;
use faer::sparse::linalg::cholesky::CholeskySymbolicParams;
use faer::sparse::linalg::cholesky::{
    LltRef, SymbolicCholesky, SymmetricOrdering, factorize_symbolic_cholesky,
};
use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
use faer::{Conj, MatMut, Par, Side};

use crate::{Error, Result};

/// A marker for "this local pair is not stored" in the scatter table.
const NOT_STORED: u32 = u32::MAX;

/// The Gauss points of one element in local coordinates `(ξ, η) ∈ [0, 1]²`, in the order
/// `k = a + 2b` with `a` along `x₁` and `b` along `x₂`.
fn local_gauss_points() -> [[f64; 2]; 4] {
    let g = 0.5 / 3f64.sqrt();
    let (lo, hi) = (0.5 - g, 0.5 + g);
    [[lo, lo], [hi, lo], [lo, hi], [hi, hi]]
}

/// The gradients `(∂φ/∂ξ, ∂φ/∂η)` of the four local basis functions at `(ξ, η)`; local node
/// `a + 2b` is the corner `(a, b)`.
fn local_gradients(xi: f64, eta: f64) -> [[f64; 2]; 4] {
    [
        [-(1.0 - eta), -(1.0 - xi)],
        [1.0 - eta, -xi],
        [-eta, 1.0 - xi],
        [eta, xi],
    ]
}

/// `G_k[a·4 + b] = w_k ∇φ_a·∇φ_b` at Gauss point `k` (weight `w_k = 1/4` on the unit square).
fn gauss_stiffness() -> [[f64; 16]; 4] {
    let mut out = [[0.0; 16]; 4];
    for (k, [xi, eta]) in local_gauss_points().into_iter().enumerate() {
        let grads = local_gradients(xi, eta);
        for a in 0..4 {
            for b in 0..4 {
                out[k][4 * a + b] = 0.25 * (grads[a][0] * grads[b][0] + grads[a][1] * grads[b][1]);
            }
        }
    }
    out
}

/// One free–Dirichlet pair of an element: `(element, 4a + b, unknown of a, boundary value of
/// b)`.
type Lifting = (u32, u8, u32, f64);

/// A uniform Q1 mesh of the unit square with its assembly tables and the symbolic Cholesky
/// analysis of its stiffness matrix.
#[derive(Debug)]
pub struct Mesh {
    n: usize,
    /// `free[node]`: the node's unknown number, or `None` on the Dirichlet sides.
    free: Vec<Option<u32>>,
    /// The boundary value of every node (0 at free nodes).
    boundary: Vec<f64>,
    free_count: usize,
    col_ptr: Vec<u32>,
    row_idx: Vec<u32>,
    /// `scatter[16 e + 4a + b]`: where `K_e[a][b]` goes in the upper-triangle values, or
    /// [`NOT_STORED`].
    scatter: Vec<u32>,
    /// `(element, 4a + b, unknown of a, boundary value of b)` for every free–Dirichlet pair:
    /// the right-hand side `−K_FD u_D`.
    lifting: Vec<Lifting>,
    gauss: [[f64; 16]; 4],
    symbolic: SymbolicCholesky<u32>,
    factor_scratch: StackReq,
}

impl Mesh {
    /// The mesh of `n × n` elements (`n ≥ 2`), with the stiffness pattern analysed once.
    pub fn new(n: usize) -> Result<Self> {
        check_size(n)?;
        let (free, boundary, free_count) = number_nodes(n);
        let (col_ptr, row_idx) = stiffness_pattern(n, &free, free_count);
        let (scatter, lifting) = scatter_tables(n, &free, &boundary, &col_ptr, &row_idx);
        let pattern =
            SymbolicSparseColMatRef::new_checked(free_count, free_count, &col_ptr, None, &row_idx);
        let params = CholeskySymbolicParams {
            supernodal_flop_ratio_threshold: factorization_kind(free_count),
            ..Default::default()
        };
        let symbolic =
            factorize_symbolic_cholesky(pattern, Side::Upper, SymmetricOrdering::Amd, params)
                .map_err(|e| Error::invalid(format!("sparse Cholesky analysis failed: {e:?}")))?;
        let factor_scratch =
            symbolic.factorize_numeric_llt_scratch::<f64>(Par::Seq, Default::default());
        Ok(Self {
            n,
            free,
            boundary,
            free_count,
            col_ptr,
            row_idx,
            scatter,
            lifting,
            gauss: gauss_stiffness(),
            symbolic,
            factor_scratch,
        })
    }

    /// An upper bound on the bytes [`Mesh::new`] allocates for an `n × n` mesh before its
    /// symbolic analysis, to size it first (`None` on overflow): per node the free and boundary
    /// tables (16), the stiffness pattern as it is built (44) and kept (24); per element the
    /// scatter table (64).
    pub fn table_bytes(n: usize) -> Option<u128> {
        let n = n as u128;
        let nodes = (n + 1).checked_mul(n + 1)?;
        nodes
            .checked_mul(84)?
            .checked_add(n.checked_mul(n)?.checked_mul(64)?)
    }

    /// The bytes of one [`Mesh::workspace`] with `max_rhs` right-hand sides: the assembled
    /// values, the numeric factor (its size is known only from the symbolic analysis: the fill
    /// the ordering leaves), faer's scratch and the right-hand sides.
    pub fn workspace_bytes(&self, max_rhs: usize) -> u128 {
        let max_rhs = max_rhs.max(1);
        let solve_scratch = self
            .symbolic
            .solve_in_place_scratch::<f64>(max_rhs, Par::Seq);
        let stack = self.factor_scratch.or(solve_scratch).size_bytes();
        let values = self.row_idx.len() + self.symbolic.len_val() + self.free_count * max_rhs;
        8 * values as u128 + stack as u128
    }

    /// Elements per side.
    pub fn elements_per_side(&self) -> usize {
        self.n
    }

    /// The number of nodes, `(n + 1)²`: the length of a full solution vector.
    pub fn nodes(&self) -> usize {
        (self.n + 1) * (self.n + 1)
    }

    /// The number of unknowns (nodes off the Dirichlet sides).
    pub fn unknowns(&self) -> usize {
        self.free_count
    }

    /// The number of quadrature points, four per element.
    pub fn quadrature_len(&self) -> usize {
        4 * self.n * self.n
    }

    /// The quadrature points: point `4e + k` is Gauss point `k` (`a + 2b`, `a` along `x₁`) of
    /// element `e = i + n j` (column `i`, row `j`). A coefficient is given by its values here.
    pub fn quadrature_points(&self) -> Vec<[f64; 2]> {
        let h = 1.0 / self.n as f64;
        let local = local_gauss_points();
        let mut out = Vec::with_capacity(self.quadrature_len());
        for e in 0..self.n * self.n {
            let (i, j) = ((e % self.n) as f64, (e / self.n) as f64);
            for [xi, eta] in local {
                out.push([(i + xi) * h, (j + eta) * h]);
            }
        }
        out
    }

    /// A workspace for solves on this mesh with up to `max_rhs` right-hand sides at once.
    pub fn workspace(&self, max_rhs: usize) -> Workspace {
        let max_rhs = max_rhs.max(1);
        let solve_scratch = self
            .symbolic
            .solve_in_place_scratch::<f64>(max_rhs, Par::Seq);
        Workspace {
            values: vec![0.0; self.row_idx.len()],
            factor: vec![0.0; self.symbolic.len_val()],
            stack: MemBuffer::new(self.factor_scratch.or(solve_scratch)),
            rhs: vec![0.0; self.free_count * max_rhs],
            max_rhs,
            factored: false,
        }
    }

    /// Assembles the stiffness matrix and the right-hand side for the coefficient values
    /// `coefficient` at the quadrature points into `ws`.
    pub fn assemble(&self, coefficient: &[f64], ws: &mut Workspace) {
        assert_eq!(coefficient.len(), self.quadrature_len());
        ws.factored = false;
        ws.values.fill(0.0);
        let rhs = &mut ws.rhs[..self.free_count];
        rhs.fill(0.0);
        for (e, c) in coefficient.chunks_exact(4).enumerate() {
            let ke = self.element_matrix(c);
            for (slot, &idx) in self.scatter[16 * e..16 * e + 16].iter().enumerate() {
                if idx != NOT_STORED {
                    ws.values[idx as usize] += ke[slot];
                }
            }
        }
        for &(e, slot, r, ub) in &self.lifting {
            let c = &coefficient[4 * e as usize..4 * e as usize + 4];
            let k: f64 = (0..4).map(|q| c[q] * self.gauss[q][slot as usize]).sum();
            rhs[r as usize] -= k * ub;
        }
    }

    /// The numeric Cholesky factorization of the matrix [`Mesh::assemble`] left in `ws`, with
    /// the symbolic analysis done in [`Mesh::new`]. Fails when the matrix is not numerically
    /// positive definite (a coefficient that is not finite and positive).
    pub fn factorize(&self, ws: &mut Workspace) -> Result<()> {
        let pattern = SymbolicSparseColMatRef::new_checked(
            self.free_count,
            self.free_count,
            &self.col_ptr,
            None,
            &self.row_idx,
        );
        let matrix = SparseColMatRef::new(pattern, &ws.values);
        self.symbolic
            .factorize_numeric_llt(
                &mut ws.factor,
                matrix,
                Side::Upper,
                Default::default(),
                Par::Seq,
                MemStack::new(&mut ws.stack),
                Default::default(),
            )
            .map_err(|_| {
                Error::invalid(
                    "the stiffness matrix is not positive definite (a coefficient that is not \
                     finite and positive)",
                )
            })?;
        ws.factored = true;
        Ok(())
    }

    /// Assembles and factorizes the stiffness matrix for the coefficient values `coefficient`
    /// at the quadrature points, and writes the full solution (boundary values included) into
    /// `u`, of length [`Mesh::nodes`]. Fails as [`Mesh::factorize`] does.
    pub fn solve(&self, coefficient: &[f64], ws: &mut Workspace, u: &mut [f64]) -> Result<()> {
        assert_eq!(u.len(), self.nodes());
        self.assemble(coefficient, ws);
        self.factorize(ws)?;
        ws.solve_columns(self, 1);
        self.expand(&ws.rhs[..self.free_count], u);
        Ok(())
    }

    /// Solves `K x = b` with the factorization of the last successful [`Mesh::solve`] for the
    /// right-hand sides `columns` (each of length [`Mesh::unknowns`], at most the workspace's
    /// `max_rhs`), in place.
    pub fn solve_again(&self, ws: &mut Workspace, columns: &mut [f64]) {
        assert!(
            ws.factored,
            "solve_again needs a factorization from Mesh::solve"
        );
        let k = columns.len() / self.free_count;
        assert!(k <= ws.max_rhs && k * self.free_count == columns.len());
        ws.rhs[..columns.len()].copy_from_slice(columns);
        ws.solve_columns(self, k);
        columns.copy_from_slice(&ws.rhs[..columns.len()]);
    }

    /// The full nodal vector from the unknowns `x`, with zero on the Dirichlet sides (the form
    /// of adjoint and sensitivity solutions, whose boundary values are fixed).
    pub fn expand_homogeneous(&self, x: &[f64], out: &mut [f64]) {
        for (o, f) in out.iter_mut().zip(&self.free) {
            *o = f.map_or(0.0, |r| x[r as usize]);
        }
    }

    /// The unknowns' part of a nodal vector `v` (the adjoint's right-hand side).
    pub fn restrict(&self, v: &[f64], out: &mut [f64]) {
        for (f, &value) in self.free.iter().zip(v) {
            if let Some(r) = f {
                out[*r as usize] = value;
            }
        }
    }

    /// For each quadrature point `4e + k`, `a_eᵀ G_k b_e`: the integrand of `∫ ∇a·∇b` without
    /// the coefficient, for nodal vectors `a` and `b`. The adjoint gradient and the Hessian are
    /// contractions of these with the coefficient and the modes.
    pub fn gradient_products(&self, a: &[f64], b: &[f64], out: &mut [f64]) {
        assert_eq!(out.len(), self.quadrature_len());
        for (e, out) in out.chunks_exact_mut(4).enumerate() {
            let nodes = element_nodes(self.n, e);
            let ae = nodes.map(|n| a[n]);
            let be = nodes.map(|n| b[n]);
            for (k, o) in out.iter_mut().enumerate() {
                let g = &self.gauss[k];
                let mut sum = 0.0;
                for p in 0..4 {
                    let gb = g[4 * p] * be[0]
                        + g[4 * p + 1] * be[1]
                        + g[4 * p + 2] * be[2]
                        + g[4 * p + 3] * be[3];
                    sum += ae[p] * gb;
                }
                *o = sum;
            }
        }
    }

    /// Adds `Σ_k weight_{4e+k} (G_k v_e)` into the unknowns' entries of `out`: the action on
    /// the nodal vector `v` of the stiffness matrix whose coefficient is `weight` at the
    /// quadrature points (the sensitivity right-hand sides `∂K/∂θᵢ u`).
    pub fn apply_weighted(&self, weight: &[f64], v: &[f64], out: &mut [f64]) {
        for (e, w) in weight.chunks_exact(4).enumerate() {
            let nodes = element_nodes(self.n, e);
            let ve = nodes.map(|n| v[n]);
            let ke = self.element_matrix(w);
            for a in 0..4 {
                if let Some(r) = self.free[nodes[a]] {
                    out[r as usize] += ke[4 * a] * ve[0]
                        + ke[4 * a + 1] * ve[1]
                        + ke[4 * a + 2] * ve[2]
                        + ke[4 * a + 3] * ve[3];
                }
            }
        }
    }

    /// The interpolation weights of the point `x` in the unit square: four `(node, weight)`
    /// pairs of the bilinear interpolant in the element holding `x` (points on the far sides
    /// fall in the last element).
    pub fn interpolation_weights(&self, x: [f64; 2]) -> Result<[(usize, f64); 4]> {
        if !x.iter().all(|v| (0.0..=1.0).contains(v)) {
            return Err(Error::invalid(format!(
                "the point ({}, {}) is outside the unit square",
                x[0], x[1]
            )));
        }
        let n = self.n as f64;
        let i = ((x[0] * n).floor() as usize).min(self.n - 1);
        let j = ((x[1] * n).floor() as usize).min(self.n - 1);
        let xi = x[0] * n - i as f64;
        let eta = x[1] * n - j as f64;
        let nodes = element_nodes(self.n, i + self.n * j);
        Ok([
            (nodes[0], (1.0 - xi) * (1.0 - eta)),
            (nodes[1], xi * (1.0 - eta)),
            (nodes[2], (1.0 - xi) * eta),
            (nodes[3], xi * eta),
        ])
    }

    /// The finite-element solution `u` (a nodal vector) at the point `x`, by bilinear
    /// interpolation in its element.
    pub fn interpolate(&self, u: &[f64], x: [f64; 2]) -> Result<f64> {
        Ok(self
            .interpolation_weights(x)?
            .iter()
            .map(|&(node, w)| w * u[node])
            .sum())
    }

    /// Solves for the coefficient function `c(x₁, x₂)`, sampled at the quadrature points: the
    /// way to check the solver on its own.
    pub fn solve_for(&self, c: impl Fn(f64, f64) -> f64) -> Result<Vec<f64>> {
        let coefficient: Vec<f64> = self
            .quadrature_points()
            .into_iter()
            .map(|[x1, x2]| c(x1, x2))
            .collect();
        let mut u = vec![0.0; self.nodes()];
        self.solve(&coefficient, &mut self.workspace(1), &mut u)?;
        Ok(u)
    }

    /// `K_e = Σ_k c_k G_k` for the four quadrature values `c`.
    fn element_matrix(&self, c: &[f64]) -> [f64; 16] {
        let mut ke = [0.0; 16];
        for (q, g) in self.gauss.iter().enumerate() {
            for (k, gv) in ke.iter_mut().zip(g) {
                *k += c[q] * gv;
            }
        }
        ke
    }

    /// The full nodal vector from the unknowns `x` and the boundary values.
    fn expand(&self, x: &[f64], out: &mut [f64]) {
        for ((o, f), b) in out.iter_mut().zip(&self.free).zip(&self.boundary) {
            *o = f.map_or(*b, |r| x[r as usize]);
        }
    }
}

/// The meshes from which faer's supernodal Cholesky is used, by their unknowns: 60×60 (3 599)
/// and up. Measured with AMD's ordering (best of 13–55 numeric factorizations on a loaded
/// machine): 60×60 0.97 ms supernodal against 1.40 ms simplicial, 120×120 13.6 ms against 28–41
/// ms; at 30×30 the two are alike (0.19 against 0.20 ms) and faer's own rule picks simplicial
/// there. Below this size faer's rule decides, so the paper's 30×30 problem and its 51×51 data
/// mesh (2 600 unknowns) keep their arithmetic, and their draws, exactly.
const SUPERNODAL_FROM_UNKNOWNS: usize = 3000;

/// faer's choice between its simplicial and supernodal factorizations for `unknowns`: forced
/// supernodal from [`SUPERNODAL_FROM_UNKNOWNS`] (faer's flop-ratio rule keeps a 120×120 grid
/// simplicial, at two to three times the cost), faer's own rule below.
fn factorization_kind(unknowns: usize) -> SupernodalThreshold {
    if unknowns >= SUPERNODAL_FROM_UNKNOWNS {
        SupernodalThreshold::FORCE_SUPERNODAL
    } else {
        SupernodalThreshold::AUTO
    }
}

/// Errors unless `2 ≤ n` and the `(n + 1)²` nodes fit the tables' 32-bit indices with room to
/// spare (at most 2²⁶ nodes).
fn check_size(n: usize) -> Result<()> {
    if n < 2 {
        return Err(Error::invalid(format!(
            "the finite-element mesh needs at least 2×2 elements, got {n}×{n}"
        )));
    }
    if (n + 1)
        .checked_mul(n + 1)
        .is_none_or(|nodes| nodes > 1 << 26)
    {
        return Err(Error::invalid(format!(
            "a {n}×{n} finite-element mesh is too large (at most 8191×8191)"
        )));
    }
    Ok(())
}

/// Every node's unknown number (`None` on the Dirichlet sides `x₂ = 0` and `x₂ = 1`) and
/// boundary value (0 at free nodes), and the number of unknowns: free nodes are numbered in
/// node order.
fn number_nodes(n: usize) -> (Vec<Option<u32>>, Vec<f64>, usize) {
    let side = n + 1;
    let h = 1.0 / n as f64;
    let mut free = vec![None; side * side];
    let mut boundary = vec![0.0; side * side];
    let mut free_count = 0u32;
    for j in 0..side {
        for i in 0..side {
            let node = i + side * j;
            let x1 = i as f64 * h;
            if j == 0 {
                boundary[node] = x1;
            } else if j == n {
                boundary[node] = 1.0 - x1;
            } else {
                free[node] = Some(free_count);
                free_count += 1;
            }
        }
    }
    (free, boundary, free_count as usize)
}

/// The upper-triangle pattern of the free-node stiffness matrix, as compressed columns
/// `(col_ptr, row_idx)`: column c holds the rows r ≤ c of unknowns sharing an element with it,
/// sorted.
fn stiffness_pattern(n: usize, free: &[Option<u32>], free_count: usize) -> (Vec<u32>, Vec<u32>) {
    let mut columns: Vec<Vec<u32>> = vec![Vec::with_capacity(5); free_count];
    for e in 0..n * n {
        let nodes = element_nodes(n, e);
        for &na in &nodes {
            for &nb in &nodes {
                if let (Some(r), Some(c)) = (free[na], free[nb])
                    && r <= c
                {
                    columns[c as usize].push(r);
                }
            }
        }
    }
    let mut col_ptr = Vec::with_capacity(free_count + 1);
    let mut row_idx = Vec::new();
    col_ptr.push(0u32);
    for rows in &mut columns {
        rows.sort_unstable();
        rows.dedup();
        row_idx.extend_from_slice(rows);
        col_ptr.push(row_idx.len() as u32);
    }
    (col_ptr, row_idx)
}

/// The assembly tables ([`Mesh`]'s `scatter` and `lifting`): where each free–free entry of an
/// element's stiffness goes in the pattern's values, and every free–Dirichlet pair with the
/// boundary value it lifts into the right-hand side.
fn scatter_tables(
    n: usize,
    free: &[Option<u32>],
    boundary: &[f64],
    col_ptr: &[u32],
    row_idx: &[u32],
) -> (Vec<u32>, Vec<Lifting>) {
    let mut scatter = vec![NOT_STORED; 16 * n * n];
    let mut lifting = Vec::new();
    for e in 0..n * n {
        let nodes = element_nodes(n, e);
        for a in 0..4 {
            let Some(r) = free[nodes[a]] else { continue };
            for b in 0..4 {
                match free[nodes[b]] {
                    Some(c) if r <= c => {
                        let start = col_ptr[c as usize] as usize;
                        let end = col_ptr[c as usize + 1] as usize;
                        let offset = row_idx[start..end]
                            .binary_search(&r)
                            .expect("every element pair is in the pattern");
                        scatter[16 * e + 4 * a + b] = (start + offset) as u32;
                    }
                    Some(_) => {}
                    None => lifting.push((e as u32, (4 * a + b) as u8, r, boundary[nodes[b]])),
                }
            }
        }
    }
    (scatter, lifting)
}

/// The four nodes of element `e` of an `n × n` mesh, local node `a + 2b` at corner `(a, b)`.
fn element_nodes(n: usize, e: usize) -> [usize; 4] {
    let (i, j) = (e % n, e / n);
    let side = n + 1;
    let base = i + side * j;
    [base, base + 1, base + side, base + side + 1]
}

/// The buffers one solve needs: the assembled values, the numeric factor and scratch memory.
/// One per thread; allocating them once keeps a solve free of allocation.
pub struct Workspace {
    values: Vec<f64>,
    factor: Vec<f64>,
    stack: MemBuffer,
    rhs: Vec<f64>,
    max_rhs: usize,
    factored: bool,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("factor_len", &self.factor.len())
            .field("max_rhs", &self.max_rhs)
            .field("factored", &self.factored)
            .finish_non_exhaustive()
    }
}

impl Workspace {
    /// Solves in place for the first `k` right-hand-side columns held in `rhs`.
    fn solve_columns(&mut self, mesh: &Mesh, k: usize) {
        let n = mesh.free_count;
        let llt = LltRef::<u32, f64>::new(&mesh.symbolic, &self.factor);
        let columns = MatMut::from_column_major_slice_mut(&mut self.rhs[..n * k], n, k);
        llt.solve_in_place_with_conj(Conj::No, columns, Par::Seq, MemStack::new(&mut self.stack));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 11×11 observation grid of the papers.
    fn grid() -> Vec<[f64; 2]> {
        (0..11)
            .flat_map(|j| (0..11).map(move |i| [i as f64 / 10.0, j as f64 / 10.0]))
            .collect()
    }

    /// The exact solution for `c ≡ 1`: `½ + Σ_{k odd} 4/(k²π²) cos(kπx₁) [sinh(kπx₂) −
    /// sinh(kπ(1−x₂))]/sinh(kπ)`, the boundary values themselves on `x₂ ∈ {0, 1}` (where the
    /// series converges only like 1/k²).
    fn exact_constant(x: [f64; 2]) -> f64 {
        let [x1, x2] = x;
        if x2 == 0.0 {
            return x1;
        }
        if x2 == 1.0 {
            return 1.0 - x1;
        }
        let pi = std::f64::consts::PI;
        // sinh(a)/sinh(b) for 0 < a < b without overflow.
        let ratio =
            |a: f64, b: f64| (a - b).exp() * (1.0 - (-2.0 * a).exp()) / (1.0 - (-2.0 * b).exp());
        let mut u = 0.5;
        for k in (1..400).step_by(2) {
            let kp = k as f64 * pi;
            let shape = ratio(kp * x2, kp) - ratio(kp * (1.0 - x2), kp);
            u += 4.0 / (kp * kp) * (kp * x1).cos() * shape;
        }
        u
    }

    fn max_error(
        n: usize,
        c: impl Fn(f64, f64) -> f64,
        reference: impl Fn([f64; 2]) -> f64,
    ) -> f64 {
        let mesh = Mesh::new(n).unwrap();
        let u = mesh.solve_for(c).unwrap();
        grid()
            .into_iter()
            .map(|x| (mesh.interpolate(&u, x).unwrap() - reference(x)).abs())
            .fold(0.0, f64::max)
    }

    #[test]
    fn constant_coefficient_matches_the_cosine_series_at_second_order() {
        let err30 = max_error(30, |_, _| 1.0, exact_constant);
        assert!(err30 < 1e-3, "30×30 error {err30}");
        let errors: Vec<f64> = [10, 20, 40]
            .into_iter()
            .map(|n| max_error(n, |_, _| 1.0, exact_constant))
            .collect();
        for pair in errors.windows(2) {
            let ratio = pair[0] / pair[1];
            assert!((3.0..5.5).contains(&ratio), "errors {errors:?}");
        }
    }

    #[test]
    fn smooth_coefficient_converges_at_second_order() {
        let c = |x1: f64, x2: f64| {
            (0.5 * (2.0 * std::f64::consts::PI * x1).sin() * (std::f64::consts::PI * x2).cos())
                .exp()
        };
        let fine = Mesh::new(320).unwrap();
        let reference = fine.solve_for(c).unwrap();
        let errors: Vec<f64> = [10, 20, 40]
            .into_iter()
            .map(|n| max_error(n, c, |x| fine.interpolate(&reference, x).unwrap()))
            .collect();
        for pair in errors.windows(2) {
            let ratio = pair[0] / pair[1];
            assert!((3.0..5.5).contains(&ratio), "errors {errors:?}");
        }
    }

    #[test]
    fn bilinear_interpolation_is_exact_for_bilinear_functions() {
        let mesh = Mesh::new(7).unwrap();
        let f = |x1: f64, x2: f64| 0.3 + 2.0 * x1 - 1.5 * x2 + 0.7 * x1 * x2;
        let nodal: Vec<f64> = (0..mesh.nodes())
            .map(|k| f((k % 8) as f64 / 7.0, (k / 8) as f64 / 7.0))
            .collect();
        for x in [
            [0.0, 0.0],
            [1.0, 1.0],
            [0.123, 0.987],
            [0.5, 0.31],
            [1.0, 0.44],
        ] {
            let got = mesh.interpolate(&nodal, x).unwrap();
            assert!((got - f(x[0], x[1])).abs() < 1e-13, "{x:?}");
        }
        assert!(mesh.interpolate(&nodal, [1.2, 0.5]).is_err());
    }

    #[test]
    fn bad_meshes_and_coefficients_are_errors() {
        assert!(
            Mesh::new(1)
                .unwrap_err()
                .to_string()
                .contains("at least 2×2")
        );
        let mesh = Mesh::new(4).unwrap();
        assert!(mesh.solve_for(|_, _| -1.0).is_err());
        assert!(mesh.solve_for(|_, _| 0.0).is_err());
    }
}
