//! The option values the command line reads from text itself (clap hands them over as strings):
//! `--domain`, `--surrogate-scale`, `--surrogate-steps-factor` and the `--init` file. Each is a
//! public function of the text alone, so that what a user can type is tested and fuzzed as it
//! is, and every bad value is one error naming the option and the value.

use std::path::Path;

use shmc::sampler::SurrogateSteps;
use shmc::surrogates::grids::{Domain, DomainChoice};
use shmc::surrogates::network::Scale;
use shmc::{Error, Model, Result};

/// `--domain`: `laplace`, `laplace:P` with `P` in (0, 1), `states`, or `lo:hi,…` per
/// coordinate.
pub fn domain(text: &str) -> Result<DomainChoice> {
    match text {
        "states" => Ok(DomainChoice::States { margin: 0.1 }),
        "laplace" => Ok(DomainChoice::Laplace { probability: 0.999 }),
        _ => match text.strip_prefix("laplace:") {
            Some(p) => match p.parse::<f64>() {
                Ok(probability) if probability > 0.0 && probability < 1.0 => {
                    Ok(DomainChoice::Laplace { probability })
                }
                _ => Err(Error::invalid(format!(
                    "--domain laplace:P needs a probability P in (0, 1), got {p:?}"
                ))),
            },
            None => Domain::parse(text)
                .map(DomainChoice::Explicit)
                .map_err(|e| Error::invalid(format!("--domain: {e}"))),
        },
    }
}

/// `--surrogate-scale`: `auto` or a finite positive number.
pub fn surrogate_scale(text: &str) -> Result<Scale> {
    match text {
        "auto" => Ok(Scale::Auto),
        _ => match text.parse::<f64>() {
            Ok(c) if c.is_finite() && c > 0.0 => Ok(Scale::Fixed(c)),
            _ => Err(Error::invalid(format!(
                "--surrogate-scale must be `auto` or a positive number, got {text:?}"
            ))),
        },
    }
}

/// `--surrogate-steps-factor`: `auto`, `nuts` or a whole number of at least 1.
pub fn surrogate_steps(text: &str) -> Result<SurrogateSteps> {
    match text {
        "auto" => Ok(SurrogateSteps::Auto),
        "nuts" => Ok(SurrogateSteps::Nuts),
        _ => match text.parse::<u32>() {
            Ok(k) if k > 0 => Ok(SurrogateSteps::Factor(k)),
            _ => Err(Error::invalid(format!(
                "--surrogate-steps-factor must be `auto`, `nuts` or a whole number of at least 1, \
                 got {text:?}"
            ))),
        },
    }
}

/// The text of an `--init` file: a JSON array of numbers on the unconstrained scale (their count
/// and finiteness are the sampler's to check), or an object of values by name on `model`'s own
/// scale (CmdStan's init file), which the model unconstrains; `path` names the file in errors.
pub fn init_values(text: &str, path: &Path, model: &dyn Model) -> Result<Vec<f64>> {
    let at = |line: usize, message: String| Error::Data {
        path: path.to_path_buf(),
        line: line.max(1),
        message,
    };
    if text.trim_start().starts_with('{') {
        return match model.unconstrain_named(text) {
            Some(values) => values.map_err(|e| at(1, format!("initial values by name: {e}"))),
            None => Err(at(
                1,
                format!(
                    "initial values by name are read by a Stan model; this model takes an \
                     array of its {} numbers on the unconstrained scale",
                    model.dim()
                ),
            )),
        };
    }
    serde_json::from_str::<Vec<f64>>(text).map_err(|e| {
        at(
            e.line(),
            format!("expected a JSON array of numbers (or, for a Stan model, values by name): {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_values_parse() {
        assert_eq!(
            domain("laplace:0.9").unwrap(),
            DomainChoice::Laplace { probability: 0.9 }
        );
        assert!(matches!(domain("-1:1,0:2"), Ok(DomainChoice::Explicit(d)) if d.dim() == 2));
        assert_eq!(surrogate_scale("2.5").unwrap(), Scale::Fixed(2.5));
        assert_eq!(surrogate_steps("3").unwrap(), SurrogateSteps::Factor(3));
        assert_eq!(surrogate_steps("nuts").unwrap(), SurrogateSteps::Nuts);
        let path = Path::new("init.json");
        let model = shmc::models::banana::Banana::new(&[1.0]).unwrap();
        assert_eq!(init_values("[1, -2.5]", path, &model).unwrap(), [1.0, -2.5]);
    }

    #[test]
    fn bad_values_name_the_option_and_the_value() {
        for (err, needle) in [
            (domain("laplace:1").unwrap_err(), "--domain laplace:P"),
            (domain("1:0").unwrap_err(), "--domain: domain entry 1"),
            (domain("").unwrap_err(), "--domain: "),
            (surrogate_scale("-1").unwrap_err(), "--surrogate-scale"),
            (surrogate_scale("inf").unwrap_err(), "\"inf\""),
            (
                surrogate_steps("0").unwrap_err(),
                "--surrogate-steps-factor",
            ),
        ] {
            assert!(err.to_string().contains(needle), "{err}");
        }
        let model = shmc::models::banana::Banana::new(&[1.0]).unwrap();
        let err = init_values("[1,\n\"a\"]", Path::new("init.json"), &model).unwrap_err();
        assert!(err.to_string().starts_with("init.json:2: "), "{err}");
        // Values by name are a Stan model's notation; the banana has none.
        let err = init_values(" {\"b\": 1}", Path::new("init.json"), &model).unwrap_err();
        assert!(err.to_string().contains("array of its 2 numbers"), "{err}");
    }
}
