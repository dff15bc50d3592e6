//! A posterior's reference draws, as posteriordb ships them: a JSON list of chains, each an
//! object from a parameter's Stan name (`beta[1]`, `Sigma[2,1]`) to its draws.

use std::collections::BTreeMap;

use crate::diagnostics::{ParameterSummary, summarize};

/// Reference draws under CmdStan's names (`beta.1`, `Sigma.2.1`), the names shmc's draws have.
#[derive(Clone, Debug)]
pub struct Reference {
    /// The parameters' names, sorted.
    pub names: Vec<String>,
    /// `chains[c][p]`: chain `c`'s draws of parameter `names[p]`.
    pub chains: Vec<Vec<Vec<f64>>>,
}

impl Reference {
    /// Parses posteriordb's JSON `text`; `limit` bounds the draws kept in memory.
    pub fn parse(text: &str, limit: u64) -> std::result::Result<Self, String> {
        let parsed: Vec<BTreeMap<String, Vec<f64>>> = serde_json::from_str(text)
            .map_err(|e| format!("not a list of chains of draws by parameter: {e}"))?;
        let Some(first) = parsed.first() else {
            return Err("no chains".to_string());
        };
        let stan_names: Vec<String> = first.keys().cloned().collect();
        let length = first.values().next().map_or(0, Vec::len);
        if length < 4 {
            return Err(format!("{length} draws per chain (at least 4 are needed)"));
        }
        let values = parsed.len().checked_mul(stan_names.len());
        let bytes = values
            .and_then(|v| v.checked_mul(length))
            .map(|n| n as u128 * 8);
        crate::memory::check("the reference draws", "memory_limit", bytes, limit)
            .map_err(|e| e.to_string())?;
        let mut chains = Vec::with_capacity(parsed.len());
        for (c, chain) in parsed.into_iter().enumerate() {
            if chain.keys().ne(stan_names.iter()) {
                return Err(format!("chain {} has other parameters than chain 1", c + 1));
            }
            let draws: Vec<Vec<f64>> = chain.into_values().collect();
            if let Some(short) = draws.iter().position(|d| d.len() != length) {
                return Err(format!(
                    "chain {}: {} has {} draws where the others have {length}",
                    c + 1,
                    stan_names[short],
                    draws[short].len()
                ));
            }
            chains.push(draws);
        }
        let names = stan_names.iter().map(|n| cmdstan_name(n)).collect();
        Ok(Self { names, chains })
    }

    /// The reference's summaries (mean, sd and their errors from its own chains), in
    /// [`Reference::names`]' order.
    pub fn summary(&self) -> Vec<ParameterSummary> {
        summarize(&self.names, &self.chains)
    }

    /// The kurtosis of parameter `p` over all chains (3 for a normal): it sets how noisy an
    /// estimate of the parameter's sd is.
    pub fn kurtosis(&self, p: usize) -> f64 {
        let all = || self.chains.iter().flat_map(|c| c[p].iter().copied());
        let n = all().count() as f64;
        let mean = all().sum::<f64>() / n;
        let moment = |k: i32| all().map(|x| (x - mean).powi(k)).sum::<f64>() / n;
        moment(4) / moment(2).powi(2)
    }
}

/// Stan's `beta[2,1]` as CmdStan's CSV header writes it: `beta.2.1`.
fn cmdstan_name(stan: &str) -> String {
    stan.replace(['[', ','], ".").replace([']', ' '], "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stan_names_become_cmdstans() {
        assert_eq!(cmdstan_name("Sigma[2,1]"), "Sigma.2.1");
        assert_eq!(cmdstan_name("mu"), "mu");
    }

    #[test]
    fn chains_must_agree_in_parameters_and_lengths() {
        let draws = "[1.0, 2.0, 3.0, 4.0]";
        let good = format!(r#"[{{"a[1]": {draws}}}, {{"a[1]": {draws}}}]"#);
        let reference = Reference::parse(&good, 1 << 20).unwrap();
        assert_eq!(reference.names, ["a.1"]);
        assert_eq!(reference.chains.len(), 2);
        let other = format!(r#"[{{"a[1]": {draws}}}, {{"b": {draws}}}]"#);
        let err = Reference::parse(&other, 1 << 20).unwrap_err();
        assert!(err.contains("chain 2 has other parameters"), "{err}");
        let short = format!(r#"[{{"a": {draws}, "b": [1.0, 2.0, 3.0, 4.0, 5.0]}}]"#);
        let err = Reference::parse(&short, 1 << 20).unwrap_err();
        assert!(
            err.contains("b has 5 draws where the others have 4"),
            "{err}"
        );
        let err = Reference::parse(&good, 16).unwrap_err();
        assert!(err.contains("memory limit"), "{err}");
    }
}
