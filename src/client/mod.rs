//! A client that a program holds: built once from a URL and the settings the command
//! line's flags give, it connects, looks at the model and loads the tokenizer once; then
//! it answers questions ([`Client::ask`], [`Client::ask_many`]) and evaluates datasets
//! ([`Client::evaluate`]) as `bertqa ask` and `bertqa eval` do, answers and files alike.
//!
//! ```no_run
//! # async fn example() -> bertqa::Result<()> {
//! let client = bertqa::Client::builder("localhost:8001")
//!     .model("bert")
//!     .vocab("vocab/vocab.txt")
//!     .build()
//!     .await?;
//! let answer = client
//!     .ask("Who designed the lighthouse?", "The lighthouse was designed by Ada Byron.")
//!     .await?;
//! println!("{} ({:?})", answer.text, answer.probability);
//! let evaluation = client.evaluate(&bertqa::Dataset::open("dev-v2.0.json")?).await?;
//! println!("EM {:.2}, F1 {:.2}", evaluation.metrics.exact(), evaluation.metrics.f1());
//! # Ok(())
//! # }
//! ```
//!
//! [`crate::blocking::Client`] has the same methods for a program without an async
//! runtime.
//!
//! Contract:
//! - The async client runs on the caller's runtime: [`ClientBuilder::build`] connects
//!   on the runtime that awaits it, and each method is a future of that runtime. A call
//!   of a handful of questions does its work as the future is polled (its windows
//!   built and its answers decoded in between the requests, a fraction of a
//!   millisecond); a larger one runs where tokio puts blocking work
//!   (`spawn_blocking`), its windows built and answers decoded on the run's own stage
//!   threads, so the caller's executor is never held up. Dropping a call's future
//!   stops its run.
//! - [`crate::blocking::Client`] owns one runtime (one thread, on which its connections
//!   live); its calls run on the calling thread.
//! - A client is cheap to clone (the clones share the connections) and may be used from
//!   several tasks or threads at once; each call is a run of its own.
//! - The model decides what a question needs: a token model gets windows cut by the
//!   tokenizer (BERT's vocabulary and run_squad's rules, or a `tokenizer.json` and
//!   run_qa's rules); a text model is sent the text (the vocabulary is read only for a
//!   logits-contract model, whose answers are decoded here).

mod answer;
pub mod blocking;
mod builder;
mod compare;
mod evaluate;
mod tokenizer;

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::backend::{Model, Pool, SharedMemory, TextReply};
use crate::error::{Error, Result};
use crate::evaluation::{EvalData, EvalOptions};
use crate::pipeline::{Run, RunConfig, RunObserver, RunOutcome};
use crate::report::ask::AskReport;
use crate::types::{Dataset, Example};

pub use crate::evaluation::Evaluation;
pub use answer::{Answer, Candidate};
pub(crate) use builder::TokenSetting;
pub use builder::{Async, Blocking, ClientBuilder};
pub use compare::{compare_deployments, CompareOptions, Compared, Deployment};
pub use tokenizer::{load_tokenizer, LoadedTokenizer};

/// A connection to one model on one or more servers (async).
#[derive(Clone)]
pub struct Client {
    engine: Arc<Engine>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("model", &self.engine.model.name())
            .field("urls", &self.engine.urls)
            .finish()
    }
}

