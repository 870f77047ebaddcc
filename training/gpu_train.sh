#!/usr/bin/env bash
# Train the print reader and the detector side by side on one GPU box (the lent H100 has 16 cores: the
# photos and text crops are made on the CPU by 9 + 5 data workers while both networks train on the GPU),
# or the embedder alone.
#   bash training/gpu_train.sh start [ocr|detector|embedder]
#                                         render the catalog faces (cached, all cores), start the OCR and
#                                         detector runs (or just the one named; the embedder runs alone:
#                                         its 14 data workers take the box)
#   bash training/gpu_train.sh wait [S]   block until every run ends, or S seconds (default 540) pass
#   bash training/gpu_train.sh status     the tail of every log
# Runs land in runs/ocr/crnn-mbv3s-gpu, runs/detector/unet224-v5 and runs/embedder/cardnet-v2-gpu
# (resumable), logs in runs/gpu-*.log. The embedder run exports models/weights/embedder.pt when it ends;
# then `cardcat index build` and re-check the fusion thresholds (benchmarks/fusion_sweep.py).
# The OCR run exports models/weights/ocr.pt when it ends; then re-average its BatchNorm statistics and
# export the detector (both evaluate on held-out cards):
#   python -m training.ocr.recalibrate && python -m training.ocr.compile && python -m training.ocr.evaluate --count 500
#   python -m training.detector.export --run runs/detector/unet224-v5 --set refine_passes=4 \
#     --set min_fit=0.75 --set rect_fallback=true --set extra_threshold=0.6 --set settle=0.02
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TRAINERS="training\.(ocr|detector|embedder)\.train"
case "${1:-}" in
  start)
    mkdir -p runs
    # 12 workers: at 16 the renderer once died opening its fonts ("cannot open resource")
    "$PY" -m training.renders --workers "$(( $(nproc) < 12 ? $(nproc) : 12 ))"
    if [ "${2:-}" = embedder ]; then
      setsid nohup "$PY" -m training.embedder.train --config training/embedder/gpu.yaml \
        --init models/weights/embedder.pt >runs/gpu-embedder.log 2>&1 </dev/null &
    fi
    if [ "${2:-ocr}" = ocr ]; then
      setsid nohup "$PY" -m training.ocr.train --config training/ocr/gpu.yaml \
        >runs/gpu-ocr.log 2>&1 </dev/null &
    fi
    if [ "${2:-detector}" = detector ]; then
      setsid nohup "$PY" -m training.detector.train --config training/detector/gpu.yaml \
        --init models/weights/detector.pt >runs/gpu-detector.log 2>&1 </dev/null &
    fi
    sleep 2
    ;;
  wait)
    deadline=$((SECONDS + ${2:-540}))
    while pgrep -f "$TRAINERS" >/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 5; done
    ;;
  status)
    for log in runs/gpu-*.log; do echo "== $log"; tail -c 1500 "$log" | tr '\r' '\n' | tail -8; done
    ;;
  *)
    sed -n 2,13p "$0"
    exit 2
    ;;
esac
