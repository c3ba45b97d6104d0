#!/usr/bin/env bash
# tools/gpu_check.sh's own control flow, on a machine without a GPU: a lent GPU's minutes must not go to a step that
# hangs past STEP_TIMEOUT, outlives gpu-check, or to a misspelt step name. A stub nvidia-smi and a stand-in for the
# carried bertrain (bench kernels in bf16 hangs until SIGTERM, in fp32 ends at once) in a scratch folder; no step
# touches a GPU. Exits 1 naming the first check that failed.
#   ./tests/check_gpu_check.sh SOURCE_DIR SCRATCH_DIR
set -uo pipefail
source_dir=$1 scratch=$2
rm -rf "$scratch"
mkdir -p "$scratch/bin" "$scratch/build" "$scratch/nogpu"
fail() { echo "check_gpu_check: $*" >&2; exit 1; }

cat >"$scratch/bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: Stub GPU (UUID: GPU-0)" ;;
  *noheader*) echo "Stub GPU, 0.0, 1 MiB, 9.0" ;;
  *) echo "stub nvidia-smi" ;;
esac
EOF
printf '#!/bin/sh\nexit 9\n' >"$scratch/nogpu/nvidia-smi"
# PyTorch, if it imports here, sees no GPU: the torch steps are unavailable whatever this machine has.
real_python=$(command -v python3)
cat >"$scratch/bin/python3" <<EOF
#!/bin/sh
case "\$*" in *torch.cuda.is_available*) exit 1 ;; esac
exec "$real_python" "\$@"
EOF
cat >"$scratch/build/bertrain" <<'EOF'
#!/bin/bash
case "$*" in *"--precision fp32"*) echo '{"record": "done"}'; exit 0 ;; esac
trap 'echo "stand-in: SIGTERM"; exit 0' TERM
echo started
while :; do sleep 0.2; done
EOF
chmod +x "$scratch/bin/"* "$scratch/nogpu/nvidia-smi" "$scratch/build/bertrain"
# gpu_check NAME=VALUE... OUT: gpu-check on the stubs, with those settings.
gpu_check=(env "PATH=$scratch/bin:$PATH" "BUILD_DIR=$scratch/build")
gpu_check() { "${gpu_check[@]}" "${@:1:$#-1}" "$source_dir/tools/gpu_check.sh" "${@: -1}"; }
stand_ins() {  # how many stand-ins run (from /proc: procps may not be installed)
  local cmdline count=0
  for cmdline in /proc/[0-9]*/cmdline; do
    { tr '\0' ' ' <"$cmdline"; } 2>/dev/null | grep -q "$scratch/build/bertrain" && count=$((count + 1))
  done
  echo $count
}

# No GPU: exit 1 at once, no OUT written.
PATH="$scratch/nogpu:$PATH" "$source_dir/tools/gpu_check.sh" "$scratch/out-nogpu" >/dev/null 2>&1
rc=$?
[ $rc -eq 1 ] || fail "without a GPU: exit $rc, expected 1"
[ ! -e "$scratch/out-nogpu" ] || fail "without a GPU: $scratch/out-nogpu was written"

# A name that is no step: refused before anything runs.
gpu_check GPU_CHECK_ONLY="kernel-bf16" "$scratch/out-typo" >/dev/null 2>"$scratch/typo.err"
rc=$?
[ $rc -eq 2 ] || fail "GPU_CHECK_ONLY=kernel-bf16: exit $rc, expected 2"
grep -q "names no step 'kernel-bf16'" "$scratch/typo.err" || fail "the misspelt name is not named: $(cat "$scratch/typo.err")"

# A hung step: ended whole at STEP_TIMEOUT and recorded as timed out (the stand-in exits 0 on SIGTERM, which was
# recorded as passed); a named step that cannot run here gets its row; the run fails.
gpu_check GPU_CHECK_ONLY="kernels-bf16 torch-kernels-bf16" STEP_TIMEOUT=2 "$scratch/out-hung" >"$scratch/hung.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a hung step: exit $rc, expected 1 ($(cat "$scratch/hung.out"))"
grep -q "^| kernels-bf16 | FAILED (timed out after 2 s) |" "$scratch/out-hung/summary.md" ||
  fail "the hung step's row: $(cat "$scratch/out-hung/summary.md")"
grep -q "^| torch-kernels-bf16 | SKIPPED (" "$scratch/out-hung/summary.md" ||
  fail "the unavailable step's row: $(cat "$scratch/out-hung/summary.md")"
[ "$(stand_ins)" -eq 0 ] || fail "the timed-out step is still running"

# A quick step does not keep `gpu-check | cat` waiting for STEP_TIMEOUT (the watchdog's sleep held stdout).
start=$(date +%s)
timeout 60 bash -c '"$@" | cat' _ "${gpu_check[@]}" GPU_CHECK_ONLY=kernels-fp32 STEP_TIMEOUT=300 \
  "$source_dir/tools/gpu_check.sh" "$scratch/out-quick" >/dev/null 2>&1
rc=$?
[ $rc -eq 0 ] || fail "a quick step piped: exit $rc, expected 0 (124: it waited for the watchdog)"
[ $(($(date +%s) - start)) -lt 30 ] || fail "a quick step piped took $(($(date +%s) - start)) s"

# gpu-check killed (a deadline) while a step runs: the step ends with it.
timeout 3 "${gpu_check[@]}" GPU_CHECK_ONLY=kernels-bf16 STEP_TIMEOUT=100 "$source_dir/tools/gpu_check.sh" \
  "$scratch/out-killed" >/dev/null 2>&1
sleep 1
[ "$(stand_ins)" -eq 0 ] || fail "a step outlived gpu-check"
rm -rf "$scratch"