impl Client {
    /// A builder for a client of the server at `url` (`HOST:PORT`, `http://` or
    /// `https://` accepted; more servers with [`ClientBuilder::url`]).
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(url.into())
    }

    /// The model as it was bound: a token model's tensors, or a text model's contract.
    pub fn model(&self) -> &Model {
        &self.engine.model
    }

    /// The answer to `question` about `context`.
    pub async fn ask(&self, question: &str, context: &str) -> Result<Answer> {
        let mut answers = self.ask_many([(question, context)]).await?;
        Ok(answers.remove(0))
    }

    /// The answers to many questions, each with its context, in order: batched and kept
    /// in flight as an evaluation sends them.
    pub async fn ask_many<Q: AsRef<str>, C: AsRef<str>>(
        &self,
        questions: impl IntoIterator<Item = (Q, C)>,
    ) -> Result<Vec<Answer>> {
        self.ask_many_with(questions, &AskOptions::default()).await
    }

    /// [`ask_many`](Self::ask_many) with settings of this call's own (the rest are the
    /// client's).
    pub async fn ask_many_with<Q: AsRef<str>, C: AsRef<str>>(
        &self,
        questions: impl IntoIterator<Item = (Q, C)>,
        options: &AskOptions,
    ) -> Result<Vec<Answer>> {
        let dataset = dataset_of(questions);
        if crate::pipeline::in_turn(&dataset) {
            return self.engine.ask_in_turn(&dataset, options).await;
        }
        let (engine, options) = (self.engine.clone(), options.clone());
        off_the_executor(move |handle, stop| {
            engine.ask(Driving::Handle(&handle), &dataset, &options, stop)
        })
        .await
    }

    /// `bertqa ask`'s report of `questions` about one `context`: each answer as the
    /// model's answers are read (decoded spans with their first `candidates` n-best
    /// entries, or an answer-contract model's own answer as it said it), the windows or
    /// requests sent, their latency, and notes on the run. At least one question.
    pub async fn ask_report<Q: AsRef<str>>(
        &self,
        questions: impl IntoIterator<Item = Q>,
        context: &str,
        options: &AskOptions,
        candidates: usize,
    ) -> Result<AskReport> {
        let dataset = dataset_of(questions.into_iter().map(|q| (q, context)));
        no_question(&dataset)?;
        if crate::pipeline::in_turn(&dataset) {
            let asked = self.engine.ask_run_in_turn(&dataset, options).await?;
            return Ok(self.engine.ask_report(&dataset, asked, candidates));
        }
        let (engine, options) = (self.engine.clone(), options.clone());
        off_the_executor(move |handle, stop| {
            let asked = engine.ask_run(Driving::Handle(&handle), &dataset, &options, stop)?;
            Ok(engine.ask_report(&dataset, asked, candidates))
        })
        .await
    }

    /// What building the client found worth a warning (a vocabulary whose casing does
    /// not look like `lower_case`'s), naming settings as messages do.
    pub fn warnings(&self) -> &[String] {
        &self.engine.warnings
    }

    /// Runs every question of `dataset` and scores the answers as the official scripts
    /// do. SQuAD 2.0's rules apply when set, or when the data looks like 2.0.
    pub async fn evaluate(&self, dataset: &Dataset) -> Result<Evaluation> {
        let dataset = dataset.clone();
        let engine = self.engine.clone();
        off_the_executor(move |handle, stop| {
            engine.evaluate(Driving::Handle(&handle), &dataset, stop)
        })
        .await
    }

    /// Evaluates `data` as `bertqa eval` does, with what `options` asks for besides: the
    /// files written into its output directory, a journal to resume from, saved logits,
    /// the HTML page, gates and the server's metrics (see [`crate::evaluation`]). A run
    /// that stops or fails writes its partial results and ends as
    /// [`Error::Incomplete`].
    pub async fn evaluate_with(
        &self,
        data: &EvalData,
        options: &EvalOptions,
    ) -> Result<Evaluation> {
        let (data, options) = (data.clone(), options.clone());
        let engine = self.engine.clone();
        let stop = options.stop.clone();
        off_the_executor_under(stop, move |handle, stop| {
            engine.evaluate_with(Driving::Handle(&handle), &data, &options, stop)
        })
        .await
    }

    pub(crate) fn from_engine(engine: Engine) -> Client {
        Client {
            engine: Arc::new(engine),
        }
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }
}

/// Settings of one `ask` call that differ from the client's (`None`: the client's).
/// The window settings apply to models that take token ids (a text model's server cuts
/// its own windows).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AskOptions {
    /// Candidates kept per question.
    pub n_best_size: Option<usize>,
    /// Longest answer, in tokens.
    pub max_answer_length: Option<usize>,
    /// Tokens per window.
    pub max_seq_length: Option<usize>,
    /// Step between window starts.
    pub doc_stride: Option<usize>,
    /// Question tokens kept.
    pub max_query_length: Option<usize>,
    /// SQuAD 2.0's rules: the answer may be that there is none.
    pub version_2_with_negative: Option<bool>,
}

impl AskOptions {
    fn changes_windows(&self) -> bool {
        self.max_seq_length.is_some()
            || self.doc_stride.is_some()
            || self.max_query_length.is_some()
    }
}

/// What a client holds once built: the connections, the bound model, the tokenizer
/// and the resolved settings.
pub(crate) struct Engine {
    pub(crate) pool: Pool,
    pub(crate) model: Model,
    pub(crate) urls: Vec<String>,
    /// The servers as they were given, comma-joined: how `ask`'s report names them.
    pub(crate) given_urls: String,
    /// The server settings (TLS, timeouts) of the first URL, for its other pages.
    pub(crate) server: crate::backend::ClientConfig,
    /// What building the client warned of ([`Client::warnings`]).
    pub(crate) warnings: Vec<String>,
    pub(crate) tokenizer: Option<LoadedTokenizer>,
    pub(crate) settings: builder::Resolved,
}

