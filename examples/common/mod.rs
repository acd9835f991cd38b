//! What the client examples print, for the tests that run them: one JSON line with the
//! answer, the exact match and F1, and every prediction.

/// Prints `answer` and `evaluation` as one JSON line.
pub fn print_line(answer: &bertqa::Answer, evaluation: &bertqa::Evaluation) {
    let predictions: serde_json::Map<String, serde_json::Value> = (&evaluation.predictions)
        .into_iter()
        .map(|(id, text)| (id.to_string(), text.as_str().into()))
        .collect();
    let line = serde_json::json!({
        "answer": answer,
        "exact": evaluation.metrics.exact(),
        "f1": evaluation.metrics.f1(),
        "predictions": predictions,
    });
    println!("{line}");
}
