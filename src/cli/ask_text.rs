//! `bertqa ask` of a model that takes text (a question and a context as BYTES, tokenized
//! on the server) that follows the answer contract: its answers, asked in one request
//! when the model batches them (else one request per question). The logits contract is
//! decoded as a token model's answers are (`ask`).

use std::fmt::Write as _;
use std::time::Instant;

use serde_json::{json, Value};

use super::common::{print_stdout, Outcome};
use bertqa::backend::text::{Contract, TextAnswer, TextBinding};
use bertqa::backend::{text_request, SharedMemory};
use bertqa::pipeline::SharedRegion;
use bertqa::TritonClient;

/// What `ask` was asked, for a text model.
pub(crate) struct Asked<'a> {
    pub questions: &'a [String],
    pub context: &'a str,
    pub model_version: &'a str,
    /// The `--url`s, as the report names them.
    pub url: String,
    pub json: bool,
    /// Whether the questions and the context go through a shared memory region.
    pub shared_memory: SharedMemory,
}

/// Asks `binding`'s model every question about the context.
pub(crate) async fn ask(
    asked: &Asked<'_>,
    client: &TritonClient,
    binding: &TextBinding,
) -> anyhow::Result<Outcome> {
    let context = asked.context;
    let pairs: Vec<(&str, &str)> = asked
        .questions
        .iter()
        .map(|q| (q.as_str(), context))
        .collect();
    let per_request = binding.max_batch_size.max(1);
    let largest = pairs.chunks(per_request).map(text_request::contents_len);
    let largest = largest.max().unwrap_or(0);
    let shm = SharedRegion::open_text(asked.shared_memory, Some(client), 1, largest).await?;
    let mut answers: Vec<TextAnswer> = Vec::with_capacity(pairs.len());
    let mut latencies_ms = Vec::new();
    let mut asked_all = Ok(());
    for chunk in pairs.chunks(per_request) {
        let t = Instant::now();
        let placed = shm.place_text(chunk);
        let send = |at| client.infer_text(binding, asked.model_version, chunk, at);
        let read = match placed.send(send).await {
            Ok(response) => binding.answers(&response, chunk.len()),
            Err(e) => Err(e),
        };
        latencies_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        match read {
            Ok(read) => answers.extend(read),
            Err(e) => {
                asked_all = Err(e);
                break;
            }
        }
    }
    // Unregistered whatever happened; how the questions travelled is not reported here.
    shm.close().await;
    asked_all?;
    let no_answer_key = match &binding.contract {
        Contract::Answer {
            no_answer: Some(n), ..
        } if n.probability => "no_answer_probability",
        _ => "no_answer_score",
    };
    let doc = json!({
        "schema": 1,
        "model": binding.model,
        "url": asked.url,
        "protocol": client.protocol().as_str(),
        "contract": binding.contract.name(),
        "requests": latencies_ms.len(),
        "latency_ms": {
            "max": latencies_ms.iter().copied().fold(0.0, f64::max),
            "mean": latencies_ms.iter().sum::<f64>() / latencies_ms.len().max(1) as f64,
        },
        "answers": asked.questions.iter().zip(&answers).map(|(q, a)| {
            let mut v = json!({
                "question": q,
                "answer": a.text,
                "no_answer": a.text.is_empty(),
                "score": a.score,
                "start_char": a.start,
                "end_char": a.end,
            });
            v[no_answer_key] = json!(a.no_answer);
            v
        }).collect::<Vec<_>>(),
    });
    if asked.json {
        print_stdout(&format!("{doc:#}\n"))?;
    } else {
        print_stdout(&render(&doc, no_answer_key))?;
    }
    Ok(Outcome::Success)
}

/// The text report: each question, its answer and what the model said of it.
fn render(doc: &Value, no_answer_key: &str) -> String {
    let mut s = String::new();
    for (i, a) in doc["answers"].as_array().into_iter().flatten().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        let _ = writeln!(s, "Q: {}", a["question"].as_str().unwrap_or(""));
        let mut said = Vec::new();
        if let Some(x) = a["score"].as_f64() {
            said.push(format!("score {x:.3}"));
        }
        if let Some(x) = a[no_answer_key].as_f64() {
            said.push(format!("{} {x:.3}", no_answer_key.replace('_', " ")));
        }
        if let (Some(x), Some(y)) = (a["start_char"].as_i64(), a["end_char"].as_i64()) {
            said.push(format!("characters {x}..{y}"));
        }
        let answer = match a["answer"].as_str().unwrap_or("") {
            "" => "(no answer)",
            text => text,
        };
        let said = if said.is_empty() {
            String::new()
        } else {
            format!("   ({})", said.join(", "))
        };
        let _ = writeln!(s, "A: {answer}{said}");
    }
    s
}
