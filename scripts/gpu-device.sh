#!/usr/bin/env bash
# GPU checks of libmuster-nccl, run ON a GPU machine from the repository root
# with the release tree that scripts/build-carry.sh put in .carry/:
#   1. the seed demo through `muster run --standalone` with 1, 2, 4 and 8 ranks
#      (several ranks share a GPU: each gets its own NCCL_HOSTID and NCCL talks
#      over lo), every rank printing the right sum (1, 3, 10, 36);
#   2. a rank SIGKILLed during communicator init: without the launcher, the
#      survivors abort when the generation's broken key appears and, without
#      that key, at their deadline; the next generation succeeds.  Then the
#      same through `muster run`, which restarts the job in generation + 1;
#   3. launch to ready communicator and first all-reduce, muster against
#      torch's init_process_group('nccl'), same ranks, same machine, same run;
#   4. with several GPUs: the demo with one rank per GPU (NCCL's own P2P /
#      NVLink transports, no NCCL_HOSTID) and the all-reduce bus bandwidth at
#      1 GiB through both communicators.
# Output: $OUT/gpu-device.log (everything), $OUT/results.md (verdicts and
# figures), $OUT/init_runs.jsonl (raw timings).  Exit status 1 if any check
# failed.  Knobs: REPS (timing repetitions, default 3), RANKS (default
# "1 2 4 8"), MUSTER_BUILD (default .carry/build).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${MUSTER_BUILD:-$ROOT/.carry/build}
OUT=${OUT:-$ROOT/gpu-results}
REPS=${REPS:-3}
RANKS=${RANKS:-"1 2 4 8"}
TMP=$(mktemp -d /tmp/muster-gpu.XXXXXX)
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-device.log") 2>&1
TEE_PID=$!

# NVLink multicast stays off on shared machines; NCCL's bootstrap uses lo.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export LD_LIBRARY_PATH=$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

MUSTER=$BUILD/client/cli/muster
[ -x "$MUSTER" ] || MUSTER=$BUILD/client/muster
MUSTERD=$BUILD/store-server/musterd
HELLO=$BUILD/examples/hello_allreduce
BENCH=$BUILD/bench/gpu_init_vs_torch
PY=${PYTHON:-python3}
VERDICTS=()

# Print a line with the wall-clock time in front.
say() { printf '[%s] %s\n' "$(date +%T.%3N)" "$*"; }
# Nanoseconds of wall clock.
now_ns() { date +%s%N; }
# Record a named verdict: pass NAME DETAIL / fail NAME DETAIL.
pass() { VERDICTS+=("| PASS | $1 | $2 |"); say "PASS $1: $2"; }
fail() { VERDICTS+=("| FAIL | $1 | $2 |"); say "FAIL $1: $2"; }

