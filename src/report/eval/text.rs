//! eval's text report ([`Render`] for [`EvalRun`]: the `--json` document and the
//! human text) and its HTML page. Settings are named in backticks, as the library's
//! messages name them.

use std::fmt::Write as _;

use super::{rate, EvalJson, EvalRun, FIRST_IDS};
use crate::report::Render;

impl Render for EvalRun {
    type Json<'a>
        = EvalJson
    where
        Self: 'a;

    /// The `--json` document (also written as metrics.json); described by
    /// `schema/eval.schema.json`.
    fn json(&self) -> EvalJson {
        EvalRun::json(self)
    }

    /// The human report. The lines on bertqa's own workings (padding, how inputs and
    /// requests travelled, the client's share of the time) only with `verbose` (`-v`);
    /// without it, one sentence when bertqa's CPU limited the run.
    fn text(&self, verbose: bool) -> String {
        let mut s = String::new();
        text_run_and_scores(&mut s, self);
        text_figures(&mut s, self, verbose);
        text_outcome(&mut s, self);
        s
    }
}

/// The text report's padding line.
fn padding_line(p: &crate::pipeline::PaddingReport) -> String {
    let probe = match (p.probe_features, p.probe_unsafe) {
        (0, _) => String::new(),
        (n, 0) => format!("; probe of {n} features: shorter padding keeps every answer"),
        (n, u) => format!("; probe of {n} features: shorter padding would change {u}"),
    };
    let displaced = if p.displaced > 0 {
        format!(
            "; {} features had real positions pushed out of the top n-best by padding",
            p.displaced
        )
    } else {
        String::new()
    };
    match p.fixed_len {
        Some(n) => format!("{} to {n}{probe}{displaced}", p.mode()),
        None => format!(
            "{} (each batch to its longest feature){probe}{displaced}",
            p.mode()
        ),
    }
}

/// The text report's line on how requests travelled (`--protocol`, `--transport`), when
/// the run had a server.
pub fn requests_line(
    endpoints: &[crate::backend::pool::EndpointReport],
    protocol: Option<crate::backend::Protocol>,
) -> Option<String> {
    use crate::backend::{GrpcCall, Protocol};
    let first = endpoints.first()?;
    let connections: usize = endpoints.iter().map(|e| e.connections).sum();
    let unary: usize = endpoints.iter().map(|e| e.unary_connections).sum();
    if protocol == Some(Protocol::Http) {
        return Some("one POST to the model's /infer each, on keep-alive connections".into());
    }
    Some(match (first.transport, unary) {
        (GrpcCall::Unary, _) => "one ModelInfer call each".into(),
        (GrpcCall::Stream, 0) => "on one ModelStreamInfer stream per connection".into(),
        (GrpcCall::Stream, n) => format!(
            "on one ModelStreamInfer stream per connection; {n} of {connections} connections \
             went unary after the stream answered with an error"
        ),
    })
}

/// The text report's line on how input tensors travelled.
pub fn inputs_line(m: &crate::pipeline::SharedMemoryReport) -> String {
    let used = match m.outputs {
        true => "through shared memory, outputs too",
        false => "through shared memory, outputs in each response",
    };
    match (m.used, &m.note) {
        (true, None) => used.into(),
        (true, Some(note)) => format!("{used} ({note})"),
        (false, None) => "in each message".into(),
        (false, Some(note)) => format!("in each message (no shared memory: {note})"),
    }
}

/// The text report's model and data lines, then the official scores.
fn text_run_and_scores(s: &mut String, r: &EvalRun) {
    for (name, words) in setting_rows(r) {
        let _ = writeln!(s, "{name:<12} {words}");
    }
    let _ = writeln!(s);
    s.push_str(&crate::report::text::metric_lines(&r.scores.metrics, ""));
    let _ = writeln!(s);
    if slice_lines(s, r) {
        let _ = writeln!(s);
    }
}

