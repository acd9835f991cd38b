//! Tensors through system shared memory (docs/design.md, "Shared memory" and protocol item 4), for a server on this
//! machine.
//!
//! A BERT request is mostly its three `[batch, seq]` integer tensors (about 330 KB for
//! 64 features of 216 tokens as INT64), its response two `[batch, seq]` float tensors
//! (110 KB). Sent in the messages, those bytes are written into an HTTP/2 send buffer,
//! copied into the kernel's socket buffers, carried over loopback, cut into frames and
//! gathered again on the other side. Placed in a shared memory region that both sides
//! have mapped, they are written once, and the messages only name where they lie.
//!
//! Contract:
//! - One region per run: a POSIX shared memory object (a file under `/dev/shm`, created
//!   with mode 0600 and a name no other run uses, its memory written through at once so
//!   that a full `/dev/shm` fails here rather than as SIGBUS mid-run), registered with the server under the
//!   same name, then unlinked at once: the server keeps its mapping, so nothing is left
//!   in `/dev/shm` however the run ends. [`InputRegion::close`] unregisters it; a
//!   process that is killed leaves the server's mapping (a few MB) until the server
//!   restarts.
//! - The region holds one slot per request in flight, each sized for a full batch of
//!   the longest sequence, inputs and outputs, and mapped into this process on its own
//!   (a whole number of pages). A request takes a free slot, its input tensors are
//!   written straight into the mapping ([`InferRequest::write_contents_to`]), and it
//!   carries the region's name and offsets instead of the bytes, and asks for its
//!   outputs after them ([`ShmOutputs`]); the server writes them there and answers with
//!   empty raw entries, and the outputs are read from the slot
//!   ([`tensor::decode_response_in`](super::tensor::decode_response_in)). A request
//!   that finds no free slot, or that does not fit, is sent with its tensors in the
//!   message.
//! - A slot is handed out again only after its request was answered from it
//!   ([`Slot::answered`]). A request that failed (a timeout: the server may still run it
//!   later and write its outputs), or was answered by a retry, retires its slot: it is
//!   dropped, never reused, so a late write cannot land in another request's outputs.
//!   A retry asks for its outputs in the message.
//! - A server that no longer knows the region (it restarted mid-run) answers with an
//!   error naming it ([`lost_region`]); that request is sent again with its tensors in
//!   the message, the region is given up ([`InputRegion::abandon`]) and every later
//!   request carries its tensors.
//! - A text model's request (`text_request.rs`) puts only its BYTES inputs in a slot
//!   ([`Slot::put`]; slots sized for the run's largest request), and its outputs come
//!   back in the message: their size is not known before the server answers. The server
//!   only reads such a slot, so it is free again when its request ends, however it
//!   ended (a late reader of a reused slot belongs to a request no one waits for).
//! - [`SharedMemory::Auto`] (the default) uses a region when the run has one endpoint
//!   on a loopback address and the server accepts the registration (a server in a
//!   container with its own `/dev/shm` refuses it); otherwise the tensors go in the
//!   message. [`SharedMemory::System`] makes a refusal an error.
//!
//! This module is the region and its slots; a run's use of them (open, place, send with
//! the fallbacks above, read, close and the report) is `pipeline`'s `SharedRegion`, the
//! one path `eval`, `compare`, `ask` and `perf` take.

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use memmap2::{MmapMut, MmapOptions};

use super::binding::Binding;
use super::client::TritonClient;
use super::request::{InferRequest, ShmInputs, ShmOutputs};
use crate::error::{Error, Result};

/// Whether tensors go through system shared memory (inputs, and the outputs after them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SharedMemory {
    /// Always in the message.
    None,
    /// Through shared memory; an error when that is not possible.
    System,
    /// Through shared memory when the one endpoint is on this machine and the server
    /// accepts the region; in the message otherwise.
    #[default]
    Auto,
}

