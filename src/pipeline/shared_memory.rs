//! A run's shared memory, from start to report: the region opened for the run (or why
//! there is none), each request placed in a slot of it, sent with the fallbacks to the
//! message, its answer read where the server wrote it, and at the end the region
//! unregistered and what happened reported ([`SharedMemoryReport`]). The dispatch stage
//! (`eval`, `compare`, `ask`, for every model) and `perf` both go through
//! [`SharedRegion::place`]: a token batch's tensors, or a text model's BYTES inputs
//! (its outputs in the message); the region and its slots are [`crate::backend::shm`].

use std::sync::Arc;
use std::time::Instant;

use crate::backend::proto::ModelInferResponse;
use crate::backend::shm::{self, InputRegion, Opened, SharedMemory, Slot};
use crate::backend::{tensor, Infer, InferRequest, TritonClient};
use crate::error::Result;
use crate::types::Feature;

/// How tensors travelled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedMemoryReport {
    /// Some request's inputs went through a shared memory region.
    pub used: bool,
    /// Some request's outputs came back through it too.
    pub outputs: bool,
    /// Why they did not, when shared memory was asked for (or `auto`) and not used, or
    /// what went wrong closing the region.
    pub note: Option<String>,
}

/// The note on a region the server lost mid-run.
const LOST: &str = "the server lost the shared memory region (a restart?); later requests \
                    carried their tensors";

/// The shared memory region of one run, or why it has none. Cheap to clone (the clones
/// share the region). The default has none, and no note.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedRegion {
    region: Option<InputRegion>,
    /// Why there is no region, when shared memory was asked for (or `auto`).
    note: Option<Arc<str>>,
}

impl SharedRegion {
    /// Opens a region as `mode` says, registered with `server` (the run's one server;
    /// `None` when it has several endpoints): a slot per request in flight (at most
    /// [`shm::MAX_SLOTS`] in all) and one spare, of `slot_bytes` each (the model's
    /// `Model::slot_bytes`: a token model's rows padded to the longest length, inputs
    /// and outputs; a text model's largest request's BYTES inputs, its outputs in the
    /// message). Requests beyond the slots carry their tensors.
    pub(crate) async fn open_slots(
        mode: SharedMemory,
        server: Option<&TritonClient>,
        in_flight: usize,
        slot_bytes: usize,
    ) -> Result<Self> {
        let slots = in_flight.clamp(1, shm::MAX_SLOTS - 1) + 1;
        let opened = InputRegion::open(mode, server, slots, slot_bytes).await?;
        Ok(match opened {
            Opened::Region(r) => SharedRegion {
                region: Some(r),
                note: None,
            },
            Opened::Message(note) => SharedRegion {
                region: None,
                note: note.map(Into::into),
            },
        })
    }

    /// `request` with its input tensors in a free slot, and its outputs asked for after
    /// them, when the region has one (and they fit); in the message otherwise. A text
    /// model's request gets its BYTES inputs placed, its outputs always in the message.
    pub(crate) fn place(&self, request: InferRequest) -> Placed {
        let taken = self
            .region
            .as_ref()
            .and_then(|r| Some((r.take()?, r.clone())));
        match taken {
            Some((mut slot, region)) => Placed {
                placed: slot.place(request.clone()),
                request,
                slot: Some(slot),
                region: Some(region),
            },
            None => Placed {
                placed: request.clone(),
                request,
                slot: None,
                region: None,
            },
        }
    }

    /// Unregisters the region and reports how the run's tensors travelled. A region
    /// left registered only holds a few MB of the server's memory until it restarts:
    /// worth a note, not a failed run.
    pub(crate) async fn close(self) -> SharedMemoryReport {
        let Some(region) = self.region else {
            return SharedMemoryReport {
                used: false,
                outputs: false,
                note: self.note.map(|n| n.to_string()),
            };
        };
        let used = region.inputs_used();
        let outputs = region.outputs_used();
        let lost = region.is_abandoned();
        let closed = region.close().await;
        let note = match (lost, closed) {
            (true, _) => Some(LOST.to_string()),
            (false, Ok(())) => None,
            (false, Err(e)) => Some(format!(
                "the shared memory region was not unregistered: {e}"
            )),
        };
        SharedMemoryReport {
            used,
            outputs,
            note,
        }
    }
}

