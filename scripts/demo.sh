#!/usr/bin/env bash
# The main job: installs what is missing, builds Tessera (CPU), converts Fashion-MNIST and
# trains the fashion-cnn preset on 4 MPI ranks, each holding one tile of every image (a
# 1x2x2 spatial grid), then evaluates on the 10,000 test images and writes a checkpoint,
# the learned first-layer filters as a PNG, and per-step metrics (docs/training.md).
#
# Options after the script name go to tessera-train and win over the demo's settings,
# e.g. `./scripts/demo.sh --epochs 5` or `./scripts/demo.sh --grid 2x1x2 --batch 128`.
# TESSERA_RANKS sets the rank count (default 4; keep the grid's product equal to it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

prepare_example_build

data="$build/data/fashion-mnist"
if [[ ! -f "$data/fashion-mnist-train.h5" || ! -f "$data/fashion-mnist-test.h5" ]]; then
  "$build/apps/data/tessera-data" fashion-mnist --out "$data"
fi

out="$build/demo"
mkdir -p "$out"
# The demo's settings as a config file, so that any of them can be overridden on the
# command line (tessera-train lets the command line win over --config).
cat >"$out/demo.cfg" <<CONFIG
model = fashion-cnn
data = $data/fashion-mnist-train.h5
val-data = $data/fashion-mnist-test.h5
grid = 1x2x2
batch = 64
epochs = 2
optimizer = adam
lr = 0.002
save = $out/fashion-cnn.h5
filters-png = $out/filters.png
metrics = $out/metrics.jsonl
CONFIG
train_example "$build" fashion-cnn "$out/demo.cfg" "$out/metrics.jsonl" "$@"
log "checkpoint, filters and metrics are in $out"
