#!/usr/bin/env bash
# Agentic GRPO with verl 0.9.1 on one node (8 GPUs), geosleuth tools and a geographic reward.
# Run prepare_data.sh first (with VAL=… for the validation set). Values are starting points in
# the range of the published recipes (GeoVista / SpotAgent / Thinking with Map style): group
# size 8, KL 0.001, lr 1e-6, up to 6 tool calls, 16k-token responses. Tool text: geosleuth
# cuts it at 4,000 characters with a notice (verl-tool-config --max-text-chars); verl's own
# max_tool_response_length also counts characters, not tokens, and is set just above so verl
# never cuts blindly. Every zoom adds an image: vLLM accepts 1 + MAX_TOOL_CALLS per prompt.
# Tool calls are read by geosleuth_hermes (verl's hermes format; a call whose JSON is broken
# comes back to the policy as an error instead of silently ending the rollout).
# The reward runs in geosleuth's reward manager (only the policy's own tokens are scored);
# REWARD must match the answer format prepare_data.sh exported (export-verl --reward checks it).
# Needs GPUs and vLLM. DRY_RUN=1 runs the same arguments on any machine (a CPU one too) up to the
# first rollout: verl composes its config, loads both parquet files through the dataset class
# below, the tool YAML and the reward manager, prints a JSON summary and stops.
set -euo pipefail
DATA="${DATA:-$HOME/data/geosleuth}"
MODEL="${MODEL:-Qwen/Qwen2.5-VL-7B-Instruct}"
REWARD="${REWARD:-step}"                # step | piecewise | spatial | hierarchical | semantic | geo_similarity
TRAIN_FILE="${TRAIN_FILE:-$DATA/train.parquet}"   # curriculum: phase1.parquet, then phase2.parquet (docs/training.md)
VAL_FILE="${VAL_FILE:-$DATA/val.parquet}"         # held-out images, never the training file
MAX_TOOL_CALLS="${MAX_TOOL_CALLS:-6}"             # SpotAgent / GeoVista budget
TOOL_TEXT_CHARS="${TOOL_TEXT_CHARS:-4096}"        # characters; >= verl-tool-config --max-text-chars + its notice
NNODES="${NNODES:-1}"
ENTRY=verl.trainer.main_ppo
if [[ "${DRY_RUN:-0}" == 1 ]]; then ENTRY=geosleuth.training.verl.check; fi
GPUS="${GPUS_PER_NODE:-8}"

if [[ ! -f "$VAL_FILE" ]]; then
  echo "error: no validation file $VAL_FILE: export held-out images (prepare_data.sh VAL=…) or set VAL_FILE;" \
    "validating on the training file reports memorised images as accuracy" >&2
  exit 1
fi
if [[ "$(realpath -m "$VAL_FILE")" == "$(realpath -m "$TRAIN_FILE")" ]]; then
  echo "error: VAL_FILE is the training file ($TRAIN_FILE); validate on held-out images" >&2
  exit 1
fi

# export-verl writes a tool-capable chat template when the model's own one lacks tool rendering
template_args=()
if [[ -f "$DATA/chat_template.hydra" ]]; then
  template_args=("actor_rollout_ref.model.custom_chat_template=$(cat "$DATA/chat_template.hydra")")
fi

python3 -m "$ENTRY" \
  algorithm.adv_estimator=grpo \
  algorithm.use_kl_in_reward=False \
  data.train_files="$TRAIN_FILE" \
  data.val_files="$VAL_FILE" \
  data.image_key=images \
  data.return_raw_chat=True \
  data.train_batch_size=128 \
  data.max_prompt_length=4096 \
  data.max_response_length=16384 \
  data.filter_overlong_prompts=True \
  data.custom_cls.path=pkg://geosleuth.training.verl.dataset \
  data.custom_cls.name=GeoSleuthRLHFDataset \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.model.use_remove_padding=True \
  actor_rollout_ref.model.enable_gradient_checkpointing=True \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=32 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.actor.use_kl_loss=True \
  actor_rollout_ref.actor.kl_loss_coef=0.001 \
  actor_rollout_ref.actor.kl_loss_type=low_var_kl \
  actor_rollout_ref.actor.entropy_coeff=0 \
  actor_rollout_ref.actor.loss_agg_mode=token-mean \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.temperature=1.0 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 \
  +actor_rollout_ref.rollout.limit_images=$((MAX_TOOL_CALLS + 1)) \
  actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent \
  actor_rollout_ref.rollout.multi_turn.enable=True \
  actor_rollout_ref.rollout.multi_turn.format=geosleuth_hermes \
  actor_rollout_ref.rollout.multi_turn.max_assistant_turns=$((MAX_TOOL_CALLS + 1)) \
  actor_rollout_ref.rollout.multi_turn.max_user_turns="$MAX_TOOL_CALLS" \
  actor_rollout_ref.rollout.multi_turn.max_parallel_calls=1 \
  actor_rollout_ref.rollout.multi_turn.max_tool_response_length="$TOOL_TEXT_CHARS" \
  actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side=right \
  actor_rollout_ref.rollout.multi_turn.tool_config_path="$DATA/tools.yaml" \
  reward.reward_manager.source=importlib \
  reward.reward_manager.name=GeoSleuthRewardManager \
  reward.reward_manager.module.path=pkg://geosleuth.training.verl.manager \
  +reward.custom_reward_function.reward_kwargs.reward="$REWARD" \
  trainer.logger='["console"]' \
  trainer.project_name=geosleuth \
  trainer.experiment_name="grpo-$REWARD" \
  trainer.n_gpus_per_node="$GPUS" \
  trainer.nnodes="$NNODES" \
  trainer.save_freq=50 \
  trainer.test_freq=25 \
  trainer.total_epochs=2 "${template_args[@]}" "$@"
