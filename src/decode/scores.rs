//! What one answered feature carries into decoding (and into the journal): its logits,
//! or only their candidates.

use super::Candidates;
use crate::types::Logits;

/// A feature's answer as it is kept: the logits the server returned (with their
/// candidates when they were ranked), or the candidates alone, where they stand for the
/// logits and the logits were never copied out of the response or were dropped once
/// ranked.
#[derive(Debug, Clone, PartialEq)]
pub enum Scores {
    /// The logits, and their candidates when ranked.
    Logits {
        logits: Logits,
        candidates: Option<Candidates>,
    },
    /// Only the candidates of feature `unique_id`'s logits.
    Candidates {
        unique_id: u64,
        candidates: Candidates,
    },
}

impl Scores {
    /// Logits without candidates.
    pub fn of_logits(logits: Logits) -> Scores {
        Scores::Logits {
            logits,
            candidates: None,
        }
    }

    /// The feature they belong to.
    pub fn unique_id(&self) -> u64 {
        match self {
            Scores::Logits { logits, .. } => logits.unique_id,
            Scores::Candidates { unique_id, .. } => *unique_id,
        }
    }

    /// The logits, when kept.
    pub fn logits(&self) -> Option<&Logits> {
        match self {
            Scores::Logits { logits, .. } => Some(logits),
            Scores::Candidates { .. } => None,
        }
    }

    /// The candidates, when ranked.
    pub fn candidates(&self) -> Option<&Candidates> {
        match self {
            Scores::Logits { candidates, .. } => candidates.as_ref(),
            Scores::Candidates { candidates, .. } => Some(candidates),
        }
    }

    /// The logits, when kept.
    pub fn into_logits(self) -> Option<Logits> {
        match self {
            Scores::Logits { logits, .. } => Some(logits),
            Scores::Candidates { .. } => None,
        }
    }

    /// The candidates alone where there are some (the logits dropped); as they are
    /// otherwise.
    pub fn without_logits(self) -> Scores {
        match self {
            Scores::Logits {
                logits,
                candidates: Some(candidates),
            } => Scores::Candidates {
                unique_id: logits.unique_id,
                candidates,
            },
            other => other,
        }
    }
}
