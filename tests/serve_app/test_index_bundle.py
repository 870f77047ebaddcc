"""The index bundle: index and print table always from one build, even while builds are swapped in.

Real faces embedded by the shipped embedder, saved and swapped in the way `cardcat index build` does.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest

from models.embedder import CardEmbedder
from models.files import swap_dir
from models.geometry import read_face
from models.index import CardIndex
from serve_app.index_bundle import BundleWatcher, load_bundle, read_stamp


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two builds with different cards: 'a' holds a0..a2, 'b' holds b0..b3."""
    root = tmp_path_factory.mktemp("builds")
    embedder = CardEmbedder()
    rng = np.random.default_rng(7)
    made = {}
    for name, count in (("a", 3), ("b", 4)):
        faces = []
        for i in range(count):
            path = root / f"{name}{i}.png"
            cv2.imwrite(str(path), rng.integers(0, 255, (838, 600, 3), dtype=np.uint8))
            faces.append((f"{name}{i}", path))
        index = CardIndex.build(embedder, faces, progress=False)
        built = root / f"build-{name}"
        index.save(built)
        records = [
            {"id": cid, "name": f"Card {cid}", "number": str(i + 1)} for i, (cid, _) in enumerate(faces)
        ]
        (built / "cards.json").write_text(json.dumps(records))
        made[name] = built
    return made


def _install(build: Path, live: Path) -> None:
    staged = live.with_name(live.name + ".new")
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(build, staged)
    swap_dir(staged, live)


def _consistent(bundle_ids: list[str], table_ids: list[str]) -> bool:
    return sorted(bundle_ids) == sorted(table_ids)


def test_watcher_moves_to_a_new_build_whole(builds: dict[str, Path], tmp_path: Path) -> None:
    live = tmp_path / "index"
    assert BundleWatcher(live).bundle is None  # no index yet: nothing, and no error
    _install(builds["a"], live)
    watcher = BundleWatcher(live, recheck_s=0.0)
    first = watcher.bundle
    assert first is not None and first.index.card_ids == ["a0", "a1", "a2"]
    assert sorted(first.table.cards) == ["a0", "a1", "a2"]
    assert watcher.refresh() is first  # same build: not read again

    _install(builds["b"], live)
    assert watcher.due()
    second = watcher.refresh()
    assert second is not None and second.stamp != first.stamp and second.stamp == read_stamp(live)
    assert second.index.card_ids == ["b0", "b1", "b2", "b3"]
    assert sorted(second.table.cards) == ["b0", "b1", "b2", "b3"]
    # The bundle searches: a face of the new build finds itself first.
    vectors = CardEmbedder().embed_batch([read_face(builds["b"].parent / "b2.png")])
    assert second.index.search(vectors, 1)[0][0][0] == "b2"


def test_bundles_read_during_swaps_never_mix_builds(builds: dict[str, Path], tmp_path: Path) -> None:
    live = tmp_path / "index"
    _install(builds["a"], live)
    stop = threading.Event()

    def swap_forever() -> None:
        while not stop.is_set():
            for name in ("b", "a"):
                _install(builds[name], live)

    swapper = threading.Thread(target=swap_forever)
    swapper.start()
    seen: set[str] = set()
    try:
        for _ in range(150):
            bundle = load_bundle(live)
            if bundle is None:  # the instant between two renames: no live directory
                continue
            assert _consistent(bundle.index.card_ids, list(bundle.table.cards)), bundle.stamp
            seen.add(bundle.index.card_ids[0][0])
    finally:
        stop.set()
        swapper.join()
    assert seen == {"a", "b"}  # both builds were read while they were being swapped
