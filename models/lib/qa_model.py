"""One python-backend model class for every test model of bertqa's model repository.

Each `repo/<name>/1/model.py` imports `TritonPythonModel` from here; the model's
behaviour comes from its config.pbtxt:

- inputs are bound to roles by name (NVIDIA `input__0/1/2` = token ids, segment ids,
  mask; Hugging Face `input_ids`, `token_type_ids`, `attention_mask`), any order, any
  integer dtype; without a segment input (DistilBERT, RoBERTa, DeBERTa-v3 deployments
  take only ids and mask) the kind gets None for the segments;
- outputs: either two tensors (start, end; `output__0/1` or `start_logits/end_logits`)
  or one tensor of dims [-1, 2] or [384, 2] holding both, perhaps with trailing dims of
  size 1 ([384, 2, 1, 1], TensorRT's BERT demo); FP32 or FP16 as configured;
- parameter `kind` (and the parameters each kind reads): the logits, computed by
  qa_logits.py (`null`, `tiny-bert`, `onnx`, `oracle`, `tokenizer-oracle`);
- parameter `jitter_ms`: sleep a random 0..jitter_ms before answering each request
  (with several instances, responses then arrive out of order);
- parameter `padding_logit`: the start and end logits of padding positions (mask 0) are
  set to this value, as a QA head that masks padding gives them (and as a fine-tuned
  model's padding logits tend to be: far below every real position's);
- parameter `delay_ms`: sleep exactly delay_ms per execution (a slow server, so that
  tests can act while a run is under way);
- parameter `pace_ms`: finish executions on a steady cadence, one every pace_ms while
  requests wait (an execution ends pace_ms after the previous one ended, or after it
  began when the model was idle). With one instance and no dynamic batching the model
  serves 1000/pace_ms requests per second whatever its own overhead, so N requests kept
  in flight wait N × pace_ms each (Little's law): a latency that grows with load by
  construction, for the latency-budget tests; parameter `slow_every` = "N:MS" makes
  every Nth execution take MS instead (a known latency distribution: at one request in
  flight, (N-1)/N of the requests take pace_ms and 1/N take MS);
- parameter `refuse_max_batch_size` = N: the model fails to load with max batch size N
  (a candidate `tune` cannot load);
- parameter `fault` (fault injection, for bertqa's reliability tests):
  `unavailable-every-10` fails every 10th request of each instance (counter, so a retry
  succeeds and answers stay identical) with UNAVAILABLE; `internal` fails every request
  with a plain TritonError (INTERNAL); `wrong-shape` drops the last position of each
  output; `wrong-dtype` returns FP64 where FP32 is declared; `missing-output` returns only
  the first output; `non-finite` puts +inf, NaN and -inf into each row's logits at
  positions that would change the answer if +inf were taken at face value.
"""
import json
import os
import random
import sys
import time

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qa_logits  # noqa: E402

