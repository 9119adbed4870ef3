#!/bin/bash
# Recovery after a member's death, side by side with today's break-and-rejoin: for 8, 64, 512 and
# 4,096 members (muster-recovery: one connection per member, the victim alone in its process, a
# standby waiting), the detection time (SIGKILL to MEMBER_LOST at the survivors), the agreement time
# (first recover call to the last survivor answered) and the standby's admission, first with
# muster_rdzv_recover, then with a plain muster_rdzv_join, then with the recovery armed ahead
# (muster_rdzv_arm), in the same run against one musterd.
# musterd runs on CPU 0, the members on CPU 1 (RECOVERY_LOAD_CPUS).  Writes bench/results/recovery.md and the raw
# records to bench/results/recovery.jsonl.
#
#   bench/recovery.sh [BUILD_DIR] [REPS]     (default: build-bench, 5; about two minutes)
#   RECOVERY_SIZES="512 4096" RECOVERY_LOAD_CPUS=1-15 bench/recovery.sh ...   (other sizes, more member CPUs)
#
# BUILD_DIR needs store-server/musterd and bench/muster-recovery: ninja -C BUILD_DIR
# store-server/musterd bench/muster-recovery.  Every step runs under `timeout`.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-bench}
REPS=${2:-5}
SIZES=${RECOVERY_SIZES:-"8 64 512 4096"}
# CPUs of the members (musterd keeps CPU 0): RECOVERY_LOAD_CPUS=1-15 on a 16-CPU machine.
LOAD_CPUS=${RECOVERY_LOAD_CPUS:-1}
MUSTERD=$BUILD/store-server/musterd
RC=$BUILD/bench/muster-recovery
OUT=${RECOVERY_OUT:-$ROOT/bench/results}
RAW=$OUT/recovery.jsonl
WORK=$(mktemp -d /tmp/muster-recovery.XXXXXX)

for b in "$MUSTERD" "$RC"; do
    [ -x "$b" ] || { echo "recovery.sh: $b missing: ninja -C $BUILD store-server/musterd bench/muster-recovery" >&2; exit 2; }
done
# 4,096 members hold 4,096 client and 4,096 server sockets: lift the soft limit to the hard one.
ulimit -n "$(ulimit -Hn)" || { echo "recovery.sh: cannot raise the open file limit" >&2; exit 2; }
[ "$(ulimit -n)" -ge 9000 ] || echo "recovery.sh: open file limit $(ulimit -n): 4,096 members may fail" >&2

# Progress line on stderr.
log() {
    printf '[recovery %s] %s\n' "$(date +%T)" "$*" >&2
}

. "$ROOT/bench/solo.sh"

# Start musterd, or stop here when it does not start; sets PORT.
start_musterd() {
    solo_start "$MUSTERD" info
    [ "$PORT" -gt 0 ] || { log "musterd did not start"; tail -n 5 "$WORK/musterd.log" >&2; exit 1; }
}

mkdir -p "$OUT"
: >"$RAW"
{
    echo "command: bench/recovery.sh $*"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "binaries: $BUILD ($("$MUSTERD" --version 2>&1 | head -n 1))"
    echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) CPUs"
    echo "placement: musterd on CPU 0, members on CPU(s) $LOAD_CPUS"
    echo "open files: $(ulimit -n)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$WORK/header"