/// Where POSIX shared memory objects live on Linux (`shm_open` names are files here).
const SHM_DIR: &str = "/dev/shm";

/// A registered region of request slots (input tensors, then room for the outputs).
#[derive(Debug, Clone)]
pub(crate) struct InputRegion {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The registered name (also the object's name, without the leading `/`).
    name: Arc<str>,
    slot_bytes: usize,
    /// Free slots, each with its own mapping.
    free: Mutex<Vec<(usize, MmapMut)>>,
    /// The server it is registered with (`None`: none, a region of the slot tests).
    server: Option<TritonClient>,
    /// The server lost the region: no slot is handed out any more.
    abandoned: AtomicBool,
    /// Slots never handed out again (see [`Slot`]).
    retired: AtomicU64,
    /// Some request was answered with its inputs read from a slot.
    inputs_read: AtomicBool,
    /// Some request's outputs were read from a slot.
    outputs_read: AtomicBool,
}

/// A slot taken by one request: free again after [`answered`](Slot::answered) from it,
/// or when dropped while no outputs were asked for in it; retired (never handed out
/// again) otherwise.
#[derive(Debug)]
pub(crate) struct Slot {
    inner: Arc<Inner>,
    index: usize,
    /// `None` only while it is being given back.
    map: Option<MmapMut>,
    /// Where the outputs were asked for, from the slot's start.
    outputs_at: Option<usize>,
}

/// What [`InputRegion::open`] decided.
#[derive(Debug)]
pub(crate) enum Opened {
    /// Requests use this region.
    Region(InputRegion),
    /// Tensors go in the message, for this reason (`None`: shared memory was not asked
    /// for).
    Message(Option<String>),
}

/// Most slots a region has (requests in flight beyond them carry their tensors): each
/// slot's memory is taken when the region is made.
pub(crate) const MAX_SLOTS: usize = 64;

/// Bytes of one request's input and output tensors at most: `rows` features padded to
/// `seq_len`.
pub(crate) fn slot_bytes(binding: &Binding, rows: usize, seq_len: usize) -> usize {
    outputs_offset(super::request::contents_len(binding, rows, seq_len))
        + binding.outputs_len(rows, seq_len)
}

/// Bytes of `request`'s slot: its inputs, then its outputs when their size is known
/// before the answer (a text model's come back in the message).
pub(crate) fn request_slot_bytes(request: &InferRequest) -> usize {
    match request.outputs_len() {
        Some(outputs) => outputs_offset(request.contents_len()) + outputs,
        None => request.contents_len(),
    }
}

/// Where the outputs start in a slot whose inputs take `inputs_len` bytes (on a cache
/// line).
fn outputs_offset(inputs_len: usize) -> usize {
    inputs_len.next_multiple_of(64)
}

impl InputRegion {
    /// Creates and registers a region of `slots` slots of `slot_bytes` bytes with
    /// `server` (the run's one server; `None` when it has several endpoints).
    pub(crate) async fn open(
        mode: SharedMemory,
        server: Option<&TritonClient>,
        slots: usize,
        slot_bytes: usize,
    ) -> Result<Opened> {
        let refuse = |why: String| -> Result<Opened> {
            match mode {
                SharedMemory::System => {
                    Err(Error::Config(format!("`SharedMemory::System`: {why}")))
                }
                _ => Ok(Opened::Message(Some(why))),
            }
        };
        if mode == SharedMemory::None {
            return Ok(Opened::Message(None));
        }
        let Some(server) = server else {
            return refuse("requests go to several endpoints, not one server".into());
        };
        if mode == SharedMemory::Auto && !server.is_loopback() {
            return refuse(format!("{} is not a loopback address", server.url()));
        }
        // Whole pages per slot: each is mapped on its own, at a page-aligned offset.
        let slot_bytes = slot_bytes.max(1).div_ceil(PAGE) * PAGE;
        let slots = slots.max(1);
        let size = slots.saturating_mul(slot_bytes);
        let name = unique_name();
        let path = PathBuf::from(SHM_DIR).join(&name);
        let file = match create(&path, size as u64) {
            Ok(f) => f,
            Err(e) => return refuse(format!("cannot create {}: {e}", path.display())),
        };
        let registered = server
            .register_system_shared_memory(&name, &format!("/{name}"), size as u64)
            .await;
        // Registered or not, the name is no longer needed: the server has its mapping.
        let _ = std::fs::remove_file(&path);
        if let Err(e) = registered {
            if super::extensions::absent(&e) {
                let who = match server.server_info().await {
                    Ok(info) => info.label(),
                    Err(_) => "the server".into(),
                };
                return refuse(format!(
                    "{who} at {} has no shared-memory support (it does not answer Triton's \
                     system shared memory calls)",
                    server.url()
                ));
            }
            return refuse(format!("the server did not register the region: {e}"));
        }
        let mut free = Vec::with_capacity(slots);
        for i in (0..slots).rev() {
            match map_slot(&file, i, slot_bytes) {
                Ok(map) => free.push((i, map)),
                Err(e) => {
                    let _ = server.unregister_system_shared_memory(&name).await;
                    return refuse(format!("cannot map {}: {e}", path.display()));
                }
            }
        }
        Ok(Opened::Region(InputRegion {
            inner: Arc::new(Inner {
                name: name.into(),
                slot_bytes,
                free: Mutex::new(free),
                server: Some(server.clone()),
                abandoned: AtomicBool::new(false),
                retired: AtomicU64::new(0),
                inputs_read: AtomicBool::new(false),
                outputs_read: AtomicBool::new(false),
            }),
        }))
    }

