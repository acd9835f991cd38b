"""Type stubs of the bertqa package (written by ``python -m bertqa._stubs``)."""

import os
from typing import Any, Dict, Iterable, List, Literal, Mapping, Optional, Sequence, Tuple, Union

from ._errors import (
    ConnectionError as ConnectionError,
    Error as Error,
    GateFailed as GateFailed,
    InputError as InputError,
    ModelError as ModelError,
    ServerError as ServerError,
    UsageError as UsageError,
)

__version__: str

PathLike = Union[str, os.PathLike[str]]
Urls = Union[None, str, Sequence[str]]
Value = Union[str, int, float, os.PathLike[str]]


class Candidate:
    """One of a question's best candidates."""
    text: str
    start_char: Optional[int]
    end_char: Optional[int]
    probability: float
    start_logit: float
    end_logit: float


class Answer:
    """A question's answer (``start_char``/``end_char``: a span of the context, in
    characters; ``placeholder``: the text is the reference's ``"empty"`` for no valid
    span, not the word; ``nbest``: ``None`` where the model's contract gives none)."""
    id: str
    text: str
    start_char: Optional[int]
    end_char: Optional[int]
    score: Optional[float]
    probability: Optional[float]
    no_answer: bool
    placeholder: bool
    null_odds: Optional[float]
    no_answer_probability: Optional[float]
    nbest: Optional[List[Candidate]]



class Table(list):
    """The rows of one of a report's tables (each a dict, keys as ``--json`` has them), as a list; ``to_pandas()`` gives them as a DataFrame (pandas is optional)."""
    def to_pandas(self) -> Any: ...


class Evaluation:
    """An evaluation's results: ``metrics`` (the official keys), ``predictions`` (id → answer text), ``latency_ms``, ``throughput``, the ``slices`` with the ``weak_slices``, ``to_dict()`` and ``write(dir)``."""
    @property
    def metrics(self) -> Dict[str, Any]: ...
    @property
    def predictions(self) -> Dict[str, str]: ...
    @property
    def latency_ms(self) -> Dict[str, float]: ...
    @property
    def throughput(self) -> Dict[str, float]: ...
    @property
    def slices(self) -> Table: ...
    @property
    def weak_slices(self) -> List[str]: ...
    @property
    def slices_not_computed(self) -> Dict[str, str]: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def write(self, dir: PathLike) -> List[str]: ...


