//! Tests of the domain of interest.

use super::*;
use crate::models::gaussian::ConjugateGaussian;
use crate::optimize::{MapEstimate, MapOptions, find_map};

// ---------------------------------------------------------------------------------------------
// Domain

#[test]
fn domain_rejects_empty_reversed_and_non_finite_bounds() {
    assert!(Domain::new(vec![], vec![]).is_err());
    assert!(Domain::new(vec![0.0], vec![1.0, 2.0]).is_err());
    let error = Domain::new(vec![0.0, 1.0], vec![1.0, 1.0]).unwrap_err();
    assert!(error.to_string().contains("coordinate 1"), "{error}");
    let error = Domain::new(vec![f64::NAN], vec![1.0]).unwrap_err();
    assert!(error.to_string().contains("finite"), "{error}");
    assert!(Domain::new(vec![0.0], vec![f64::INFINITY]).is_err());
}

#[test]
fn domain_contains_its_closed_box_only() {
    let domain = Domain::new(vec![-1.0, 0.0], vec![1.0, 2.0]).unwrap();
    assert!(domain.contains(&[-1.0, 2.0]));
    assert!(domain.contains(&[0.3, 1.0]));
    assert!(!domain.contains(&[1.0 + 1e-12, 1.0]));
    assert!(!domain.contains(&[0.0, -1e-300]));
    assert!(!domain.contains(&[0.0, f64::NAN]));
    assert!(!domain.contains(&[0.0]));
}

#[test]
fn domain_parsing_errors_name_the_bad_entry() {
    let cases = [
        ("0:1, 2:x ,3:4", "entry 2 \"2:x\"", "not a number"),
        ("0:1,5", "entry 2 \"5\"", "lo:hi"),
        ("1:0", "entry 1 \"1:0\"", "below"),
        ("0:1,2:3,-inf:0", "entry 3 \"-inf:0\"", "finite"),
        ("0:1,,2:3", "entry 2 \"\"", "lo:hi"),
        ("0:1:2", "entry 1 \"0:1:2\"", "not a number"),
    ];
    for (text, entry, why) in cases {
        let message = Domain::parse(text).unwrap_err().to_string();
        assert!(message.contains(entry), "{text:?}: {message}");
        assert!(message.contains(why), "{text:?}: {message}");
        assert!(!message.contains('\n'), "{text:?}: {message}");
    }
    assert!(
        Domain::parse("  ")
            .unwrap_err()
            .to_string()
            .contains("empty")
    );
}

#[test]
fn domain_text_round_trips_bit_for_bit() {
    let domain: Domain = " -3 : 0.5, -0.5:3 ".parse().unwrap();
    assert_eq!(domain.lower(), &[-3.0, -0.5]);
    assert_eq!(domain.upper(), &[0.5, 3.0]);
    let odd = Domain::new(vec![0.1 + 0.2, -1e-300], vec![1.0 / 3.0, 7e22]).unwrap();
    let back = Domain::parse(&odd.to_string()).unwrap();
    for (a, b) in odd
        .lower()
        .iter()
        .chain(odd.upper())
        .zip(back.lower().iter().chain(back.upper()))
    {
        assert_eq!(a.to_bits(), b.to_bits());
    }
}

#[test]
fn bounding_box_covers_the_states_with_the_margin() {
    let states = vec![vec![0.0, 5.0], vec![2.0, 1.0], vec![1.0, 3.0]];
    let tight = Domain::bounding_box(&states, 0.0).unwrap();
    assert_eq!(tight.lower(), &[0.0, 1.0]);
    assert_eq!(tight.upper(), &[2.0, 5.0]);
    assert!(states.iter().all(|s| tight.contains(s)));
    // 10 % of each extent (2 and 4) on both sides.
    let wide = Domain::bounding_box(&states, 0.1).unwrap();
    assert_eq!(wide.lower(), &[-0.2, 0.6]);
    assert_eq!(wide.upper(), &[2.2, 5.4]);

    let flat = vec![vec![0.0, 1.0], vec![2.0, 1.0]];
    let error = Domain::bounding_box(&flat, 0.5).unwrap_err();
    assert!(error.to_string().contains("coordinate 1"), "{error}");
    assert!(Domain::bounding_box(Vec::<Vec<f64>>::new(), 0.1).is_err());
    assert!(Domain::bounding_box(&states, -0.1).is_err());
    let ragged = vec![vec![0.0, 1.0], vec![2.0]];
    assert!(Domain::bounding_box(&ragged, 0.0).is_err());
    let nan = vec![vec![0.0, 1.0], vec![2.0, f64::NAN]];
    assert!(Domain::bounding_box(&nan, 0.0).is_err());
}

/// `P(a ≤ Z ≤ b)` for a standard normal `Z`, by composite Simpson on 20 000 intervals: the
/// error is below `(b − a)⁵ max|φ⁗| / (180 n⁴) < 1e-15` for `b − a < 10`, so this is the exact
/// CDF for the test's purposes, computed without the quantile function under test.
fn normal_probability(a: f64, b: f64) -> f64 {
    let density = |x: f64| (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let n = 20_000;
    let h = (b - a) / n as f64;
    let inner: f64 = (1..n)
        .map(|i| density(a + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 })
        .sum();
    (density(a) + inner + density(b)) * h / 3.0
}

#[test]
fn laplace_domain_holds_the_stated_per_coordinate_probability() {
    // Correlation 0.8 in the data covariance, so the posterior is tilted and the marginal
    // standard deviation √((H⁻¹)ᵢᵢ) is far from 1/√Hᵢᵢ (a box from the diagonal of H would be
    // about 0.6 times too narrow and fail this test).
    let model = ConjugateGaussian::simulate(100, 3).unwrap();
    let (ninety, map) = Domain::laplace(&model, &[0.0, 0.0], 0.9).unwrap();
    assert!(map.evaluations > 0);
    assert_eq!(ninety, Domain::from_laplace(&map, 0.9).unwrap());
    let mean = model.posterior_mean();
    let covariance = model.posterior_covariance();
    for p in [0.5, 0.9, 0.99] {
        let domain = Domain::from_laplace(&map, p).unwrap();
        for i in 0..2 {
            let sd = covariance[(i, i)].sqrt();
            let a = (domain.lower()[i] - mean[i]) / sd;
            let b = (domain.upper()[i] - mean[i]) / sd;
            let probability = normal_probability(a, b);
            // U is quadratic: the MAP is exact up to the search's gradient tolerance (1e-8
            // relative) and the central-difference Hessian of a linear gradient is exact up to
            // rounding, so the box's ends are right to about 1e-7 standard deviations, which
            // moves the probability by less than 1e-7.
            assert!(
                (probability - p).abs() < 1e-6,
                "p = {p}, coordinate {i}: the box holds {probability}"
            );
        }
    }
}

#[test]
fn laplace_domain_refuses_bad_input() {
    let model = ConjugateGaussian::simulate(100, 3).unwrap();
    let map = find_map(&model, &[0.0, 0.0], &MapOptions::default()).unwrap();
    for p in [0.0, 1.0, -0.5, f64::NAN] {
        assert!(Domain::from_laplace(&map, p).is_err(), "p = {p}");
    }
    let unconverged = MapEstimate {
        converged: false,
        termination: "ran out of iterations".into(),
        ..map.clone()
    };
    let error = Domain::from_laplace(&unconverged, 0.9).unwrap_err();
    assert!(error.to_string().contains("did not converge"), "{error}");
    let indefinite = nalgebra::DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
    assert!(Domain::from_gaussian(&[0.0, 0.0], &indefinite, 0.9).is_err());
}