    /// A free slot, if any.
    pub(crate) fn take(&self) -> Option<Slot> {
        if self.is_abandoned() {
            return None;
        }
        let (index, map) = self.inner.free.lock().ok()?.pop()?;
        Some(Slot {
            inner: self.inner.clone(),
            index,
            map: Some(map),
            outputs_at: None,
        })
    }

    /// Stops handing out slots: the server no longer knows the region.
    pub(crate) fn abandon(&self) {
        self.inner.abandoned.store(true, Ordering::Relaxed);
    }

    /// Records that a request was answered with its inputs read from the region.
    pub(crate) fn inputs_answered(&self) {
        self.inner.inputs_read.store(true, Ordering::Relaxed);
    }

    /// Whether some request was answered with its inputs read from the region
    /// ([`inputs_answered`](Self::inputs_answered)).
    pub(crate) fn inputs_used(&self) -> bool {
        self.inner.inputs_read.load(Ordering::Relaxed)
    }

    /// Whether some request's outputs came back through the region.
    pub(crate) fn outputs_used(&self) -> bool {
        self.inner.outputs_read.load(Ordering::Relaxed)
    }

    /// Slots retired so far: their requests failed or were answered by a retry.
    #[cfg(test)]
    pub(crate) fn retired(&self) -> u64 {
        self.inner.retired.load(Ordering::Relaxed)
    }

    /// Whether [`abandon`](Self::abandon) was called.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.inner.abandoned.load(Ordering::Relaxed)
    }

