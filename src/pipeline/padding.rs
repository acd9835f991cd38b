//! The padding policy: how long each request's sequences are, and the probe that
//! decides, on a dynamic-length model, whether padding less would change answers.
//!
//! [`PaddingPolicy`] is a small state machine: unguarded (pad as configured), probing
//! (the first requests padded to the full length, one at a time), guarded dynamic
//! (each batch to its longest feature, displaced features counted), or the full length
//! (decided by the probe or by an earlier run's journal).

use std::sync::Arc;

use crate::backend::{Binding, Model, SeqLen};
use crate::decode::Scores;
use crate::types::{Feature, Logits};

/// How to pad a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// Every batch padded to this length (a fixed-length model, or `--fixed-seq-len`).
    Fixed(usize),
    /// Each batch padded to its longest feature, rounded up to a multiple of this.
    Longest { multiple: usize },
}

impl Padding {
    /// The padding a model needs: its fixed length, or `max_seq_length` for a dynamic
    /// one unless dynamic padding is allowed.
    pub fn for_model(binding: &Binding, max_seq_length: usize, dynamic: bool) -> Padding {
        match binding.seq_len {
            SeqLen::Fixed(n) => Padding::Fixed(n),
            SeqLen::Dynamic if dynamic => Padding::Longest { multiple: 8 },
            SeqLen::Dynamic => Padding::Fixed(max_seq_length),
        }
    }

    /// The padding of `model`'s requests: [`for_model`](Self::for_model) by its fixed
    /// length, if any.
    pub fn of(model: &Model, max_seq_length: usize, dynamic: bool) -> Padding {
        match model.fixed_len() {
            Some(n) => Padding::Fixed(n),
            None if dynamic => Padding::Longest { multiple: 8 },
            None => Padding::Fixed(max_seq_length),
        }
    }

    /// The length `batch` is padded to: the fixed length, or its longest feature rounded
    /// up to the multiple (the multiple for an empty batch). The one padding rule of `eval` and
    /// `perf`.
    pub fn length(self, batch: &[Arc<Feature>]) -> usize {
        match self {
            Padding::Fixed(n) => n,
            Padding::Longest { multiple } => {
                let longest = batch.iter().map(|f| f.len()).max().unwrap_or(1);
                longest.div_ceil(multiple.max(1)) * multiple.max(1)
            }
        }
    }
}

/// The guard on dynamic padding. The reference ranks its top `n_best` start and end
/// positions over the whole padded sequence (algorithm §6.2), so a model whose padding
/// positions score high pushes real positions out of the top, and padding less then
/// changes the answers. Under a guard with `probe` the first requests, up to
/// `PROBE_FEATURES` features, are padded to `full_len` as a probe: when, for any of
/// their features, padding only to the feature's own length (rounded up) would keep
/// other real positions in a top `n_best` than `full_len` does, the whole run pads to
/// `full_len` (the probe's answers are the reference's either way). Once it has
/// decided, the run hands the decision on (`super::RunEvent::PaddingDecided`). Later
/// dynamically padded requests count the features whose padding still pushed real
/// positions out ([`PaddingReport::displaced`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaddingGuard {
    /// The decoder's `n_best_size` (its top-k).
    pub n_best: usize,
    /// The reference's padded length (`--max-seq-length`).
    pub full_len: usize,
    /// Send the probe (false: only count displaced features, `--dynamic-seq-len`).
    pub probe: bool,
    /// An earlier run's decision, from its journal (true: dynamic, false: the full
    /// length): applied without probing again, so a resumed run pads as the first did.
    pub decided: Option<bool>,
}

/// How a run padded its requests, and what its [`PaddingGuard`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PaddingReport {
    /// After the probe, batches were padded to their longest feature; otherwise to
    /// `fixed_len`.
    pub dynamic: bool,
    /// The length of fixed-length requests (`None` when dynamic).
    pub fixed_len: Option<usize>,
    /// Features of the probe request (0: no probe).
    pub probe_features: u64,
    /// Probe features whose answers could change under shorter padding; any makes the
    /// run pad to the full length.
    pub probe_unsafe: u64,
    /// Dynamically padded features in which padding positions pushed real ones out of
    /// the top n-best: evidence that their answers may differ from
    /// padding to the full length.
    pub displaced: u64,
}