/// The weak slices, one line each with its figures, or one line saying there are none;
/// nothing without slices. Whether it wrote.
fn slice_lines(s: &mut String, r: &EvalRun) -> bool {
    if r.slices.is_empty() {
        return false;
    }
    let level = format!("{}%", 100.0 * r.statistics.confidence);
    if r.weak_slices.is_empty() {
        let _ = writeln!(
            s,
            "weak slices  none: no slice's errors stand out at {level} ({} slices tested)",
            r.slices.len()
        );
        return true;
    }
    for (i, name) in r.weak_slices.iter().enumerate() {
        let Some(w) = r.slices.iter().find(|x| &x.slice == name) else {
            continue;
        };
        let head = if i == 0 { "weak slices" } else { "" };
        let _ = writeln!(
            s,
            "{head:<12} {name}: {} questions, EM {:.2} [{:.2}, {:.2}], F1 {:.2}; wrong {:.1}% \
             against {:.1}% elsewhere (Holm-adjusted p {:.2e})",
            w.questions,
            w.exact,
            w.exact_ci[0],
            w.exact_ci[1],
            w.f1,
            100.0 * w.error_rate,
            100.0 * w.rest_error_rate,
            w.p_adjusted,
        );
    }
    true
}

/// The run's setting: `model` and `data`, each with its words (the text report's first
/// lines, the HTML page's heading).
pub(crate) fn setting_rows(r: &EvalRun) -> Vec<(&'static str, String)> {
    let rules = match (r.format, r.version_2) {
        (crate::data::Format::Mrqa, false) => "MRQA rules",
        (_, true) => "SQuAD 2.0 rules",
        (_, false) => "SQuAD 1.1 rules",
    };
    let model = match (&r.binding, &r.url, r.protocol) {
        (Some(b), Some(url), Some(protocol)) => {
            // A server without model configuration may name no platform.
            let platform = if b.platform().is_empty() {
                String::new()
            } else {
                format!("{}, ", b.platform())
            };
            let batch = match b.takes_text() {
                false => crate::report::batch_words(r.batch_size, b, r.batch_size_given),
                true if r.batch_size == 1 => "one question per request".into(),
                true => format!("{} questions per request", r.batch_size),
            };
            format!(
                "{} at {} over {} ({platform}{batch}, concurrency {})",
                b.name(),
                url,
                crate::report::protocol_words(protocol),
                r.concurrency
            )
        }
        _ => "(decoded from saved logits)".into(),
    };
    let mut rows = vec![("model", model)];
    if let Some(words) = r.binding.as_ref().and_then(|b| b.contract_words()) {
        rows.push(("text model", words));
    }
    let pieces = match &r.binding {
        Some(b) if b.answers_given() => "tokenized by the server".into(),
        Some(b) if b.takes_text() => format!("{} windows made by the server", r.features),
        _ => format!("{} features", r.features),
    };
    rows.push((
        "data",
        format!(
            "{} ({rules}, postprocess {}): {} questions, {pieces}",
            r.data, r.postprocess, r.questions
        ),
    ));
    rows
}

