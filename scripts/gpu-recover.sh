#!/usr/bin/env bash
# NCCL recovery in place on a GPU machine, run ON it from the repository root
# with the release tree that scripts/build-carry.sh put in .carry/.  Every
# node is a `muster run --recovery in-place --nproc-per-node 1` launcher
# running hello_allreduce in its in-place mode (MUSTER_DEMO_INPLACE=1), whose
# sums go through an NCCL communicator; several ranks share a GPU (each its
# own NCCL_HOSTID, NCCL over lo).
#   check:  a node SIGKILLed mid-loop at each size of RANKS: the survivors
#           agree in musterd's recovery round, shrink the communicator in
#           the same processes (pids unchanged) and all-reduce the sum over
#           the smaller world; then two nodes at once; then a --standby node
#           admitted after a loss (world back to 4, through a fresh init:
#           NCCL 2.28 has no ncclCommGrow); then a worker SIGKILLed alone
#           (its launcher starts a new one, the others stay: fresh init).
#   bench:  time from the SIGKILL of a node to the next successful
#           all-reduce on every survivor, for (a) shrink in place, (b) a
#           fresh init in the same processes (MUSTER_DEMO_RECOVER=init) and
#           (c) `muster run --recovery restart`, which restarts every worker,
#           at each size of BENCH_RANKS, REPS runs each.
# Output: $OUT/gpu-recover.log (everything), $OUT/results.md (verdicts and
# figures), $OUT/recover_runs.jsonl (one line per timed run).  Exit status 1
# if a check failed.  Knobs: SECTIONS (default "check bench"), RANKS
# (default "4 8"), BENCH_RANKS (default "2 4 8"), REPS (default 3),
# BUDGET_S (no run starts after this many seconds, default 540), NCCL_DIR
# (a directory whose libnccl.so.2 is used instead of the system's),
# MUSTER_BUILD (default .carry/build).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${MUSTER_BUILD:-$ROOT/.carry/build}
OUT=${OUT:-$ROOT/gpu-results}
SECTIONS=${SECTIONS:-"check bench"}
RANKS=${RANKS:-"4 8"}
BENCH_RANKS=${BENCH_RANKS:-"2 4 8"}
REPS=${REPS:-3}
BUDGET_S=${BUDGET_S:-540}
TMP=$(mktemp -d /tmp/muster-recover.XXXXXX)
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-recover.log") 2>&1
TEE_PID=$!

# NVLink multicast stays off on shared machines; NCCL's bootstrap uses lo.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export LD_LIBRARY_PATH=${NCCL_DIR:+$NCCL_DIR:}$ROOT/.carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

MUSTER=$BUILD/client/cli/muster
MUSTERD=$BUILD/store-server/musterd
HELLO=$BUILD/examples/hello_allreduce
# The demo's loop: iterations, pause between them, and the bound of every wait.
export MUSTER_DEMO_INPLACE=1 MUSTER_DEMO_ITERATIONS=${ITERATIONS:-150} MUSTER_DEMO_INTERVAL_MS=${INTERVAL_MS:-10}
export MUSTER_DEMO_TIMEOUT_MS=20000
VERDICTS=()
DPID=
LPIDS=()

# Print a line with the wall-clock time in front.
say() { printf '[%s] %s\n' "$(date +%T.%3N)" "$*"; }
# Nanoseconds of wall clock.
now_ns() { date +%s%N; }
# Record a named verdict: pass NAME DETAIL / fail NAME DETAIL.
pass() { VERDICTS+=("| PASS | $1 | $2 |"); say "PASS $1: $2"; }
fail() { VERDICTS+=("| FAIL | $1 | $2 |"); say "FAIL $1: $2"; }
# Whether the time budget still allows a run.
in_budget() { [ "$SECONDS" -lt "$BUDGET_S" ]; }

