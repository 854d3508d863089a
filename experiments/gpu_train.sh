#!/usr/bin/env bash
# The order policy's training recipe at GPU scale (one GPU, about 10 minutes): the same command as the CPU run of
# data/checkpoints/order_policy with a larger pool, batch and step count. The network's steps run on the GPU; the
# expert-iteration relabelling (topological sorts and exact splits) runs on the host's CPU cores.
#
#   experiments/gpu_train.sh OUT_DIR [extra Hydra overrides]
#
# Writes OUT_DIR/{network.json, params.npz, metrics.jsonl, summary.json} and OUT_DIR/train.log. Compare the result
# with the shipped checkpoint on the validation sets only (metrics.jsonl: models_val_*, labels_val_*); ship it if better.
set -euo pipefail
out="${1:?usage: experiments/gpu_train.sh OUT_DIR [overrides]}"
shift
mkdir -p "$out"
here="$(cd "$(dirname "$0")/.." && pwd)"
"$here/.venv/bin/respect-train" policy=order algorithm=order_expert_iteration run_dir="$out" \
  'datasets=[data/labels/respect30_k4_paper,data/labels/respect30_k4_latency]' \
  algorithm.steps=20000 algorithm.batch_size=64 algorithm.generated=3000 algorithm.relabel_every=2500 \
  algorithm.eval_every=2500 algorithm.samples=16 "$@" 2>&1 | tee "$out/train.log"