class Client:
    """A client of ``model`` at ``url`` (``host:port`` or a URL as ``--url`` takes it; a list spreads requests over several servers). Options are the flags' settings in snake case, with the flags' defaults. A dead URL or a missing model raises here."""
    def __init__(
        self,
        url: Union[str, Sequence[str]],
        model: str,
        *,
        vocab: Optional[PathLike] = None,
        tokenizer: Optional[PathLike] = None,
        protocol: Literal['grpc', 'http'] = 'grpc',
        transport: Optional[Literal['stream', 'unary']] = None,
        model_version: str = '',
        do_lower_case: bool = True,
        postprocess: Optional[Literal['nvidia', 'hf', 'run-qa']] = None,
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
        shared_memory: Literal['auto', 'system', 'none'] = 'auto',
        timeout_ms: int = 60000,
        connect_timeout_ms: int = 5000,
        header: Union[None, Mapping[str, str], Sequence[str]] = None,
        authority: Optional[str] = None,
        ssl: bool = False,
        ssl_root_cert: Optional[PathLike] = None,
        ssl_client_cert: Optional[PathLike] = None,
        ssl_client_key: Optional[PathLike] = None,
        ssl_target_name: Optional[str] = None,
        retries: int = 3,
        retry_max_backoff_ms: int = 2000,
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
    ) -> None: ...
    def ask(self, question: str, context: str, **options: Any) -> Answer: ...
    def ask_many(self, pairs: Iterable[Tuple[str, str]], **options: Any) -> List[Answer]: ...
    async def ask_async(self, question: str, context: str, **options: Any) -> Answer: ...
    async def ask_many_async(self, pairs: Iterable[Tuple[str, str]], **options: Any) -> List[Answer]: ...
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
    ) -> Union[Dict[str, Any], List[Any]]: ...
    def evaluate(self, data: Any, *, output_dir: Optional[PathLike] = None) -> Evaluation: ...
    def perf(
        self,
        data: Any,
        *,
        progress: bool = False,
        limit: Optional[Value] = None,
        strict: bool = False,
        header_env: Union[Value, Sequence[Value], None] = None,
        header_file: Union[Value, Sequence[Value], None] = None,
        warmup: Optional[int] = None,
        concurrency_range: Optional[Value] = None,
        request_rate_range: Optional[Value] = None,
        request_distribution: Optional[Literal['constant', 'poisson']] = None,
        seed: Optional[int] = None,
        measurement_interval_ms: Optional[Value] = None,
        measurement_request_count: Optional[Value] = None,
        stability_percentage: Optional[int] = None,
        max_trials: Optional[int] = None,
        max_inflight: Optional[int] = None,
        latency_threshold: Optional[Value] = None,
        percentile: Optional[int] = None,
        binary_search: bool = False,
        metrics_url: Union[Value, Sequence[Value], None] = None,
        no_metrics: bool = False,
        metrics_interval_ms: Optional[int] = None,
        csv: Optional[Value] = None,
        requests_jsonl: Optional[Value] = None,
        svg: Optional[Value] = None,
        html: Optional[Value] = None,
        concurrency: Optional[int] = None,
    ) -> Dict[str, Any]: ...
    def tune(
        self,
        data: Any,
        *,
        output_dir: PathLike,
        progress: bool = False,
        limit: Optional[Value] = None,
        strict: bool = False,
        step: Optional[Value] = None,
        header_env: Union[Value, Sequence[Value], None] = None,
        header_file: Union[Value, Sequence[Value], None] = None,
        control_url: Optional[Value] = None,
        max_batch_sizes: Optional[Value] = None,
        queue_delays_us: Optional[Value] = None,
        instances: Optional[Value] = None,
        preferred_batch_sizes: Optional[Value] = None,
        exhaustive: bool = False,
        remeasure: Optional[int] = None,
        keep_best: bool = False,
        concurrency: Optional[Value] = None,
        concurrency_range: Optional[Value] = None,
        warmup: Optional[int] = None,
        latency_threshold: Optional[Value] = None,
        percentile: Optional[int] = None,
        measurement_interval_ms: Optional[Value] = None,
        measurement_request_count: Optional[Value] = None,
        stability_percentage: Optional[int] = None,
        max_trials: Optional[int] = None,
        metrics_url: Union[Value, Sequence[Value], None] = None,
        no_metrics: bool = False,
        metrics_interval_ms: Optional[int] = None,
        write_config: Optional[Value] = None,
        html: Optional[Value] = None,
    ) -> Dict[str, Any]: ...
    @property
    def model(self) -> Dict[str, Any]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> 'Client': ...
    def __exit__(self, *exc: Any) -> None: ...


