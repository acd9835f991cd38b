//! `bertqa compare`: the same evaluation on several deployments, side by side.
//!
//! Features are built once and sent to every model (sequentially by default so the
//! timings are fair; `--parallel` runs them together). Against the first model it
//! reports answer agreement (fraction of questions with the same final text), the L_inf
//! and mean absolute difference of start and end logits over every feature position
//! whose attention mask is 1, and the questions that disagree. Gates: `--min-agreement`,
//! `--max-logit-diff`, `--max-f1-drop` → exit 1.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::args::{self, PipelineArgs, ServerArgs};
use super::common::{
    connect_pool_and_bind, decode_config, feature_config, load_data, load_tokenizer,
    pipeline_runtime, print_stdout, run_config, shared_pipeline_runtime, Outcome,
};
use super::eval::{score_predictions, write_per_question, write_predictions};
use bertqa::backend::{Binding, SeqLen};
use bertqa::evaluate::Scores;
use bertqa::pipeline::{self, Padding, RunConfig, RunOutcome};
use bertqa::types::{Feature, Logits};

/// Compare several deployments of a model on one SQuAD file.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("url", |a| a.help("Server of the models named without @HOST:PORT")),
    // No progress bar.
    mut_arg("quiet", |a| a.hide(true)),
)]
pub struct Args {
    /// SQuAD-format file (v1.1 or v2.0)
    #[arg(long, value_name = "FILE", help_heading = args::INPUT)]
    pub data: PathBuf,
    /// First N questions only
    #[arg(long, value_name = "N", help_heading = args::INPUT)]
    pub limit: Option<usize>,
    /// Models to compare, NAME or NAME@HOST:PORT; the first is the reference
    #[arg(
        long,
        value_delimiter = ',',
        required = true,
        num_args = 1..,
        help_heading = args::MODEL
    )]
    pub models: Vec<String>,
    #[command(flatten)]
    pub run: PipelineArgs,
    #[command(flatten, next_help_heading = args::DECODING)]
    pub scoring: args::ScoringArgs,
    /// Run the models at the same time (their timings then interfere)
    #[arg(long, help_heading = args::RUN)]
    pub parallel: bool,
    /// Each model's files in DIR/<model>/, and DIR/compare.json
    #[arg(long, value_name = "DIR", help_heading = args::OUTPUT)]
    pub output_dir: PathBuf,
    /// Disagreeing questions shown per model
    #[arg(long, default_value_t = 10, value_name = "N", help_heading = args::OUTPUT)]
    pub show: usize,
    /// Exit 1 when a model agrees with the first on less than this fraction of questions
    #[arg(long, value_name = "X", help_heading = args::GATES)]
    pub min_agreement: Option<f64>,
    /// Exit 1 when a model's logits differ from the first's by more than X
    #[arg(long, value_name = "X", help_heading = args::GATES)]
    pub max_logit_diff: Option<f64>,
    /// Exit 1 when a model's F1 is more than X points below the first's
    #[arg(long, value_name = "X", help_heading = args::GATES)]
    pub max_f1_drop: Option<f64>,
}

/// One model's run.
struct ModelRun {
    name: String,
    url: String,
    protocol: bertqa::backend::Protocol,
    dir_name: String,
    binding: Binding,
    outcome: RunOutcome,
    scores: Scores,
}

/// Differences of one model against the first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogitDiff {
    pub linf: f64,
    pub mean_abs: f64,
}

