#!/usr/bin/env bash
# The GPU checks that CPU cannot make, in one device call of about 9 minutes (a session's GPU time is 15, start included).
# Prepare on your own machine, from the project root: wheels of the locked versions the GPU image lacks, in .whl/
#   bash ../shared/gpu/fetch-wheels.sh hjson transformers huggingface-hub truststore httpx2 httpcore2 idna click \
#     peft accelerate plotly narwhals psycopg psycopg-binary -c constraints.txt        # 40 MB in all
#   .venv/bin/pip wheel --no-deps --no-build-isolation -c constraints.txt -w .whl deepspeed   # DeepSpeed: an sdist
# and a dry run here (no GPU: each part says so, or checks its arguments):  GPU_CHECKS_DRY=1 bash bench/gpu/checks.sh
# then on the GPU machine (device tool, carry [".whl"], timeout 600):  bash bench/gpu/checks.sh
# Parts, in the order GPU_CHECKS names them (default: strategies packing oom tests-gpu), each with its own time limit;
# logs under $OUT (or ./gpu-verify):
#   packing      bench/gpu/packing.py at 1 and 4 trials per GPU and auto; big trials sized so that 3 fit, 4 do not
#   oom          bench/gpu/oom.py: a trial that outgrows the GPU beside others is requeued and completes; a trial
#                bigger than the GPU fails in one line
#   strategies   bench/gpu/strategies.py: DDP, FSDP2, ZeRO-2, ZeRO-3 on one GPU over NCCL, bf16 and fp16, exact resume
#   tests-gpu    the test files that touch CUDA or GPU memory, with the GPU present
#   (not by default, GPU_CHECKS="... tests-broad" adds it: it holds tests-gpu's files)
#   tests-broad  tests/trainer and tests/hpo with the GPU present, in parallel (pytest-xdist)
#   cuda-context, trainer-cuda: measured on 2026-11-25
set -u
out=${OUT:-$PWD/gpu-verify}; mkdir -p "$out"
dry=${GPU_CHECKS_DRY:-}
if [ -z "$dry" ]; then
  if ! ls .whl/*.whl >/dev/null 2>&1; then echo "no .whl/ folder: see this script's header"; exit 1; fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    > /tmp/install.log 2>&1 || { echo "wheel install failed: $(tail -1 /tmp/install.log)"; exit 1; }
  export PYTHONPATH=$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export WANDB_MODE=offline WANDB_SILENT=true HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
python=${GPU_CHECKS_PYTHON:-python3}
summary=$out/summary.txt
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  $python -c "import torch, optuna, transformers, peft, deepspeed; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| optuna', optuna.__version__, '| transformers', transformers.__version__, '| peft', peft.__version__, '| deepspeed', deepspeed.__version__)" 2>&1 | tail -1
  echo "cpus $(nproc); $(date -u +%FT%TZ)"
} | tee "$summary"
# The parts, in the order they run: the one whose last GPU run failed first (ZeRO); a rerun may name fewer or others
parts=${GPU_CHECKS:-strategies packing oom tests-gpu}
run() {  # $1: name, $2: seconds, rest: command
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1; local code=$?
  # -v names each test as it ends: a part cut by its limit still says which failed (pytest's summary comes last)
  { echo "== $name: exit $code in $((SECONDS - start)) s"; grep -E '^== | FAILED |^FAILED|[0-9]+ (passed|failed|errors?)( |,|$)' "$out/$name.log" | tail -30; } \
    | tee -a "$summary"
}
total_gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1 | awk '{print $1 / 1024}')
big_gib=$(awk -v t="${total_gib:-80}" 'BEGIN {printf "%.0f", t / 3.3}')  # three fit beside each other, four do not
check=${dry:+--check}
keep=--keep  # a real run keeps the study folders for the logs copied below; a dry run leaves none in /tmp
if [ -n "$dry" ]; then keep=""; fi
gpu_tests="tests/hpo/scheduling/test_gpu_gate.py tests/hpo/scheduling/test_gpu_sharing_study.py
  tests/hpo/scheduling/test_gpu_memory.py tests/hpo/scheduling/test_scheduler_slots.py tests/hpo/scheduling/test_packing.py
  tests/hpo/scheduling/test_scheduler_view.py tests/hpo/trial/test_oom.py tests/hpo/tracking/test_tracking_memory.py
  tests/trainer/test_memory.py tests/trainer/test_robustness.py tests/trainer/test_compat_methods.py
  tests/trainer/test_fork_warmup.py tests/hpo/cli/test_status_table.py tests/hpo/cli/test_study_commands.py"
xdist() { [ -n "$dry" ] && echo "--collect-only" || echo "-n $1"; }  # the image has pytest-xdist; the lock does not
part() {  # one part by name, with its own limit
  case $1 in
    # On an H200 (2026-11-28): 1,auto with 6 trials of 150 steps and 4 big ones took 132 s
    packing) run packing 170 $python bench/gpu/packing.py --study both --modes 1,auto --trials 6 --steps 150 \
      --big-trials 4 --big-gib "$big_gib" $keep $check
      find /tmp -maxdepth 3 -name hpo.log -path "*packing*" \
        -exec sh -c 'echo "== $1"; grep -iE "error|fail|oom|memory" "$1" | head -8' _ {} \; > "$out/packing-hpo.txt" 2>&1 ;;
    oom) run oom 130 $python bench/gpu/oom.py --steps 100 $keep $check  # 200 steps: not done in 75 s
      # the workers' logs: what each slot waited for and when the gate let its trial start
      for logs in /tmp/gpu-oom-*/out/.hpo/logs; do [ -d "$logs" ] && cp -r "$logs" "$out/oom-logs"; done ;;
    strategies) run strategies 140 $python bench/gpu/strategies.py --setups ddp,fsdp,zero2,zero3 \
      --precisions bf16,fp16 $check ;;
    # 114 tests: 63 % done in 75 s one at a time on an H200
    tests-gpu) run tests-gpu 90 $python -m pytest -v -p no:cacheprovider --timeout 60 $(xdist 8) $gpu_tests ;;
    # Left out: what needs a package too big to carry in a device call (MiniLM's 80 MB wheel, wandb, mlflow and their
    # dependencies). On an H200 (2026-11-29), 15 workers: 952 in 133 s, every failure one of these or fixed since
    tests-broad) run tests-broad 150 $python -m pytest -v -p no:cacheprovider --timeout 60 $(xdist 15) \
      tests/trainer tests/hpo --ignore tests/trainer/test_adapters.py \
      --ignore tests/hpo/export/test_peft_export.py --ignore tests/hpo/cli/test_peft_cli.py \
      --ignore tests/trainer/test_compat_report_to.py --ignore tests/trainer/test_report_to.py \
      --ignore tests/hpo/cli/test_train_report_to.py --ignore tests/hpo/tracking/test_tensorboard_mlflow_study.py \
      --ignore tests/hpo/tracking/test_tracking_study.py \
      --deselect tests/hpo/integrations/test_hp_search.py::test_report_to_gives_each_trial_its_own_tensorboard_folder_and_wandb_run \
      --deselect tests/hpo/export/test_export.py::test_export_of_a_transformers_model_loads_with_from_pretrained ;;
    cuda-context) run cuda-context 45 $python bench/gpu/cuda_context.py --repeats 5 ;;
    trainer-cuda) run trainer-cuda 60 $python bench/overhead/trainer_loop.py --device cuda --fp16 --case mlp \
      --steps 500 --repeats 3 ;;
    *) echo "== $1: unknown part (packing oom strategies tests-gpu tests-broad cuda-context trainer-cuda)" \
      | tee -a "$summary" ;;
  esac
}
for name in $parts; do part "$name"; done