ROLES = {
    "input__0": "ids", "input_ids": "ids",
    "input__1": "seg", "token_type_ids": "seg", "segment_ids": "seg",
    "input__2": "mask", "attention_mask": "mask", "input_mask": "mask",
}
NP_DTYPES = {"TYPE_FP32": np.float32, "TYPE_FP16": np.float16}
FAULTS = ("", "unavailable-every-10", "internal", "wrong-shape", "wrong-dtype",
          "missing-output", "non-finite")


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in cfg.get("parameters", {}).items()}
        self.kind = params.get("kind", "null")
        self.inputs = [(i["name"], ROLES[i["name"]]) for i in cfg["input"]]
        self.outputs = [(o["name"], NP_DTYPES[o["data_type"]], list(o["dims"])) for o in cfg["output"]]
        self.jitter_ms = float(params.get("jitter_ms", "0"))
        self.delay_ms = float(params.get("delay_ms", "0"))
        self.pace_s = float(params.get("pace_ms", "0")) / 1000.0
        self.last_done = 0.0
        every, _, slow_ms = params.get("slow_every", "0:0").partition(":")
        self.slow_every, self.slow_s = int(every), float(slow_ms) / 1000.0
        self.executions = 0
        self.padding_logit = float(params["padding_logit"]) if "padding_logit" in params else None
        # A configuration this model refuses to load with (`tune`'s tests).
        refused = params.get("refuse_max_batch_size")
        if refused is not None and int(cfg.get("max_batch_size", 0)) == int(refused):
            raise pb_utils.TritonModelException(f"refusing max_batch_size {refused} (test fault)")
        self.fault = params.get("fault", "")
        if self.fault not in FAULTS:
            raise pb_utils.TritonModelException(f"unknown fault {self.fault!r}")
        self.calls = 0
        # args["model_repository"] is <root>/models/repo/<model>; paths in the
        # parameters are relative to the project root <root>.
        root = os.path.abspath(os.path.join(args["model_repository"], "..", "..", ".."))
        try:
            self._logits = qa_logits.Logits(self.kind, params, root, args["model_repository"])
        except ValueError as e:
            raise pb_utils.TritonModelException(str(e))

    def _inject(self, start, end, mask):
        if self.fault == "wrong-shape":
            return start[:, :-1], end[:, :-1]
        if self.fault != "non-finite":
            return start, end
        start, end = start.copy(), end.copy()
        for row in range(start.shape[0]):
            length = int(np.sum(mask[row] != 0))
            s = int(np.argmax(start[row]))
            # Right after the best start (or on the last context piece when the best is
            # [CLS]): +inf there would start a span that beats the true answer.
            p = s + 1 if s > 0 else length - 2
            if 0 < p < length:
                start[row, p] = np.inf
            end[row, length - 1] = np.nan
            start[row, length - 1] = -np.inf
        return start, end

    def execute(self, requests):
        responses = []
        if self.jitter_ms > 0:
            time.sleep(random.random() * self.jitter_ms / 1000.0)
        if self.delay_ms > 0:
            time.sleep(self.delay_ms / 1000.0)
        if self.pace_s > 0:
            self.executions += 1
            pace = self.pace_s
            if self.slow_every and self.executions % self.slow_every == 0:
                pace = self.slow_s
            now = time.monotonic()
            done = self.last_done + pace
            if done < now:  # idle since the last execution
                done = now + pace
            time.sleep(done - now)
            self.last_done = done
        for req in requests:
            self.calls += 1
            if self.fault == "unavailable-every-10" and self.calls % 10 == 3:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                    f"injected fault: request {self.calls} refused",
                    pb_utils.TritonError.UNAVAILABLE)))
                continue
            if self.fault == "internal":
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("injected fault: model exploded")))
                continue
            t = {role: pb_utils.get_input_tensor_by_name(req, name).as_numpy()
                 for name, role in self.inputs}
            start, end = self._logits(t["ids"], t.get("seg"), t["mask"])
            if self.padding_logit is not None:
                pad = t["mask"] == 0
                start, end = np.where(pad, self.padding_logit, start), np.where(pad, self.padding_logit, end)
            start, end = self._inject(start, end, t["mask"])
            if self.fault == "wrong-dtype":
                responses.append(pb_utils.InferenceResponse(
                    [pb_utils.Tensor(name, arr.astype(np.float64))
                     for (name, _, _), arr in zip(self.outputs, (start, end))]))
                continue
            if self.fault == "missing-output":
                name, dt, _ = self.outputs[0]
                responses.append(pb_utils.InferenceResponse([pb_utils.Tensor(name, start.astype(dt))]))
                continue
            if len(self.outputs) == 1:
                # Both logits in one output: [..., 2], with the trailing dims of size 1
                # the model declares (TensorRT's BERT demo: [batch, seq, 2, 1, 1]).
                name, dt, dims = self.outputs[0]
                both = np.stack([start, end], axis=-1)
                both = both.reshape(both.shape + (1,) * (len(dims) - 2))
                tensors = [pb_utils.Tensor(name, both.astype(dt))]
            else:
                tensors = [pb_utils.Tensor(name, arr.astype(dt))
                           for (name, dt, _), arr in zip(self.outputs, (start, end))]
            responses.append(pb_utils.InferenceResponse(tensors))
        return responses