/// L_inf and mean |Δ| of start and end logits over mask-1 positions of every feature.
pub fn logit_diffs(
    features: &[Arc<Feature>],
    a: &[Logits],
    b: &[Logits],
) -> (LogitDiff, LogitDiff) {
    let (mut s, mut e) = (LogitDiff::default(), LogitDiff::default());
    let mut n = 0usize;
    let by_id = |v: &[Logits], id: u64| v.binary_search_by_key(&id, |l| l.unique_id).ok();
    for f in features {
        let (Some(i), Some(j)) = (by_id(a, f.unique_id), by_id(b, f.unique_id)) else {
            continue;
        };
        for p in 0..f.len() {
            let ds = (f64::from(a[i].start[p]) - f64::from(b[j].start[p])).abs();
            let de = (f64::from(a[i].end[p]) - f64::from(b[j].end[p])).abs();
            // NaN differences count as infinite.
            s.linf = if ds.is_nan() {
                f64::INFINITY
            } else {
                s.linf.max(ds)
            };
            e.linf = if de.is_nan() {
                f64::INFINITY
            } else {
                e.linf.max(de)
            };
            s.mean_abs += ds;
            e.mean_abs += de;
            n += 1;
        }
    }
    if n > 0 {
        s.mean_abs /= n as f64;
        e.mean_abs /= n as f64;
    }
    (s, e)
}

