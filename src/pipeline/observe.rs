//! Observers of a run: what the outside sees of a run as it goes (a progress display,
//! a journal of the answers and of the padding decision, the n-best lists streamed out
//! as questions are decoded). The run calls them from its stages' threads, so they
//! take `&self` and are `Sync`; every method does nothing unless implemented.

use crate::backend::text::TextReply;
use crate::decode::{Prediction, Scores};
use crate::error::Result;

/// What an observer reads of each answer the server returns ([`RunObserver::on_answer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AnswerNeeds {
    /// Nothing: `on_answer` is not called.
    #[default]
    Nothing,
    /// The candidates where they stand for the logits
    /// ([`crate::journal::stands_alone`] for the run's n-best size: a journal writing
    /// compact records), the logits otherwise.
    Candidates,
    /// Every feature's logits.
    Logits,
}

/// Sees a run as it goes.
pub trait RunObserver: Sync {
    /// `n` more features were built (the total grows while building); for a text
    /// model, `n` more questions are to be asked.
    fn built(&self, _n: u64) {}

    /// `n` more features (a text model's questions) were answered (by the server, or
    /// known beforehand).
    fn answered(&self, _n: u64) {}

    /// What [`RunObserver::on_answer`] reads.
    fn answer_needs(&self) -> AnswerNeeds {
        AnswerNeeds::Nothing
    }

    /// A feature's answer as the server returned it (its logits, with their candidates
    /// for the run's n-best size when ranked, or the candidates alone, see
    /// [`AnswerNeeds`]), before it is decoded (e.g. appended to a journal). An error
    /// stops the run like a server error.
    fn on_answer(&self, _scores: &Scores) -> Result<()> {
        Ok(())
    }

    /// What a text model said about question `example_index` (its windows and offsets,
    /// or its answer), before it is decoded (e.g. appended to a journal). An error stops
    /// the run like a server error.
    fn on_reply(&self, _example_index: usize, _reply: &TextReply) -> Result<()> {
        Ok(())
    }

    /// The padding probe decided (true: dynamic padding, false: the full length); see
    /// [`super::PaddingGuard`]. An error stops the run like a server error.
    fn on_padding_decided(&self, _dynamic: bool) -> Result<()> {
        Ok(())
    }

    /// A question was decoded (its index in the dataset), before its prediction is kept
    /// (e.g. to stream its n-best list out, [`crate::decode::NbestStream`]).
    fn on_decoded(&self, _example_index: usize, _prediction: &mut Prediction) {}
}

/// Observes nothing (no progress display, no journal).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;
impl RunObserver for NoProgress {}