/// A request ready to go ([`SharedRegion::place`]): its input tensors in a slot when
/// one was free (and they fit), in the message otherwise.
pub(crate) struct Placed {
    /// As built, tensors in the message.
    request: InferRequest,
    /// As first sent: naming its slot when it has one.
    placed: InferRequest,
    slot: Option<Slot>,
    /// The slot's region.
    region: Option<InputRegion>,
}

impl Placed {
    /// Sends it with `client`, and again in the two cases where shared memory is given
    /// up for this request: a server that lost the region ([`shm::lost_region`]: the
    /// request with its tensors in the message, and the region abandoned for the rest of
    /// the run) and outputs larger than their room ([`shm::is_output_room_short`]: the
    /// outputs in the message, where the answer is checked and the mismatch named).
    /// Returns the response, when the answered attempt was handed to the transport, and
    /// whether the request's inputs went through shared memory.
    pub(crate) async fn send<B: Infer>(
        &self,
        client: &B,
    ) -> Result<(ModelInferResponse, Instant, bool)> {
        let in_shm = self.placed.shm_inputs().is_some();
        match client.infer_timed(self.placed.clone()).await {
            Ok((response, sent)) => Ok((response, sent, in_shm)),
            Err(e) if shm::lost_region(&self.placed, &e) => {
                if let Some(region) = &self.region {
                    region.abandon();
                }
                let (response, sent) = client.infer_timed(self.request.clone()).await?;
                Ok((response, sent, false))
            }
            Err(e) if self.placed.shm_outputs().is_some() && shm::is_output_room_short(&e) => {
                let again = self.placed.clone().without_shm_outputs();
                let (response, sent) = client.infer_timed(again).await?;
                Ok((response, sent, in_shm))
            }
            Err(e) => Err(e),
        }
    }

    /// Ends the use of a text model's request that was answered (`in_shm`: as placed,
    /// as [`send`](Self::send) said): its slot is free again (the server only read it).
    pub(crate) fn answered_text(self, in_shm: bool) {
        if let (true, Some(region)) = (in_shm, &self.region) {
            region.inputs_answered();
        }
    }

