//! Reference data for the tests: three small fixed data sets (4 chains each) and the diagnostics
//! ArviZ computes for them, so that ours can be checked against an independent implementation.
//!
//! Produced once with ArviZ 0.23.4 (numpy 2.4.6, scipy 1.17.1) by this script, whose printed
//! output is pasted below verbatim (values rounded so that the literals are exact in both
//! languages):
//!
//! ```python
//! import numpy as np, arviz as az
//! rng = np.random.default_rng(20240601)
//! def ar1(m, n, rho, offsets):                  # AR(1) chains with per-chain offsets
//!     x = np.empty((m, n))
//!     for c in range(m):
//!         v = rng.standard_normal()
//!         for t in range(n):
//!             v = rho * v + np.sqrt(1 - rho**2) * rng.standard_normal()
//!             x[c, t] = v + offsets[c]
//!     return x
//! A = np.round(ar1(4, 20, 0.5, [0, 0, 0, 0]), 4)      # well mixed, no ties
//! B = np.round(1.5 * rng.standard_normal((4, 20)), 0) # heavy ties (and ±0.0)
//! C = np.round(ar1(4, 21, 0.7, [0, 0.5, 1, 3]), 4)    # odd length, one chain far off
//! for x in (A, B, C):
//!     az.ess(x, method="bulk"); az.ess(x, method="tail"); az.rhat(x, method="rank")
//!     az.mcse(x, method="mean"); az.ess(x, method="mean"); az.ess(x, method="identity")
//!     az.ess(x, method="quantile", prob=0.05); az.ess(x[:1], method="identity")
//! ```

/// ArviZ's diagnostics of one data set (names as in [`super::ess`] and friends).
pub(super) struct Expected {
    /// `az.ess(x, method="bulk")`.
    pub(super) ess_bulk: f64,
    /// `az.ess(x, method="tail")`.
    pub(super) ess_tail: f64,
    /// `az.rhat(x, method="rank")`.
    pub(super) rhat: f64,
    /// `az.mcse(x, method="mean")`.
    pub(super) mcse_mean: f64,
    /// `az.ess(x, method="mean")`.
    pub(super) ess_mean: f64,
    /// `az.ess(x, method="identity")`: Stan's multi-chain Geyer ESS without splitting.
    pub(super) ess: f64,
    /// `az.ess(x, method="quantile", prob=0.05)`.
    pub(super) ess_q05: f64,
    /// `az.ess(x[:1], method="identity")`: chain 0 alone.
    pub(super) ess_chain0: f64,
}

