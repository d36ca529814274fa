#!/usr/bin/env bash
# bench/layers/run.sh's PRECISION=bf16 table on tiny cases: bench_layers in bf16 and in fp32,
# then join_results.py --fp32 with bf16's own output standing in for PyTorch's (the same
# columns; no torch needed), so every case is "met: <= torch" and the convolution gets its
# speed-up against fp32. Checks the header, the verdicts and the skipped layer's note.
#   join_bf16_goals.sh BENCH_LAYERS CASES JOIN_RESULTS
set -euo pipefail
bench="$1" cases="$2" join="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$bench" --cases "$cases" --warmup 0 --repeats 1 --format tsv --precision bf16 >"$work/bf16.tsv"
"$bench" --cases "$cases" --warmup 0 --repeats 1 --format tsv --precision fp32 >"$work/fp32.tsv"
grep -q 'isa=[a-z0-9_]* bf16-hardware=\(yes\|no\)' "$work/bf16.tsv" || { echo "no backend ISA in bench_layers' header"; exit 1; }
python3 "$join" --fp32 "$work/fp32.tsv" "$work/bf16.tsv" "$work/bf16.tsv" | tee "$work/table.txt"
grep -q 'tessera fp32 ms *bf16/fp32 *goals' "$work/table.txt" || { echo "no goal columns"; exit 1; }
grep -Eq 'conv\(out=4,k=3,pad=1\).*(met|MISSED): [0-9.]+x fp32; met: <= torch' "$work/table.txt" \
  || { echo "the convolution has no verdict against fp32"; exit 1; }
maxpool_row="$(grep -E '^2 .*maxpool' "$work/table.txt")"
[[ $maxpool_row == *"met: <= torch"* && $maxpool_row != *"x fp32"* ]] \
  || { echo "a non-convolution case has a speed-up goal, or no verdict against torch"; exit 1; }
grep -q 'nosuchlayer.*tessera: skip' "$work/table.txt" || { echo "the skipped layer lost its note"; exit 1; }
echo "ok: bf16 goal columns"
