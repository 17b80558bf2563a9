#!/usr/bin/env bash
# The GPU checks that CPU cannot make, in one device call of at most 600 s (a session's GPU time is 15 minutes).
# Prepare on your own machine, from the project root: wheels of the locked versions the GPU image lacks, in .whl/
#   bash ../shared/gpu/fetch-wheels.sh pytest-timeout -c constraints.txt
#   (optionally more of the lock: transformers, peft, accelerate, ... with `pip download -c constraints.txt`)
# then on the GPU machine (device tool, carry [".whl"], timeout 600):  bash bench/gpu_checks.sh
# Parts, each with its own time limit, outputs under $OUT (or ./gpu-verify):
#   cuda-context   what a trial's process pays for CUDA, and why a warm worker must not make a context (bench/cuda_context.py)
#   trainer-cuda   the Trainer against a hand loop and transformers' Trainer on CUDA with fp16 (bench/trainer_overhead.py)
#   tests-gpu      tests/trainer and tests/hpo/scheduling with a GPU present
#   packing        bench/gpu_packing.py at 1 and 4 trials per GPU and auto; big trials sized so that 3 fit, 4 do not
set -u
out=${OUT:-$PWD/gpu-verify}; mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    > "$out/install.log" 2>&1 || { echo "wheel install failed: $(tail -1 "$out/install.log")"; exit 1; }
  export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
else
  echo "no .whl/ folder: see this script's header"; exit 1
fi
export WANDB_MODE=offline WANDB_SILENT=true HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, optuna, transformers, peft; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| optuna', optuna.__version__, '| transformers', transformers.__version__, '| peft', peft.__version__)" 2>&1 | tee -a "$out/gpu.txt"
nproc | sed 's/^/cpus /' | tee -a "$out/gpu.txt"
parts=${GPU_CHECKS:-cuda-context trainer-cuda tests-gpu packing}  # a rerun may name fewer
run() {  # $1: name, $2: seconds, rest: command
  local name=$1 limit=$2; shift 2
  case " $parts " in *" $name "*) ;; *) return 0 ;; esac
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1; local code=$?
  echo "== $name: exit $code in $((SECONDS - start)) s: $(grep -E 'passed|failed|error|ratio|x spawn|lost|trials/h|refused' "$out/$name.log" | tail -4 | tr '\n' ' ' | cut -c1-400)"
}
total_gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{print $1 / 1024}')
big_gib=$(awk -v t="$total_gib" 'BEGIN {printf "%.0f", t / 3.3}')  # three fit beside each other, four do not
run cuda-context 45 python3 bench/cuda_context.py --repeats 5
run trainer-cuda 60 python3 bench/trainer_overhead.py --device cuda --fp16 --case mlp --steps 500 --repeats 3
run tests-gpu 210 python3 -m pytest -q -p no:cacheprovider --durations=10 tests/trainer tests/hpo/scheduling
run packing 230 python3 bench/gpu_packing.py --study "${PACKING_STUDY:-both}" --modes 1,4,auto --trials 8 --big-trials 5 --big-gib "$big_gib" --keep
find /tmp -maxdepth 3 -name hpo.log -path "*packing*" -exec sh -c 'echo "== $1"; grep -iE "error|fail|oom|memory" "$1" | head -8' _ {} \; > "$out/packing-hpo.txt" 2>&1