fn split_model(spec: &str, default_url: &str) -> (String, String) {
    match spec.split_once('@') {
        Some((m, u)) => (m.trim().to_string(), u.trim().to_string()),
        None => (spec.trim().to_string(), default_url.to_string()),
    }
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    if args.models.len() < 2 {
        anyhow::bail!(
            "--models needs at least two models to compare (got {})",
            args.models.len()
        );
    }
    // Held until the comparison ends; before anything is read or written.
    let _dir = super::outdir::OutputDir::claim(&args.output_dir)?;
    let dataset = load_data(&args.data, args.run.window.strict, args.limit)?;
    let tokenizer = load_tokenizer(&args.run.tokenizer)?;
    let version_2 = args.run.decode.version_2_with_negative || dataset.looks_like_v2();
    let decode = decode_config(
        &args.run.decode,
        version_2,
        bertqa::types::TokenText::lower_case(&tokenizer),
    );
    let features_config = feature_config(&args.run.window)?;
    let (built, _) = bertqa::features::build(&tokenizer, features_config, &dataset)?;
    let features: Vec<Arc<Feature>> = built.into_iter().map(Arc::new).collect();
    let rt = if args.parallel {
        shared_pipeline_runtime()?
    } else {
        pipeline_runtime()?
    };

    // Connect and bind every model first: a wrong name fails before any run.
    let mut targets = Vec::new();
    for spec in &args.models {
        let (name, url) = split_model(spec, args.run.server.first_url());
        let server = ServerArgs {
            url: vec![url.clone()],
            ..args.run.server.clone()
        };
        let (client, binding) = rt.block_on(connect_pool_and_bind(
            &server,
            &args.run.net,
            &name,
            "",
            &args.run.binding,
        ))?;
        targets.push((name, url, client, binding));
    }
    // The same padding for all, so logits are comparable: each batch padded to its
    // longest feature only when every model takes any length.
    let all_dynamic = targets.iter().all(|t| t.3.seq_len == SeqLen::Dynamic);
    let padding = if all_dynamic && !args.run.load.fixed_seq_len {
        Padding::Longest { multiple: 8 }
    } else {
        Padding::Fixed(features_config.max_seq_length)
    };
    for (name, _, _, binding) in &targets {
        if let SeqLen::Fixed(n) = binding.seq_len {
            if n != features_config.max_seq_length {
                anyhow::bail!(
                    "model {name:?} takes {n} tokens but --max-seq-length is {}",
                    features_config.max_seq_length
                );
            }
        }
    }
    let mut dir_names: Vec<String> = Vec::new();
    let mut jobs = Vec::new();
    for (name, url, client, binding) in targets {
        let mut dir_name = name.replace(['/', '\\'], "_");
        if dir_names.contains(&dir_name) {
            dir_name = format!("{dir_name}-{}", dir_names.len() + 1);
        }
        dir_names.push(dir_name.clone());
        let mut config = run_config(
            &args.run.load,
            &binding,
            features_config,
            decode.clone(),
            padding,
        )?;
        config.keep_logits = true;
        jobs.push((name, url, dir_name, client, binding, config));
    }

    let run_one = |(name, url, dir_name, client, binding, config): (
        String,
        String,
        String,
        bertqa::backend::Pool,
        Binding,
        RunConfig,
    )|
     -> anyhow::Result<ModelRun> {
        let outcome = pipeline::Run::new(
            &rt,
            &client,
            Arc::new(binding.clone()),
            &dataset,
            &tokenizer,
            &config,
        )
        .prebuilt(&features)
        .run()
        .map_err(|e| anyhow::anyhow!("model {name:?}: {e}"))?;
        if let Some(note) = outcome.infer.padding.note(&name) {
            eprintln!("{}", super::flags::name_flags(&note));
        }
        let dir = args.output_dir.join(&dir_name);
        std::fs::create_dir_all(&dir).map_err(|e| bertqa::Error::io(&dir, e))?;
        write_predictions(&dir, &outcome.predictions, version_2, None)?;
        let scores = score_predictions(
            &dataset,
            &outcome.predictions,
            version_2,
            args.scoring.na_prob_thresh,
        )?;
        write_per_question(&dir, &outcome.predictions, &scores)?;
        Ok(ModelRun {
            name,
            url,
            protocol: client.first_client().protocol(),
            dir_name,
            binding,
            outcome,
            scores,
        })
    };
    let runs: Vec<ModelRun> = if args.parallel {
        std::thread::scope(|scope| {
            let handles: Vec<_> = jobs
                .into_iter()
                .map(|j| scope.spawn(|| run_one(j)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("model thread"))
                .collect::<anyhow::Result<Vec<_>>>()
        })?
    } else {
        jobs.into_iter()
            .map(run_one)
            .collect::<anyhow::Result<Vec<_>>>()?
    };

    let doc = report(&args, &runs, &features, version_2);
    bertqa::output_file::write_atomic(
        &args.output_dir.join("compare.json"),
        format!("{doc:#}\n").as_bytes(),
    )?;
    if args.run.output.json {
        print_stdout(&format!("{doc:#}\n"))?;
    } else {
        print_stdout(&render_text(&doc))?;
    }
    let failed: Vec<String> = doc["gates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| g["passed"] == false)
        .map(|g| {
            format!(
                "{} {}: model {} measured {}",
                g["flag"].as_str().unwrap_or(""),
                g["threshold"],
                g["model"].as_str().unwrap_or(""),
                g["value"]
            )
        })
        .collect();
    Ok(if failed.is_empty() {
        Outcome::Success
    } else {
        Outcome::GateFailed(failed)
    })
}

fn report(args: &Args, runs: &[ModelRun], features: &[Arc<Feature>], version_2: bool) -> Value {
    use bertqa::report::compare::*;
    let first = &runs[0];
    let per_s = |n: f64, wall: f64| if wall > 0.0 { n / wall } else { 0.0 };
    let models = runs
        .iter()
        .map(|r| {
            let i = &r.outcome.infer;
            let wall = r.outcome.wall.as_secs_f64();
            ModelJson {
                name: r.name.clone(),
                url: r.url.clone(),
                protocol: r.protocol.as_str(),
                platform: r.binding.platform.clone(),
                output_dir: args.output_dir.join(&r.dir_name).display().to_string(),
                metrics: r.scores.metrics.to_json(),
                wall_s: wall,
                throughput: Throughput {
                    features_per_s: per_s(r.outcome.features as f64, wall),
                    questions_per_s: per_s(r.outcome.predictions.len() as f64, wall),
                },
                latency_ms: LatencyMs {
                    p50: i.latency_ms(0.5),
                    p95: i.latency_ms(0.95),
                    p99: i.latency_ms(0.99),
                },
                padding: super::eval::padding_json(&i.padding),
            }
        })
        .collect();
    let mut gates = Vec::new();
    let comparisons = runs[1..]
        .iter()
        .map(|r| {
            let pairs = first.outcome.predictions.iter().zip(&r.outcome.predictions);
            let total = first.outcome.predictions.len();
            let disagree: Vec<Disagreement> = pairs
                .filter(|(a, b)| a.answer != b.answer)
                .map(|(a, b)| {
                    let score = |p: &bertqa::decode::Prediction| {
                        p.nbest
                            .iter()
                            .find(|e| e.text == p.answer)
                            .map(|e| e.start_logit + e.end_logit)
                    };
                    Disagreement {
                        id: a.qas_id.clone(),
                        answers: [a.answer.clone(), b.answer.clone()],
                        scores: [score(a), score(b)],
                    }
                })
                .collect();
            let agreement = if total > 0 {
                (total - disagree.len()) as f64 / total as f64
            } else {
                1.0
            };
            let (s, e) = logit_diffs(features, &first.outcome.logits, &r.outcome.logits);
            let f1_drop = first.scores.metrics.f1() - r.scores.metrics.f1();
            let linf = s.linf.max(e.linf);
            let mut gate = |flag: &str, threshold: Option<f64>, value: f64, passed: bool| {
                if let Some(threshold) = threshold {
                    gates.push(GateJson {
                        flag: flag.into(),
                        model: r.name.clone(),
                        threshold,
                        value,
                        passed,
                    });
                }
            };
            gate(
                "--min-agreement",
                args.min_agreement,
                agreement,
                args.min_agreement.is_none_or(|t| agreement >= t),
            );
            gate(
                "--max-logit-diff",
                args.max_logit_diff,
                linf,
                args.max_logit_diff.is_none_or(|t| linf <= t),
            );
            gate(
                "--max-f1-drop",
                args.max_f1_drop,
                f1_drop,
                args.max_f1_drop.is_none_or(|t| f1_drop <= t),
            );
            ComparisonJson {
                model: r.name.clone(),
                against: first.name.clone(),
                agreement,
                start_logits: LogitDiffJson {
                    linf: s.linf,
                    mean_abs: s.mean_abs,
                },
                end_logits: LogitDiffJson {
                    linf: e.linf,
                    mean_abs: e.mean_abs,
                },
                f1_drop,
                disagreements: Disagreements {
                    count: disagree.len(),
                    first: disagree.into_iter().take(args.show).collect(),
                },
            }
        })
        .collect();
    let doc = CompareJson {
        schema: 1,
        data: args.data.display().to_string(),
        version_2_with_negative: version_2,
        questions: first.outcome.predictions.len(),
        features: features.len(),
        parallel: args.parallel,
        models,
        comparisons,
        gates,
    };
    // The text report and the gates read the document as the JSON reader would.
    serde_json::to_value(&doc).expect("a report serializes")
}

fn render_text(doc: &Value) -> String {
    let mut s = String::new();
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let models = doc["models"].as_array().cloned().unwrap_or_default();
    // Every model is spoken to in the one --protocol.
    let protocol = bertqa::report::protocol_words(match models.first().map(|m| &m["protocol"]) {
        Some(p) if p == "http" => bertqa::backend::Protocol::Http,
        _ => bertqa::backend::Protocol::Grpc,
    });
    let _ = writeln!(
        s,
        "data {}: {} questions, {} features ({} over {protocol})\n",
        doc["data"].as_str().unwrap_or(""),
        doc["questions"],
        doc["features"],
        if doc["parallel"] == true {
            "models run in parallel"
        } else {
            "models run one after another"
        }
    );
    let v2 = doc["version_2_with_negative"] == true;
    let em_key = if v2 { "exact" } else { "exact_match" };
    let _ = write!(s, "{:<24} {:>8} {:>8}", "model", "EM", "F1");
    if v2 {
        let _ = write!(
            s,
            " {:>8} {:>8} {:>8} {:>8}",
            "HasEM", "HasF1", "NoEM", "NoF1"
        );
    }
    let _ = writeln!(
        s,
        " {:>11} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11}",
        "features/s", "p50 ms", "p95 ms", "p99 ms", "agree", "Linf start", "Linf end"
    );
    let comps = doc["comparisons"].as_array().cloned().unwrap_or_default();
    for (i, m) in models.iter().enumerate() {
        let mm = &m["metrics"];
        let _ = write!(
            s,
            "{:<24} {:>8.3} {:>8.3}",
            m["name"].as_str().unwrap_or(""),
            f(&mm[em_key]),
            f(&mm["f1"])
        );
        if v2 {
            let _ = write!(
                s,
                " {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
                f(&mm["HasAns_exact"]),
                f(&mm["HasAns_f1"]),
                f(&mm["NoAns_exact"]),
                f(&mm["NoAns_f1"])
            );
        }
        let _ = write!(
            s,
            " {:>11.1} {:>9.2} {:>9.2} {:>9.2}",
            f(&m["throughput"]["features_per_s"]),
            f(&m["latency_ms"]["p50"]),
            f(&m["latency_ms"]["p95"]),
            f(&m["latency_ms"]["p99"])
        );
        if i == 0 {
            let _ = writeln!(s, " {:>9} {:>11} {:>11}", "(ref)", "", "");
        } else {
            let c = &comps[i - 1];
            let _ = writeln!(
                s,
                " {:>9.4} {:>11.3e} {:>11.3e}",
                f(&c["agreement"]),
                f(&c["start_logits"]["linf"]),
                f(&c["end_logits"]["linf"])
            );
        }
    }
    for c in &comps {
        let d = &c["disagreements"];
        let _ = writeln!(
            s,
            "\n{} vs {}: mean |Δ| start {:.3e}, end {:.3e}; F1 drop {:.3}; {} questions disagree",
            c["model"].as_str().unwrap_or(""),
            c["against"].as_str().unwrap_or(""),
            f(&c["start_logits"]["mean_abs"]),
            f(&c["end_logits"]["mean_abs"]),
            f(&c["f1_drop"]),
            d["count"]
        );
        for q in d["first"].as_array().into_iter().flatten() {
            let _ = writeln!(
                s,
                "  {}: {:?} ({:.3}) vs {:?} ({:.3})",
                q["id"].as_str().unwrap_or(""),
                q["answers"][0].as_str().unwrap_or(""),
                f(&q["scores"][0]),
                q["answers"][1].as_str().unwrap_or(""),
                f(&q["scores"][1])
            );
        }
    }
    for g in doc["gates"].as_array().into_iter().flatten() {
        let _ = writeln!(
            s,
            "gate {} {} for {}: measured {} {}",
            g["flag"].as_str().unwrap_or(""),
            g["threshold"],
            g["model"].as_str().unwrap_or(""),
            g["value"],
            if g["passed"] == true {
                "passed"
            } else {
                "FAILED"
            }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feature(id: u64, len: usize) -> Arc<Feature> {
        Arc::new(Feature {
            unique_id: id,
            example_index: 0,
            doc_span_index: 0,
            input_ids: vec![1; len],
            query_len: 1,
            token_to_orig: vec![0; len - 3],
            token_is_max_context: vec![true; len - 3],
        })
    }

    #[test]
    fn logit_differences_ignore_padding() {
        let fs = vec![feature(1, 4), feature(2, 5)];
        let l = |id, s: Vec<f32>, e: Vec<f32>| Logits {
            unique_id: id,
            start: s,
            end: e,
        };
        let a = vec![
            l(1, vec![0.0, 1.0, 2.0, 3.0, 99.0], vec![0.0; 5]),
            l(2, vec![1.0; 5], vec![2.0; 5]),
        ];
        let b = vec![
            l(1, vec![0.0, 1.5, 2.0, 3.0, -99.0], vec![0.0; 5]),
            l(2, vec![1.0; 5], vec![1.0; 5]),
        ];
        let (s, e) = logit_diffs(&fs, &a, &b);
        assert_eq!(s.linf, 0.5); // position 4 of feature 1 is padding
        assert_eq!(s.mean_abs, 0.5 / 9.0);
        assert_eq!(e.linf, 1.0);
        assert_eq!(e.mean_abs, 5.0 / 9.0);
        assert_eq!(split_model("m@h:1", "x:2"), ("m".into(), "h:1".into()));
        assert_eq!(split_model("m", "x:2"), ("m".into(), "x:2".into()));
    }
}
