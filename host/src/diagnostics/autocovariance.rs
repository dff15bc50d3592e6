//! Autocovariances by FFT, the first step of every effective-sample-size estimate.
//!
//! The biased estimator `γ̂_t = (1/n) Σ_{i<n−t} (x_i − x̄)(x_{i+t} − x̄)`, the one Stan, ArviZ and
//! posterior use, is the inverse FFT of the power spectrum of the centred chain zero-padded to at
//! least `2n` points (so that the circular correlation equals the linear one): O(n log n) instead
//! of O(n²). For several chains only their *mean* autocovariance is needed, and the transform is
//! linear, so the power spectra are summed and inverted once. Two real chains share one complex
//! FFT: with `z = x + i·y` and `Z = FFT(z)`, `|X_k|² + |Y_k|² = (|Z_k|² + |Z_{L−k}|²)/2`, and that
//! symmetrization is itself linear, so it is applied once to the sum of the `|Z_k|²`.

use rustfft::FftPlanner;
use rustfft::num_complex::Complex;

use super::draws::mean;

/// Reusable FFT plans and buffers for [`AutocovarianceEngine::mean_autocovariance`].
pub(super) struct AutocovarianceEngine {
    planner: FftPlanner<f64>,
    buffer: Vec<Complex<f64>>,
    scratch: Vec<Complex<f64>>,
    power: Vec<f64>,
}

impl AutocovarianceEngine {
    /// An engine with no plans yet (plans are made, and cached, per FFT length).
    pub(super) fn new() -> Self {
        Self {
            planner: FftPlanner::new(),
            buffer: Vec::new(),
            scratch: Vec::new(),
            power: Vec::new(),
        }
    }

    /// The mean over chains of each chain's biased autocovariance at lags `0..draws`, for
    /// chain-major `values` of chains of `draws` draws (`draws ≥ 1`).
    pub(super) fn mean_autocovariance(&mut self, values: &[f64], draws: usize) -> Vec<f64> {
        let chains = values.len() / draws;
        let len = fft_length(2 * draws);
        let forward = self.planner.plan_fft_forward(len);
        let inverse = self.planner.plan_fft_inverse(len);
        let scratch = forward
            .get_inplace_scratch_len()
            .max(inverse.get_inplace_scratch_len());
        self.scratch.resize(scratch, Complex::default());
        self.power.clear();
        self.power.resize(len, 0.0);
        for pair in values.chunks(2 * draws) {
            let (first, second) = pair.split_at(draws);
            self.load_centred(first, second, len);
            forward.process_with_scratch(&mut self.buffer, &mut self.scratch);
            for (power, z) in self.power.iter_mut().zip(&self.buffer) {
                *power += z.norm_sqr();
            }
        }
        self.load_symmetrized_power();
        inverse.process_with_scratch(&mut self.buffer, &mut self.scratch);
        let scale = 1.0 / (len as f64 * draws as f64 * chains as f64);
        self.buffer[..draws].iter().map(|c| c.re * scale).collect()
    }

    /// Fills the buffer with `(x − x̄) + i·(y − ȳ)`, zero-padded to `len` (`y` may be empty).
    fn load_centred(&mut self, x: &[f64], y: &[f64], len: usize) {
        let (x_mean, y_mean) = (mean(x), if y.is_empty() { 0.0 } else { mean(y) });
        self.buffer.clear();
        self.buffer.resize(len, Complex::default());
        for (slot, &xi) in self.buffer.iter_mut().zip(x) {
            slot.re = xi - x_mean;
        }
        for (slot, &yi) in self.buffer.iter_mut().zip(y) {
            slot.im = yi - y_mean;
        }
    }

    /// Fills the buffer with `(Q_k + Q_{L−k})/2` for the summed `Q_k = Σ |Z_k|²` of the packed
    /// transforms: the summed power spectra of all the real chains.
    fn load_symmetrized_power(&mut self) {
        self.buffer.clear();
        self.buffer.push(Complex::new(self.power[0], 0.0));
        let mirrored = self.power[1..].iter().rev();
        for (&q, &q_mirror) in self.power[1..].iter().zip(mirrored) {
            self.buffer.push(Complex::new(0.5 * (q + q_mirror), 0.0));
        }
    }
}

