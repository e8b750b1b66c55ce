#!/usr/bin/env bash
# The credit sets of the DRRN campaigns (issue 58, point 5): each env's campaign policy at its
# start and at mid-training (baselines/credit/drrn_policies.py made them; they ship in
# baselines/credit/models/), played on the campaign's own panel with its step limit, sized for
# power (issue 64: twice a training batch's task draws, 8 trajectories each). Each command
# journals under baselines/results/fidelity/ and resumes where it stopped; run again to resume
# or re-export. ALFWorld needs ALFWORLD_DATA.
#   bash baselines/credit/drrn-sets.sh [textcraft|sokoban|alfworld ...]
set -euo pipefail
cd "$(dirname "$0")/../.."

one() {  # env stage tasks continuations options...
  local env=$1 stage=$2 tasks=$3 continuations=$4
  shift 4
  agentbench-rl bench fidelity --env "$env" --agent "hf:baselines/credit/models/drrn-$env-$stage" \
    --tasks "$tasks" --group-size 8 --continuations "$continuations" --seed 0 --parallel 256 \
    --out "baselines/results/fidelity/$env-drrn-$stage" \
    --export-set "agentbench_rl/bench/credit/standard/$env-drrn-$stage" "$@"
}

envs=("$@")
[ ${#envs[@]} -gt 0 ] || envs=(textcraft sokoban alfworld)
for env in "${envs[@]}"; do
  for stage in start mid; do
    case $env in
      textcraft) one textcraft $stage 32 32 --panel 20 --category depth-1 --category depth-2 \
        --max-steps 15 ;;
      sokoban) one sokoban $stage 16 32 --panel 8 ;;
      alfworld) one alfworld $stage 16 16 --panel 16 --max-steps 30 ;;
      *) echo "unknown env $env (textcraft, sokoban, alfworld)" >&2; exit 2 ;;
    esac
  done
done