start_musterd
for rep in $(seq "$REPS"); do
    for n in $SIZES; do
        for mode in recover rejoin armed; do
            kill -0 "$MPID" 2>/dev/null || { log "musterd died; restarting it"; start_musterd; }
            out=$(timeout -k 5 180 taskset -c "$LOAD_CPUS" "$RC" --url "tcp://127.0.0.1:$PORT/r$rep-$mode-$n" \
                --members "$n" --mode "$mode" --timeout-ms 60000 2>>"$WORK/stderr.log" | tail -n 1)
            case $out in "{"*) ;; *) out=null ;; esac
            # musterd's own view of a recovery (its info line): the break to the agreed generation (telling
            # the break to the armed members is part of it), and forming it and queueing every answer (its
            # share), with the share's steps.
            own=$(grep "ns 'r$rep-$mode-$n': generation [0-9]* agreed" "$WORK/musterd.log" | tail -n 1 |
                sed -n 's/.* agreed \([0-9.]*\) ms after the break (telling it to the armed: \([0-9.]*\) ms); .* took \([0-9.]*\) ms (ids \([0-9.]*\), queues \([0-9.]*\), members \([0-9.]*\), answer \([0-9.]*\), replies \([0-9.]*\)).*/\1 \3 \2 \4 \5 \6 \7 \8/p')
            # And the job's first generation (a plain round of N joins): forming it and answering every node.
            first=$(grep "ns 'r$rep-$mode-$n': generation [0-9]* formed: [0-9]* nodes, world size [0-9]*;" \
                "$WORK/musterd.log" | head -n 1 | sed -n 's/.*; formed and answered in \([0-9.]*\) ms$/\1/p')
            set -- ${own:-null null null null null null null null} "${first:-null}"
            printf '{"rep":%d,"members":%d,"mode":"%s","result":%s,"musterd_agree_ms":%s,"musterd_answer_ms":%s,"musterd_steps_ms":{"tell":%s,"ids":%s,"queues":%s,"members":%s,"answer":%s,"replies":%s},"musterd_first_form_ms":%s}\n' \
                "$rep" "$n" "$mode" "$out" "$@" >>"$RAW"
            log "rep $rep, $n members, $mode: $(printf '%s' "$out" |
                grep -o '"\(agreed\|detect_last_ms\|agree_ms\|standby_ms\)":[a-z0-9.-]*' | tr '\n' ' ')"
        done
    done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$WORK/header"
python3 - "$RAW" "$WORK/header" "$OUT/recovery.md" <<'EOF'
import json, statistics, sys
raw, header, out = sys.argv[1:]
recs = [json.loads(l) for l in open(raw) if l.strip()]
sizes = sorted({r["members"] for r in recs})
def med(n, mode, key):
    v = [r["result"][key] for r in recs if r["members"] == n and r["mode"] == mode and r["result"]
         and r["result"]["complete"] and r["result"][key] >= 0]
    return statistics.median(v) if v else None
def fmt(x):
    return "n/a" if x is None else (f"{x:.1f}" if x >= 10 else f"{x:.2f}")
def ratio(a, b):
    # Armed, the answer comes with the loss event: "after detection" is about 0 and has no ratio.
    return "n/a" if a is None or b is None or a < 0.05 or b < 0.05 else f"{b / a:.2f}"
MODES = ("recover", "rejoin", "armed")
runs = {(n, m): [r for r in recs if r["members"] == n and r["mode"] == m] for n in sizes for m in MODES}
L = ["# Recovery after a member's death: recover, break-and-rejoin, armed recover", ""]
L += ["```"] + open(header).read().strip().splitlines() + ["```", ""]
L += ["One musterd (CPU 0); N members, one connection each (`muster-recovery`: up to 64 processes, a thread "
      "per member beyond that; the victim, rank N/2, alone in its process), all on the load CPUs (header); a standby waits.  The "
      "victim is killed with SIGKILL; each survivor waits for MEMBER_LOST and then calls `muster_rdzv_recover` "
      "(recover) or a plain `muster_rdzv_join` (rejoin: the old way, given its best case: the first re-joiner "
      "sets min_nodes = N - 1 and last_call 0, so the round closes as soon as every survivor is in, as a "
      "recovery round does), or, armed, arms its recovery as soon as its generation formed (`muster_rdzv_arm`) "
      "and after MEMBER_LOST calls `muster_rdzv_recover`, which takes the armed call's answer (it came with "
      "the event).  Every run checks that the N - 1 survivors and the standby hold the same answer: "
      "one generation, ranks 0..N-1, survivors in their old order, the standby last (recover: also the "
      "previous generation, old ranks and one excluded member).  Medians over the repetitions, in ms.", ""]
