//! The training data: states visited by the exact phase of a chain.

/// States visited by the exact phase of a chain: positions, exact `U`, and (when known) exact `∇U`.
///
/// Positions and gradients are stored row-major (`n × d`), one row per state, in the order they
/// were pushed; the order matters, because the held-out states are every k-th state of it.
#[derive(Clone, Debug, Default)]
pub struct TrainingSet {
    dim: usize,
    positions: Vec<f64>,
    potentials: Vec<f64>,
    /// `n × d`, row `i` meaningful only when `has_gradient[i]`.
    gradients: Vec<f64>,
    has_gradient: Vec<bool>,
}

impl TrainingSet {
    /// An empty set of states in dimension `dim`.
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            ..Self::default()
        }
    }

    /// Appends the state `q` with exact potential `U(q)` and, when known, exact gradient `∇U(q)`.
    ///
    /// # Panics
    /// If `q` or the gradient does not have length [`dim`](Self::dim): that is a programming
    /// error, not bad data. Non-finite values are accepted here and rejected by the fits.
    pub fn push(&mut self, q: &[f64], potential: f64, gradient: Option<&[f64]>) {
        assert_eq!(q.len(), self.dim, "training state of the wrong dimension");
        self.positions.extend_from_slice(q);
        self.potentials.push(potential);
        match gradient {
            Some(g) => {
                assert_eq!(
                    g.len(),
                    self.dim,
                    "training gradient of the wrong dimension"
                );
                self.gradients.extend_from_slice(g);
                self.has_gradient.push(true);
            }
            None => {
                self.gradients
                    .extend(std::iter::repeat_n(f64::NAN, self.dim));
                self.has_gradient.push(false);
            }
        }
    }

    /// The number of states.
    pub fn len(&self) -> usize {
        self.potentials.len()
    }

    /// Whether there are no states.
    pub fn is_empty(&self) -> bool {
        self.potentials.is_empty()
    }

    /// The dimension `d` of the states.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// State `i`'s position.
    pub fn position(&self, i: usize) -> &[f64] {
        &self.positions[i * self.dim..(i + 1) * self.dim]
    }

    /// State `i`'s exact potential `U`.
    pub fn potential(&self, i: usize) -> f64 {
        self.potentials[i]
    }

    /// State `i`'s exact gradient `∇U`, if it was given.
    pub fn gradient(&self, i: usize) -> Option<&[f64]> {
        self.has_gradient[i].then(|| &self.gradients[i * self.dim..(i + 1) * self.dim])
    }

    /// Whether every state has a gradient (score matching needs them all).
    pub fn has_all_gradients(&self) -> bool {
        self.has_gradient.iter().all(|&g| g)
    }

    /// Removes all states, keeping the dimension and the allocations.
    pub fn clear(&mut self) {
        self.positions.clear();
        self.potentials.clear();
        self.gradients.clear();
        self.has_gradient.clear();
    }
}
