//! Between the stages, on the runtime: the gate that feeds the dispatch stage until the
//! run is stopped, and the collector that hands each event to the run's observer and
//! the answers on to the decoder.

use std::sync::mpsc as std_mpsc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::decode::ToDecoder;
use super::dispatch::{Answer, RunEvent};
use super::observe::{AnswerNeeds, RunObserver};
use crate::backend::text::TextReply;
use crate::error::Error;

/// Events the collector gathers before handing the answers to the decoder (fewer when
/// the events end).
const FORWARD_MIN: usize = 64;

/// Events the collector takes from its channel at a time.
const FORWARD_CHUNK: usize = 256;

/// What the collector saw.
#[derive(Default)]
pub(super) struct Collected {
    /// Features (a text model's questions) answered by the server.
    pub answered: u64,
    /// The observer's error that stopped the run.
    pub error: Option<Error>,
}

/// Hands each event to `observer` and each answer on to the decoder; on an observer's
/// error, closes the gate (`cancel`) and stops.
pub(super) async fn collect(
    mut events: mpsc::Receiver<RunEvent>,
    observer: &dyn RunObserver,
    keep_logits: bool,
    to_decoder: std_mpsc::Sender<ToDecoder>,
    cancel: CancellationToken,
) -> Collected {
    let records = observer.answer_needs() != AnswerNeeds::Nothing;
    let mut out = Collected::default();
    let mut gathered: Vec<RunEvent> = Vec::with_capacity(FORWARD_CHUNK);
    // A text model's replies recorded and not yet handed to the decoder: they go a few
    // at a time, as answers do (each message wakes the decoder thread).
    let mut held: Vec<(usize, TextReply)> = Vec::new();
    let mut open = true;
    while open {
        // A few requests' answers per message: each message wakes the decoder thread
        // (at --batch-size 8, once per request otherwise).
        // A text model's replies (a question's windows each, few and large) go on at
        // once: they are journaled as they come.
        let mut replies = false;
        while open && gathered.len() < FORWARD_MIN && !replies {
            let (room, from) = (FORWARD_CHUNK - gathered.len(), gathered.len());
            open = events.recv_many(&mut gathered, room).await > 0;
            replies = gathered[from..]
                .iter()
                .any(|e| matches!(e, RunEvent::Replies(_)));
        }
        if gathered.is_empty() {
            break;
        }
        // The padding decision goes to the observer before the answers gathered with it.
        let decided = gathered.iter().find_map(|e| match e {
            RunEvent::PaddingDecided { dynamic } => Some(*dynamic),
            RunEvent::Answer(_) | RunEvent::Replies(_) => None,
        });
        if let Some(dynamic) = decided {
            if let Err(e) = observer.on_padding_decided(dynamic) {
                out.error = Some(e);
                cancel.cancel();
                break;
            }
        }
        let mut replies: Vec<(usize, TextReply)> = Vec::new();
        let answers = gathered.drain(..).filter_map(|e| match e {
            RunEvent::Answer(a) => Some(a),
            RunEvent::Replies(r) => {
                replies.extend(r);
                None
            }
            RunEvent::PaddingDecided { .. } => None,
        });
        let mut chunk: Vec<Answer> = Vec::with_capacity(FORWARD_CHUNK);
        if records {
            // Ranked as they were read, for the observer's compact records and the
            // decoder, which reads nothing else of the logits: unless they are kept,
            // those the observer needed go here, and a question waiting for its other
            // windows holds only its candidates.
            for mut a in answers {
                if let Err(e) = observer.on_answer(&a.scores) {
                    out.error = Some(e);
                    cancel.cancel();
                    // Those before the failure are decoded; a resumed run sends again
                    // any that the journal could not keep (the rest are dropped).
                    break;
                }
                if !keep_logits {
                    a.scores = a.scores.without_logits();
                }
                chunk.push(a);
            }
        } else {
            chunk.extend(answers);
        }
        if !replies.is_empty() && out.error.is_none() {
            // A text model's replies: recorded (a journal), then decoded, as answers are.
            let recorded = replies
                .iter()
                .position(|(i, r)| {
                    observer
                        .on_reply(*i, r)
                        .map_err(|e| out.error = Some(e))
                        .is_err()
                })
                .unwrap_or(replies.len());
            if out.error.is_some() {
                cancel.cancel();
            }
            replies.truncate(recorded);
            out.answered += replies.len() as u64;
            observer.answered(replies.len() as u64);
            held.extend(replies);
        }
        let failed = out.error.is_some();
        if held.len() >= FORWARD_MIN || !open || failed {
            let replies = std::mem::take(&mut held);
            if to_decoder.send(ToDecoder::Replies(replies)).is_err() {
                break;
            }
        }
        out.answered += chunk.len() as u64;
        observer.answered(chunk.len() as u64);
        if !chunk.is_empty() && to_decoder.send(ToDecoder::Answers(chunk)).is_err() || failed {
            break;
        }
    }
    // Replies recorded before a stop are decoded.
    if !held.is_empty() {
        let _ = to_decoder.send(ToDecoder::Replies(held));
    }
    // Dropped here, so that the channels close when collecting stops early: the
    // dispatch stage never waits for room that no one will make.
    drop(events);
    drop(to_decoder);
    out
}

/// Passes the produced batches to the dispatch stage until they end or `cancel` is
/// cancelled (returns true: the run was cut short). At most one batch waits behind the
/// gate, so little is sent after a stop.
pub(super) async fn gate<T>(
    mut produced: mpsc::Receiver<T>,
    gated: mpsc::Sender<T>,
    cancel: CancellationToken,
) -> bool {
    let mut cut_short = false;
    loop {
        let batch = tokio::select! {
            biased;
            _ = cancel.cancelled() => { cut_short = true; None }
            b = produced.recv() => b,
        };
        let Some(batch) = batch else { break };
        let permit = tokio::select! {
            biased;
            _ = cancel.cancelled() => { cut_short = true; None }
            p = gated.reserve() => p.ok(),
        };
        let Some(permit) = permit else { break };
        permit.send(batch);
    }
    // Closing both ends: the producer stops building, the dispatch stage drains.
    drop(produced);
    drop(gated);
    cut_short
}
