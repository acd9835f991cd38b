//! `bertqa._native.compare_evaluations`: clients' evaluations of one dataset compared
//! as `bertqa compare` compares models (the library's `bertqa::compare`, the same
//! report and gates); `bertqa.compare` calls it when given clients.

use bertqa::compare::Statistics;
use bertqa::report::compare::{ComparisonJson, Gates, StatisticsJson};
use bertqa::report::flips::FlipLine;
use pyo3::prelude::*;

use crate::client::{from_json, raise, Evaluation};

/// Each evaluation after the first against the first. `names` name the evaluations in
/// the report. Returns the dict `compare --json` gives of the comparisons:
/// `statistics`, `models` (name and metrics), `comparisons`, `gates`, and `flips` (the
/// lines `flips.jsonl` would hold).
#[pyfunction]
#[pyo3(signature = (
    evaluations, names, *, show=10, bootstrap=10_000, seed=0, confidence=0.95,
    min_agreement=None, max_logit_diff=None, max_f1_drop=None,
    fail_on_significant_drop=false, max_flip_rate=None, fail_if_concentrated=false
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn compare_evaluations<'py>(
    py: Python<'py>,
    evaluations: Vec<PyRef<'py, Evaluation>>,
    names: Vec<String>,
    show: usize,
    bootstrap: usize,
    seed: u64,
    confidence: f64,
    min_agreement: Option<f64>,
    max_logit_diff: Option<f64>,
    max_f1_drop: Option<f64>,
    fail_on_significant_drop: bool,
    max_flip_rate: Option<f64>,
    fail_if_concentrated: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if evaluations.len() < 2 || names.len() != evaluations.len() {
        let message = format!(
            "compare needs at least two evaluations, each named (got {} and {} names)",
            evaluations.len(),
            names.len()
        );
        return Err(raise(py, "usage", &message));
    }
    if bootstrap == 0 || !(confidence > 0.0 && confidence < 1.0) {
        let message = "bootstrap must be at least 1 and confidence between 0 and 1";
        return Err(raise(py, "usage", message));
    }
    let inner: Vec<&bertqa::Evaluation> = evaluations.iter().map(|e| e.inner()).collect();
    let first = inner[0];
    let questions = first.outcome.predictions.len();
    if let Some((name, _)) = names
        .iter()
        .zip(&inner)
        .find(|(_, e)| e.outcome.predictions.len() != questions)
    {
        let message = format!(
            "{name} answered another number of questions than {}",
            names[0]
        );
        return Err(raise(py, "usage", &message));
    }
    let statistics = Statistics {
        rounds: bootstrap,
        seed,
        confidence,
    };
    let gates = Gates {
        min_agreement,
        max_logit_diff,
        max_f1_drop,
        fail_on_significant_drop,
        max_flip_rate,
        fail_if_concentrated,
    };
    let (mut comparisons, mut gate_results, mut flips) = (Vec::new(), Vec::new(), Vec::new());
    py.detach(|| {
        for (name, e) in names.iter().zip(&inner).skip(1) {
            let c = bertqa::compare::compare_evaluations(first, e, &statistics);
            flips.extend(
                c.flipped
                    .iter()
                    .map(|f| FlipLine::new(name, &names[0], f, first)),
            );
            let json = ComparisonJson::new(show, &names[0], name, c);
            gate_results.extend(gates.check(&json, questions));
            comparisons.push(json);
        }
    });
    let models: Vec<serde_json::Value> = names
        .iter()
        .zip(&inner)
        .map(|(name, e)| serde_json::json!({"name": name, "metrics": e.metrics.to_json()}))
        .collect();
    let report = serde_json::json!({
        "schema": 1,
        "version_2_with_negative": first.version_2_with_negative(),
        "questions": questions,
        "statistics": StatisticsJson {
            bootstrap,
            seed,
            confidence,
            p_values_corrected: false,
        },
        "models": models,
        "comparisons": comparisons,
        "gates": gate_results,
        "flips": flips,
    });
    from_json(py, &report)
}