def evaluate(
    url: Urls, model: Optional[str], data: Any, *, output_dir: Optional[PathLike] = None, progress: bool = False,
    limit: Optional[Value] = None,
    from_logits: Optional[Value] = None,
    model_version: Optional[Value] = None,
    question_input: Optional[Value] = None,
    context_input: Optional[Value] = None,
    answer_output: Optional[Value] = None,
    offsets_output: Optional[Value] = None,
    vocab: Optional[Value] = None,
    tokenizer: Optional[Value] = None,
    do_lower_case: Optional[bool] = None,
    no_lower_case: bool = False,
    max_seq_length: Optional[Value] = None,
    doc_stride: Optional[int] = None,
    max_query_length: Optional[int] = None,
    strict: bool = False,
    input_ids: Optional[Value] = None,
    segment_ids: Optional[Value] = None,
    input_mask: Optional[Value] = None,
    start_logits: Optional[Value] = None,
    end_logits: Optional[Value] = None,
    protocol: Optional[Literal['grpc', 'http']] = None,
    authority: Optional[Value] = None,
    timeout_ms: Optional[int] = None,
    connect_timeout_ms: Optional[int] = None,
    ssl: bool = False,
    ssl_root_cert: Optional[Value] = None,
    ssl_client_cert: Optional[Value] = None,
    ssl_client_key: Optional[Value] = None,
    ssl_target_name: Optional[Value] = None,
    header: Union[Value, Sequence[Value], None] = None,
    header_env: Union[Value, Sequence[Value], None] = None,
    header_file: Union[Value, Sequence[Value], None] = None,
    retries: Optional[int] = None,
    retry_max_backoff_ms: Optional[int] = None,
    retry_model_errors: bool = False,
    wait_ready: Optional[int] = None,
    connections: Optional[int] = None,
    transport: Optional[Literal['stream', 'unary']] = None,
    n_best_size: Optional[int] = None,
    max_answer_length: Optional[int] = None,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: Optional[int] = None,
    postprocess: Optional[Literal['nvidia', 'hf', 'run-qa']] = None,
    batch_size: Optional[Value] = None,
    concurrency: Optional[int] = None,
    warmup: Optional[int] = None,
    fixed_seq_len: bool = False,
    dynamic_seq_len: bool = False,
    shared_memory: Optional[Literal['none', 'system', 'auto']] = None,
    metrics_interval_ms: Optional[int] = None,
    na_prob_thresh: Optional[int] = None,
    resume: bool = False,
    shard: Optional[Value] = None,
    save_logits: bool = False,
    html: Optional[Value] = None,
    min_exact: Optional[Value] = None,
    min_f1: Optional[Value] = None,
    max_p99_ms: Optional[Value] = None,
    bootstrap: Optional[int] = None,
    seed: Optional[int] = None,
    confidence: Optional[float] = None,
    metrics_url: Union[Value, Sequence[Value], None] = None,
) -> Dict[str, Any]:
    """See ``help(bertqa.evaluate)`` and docs/python.md."""


def ask(
    url: Urls, model: str, question: Union[str, Sequence[str]], context: Optional[str] = None, *,
    context_file: Optional[Value] = None,
    model_version: Optional[Value] = None,
    vocab: Optional[Value] = None,
    tokenizer: Optional[Value] = None,
    do_lower_case: Optional[bool] = None,
    no_lower_case: bool = False,
    max_seq_length: Optional[Value] = None,
    doc_stride: Optional[int] = None,
    max_query_length: Optional[int] = None,
    input_ids: Optional[Value] = None,
    segment_ids: Optional[Value] = None,
    input_mask: Optional[Value] = None,
    start_logits: Optional[Value] = None,
    end_logits: Optional[Value] = None,
    protocol: Optional[Literal['grpc', 'http']] = None,
    authority: Optional[Value] = None,
    timeout_ms: Optional[int] = None,
    connect_timeout_ms: Optional[int] = None,
    ssl: bool = False,
    ssl_root_cert: Optional[Value] = None,
    ssl_client_cert: Optional[Value] = None,
    ssl_client_key: Optional[Value] = None,
    ssl_target_name: Optional[Value] = None,
    header: Union[Value, Sequence[Value], None] = None,
    header_env: Union[Value, Sequence[Value], None] = None,
    header_file: Union[Value, Sequence[Value], None] = None,
    retries: Optional[int] = None,
    retry_max_backoff_ms: Optional[int] = None,
    retry_model_errors: bool = False,
    wait_ready: Optional[int] = None,
    connections: Optional[int] = None,
    transport: Optional[Literal['stream', 'unary']] = None,
    n_best_size: Optional[int] = None,
    max_answer_length: Optional[int] = None,
    null_score_diff_threshold: Optional[int] = None,
    postprocess: Optional[Literal['nvidia', 'hf', 'run-qa']] = None,
    batch_size: Optional[Value] = None,
    concurrency: Optional[int] = None,
    fixed_seq_len: bool = False,
    dynamic_seq_len: bool = False,
    question_input: Optional[Value] = None,
    context_input: Optional[Value] = None,
    answer_output: Optional[Value] = None,
    offsets_output: Optional[Value] = None,
    n_best: Optional[int] = None,
    version_2_with_negative: bool = False,
    shared_memory: Optional[Literal['none', 'system', 'auto']] = None,
) -> List[Dict[str, Any]]:
    """See ``help(bertqa.ask)`` and docs/python.md."""


