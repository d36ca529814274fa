#!/usr/bin/env bash
# The U-Net example (docs/train-app.md, "The U-Net example"): a U-Net trained to remove
# Gaussian noise from 1024x1024 photographs, each image split over 4 MPI ranks (1x2x2), then
# scored on held-out photographs against the noisy input and classical filters (PSNR), with
# before/after PNGs. Frames: 2x2 mosaics of random crops, flips and quarter turns of
# scikit-image's sample photographs (Debian's python3-skimage) at their own scale; held
# out: two frames of astronaut, coffee, chelsea and rocket, never seen in training. Needs
# Debian's python3-numpy, -scipy, -pil (python3-skimage's dependencies) and h5dump.
# The defaults (800 steps) took 25 minutes on the shared 2-core development machine, 4 ranks
# oversubscribed, 1.65 s a step, and beat the Gaussian filter by 0.58 dB
# (bench/results/unet-example-cpu-2026-11-25.md).
# Arguments go to tessera-train and win over the settings below, e.g. --steps 600, or
# --resume <out>/unet.h5 --steps 1000 to continue a run.
# Environment: TESSERA_UNET_SIZE (1024), TESSERA_UNET_FRAMES (training frames, 48),
# TESSERA_UNET_MODEL (a depth-3, width-8 U-Net residual on a blur, below),
# TESSERA_UNET_NOISE (0.3), TESSERA_UNET_OUT (<build>/unet-example), TESSERA_RANKS (4),
# TESSERA_PREBUILT_BUILD.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

prepare_example_build

require_photos
photos="$SKIMAGE_PHOTOS"
size="${TESSERA_UNET_SIZE:-1024}"
frames="${TESSERA_UNET_FRAMES:-48}"
noise="${TESSERA_UNET_NOISE:-0.3}"
out="${TESSERA_UNET_OUT:-$build/unet-example}"
python=/usr/bin/python3
mkdir -p "$out"

train_photos=("$photos"/{motorcycle_left,motorcycle_right,horse,camera,moon,hubble_deep_field,retina}.*
              "$photos"/{grass,gravel,brick,coins,clock_motion,cell,ihc,page,color}.png)
held_out_photos=("$photos"/{astronaut,coffee,chelsea,rocket}.*)
data="$out/data-$size-$frames"
if [[ ! -f "$data/train.h5" || ! -f "$data/held-out.h5" ]]; then
  log "making $frames ${size}x${size} mosaic frames of ${#train_photos[@]} photographs, 2 of the ${#held_out_photos[@]} held out"
  rm -rf "$data"
  mapfile -t train_frames < <("$python" "$TESSERA_ROOT/scripts/lib/augment_photos.py" --out "$data/train" \
                                --size "$size" --frames "$frames" --seed 1 "${train_photos[@]}")
  mapfile -t held_out_frames < <("$python" "$TESSERA_ROOT/scripts/lib/augment_photos.py" --out "$data/held-out" \
                                   --size "$size" --frames 2 --seed 2 "${held_out_photos[@]}")
  "$build/apps/data/tessera-data" images --crop --size "${size}x${size}" --out "$data/train.h5" "${train_frames[@]}"
  "$build/apps/data/tessera-data" images --crop --size "${size}x${size}" --out "$data/held-out.h5" "${held_out_frames[@]}"
fi
train_frames=("$data"/train/frame-*.png)
held_out_frames=("$data"/held-out/frame-{0,1}.png)  # the order of held-out.h5

# The unet preset's network (docs/models.md) at depth 3, width 8, without its batch norm: at
# batch 1 the batch statistics are one image's, which takes each image's brightness and
# contrast from every feature (the preset's training loss stalled at 0.013 here). Residual on
# a blur: the output is the noisy input blurred (`blur`: a 5x5 box filter twice, a 9x9 tent
# of standard deviation 2, close to the Gaussian filter the baseline picks) plus the U-Net's
# correction (`add[blur, prev]`), so colours and smooth areas pass through from the first
# step and the net only learns what the blur gets wrong. Without the blur path the net built
# every colour itself, from 16 photographs 9 of them grey, and kept a colour cast (21.0 dB
# after 560 steps); adding the raw input instead (as DnCNN) left the width-8 net to pass the
# σ 0.3 noise through exactly, and it learned slowly (13.4 dB after 150 steps at 512x512).
unet3='block double(c) { conv(out=$c,k=3,pad=1), relu, conv(out=$c,k=3,pad=1), relu }
block up(c, skip) { deconv(out=$c,k=2,stride=2), concat[$skip, prev], double(c=$c) }
box: avgpool(k=5,stride=1,pad=2,count_include_pad=false)[input],
blur: avgpool(k=5,stride=1,pad=2,count_include_pad=false),
e0: double(c=8)[input], maxpool(k=2), e1: double(c=16), maxpool(k=2), e2: double(c=32), maxpool(k=2),
double(c=64), up(c=32, skip=e2), up(c=16, skip=e1), up(c=8, skip=e0), conv(out=3,k=1), add[blur, prev]'
cat >"$out/example.cfg" <<CONFIG
model = ${TESSERA_UNET_MODEL:-$(tr '\n' ' ' <<<"$unet3")}
data = $data/train.h5
val-data = $data/held-out.h5
noise = $noise
grid = 1x2x2
batch = 1
steps = 800
optimizer = adam
lr = 0.003
save = $out/unet.h5
predict-out = $out/predictions.h5
metrics = $out/metrics.jsonl
# Writing a checkpoint with 4 ranks oversubscribed on a busy 2-core machine took 25 s.
watchdog = 300
CONFIG
train_example "$build" "a U-Net denoiser" "$out/example.cfg" "$out/metrics.jsonl" "$@"

log "scoring the held-out images (PSNR) and drawing the comparisons"
# The baselines' parameters are chosen on every 4th training frame (enough, and quick).
"$python" "$TESSERA_ROOT/scripts/lib/denoise_report.py" --predictions "$out/predictions.h5" --noise "$noise" \
  --held-out "${held_out_frames[@]}" --train $(printf '%s\n' "${train_frames[@]}" | awk 'NR % 4 == 1') \
  --out "$out" | tee "$out/psnr.txt"
log "checkpoint, predictions, PSNR table (psnr.txt, results.json) and PNGs are in $out"
