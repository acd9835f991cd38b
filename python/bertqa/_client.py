"""``bertqa.Client``: one model on one or more servers, held by a program. Built once
(it connects, looks at the model and loads the tokenizer), then asked any number of
questions from any number of threads, or awaited from asyncio. Also callable as
transformers' ``pipeline("question-answering")`` is. See docs/python.md."""

from __future__ import annotations

import asyncio
import functools
import json
import os
from typing import Any, Dict, Iterable, List, Literal, Mapping, Optional, Sequence, Tuple, Union

from . import _api, _native
from ._errors import UsageError

PathLike = Union[str, "os.PathLike[str]"]
Answer = _native.Answer
Candidate = _native.Candidate


class Table(list):
    """The rows of one of a report's tables (each a dict, keys as ``--json`` has them),
    as a list; ``to_pandas()`` gives them as a DataFrame (pandas is optional)."""

    def to_pandas(self) -> Any:
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "to_pandas() needs pandas, which bertqa does not install: pip install pandas"
            ) from None
        return pandas.DataFrame(list(self))


class Evaluation:
    """An evaluation's results: ``metrics`` (the official keys), ``predictions`` (id →
    answer text), ``latency_ms``, ``throughput``, the ``slices`` with the
    ``weak_slices``, ``to_dict()`` and ``write(dir)``."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @functools.cached_property
    def _report(self) -> Dict[str, Any]:
        # Built when first read: the document copies every question's scores.
        return self._native.to_dict()

    @property
    def metrics(self) -> Dict[str, Any]:
        return self._report["metrics"]

    @property
    def predictions(self) -> Dict[str, str]:
        return self._native.predictions

    @property
    def latency_ms(self) -> Dict[str, float]:
        return self._report["latency_ms"]

    @property
    def throughput(self) -> Dict[str, float]:
        return self._report["throughput"]

    @property
    def slices(self) -> Table:
        """Every slice of the questions (``question_type:when``, ``context_windows:3+``,
        ...; docs/algorithm.md, "Slices"), each a dict as ``eval --json`` has it:
        ``slice``, ``questions``, ``exact`` and ``f1`` (percent) with their bootstrap
        intervals ``exact_ci`` and ``f1_ci``, ``error_rate`` against
        ``rest_error_rate``, ``p_value`` and the Holm-adjusted ``p_adjusted``."""
        return Table(self._report["slices"])

    @property
    def weak_slices(self) -> List[str]:
        """The slices whose errors stand out: adjusted p below 1 − confidence and an
        error rate above the rest's."""
        return self._report["weak_slices"]

    @property
    def slices_not_computed(self) -> Dict[str, str]:
        """The dimensions the run could not give, each with why."""
        return self._report["slices_not_computed"]

    def to_dict(self) -> Dict[str, Any]:
        """The document ``eval --json`` prints for the same run, with the predictions;
        what only the command has is empty (``gates``, ``output_dir``, ``files``, the
        resume fingerprint ``run``), and ``endpoints`` and ``retries`` count the client's
        requests during this evaluation."""
        return dict(self._report, predictions=self.predictions)

    def write(self, dir: PathLike) -> List[str]:
        """Writes the reference's files into ``dir``; returns their names."""
        return self._native.write(os.fspath(dir))

    def __repr__(self) -> str:
        keys = ("exact", "f1") if "exact" in self.metrics else ("exact_match", "f1")
        shown = ", ".join(f"{k}={self.metrics[k]:.3f}" for k in keys if k in self.metrics)
        return f"Evaluation({shown}, questions={self._report['questions']})"


def _headers(header: Union[None, Mapping[str, str], Sequence[str]]) -> List[Tuple[str, str]]:
    if header is None:
        return []
    if isinstance(header, Mapping):
        return [(str(k), str(v)) for k, v in header.items()]
    out = []
    for h in header:
        name, sep, value = str(h).partition(":")
        if not sep or not name.strip():
            raise UsageError(f"Client(): header {h!r}: give KEY:VALUE")
        out.append((name.strip(), value.strip()))
    return out


