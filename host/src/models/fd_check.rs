//! A test helper shared by the models: the analytic gradient against central differences.

use shmc_core::Potential;

/// Asserts `|∂ᵢU(q) − (U(q + h eᵢ) − U(q − h eᵢ)) / 2h| ≤ tol · max(|fd|, 1)` for every `i`.
pub fn assert_gradient_matches_central_differences(
    model: &dyn Potential,
    q: &[f64],
    h: f64,
    tol: f64,
) {
    let mut grad = vec![0.0; q.len()];
    model.value_and_gradient(q, &mut grad);
    for i in 0..q.len() {
        let (mut up, mut down) = (q.to_vec(), q.to_vec());
        up[i] += h;
        down[i] -= h;
        let fd = (model.value(&up) - model.value(&down)) / (2.0 * h);
        assert!(
            (grad[i] - fd).abs() <= tol * fd.abs().max(1.0),
            "q = {q:?}, i = {i}: {} vs {fd}",
            grad[i]
        );
    }
}
