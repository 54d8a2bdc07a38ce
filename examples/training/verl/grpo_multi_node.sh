#!/usr/bin/env bash
# Multi-node GRPO: start Ray on every node, then launch grpo_single_node.sh once, on the head.
#   head:    ROLE=head bash grpo_multi_node.sh
#   workers: ROLE=worker HEAD_IP=10.0.0.1 bash grpo_multi_node.sh
#   head:    NNODES=4 bash grpo_multi_node.sh launch
# Every node needs: the same geosleuth install, the parquet/tools.yaml paths, the images
# referenced by tools_kwargs (zoom reads the original file), the tool API keys in its
# environment (GEOSLEUTH_<PROVIDER>_API_KEY), and a shared tool cache (cache.backend: redis
# in the tool settings) so repeated searches across workers hit the cache.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PORT="${RAY_PORT:-6379}"
case "${1:-${ROLE:-}}" in
  head)   ray start --head --port="$PORT" --num-gpus="${GPUS_PER_NODE:-8}" ;;
  worker) ray start --address="${HEAD_IP:?set HEAD_IP}:$PORT" --num-gpus="${GPUS_PER_NODE:-8}" ;;
  launch) NNODES="${NNODES:?set NNODES}" bash "$HERE/grpo_single_node.sh" \
            actor_rollout_ref.rollout.tensor_model_parallel_size=4 data.train_batch_size=512 ;;
  *) echo "usage: ROLE=head|worker $0, then $0 launch on the head" >&2; exit 2 ;;
esac
