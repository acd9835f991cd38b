//! A model of another family (RoBERTa, DistilBERT, DeBERTa-v3, ...) through the async
//! client in a tokio program of one thread: its tokenizer.json, run_qa's rules.
//!
//! Usage: `client_family URL MODEL TOKENIZER_DIR DATA OUT_DIR`. Asks one question,
//! evaluates DATA, writes the reference's files into OUT_DIR and prints one JSON line:
//! the answer, the exact match and F1, and every prediction.

mod common;

use bertqa::{Client, Dataset};

const CONTEXT: &str = "The lighthouse at Varne Point was designed by Ada Byron in 1851.";
const QUESTION: &str = "Who designed the lighthouse?";

// One thread is enough: the client runs on the runtime that awaits it.
#[tokio::main(flavor = "current_thread")]
async fn main() -> bertqa::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, model, tokenizer, data, out]: [String; 5] = args.try_into().unwrap_or_else(|_| {
        eprintln!("usage: client_family URL MODEL TOKENIZER_DIR DATA OUT_DIR");
        std::process::exit(2)
    });
    let client = Client::builder(url)
        .model(model)
        .tokenizer(tokenizer)
        .build()
        .await?;
    // The client is shared by tasks: the answer and the evaluation run at once.
    let dataset = Dataset::open(data)?;
    let (answer, evaluation) =
        tokio::join!(client.ask(QUESTION, CONTEXT), client.evaluate(&dataset));
    let (answer, evaluation) = (answer?, evaluation?);
    evaluation.write_files(&out)?;
    common::print_line(&answer, &evaluation);
    Ok(())
}
