#!/usr/bin/env bash
# tools/gpu_check.sh's own control flow, on a machine without a GPU: a lent GPU's minutes must not go to a step that
# hangs past STEP_TIMEOUT, outlives gpu-check, or to a misspelt step name. A stub nvidia-smi and a stand-in for the
# carried bertrain (bench kernels: in bf16 it hangs until SIGTERM, with --only attention, run by with_env's subshell
# as most steps run their commands, it ignores SIGTERM, in fp32 it ends at once) in a scratch folder; no step
# touches a GPU. Exits 1 naming the first check that failed.
#   ./tests/check_gpu_check.sh SOURCE_DIR SCRATCH_DIR
set -uo pipefail
source_dir=$1 scratch=$2
rm -rf "$scratch"
mkdir -p "$scratch/bin" "$scratch/build" "$scratch/nogpu" "$scratch/deps"
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
case "$*" in
  *"--only attention"*) trap '' TERM ;;
  *) trap 'echo "stand-in: SIGTERM"; exit 0' TERM ;;
esac
echo started
while :; do sleep 0.2; done
EOF
chmod +x "$scratch/bin/"* "$scratch/nogpu/nvidia-smi" "$scratch/build/bertrain"
# gpu_check NAME=VALUE... OUT: gpu-check on the stubs, with those settings.
# (An empty bundle: without an mpirun, gpu-check would unpack the bundle's Open MPI wheel beside BUILD_DIR.)
gpu_check=(env "PATH=$scratch/bin:$PATH" "BUILD_DIR=$scratch/build" "BERTRAIN_DEPS_DIR=$scratch/deps" STEP_KILL_GRACE=1)
gpu_check() { "${gpu_check[@]}" "${@:1:$#-1}" "$source_dir/tools/gpu_check.sh" "${@: -1}"; }
# After a step was ended: none of the stand-ins may still run (waiting up to 10 s for them to exit on a loaded
# machine). Counted from /proc: procps may not be installed.
stand_ins() {
  local cmdline count=0
  for cmdline in /proc/[0-9]*/cmdline; do
    { tr '\0' ' ' <"$cmdline"; } 2>/dev/null | grep -q "$scratch/build/bertrain" && count=$((count + 1))
  done
  echo $count
}
none_left() {
  local _
  for _ in $(seq 100); do
    [ "$(stand_ins)" -eq 0 ] && return 0
    sleep 0.1
  done
  return 1
}

# No GPU: exit 1 at once, no OUT written.
PATH="$scratch/nogpu:$PATH" "$source_dir/tools/gpu_check.sh" "$scratch/out-nogpu" >/dev/null 2>&1
rc=$?
[ $rc -eq 1 ] || fail "without a GPU: exit $rc, expected 1"
[ ! -e "$scratch/out-nogpu" ] || fail "without a GPU: $scratch/out-nogpu was written"

# A name that is no step: refused before anything runs.
gpu_check GPU_CHECK_ONLY=$'kernels-fp32\nkernel-bf16' "$scratch/out-typo" >/dev/null 2>"$scratch/typo.err"
rc=$?
[ $rc -eq 2 ] || fail "GPU_CHECK_ONLY=kernel-bf16: exit $rc, expected 2"
grep -q "names no step 'kernel-bf16'" "$scratch/typo.err" || fail "the misspelt name is not named: $(cat "$scratch/typo.err")"

# Hung steps: ended whole at STEP_TIMEOUT and recorded as timed out (the first stand-in exits 0 on SIGTERM, which
# was recorded as passed; the second ignores it under a subshell that dies on it, and ran on); a named step that
# cannot run here gets its row; the run fails.
gpu_check GPU_CHECK_ONLY="kernels-bf16 kernels-bf16-general-attention torch-kernels-bf16" STEP_TIMEOUT=2 \
  "$scratch/out-hung" >"$scratch/hung.out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a hung step: exit $rc, expected 1 ($(cat "$scratch/hung.out"))"
grep -q "^| kernels-bf16 | FAILED (timed out after 2 s) |" "$scratch/out-hung/summary.md" ||
  fail "the hung step's row: $(cat "$scratch/out-hung/summary.md")"
grep -q "^| kernels-bf16-general-attention | FAILED (timed out after 2 s) |" "$scratch/out-hung/summary.md" ||
  fail "the hung function step's row: $(cat "$scratch/out-hung/summary.md")"
grep -q "^| torch-kernels-bf16 | SKIPPED (" "$scratch/out-hung/summary.md" ||
  fail "the unavailable step's row: $(cat "$scratch/out-hung/summary.md")"
none_left || fail "a timed-out step is still running"

# A quick step does not keep `gpu-check | cat` waiting for STEP_TIMEOUT (the watchdog's sleep held stdout).
start=$(date +%s)
# (Its name between a tab and a newline: any white space separates names.)
timeout 60 bash -c '"$@" | cat' _ "${gpu_check[@]}" GPU_CHECK_ONLY=$'\tkernels-fp32\n' STEP_TIMEOUT=300 \
  "$source_dir/tools/gpu_check.sh" "$scratch/out-quick" >/dev/null 2>&1
rc=$?
[ $rc -eq 0 ] || fail "a quick step piped: exit $rc, expected 0 (124: it waited for the watchdog)"
grep -q "^| kernels-fp32 | passed |" "$scratch/out-quick/summary.md" ||
  fail "the quick step's row: $(cat "$scratch/out-quick/summary.md")"
[ $(($(date +%s) - start)) -lt 30 ] || fail "a quick step piped took $(($(date +%s) - start)) s"

# gpu-check killed (a deadline) while a step runs, one that ignores SIGTERM: the step ends with it.
timeout 3 "${gpu_check[@]}" GPU_CHECK_ONLY=kernels-bf16-general-attention STEP_TIMEOUT=100 \
  "$source_dir/tools/gpu_check.sh" "$scratch/out-killed" >/dev/null 2>&1
none_left || fail "a step outlived gpu-check"
rm -rf "$scratch"
