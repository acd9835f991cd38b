//! A run's shared memory, from start to report: the region opened for the run (or why
//! there is none), each request placed in a slot of it, sent with the fallbacks to the
//! message, its answer read where the server wrote it, and at the end the region
//! unregistered and what happened reported ([`SharedMemoryReport`]). The dispatch stage
//! (`eval`, `compare`, `ask`) and `perf` both go through [`SharedRegion`]; the region and
//! its slots are [`crate::backend::shm`].

use std::sync::Arc;
use std::time::Instant;

use crate::backend::proto::ModelInferResponse;
use crate::backend::shm::{self, InputRegion, Opened, SharedMemory, Slot};
use crate::backend::{tensor, Binding, Infer, InferRequest, TritonClient};
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
/// share the region).
#[derive(Debug, Clone)]
pub(crate) struct SharedRegion {
    region: Option<InputRegion>,
    /// Why there is no region, when shared memory was asked for (or `auto`).
    note: Option<Arc<str>>,
}

impl SharedRegion {
    /// Opens a region as `mode` says, registered with `server` (the run's one server;
    /// `None` when it has several endpoints): a slot per request in flight (at most
    /// [`shm::MAX_SLOTS`] in all) and one spare, each for `rows` features padded to
    /// `seq_len`, inputs and outputs. Requests beyond the slots carry their tensors.
    pub(crate) async fn open(
        mode: SharedMemory,
        server: Option<&TritonClient>,
        in_flight: usize,
        binding: &Binding,
        rows: usize,
        seq_len: usize,
    ) -> Result<Self> {
        let opened = InputRegion::open(
            mode,
            server,
            in_flight.clamp(1, shm::MAX_SLOTS - 1) + 1,
            shm::slot_bytes(binding, rows, seq_len),
        )
        .await?;
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
    /// them, when the region has one (and they fit); in the message otherwise.
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
