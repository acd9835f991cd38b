//! [`Client`]: the async [`crate::Client`]'s methods, blocking the calling thread (as
//! reqwest's `blocking` module does). Not for use inside an async runtime's task: there,
//! hold the async client.
//!
//! ```no_run
//! # fn main() -> bertqa::Result<()> {
//! let client = bertqa::blocking::Client::builder("localhost:8001")
//!     .model("bert")
//!     .vocab("vocab/vocab.txt")
//!     .build()?;
//! let answer = client.ask("Who designed it?", "It was designed by Ada Byron.")?;
//! println!("{}", answer.text);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use super::{Answer, Evaluation};
use crate::error::Result;
use crate::types::Dataset;

/// A connection to one model on one or more servers (blocking). Cheap to clone; usable
/// from several threads at once. It owns the runtime its connections live on (one
/// thread); a call runs on the calling thread.
#[derive(Debug, Clone)]
pub struct Client {
    inner: super::Client,
    runtime: Arc<OwnedRuntime>,
}

/// The blocking client's runtime: one worker thread that keeps the connections and the
/// requests in flight. Shut down without waiting when the last clone goes (a runtime
/// cannot be dropped where blocking is not allowed, as in an async caller's task).
/// Without a thread of its own (`io_thread(false)`): a current-thread runtime that the
/// calling thread drives while a call runs.
#[derive(Debug)]
pub(crate) struct OwnedRuntime(Option<tokio::runtime::Runtime>, bool);

impl OwnedRuntime {
    pub(crate) fn start(io_thread: bool) -> Result<OwnedRuntime> {
        let mut builder = match io_thread {
            true => tokio::runtime::Builder::new_multi_thread(),
            false => tokio::runtime::Builder::new_current_thread(),
        };
        if io_thread {
            builder.worker_threads(1).thread_name("bertqa-client");
        }
        builder
            .enable_all()
            .build()
            .map(|r| OwnedRuntime(Some(r), io_thread))
            .map_err(|e| crate::Error::system("the client's runtime", e))
    }

    /// What drives a call's connections: the calling thread itself without a thread of
    /// the runtime's own.
    pub(crate) fn driving(&self) -> super::Driving<'_> {
        match self.1 {
            true => super::Driving::Handle(self.handle()),
            false => super::Driving::Runtime(self.runtime()),
        }
    }

    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        self.runtime().handle()
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.0
            .as_ref()
            .expect("the runtime lives as long as the client")
    }

    pub(crate) fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime().block_on(future)
    }
}

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The settings of a blocking [`Client`]: the async builder's methods, and a `build`
/// that blocks.
pub type ClientBuilder = super::ClientBuilder<super::Blocking>;

impl Client {
    /// A builder for a client of the server at `url` (see [`crate::Client::builder`]).
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(url.into())
    }

    /// The engine of the client, and the handle of the runtime its connections live on.
    pub(crate) fn parts(&self) -> (&super::Engine, super::Driving<'_>) {
        (self.inner.engine(), self.runtime.driving())
    }

    pub(crate) fn new(inner: super::Client, runtime: OwnedRuntime) -> Client {
        Client {
            inner,
            runtime: Arc::new(runtime),
        }
    }

    /// The model as it was bound.
    pub fn model(&self) -> &crate::backend::Model {
        self.inner.model()
    }

    /// The answer to `question` about `context`.
    pub fn ask(&self, question: &str, context: &str) -> Result<Answer> {
        let mut answers = self.ask_many([(question, context)])?;
        Ok(answers.remove(0))
    }

    /// The answers to many questions, each with its context, in order.
    pub fn ask_many<Q: AsRef<str>, C: AsRef<str>>(
        &self,
        questions: impl IntoIterator<Item = (Q, C)>,
    ) -> Result<Vec<Answer>> {
        self.ask_many_with(questions, &super::AskOptions::default())
    }

    /// [`ask_many`](Self::ask_many) with settings of this call's own (the rest are the
    /// client's).
    pub fn ask_many_with<Q: AsRef<str>, C: AsRef<str>>(
        &self,
        questions: impl IntoIterator<Item = (Q, C)>,
        options: &super::AskOptions,
    ) -> Result<Vec<Answer>> {
        outside_a_runtime()?;
        let dataset = super::dataset_of(questions);
        self.inner.engine().ask(
            self.runtime.driving(),
            &dataset,
            options,
            Default::default(),
        )
    }

    /// `bertqa ask`'s report of `questions` about one `context` (see
    /// [`crate::Client::ask_report`]).
    pub fn ask_report<Q: AsRef<str>>(
        &self,
        questions: impl IntoIterator<Item = Q>,
        context: &str,
        options: &super::AskOptions,
        candidates: usize,
    ) -> Result<crate::report::ask::AskReport> {
        outside_a_runtime()?;
        let dataset = super::dataset_of(questions.into_iter().map(|q| (q, context)));
        super::no_question(&dataset)?;
        let engine = self.inner.engine();
        let asked = engine.ask_run(
            self.runtime.driving(),
            &dataset,
            options,
            Default::default(),
        )?;
        Ok(engine.ask_report(&dataset, asked, candidates))
    }

    /// What building the client found worth a warning (see
    /// [`crate::Client::warnings`]).
    pub fn warnings(&self) -> &[String] {
        self.inner.warnings()
    }

    /// Runs and scores every question of `dataset` (see [`crate::Client::evaluate`]).
    pub fn evaluate(&self, dataset: &Dataset) -> Result<Evaluation> {
        outside_a_runtime()?;
        self.inner
            .engine()
            .evaluate(self.runtime.driving(), dataset, Default::default())
    }

    /// Evaluates `data` with what `options` asks for besides (see
    /// [`crate::Client::evaluate_with`]).
    pub fn evaluate_with(
        &self,
        data: &crate::evaluation::EvalData,
        options: &crate::evaluation::EvalOptions,
    ) -> Result<Evaluation> {
        outside_a_runtime()?;
        let stop = options.stop.clone().unwrap_or_default();
        self.inner
            .engine()
            .evaluate_with(self.runtime.driving(), data, options, stop)
    }

    /// The async client over the same connections. Its calls' futures are driven by
    /// [`block_on`](Self::block_on) (or by any runtime: the connections stay this
    /// client's).
    pub fn as_async(&self) -> &super::Client {
        &self.inner
    }

    /// Drives `future` (say a call of [`as_async`](Self::as_async)'s) to its end on this
    /// client's runtime, blocking the calling thread: for a host that waits in slices
    /// (a timeout around the call, to look for its own interrupts in between) and drops
    /// the call to stop it.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.driving().block_on(future)
    }
}

/// A blocking call drives the client's runtime from the calling thread, which an async
/// runtime's thread must not do: there it is an error, not tokio's panic.
pub(crate) fn outside_a_runtime() -> Result<()> {
    match tokio::runtime::Handle::try_current() {
        Ok(_) => Err(crate::Error::Config(
            "the blocking client cannot run inside an async runtime: use bertqa::Client there"
                .into(),
        )),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn inside_a_runtime_the_blocking_client_is_an_error() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let built = rt.block_on(async { super::Client::builder("127.0.0.1:1").model("m").build() });
        let e = built.unwrap_err();
        assert!(e.to_string().contains("inside an async runtime"), "{e}");
    }
}