impl PaddingReport {
    /// `fixed`, `dynamic`, or `fixed_after_probe` (the guard's probe found padding
    /// ranked high, so the run padded to the full length).
    pub fn mode(&self) -> &'static str {
        match (self.dynamic, self.probe_unsafe) {
            (true, _) => "dynamic",
            (false, 0) => "fixed",
            (false, _) => "fixed_after_probe",
        }
    }

    /// A note for stderr when the guard changed the padding or saw answers at risk.
    pub fn note(&self, model: &str) -> Option<String> {
        if self.probe_unsafe > 0 {
            return Some(format!(
                "note: model {model:?} ranks padding positions among its top start/end \
                 logits ({} of the {} probe features), so padding less would change answers \
                 (algorithm §6.2): every batch was padded to {} as the reference does \
                 (`probe = false` pads to each batch's longest feature anyway)",
                self.probe_unsafe,
                self.probe_features,
                self.fixed_len.unwrap_or_default()
            ));
        }
        (self.displaced > 0).then(|| {
            format!(
                "warning: in {} features padding positions pushed real ones out of the top \
                 start/end logits of model {model:?}: with dynamic sequence length their \
                 answers may differ from padding to the full length (algorithm §6.2; \
                 `Padding::Fixed` gives the reference's)",
                self.displaced
            )
        })
    }
}

/// True when padding `logits` (of a feature with `real` real positions) only to `real`
/// rounded up to `multiple` keeps the same real positions in the top `n` as the full
/// padding does, for start and end. Shorter padding can only keep more of them, so any
/// length in between keeps the same ones too.
pub(super) fn shorter_padding_is_safe(l: &Logits, real: usize, multiple: usize, n: usize) -> bool {
    let len = l.start.len().min(l.end.len());
    let shortest = real.div_ceil(multiple.max(1)) * multiple.max(1);
    let shortest = shortest.min(len);
    [&l.start[..len], &l.end[..len]].iter().all(|x| {
        crate::decode::real_in_top(&x[..shortest], real, n)
            == crate::decode::real_in_top(x, real, n)
    })
}

/// [`padding_displaces`] from the logits' candidates when ranked for `n` (the same
/// positions [`crate::decode::real_in_top`] ranks), from the logits otherwise (false
/// when neither can tell).
pub(super) fn padding_displaces_ranked(scores: &Scores, real: usize, n: usize) -> bool {
    let Some(c) = scores.candidates().filter(|c| c.k() == n) else {
        return scores
            .logits()
            .is_some_and(|l| padding_displaces(l, real, n));
    };
    let want = n.min(real);
    let (starts, ends) = c.lens();
    let real_in = |positions: &[u32]| positions.iter().filter(|&&i| (i as usize) < real).count();
    (starts > real && real_in(c.starts()) < want) || (ends > real && real_in(c.ends()) < want)
}

/// True when padding positions of `l` push real positions out of the top `n`.
pub(super) fn padding_displaces(l: &Logits, real: usize, n: usize) -> bool {
    let want = n.min(real);
    [&l.start, &l.end].iter().any(|x| {
        x.len() > real && !surely_undisplaced(x, real, want) && {
            crate::decode::real_in_top(x, real, n) < want
        }
    })
}

/// A quick sufficient test that at least `want` real positions (those below `real`) rank
/// above every padding position of `x` in the stable descending order of §6.2 (NaN as
/// −∞): a real position at or above the padding's maximum ranks above all of it (on a
/// tie the lower position wins), so `want` such positions keep `want` real ones in the
/// top. One pass, stopping early; usually true, as padding scores low.
fn surely_undisplaced(x: &[f32], real: usize, want: usize) -> bool {
    let key = |v: f32| if v.is_nan() { f32::NEG_INFINITY } else { v };
    let (head, pad) = x.split_at(real.min(x.len()));
    let top = max_ignoring_nan(pad);
    let mut above = 0usize;
    for &v in head {
        if key(v) >= top {
            above += 1;
            if above >= want {
                return true;
            }
        }
    }
    above >= want
}

