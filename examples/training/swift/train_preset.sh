#!/usr/bin/env bash
# ms-swift SFT or GRPO with a paper's reported settings (geosleuth/training/presets.py):
#   PRESET=geoagent-sft MODEL=Qwen/Qwen2.5-VL-7B-Instruct DATASET=sft.jsonl bash train_preset.sh
#   PRESET=geoagent-grpo MODEL=runs/sft DATASET=swift_train.jsonl bash train_preset.sh
#   PRESET=geovista-sft MODEL=Qwen/Qwen2.5-VL-7B-Instruct DATASET=sft.jsonl bash train_preset.sh
# SFT records come from `geosleuth data export-sft --to swift`, GRPO rows from `data export-swift`.
# GRPO scores with geosleuth's ORMs (geo_orm_plugin.py): GeoAgent's R_spa (tau 200 km, weight 1.5)
# and R_sem (weight 1.0) unless REWARDS / WEIGHTS say otherwise. Arguments after the script are
# passed to swift last, so they win. Needs GPUs and ms-swift; DRY_RUN=1 prints the swift command
# it would run (on any machine) and stops.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PRESET="${PRESET:?set PRESET to geoagent-sft, geoagent-grpo or geovista-sft}"
MODEL="${MODEL:-Qwen/Qwen2.5-VL-7B-Instruct}"
DATASET="${DATASET:-$HOME/data/geosleuth/swift_train.jsonl}"
OUT="${OUT:-runs/$PRESET}"
mapfile -t preset_args < <(python3 -m geosleuth.training.presets "$PRESET")
[[ ${#preset_args[@]} -gt 0 ]] || { echo "error: no settings for PRESET=$PRESET" >&2; exit 1; }
case "$PRESET" in
  *-grpo)
    read -r -a rewards <<< "${REWARDS:-geo_spatial_200 geo_semantic}"
    read -r -a weights <<< "${WEIGHTS:-1.5 1.0}"
    cmd=(swift rlhf --rlhf_type grpo --external_plugins "$HERE/geo_orm_plugin.py"
         --reward_funcs "${rewards[@]}" --reward_weights "${weights[@]}") ;;
  *-sft) cmd=(swift sft) ;;
  *) echo "error: PRESET=$PRESET is not an ms-swift preset (verl presets: grpo_single_node.sh)" >&2; exit 2 ;;
esac
cmd+=(--model "$MODEL" --dataset "$DATASET" --output_dir "$OUT" --torch_dtype bfloat16 "${preset_args[@]}" "$@")
if [[ "${DRY_RUN:-0}" == 1 ]]; then
  printf '%q ' "${cmd[@]}"; echo
  exit 0
fi
exec "${cmd[@]}"
