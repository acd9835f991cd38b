//! A model that takes text (the server tokenizes: an ensemble or a BLS model) through the
//! async client: no vocabulary for the answer contract; a logits-contract model's
//! answers are decoded with BERT's vocabulary (`vocab/vocab.txt`).
//!
//! Usage: `client_text URL MODEL DATA OUT_DIR`. Asks one question, evaluates DATA,
//! writes the reference's files into OUT_DIR and prints one JSON line: the answer, the
//! exact match and F1, and every prediction.

mod common;

use bertqa::{Client, Dataset};

const CONTEXT: &str = "The lighthouse at Varne Point was designed by Ada Byron in 1851.";
const QUESTION: &str = "Who designed the lighthouse?";

#[tokio::main(flavor = "current_thread")]
async fn main() -> bertqa::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, model, data, out]: [String; 4] = args.try_into().unwrap_or_else(|_| {
        eprintln!("usage: client_text URL MODEL DATA OUT_DIR");
        std::process::exit(2)
    });
    let client = Client::builder(url).model(model).build().await?;
    let answer = client.ask(QUESTION, CONTEXT).await?;
    let evaluation = client.evaluate(&Dataset::open(data)?).await?;
    evaluation.write_files(&out)?;
    common::print_line(&answer, &evaluation);
    Ok(())
}
