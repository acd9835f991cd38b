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

use super::{Answer, Evaluation};
use crate::error::Result;
use crate::types::Dataset;

/// A connection to one model on one or more servers (blocking). Cheap to clone; usable
/// from several threads at once.
#[derive(Debug, Clone)]
pub struct Client {
    inner: super::Client,
}

/// The settings of a blocking [`Client`]: the async builder's methods, and a `build`
/// that blocks.
pub type ClientBuilder = super::ClientBuilder<super::Blocking>;

impl Client {
    /// A builder for a client of the server at `url` (see [`crate::Client::builder`]).
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(url.into())
    }

    pub(crate) fn new(inner: super::Client) -> Client {
        Client { inner }
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
        self.inner
            .engine()
            .ask(&dataset, options, Default::default())
    }

    /// Runs and scores every question of `dataset` (see [`crate::Client::evaluate`]).
    pub fn evaluate(&self, dataset: &Dataset) -> Result<Evaluation> {
        outside_a_runtime()?;
        self.inner.engine().evaluate(dataset, Default::default())
    }

    /// The async client over the same connections.
    pub fn as_async(&self) -> &super::Client {
        &self.inner
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