def compare(
    models: Union[None, str, Sequence[str], Sequence[Client]] = None, data: Any = None, *, runs: Optional[Sequence[PathLike]] = None, output_dir: Optional[PathLike] = None,
    limit: Optional[Value] = None,
    model_tokenizer: Union[Value, Sequence[Value], None] = None,
    question_input: Optional[Value] = None,
    context_input: Optional[Value] = None,
    answer_output: Optional[Value] = None,
    offsets_output: Optional[Value] = None,
    vocab: Optional[Value] = None,
    tokenizer: Optional[Value] = None,
    do_lower_case: Optional[bool] = None,
    no_lower_case: bool = False,
    max_seq_length: Optional[Value] = None,
    doc_stride: Optional[int] = None,
    max_query_length: Optional[int] = None,
    strict: bool = False,
    input_ids: Optional[Value] = None,
    segment_ids: Optional[Value] = None,
    input_mask: Optional[Value] = None,
    start_logits: Optional[Value] = None,
    end_logits: Optional[Value] = None,
    protocol: Optional[Literal['grpc', 'http']] = None,
    authority: Optional[Value] = None,
    timeout_ms: Optional[int] = None,
    connect_timeout_ms: Optional[int] = None,
    ssl: bool = False,
    ssl_root_cert: Optional[Value] = None,
    ssl_client_cert: Optional[Value] = None,
    ssl_client_key: Optional[Value] = None,
    ssl_target_name: Optional[Value] = None,
    header: Union[Value, Sequence[Value], None] = None,
    header_env: Union[Value, Sequence[Value], None] = None,
    header_file: Union[Value, Sequence[Value], None] = None,
    retries: Optional[int] = None,
    retry_max_backoff_ms: Optional[int] = None,
    retry_model_errors: bool = False,
    wait_ready: Optional[int] = None,
    connections: Optional[int] = None,
    transport: Optional[Literal['stream', 'unary']] = None,
    n_best_size: Optional[int] = None,
    max_answer_length: Optional[int] = None,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: Optional[int] = None,
    postprocess: Optional[Literal['nvidia', 'hf', 'run-qa']] = None,
    batch_size: Optional[Value] = None,
    concurrency: Optional[int] = None,
    warmup: Optional[int] = None,
    fixed_seq_len: bool = False,
    dynamic_seq_len: bool = False,
    shared_memory: Optional[Literal['none', 'system', 'auto']] = None,
    na_prob_thresh: Optional[int] = None,
    parallel: bool = False,
    save_logits: bool = False,
    show: Optional[int] = None,
    html: Optional[Value] = None,
    min_agreement: Optional[Value] = None,
    max_logit_diff: Optional[Value] = None,
    max_f1_drop: Optional[Value] = None,
    fail_on_significant_drop: bool = False,
    max_flip_rate: Optional[Value] = None,
    fail_if_concentrated: bool = False,
    bootstrap: Optional[int] = None,
    seed: Optional[int] = None,
    confidence: Optional[float] = None,
    url: Union[Value, Sequence[Value], None] = None,
) -> Dict[str, Any]:
    """See ``help(bertqa.compare)`` and docs/python.md."""


def score(
    data: Any, predictions: Any, na_probs: Any = None, *,
    version_2_with_negative: bool = False,
    na_prob_thresh: Optional[int] = None,
) -> Dict[str, Any]:
    """See ``help(bertqa.score)`` and docs/python.md."""