# Add to LD_LIBRARY_PATH a directory for every library the binaries miss; show which NCCL loads.
fix_libs() {
    local lib dir
    for lib in $(ldd "$HELLO" "$MUSTER" "$MUSTERD" 2>/dev/null | awk '/not found/ {print $1}' | sort -u); do
        dir=$(find /usr/local/cuda*/ /usr/lib /opt -name "$lib" -print -quit 2>/dev/null)
        dir=${dir%/*}
        [ -n "$dir" ] && export LD_LIBRARY_PATH=$dir:$LD_LIBRARY_PATH && say "using $dir for $lib"
    done
    ldd "$HELLO" | grep -E 'nccl|cudart|protobuf|not found'
}

# The wrapper every worker runs under: one NCCL host id per node.
write_wrapper() {
    cat >"$TMP/wrap" <<'EOF'
#!/bin/sh
export NCCL_HOSTID="host-$MUSTER_NODE_ID"
exec "$@"
EOF
    chmod +x "$TMP/wrap"
}

# Start a private musterd for case TAG; sets DPID and URL.
daemon_start() {
    rm -f "$TMP/port"
    "$MUSTERD" --listen 127.0.0.1:0 --port-file "$TMP/port" 2>"$TMP/$1.musterd.log" &
    DPID=$!
    for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
    URL=tcp://127.0.0.1:$(cat "$TMP/port")/$1
}

# Start launcher node I of case TAG: --nnodes NN, recovery MODE, extra flags after the fourth.
launch() {
    local tag=$1 i=$2 nn=$3 mode=$4
    shift 4
    "$MUSTER" --url "$URL" run --nnodes "$nn" --nproc-per-node 1 --recovery "$mode" --max-restarts 3 \
        --node-id "n$i" --last-call "${LAST_CALL_MS:-2000}" --grace 1 --rdzv-timeout 60 "$@" \
        "$TMP/wrap" "$HELLO" >"$TMP/$tag.n$i.out" 2>"$TMP/$tag.n$i.err" &
    LPIDS[i]=$!
}

# Wait (at most S seconds) until node I of TAG printed iteration IT; 0 when it did, 1 at once when
# its launcher has exited (nothing will start).
reached() {
    local tag=$1 i=$2 it=$3 s=$4 k
    for ((k = 0; k < s * 20; k++)); do
        grep -q "iteration $it of" "$TMP/$tag.n$i.out" 2>/dev/null && return 0
        kill -0 "${LPIDS[i]}" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

# Wait until nodes FROM..TO-1 of TAG all printed iteration IT, S seconds for all of them together.
all_reached() {
    local tag=$1 from=$2 to=$3 it=$4 s=$5 i end=$((SECONDS + $5))
    for ((i = from; i < to; i++)); do
        reached "$tag" "$i" "$it" "$((end - SECONDS > 0 ? end - SECONDS : 0))" || return 1
    done
}

# Wait (at most S seconds) for the launchers of TAG listed after S to exit; kill what is left.
finish() {
    local tag=$1 s=$2 i k left
    shift 2
    for ((k = 0; k < s * 20; k++)); do
        left=0
        for i in "$@"; do kill -0 "${LPIDS[i]}" 2>/dev/null && left=1; done
        [ $left = 0 ] && break
        sleep 0.05
    done
    for i in "$@"; do
        if kill -0 "${LPIDS[i]}" 2>/dev/null; then
            say "$tag: node n$i still running after ${s}s; killing it"
            kill -9 "${LPIDS[i]}" 2>/dev/null
        fi
        wait "${LPIDS[i]}" 2>/dev/null
        echo $? >"$TMP/$tag.n$i.rc"
    done
}

# Stop the daemon of the case.
daemon_stop() {
    [ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    DPID=
}

# The generation a node's worker started in (its first line), or empty.
first_gen() { sed -n 's/.* starts in place: generation \([0-9]*\),.*/\1/p' "$TMP/$1.n$2.out" | head -n 1; }

# Check the survivors SURV (node numbers) of TAG after a loss: same pid from start to end, the
# communicator rebuilt by PATH, and every all-reduce of the new generation summing to W(W+1)/2.
survivors_ok() {
    local tag=$1 path=$2 w=$3 i out pid0 pid1 bad=0 want
    shift 3
    want=$((w * (w + 1) / 2))
    for i in "$@"; do
        out=$TMP/$tag.n$i.out
        pid0=$(sed -n 's/.*pid \([0-9]*\) starts in place.*/\1/p' "$out" | head -n 1)
        pid1=$(sed -n 's/.*pid \([0-9]*\) finished .* world '"$w"', sum \['"$want"'.0\].*/\1/p' "$out" | tail -n 1)
        if [ -z "$pid0" ] || [ "$pid0" != "$pid1" ]; then
            say "$tag n$i: pid at start '$pid0', at the end with world $w and sum $want: '$pid1'"
            bad=1
        fi
        if ! grep -Eq "rebuilt by ($path) \(" "$out"; then
            say "$tag n$i: no 'rebuilt by $path' line"
            bad=1
        fi
        if [ "$(cat "$TMP/$tag.n$i.rc")" != 0 ]; then
            say "$tag n$i: launcher exit $(cat "$TMP/$tag.n$i.rc")"
            bad=1
        fi
    done
    # Every sum printed after the recovery (a generation above the first) is the new world's.
    local files=()
    for i in "$@"; do files+=("$TMP/$tag.n$i.out"); done
    if grep -h "After all_reduce" "${files[@]}" 2>/dev/null | grep -v "generation $(first_gen "$tag" "$1")," |
        grep -v "\[$want.0\]" | grep -q .; then
        say "$tag: a sum after the recovery is not [$want.0]"
        bad=1
    fi
    return $bad
}

# How the survivors listed after TAG rebuilt their communicator: "N shrink; M init in place of a shrink".
paths() {
    local tag=$1 i
    shift
    for i in "$@"; do grep -ho "rebuilt by [a-z ]*" "$TMP/$tag.n$i.out" | head -n 1; done | sort | uniq -c |
        sed 's/^ *//; s/rebuilt by //' | paste -sd';' | sed 's/;/; /g'
}

# Print the logs of case TAG's nodes (the log keeps everything).
show() {
    local f
    for f in "$TMP/$1".n*.err "$TMP/$1".n*.out; do
        echo "--- ${f##*/}"
        grep -v "iteration [0-9]* of" "$f" | tail -n 40
        grep "iteration [0-9]* of" "$f" | sed -n '1p;$p'
    done
}

# The recovery's figures for TAG: ms from the kill (T_KILL) to the first all-reduce of a generation
# after node 0's first on the slowest of the nodes listed, and the slowest communicator rebuild in ms.
timing() {
    local tag=$1 i t worst=0 first gen0 rebuild=0 r
    shift
    gen0=$(first_gen "$tag" 0)
    for i in "$@"; do
        first=$(grep -h "After all_reduce" "$TMP/$tag.n$i.out" | awk -v g="$gen0" '$4 != g"," {print $NF; exit}')
        [ -z "$first" ] && { echo "none"; return 1; }
        t=$(((first - T_KILL) / 1000))
        [ "$t" -gt "$worst" ] && worst=$t
        r=$(sed -n 's/.*rebuilt by [a-z ]* (.*) in \([0-9.]*\) ms.*/\1/p' "$TMP/$tag.n$i.out" | head -n 1)
        [ -n "$r" ] && rebuild=$(awk -v a="$rebuild" -v b="$r" 'BEGIN {print (b > a) ? b : a}')
    done
    awk -v us="$worst" -v rb="$rebuild" 'BEGIN {printf "%.1f %.1f\n", us / 1000, rb}'
}

# The split of TAG's recovery on the slowest of the nodes listed, in ms from the kill: when the worker
# noticed (its collective failed or the world changed), when its answer was in hand (muster's share
# ends), when its communicator was rebuilt.
split() {
    local tag=$1 i
    shift
    for i in "$@"; do
        sed -n 's/.*(noticed at \([0-9]*\), answered at \([0-9]*\), built at \([0-9]*\)).*/\1 \2 \3/p' \
            "$TMP/$tag.n$i.out" | head -n 1
    done | awk -v k="$T_KILL" '{for (j = 1; j <= 3; j++) if ($j - k > m[j]) m[j] = $j - k}
        END {printf "%.1f %.1f %.1f\n", m[1] / 1e6, m[2] / 1e6, m[3] / 1e6}'
}

# One loss: N nodes, kill the launchers of VICTIMS (space-separated) once all reached iteration 5.
# MODE in-place|restart; RECOVER (MUSTER_DEMO_RECOVER) for the workers.  Sets SURV, T_KILL.
loss_case() {
    local tag=$1 n=$2 victims=$3 mode=$4 nn=$5 i ok=1
    SURV=()
    daemon_start "$tag"
    for ((i = 0; i < n; i++)); do launch "$tag" "$i" "$nn" "$mode"; done
    all_reached "$tag" 0 "$n" 5 40 || ok=0
    if [ $ok = 0 ]; then
        say "$tag: not every node reached iteration 5"
        return 1
    fi
    T_KILL=$(now_ns)
    for i in $victims; do kill -9 "${LPIDS[i]}"; done
    for ((i = 0; i < n; i++)); do [[ " $victims " == *" $i "* ]] || SURV+=("$i"); done
    return 0
}

# Section check, one case: a node (or two) SIGKILLed, the survivors shrink in place.
check_shrink() {
    local n=$1 victims=$2 name=$3 tag w all t
    tag=shrink$n-$(echo "$victims" | tr ' ' '_')
    w=$((n - $(echo "$victims" | wc -w)))
    say "$name: $n nodes, SIGKILL of node(s) $victims mid-loop"
    if ! loss_case "$tag" "$n" "$victims" in-place "$((n - 2)):$n"; then
        finish "$tag" 5 $(seq 0 $((n - 1)))
        show "$tag"
        daemon_stop
        fail "$name" "the job did not start"
        return
    fi
    finish "$tag" 45 $(seq 0 $((n - 1)))
    show "$tag"
    t=$(timing "$tag" "${SURV[@]}")
    # A parent whose proxy saw the dead peer holds an error, which ncclCommShrink refuses (2.28): the
    # survivors' vote then makes every survivor re-initialise, in the same processes.
    if survivors_ok "$tag" "shrink|init in place of a shrink" "$w" "${SURV[@]}"; then
        pass "$name" "$n -> $w ranks, same processes, $(paths "$tag" "${SURV[@]}"), every sum [$((w * (w + 1) / 2)).0]; kill to next all-reduce on every survivor ${t% *} ms (rebuild ${t#* } ms)"
    else
        fail "$name" "$n -> $w ranks: see the log"
    fi
    daemon_stop
}

# Section check: a --standby node admitted after a loss, back to 4 ranks through a fresh init.
check_standby() {
    local tag=standby ok=1 i line
    say "standby: 4 nodes and a --standby node; SIGKILL of node 1 mid-loop"
    daemon_start "$tag"
    for i in 0 1 2 3; do launch "$tag" "$i" 3:4 in-place; done
    all_reached "$tag" 0 4 5 40 || ok=0
    launch "$tag" 4 3:4 in-place --standby
    sleep 1
    [ -s "$TMP/$tag.n4.out" ] && { say "standby started a worker before a loss"; ok=0; }
    T_KILL=$(now_ns)
    kill -9 "${LPIDS[1]}"
    finish "$tag" 45 0 1 2 3 4
    show "$tag"
    line=$(grep "joined generation" "$TMP/$tag.n4.out")
    if [ $ok = 1 ] && survivors_ok "$tag" init 4 0 2 3 && [[ "$line" == *"rank 3 of 4; communicator rebuilt by init"* ]] &&
        grep -q "world 4, sum \[10.0\]" "$TMP/$tag.n4.out"; then
        pass "standby admitted" "4 -> 3 + standby = 4 ranks, survivors in the same processes, fresh init (no ncclCommGrow in 2.28), every sum [10.0]; kill to next all-reduce on every rank $(timing "$tag" 0 2 3 4 | cut -d' ' -f1) ms"
    else
        fail "standby admitted" "see the log"
    fi
    daemon_stop
}

# Section check: a worker SIGKILLed alone; its launcher replaces it, the others stay.
check_replace() {
    local tag=replace ok=1 i victim newpid
    say "replace: 4 nodes; SIGKILL of node 1's worker only"
    daemon_start "$tag"
    for i in 0 1 2 3; do launch "$tag" "$i" 2:4 in-place; done
    all_reached "$tag" 0 4 5 40 || ok=0
    victim=$(sed -n 's/.*pid \([0-9]*\) starts in place.*/\1/p' "$TMP/$tag.n1.out" | head -n 1)
    T_KILL=$(now_ns)
    [ -n "$victim" ] && kill -9 "$victim"
    finish "$tag" 45 0 1 2 3
    show "$tag"
    newpid=$(sed -n 's/.*pid \([0-9]*\) finished .* world 4, sum \[10.0\].*/\1/p' "$TMP/$tag.n1.out" | tail -n 1)
    if [ $ok = 1 ] && [ -n "$victim" ] && survivors_ok "$tag" init 4 0 2 3 && [ -n "$newpid" ] &&
        [ "$newpid" != "$victim" ]; then
        pass "worker replaced" "4 ranks kept: a new process for node 1 (pid $victim -> $newpid), the others in the same processes, fresh init; kill to next all-reduce on every rank $(timing "$tag" 0 1 2 3 | cut -d' ' -f1) ms"
    else
        fail "worker replaced" "see the log"
    fi
    daemon_stop
}

# Section bench, one timed run: MODE shrink|init|restart, N nodes, repetition REP; the victim is
# node 1 (node 0 at N = 2 is kept so that rank 0 survives, as in the other runs).
bench_run() {
    local mode=$1 n=$2 rep=$3 tag t rmode=in-place i path
    tag=bench-$mode-$n-$rep
    [ "$mode" = restart ] && rmode=restart
    export MUSTER_DEMO_RECOVER=recover
    [ "$mode" = init ] && export MUSTER_DEMO_RECOVER=init
    if ! LAST_CALL_MS=300 loss_case "$tag" "$n" 1 "$rmode" "$((n - 1)):$n"; then
        finish "$tag" 5 $(seq 0 $((n - 1)))
        daemon_stop
        say "$tag: did not start"
        return
    fi
    finish "$tag" 40 $(seq 0 $((n - 1)))
    if t=$(timing "$tag" "${SURV[@]}"); then
        # The path the survivors' communicator took (restart: a new process's first init).
        path=$(grep -ho "rebuilt by [a-z ]*" "$TMP/$tag".n*.out | sort | uniq -c | tr -s ' ' | paste -sd';')
        read -r noticed answered built < <(split "$tag" "${SURV[@]}")
        say "$tag: kill to next all-reduce on every survivor ${t% *} ms, rebuild ${t#* } ms ($path); noticed $noticed, answer held $answered, built $built ms after the kill"
        printf '{"mode":"%s","ranks":%d,"rep":%d,"ms":%s,"rebuild_ms":%s,"noticed_ms":%s,"answer_ms":%s,"built_ms":%s,"path":"%s"}\n' \
            "$mode" "$n" "$rep" "${t% *}" "${t#* }" "$noticed" "$answered" "$built" "${path:-new processes}" >>"$OUT/recover_runs.jsonl"
    else
        say "$tag: no all-reduce after the kill"
        show "$tag"
    fi
    unset MUSTER_DEMO_RECOVER
    daemon_stop
}

# Section bench: every mode at every size, interleaved, REPS times.
bench() {
    local rep n mode
    : >"$OUT/recover_runs.jsonl"
    for ((rep = 1; rep <= REPS; rep++)); do
        for n in $BENCH_RANKS; do
            for mode in shrink init restart; do
                in_budget || { say "time budget spent: bench stops before $mode $n ranks rep $rep"; return; }
                bench_run "$mode" "$n" "$rep"
            done
        done
    done
}

# Medians and spread of the bench runs, and the ratios shrink/init and shrink/restart.
bench_table() {
    python3 - "$OUT/recover_runs.jsonl" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in runs:
    by.setdefault((r["ranks"], r["mode"]), []).append(r)
def med(k, f="ms"):
    v = [r[f] for r in by.get(k, [])]
    return statistics.median(v) if v else None
sizes = sorted({r["ranks"] for r in runs})
print("| ranks | shrink / init | shrink / restart | runs (shrink, init, restart) |")
print("|---|---|---|---|")
for n in sizes:
    s, i, r = med((n, "shrink")), med((n, "init")), med((n, "restart"))
    ratio = lambda a, b: f"{a / b:.2f}x" if a is not None and b else "-"
    print(f"| {n} | {ratio(s, i)} | {ratio(s, r)} | {len(by.get((n,'shrink'),[]))}, {len(by.get((n,'init'),[]))}, {len(by.get((n,'restart'),[]))} |")
print()
print("| ranks | mode | median ms | min-max ms | communicator rebuild, median ms | noticed / answer held / built, median ms after the kill | runs (ms) | survivors' path |")
print("|---|---|---|---|---|---|---|---|")
for n in sizes:
    for m in ("shrink", "init", "restart"):
        v = [r["ms"] for r in by.get((n, m), [])]
        if not v:
            continue
        rb = med((n, m), "rebuild_ms")
        sp = " / ".join(f"{med((n, m), f):.0f}" if all(f in r for r in by[(n, m)]) else "-"
                        for f in ("noticed_ms", "answer_ms", "built_ms"))
        print(f"| {n} | {m} | {statistics.median(v):.0f} | {min(v):.0f}-{max(v):.0f} | "
              f"{rb:.0f} | {sp} | {', '.join(f'{x:.0f}' for x in v)} | "
              f"{'; '.join(sorted({r.get('path', '') for r in by[(n, m)]}))} |")
EOF
}

# Write results.md from the verdicts and tables.
write_results() {
    {
        echo "# NCCL recovery in place on a GPU, $(date -u +%F' '%T) UTC"
        echo
        echo "Host: $(nvidia-smi -L 2>/dev/null | head -n 8 | tr '\n' ';') driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
        echo "NCCL: $(ldd "$HELLO" | awk '/libnccl/ {print $3}') ($NCCL_SEEN)"
        echo "Command: \`bash scripts/gpu-recover.sh\` (SECTIONS=\"$SECTIONS\" RANKS=\"$RANKS\" BENCH_RANKS=\"$BENCH_RANKS\" REPS=$REPS ITERATIONS=$MUSTER_DEMO_ITERATIONS INTERVAL_MS=$MUSTER_DEMO_INTERVAL_MS${NCCL_DIR:+ NCCL_DIR=$NCCL_DIR})"
        echo
        echo "| verdict | check | detail |"
        echo "|---|---|---|"
        printf '%s\n' "${VERDICTS[@]}"
        if [ -s "$OUT/recover_runs.jsonl" ]; then
            echo
            echo "## SIGKILL of a node to the next all-reduce on every survivor"
            echo
            bench_table
        fi
    } >"$OUT/results.md"
}

main() {
    local n
    say "build: $BUILD"
    for f in "$MUSTER" "$MUSTERD" "$HELLO"; do
        [ -x "$f" ] || { say "missing $f: run scripts/build-carry.sh first"; exit 2; }
    done
    nvidia-smi -L
    fix_libs
    write_wrapper
    NCCL_SEEN=$(readlink -f "$(ldd "$HELLO" | awk '/libnccl/ {print $3}')")
    if [[ " $SECTIONS " == *" check "* ]]; then
        for n in $RANKS; do in_budget && check_shrink "$n" 1 "shrink after one loss, $n ranks"; done
        in_budget && check_shrink 4 "1 2" "shrink after two losses at once, 4 ranks"
        in_budget && check_standby
        in_budget && check_replace
    fi
    # A failed check means a fix and another run: the bench is left for that run.
    if [[ " $SECTIONS " == *" bench "* ]]; then
        if printf '%s\n' "${VERDICTS[@]}" | grep -q '^| FAIL'; then
            say "a check failed: no bench in this run"
        else
            bench
        fi
    fi
    write_results
    cat "$OUT/results.md"
    # Every node's output and error stream (NCCL_DEBUG=WARN lines included) and each musterd's log.
    mkdir -p "$OUT/logs" && cp "$TMP"/*.out "$TMP"/*.err "$TMP"/*.log "$OUT/logs/" 2>/dev/null
    rm -rf "$TMP"
    ! printf '%s\n' "${VERDICTS[@]}" | grep -q '^| FAIL'
}

main "$@"
status=$?
# Let tee write the whole log before the machine collects $OUT.
exec >&- 2>&-
wait "$TEE_PID"
exit $status