/// Set A: AR(1), ρ = 0.5, 4 × 20, no ties.
pub(super) const SET_A: [[f64; 20]; 4] = [
    [
        0.7304, -0.1917, -1.1162, -0.6834, 0.7005, 1.5052, 1.5392, 1.0697, 1.9205, 2.0279, 0.8232,
        -0.5081, -0.5698, -0.6486, 0.2711, -1.5091, -0.9203, 0.9872, -0.3034, -0.8086,
    ],
    [
        -1.27, -0.7472, -0.3872, -0.1976, -0.9549, -0.7943, 0.1691, -0.5343, 0.2068, 0.6711,
        -0.9003, -1.009, 0.063, 0.4589, 0.3848, -0.1095, 0.0393, 1.6432, 0.6298, 0.8169,
    ],
    [
        -0.3801, 0.3711, -0.619, -0.5194, -0.7883, -1.1378, -0.4167, 0.8654, 0.6244, -0.0184,
        -1.2659, 0.0763, 0.2204, -0.4365, 0.5278, 1.6272, -0.5995, 0.2115, 0.8383, 0.9219,
    ],
    [
        1.3425, -0.1112, 3.2354, 1.7443, 2.1557, 2.7805, 2.1536, -0.4804, -1.7159, -1.4448,
        -0.6929, -1.5492, -1.5862, -1.1786, -1.0007, -0.337, -0.1057, -0.0864, -0.5782, -1.01,
    ],
];
/// Set B: rounded normals, 4 × 20, heavy ties.
pub(super) const SET_B: [[f64; 20]; 4] = [
    [
        -3.0, 2.0, 0.0, 1.0, -3.0, 1.0, -0.0, 1.0, -1.0, 1.0, 2.0, -0.0, -0.0, -1.0, 0.0, 4.0,
        -0.0, 1.0, -2.0, -3.0,
    ],
    [
        0.0, -0.0, 2.0, -4.0, 1.0, -3.0, 3.0, 1.0, -1.0, 1.0, 1.0, 0.0, 2.0, 1.0, -0.0, -1.0, 1.0,
        -1.0, -4.0, -1.0,
    ],
    [
        -3.0, 2.0, 0.0, 1.0, 2.0, -0.0, -0.0, 1.0, 4.0, -0.0, -1.0, 0.0, 1.0, -0.0, -0.0, 1.0, 3.0,
        2.0, -3.0, -0.0,
    ],
    [
        2.0, -2.0, 0.0, 1.0, -2.0, -2.0, -1.0, 2.0, -0.0, 0.0, -1.0, -0.0, -3.0, -1.0, 1.0, -2.0,
        -0.0, -0.0, 1.0, -4.0,
    ],
];
/// Set C: AR(1), ρ = 0.7, 4 × 21, chain 3 offset by 3.
pub(super) const SET_C: [[f64; 21]; 4] = [
    [
        0.1359, 0.019, 0.2513, -0.7043, 0.8144, 1.2981, 1.1746, 1.6999, 0.9325, 1.3856, 0.2136,
        1.2929, 1.6233, 0.5008, -0.268, 0.2622, 0.1986, 0.9494, 0.6574, 0.6131, 0.4063,
    ],
    [
        -0.0005, -0.6827, 0.0872, 0.4287, -0.6676, -0.6357, 0.4634, 0.4784, -0.3035, 0.1512,
        -0.3872, -0.3848, 0.7807, -0.5112, 0.0133, 1.1916, 1.2018, 1.5811, -0.1085, -0.3192,
        -0.6376,
    ],
    [
        0.0752, 0.1965, 0.9042, 0.3611, 0.5575, 0.248, 0.749, 1.267, 1.1309, 0.5825, -0.6805,
        0.1589, -0.507, 0.6101, 0.8701, -0.2676, 0.4426, 0.3175, 0.8411, 1.4548, 1.5236,
    ],
    [
        3.5456, 2.9124, 2.4518, 2.5734, 2.6901, 3.6299, 2.637, 1.9958, 2.79, 2.7615, 3.4003,
        3.3698, 2.7315, 1.7378, 1.4932, 2.6889, 2.1996, 2.8653, 3.4935, 3.0718, 4.1954,
    ],
];
/// ArviZ on set A.
pub(super) const EXPECTED_A: Expected = Expected {
    ess_bulk: 31.792778622841695,
    ess_tail: 20.905923344947734,
    rhat: 1.0950709216028616,
    mcse_mean: 0.21494999157616765,
    ess_mean: 24.983101952186143,
    ess: 26.84883895190238,
    ess_q05: 65.71119524067063,
    ess_chain0: 8.489385750779672,
};
/// ArviZ on set B.
pub(super) const EXPECTED_B: Expected = Expected {
    ess_bulk: 143.1787236979639,
    ess_tail: 117.54385964912274,
    rhat: 0.9855223738742082,
    mcse_mean: 0.15055326522750676,
    ess_mean: 136.76002399298667,
    ess: 110.81534051335441,
    ess_q05: 130.04926108374383,
    ess_chain0: 26.020599913279625,
};
/// ArviZ on set C.
pub(super) const EXPECTED_C: Expected = Expected {
    ess_bulk: 10.799342634941134,
    ess_tail: 49.51957115404062,
    rhat: 1.5820341462153131,
    mcse_mean: 0.41735424580392566,
    ess_mean: 8.808294409344066,
    ess: 3.0188484891061638,
    ess_q05: 90.40178571428571,
    ess_chain0: 12.426875467445681,
};