/// The smallest `2^a 3^b 5^c` that is at least `min`: an FFT length rustfft handles fast.
fn fft_length(min: usize) -> usize {
    let min = min.max(1);
    let mut best = min.next_power_of_two();
    // For each 3^b 5^c below the best so far, the smallest power-of-two multiple reaching `min`.
    let mut five = 1;
    while five < best {
        let mut odd = five;
        while odd < best {
            let mut candidate = odd;
            while candidate < min {
                candidate *= 2;
            }
            best = best.min(candidate);
            odd *= 3;
        }
        five *= 5;
    }
    best
}

/// The biased autocovariances `γ̂_0, …, γ̂_{n−1}` of one chain (empty for an empty chain).
pub fn autocovariance(draws: &[f64]) -> Vec<f64> {
    if draws.is_empty() {
        return Vec::new();
    }
    AutocovarianceEngine::new().mean_autocovariance(draws, draws.len())
}

/// The autocorrelations `ρ̂_t = γ̂_t / γ̂_0` of one chain, `t = 0, …, n−1` (NaN for a constant chain).
pub fn autocorrelation(draws: &[f64]) -> Vec<f64> {
    let mut acov = autocovariance(draws);
    if let Some(&variance) = acov.first() {
        acov.iter_mut().for_each(|g| *g /= variance);
    }
    acov
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The O(n²) definition.
    fn direct_autocovariance(x: &[f64]) -> Vec<f64> {
        let n = x.len();
        let m = mean(x);
        (0..n)
            .map(|t| (0..n - t).map(|i| (x[i] - m) * (x[i + t] - m)).sum::<f64>() / n as f64)
            .collect()
    }

    #[test]
    fn fft_autocovariance_matches_the_direct_sum() {
        let x: Vec<f64> = (0..37)
            .map(|i| ((i * i) % 11) as f64 - 0.3 * i as f64)
            .collect();
        let fast = autocovariance(&x);
        for (t, (a, b)) in fast.iter().zip(direct_autocovariance(&x)).enumerate() {
            assert!((a - b).abs() < 1e-12, "lag {t}: {a} vs {b}");
        }
    }

    #[test]
    fn mean_autocovariance_averages_chains_including_an_odd_one_out() {
        let chains: Vec<Vec<f64>> = (0..3)
            .map(|c| {
                (0..20)
                    .map(|i| ((i * (c + 2)) % 7) as f64 + c as f64)
                    .collect()
            })
            .collect();
        let flat: Vec<f64> = chains.concat();
        let fast = AutocovarianceEngine::new().mean_autocovariance(&flat, 20);
        for t in 0..20 {
            let direct: f64 = chains
                .iter()
                .map(|c| direct_autocovariance(c)[t])
                .sum::<f64>()
                / 3.0;
            assert!((fast[t] - direct).abs() < 1e-12, "lag {t}");
        }
    }

    /// ArviZ 0.23.4 `az.autocorr` of chain 0 of reference set A (see `reference.rs`), lags 0–4.
    #[test]
    fn autocorrelation_matches_arviz() {
        let expected = [
            1.0,
            0.548_607_541_316_938_2,
            0.142_939_372_482_634_25,
            0.144_289_348_326_808_23,
            0.040_078_324_328_530_85,
        ];
        let rho = autocorrelation(&super::super::reference::SET_A[0]);
        for (t, e) in expected.iter().enumerate() {
            assert!((rho[t] - e).abs() < 1e-12, "lag {t}: {} vs {e}", rho[t]);
        }
    }

    #[test]
    fn fft_length_is_5_smooth_and_minimal() {
        assert_eq!(fft_length(7), 8);
        assert_eq!(fft_length(10_000), 10_000);
        assert_eq!(fft_length(10_001), 10_125);
        assert_eq!(fft_length(0), 1);
    }
}