impl Engine {
    /// The run's configuration for `dataset` (SQuAD 2.0 as set, else as the data looks).
    pub(crate) fn config(&self, version_2: bool) -> Result<RunConfig> {
        self.config_with(version_2, &AskOptions::default())
    }

    /// [`config`](Self::config) with one call's own settings.
    fn config_with(&self, version_2: bool, options: &AskOptions) -> Result<RunConfig> {
        let mut decode = self.settings.decode.clone();
        decode.version_2_with_negative = options.version_2_with_negative.unwrap_or(version_2);
        decode.n_best_size = options.n_best_size.unwrap_or(decode.n_best_size);
        decode.max_answer_length = options
            .max_answer_length
            .unwrap_or(decode.max_answer_length);
        let mut features = self.settings.features;
        features.max_seq_length = options.max_seq_length.unwrap_or(features.max_seq_length);
        features.doc_stride = options.doc_stride.unwrap_or(features.doc_stride);
        features.max_query_length = options
            .max_query_length
            .unwrap_or(features.max_query_length);
        if options.changes_windows() {
            features.validate_for(decode.postprocess)?;
        }
        RunConfig::resolve(&self.model, &self.settings.load, features, decode)
    }

    /// A run of `dataset` with the client's connections, model and tokenizer.
    pub(crate) fn new_run<'r>(
        &'r self,
        drive: Driving<'r>,
        dataset: &'r Dataset,
        config: &'r RunConfig,
        observer: &'r dyn RunObserver,
    ) -> Run<'r, Pool> {
        let model = self.model.clone();
        let run = match drive {
            Driving::Runtime(r) => Run::new(r, &self.pool, model, dataset, config),
            Driving::Handle(h) => Run::on_handle(h, &self.pool, model, dataset, config),
        };
        let mut run = run.observer(observer);
        if let Some(t) = &self.tokenizer {
            run = run.tokenizer(&t.tokenizer);
        }
        run
    }

    /// Answers `dataset`'s questions under `options`, blocking this thread (no runtime's:
    /// the requests are kept in flight through `handle`); `stop` cancels the run.
    pub(crate) fn ask(
        &self,
        drive: Driving<'_>,
        dataset: &Dataset,
        options: &AskOptions,
        stop: CancellationToken,
    ) -> Result<Vec<Answer>> {
        if dataset.examples.is_empty() {
            return Ok(Vec::new());
        }
        let (outcome, given) = self.ask_run(drive, dataset, options, stop)?;
        Ok(self.answers(dataset, &outcome, given))
    }

    /// [`ask`](Self::ask) of a run [in turn](crate::pipeline::in_turn), as a future of
    /// the runtime that awaits it.
    async fn ask_in_turn(&self, dataset: &Dataset, options: &AskOptions) -> Result<Vec<Answer>> {
        if dataset.examples.is_empty() {
            return Ok(Vec::new());
        }
        let (outcome, given) = self.ask_run_in_turn(dataset, options).await?;
        Ok(self.answers(dataset, &outcome, given))
    }

    /// The run of an `ask` call of `dataset` (at least one question), blocking this
    /// thread as [`ask`](Self::ask) does.
    pub(crate) fn ask_run(
        &self,
        drive: Driving<'_>,
        dataset: &Dataset,
        options: &AskOptions,
        stop: CancellationToken,
    ) -> Result<Asked> {
        let config = self.ask_config(options)?;
        let replies = TextAnswers::new(dataset.examples.len());
        let outcome = self
            .new_run(drive, dataset, &config, &replies)
            .stop_on(stop)
            .run()?;
        Ok((outcome, replies.take()))
    }

    /// [`ask_run`](Self::ask_run) [in turn](crate::pipeline::in_turn), as a future of
    /// the runtime that awaits it.
    async fn ask_run_in_turn(&self, dataset: &Dataset, options: &AskOptions) -> Result<Asked> {
        let config = self.ask_config(options)?;
        let replies = TextAnswers::new(dataset.examples.len());
        let handle = tokio::runtime::Handle::current();
        let run = self.new_run(Driving::Handle(&handle), dataset, &config, &replies);
        let outcome = run.run_in_turn().await.complete(dataset)?;
        Ok((outcome, replies.take()))
    }

    /// `ask`'s report of a run of `dataset`'s questions ([`Client::ask_report`]).
    pub(crate) fn ask_report(
        &self,
        dataset: &Dataset,
        (outcome, replies): Asked,
        candidates: usize,
    ) -> AskReport {
        use crate::report::ask::{Answer as Shown, Decoded, Given, Latency};
        let latency = &outcome.infer.latency_us;
        let latency_ms = Latency {
            max: latency.max() as f64 / 1000.0,
            mean: latency.mean() / 1000.0,
        };
        let questions = dataset.examples.iter().map(|e| e.question_text.as_str());
        // An answer-contract model's answers are given as it said them.
        let given = self
            .model
            .answers_given()
            .then(|| self.model.no_answer_probability());
        let answers: Vec<Shown> = match given {
            Some(probability) => replies
                .into_iter()
                .zip(questions)
                .map(|(a, q)| Shown::Given(Given::of(q, a.unwrap_or_default(), probability)))
                .collect(),
            None => outcome
                .predictions
                .iter()
                .zip(&dataset.examples)
                .map(|(p, e)| {
                    let paragraph = &dataset.paragraphs[e.paragraph_index];
                    let a = Answer::from_prediction(p, paragraph, &outcome);
                    Shown::Decoded(Decoded::of(&e.question_text, a, candidates))
                })
                .collect(),
        };
        AskReport {
            schema: 1,
            model: self.model.name().to_string(),
            url: self.given_urls.clone(),
            protocol: self.pool.first_client().protocol().as_str(),
            contract: given.map(|_| "answer"),
            requests: given.map(|_| outcome.infer.requests),
            features: given.is_none().then_some(outcome.features),
            latency_ms,
            answers,
            notes: outcome
                .infer
                .padding
                .note(self.model.name())
                .into_iter()
                .collect(),
        }
    }

    /// The run's configuration of an `ask` call.
    fn ask_config(&self, options: &AskOptions) -> Result<RunConfig> {
        let version_2 = self.settings.version_2.unwrap_or(false);
        let mut config = self.config_with(version_2, options)?;
        // A few requests gain less from shared memory than registering a region costs.
        if self.settings.load.shared_memory == SharedMemory::Auto {
            config.infer.shared_memory = SharedMemory::None;
        }
        config.keep_features = true;
        Ok(config)
    }

    /// The answers of an `ask` run: the decoded predictions, or what an answer-contract
    /// model said (`given`, by question).
    fn answers(
        &self,
        dataset: &Dataset,
        outcome: &RunOutcome,
        given: Vec<Option<crate::backend::TextAnswer>>,
    ) -> Vec<Answer> {
        let no_answer_probability = self.model.no_answer_probability();
        outcome
            .predictions
            .iter()
            .zip(&dataset.examples)
            .zip(given)
            .map(|((p, e), given)| match given {
                Some(a) => {
                    let mut answer = Answer::from_text_answer(&e.qas_id, a, no_answer_probability);
                    // SQuAD 2.0's rule, as an evaluation applies it, said there is none.
                    if p.answer.is_empty() && !answer.text.is_empty() {
                        answer.text.clear();
                        answer.no_answer = true;
                        (answer.start_char, answer.end_char) = (None, None);
                    }
                    answer
                }
                None => Answer::from_prediction(p, &dataset.paragraphs[e.paragraph_index], outcome),
            })
            .collect()
    }

    /// Evaluates `dataset`; `stop` cancels the run.
    pub(crate) fn evaluate(
        &self,
        drive: Driving<'_>,
        dataset: &Dataset,
        stop: CancellationToken,
    ) -> Result<Evaluation> {
        evaluate::evaluate(self, drive, dataset, stop)
    }

    /// Evaluates `data` with `options`; `stop` cancels the run (as does the options').
    pub(crate) fn evaluate_with(
        &self,
        drive: Driving<'_>,
        data: &EvalData,
        options: &EvalOptions,
        stop: CancellationToken,
    ) -> Result<Evaluation> {
        evaluate::evaluate_with(self, drive, data, options, stop)
    }
}

