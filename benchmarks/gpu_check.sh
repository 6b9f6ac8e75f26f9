#!/usr/bin/env bash
# The GPU figures of docs/benchmarks in one run: one NVIDIA GPU, under 10 minutes, no network.
#
#   bash benchmarks/gpu_check.sh [--data DIR] [OUT_DIR]        # from the repository root
#
# It runs, each step with its own time limit, and prints a summary (every step's full output is in OUT_DIR):
#   1. the CUDA-only tests: no host synchronisation in the training step (torch.cuda.set_sync_debug_mode), and
#      packed (variable-length) attention against the padded reference in bf16;
#   2. the bare step against transformers' AlbertForPreTraining (benchmarks/throughput.py --synthetic, bf16):
#      albert-base 256 x 128 eager and --compile, albert-base and albert-large 64 x 512, albert-xxlarge 16 x 512,
#      with MFU against the datasheet peak and the measured matmul peak;
#   3. the real loop against the bare step (benchmarks/loop_efficiency.py, albert-base 256 x 128, bf16), with the
#      tokens/s and MFU the loop itself writes to metrics.jsonl;
#   4. the embedded default run (`litebert pretrain`, timed), or with --data DIR `litebert pretrain --data DIR`
#      (a directory `litebert data build` made elsewhere: for a machine without sentencex);
#   5. a DDP / FSDP smoke run under torchrun (2 CPU processes over gloo: one GPU cannot hold two NCCL ranks),
#      SIGTERM to one rank included.
# Nothing is installed: litebert runs from src/ with the machine's torch (2.9 or later for packed attention) and
# transformers (its rows are skipped without it). sentencex, which only sentence splitting calls, is stubbed when
# missing so that everything else imports; the default run then needs --data. pytest runs the tests when present.
set -u
DATA=""
if [ "${1:-}" = "--data" ]; then DATA=$2; shift 2; fi
OUT=${1:-gpu-check-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
LITEBERT_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
export LITEBERT_COMMIT
START=$(date +%s)
BUDGET=${GPU_CHECK_SECONDS:-570}  # the whole run; each step also has its own limit
PY=${PYTHON:-python}

left() { echo $((BUDGET - ($(date +%s) - START))); }

step() {  # step NAME SECONDS COMMAND...: run it under a limit (the smaller of SECONDS and what is left)
    local name=$1 limit=$2
    shift 2
    local remaining
    remaining=$(left)
    if [ "$remaining" -lt 20 ]; then
        echo "== $name: skipped (the 10-minute budget is spent)" | tee "$OUT/$name.txt"
        return
    fi
    [ "$limit" -gt "$remaining" ] && limit=$remaining
    echo "== $name (limit ${limit}s): $*"
    local t0=$(date +%s)
    timeout --signal=TERM --kill-after=15 "$limit" "$@" >"$OUT/$name.txt" 2>&1
    local rc=$?
    local took=$(($(date +%s) - t0))
    case $rc in
        0) echo "   ok in ${took}s" ;;
        124 | 137) echo "   stopped at its ${limit}s limit (partial output in $OUT/$name.txt)" ;;
        *) echo "   FAILED (exit $rc) in ${took}s: tail of $OUT/$name.txt:"; tail -n 8 "$OUT/$name.txt" | sed 's/^/     /' ;;
    esac
    echo "$name $rc $took" >>"$OUT/steps.txt"
}

# 0. What this machine has; a stand-in for sentencex when it is missing.
"$PY" - "$OUT" <<'EOF' | tee "$OUT/environment.txt"
import importlib.util, pathlib, platform, sys
import torch
out = pathlib.Path(sys.argv[1])
print(f"python {platform.python_version()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
if not torch.cuda.is_available():
    sys.exit("no CUDA device: this check is for a GPU machine")
print(f"device: {torch.cuda.get_device_name()} (capability {torch.cuda.get_device_capability()})")
have = {m: importlib.util.find_spec(m) is not None for m in
        ("transformers", "sentencepiece", "google.protobuf", "tokenizers", "safetensors", "numpy", "tqdm",
         "sentencex", "pytest", "matplotlib")}
if have["transformers"]:
    import transformers
    print(f"transformers {transformers.__version__}")
missing = [m for m, ok in have.items() if not ok]
print("missing: " + (", ".join(missing) or "nothing"))
if not have["sentencex"]:
    stub = out / "stubs" / "sentencex"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "__init__.py").write_text(
        "def segment(*args, **kwargs):\n"
        "    raise ImportError('sentencex is not installed here (gpu_check.sh stub): build data elsewhere, --data DIR')\n"
    )
    print("sentencex stubbed: sentence splitting is unavailable (the default run needs --data DIR)")