class Client:
    """A client of ``model`` at ``url`` (``host:port`` or a URL as ``--url`` takes it; a
    list spreads requests over several servers). Options are the flags' settings in
    snake case, with the flags' defaults. A dead URL or a missing model raises here.

    Safe to share between threads; ``close()`` (or a ``with`` block) closes it."""

    def __init__(
        self,
        url: Union[str, Sequence[str]],
        model: str,
        *,
        vocab: Optional[PathLike] = None,
        tokenizer: Optional[PathLike] = None,
        protocol: Literal["grpc", "http"] = "grpc",
        transport: Optional[Literal["stream", "unary"]] = None,
        model_version: str = "",
        do_lower_case: bool = True,
        postprocess: Optional[Literal["nvidia", "hf", "run-qa"]] = None,
        version_2_with_negative: Optional[bool] = None,
        max_seq_length: Optional[int] = None,
        doc_stride: int = 128,
        max_query_length: int = 64,
        n_best_size: int = 20,
        max_answer_length: int = 30,
        null_score_diff_threshold: float = 0.0,
        na_prob_thresh: float = 1.0,
        batch_size: Optional[int] = None,
        concurrency: int = 4,
        shared_memory: Literal["auto", "system", "none"] = "auto",
        timeout_ms: int = 60_000,
        connect_timeout_ms: int = 5_000,
        header: Union[None, Mapping[str, str], Sequence[str]] = None,
        authority: Optional[str] = None,
        ssl: bool = False,
        ssl_root_cert: Optional[PathLike] = None,
        ssl_client_cert: Optional[PathLike] = None,
        ssl_client_key: Optional[PathLike] = None,
        ssl_target_name: Optional[str] = None,
        retries: int = 3,
        retry_max_backoff_ms: int = 2_000,
        retry_model_errors: bool = False,
        connections: int = 1,
        wait_ready: float = 0.0,
        fixed_seq_len: bool = False,
        dynamic_seq_len: bool = False,
        input_ids: Optional[str] = None,
        segment_ids: Optional[str] = None,
        input_mask: Optional[str] = None,
        start_logits: Optional[str] = None,
        end_logits: Optional[str] = None,
        question_input: Optional[str] = None,
        context_input: Optional[str] = None,
        answer_output: Optional[str] = None,
        offsets_output: Optional[str] = None,
    ) -> None:
        urls = [url] if isinstance(url, str) else [str(u) for u in url]
        path = lambda p: None if p is None else os.fspath(p)  # noqa: E731
        # What perf and tune take of the settings (`_native.client_settings()`); files
        # as they are now, wherever the working directory goes later.
        file = lambda p: None if p is None else os.path.abspath(p)  # noqa: E731
        self._settings: Dict[str, Any] = dict(
            url=urls, model=model, model_version=model_version or None, vocab=file(vocab),
            tokenizer=file(tokenizer), protocol=protocol, do_lower_case=do_lower_case,
            postprocess=postprocess, max_seq_length=max_seq_length, doc_stride=doc_stride,
            max_query_length=max_query_length, batch_size=batch_size,
            shared_memory=shared_memory, timeout_ms=timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
            header=[f"{k}: {v}" for k, v in _headers(header)] or None, authority=authority,
            ssl=ssl, ssl_root_cert=file(ssl_root_cert), ssl_client_cert=file(ssl_client_cert),
            ssl_client_key=file(ssl_client_key), ssl_target_name=ssl_target_name,
            fixed_seq_len=fixed_seq_len, input_ids=input_ids, segment_ids=segment_ids,
            input_mask=input_mask, start_logits=start_logits, end_logits=end_logits,
            question_input=question_input, context_input=context_input,
            answer_output=answer_output, offsets_output=offsets_output,
        )
        if fixed_seq_len and dynamic_seq_len:
            raise UsageError("Client(): fixed_seq_len and dynamic_seq_len pad in opposite ways: give one")
        self._native = _native.Client(
            urls,
            model,
            vocab=path(vocab),
            tokenizer=path(tokenizer),
            protocol=protocol,
            transport=transport,
            model_version=model_version,
            do_lower_case=do_lower_case,
            postprocess=postprocess,
            version_2_with_negative=version_2_with_negative,
            max_seq_length=max_seq_length,
            doc_stride=doc_stride,
            max_query_length=max_query_length,
            n_best_size=n_best_size,
            max_answer_length=max_answer_length,
            null_score_diff_threshold=null_score_diff_threshold,
            na_prob_thresh=na_prob_thresh,
            batch_size=batch_size,
            concurrency=concurrency,
            shared_memory=shared_memory,
            timeout_ms=timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
            header=_headers(header),
            authority=authority,
            ssl=ssl,
            ssl_root_cert=path(ssl_root_cert),
            ssl_client_cert=path(ssl_client_cert),
            ssl_client_key=path(ssl_client_key),
            ssl_target_name=ssl_target_name,
            retries=retries,
            retry_max_backoff_ms=retry_max_backoff_ms,
            retry_model_errors=retry_model_errors,
            connections=connections,
            wait_ready=wait_ready,
            fixed_seq_len=fixed_seq_len,
            dynamic_seq_len=dynamic_seq_len,
            input_ids=input_ids,
            segment_ids=segment_ids,
            input_mask=input_mask,
            start_logits=start_logits,
            end_logits=end_logits,
            question_input=question_input,
            context_input=context_input,
            answer_output=answer_output,
            offsets_output=offsets_output,
        )

    # -- asking ---------------------------------------------------------------------

    def ask(self, question: str, context: str, **options: Any) -> Answer:
        """The answer to ``question`` about ``context``. ``options``: ``n_best_size``,
        ``max_answer_length``, ``max_seq_length``, ``doc_stride``, ``max_query_length``,
        ``version_2_with_negative`` for this call only."""
        _check_text("question", question)
        _check_text("context", context)
        return self._native.ask_many([(question, context)], **options)[0]

    def ask_many(self, pairs: Iterable[Tuple[str, str]], **options: Any) -> List[Answer]:
        """The answers to (question, context) pairs, in order: batched and kept in
        flight as ``evaluate`` sends them."""
        checked = []
        for q, c in pairs:
            _check_text("question", q)
            _check_text("context", c)
            checked.append((q, c))
        return self._native.ask_many(checked, **options)

    async def ask_async(self, question: str, context: str, **options: Any) -> Answer:
        """``ask`` for asyncio: the work runs on the loop's executor, the loop goes on."""
        loop = asyncio.get_running_loop()
        call = functools.partial(self.ask, question, context, **options)
        return await loop.run_in_executor(None, call)

    async def ask_many_async(self, pairs: Iterable[Tuple[str, str]], **options: Any) -> List[Answer]:
        """``ask_many`` for asyncio."""
        loop = asyncio.get_running_loop()
        call = functools.partial(self.ask_many, list(pairs), **options)
        return await loop.run_in_executor(None, call)

    def __call__(
        self,
        *args: Any,
        question: Union[None, str, Sequence[str]] = None,
        context: Union[None, str, Sequence[str]] = None,
        top_k: int = 1,
        handle_impossible_answer: bool = False,
        max_answer_len: int = 15,
        doc_stride: int = 128,
        max_seq_len: Optional[int] = None,
        max_question_len: int = 64,
        **kwargs: Any,
    ) -> Union[Dict[str, Any], List[Any]]:
        """transformers' ``pipeline("question-answering")``: the same arguments and
        defaults, and the same results (``{"score", "start", "end", "answer"}``; a list
        for several questions or ``top_k`` > 1)."""
        pairs, single = _pipeline_inputs(args, question, context, kwargs)
        if top_k < 1:
            raise UsageError(f"top_k should be >= 1, got {top_k}")
        answers = self.ask_many(
            pairs,
            n_best_size=max(20, top_k + 1),
            max_answer_length=max_answer_len,
            doc_stride=doc_stride,
            max_seq_length=max_seq_len,
            max_query_length=max_question_len,
            version_2_with_negative=handle_impossible_answer,
        )
        results = [_pipeline_result(a, c, top_k, handle_impossible_answer) for a, (_, c) in zip(answers, pairs)]
        if single:
            return results[0]
        return results

    # -- evaluating -----------------------------------------------------------------

    def evaluate(self, data: Any, *, output_dir: Optional[PathLike] = None) -> Evaluation:
        """Runs and scores ``data``: a path (any format ``--data`` reads), a parsed SQuAD
        dict, or Hugging Face rows (a list of dicts, or a ``datasets`` split). With
        ``output_dir``, writes the reference's files there."""
        if isinstance(data, (str, os.PathLike)):
            native = self._native.evaluate_path(os.fspath(data))
        elif isinstance(data, Mapping):
            native = self._native.evaluate_bytes(json.dumps(data).encode(), "squad", "<dict>")
        else:
            lines = []
            for i, row in enumerate(data):
                if not isinstance(row, Mapping):
                    raise UsageError(f"evaluate(): row {i + 1} is a {type(row).__name__}, not a dict")
                lines.append(json.dumps(dict(row)))
            native = self._native.evaluate_bytes("\n".join(lines).encode(), "rows", "<rows>")
        evaluation = Evaluation(native)
        if output_dir is not None:
            evaluation.write(output_dir)
        return evaluation

    # -- measuring ------------------------------------------------------------------

    def perf(self, data: Any, *, progress: bool = False, **options: Any) -> Dict[str, Any]:
        """A load sweep of this client's model, as ``bertqa perf`` runs it with the
        client's server, model, tokenizer, window and connection settings: throughput and
        latency per load level. ``data`` as for :meth:`evaluate`; ``options``: perf's
        own flags in snake case (``concurrency_range="1:8"``, ``latency_threshold=50``,
        ``csv=path``, ...; see ``help(bertqa.Client.perf)``); ``progress=True``: a line per
        level on stderr. Returns the document that ``bertqa perf --json`` prints."""
        settings = dict(self._settings)
        urls, model = settings.pop("url"), settings.pop("model")
        report, lines = _native.perf(urls, model, settings, _api._data(data), progress, options)
        _api._warn(lines)
        return report

    def tune(self, data: Any, *, output_dir: PathLike, progress: bool = False, **options: Any) -> Dict[str, Any]:
        """Searches the configuration of this client's model (Triton, explicit
        model-control mode) that serves best within the latency budget, as ``bertqa
        tune`` does, with the client's settings; the original configuration is put back
        (or the best kept with ``keep_best=True``). ``output_dir``: where the original
        configuration, the run's state and tune.json are kept (what ``bertqa tune --restore
        --output-dir DIR`` reads if the original could not be put back). ``options``:
        tune's own flags in snake case (``latency_threshold=100``, ``max_batch_sizes="8,32"``,
        ``control_url=...``; see ``help(bertqa.Client.tune)``); ``progress=True``: a line
        per candidate on stderr. Returns tune.json's document."""
        settings = dict(self._settings)
        urls, model, version = settings.pop("url"), settings.pop("model"), settings.get("model_version")
        if version:
            raise UsageError(f"Client.tune(): tune measures the model's loaded version; this client "
                             f"asks for version {version!r}")
        report, lines = _native.tune(urls, model, settings, _api._data(data), os.fspath(output_dir),
                                     progress, options)
        _api._warn(lines)
        return report

    # -- the rest -------------------------------------------------------------------

    @property
    def model(self) -> Dict[str, Any]:
        """The model as the server describes it and bertqa binds it."""
        return self._native.model()

    def close(self) -> None:
        """Closes the connections; later calls raise ``bertqa.UsageError``."""
        self._native.close()

    @property
    def closed(self) -> bool:
        return self._native.closed

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.model["name"]
        return f"Client({state})"


