//! A token model through the blocking client: BERT's vocabulary, run_squad's rules.
//!
//! Usage: `client_token URL MODEL VOCAB DATA OUT_DIR`. Asks one question, evaluates DATA,
//! writes the reference's files into OUT_DIR and prints one JSON line: the answer, the
//! exact match and F1, and every prediction.

mod common;

use bertqa::blocking::Client;
use bertqa::Dataset;

const CONTEXT: &str = "The lighthouse at Varne Point was designed by Ada Byron in 1851.";
const QUESTION: &str = "Who designed the lighthouse?";

fn main() -> bertqa::Result<()> {
    let [url, model, vocab, data, out] = args();
    let client = Client::builder(url).model(model).vocab(vocab).build()?;
    let answer = client.ask(QUESTION, CONTEXT)?;
    let evaluation = client.evaluate(&Dataset::open(data)?)?;
    evaluation.write_files(&out)?;
    common::print_line(&answer, &evaluation);
    Ok(())
}

fn args<const N: usize>() -> [String; N] {
    let args: Vec<String> = std::env::args().skip(1).collect();
    args.try_into().unwrap_or_else(|_| {
        eprintln!("usage: client_token URL MODEL VOCAB DATA OUT_DIR");
        std::process::exit(2)
    })
}