    /// Hands the checked `response` (`in_shm`: the answer to the request as placed, as
    /// [`send`](Self::send) said) to `read` where it lies, in the slot or the message,
    /// then ends the slot's use ([`Slot::answered`]; a slot dropped on an error is
    /// retired). Returns what `read` made of it, and the request's features.
    pub(crate) fn read<T>(
        self,
        response: &ModelInferResponse,
        in_shm: bool,
        read: impl FnOnce(&tensor::Checked<'_>, &[Arc<Feature>]) -> T,
    ) -> Result<(T, Vec<Arc<Feature>>)> {
        let Placed {
            request,
            slot,
            region,
            ..
        } = self;
        let outputs = slot.as_ref().and_then(|s| s.outputs()).filter(|_| in_shm);
        let checked = tensor::check_response_in(&request, response, outputs)?;
        let from_shm = checked.read_from_shm();
        let value = read(&checked, request.features());
        if let (true, Some(region)) = (in_shm, &region) {
            region.inputs_answered();
        }
        if let Some(slot) = slot {
            slot.answered(from_shm);
        }
        Ok((value, request.into_features()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn region(slots: usize) -> SharedRegion {
        SharedRegion {
            region: Some(InputRegion::unregistered(slots, 4096)),
            note: None,
        }
    }

    fn lost() -> crate::Error {
        crate::Error::Server {
            server: None,
            url: "127.0.0.1:8001".into(),
            code: crate::error::Code::InvalidArgument,
            http: None,
            model: None,
            message: "Unable to find system shared memory region: 'bertqa-1-0-1'".into(),
        }
    }

    /// Answers every request (the first with `first`'s error when given), recording
    /// whether each attempt's inputs lay in a slot.
    #[derive(Clone)]
    struct Fake {
        calls: Arc<Mutex<Vec<bool>>>,
        first: Arc<Mutex<Option<crate::Error>>>,
    }

    impl Infer for Fake {
        async fn infer_timed(
            &self,
            request: InferRequest,
        ) -> crate::Result<(ModelInferResponse, Instant)> {
            self.calls
                .lock()
                .unwrap()
                .push(request.shm_inputs().is_some());
            match self.first.lock().unwrap().take() {
                Some(e) => Err(e),
                None => Ok((ModelInferResponse::default(), Instant::now())),
            }
        }
    }

    /// Sends `placed` through a [`Fake`] that fails its first attempt with `first`
    /// (`None`: answers every attempt); whether it was answered, and the attempts.
    fn send(placed: &Placed, first: Option<crate::Error>) -> (bool, Vec<bool>) {
        let fake = Fake {
            calls: Arc::default(),
            first: Arc::new(Mutex::new(first)),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let result = rt.block_on(placed.send(&fake));
        let calls = fake.calls.lock().unwrap().clone();
        (result.is_ok(), calls)
    }

    fn text(question: &str, context: &str) -> InferRequest {
        let b = Arc::new(crate::backend::text::logits_binding_for_tests(8));
        InferRequest::text(&b, vec![(question.into(), context.into())]).unwrap()
    }

    fn in_slot(p: &Placed) -> Option<u64> {
        p.placed.shm_inputs().map(|at| at.offset)
    }

    fn close(shm: SharedRegion) -> SharedMemoryReport {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(shm.close())
    }

    #[test]
    fn text_inputs_take_a_slot_while_they_fit_and_one_is_free() {
        let shm = region(2);
        let (a, b) = (
            shm.place(text("Who?", "Ada.")),
            shm.place(text("Who?", "Ada.")),
        );
        assert!(in_slot(&a).is_some() && in_slot(&b).is_some());
        assert!(
            in_slot(&shm.place(text("Who?", "Ada."))).is_none(),
            "no slot free"
        );
        assert!(a.placed.shm_outputs().is_none(), "outputs in the message");
        assert_ne!(in_slot(&a), in_slot(&b));
        assert_eq!(send(&a, None), (true, vec![true]));
        a.answered_text(true);
        // A failed request's slot is free again too: the server only read it.
        let timeout = crate::Error::Internal("timeout".into());
        assert_eq!(send(&b, Some(timeout)), (false, vec![true]));
        drop(b);
        assert!(in_slot(&shm.place(text("Who?", "Ada."))).is_some());
        let long = "x".repeat(5000);
        assert!(
            in_slot(&shm.place(text("Who?", &long))).is_none(),
            "larger than a slot"
        );
        let report = close(shm);
        assert_eq!(
            report,
            SharedMemoryReport {
                used: true,
                outputs: false,
                note: None
            }
        );
    }

    #[test]
    fn a_lost_region_sends_the_text_in_the_message_and_gives_the_region_up() {
        let shm = region(2);
        let placed = shm.place(text("Who?", "Ada."));
        assert_eq!(send(&placed, Some(lost())), (true, vec![true, false]));
        drop(placed);
        assert!(
            in_slot(&shm.place(text("Who?", "Ada."))).is_none(),
            "region abandoned"
        );
        let report = close(shm);
        assert!(!report.used);
        assert_eq!(report.note.as_deref(), Some(LOST));
        // Without a region, everything goes in the message.
        let none = SharedRegion::default();
        assert_eq!(
            send(&none.place(text("Who?", "Ada.")), None),
            (true, vec![false])
        );
    }
}
