#!/usr/bin/env bash
# `muster run` as a torchrun drop-in ON a GPU machine (torch with NCCL), with
# the release tree that scripts/build-carry.sh put in .carry/:
#   1. the seed lesson's script, verbatim (LESSON, default
#      .carry/lesson_verbatim.py), through NCCL at --nproc-per-node 1;
#   2. examples/distributed_hello.py with 4 ranks sharing the GPU (the
#      script gives each rank its own NCCL_HOSTID), every rank printing 10.0;
#   3. a rank SIGKILLed in the first attempt: the job restarts, every rank
#      sees TORCHELASTIC_RESTART_COUNT=1, and the new process group (a new
#      NCCL unique id) all-reduces correctly;
#   4. launch to exit of the same script, torchrun against muster run, 1 and
#      4 ranks, REPS times each, alternating;
#   5. where that time goes: a timed copy of the script reports, per run, the
#      launcher's share (launch to the last worker's first line), Python's
#      `import torch`, CUDA's start-up (torch.cuda.init), `init_process_group` (the store's share: rendezvous
#      through TCPStore or the relay; NCCL's communicator is made lazily at
#      the first collective), the first all_reduce (NCCL init plus the
#      reduce), and teardown to the launcher's exit.
# Output: $OUT/torch-launcher.log and $OUT/torch-launcher.md.  Exit status 1
# if a check failed.  Run from the repository root.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${MUSTER_BUILD:-$ROOT/.carry/build}
OUT=${OUT:-$ROOT/gpu-results}
REPS=${REPS:-3}
PY=${PYTHON:-python3}
LESSON=${LESSON:-$ROOT/.carry/lesson_verbatim.py}
HELLO=$ROOT/examples/distributed_hello.py
MUSTER=$BUILD/client/cli/muster
TMP=$(mktemp -d /tmp/muster-torch-gpu.XXXXXX)
mkdir -p "$OUT"
exec > >(tee "$OUT/torch-launcher.log") 2>&1
export LD_LIBRARY_PATH=$ROOT/.carry/lib:$BUILD/client${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
RESULTS=()
failed=0

# Record a verdict line.
verdict() {
    RESULTS+=("| $1 | $2 | $3 |")
    echo "$1 $2: $3"
    [ "$1" = PASS ] || failed=1
}

# Nanoseconds of wall clock.
now_ns() { date +%s%N; }

# 1: the lesson verbatim at one rank.
if [ -f "$LESSON" ]; then
    out=$("$MUSTER" run --standalone --nproc-per-node 1 "$PY" "$LESSON" 2>&1)
    echo "$out"
    if echo "$out" | grep -q 'After all_reduce: \[1.0\]'; then
        verdict PASS "lesson verbatim, 1 rank, NCCL" "After all_reduce: [1.0]"
    else
        verdict FAIL "lesson verbatim, 1 rank, NCCL" "no [1.0]"
    fi
fi

# 2: four ranks sharing the GPU.
out=$("$MUSTER" run --standalone --nproc-per-node 4 "$PY" "$HELLO" 2>&1)
echo "$out"
n=$(echo "$out" | grep -c 'After all_reduce: \[10.0\]')
if [ "$n" = 4 ]; then verdict PASS "4 ranks on one GPU, NCCL" "4 of 4 print [10.0]"; else
    verdict FAIL "4 ranks on one GPU, NCCL" "$n of 4 print [10.0]"; fi

# 3: a rank killed in attempt 0; the restart forms a new process group.
cat > "$TMP/restart.py" <<'EOF'
import os, signal, torch, torch.distributed as dist
rc = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
if int(os.environ["LOCAL_WORLD_SIZE"]) > torch.cuda.device_count():
    os.environ.setdefault("NCCL_HOSTID", f"muster-{os.environ['RANK']}")
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
if rc == 0 and dist.get_rank() == 1:
    os.kill(os.getpid(), signal.SIGKILL)
t = torch.tensor([float(dist.get_rank() + 1)]).cuda()
dist.all_reduce(t)
print(f"rank {dist.get_rank()} restart_count {rc} sum {t.item()}", flush=True)
dist.destroy_process_group()
EOF
out=$(timeout 300 "$MUSTER" run --standalone --nproc-per-node 2 --max-restarts 1 "$PY" "$TMP/restart.py" 2>&1)
st=$?
echo "$out"
n=$(echo "$out" | grep -c 'restart_count 1 sum 3.0')
if [ "$st" = 0 ] && [ "$n" = 2 ]; then verdict PASS "rank killed, restart" "exit 0, 2 of 2 ranks: restart_count 1 sum 3.0"; else
    verdict FAIL "rank killed, restart" "exit $st, $n of 2 ranks right"; fi

# 4: launch to exit, torchrun against muster run.
TIMES=()
for ranks in 1 4; do
    for ((i = 0; i < REPS; i++)); do
        for who in torchrun muster; do
            t0=$(now_ns)
            if [ "$who" = torchrun ]; then
                "$PY" -m torch.distributed.run --standalone --nproc_per_node "$ranks" "$HELLO" > "$TMP/t.out" 2>&1
            else
                "$MUSTER" run --standalone --nproc-per-node "$ranks" "$PY" "$HELLO" > "$TMP/t.out" 2>&1
            fi
            st=$?
            ms=$((($(now_ns) - t0) / 1000000))
            ok=$(grep -c 'After all_reduce' "$TMP/t.out")
            echo "timing $who ranks=$ranks rep=$i: ${ms} ms (exit $st, $ok lines)"
            TIMES+=("| $who | $ranks | $i | $ms | $st |")
        done
    done
done

# 5: where the time goes (bench/torch_phases.py prints one JSON line per rank).
PHASES=()
for ranks in 1 4; do
    for ((i = 0; i < REPS; i++)); do
        for who in torchrun muster muster-held; do
            # muster-held: another process keeps the GPU's driver open, as
            # torchrun's agent process does (torch there has touched CUDA);
            # without persistence mode the driver starts up again otherwise.
            holder=
            if [ "$who" = muster-held ]; then
                "$PY" -c 'import sys, time, torch; torch.cuda.init(); print("held", flush=True); time.sleep(600)' \
                    > "$TMP/held" 2>&1 &
                holder=$!
                for ((w = 0; w < 200; w++)); do grep -q held "$TMP/held" && break; sleep 0.1; done
            fi
            t0=$(now_ns)
            if [ "$who" = torchrun ]; then
                LAUNCH_T0_NS=$t0 "$PY" -m torch.distributed.run --standalone --nproc_per_node "$ranks" \
                    "$ROOT/bench/torch_phases.py" > "$TMP/p.out" 2>&1
            else
                LAUNCH_T0_NS=$t0 "$MUSTER" run --standalone --nproc-per-node "$ranks" "$PY" \
                    "$ROOT/bench/torch_phases.py" > "$TMP/p.out" 2>&1
            fi
            t1=$(now_ns)
            [ -n "$holder" ] && kill "$holder" && wait "$holder" 2>/dev/null
            row=$("$PY" "$ROOT/bench/torch_phases.py" --summarize "$t0" "$t1" < "$TMP/p.out")
            echo "phases $who ranks=$ranks rep=$i: $row"
            PHASES+=("| $who | $ranks | $i | $row |")
        done
    done
done

{
    echo "# muster run as a torchrun drop-in on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
    echo
    echo "torch $("$PY" -c 'import torch; print(torch.__version__)'), $(date -u +%F' '%T) UTC," \
        "persistence mode $(nvidia-smi --query-gpu=persistence_mode --format=csv,noheader | head -1)"
    echo
    echo "| verdict | check | detail |"
    echo "| --- | --- | --- |"
    printf '%s\n' "${RESULTS[@]}"
    echo
    echo "Launch to exit of examples/distributed_hello.py (ms), alternating runs:"
    echo
    echo "| launcher | ranks | rep | ms | exit |"
    echo "| --- | --- | --- | --- | --- |"
    printf '%s\n' "${TIMES[@]}"
    echo
    echo "Where the time goes (ms; bench/torch_phases.py): launcher = launch to the last worker's"
    echo "first line, import = import torch (slowest rank), cuda = torch.cuda.init(), init_pg = init_process_group (slowest"
    echo "rank; the store's share), first_ar = first all_reduce incl. NCCL init, exit = last worker"
    echo "done to launcher exit:"
    echo
    echo "| launcher | ranks | rep | launcher | import | cuda | init_pg | first_ar | exit | total |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    printf '%s\n' "${PHASES[@]}"
} > "$OUT/torch-launcher.md"
cat "$OUT/torch-launcher.md"
rm -rf "$TMP"
exit $failed