/// What an `ask` run gives: its outcome, and what an answer-contract model said of each
/// question (by question; `None` for another model).
pub(crate) type Asked = (RunOutcome, Vec<Option<crate::backend::TextAnswer>>);

/// A report of no question is an error (an answer list may be empty, a report not).
pub(crate) fn no_question(dataset: &Dataset) -> Result<()> {
    match dataset.examples.is_empty() {
        true => Err(Error::Empty("no question to ask".into())),
        false => Ok(()),
    }
}

/// Runs `work` where the awaiting runtime runs blocking work, with that runtime's
/// handle, and awaits its result: a run of many questions builds windows and decodes on
/// threads, which must not hold up the caller's executor. The token given to `work` is
/// cancelled when this future is dropped (a timeout, an abandoned task): the run stops
/// instead of going on unseen.
async fn off_the_executor<T: Send + 'static>(
    work: impl FnOnce(tokio::runtime::Handle, CancellationToken) -> Result<T> + Send + 'static,
) -> Result<T> {
    off_the_executor_under(None, work).await
}

/// [`off_the_executor`], the run's token a child of `parent` (a caller's own token):
/// cancelling that stops the run too.
async fn off_the_executor_under<T: Send + 'static>(
    parent: Option<CancellationToken>,
    work: impl FnOnce(tokio::runtime::Handle, CancellationToken) -> Result<T> + Send + 'static,
) -> Result<T> {
    let stop = parent.map_or_else(CancellationToken::new, |p| p.child_token());
    let _cancel_when_dropped = stop.clone().drop_guard();
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || work(handle, stop))
        .await
        .map_err(|e| task_failed("a run", e))?
}