    /// Unregisters the region (the server unmaps it; the memory is then freed). An
    /// abandoned region is not known to the server: nothing to do.
    ///
    /// A server that still runs a request reading the region (one the client gave up on)
    /// refuses with "in use" (Triton 24.09 and later); the call is repeated for up to two
    /// seconds. Older servers unmap it at once, so a caller waits for its requests first.
    pub(crate) async fn close(self) -> Result<()> {
        let Some(server) = self.inner.server.as_ref().filter(|_| !self.is_abandoned()) else {
            return Ok(());
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        loop {
            let result = server
                .unregister_system_shared_memory(&self.inner.name)
                .await;
            match result {
                // The server's words: a region still in use by a request it is finishing
                // has no code of its own.
                Err(e)
                    if e.server_message()
                        .is_some_and(|m| m.to_ascii_lowercase().contains("in use"))
                        && std::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                other => return other,
            }
        }
    }
}

impl Slot {
    /// Writes `request`'s input tensors into this slot and returns the request naming
    /// them there and asking for its outputs after them; the request unchanged (tensors
    /// in the message) when its inputs do not fit, with its outputs in the message when
    /// only they do not.
    pub(crate) fn place(&mut self, request: InferRequest) -> InferRequest {
        let len = request.contents_len();
        let write = |room: &mut [u8]| request.write_contents_to(room);
        let Some(at) = self.put(len, write) else {
            return request;
        };
        let outputs_at = outputs_offset(len);
        let outputs = ShmOutputs {
            region: at.region.clone(),
            offset: at.offset + outputs_at as u64,
        };
        let request = request.with_shm_inputs(at);
        // A text model's outputs come back in the message (their size is not known).
        match request.outputs_len() {
            Some(len) if outputs_at + len <= self.inner.slot_bytes => {}
            _ => return request,
        }
        self.outputs_at = Some(outputs_at);
        request.with_shm_outputs(outputs)
    }

    /// Has `write` fill the slot's first `len` bytes with a request's inputs (exactly
    /// `len` bytes) and returns where they lie in the region; `None`, nothing written,
    /// when they do not fit. Any request's inputs: a token batch's tensors
    /// ([`place`](Self::place)) or a text model's BYTES tensors.
    pub(crate) fn put(&mut self, len: usize, write: impl FnOnce(&mut [u8])) -> Option<ShmInputs> {
        let map = self.map.as_mut().filter(|m| len <= m.len())?;
        write(&mut map[..len]);
        Some(ShmInputs {
            region: self.inner.name.clone(),
            offset: (self.index * self.inner.slot_bytes) as u64,
        })
    }

    /// The slot's memory from where [`place`](Self::place) asked for the outputs (what
    /// the server wrote there once the request is answered); `None` when it did not.
    pub(crate) fn outputs(&self) -> Option<&[u8]> {
        Some(&self.map.as_ref()?[self.outputs_at?..])
    }