_api._PERF.document(Client.perf)
_api._TUNE.document(Client.tune)


def _pipeline_inputs(args, question, context, kwargs) -> Tuple[List[Tuple[str, str]], bool]:
    """(question, context) pairs as the pipeline reads its arguments, and whether one
    question was asked (one dict back)."""
    if kwargs:
        raise UsageError(f"unknown arguments {sorted(kwargs)}")
    if args:
        if question is not None or context is not None:
            raise UsageError("give the questions either as arguments or as question=/context=")
        items = args[0] if len(args) == 1 and isinstance(args[0], list) else list(args)
        single = len(args) == 1 and not isinstance(args[0], list)
        pairs = []
        for item in items:
            if not isinstance(item, Mapping) or "question" not in item or "context" not in item:
                raise UsageError("an argument must be a dict with a question and a context")
            pairs.append((item["question"], item["context"]))
        return pairs, single
    if question is None or context is None:
        raise UsageError("give question= and context=")
    if isinstance(question, str) and isinstance(context, str):
        return [(question, context)], True
    questions = [question] if isinstance(question, str) else list(question)
    contexts = [context] * len(questions) if isinstance(context, str) else list(context)
    if len(questions) != len(contexts):
        raise UsageError(f"{len(questions)} questions and {len(contexts)} contexts")
    return list(zip(questions, contexts)), False


def _pipeline_result(answer: Answer, context: str, top_k: int, impossible: bool):
    """An answer as the pipeline gives it: the spans of the context, best first."""
    found = []
    if impossible and answer.no_answer:
        found.append({"score": answer.probability or 0.0, "start": 0, "end": 0, "answer": ""})
    for c in answer.nbest or []:
        if c.start_char is None or c.end_char is None:
            continue
        found.append(
            {"score": c.probability, "start": c.start_char, "end": c.end_char, "answer": context[c.start_char : c.end_char]}
        )
    if not found and answer.start_char is not None and answer.end_char is not None:
        s, e = answer.start_char, answer.end_char
        found.append({"score": answer.probability or 0.0, "start": s, "end": e, "answer": context[s:e]})
    if not found:
        found.append({"score": 0.0, "start": 0, "end": 0, "answer": ""})
    found = found[:top_k]
    return found[0] if top_k == 1 else found


def _check_text(name: str, value: Any) -> None:
    """A wrong argument named as the caller wrote it (the native call names its own)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