/// What drives a call's connections: a current-thread runtime, driven by the calling
/// thread in its `block_on`, or the handle of a runtime another thread drives.
#[derive(Clone, Copy)]
pub(crate) enum Driving<'a> {
    Runtime(&'a tokio::runtime::Runtime),
    Handle(&'a tokio::runtime::Handle),
}

impl Driving<'_> {
    /// Runs `future` to its end on this thread, the connections driven meanwhile.
    pub(crate) fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        match self {
            Driving::Runtime(r) => r.block_on(future),
            Driving::Handle(h) => h.block_on(future),
        }
    }
}

/// The error of a task of the client's that did not finish.
fn task_failed(task: &str, e: tokio::task::JoinError) -> Error {
    Error::TaskFailed {
        task: task.into(),
        panicked: e.is_panic(),
        message: e.to_string(),
    }
}

/// The in-memory dataset of questions, each with its context (ids `q1`, `q2`, … in
/// order; a context given again is one paragraph).
pub(crate) fn dataset_of<Q: AsRef<str>, C: AsRef<str>>(
    questions: impl IntoIterator<Item = (Q, C)>,
) -> Dataset {
    let mut dataset = Dataset::default();
    let mut contexts: Vec<String> = Vec::new();
    for (i, (q, c)) in questions.into_iter().enumerate() {
        let c = c.as_ref();
        let paragraph_index = match contexts.iter().position(|k| k == c) {
            Some(k) => k,
            None => {
                contexts.push(c.to_string());
                dataset.paragraphs.push(crate::squad::split_context(c));
                contexts.len() - 1
            }
        };
        dataset.examples.push(Example {
            example_index: i,
            qas_id: format!("q{}", i + 1),
            question_text: q.as_ref().to_string(),
            paragraph_index,
            answers: Vec::new(),
            is_impossible: false,
        });
    }
    dataset
}

/// A run's observer that keeps what an answer-contract model said of each question (its
/// own answer, score, no-answer output and characters, beyond the decoded prediction).
#[derive(Debug)]
pub(crate) struct TextAnswers(Mutex<Vec<Option<crate::backend::TextAnswer>>>);

impl TextAnswers {
    /// Room for `questions` answers, by question index.
    pub(crate) fn new(questions: usize) -> Self {
        TextAnswers(Mutex::new(vec![None; questions]))
    }

    /// The answers kept, by question index (`None`: the model gave none, or is not of
    /// the answer contract).
    pub(crate) fn take(&self) -> Vec<Option<crate::backend::TextAnswer>> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl RunObserver for TextAnswers {
    fn on_reply(&self, example_index: usize, reply: &TextReply) -> Result<()> {
        if let TextReply::Answer(a) = reply {
            let mut answers = self.0.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(slot) = answers.get_mut(example_index) {
                *slot = Some(a.clone());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call's future can be spawned on a multi-thread runtime (`tokio::spawn`): the
    /// compiler checks it is `Send`.
    #[allow(dead_code)]
    fn calls_can_be_spawned(client: &Client, dataset: &Dataset) {
        fn send<T: Send>(_: T) {}
        send(client.ask("q", "c"));
        send(client.ask_many([("q", "c")]));
        send(client.evaluate(dataset));
        send(ClientBuilder::<Async>::new("u".into()).build());
    }

    #[test]
    fn questions_about_one_context_share_its_paragraph() {
        let d = dataset_of([("a?", "one"), ("b?", "two"), ("c?", "one")]);
        assert_eq!(d.paragraphs.len(), 2);
        let at: Vec<(usize, &str)> = d
            .examples
            .iter()
            .map(|e| (e.paragraph_index, e.qas_id.as_str()))
            .collect();
        assert_eq!(at, [(0, "q1"), (1, "q2"), (0, "q3")]);
    }
}
