"""One life cycle for the scanner's models (detector, reader, embedder), after immich's `InferenceModel`.

load (locked, idempotent) -> warm -> `predict_batch`. A subclass says only how to load its weights
(`_load`), how to prepare one input (`transform`), what a warm-up batch is (`_warm_batch`) and how to run a
prepared batch (`_predict_batch`); when and how often loading happens is decided here, once. Models load
in their constructor by default, as a Ray Serve replica wants (load and warm in `__init__`, so the first
request does not pay for it); `load=False` defers it to the first `load()` or `predict_batch`, which may
come from several threads at once (Ray runs blocking inference in a thread pool): the lock makes exactly
one of them load. This module imports no network runtime, so it costs nothing to import.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")


class InferenceModel(ABC, Generic[InputT, OutputT]):
    """A batched model: a list of inputs in, one batch answer out (a list, or an array with a row each)."""

    def __init__(self, *, load: bool = True) -> None:
        self._lock = threading.Lock()
        self._loaded = False
        if load:
            self.load()

    @property
    def loaded(self) -> bool:
        return self._loaded

    def load(self) -> None:
        """Load the weights once; later calls, and calls racing the first one, return when it is done."""
        if self._loaded:
            return
        with self._lock:
            if not self._loaded:
                self._load()
                self._loaded = True

    def warm(self) -> None:
        """Load, then run one small batch: first-call costs (allocator, oneDNN kernels) land here."""
        self.predict_batch(self._warm_batch())

    def predict_batch(self, batch: Sequence[InputT], **options: Any) -> OutputT:
        """Answers for a batch, in order; `options` go to the subclass's `_predict_batch`."""
        self.load()
        return self._predict_batch([self.transform(item) for item in batch], **options)

    def transform(self, item: InputT) -> Any:
        """One input as the network's batch wants it (default: as it is)."""
        return item

    @abstractmethod
    def _load(self) -> None:
        """Read the weights and open the session; runs once, under the lock."""

    @abstractmethod
    def _warm_batch(self) -> list[InputT]:
        """A representative batch for `warm`."""

    @abstractmethod
    def _predict_batch(self, batch: list[Any], *args: Any, **kwargs: Any) -> OutputT:
        """The transformed batch -> the answers."""
