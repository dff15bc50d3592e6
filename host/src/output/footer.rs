//! The `# shmc …` lines that end a chain's CSV file after its draws: what each phase cost in
//! exact and surrogate evaluations, and, for a surrogate method, its training and learning
//! curve. [`CsvSink`](super::CsvSink) writes them with the functions here and
//! [`ChainFooter::parse`] reads them back, so the two never drift apart.

use crate::records::{Evaluations, LearningPoint};
use crate::sampler::SurrogateReport;

/// What the line of the learning curve starts with, after `shmc `.
const LEARNING: &str = "learning curve (iteration:states learned:surrogate proposals:mean \
                        acceptance; iterations after the warmup are sampling's):";

/// The line of `phase` (`warmup` or `sampling`) and its evaluations `e`, after `# `.
pub fn evaluations_line(phase: &str, e: &Evaluations) -> String {
    format!(
        "shmc {phase}: {} iterations, {} exact gradients, {} exact values, {} surrogate gradients",
        e.iterations, e.exact_gradients, e.exact_values, e.surrogate_gradients
    )
}

/// How a surrogate chain's trajectories were made (after `surrogate trajectories: `): NUTS's
/// trees with their mean size over `sampling`'s draws, or the lengths chosen from the
/// surrogate's curvature; `None` for the lengths the run gave.
pub fn trajectories_line(report: &SurrogateReport, sampling: &Evaluations) -> Option<String> {
    if report.nuts_trees {
        let e = sampling;
        let steps = (e.surrogate_gradients + e.exact_gradients) as f64 / e.iterations.max(1) as f64;
        return Some(format!(
            "NUTS trees ({steps:.1} leapfrog steps per draw), each draw judged by delayed \
             acceptance ({} exact values in {} draws)",
            e.exact_values, e.iterations
        ));
    }
    report.trajectory.map(|t| t.to_string())
}

/// The line of the learning curve `points`, after `# `.
pub fn learning_line(points: &[LearningPoint]) -> String {
    let mut line = format!("shmc {LEARNING}");
    for p in points {
        line.push_str(&format!(
            " {}:{}:{}:{:.4}",
            p.iteration, p.states, p.proposals, p.acceptance
        ));
    }
    line
}

/// A chain's `# shmc` lines as read back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChainFooter {
    /// The warmup's evaluations, if the file records them.
    pub warmup: Option<Evaluations>,
    /// The sampling's evaluations, if the file records them.
    pub sampling: Option<Evaluations>,
    /// The surrogate's learning curve (empty for exact methods, and for files written before
    /// shmc recorded it).
    pub learning: Vec<LearningPoint>,
    /// The other lines (the surrogate's training, trajectories, precomputation), as written,
    /// without `shmc `.
    pub other: Vec<String>,
    /// Lines that start like one of the above but do not parse (a file edited by hand, or
    /// cut off mid-line), without `shmc `.
    pub unreadable: Vec<String>,
}

impl ChainFooter {
    /// Reads the `lines` that followed `# shmc ` in a file (see
    /// [`StanCsv::shmc`](super::StanCsv::shmc)).
    pub fn parse(lines: &[String]) -> Self {
        let mut footer = Self::default();
        for line in lines {
            if let Some(rest) = line.strip_prefix(LEARNING) {
                match rest.split_whitespace().map(learning_point).collect() {
                    Some(points) => footer.learning = points,
                    None => footer.unreadable.push(line.clone()),
                }
                continue;
            }
            let phase = [
                ("warmup: ", &mut footer.warmup),
                ("sampling: ", &mut footer.sampling),
            ]
            .into_iter()
            .find_map(|(prefix, slot)| line.strip_prefix(prefix).map(|rest| (rest, slot)));
            match phase {
                Some((rest, slot)) => match evaluations(rest) {
                    Some(e) => *slot = Some(e),
                    None => footer.unreadable.push(line.clone()),
                },
                None => footer.other.push(line.clone()),
            }
        }
        footer
    }
}

/// `I:S:P:A` of the learning line.
fn learning_point(token: &str) -> Option<LearningPoint> {
    let mut fields = token.split(':');
    let point = LearningPoint {
        iteration: fields.next()?.parse().ok()?,
        states: fields.next()?.parse().ok()?,
        proposals: fields.next()?.parse().ok()?,
        acceptance: fields.next()?.parse().ok()?,
    };
    fields.next().is_none().then_some(point)
}

/// `N iterations, N exact gradients, N exact values, N surrogate gradients`.
fn evaluations(text: &str) -> Option<Evaluations> {
    let mut counts = [0u64; 4];
    let names = [
        "iterations",
        "exact gradients",
        "exact values",
        "surrogate gradients",
    ];
    let mut parts = text.split(", ");
    for (count, name) in counts.iter_mut().zip(names) {
        let (number, what) = parts.next()?.split_once(' ')?;
        if what != name {
            return None;
        }
        *count = number.parse().ok()?;
    }
    parts.next().is_none().then_some(Evaluations {
        iterations: counts[0],
        exact_gradients: counts[1],
        exact_values: counts[2],
        surrogate_gradients: counts[3],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_lines_read_back() {
        let warmup = Evaluations {
            iterations: 200,
            exact_gradients: 1500,
            exact_values: 80,
            surrogate_gradients: 900,
        };
        let points = vec![
            LearningPoint {
                iteration: 150,
                states: 120,
                proposals: 25,
                acceptance: 0.71234,
            },
            LearningPoint {
                iteration: 400,
                states: 130,
                proposals: 200,
                acceptance: 0.8,
            },
        ];
        let lines: Vec<String> = [
            evaluations_line("warmup", &warmup),
            "shmc surrogate: trained on 120 states".into(),
            learning_line(&points),
        ]
        .iter()
        .map(|l| l.strip_prefix("shmc ").unwrap().to_string())
        .collect();
        let footer = ChainFooter::parse(&lines);
        assert_eq!(footer.warmup, Some(warmup));
        assert_eq!(footer.sampling, None);
        assert_eq!(footer.learning.len(), 2);
        assert_eq!(footer.learning[0].acceptance, 0.7123);
        assert_eq!(footer.learning[1], points[1]);
        assert_eq!(footer.other, ["surrogate: trained on 120 states"]);
        assert!(footer.unreadable.is_empty());
    }

    #[test]
    fn broken_lines_are_kept_apart() {
        let lines = [
            "warmup: 12 iterations, 3 exact grad".to_string(),
            format!("{LEARNING} 1:2:3:0.5 4:5"),
        ];
        let footer = ChainFooter::parse(&lines);
        assert_eq!(footer.warmup, None);
        assert!(footer.learning.is_empty());
        assert_eq!(footer.unreadable, lines);
    }
}