hard = [m for m in ("sentencepiece", "google.protobuf", "tokenizers", "safetensors", "numpy", "tqdm") if not have[m]]
if hard:
    sys.exit(f"litebert cannot be imported without {', '.join(hard)}: pip download them elsewhere and install")
EOF
[ "${PIPESTATUS[0]}" -ne 0 ] && exit 1
[ -d "$OUT/stubs" ] && export PYTHONPATH="$PYTHONPATH:$OUT/stubs"
HAVE() { grep -q "missing:.*\b$1\b" "$OUT/environment.txt" && return 1 || return 0; }

# 1. The CUDA-only tests.
if HAVE pytest; then
    step cuda-tests 150 "$PY" -m pytest -q -p no:cacheprovider -o addopts="" \
        "tests/train/test_step.py::test_cuda_steps_between_log_steps_never_synchronise" \
        "tests/model/test_model.py::test_packed_attention_on_a_gpu_gives_the_padded_reference_in_bf16" -rs
else
    echo "== cuda-tests: skipped (no pytest here)" | tee "$OUT/cuda-tests.txt"
fi

# 2 and 3. The bare step against transformers, and the real loop against the bare step.
BENCH=("$PY" benchmarks/throughput.py --device cuda --synthetic --case pretrain --precision bf16 --reps 3
       --cache "$OUT/cache")
HAVE transformers || BENCH=()
LOOP=("$PY" benchmarks/loop_efficiency.py --device cuda --preset albert-base --batch 256 --seq 128 --precision bf16
      --steps 10 --rounds 4)
if [ ${#BENCH[@]} -gt 0 ]; then
    step base-128 90 "${BENCH[@]}" --preset albert-base --seq 128 --batch 256 --rounds 2
fi
step loop-128 120 "${LOOP[@]}"
if [ ${#BENCH[@]} -gt 0 ]; then
    step base-128-compiled 150 "${BENCH[@]}" --preset albert-base --seq 128 --batch 256 --rounds 2 --compile
    step base-512 60 "${BENCH[@]}" --preset albert-base --seq 512 --batch 64
    step large-512 75 "${BENCH[@]}" --preset albert-large --seq 512 --batch 64
fi

# 4. The default run (or a pretraining run on prepared data), timed by the command's own clock.
if [ -n "$DATA" ]; then
    step default-run 150 "$PY" -m litebert pretrain --data "$DATA" --out "$OUT/run" --no-progress
elif HAVE sentencex; then
    step default-run 150 "$PY" -m litebert pretrain --out "$OUT/run" --no-progress
else
    echo "== default-run: skipped (sentencex missing; pass --data DIR built by litebert data build)" | tee "$OUT/default-run.txt"
fi

# 5. DDP and FSDP under torchrun, SIGTERM to one rank included.
if HAVE pytest; then
    step ddp-fsdp 120 "$PY" -m pytest -q -p no:cacheprovider -o addopts="" tests/train/test_dist.py
fi
if [ ${#BENCH[@]} -gt 0 ]; then
    step xxlarge-512 90 "${BENCH[@]}" --preset albert-xxlarge --seq 512 --batch 16
fi

# Summary: the lines that carry the figures.
{
    echo
    echo "# gpu_check.sh at commit $LITEBERT_COMMIT, $(date -u +%Y-%m-%dT%H:%MZ), $(($(date +%s) - START)) s"
    head -n 3 "$OUT/environment.txt"
    for f in base-128 base-128-compiled base-512 large-512 xxlarge-512; do
        [ -f "$OUT/$f.txt" ] && grep -E "^(albert|# datasheet|# dense)" "$OUT/$f.txt" | sed "s/^/$f: /"
    done
    [ -f "$OUT/loop-128.txt" ] && grep -E "warm-up|interval|efficiency" "$OUT/loop-128.txt" | sed "s/^/loop: /"
    [ -f "$OUT/default-run.txt" ] && grep -E '"(elapsed_s|eval_mlm_acc|eval_sop_acc|eval_mlm_loss|steps)"' \
        "$OUT/default-run.txt" | tr -d '\n' | sed 's/^/default run: /' && echo
    for f in cuda-tests ddp-fsdp; do
        [ -f "$OUT/$f.txt" ] && tail -n 1 "$OUT/$f.txt" | sed "s/^/$f: /"
    done
} | tee "$OUT/summary.txt"
