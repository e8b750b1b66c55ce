#!/usr/bin/env bash
# The standard credit sets of the real envs (agentbench_rl/bench/credit/standard/; the MDPs'
# come from `agentbench-rl bench credit-set mdps`), each sized to the power goal of issue 64: no
# task holds more than 25% of the truth's variance and a 0.05 Pearson difference between two
# estimators is resolved at 80% power (tests/bench/test_credit.py holds every shipped one to
# it). A set's tasks came from the card's "tasks for 0.05" at its first size, rounded up; those
# are lower bounds, so a set is checked once built (`agentbench-rl bench credit --no-speed`).
# Each command journals under baselines/results/fidelity/<journal> (-v2: the power-sized
# rebuild of a smaller first set, which baselines/credit/v1/ keeps) and resumes where it
# stopped; run again to resume or re-export, then pin the arrays in
# agentbench_rl/bench/credit/pins.py. ALFWorld needs ALFWORLD_DATA, WebShop WEBSHOP_DATA.
#   bash baselines/credit/standard-sets.sh [SET ...]
set -euo pipefail
cd "$(dirname "$0")/../.."

one() {  # set journal options...
  local name=$1 journal=$2
  shift 2
  agentbench-rl bench fidelity "$@" --out "baselines/results/fidelity/$journal" \
    --export-set "agentbench_rl/bench/credit/standard/$name"
}

drrn() {  # set env stage tasks continuations journal options...: a DRRN campaign's policy
  local name=$1 env=$2 stage=$3 tasks=$4 continuations=$5
  shift 5
  one "$name" "$@" --env "$env" --agent "hf:baselines/credit/models/drrn-$env-$stage" \
    --tasks "$tasks" --group-size 8 --continuations "$continuations" --seed 0 --parallel 256
}

undo='expert_recovery="undo"'
textcraft_panel=(--panel 20 --category depth-1 --category depth-2 --max-steps 15)
sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(alfworld-drrn-start alfworld-drrn-mid alfworld-seen-undo-expert
  alfworld-unseen-undo-expert sokoban-bc-start sokoban-drrn-start sokoban-drrn-mid
  textcraft-drrn-start textcraft-drrn-mid textcraft-noisy0.6-expert textcraft-noisy0.9-expert
  textcraft-noisy0.95-expert webshop-noisy0.3-expert webshop-noisy0.3-rule webshop-noisy0.6-expert
  webshop-tiny)
for name in "${sets[@]}"; do
  case $name in
    alfworld-drrn-start) drrn "$name" alfworld start 16 16 "$name" --panel 16 --max-steps 30 ;;
    alfworld-drrn-mid) drrn "$name" alfworld mid 40 16 "$name-v2" --panel 16 --max-steps 30 ;;
    alfworld-seen-undo-expert) one "$name" "$name-v2" --env alfworld --agent noisy:0.3:expert \
      --split valid_seen --max-steps 10 --tasks 16 --env-kwargs "$undo" ;;
    alfworld-unseen-undo-expert) one "$name" "$name-v2" --env alfworld --agent noisy:0.3:expert \
      --split valid_unseen --max-steps 10 --tasks 40 --env-kwargs "$undo" ;;
    sokoban-bc-start) one "$name" "$name-v2" --env sokoban \
      --agent hf:baselines/starts/673eea03e6ab9789 --tasks 32 ;;
    sokoban-drrn-start) drrn "$name" sokoban start 52 32 "$name-v2" --panel 8 ;;
    sokoban-drrn-mid) drrn "$name" sokoban mid 32 32 "$name-v2" --panel 8 ;;
    textcraft-drrn-start) drrn "$name" textcraft start 32 32 "$name" "${textcraft_panel[@]}" ;;
    textcraft-drrn-mid) drrn "$name" textcraft mid 112 32 "$name-v2" "${textcraft_panel[@]}" ;;
    textcraft-noisy0.6-expert) one "$name" "$name-v2" --env textcraft --agent noisy:0.6:expert \
      --tasks 80 --parallel 128 ;;
    textcraft-noisy0.9-expert) one "$name" "$name-v2" --env textcraft --agent noisy:0.9:expert \
      --tasks 24 --parallel 128 ;;
    textcraft-noisy0.95-expert) one "$name" "$name-v2" --env textcraft \
      --agent noisy:0.95:expert --tasks 56 --parallel 128 ;;
    webshop-noisy0.3-expert) one "$name" "$name-v2" --env webshop --agent noisy:0.3:expert \
      --tasks 104 ;;
    webshop-noisy0.3-rule) one "$name" "$name-v2" --env webshop --agent noisy:0.3:rule --tasks 40 ;;
    webshop-noisy0.6-expert) one "$name" "$name-v2" --env webshop --agent noisy:0.6:expert \
      --tasks 24 ;;
    webshop-tiny) one "$name" "$name-v2" --env webshop \
      --agent hf:baselines/credit/models/webshop-tiny --tasks 40 --max-steps 15 ;;
    *) echo "unknown set $name" >&2; exit 2 ;;
  esac
done
