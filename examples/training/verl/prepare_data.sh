#!/usr/bin/env bash
# Build the verl inputs for agentic GRPO: parquet rows + tool-config YAML.
#   DATASET=path/to/train.csv VAL=path/to/val.csv OUT=~/data/geosleuth bash prepare_data.sh
set -euo pipefail
: "${DATASET:?set DATASET to a training set any geosleuth loader reads}"
OUT="${OUT:-$HOME/data/geosleuth}"
REWARD="${REWARD:-step}"                 # the reward grpo_single_node.sh will use (checked against the style)
STYLE="${STYLE:-}"                       # prompt style (default: the reward's paper's: geovista for
                                         # hierarchical, geoagent for semantic / geo_similarity, else spotagent)
MODEL_DIR="${MODEL_DIR:-}"               # local model directory: its chat template is checked for tool rendering
TOOLS="${TOOLS:-image_zoom_in_tool,web_search,geocode}"
SETTINGS="${TOOL_SETTINGS:-}"            # tool settings file (providers, cache); keys come from the environment
PIXELS="${PIXEL_BUDGET:-}"               # the processor's max_pixels (default: MODEL_DIR's, else 2000000)
FACTOR="${RESIZE_FACTOR:-}"              # its patch × merge size (default: MODEL_DIR's, else 28; Qwen3-VL 32)
mkdir -p "$OUT"

settings_args=()
if [[ -n "$SETTINGS" ]]; then settings_args=(--tool-settings "$SETTINGS"); fi
style_args=(--reward "$REWARD")
if [[ -n "$STYLE" ]]; then style_args+=(--prompt "$STYLE"); fi
if [[ -n "$MODEL_DIR" ]]; then style_args+=(--model "$MODEL_DIR"); fi
# the prompt states the image size the model will see: MODEL_DIR's preprocessor_config.json
# gives max_pixels / min_pixels / the patch factor unless PIXEL_BUDGET / RESIZE_FACTOR are set
if [[ -n "$PIXELS" ]]; then style_args+=(--max-pixels "$PIXELS"); fi
if [[ -n "$FACTOR" ]]; then style_args+=(--resize-factor "$FACTOR"); fi

# Optional: a geographically balanced subset, and only images of useful difficulty.
if [[ -n "${SAMPLE_SIZE:-}" ]]; then
  geosleuth data sample "$DATASET" --size "$SAMPLE_SIZE" --seed 0 -o "$OUT/train_sampled.jsonl"
  DATASET="$OUT/train_sampled.jsonl"
fi

# export-verl also writes chat_template.hydra when the model's template does not render tools
geosleuth data export-verl "$DATASET" -o "$OUT/train.parquet" "${style_args[@]}" --tools "$TOOLS" \
  "${settings_args[@]}"
if [[ -n "${VAL:-}" ]]; then
  geosleuth data export-verl "$VAL" -o "$OUT/val.parquet" "${style_args[@]}" --tools "$TOOLS" \
    "${settings_args[@]}"
else
  echo "warning: no VAL set: grpo_single_node.sh needs held-out images in $OUT/val.parquet (or VAL_FILE)" >&2
fi
# Tool text is truncated by geosleuth (with a notice) at 4000 characters; keep verl's own
# limit (multi_turn.max_tool_response_length) at least that large.
geosleuth data verl-tool-config -o "$OUT/tools.yaml" --tools "$TOOLS" --max-text-chars 4000 "${settings_args[@]}"