# Add to LD_LIBRARY_PATH a directory for every library the binaries miss.
fix_libs() {
    local lib dir
    for lib in $(ldd "$HELLO" "$MUSTER" "$MUSTERD" "$BENCH" 2>/dev/null | awk '/not found/ {print $1}' | sort -u); do
        dir=$(find /usr/local/cuda*/ /usr/lib /opt -name "$lib" -print -quit 2>/dev/null)
        dir=${dir%/*}
        [ -n "$dir" ] && export LD_LIBRARY_PATH=$dir:$LD_LIBRARY_PATH && say "using $dir for $lib"
    done
    ldd "$HELLO" "$BENCH" | grep -E 'nccl|cudart|protobuf|not found'
}

# Write the worker wrappers: one NCCL_HOSTID per local rank (SPREAD=1), and
# the victim wrapper that SIGKILLs rank 3 during init in the first generation.
write_wrappers() {
    cat >"$TMP/wrap" <<'EOF'
#!/bin/sh
[ "${SPREAD:-1}" = 1 ] && export NCCL_HOSTID="host$LOCAL_RANK"
exec "$@"
EOF
    cat >"$TMP/victim" <<EOF
#!/bin/sh
export NCCL_HOSTID="host\$LOCAL_RANK"
if [ "\$RANK" = 3 ] && [ "\${MUSTER_RESTART_COUNT:-0}" = 0 ]; then
    "$HELLO" & p=\$!
    "$MUSTER" --timeout 30000 get --wait "nccl/\$MUSTER_GENERATION/world/id/0" >/dev/null
    sleep 0.2
    date +%s%N >"$TMP/killed_at"
    kill -9 \$p
    wait \$p
    exit 137
fi
exec "$HELLO"
EOF
    chmod +x "$TMP/wrap" "$TMP/victim"
}

# Check that FILE has, for every rank below N, a last "After" line with SUM.
sums_ok() {
    local file=$1 n=$2 sum=$3 r line
    for ((r = 0; r < n; r++)); do
        line=$(grep -a "\[Rank $r\] After all_reduce:" "$file" | tail -n 1)
        [ "$line" = "[Rank $r] After all_reduce: [$sum.0]" ] || return 1
    done
}

# Section 1: the demo through the launcher at each world size.
demo_sizes() {
    local n rc sum out
    for n in $RANKS; do
        sum=$((n * (n + 1) / 2))
        out=$TMP/demo_$n.txt
        say "demo: muster run --standalone --nproc-per-node $n hello_allreduce"
        timeout 240 "$MUSTER" run --standalone --nproc-per-node "$n" "$TMP/wrap" "$HELLO" >"$out" 2>&1
        rc=$?
        sort "$out"
        if grep -q "no CUDA device" "$out"; then
            fail "demo $n ranks" "took the no-GPU path"
        elif [ $rc -eq 0 ] && sums_ok "$out" "$n" "$sum"; then
            pass "demo $n ranks" "every rank printed [$sum.0]"
        else
            fail "demo $n ranks" "exit $rc, sums wrong or missing"
        fi
    done
}

# Start a private musterd; sets DPID and URL.
daemon_start() {
    rm -f "$TMP/port"
    "$MUSTERD" --listen 127.0.0.1:0 --port-file "$TMP/port" 2>"$TMP/musterd.log" &
    DPID=$!
    for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
    URL=tcp://127.0.0.1:$(cat "$TMP/port")/killtest
}

# Start 4 demo ranks of generation GEN by hand with deadline MS; sets PIDS.
ranks_start() {
    local gen=$1 ms=$2 r
    PIDS=()
    for r in 0 1 2 3; do
        MUSTER_URL=$URL RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r MUSTER_GENERATION=$gen NCCL_HOSTID=host$r \
            MUSTER_DEMO_TIMEOUT_MS=$ms "$HELLO" >"$TMP/g${gen}_$r.txt" 2>&1 &
        PIDS+=($!)
    done
}

# Wait (bounded by LIMIT s) for ranks 0..2 to exit; prints each one's delay after T_KILL.
survivors_wait() {
    local limit=$1 r i left=3 gone=(0 0 0) t
    MAXDELAY=
    for ((i = 0; i < limit * 100 && left > 0; i++)); do
        for r in 0 1 2; do
            if [ "${gone[$r]}" = 0 ] && ! kill -0 "${PIDS[$r]}" 2>/dev/null; then
                t=$(now_ns)
                wait "${PIDS[$r]}"
                say "rank $r exited ($?) $(((t - T_KILL) / 1000000)) ms after the kill: $(tail -n 1 "$TMP/g${GEN}_$r.txt")"
                gone[r]=1
                left=$((left - 1))
                MAXDELAY=$(((t - T_KILL) / 1000000))
            fi
        done
        sleep 0.01
    done
    for r in 0 1 2; do [ "${gone[$r]}" = 0 ] && kill -9 "${PIDS[$r]}" 2>/dev/null; done
    return $left
}

# Kill rank 3 of generation GEN once rank 0 has published the id.
kill_rank3() {
    MUSTER_URL=$URL "$MUSTER" --timeout 30000 get --wait "nccl/$GEN/world/id/0" >/dev/null
    sleep 0.2
    kill -9 "${PIDS[3]}"
    T_KILL=$(now_ns)
    wait "${PIDS[3]}" 2>/dev/null
    say "rank 3 of generation $GEN killed during init"
}

# Section 2a: the library alone, no launcher: broken key, then deadline.
kill_library() {
    daemon_start
    GEN=1
    ranks_start 1 30000
    kill_rank3
    # What musterd's rendezvous does when a member is lost.
    MUSTER_URL=$URL "$MUSTER" set muster/rdzv/1/broken rank-3
    # The key, not the 30 s deadline, must end the survivors' init.
    if survivors_wait 40 && [ "$MAXDELAY" -lt 5000 ]; then
        pass "abort on broken key" "survivors out ${MAXDELAY} ms after the kill (deadline 30000 ms)"
    else
        fail "abort on broken key" "survivors out ${MAXDELAY:-never} ms after the kill (want < 5000)"
    fi
    GEN=2
    ranks_start 2 8000
    kill_rank3
    if survivors_wait 20 && [ "$MAXDELAY" -lt 10000 ]; then
        pass "abort at deadline" "survivors out ${MAXDELAY} ms after the kill (deadline 8000 ms)"
    else
        fail "abort at deadline" "survivors out ${MAXDELAY:-never} ms after the kill (want < 10000)"
    fi
    GEN=3
    ranks_start 3 60000
    for p in "${PIDS[@]}"; do wait "$p"; done
    cat "$TMP"/g3_*.txt >"$TMP/g3.txt"
    cat "$TMP/g3.txt"
    if sums_ok "$TMP/g3.txt" 4 10; then
        pass "next generation" "generation 3 all-reduced [10.0] on every rank"
    else
        fail "next generation" "generation 3 did not all-reduce"
    fi
    kill "$DPID"
    wait "$DPID"
}

# Section 2b: the same kill under `muster run`, which must restart the job.
kill_launcher() {
    local t0 t1 rc out=$TMP/victim.txt
    say "launcher: rank 3 killed during init of the first generation"
    t0=$(now_ns)
    timeout 300 "$MUSTER" run --standalone --nproc-per-node 4 --max-restarts 2 "$TMP/victim" >"$out" 2>&1
    rc=$?
    t1=$(now_ns)
    cat "$out"
    if [ $rc -eq 0 ] && [ -s "$TMP/killed_at" ] && sums_ok "$out" 4 10; then
        pass "launcher restart" "exit 0, next generation [10.0]; kill to job end $(((t1 - $(cat "$TMP/killed_at")) / 1000000)) ms, whole run $(((t1 - t0) / 1000000)) ms"
    else
        fail "launcher restart" "exit $rc or wrong sums after the restart"
    fi
}

# One timed run of impl (muster|torch) with n ranks, extra worker arguments
# after the third; appends its JSON lines to init_runs.jsonl.
timed_run() {
    local impl=$1 n=$2 rep=$3
    local file=$TMP/init_${impl}_${n}_${rep}.jsonl
    shift 3
    export BENCH_T0_NS
    BENCH_T0_NS=$(now_ns)
    if [ "$impl" = muster ]; then
        timeout 240 "$MUSTER" run --standalone --nproc-per-node "$n" "$TMP/wrap" "$BENCH" "$@" >"$file" 2>"$file.err"
    else
        timeout 300 "$PY" -m torch.distributed.run --standalone --nproc_per_node "$n" --no_python \
            "$TMP/wrap" "$PY" "$ROOT/bench/gpu_init_vs_torch.py" "$@" >"$file" 2>"$file.err"
    fi || { say "$impl $n ranks run $rep failed:"; tail -n 20 "$file.err"; }
    grep -h '^{' "$file" >>"$OUT/init_runs.jsonl"
}

# Section 3: launch to ready communicator, muster vs torch, alternating.
init_vs_torch() {
    local n rep
    : >"$OUT/init_runs.jsonl"
    for n in $RANKS; do
        for ((rep = 1; rep <= REPS; rep++)); do
            timed_run muster "$n" "$rep"
            timed_run torch "$n" "$rep"
        done
    done
    "$PY" "$ROOT/bench/gpu_init_vs_torch.py" summarize "$TMP"/init_*.jsonl >"$TMP/init_table.md"
    cat "$TMP/init_table.md"
}

# Section 4: one rank per GPU when there are several GPUs.
per_gpu() {
    local g=$1 rc rep out=$TMP/demo_pergpu.txt
    say "one rank per GPU on $g GPUs (no NCCL_HOSTID)"
    export SPREAD=0
    timeout 240 "$MUSTER" run --standalone --nproc-per-node "$g" "$TMP/wrap" "$HELLO" >"$out" 2>&1
    rc=$?
    sort "$out"
    if [ $rc -eq 0 ] && sums_ok "$out" "$g" $((g * (g + 1) / 2)); then
        pass "demo one rank per GPU" "$g ranks, [$((g * (g + 1) / 2)).0]"
    else
        fail "demo one rank per GPU" "exit $rc or wrong sums"
    fi
    for rep in 1 2; do
        timed_run muster "$g" "gpu$rep" --bytes 1073741824
        timed_run torch "$g" "gpu$rep" --bytes 1073741824
    done
    export SPREAD=1
    "$PY" "$ROOT/bench/gpu_init_vs_torch.py" summarize "$TMP"/init_*_gpu*.jsonl >"$TMP/pergpu_table.md"
    cat "$TMP/pergpu_table.md"
}

# Write results.md from the verdicts and tables.
write_results() {
    {
        echo "# GPU run of libmuster-nccl, $(date -u +%F' '%T) UTC"
        echo
        echo "Host: $(nvidia-smi -L 2>/dev/null | head -n 8 | tr '\n' ';') driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
        echo "Command: \`bash scripts/gpu-device.sh\` (REPS=$REPS RANKS=\"$RANKS\")"
        echo
        echo "| verdict | check | detail |"
        echo "|---|---|---|"
        printf '%s\n' "${VERDICTS[@]}"
        echo
        echo "## Launch to ready communicator / first all-reduce (ms, slowest rank)"
        echo
        cat "$TMP/init_table.md" 2>/dev/null
        [ -s "$TMP/pergpu_table.md" ] && { echo; echo "## One rank per GPU, busbw at 1 GiB"; echo; cat "$TMP/pergpu_table.md"; }
    } >"$OUT/results.md"
}

main() {
    local gpus
    say "build: $BUILD"
    for f in "$MUSTER" "$MUSTERD" "$HELLO" "$BENCH"; do
        [ -x "$f" ] || { say "missing $f: run scripts/build-carry.sh first"; exit 2; }
    done
    nvidia-smi -L
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    fix_libs
    write_wrappers
    demo_sizes
    kill_library
    kill_launcher
    init_vs_torch
    [ "$gpus" -gt 1 ] && per_gpu "$gpus"
    write_results
    cat "$OUT/results.md"
    rm -rf "$TMP"
    ! printf '%s\n' "${VERDICTS[@]}" | grep -q '^| FAIL'
}

main "$@"
status=$?
# Let tee write the whole log before the machine collects $OUT.
exec >&- 2>&-
wait "$TEE_PID"
exit $status