/// The text report's throughput, latency, retries, endpoints, then (`verbose`) padding,
/// inputs, requests and the client's share.
fn text_figures(s: &mut String, r: &EvalRun, verbose: bool) {
    let _ = writeln!(
        s,
        "wall time    {:.3} s   throughput {:.1} features/s, {:.1} questions/s",
        r.wall.as_secs_f64(),
        rate(r.features as f64, r.wall),
        rate(r.questions as f64, r.wall)
    );
    if let Some(i) = r.infer.as_ref().filter(|i| i.requests > 0) {
        let _ = writeln!(
            s,
            "latency      p50 {:.2}  p90 {:.2}  p95 {:.2}  p99 {:.2}  max {:.2}  mean {:.2} ms \
             ({} requests, each timed from send to response)",
            i.latency_ms(0.5),
            i.latency_ms(0.9),
            i.latency_ms(0.95),
            i.latency_ms(0.99),
            i.latency_us.max() as f64 / 1000.0,
            i.latency_us.mean() / 1000.0,
            i.requests
        );
    }
    let _ = writeln!(
        s,
        "phases       features {:.3} s, inference {:.3} s, decode {:.3} s (overlapped)",
        r.phases.features_s, r.phases.inference_s, r.phases.decode_s
    );
    if let Some((_, m)) = &r.server_metrics {
        use crate::metrics::text::{counters, gauges};
        let _ = writeln!(
            s,
            "server       {}",
            gauges(m.cpu_utilization, m.cpu_memory_used_bytes, &m.gpus)
        );
        let _ = writeln!(s, "             {}", counters(m.inference.as_ref()));
    }
    if let Some(rs) = &r.retries {
        if rs.total_retries() + rs.total_failures() > 0 {
            let by = |m: &std::collections::BTreeMap<String, u64>| {
                m.iter()
                    .map(|(c, n)| format!("{c} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                s,
                "retries      {} ({}); failed requests {}{}",
                rs.total_retries(),
                by(&rs.retries),
                rs.total_failures(),
                if rs.failures.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", by(&rs.failures))
                }
            );
        }
    }
    if r.endpoints.len() > 1 || r.endpoints.iter().any(|e| !e.errors.is_empty()) {
        for e in &r.endpoints {
            let _ = writeln!(
                s,
                "endpoint     {}: {} requests, {} features, {:.1} features/s, p50 {:.2} ms, \
                 {} errors, taken out {} times, {} connection(s)",
                e.url,
                e.requests,
                e.features,
                rate(e.features as f64, r.wall),
                if e.latency_us.is_empty() {
                    0.0
                } else {
                    e.latency_us.value_at_quantile(0.5) as f64 / 1000.0
                },
                e.errors.values().sum::<u64>(),
                e.taken_out,
                e.connections
            );
        }
    }
    if !verbose {
        if let Some(line) = r.infer.as_ref().and_then(cpu_limit_line) {
            let _ = writeln!(s, "{line}");
        }
    }
    if let Some(i) = r.infer.as_ref().filter(|i| i.requests > 0 && verbose) {
        let _ = writeln!(s, "padding      {}", padding_line(&i.padding));
        let _ = writeln!(s, "inputs       {}", inputs_line(&i.shared_memory));
        if let Some(line) = requests_line(&r.endpoints, r.protocol) {
            let _ = writeln!(s, "requests     {line}");
        }
    }
    if r.non_finite.values > 0 {
        let _ = writeln!(
            s,
            "non-finite   {} NaN or infinite logits in {} features (treated as -inf)",
            r.non_finite.values, r.non_finite.features
        );
    }
    if let Some(i) = r.infer.as_ref().filter(|i| i.requests > 0 && verbose) {
        let _ = writeln!(
            s,
            "client       limited the run {:.3} s (sender waited {:.3} s for features, decoding \
             ended {:.3} s after the last response){}",
            i.client_limited().as_secs_f64(),
            i.starved.as_secs_f64(),
            i.decode_lag.as_secs_f64(),
            if i.client_bound_warning().is_some() {
                ": bertqa's CPU was the limit"
            } else {
                ""
            }
        );
    }
}

/// The sentence a run that bertqa's own CPU limited ends its figures with (the rule of
/// [`crate::pipeline::InferReport::client_bound_warning`]).
fn cpu_limit_line(i: &crate::pipeline::InferReport) -> Option<String> {
    i.client_bound_warning()?;
    Some(format!(
        "bertqa's CPU was the limit for {:.2} of {:.2} s: more `concurrency` will not help; \
         `shard` over machines will",
        i.client_limited().as_secs_f64(),
        i.wall.as_secs_f64()
    ))
}

/// The text report's questions left out, outputs and gates.
fn text_outcome(s: &mut String, r: &EvalRun) {
    if !r.scores.missing.is_empty() {
        let _ = writeln!(
            s,
            "missing      {} questions without a prediction (scored 0): {}",
            r.scores.missing.len(),
            r.scores
                .missing
                .iter()
                .take(FIRST_IDS)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !r.featureless.is_empty() {
        let _ = writeln!(
            s,
            "no features  {} questions whose context has no word pieces: {}",
            r.featureless.len(),
            r.featureless
                .iter()
                .take(FIRST_IDS)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(why) = &r.no_null_odds {
        let _ = writeln!(s, "null odds    none: {why}");
    }
    let _ = writeln!(
        s,
        "outputs      {}/{{{}}}",
        r.output_dir.display(),
        r.files.join(",")
    );
    for g in &r.gates {
        let _ = writeln!(
            s,
            "gate         {} {}",
            g.describe(),
            if g.passed { "passed" } else { "FAILED" }
        );
    }
}
