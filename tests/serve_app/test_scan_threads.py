"""How many threads a CPU model replica computes with: `CARDCAT_SCAN_THREADS` (default 1) through `cardcat
serve`'s scanner config to torch and OpenCV in the replica (`serve_app.app._limit_threads`)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import click
import pytest

from cardcat.cli.serve import scan_config
from cardcat.stack import REPO
from catalog_api.kit.settings import Settings
from serve_app.fusion import Thresholds


def test_the_scan_settings_reach_the_scanner_config(monkeypatch, tmp_path):
    monkeypatch.setenv("CARDCAT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CARDCAT_SCAN_THREADS", "3")
    monkeypatch.setenv("CARDCAT_SCAN_REPLICAS", "2")
    monkeypatch.setenv("CARDCAT_SCAN_DETECTOR_PRECISION", "bf16")
    monkeypatch.setenv("CARDCAT_SCAN_BATCH_WAIT_MS", "7.5")
    monkeypatch.setenv("CARDCAT_SCAN_EMBEDDER_RUNTIME", "onnx")
    monkeypatch.setenv("CARDCAT_SCAN_DETECTOR_RUNTIME", "torch")
    monkeypatch.setenv("CARDCAT_SCAN_READER_RUNTIME", "onnx")
    monkeypatch.setenv("CARDCAT_SCAN_FIRST_LOOK", "false")
    flipped = not Settings().scan_second_detector
    monkeypatch.setenv("CARDCAT_SCAN_SECOND_DETECTOR", str(flipped).lower())
    checked = not Settings().scan_face_check
    monkeypatch.setenv("CARDCAT_SCAN_FACE_CHECK", str(checked).lower())
    monkeypatch.setenv("CARDCAT_SCAN_THRESHOLDS", '{"close_similarity": 0.81, "accept": 0.96}')
    config = scan_config(Settings())
    assert (config.threads, config.replicas, config.detector_precision) == (3, 2, "bf16")
    assert config.embedder_options()["kind"] == "onnx" and config.backend_options()["kind"] == "torch"
    assert config.detector_options() == {**config.backend_options("bf16"), "kind": "torch"}
    assert config.reader_options() == "onnx"
    assert config.resolved(gpu=True) == config  # nothing left to choose
    assert config.batch_wait_ms == 7.5 and config.first_look is False
    assert bool(config.second_detector_weights) is flipped
    assert bool(config.face_check_weights) is checked
    fusion = config.fusion_thresholds()
    assert (fusion.close_similarity, fusion.accept) == (0.81, 0.96)
    assert fusion.margin == Thresholds().margin  # the ones not named stay the shipped ones
    assert config.index_dir == str(Settings().index_dir)
    names = (
        "THREADS",
        "BATCH_WAIT_MS",
        "EMBEDDER_RUNTIME",
        "DETECTOR_RUNTIME",
        "READER_RUNTIME",
        "FIRST_LOOK",
        "SECOND_DETECTOR",
        "FACE_CHECK",
        "THRESHOLDS",
    )
    for name in names:
        monkeypatch.delenv(f"CARDCAT_SCAN_{name}")
    default = scan_config(Settings())
    assert default.threads == 1 and default.batch_wait_ms == Settings().scan_batch_wait_ms
    assert default.first_look is True
    assert default.fusion_thresholds() == Thresholds()
    # "auto": ONNX Runtime where the model replicas get no GPU, torch where they do
    assert (default.detector_runtime, default.embedder_runtime, default.reader_runtime) == ("auto",) * 3
    cpu, gpu = default.resolved(gpu=False), default.resolved(gpu=True)
    assert cpu.detector_options()["kind"] == cpu.embedder_options()["kind"] == cpu.reader_options() == "onnx"
    assert gpu.detector_options()["kind"] == gpu.embedder_options()["kind"] == gpu.reader_options() == "torch"
    # a docTR checkpoint has no ONNX export: the reader runs it in torch
    assert dataclasses.replace(cpu, ocr_checkpoint="/x/reader.pt").reader_options() == "torch"


def test_a_threshold_the_fusion_does_not_have_stops_serve(monkeypatch, tmp_path):
    """A misspelt name would otherwise be dropped silently (or fail inside a Ray replica)."""
    monkeypatch.setenv("CARDCAT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CARDCAT_SCAN_THRESHOLDS", '{"close_similarty": 0.8}')
    with pytest.raises(click.ClickException, match="close_similarty"):
        scan_config(Settings())


def test_a_cpu_replica_computes_with_the_threads_it_is_given():
    """In a fresh process, as in a replica: torch and OpenCV both take the count (each defaults to the
    machine's cores otherwise), and interop stays at one."""
    for threads in (1, 2):
        code = (
            "import cv2, torch\n"
            "from serve_app.app import _limit_threads\n"
            f"_limit_threads('cpu', {threads})\n"
            "print(torch.get_num_threads(), cv2.getNumThreads(), torch.get_num_interop_threads())\n"
        )
        command = [sys.executable, "-c", code]
        out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
        assert out.stdout.split() == [str(threads), str(threads), "1"]
