"""FAISS index of catalog faces: exact cosine search over every card's embedding.

21k x 128 floats is 11 MB, so an exact `IndexFlatIP` is both the simplest and the most accurate choice.
It sits in an `IndexIDMap2` with stable int64 ids (position in `card_ids`), so catalog sync can replace
one card's vector without renumbering the rest. The CPU index is the source of truth (it is what gets
saved and mutated); where faiss sees GPUs, searches run on a GPU copy made on demand: one code path for
faiss-cpu and faiss-gpu.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from tqdm import tqdm

from models.embedder import CardEmbedder
from models.files import swap_dir
from models.geometry import read_face

log = logging.getLogger(__name__)


def _batches(faces: Iterable[tuple[str, Path]], size: int) -> Iterator[list[tuple[str, Path]]]:
    it = iter(faces)
    while chunk := list(islice(it, size)):
        yield chunk


def _embed(embedder: CardEmbedder, chunk: list[tuple[str, Path]]) -> np.ndarray:
    return embedder.embed_batch([read_face(Path(path)) for _, path in chunk])


class CardIndex:
    """Card ids <-> unit vectors, searchable by cosine; records which embedder version built it."""

    def __init__(self, dim: int, embedder_version: str) -> None:
        self.dim = dim
        self.embedder_version = embedder_version
        self.card_ids: list[str] = []
        self.built_at = datetime.now(UTC).isoformat(timespec="seconds")
        self._ids: dict[str, int] = {}
        self._cpu: Any = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        self._search: Any = None  # GPU clone (or the CPU index itself); rebuilt after any change
        self._torch_device: str | None = None  # search_on: an exact torch search on this device

    def __len__(self) -> int:
        return int(self._cpu.ntotal)

    # --- building -------------------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        embedder: CardEmbedder,
        faces: Iterable[tuple[str, Path]],
        batch_size: int = 64,
        checkpoint_dir: Path | None = None,
        progress: bool = True,
    ) -> CardIndex:
        """Embed every (card id, face path). With `checkpoint_dir`, each finished batch is saved there and a
        rerun after an interruption reuses the batches it already has (same order, same embedder)."""
        faces = list(faces)
        index = cls(embedder.dim, embedder.version)
        if checkpoint_dir is not None:
            checkpoint_dir.mkdir(parents=True, exist_ok=True)
        bar = tqdm(total=len(faces), desc="index", unit=" faces", disable=not progress)
        for n, chunk in enumerate(_batches(faces, batch_size)):
            ids = [cid for cid, _ in chunk]
            vectors = index._cached_batch(checkpoint_dir, n, ids, embedder.version)
            if vectors is None:
                vectors = _embed(embedder, chunk)
                if checkpoint_dir is not None:
                    tmp = checkpoint_dir / f".batch-{n:06d}.tmp.npz"
                    np.savez(tmp, ids=np.array(ids), vectors=vectors, version=np.array(embedder.version))
                    tmp.replace(checkpoint_dir / f"batch-{n:06d}.npz")
            index._add(ids, vectors)
            bar.update(len(chunk))
        bar.close()
        return index

    @staticmethod
    def _cached_batch(directory: Path | None, n: int, ids: list[str], version: str) -> np.ndarray | None:
        """A checkpointed batch, only if it holds exactly these cards embedded by this embedder."""
        path = directory / f"batch-{n:06d}.npz" if directory is not None else None
        if path is None or not path.exists():
            return None
        with np.load(path) as saved:
            if str(saved["version"]) != version or saved["ids"].tolist() != ids:
                return None
            return np.asarray(saved["vectors"], np.float32)

    def _add(self, card_ids: list[str], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, np.float32)
        if vectors.shape != (len(card_ids), self.dim):
            raise ValueError(f"expected {len(card_ids)} x {self.dim} vectors, got {vectors.shape}")
        ids = np.empty(len(card_ids), np.int64)
        for i, cid in enumerate(card_ids):
            if cid in self._ids:  # replace in place: same int id, so the saved card list stays aligned
                ids[i] = self._ids[cid]
                self._cpu.remove_ids(np.array([ids[i]], np.int64))
            else:
                ids[i] = self._ids[cid] = len(self.card_ids)
                self.card_ids.append(cid)
        self._cpu.add_with_ids(vectors, ids)
        self._search = None

    def upsert(self, embedder: CardEmbedder, faces: Iterable[tuple[str, Path]]) -> int:
        """Replace (or add) these cards' vectors; returns how many. Refuses a different embedder, whose
        vectors would live in another space than the rest of the index."""
        if embedder.version != self.embedder_version:
            raise ValueError(
                f"index built by embedder {self.embedder_version}, not {embedder.version}: rebuild it"
            )
        count = 0
        for chunk in _batches(faces, 64):
            latest = dict(chunk)  # a card listed twice: its last face wins
            self._add(list(latest), _embed(embedder, list(latest.items())))
            count += len(latest)
        return count

    # --- searching ------------------------------------------------------------------------------------

    def search_on(self, device: str) -> None:
        """Search with one exact matrix product on a torch device (a GPU replica's) instead of faiss: the
        same cosines, and no faiss-gpu needed (its wheels are built for another CUDA than torch's)."""
        self._torch_device, self._search = device, None

    def _searcher(self) -> Any:
        if self._search is None and self._torch_device is not None:
            from models.tensor_ops import ExactSearch

            flat = faiss.downcast_index(self._cpu.index)
            ids = faiss.vector_to_array(self._cpu.id_map)
            self._search = ExactSearch(flat.reconstruct_n(0, flat.ntotal), ids, self._torch_device)
        if self._search is None:
            self._search = self._cpu
            if faiss.get_num_gpus() > 0:
                try:
                    self._search = faiss.index_cpu_to_all_gpus(self._cpu)
                except RuntimeError as exc:  # exact search on CPU is still correct, only slower
                    log.warning("faiss GPU clone failed, searching on CPU: %s", exc)
        return self._search

    def search(self, vectors: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """Per query row: up to k (card id, cosine), best first."""
        queries = np.ascontiguousarray(np.atleast_2d(vectors), np.float32)
        if len(self) == 0 or len(queries) == 0:
            return [[] for _ in range(len(queries))]
        sims, ids = self._searcher().search(queries, min(k, len(self)))
        return [
            [(self.card_ids[i], float(s)) for s, i in zip(row_s, row_i, strict=True) if i >= 0]
            for row_s, row_i in zip(sims, ids, strict=True)
        ]

    # --- persistence ----------------------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        """index.faiss + meta.json, written beside the target and swapped in by rename, so a reader sees the
        old index or the new one (or, for the instant between two renames, none), never half of one."""
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp = directory.parent / f".{directory.name}.tmp-{os.getpid()}-{time.monotonic_ns()}"
        tmp.mkdir()
        faiss.write_index(self._cpu, str(tmp / "index.faiss"))
        meta = {
            "card_ids": self.card_ids,
            "dim": self.dim,
            "embedder_version": self.embedder_version,
            "built_at": self.built_at,
            "count": len(self),
            "metric": "inner_product",
            "faiss": faiss.__version__,
        }
        (tmp / "meta.json").write_text(json.dumps(meta))
        swap_dir(tmp, directory)

    @classmethod
    def load(cls, directory: Path) -> CardIndex:
        directory = Path(directory)
        meta = json.loads((directory / "meta.json").read_text())
        return cls.from_bytes(meta, (directory / "index.faiss").read_bytes())

    @classmethod
    def from_bytes(cls, meta: dict[str, Any], blob: bytes) -> CardIndex:
        """An index from the contents of its meta.json and index.faiss (read however the caller must)."""
        index = cls(int(meta["dim"]), meta["embedder_version"])
        index._cpu = faiss.deserialize_index(np.frombuffer(blob, dtype=np.uint8))
        index.card_ids = list(meta["card_ids"])
        index._ids = {cid: i for i, cid in enumerate(index.card_ids)}
        index.built_at = meta["built_at"]
        if len(index) != meta["count"] or index._cpu.d != index.dim:
            raise ValueError(
                f"index holds {len(index)} x {index._cpu.d}, meta says {meta['count']} x {index.dim}"
            )
        return index