    /// Ends the slot's use by a request that was answered. `from_shm`: the answer's
    /// outputs were read from this slot (see
    /// [`decode_response_in`](super::tensor::decode_response_in)). The slot is free
    /// again when they were, or when no outputs were asked for here; otherwise a retry
    /// answered, the first attempt may still write here, and the slot is retired.
    pub(crate) fn answered(mut self, from_shm: bool) {
        if from_shm {
            self.inner.outputs_read.store(true, Ordering::Relaxed);
            self.outputs_at = None;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(map) = self.map.take() else {
            return;
        };
        if self.outputs_at.is_some() {
            // Its request may still run on the server and write outputs here later.
            self.inner.retired.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Ok(mut free) = self.inner.free.lock() {
            free.push((self.index, map));
        }
    }
}

/// Whether `error`, the answer to `request`, is the server saying that the region
/// `request`'s inputs were placed in is not registered ([`is_lost_region`]): the
/// request is not retried as it is, but sent again with its tensors in the message.
pub(crate) fn lost_region(request: &InferRequest, error: &Error) -> bool {
    request.shm_inputs().is_some() && is_lost_region(error)
}

/// Whether `error` is the server saying that a request's shared memory region is not
/// registered (a server restarted since the region was registered).
pub(crate) fn is_lost_region(error: &Error) -> bool {
    // The server's words: the protocol answers a missing region with a generic code.
    let text = error.server_message().unwrap_or("").to_ascii_lowercase();
    // Not "invalid offset + byte size": that is a request that does not fit the region,
    // a bug on this side, and it must not pass for a restart.
    text.contains("shared memory region")
        && (text.contains("unable to find") || text.contains("not found"))
}

/// Whether `error` is the server refusing to write a request's outputs into the room
/// it was given: a model that answers with more bytes than its binding says (another
/// dtype or a larger shape). The request is then sent again with its outputs in the
/// message, where the answer is checked against the binding and the mismatch named.
pub(crate) fn is_output_room_short(error: &Error) -> bool {
    // The server's words: the protocol answers a short output region with a generic code.
    let text = error.server_message().unwrap_or("").to_ascii_lowercase();
    text.contains("shared memory size specified with the request for output")
}

/// A name no other region on this machine has: the process id, a per-process counter
/// and the clock.
fn unique_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!(
        "bertqa-{}-{}-{nanos:x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Mapping granularity (slots start on page boundaries).
const PAGE: usize = 4096;

/// Slot `index` of `slot_bytes` bytes of `file`, mapped for writing.
fn map_slot(file: &File, index: usize, slot_bytes: usize) -> io::Result<MmapMut> {
    // SAFETY: the object was created by this process (0600, a name no one else uses)
    // and unlinked; the only other party is the server, which reads a slot's inputs and
    // writes its outputs while its request runs. This process writes a slot's inputs
    // before sending the request and reads its outputs after the answer came; a slot
    // whose request may still run (failed, or answered by a retry) is never mapped
    // again (`Slot`'s drop), so no one changes these bytes while they are read here.
    unsafe {
        MmapOptions::new()
            .offset((index * slot_bytes) as u64)
            .len(slot_bytes)
            .map_mut(file)
    }
}

/// A new object of `size` bytes readable and writable by this user only, its memory
/// taken now: written through, not just sized. A sized but unwritten object gets its
/// pages on first touch, and a full `/dev/shm` (64 MB in a default container) would then
/// kill the process with SIGBUS in the middle of a run instead of failing here.
#[cfg(unix)]
fn create(path: &std::path::Path, size: u64) -> io::Result<File> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    let zeros = [0u8; 1 << 16];
    let mut left = size;
    let written = loop {
        if left == 0 {
            break file.flush();
        }
        let n = left.min(zeros.len() as u64) as usize;
        if let Err(e) = file.write_all(&zeros[..n]) {
            break Err(e);
        }
        left -= n as u64;
    };
    if let Err(e) = written {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(file)
}

/// POSIX shared memory objects are a Unix matter: elsewhere a region is never made.
#[cfg(not(unix))]
fn create(_: &std::path::Path, _: u64) -> io::Result<File> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "POSIX shared memory needs a Unix system",
    ))
}

impl InputRegion {
    /// A region of `slots` slots that no server knows: the slot mechanics alone.
    #[cfg(test)]
    pub(crate) fn unregistered(slots: usize, slot_bytes: usize) -> InputRegion {
        let slot_bytes = slot_bytes.max(1).div_ceil(PAGE) * PAGE;
        let name = unique_name();
        let path = PathBuf::from(SHM_DIR).join(&name);
        let file = create(&path, (slots * slot_bytes) as u64).unwrap();
        std::fs::remove_file(&path).unwrap();
        let free = (0..slots)
            .rev()
            .map(|i| (i, map_slot(&file, i, slot_bytes).unwrap()))
            .collect();
        InputRegion {
            inner: Arc::new(Inner {
                name: name.into(),
                slot_bytes,
                free: Mutex::new(free),
                server: None,
                abandoned: AtomicBool::new(false),
                retired: AtomicU64::new(0),
                inputs_read: AtomicBool::new(false),
                outputs_read: AtomicBool::new(false),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::binding::SeqLen;
    use crate::backend::{prepare_request, Binding};
    use crate::types::Feature;

    /// NVIDIA's layout: three INT64 `[-1, 384]` inputs, two FP32 `[-1, 384]` outputs.
    fn nvidia() -> Binding {
        Binding::for_tests(
            "m",
            ["input__0", "input__1", "input__2"],
            ["output__0", "output__1"],
            &[-1, 384],
            SeqLen::Fixed(384),
        )
    }

    #[test]
    fn a_slot_is_handed_out_again_only_after_an_answer_read_from_it() {
        let b = Arc::new(nvidia());
        let feature = Arc::new(Feature::from_pieces(1_000_000_000, 0, &[2054], &[1996]));
        let request = || prepare_request(&b, vec![feature.clone()], 384).unwrap();
        let region = InputRegion::unregistered(2, slot_bytes(&b, 1, 384));
        // Inputs and then outputs in the slot, the outputs' room after the inputs.
        let mut s = region.take().unwrap();
        let placed = s.place(request());
        let (inputs, outputs) = (placed.shm_inputs().unwrap(), placed.shm_outputs().unwrap());
        assert!(outputs.offset >= inputs.offset + placed.contents_len() as u64);
        assert!(s.outputs().unwrap().len() >= placed.outputs_len().unwrap());
        // Answered from the slot: free again, both slots can be taken.
        s.answered(true);
        let (mut s1, mut s2) = (region.take().unwrap(), region.take().unwrap());
        assert!(region.take().is_none());
        s1.place(request());
        s2.place(request());
        // A request that failed (its outputs may still be written) and one a retry
        // answered in the message: both slots retired, none left to hand out.
        drop(s1);
        s2.answered(false);
        assert_eq!(region.retired(), 2);
        assert!(region.take().is_none());
        assert!(
            region.outputs_used(),
            "the first answer was read from its slot"
        );
        // A slot given back without outputs asked for in it is simply free again.
        let small = InputRegion::unregistered(1, 64);
        let mut s = small.take().unwrap();
        let placed = s.place(request());
        assert!(
            placed.shm_inputs().is_none() && s.outputs().is_none(),
            "too small for the batch"
        );
        drop(s);
        assert_eq!(small.retired(), 0);
        assert!(small.take().is_some());
    }

    #[cfg(unix)]
    #[test]
    fn an_object_is_created_whole_and_only_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(unique_name());
        let file = create(&path, 3 * PAGE as u64 + 5).unwrap();
        assert_eq!(file.metadata().unwrap().len(), 3 * PAGE as u64 + 5);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(file.metadata().unwrap().permissions().mode() & 0o777, 0o600);
        // A name in use is an error (another run's region is never taken over).
        assert!(create(&path, 1).is_err());
        let mut map = map_slot(&file, 1, PAGE).unwrap();
        map[..4].copy_from_slice(b"bert");
        drop(map);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[PAGE..PAGE + 4], b"bert");
        assert!(bytes[..PAGE].iter().all(|&b| b == 0));
    }

    #[test]
    fn only_an_unknown_region_counts_as_lost() {
        let server = |message: &str| Error::Server {
            server: None,
            url: "127.0.0.1:8001".into(),
            code: crate::error::Code::InvalidArgument,
            http: None,
            model: None,
            message: message.into(),
        };
        assert!(is_lost_region(&server(
            "Unable to find system shared memory region: 'bertqa-1-0-1'"
        )));
        assert!(is_lost_region(&server(
            "shared memory region 'bertqa-1-0-1' not found"
        )));
        assert!(!is_lost_region(&server(
            "Invalid offset + byte size for shared memory region: 'bertqa-1-0-1'"
        )));
        assert!(!is_lost_region(&server(
            "unexpected shape for input 'input__2'"
        )));
        let short = server(
            "shared memory size specified with the request for output 'output__0' \
             (79872 bytes) should be at least 159744 bytes to hold the results",
        );
        assert!(is_output_room_short(&short));
        assert!(!is_lost_region(&short));
        assert!(!is_output_room_short(&server(
            "Unable to find system shared memory region: 'bertqa-1-0-1'"
        )));
    }

    #[test]
    fn names_differ_within_a_process() {
        let a = unique_name();
        let b = unique_name();
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("bertqa-{}-", std::process::id())));
        assert!(!a.contains('/'));
    }
}