L += ["- detection: kill to MEMBER_LOST at the last survivor (p50 in brackets);",
      "- agreement: first recover (or join) call to the last survivor answered;",
      "- after detection: last survivor told MEMBER_LOST to the last survivor answered;",
      "- standby: kill to the standby's answer (admitted into the next generation).", ""]
L += ["| members | mode | runs agreed | detection | agreement | after detection | standby | kill to all answered |",
      "|---|---|---|---|---|---|---|---|"]
for n in sizes:
    for m in MODES:
        rs = runs[(n, m)]
        ok = sum(1 for r in rs if r["result"] and r["result"]["agreed"])
        L.append(f"| {n} | {m} | {ok}/{len(rs)} | {fmt(med(n, m, 'detect_last_ms'))} ({fmt(med(n, m, 'detect_p50_ms'))}) "
                 f"| {fmt(med(n, m, 'agree_ms'))} | {fmt(med(n, m, 'after_detect_ms'))} | {fmt(med(n, m, 'standby_ms'))} "
                 f"| {fmt(med(n, m, 'total_ms'))} |")
KEYS = ("agree_ms", "after_detect_ms", "standby_ms", "total_ms")
for base, other, words in (("recover", "rejoin", "rejoin / recover (above 1: recovery is faster)"),
                           ("armed", "recover", "recover / armed (above 1: arming is faster)")):
    L += ["", f"Ratios, {words}:", "",
          "| members | agreement | after detection | standby | kill to all answered |", "|---|---|---|---|---|"]
    for n in sizes:
        L.append("| {} | {} | {} | {} | {} |".format(n, *(ratio(med(n, base, k), med(n, other, k)) for k in KEYS)))
def own(n, mode, key):
    v = [r[key] for r in recs if r["members"] == n and r["mode"] == mode and r.get(key) is not None]
    return statistics.median(v) if v else None
L += ["", "musterd's own clock (medians, ms): from the break (musterd saw the victim's connection "
      "close) to the generation agreed, and musterd's share of it: forming it and queueing every answer.", "",
      "| members | mode | break to agreed | musterd's share |", "|---|---|---|---|"]
for n in sizes:
    for m in ("recover", "armed"):
        L.append(f"| {n} | {m} | {fmt(own(n, m, 'musterd_agree_ms'))} | {fmt(own(n, m, 'musterd_answer_ms'))} |")
def step(n, mode, key):
    v = [r["musterd_steps_ms"][key] for r in recs if r["members"] == n and r["mode"] == mode
         and r.get("musterd_steps_ms") and r["musterd_steps_ms"][key] is not None]
    return statistics.median(v) if v else None
STEPS = ("tell", "ids", "queues", "members", "answer", "replies")
L += ["", "musterd's steps (medians, ms): telling the break to the members armed in the round (part of the time to "
      "agreement), then the share: checking ids, taking the nodes out of their queues, making them members, "
      "storing the answer and the generation key, queueing every reply.", "",
      "| members | mode | " + " | ".join(STEPS) + " |", "|---|---|" + "---|" * len(STEPS)]
for n in sizes:
    for m in ("recover", "armed"):
        L.append(f"| {n} | {m} | " + " | ".join(fmt(step(n, m, k)) for k in STEPS) + " |")
def first(n):
    v = [r["musterd_first_form_ms"] for r in recs if r["members"] == n and r.get("musterd_first_form_ms") is not None]
    return statistics.median(v) if v else None
L += ["", "The job's first generation (a plain round of every member's join), formed and answered by musterd "
      "(medians over every run of that size, ms): " + ", ".join(f"{n} members {fmt(first(n))}" for n in sizes) + "."]
top = sizes[-1]
a, t = med(top, "recover", "after_detect_ms"), med(top, "armed", "total_ms")
L += ["", f"Goal: agreement within 50 ms of detection at {top} members.  Recover after the event: "
      f"{fmt(a)} ms after the last survivor was told ({'met' if a is not None and a <= 50 else 'not met'}).  "
      f"Armed: the last survivor held its answer {fmt(t)} ms after the kill, detection included "
      f"({'met' if t is not None and t <= 50 else 'not met'})."]
open(out, "w").write("\n".join(L) + "\n")
print("\n".join(L))
EOF