/// The largest value of `x` with NaN left out (−∞ for none), eight lanes at a time so
/// that it runs on whole vectors (`max` passes over NaN in any order, so lanes give the
/// same answer as one pass).
pub(super) fn max_ignoring_nan(x: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let mut chunks = x.chunks_exact(8);
    for chunk in chunks.by_ref() {
        for (m, &v) in lanes.iter_mut().zip(chunk) {
            *m = m.max(v);
        }
    }
    chunks
        .remainder()
        .iter()
        .chain(&lanes)
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

/// Features the padding probe covers at least (its requests are sent one at a time,
/// padded to the full length, before any other).
pub(crate) const PROBE_FEATURES: u64 = 16;

/// Where a run's padding stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No guard (fixed padding, or none asked for): pad as configured.
    Unguarded(Padding),
    /// The probe: requests padded to the guard's full length, each awaited before the
    /// next is sent.
    Probing { multiple: usize },
    /// Each batch padded to its longest feature (never past the full length); features
    /// whose padding displaces real positions are counted.
    Dynamic { multiple: usize },
    /// Every batch padded to the guard's full length.
    Full,
}

/// The padding of each request of one run ([`PaddingGuard`]'s probe included).
#[derive(Debug, Clone, Copy)]
pub(super) struct PaddingPolicy {
    state: State,
    /// The guard, when the configured padding is dynamic.
    guard: Option<PaddingGuard>,
}

/// What the policy asks of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RequestPadding {
    /// The padded length.
    pub seq_len: usize,
    /// Count the features whose padding displaces real positions from the top of this
    /// n-best size.
    pub check: Option<usize>,
    /// A probe request: awaited, and its answers decide the padding.
    pub probe: bool,
}

impl PaddingPolicy {
    /// The starting state for `padding` under `guard` (a guard on fixed padding has
    /// nothing to guard).
    pub(crate) fn new(padding: Padding, guard: Option<PaddingGuard>) -> Self {
        let guard = guard.filter(|_| matches!(padding, Padding::Longest { .. }));
        let state = match (padding, guard) {
            (Padding::Longest { multiple }, Some(g)) if g.probe => match g.decided {
                None => State::Probing { multiple },
                Some(true) => State::Dynamic { multiple },
                Some(false) => State::Full,
            },
            (Padding::Longest { multiple }, Some(_)) => State::Dynamic { multiple },
            (padding, _) => State::Unguarded(padding),
        };
        PaddingPolicy { state, guard }
    }

    /// The report's starting figures: dynamic, or the fixed length.
    pub(crate) fn report(&self) -> PaddingReport {
        let fixed_len = match self.state {
            State::Unguarded(Padding::Fixed(n)) => Some(n),
            State::Full => self.guard.map(|g| g.full_len),
            _ => None,
        };
        PaddingReport {
            dynamic: fixed_len.is_none(),
            fixed_len,
            ..PaddingReport::default()
        }
    }

    /// How to pad the next request, carrying `batch`.
    pub(crate) fn next(&self, batch: &[Arc<Feature>]) -> RequestPadding {
        let full_len = self.guard.map_or(usize::MAX, |g| g.full_len);
        let (seq_len, check, probe) = match self.state {
            State::Unguarded(padding) => (padding.length(batch), None, false),
            State::Probing { .. } => (full_len, None, true),
            // Rounding up never pads past the reference's length (a --max-seq-length
            // that is not a multiple of 8); features are never longer.
            State::Dynamic { multiple } => (
                Padding::Longest { multiple }.length(batch).min(full_len),
                self.guard.map(|g| g.n_best),
                false,
            ),
            State::Full => (full_len, None, false),
        };
        RequestPadding {
            seq_len,
            check,
            probe,
        }
    }

    /// Takes a probe request's answers (`rows` of `batch`, in row order) into `report`;
    /// returns the decision (true: dynamic) once the probe has decided.
    pub(crate) fn probed(
        &mut self,
        rows: &[Scores],
        batch: &[Arc<Feature>],
        report: &mut PaddingReport,
    ) -> Option<bool> {
        let (State::Probing { multiple }, Some(g)) = (self.state, self.guard) else {
            return None;
        };
        let unsafe_features = rows
            .iter()
            .zip(batch)
            // The probe keeps every answer's logits; one without them is not safe.
            .filter(|(s, f)| {
                s.logits()
                    .is_none_or(|l| !shorter_padding_is_safe(l, f.len(), multiple, g.n_best))
            })
            .count() as u64;
        report.probe_features += batch.len() as u64;
        report.probe_unsafe += unsafe_features;
        if unsafe_features > 0 {
            self.state = State::Full;
            report.dynamic = false;
            report.fixed_len = Some(g.full_len);
            return Some(false);
        }
        if report.probe_features < PROBE_FEATURES {
            return None;
        }
        self.state = State::Dynamic { multiple };
        Some(true)
    }
}
