# Sourced by the .ci scripts that test in an environment of their own (verl, vllm, openenv,
# verifiers, trainers); the rule for that environment is written here once.
#
#   ci_venv NAME KEPT [PYTHON]
#
# sets `venv` to the folder named by the variable KEPT when it is set (that venv is kept, and
# reused when it exists, so the same one runs the CLI by hand), else to a fresh temporary folder
# that is removed when the calling script exits: left behind, five such venvs of 1-5 GB each
# filled CI's disk. It creates the venv with PYTHON (default: python), installs the pinned torch
# into it, and sets `constraints` to a file that pins torch for every later install: this
# version's CPU wheel lies on the machine, and an unpinned torch would pull a CUDA build of
# several GB.
ci_venv() {
  local name="$1" kept="${!2:-}" python="${3:-python}"
  local scratch
  scratch="$(mktemp -d)"
  # shellcheck disable=SC2064  # the folder is fixed now, on purpose
  trap "rm -rf '$scratch'" EXIT
  venv="${kept:-$scratch/$name}"
  constraints="$scratch/constraints.txt"
  echo "torch==2.13.0" > "$constraints"
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  "$venv/bin/pip" install -q torch==2.13.0
}
