#!/usr/bin/python3
"""Turn bench/run.sh's raw.jsonl into results.json, results.md and plot.png.

Usage: /usr/bin/python3 report.py RESULTS_DIR

Repeated runs of one point are summarised by their median (min and max are kept in
results.json).  The targets are ratios within this one run, as the issue asks.
"""
import json
import os
import statistics
import sys

SERVERS = ["musterd", "musterd-tcpstore", "tcpstore", "redis", "floord", "floor"]
LABEL = {"musterd": "musterd (native)", "musterd-tcpstore": "musterd (TCPStore listener)",
         "tcpstore": "TCPStore 1.13", "redis": "Redis 7", "floor": "ping-pong floor",
         "floord": "floor server (1 read + 1 write per request)"}


def load(path):
    """Records of raw.jsonl (lines that do not parse are skipped)."""
    recs = []
    with open(path) as f:
        for line in f:
            try:
                recs.append(json.loads(line))
            except ValueError:
                pass
    return recs


def get(d, dotted, default=None):
    """d["a"]["b"] for "a.b"; default when any step is missing."""
    for k in dotted.split("."):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def pick(recs, **want):
    """Records whose tags equal every given value."""
    return [r for r in recs if all(r.get(k) == v for k, v in want.items())]


def med(recs, metric):
    """Median of a result metric over records (None when there is none)."""
    vals = [get(r, "result." + metric) for r in recs]
    vals = [v for v in vals if isinstance(v, (int, float)) and v >= 0]
    return statistics.median(vals) if vals else None


def fmt(v, digits=1):
    """A number for a table cell ("—" when missing)."""
    if v is None:
        return "—"
    if abs(v) >= 1000:
        return "{:,.0f}".format(v)
    return ("{:.%df}" % digits).format(v)


def table(head, rows):
    """A markdown table."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def storm_fit(recs, metric="total_s"):
    """Least-squares line of musterd's storm time (barrier, median per N; or another
    metric such as its server CPU seconds) against N, and its value at 100k ranks."""
    pts = []
    for n in sorted({r["conns"] for r in pick(recs, section="storm", server="musterd", op="barrier")}):
        t = med(pick(recs, section="storm", server="musterd", op="barrier", conns=n), metric)
        if t is not None:
            pts.append((n, t))
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    slope = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else 0
    return {"points": pts, "slope_s_per_rank": slope, "intercept_s": my - slope * mx,
            "projected_100k_s": my + slope * (100000 - mx)}


def last_good(recs, metric):
    """The last record whose result metric is positive (a server that failed to start reads 0)."""
    good = [r for r in recs if (get(r, "result." + metric) or 0) > 0]
    return good[-1] if good else None


def ratio(a, b):
    """a / b, or None."""
    return a / b if a is not None and b else None


def targets(recs):
    """Every target of the issue: (name, bar, measured, met)."""
    t = []
    lat_m = med(pick(recs, section="latency", server="musterd", placement="1cpu", op="get"), "latency_us.p50")
    lat_f = med(pick(recs, section="latency", server="floor", placement="1cpu"), "latency_us.p50")
    r = ratio(lat_m, lat_f)
    t.append(("single-client round trip, one CPU: musterd get p50 / ping-pong floor p50", "≤ 2.2×",
              r and "%.2f× (%s / %s µs)" % (r, fmt(lat_m), fmt(lat_f)), r is not None and r <= 2.2))
    m1 = med(pick(recs, section="capacity", server="musterd", placement="1cpu", op="get", conns=128), "ops_per_server_cpu_s")
    t1 = med(pick(recs, section="capacity", server="tcpstore", placement="1cpu", op="get", conns=128), "ops_per_server_cpu_s")
    f1 = med(pick(recs, section="capacity", server="floord", placement="1cpu", op="get", conns=128), "ops_per_server_cpu_s")
    r = ratio(m1, t1)
    t.append(("one CPU, 128 clients (get): req/s per server CPU-second vs TCPStore (floor server: %s)"
              % (fmt(ratio(f1, t1), 2) + "×" if ratio(f1, t1) else "—"), "(≥ 2.5×)",
              r and "%.2f× (%s vs %s)" % (r, fmt(m1), fmt(t1)), None))
    for op, rop in (("get", "get"), ("add", "incr")):
        m = med(pick(recs, section="capacity", server="musterd", placement="2cpu", op=op, conns=128), "ops_per_server_cpu_s")
        ts = med(pick(recs, section="capacity", server="tcpstore", placement="2cpu", op=op, conns=128), "ops_per_server_cpu_s")
        rd = med(pick(recs, section="capacity", server="redis", placement="2cpu", op=rop, conns=128), "ops_per_server_cpu_s")
        r = ratio(m, ts)
        t.append(("capacity at 128 clients (%s): req/s per server CPU-second vs TCPStore" % op, "≥ 2.5×",
                  r and "%.2f× (%s vs %s)" % (r, fmt(m), fmt(ts)), r is not None and r >= 2.5))
        r = ratio(m, rd)
        t.append(("capacity at 128 clients (%s): req/s per server CPU-second vs Redis (%s)" % (op, rop), "> 1×",
                  r and "%.2f× (%s vs %s)" % (r, fmt(m), fmt(rd)), r is not None and r > 1))
        if op == "get":
            fl = med(pick(recs, section="capacity", server="floord", placement="2cpu", op=op, conns=128), "ops_per_server_cpu_s")
            r = ratio(fl, ts)
            t.append(("physical limit at 128 clients (get): floor server vs TCPStore, per server CPU-second",
                      "(bounds the 2.5× target)", r and "%.2f× (%s vs %s)" % (r, fmt(fl), fmt(ts)), None))
            r = ratio(m, fl)
            t.append(("musterd vs the floor server at 128 clients (get), per server CPU-second", "(how close)",
                      r and "%.2f× (%s vs %s)" % (r, fmt(m), fmt(fl)), None))
    s16 = pick(recs, section="storm", server="musterd", op="barrier", conns=16000)
    worst = max((get(r, "result.total_s", -1) for r in s16), default=None)
    ok = bool(s16) and all(get(r, "result.complete") for r in s16)
    t.append(("storm, 16k ranks (native barrier): every run complete, no error, worst time", "≤ 1 s",
              s16 and "%d/%d complete, worst %s s" % (sum(bool(get(r, "result.complete")) for r in s16), len(s16), fmt(worst, 3)),
              ok and worst is not None and 0 <= worst <= 1))
    m16 = med(s16, "total_s")
    ts10 = med(pick(recs, section="storm", server="tcpstore", conns=10000), "total_s")
    r = ratio(m16, ts10)
    t.append(("storm: musterd 16k time / TCPStore 10k time", "≤ 0.1×",
              r and "%.3f× (%s s vs %s s)" % (r, fmt(m16, 3), fmt(ts10, 2)), r is not None and r <= 0.1))
    c16 = med(s16, "server_cpu_s")
    c10 = med(pick(recs, section="storm", server="tcpstore", conns=10000), "server_cpu_s")
    r = ratio(c16, c10)
    t.append(("storm: musterd 16k server CPU / TCPStore 10k server CPU (robust to other load on the machine)",
              "(≤ 0.1× in time)", r and "%.3f× (%s vs %s CPU-s)" % (r, fmt(c16, 2), fmt(c10, 2)), None))
    f16 = med(pick(recs, section="storm", server="floord", conns=16000), "total_s")
    r = ratio(f16, ts10)
    t.append(("physical limit: floor server 16k time (same exchanges, answered at once) / TCPStore 10k time",
              "(bounds the 0.1× target)", r and "%.3f× (%s s vs %s s)" % (r, fmt(f16, 3), fmt(ts10, 2)), None))
    r = ratio(m16, f16)
    t.append(("storm 16k: musterd vs the floor server", "(how close)",
              r and "%.2f× (%s s vs %s s)" % (r, fmt(m16, 3), fmt(f16, 3)), None))
    fit = storm_fit(recs)
    p = fit and fit["projected_100k_s"]
    t.append(("storm: projected 100k ranks from the 1k..16k slope", "≤ 10 s", p and "%s s" % fmt(p, 2), p is not None and p <= 10))
    m512 = med(pick(recs, section="rproc", server="musterd", op="barrier", conns=512), "total_s")
    t512 = med(pick(recs, section="rproc", server="tcpstore", conns=512), "total_s")
    r = ratio(m512, t512)
    t.append(("real-process rendezvous, N=512: musterd / TCPStore", "≤ 0.5×",
              r and "%.2f× (%s s vs %s s)" % (r, fmt(m512, 3), fmt(t512, 3)), r is not None and r <= 0.5))
    mk = last_good(pick(recs, section="memory", server="musterd", kind="keys"), "rss_idle_kib")
    mk = [mk] if mk else []
    bpk = get(mk[0], "result.bytes_per_key_1000000") if mk else None
    bpk = bpk if bpk is not None else (get(mk[0], "result.bytes_per_key_100000") if mk else None)
    t.append(("memory per 64-byte-value key (1M keys)", "≤ 120 B", bpk is not None and "%d B" % bpk, bpk is not None and bpk <= 120))
    idle = get(mk[0], "result.rss_idle_kib") if mk else None
    t.append(("idle RSS", "≤ 4 MiB", idle is not None and "%.2f MiB" % (idle / 1024), idle is not None and idle <= 4096))
    return t


def md_latency(recs):
    """Single-client latency table."""
    rows = []
    for pl in ("1cpu", "2cpu"):
        for srv in SERVERS:
            for op in ("pingpong", "get", "add", "incr", "set"):
                rs = pick(recs, section="latency", server=srv, placement=pl, op=op)
                if rs:
                    rows.append([LABEL[srv], "one CPU" if pl == "1cpu" else "server CPU 0, client CPU 1", op,
                                 fmt(med(rs, "latency_us.p50")), fmt(med(rs, "latency_us.p99")),
                                 fmt(med(rs, "latency_us.p999")), fmt(med(rs, "ops_per_s"), 0), len(rs)])
    return table(["server", "placement", "op", "p50 µs", "p99 µs", "p99.9 µs", "ops/s", "runs"], rows)


def md_capacity(recs):
    """Capacity tables: ops/s with server CPU use, and ops per server CPU-second."""
    clients = sorted({r["conns"] for r in pick(recs, section="capacity", placement="2cpu")})
    rows = []
    for op in ("get", "add", "incr"):
        for srv in SERVERS:
            rs = pick(recs, section="capacity", server=srv, placement="2cpu", op=op)
            if not rs:
                continue
            cells = []
            for c in clients:
                x = pick(rs, conns=c)
                cells.append("%s [%s] %s/cpu-s" % (fmt(med(x, "ops_per_s"), 0), fmt(med(x, "server_cpu_util"), 2),
                                                   fmt(med(x, "ops_per_server_cpu_s"), 0)) if x else "—")
            rows.append([LABEL[srv], op] + cells)
    out = table(["server", "op"] + ["c=%d" % c for c in clients], rows)
    rows = []
    for srv in SERVERS:
        rs = pick(recs, section="capacity", server=srv, placement="1cpu")
        if rs:
            rows.append([LABEL[srv], rs[0].get("op"), rs[0].get("conns"), fmt(med(rs, "ops_per_s"), 0),
                         fmt(med(rs, "ops_per_server_cpu_s"), 0), fmt(med(rs, "latency_us.p50")), len(rs)])
    if rows:
        out += "\nOne CPU (server and load both on CPU 0):\n\n"
        out += table(["server", "op", "clients", "ops/s", "ops per server CPU-s", "p50 µs", "runs"], rows)
    return out


def md_storm(recs):
    """Storm table: median (min–max) seconds to the last rank holding the id."""
    rows = []
    for srv, op in (("musterd", "barrier"), ("musterd", "join"), ("musterd-tcpstore", "add+wait+get"),
                    ("tcpstore", "add+wait+get"), ("floord", "barrier")):
        rs = pick(recs, section="storm", server=srv, op=op)
        for n in sorted({r["conns"] for r in rs}):
            x = pick(rs, conns=n)
            if all(r.get("skipped") for r in x):
                rows.append([LABEL[srv], op, n, "skipped", x[0]["skipped"], "", "", "", ""])
                continue
            x = [r for r in x if not r.get("skipped")]
            times = [get(r, "result.total_s") for r in x if get(r, "result.complete")]
            errs = sum(get(r, "result.errors", 0) or 0 for r in x)
            rows.append([LABEL[srv], op, n, "%d/%d" % (len(times), len(x)),
                         fmt(statistics.median(times), 3) if times else "failed",
                         "%s–%s" % (fmt(min(times), 3), fmt(max(times), 3)) if times else "—",
                         fmt(med(x, "connect_all_s"), 3), fmt(med(x, "server_cpu_s"), 2), errs])
    return table(["server", "protocol", "ranks", "complete", "median s", "min–max s", "all connected s",
                  "server CPU s", "errors"], rows)


def md_rproc(recs):
    """Real-process rendezvous table."""
    rows = []
    for srv, op in (("musterd", "barrier"), ("musterd", "join"), ("musterd-tcpstore", "add+wait+get"),
                    ("tcpstore", "add+wait+get")):
        rs = pick(recs, section="rproc", server=srv, op=op)
        for n in sorted({r["conns"] for r in rs}):
            x = pick(rs, conns=n)
            ok = sum(bool(get(r, "result.complete")) for r in x)
            rows.append([LABEL[srv], x[0].get("client"), op, n, "%d/%d" % (ok, len(x)),
                         fmt(med(x, "total_s"), 3), fmt(med(x, "connect_all_s"), 3)])
    return table(["server", "client", "op", "processes", "complete", "gate → last has id, s", "all connected, s"], rows)


def md_memory(recs):
    """Memory table."""
    rows = []
    for srv in ("musterd", "tcpstore", "redis"):
        k = last_good(pick(recs, section="memory", server=srv, kind="keys"), "rss_idle_kib")
        c = last_good(pick(recs, section="memory", server=srv, kind="conns"), "rss_before_kib")
        k = k["result"] if k else {}
        c = c["result"] if c else {}
        rows.append([LABEL[srv], fmt(k.get("rss_idle_kib", 0) / 1024, 2) if k else "—",
                     fmt(k.get("bytes_per_key_100000"), 0), fmt(k.get("bytes_per_key_1000000"), 0),
                     fmt(c.get("bytes_per_conn"), 0), c.get("conns", "—")])
    return table(["server", "idle RSS MiB", "B/key at 100k", "B/key at 1M", "B per idle connection", "connections"], rows)


def md_faults(recs):
    """Load and fault runs table."""
    rows = []
    for r in pick(recs, section="faults"):
        res, test = r.get("result") or {}, r.get("test")
        if test == "idle_burst":
            what = "%s idle connections, then one add each: all answered in %s s, %s errors" % (
                r.get("conns"), fmt(res.get("burst_s"), 3), res.get("errors"))
        elif test == "stall":
            what = "64 get clients, %s stalled mid-request: %s ops/s, p99 %s µs, %s unanswered" % (
                r.get("stalled"), fmt(res.get("ops_per_s"), 0), fmt(get(res, "latency_us.p99")),
                get(res, "error_detail.unanswered"))
        else:
            if test == "kill_join":
                res = dict(res, parked_during="%s (joins are not counted as waiters)" % res.get("parked_during"))
            what = "1000 clients parked (%s) then SIGKILL: connections %s → %s → %s, parked %s → %s, clean: %s in %s s" % (
                res.get("parked_by_client"), res.get("conns_before"), res.get("conns_during"), res.get("conns_after"),
                res.get("parked_during"), res.get("parked_after"), res.get("clean"), fmt(res.get("clean_s"), 2))
        rows.append([LABEL.get(r.get("server"), r.get("server")), test, what])
    return table(["server", "test", "result"], rows)


def plot(recs, path):
    """Four panels: ops/s, p50 and ops per server CPU-second against clients; storm time against ranks."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(2, 2, figsize=(12, 9))
    for srv in SERVERS:
        op = "get"
        rs = pick(recs, section="capacity", server=srv, placement="2cpu", op=op)
        cs = sorted({r["conns"] for r in rs})
        if not cs:
            continue
        for a, metric in ((ax[0][0], "ops_per_s"), (ax[0][1], "latency_us.p50"), (ax[1][0], "ops_per_server_cpu_s")):
            ys = [med(pick(rs, conns=c), metric) for c in cs]
            a.plot(cs, [y if y is not None else float("nan") for y in ys], marker="o", label=LABEL[srv])
    for srv, op in (("musterd", "barrier"), ("musterd", "join"), ("musterd-tcpstore", "add+wait+get"),
                    ("tcpstore", "add+wait+get"), ("floord", "barrier")):
        rs = pick(recs, section="storm", server=srv, op=op)
        ns = sorted({r["conns"] for r in rs})
        if ns:
            ax[1][1].plot(ns, [med(pick(rs, conns=n), "total_s") or float("nan") for n in ns], marker="o",
                          label="%s %s" % (LABEL[srv], op))
    titles = [("get: ops/s (server CPU 0, load CPU 1)", "ops/s"), ("get: p50 latency", "µs"),
              ("get: ops per server CPU-second", "ops / CPU-s"), ("rendezvous storm: last rank has the id", "s")]
    for a, (title, yl) in zip([ax[0][0], ax[0][1], ax[1][0], ax[1][1]], titles):
        a.set_title(title)
        a.set_ylabel(yl)
        a.set_xscale("log")
        a.grid(True, alpha=0.3)
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=8)
    ax[0][1].set_yscale("log")
    ax[1][1].set_yscale("log")
    for a in (ax[0][0], ax[0][1], ax[1][0]):
        a.set_xlabel("clients (connections, one request in flight each)")
    ax[1][1].set_xlabel("simulated ranks")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    """Read raw.jsonl from the results directory and write the three outputs."""
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results")
    recs = load(os.path.join(out, "raw.jsonl"))
    cmd = open(os.path.join(out, "command.txt")).read() if os.path.exists(os.path.join(out, "command.txt")) else ""
    tg = targets(recs)
    fit = storm_fit(recs)
    crashes = pick(recs, section="crash")
    prof = pick(recs, section="profile")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"command": cmd, "targets": [{"target": a, "bar": b, "measured": c or None,
                                                "met": None if d is None else bool(d)}
                                               for a, b, c, d in tg],
                   "storm_fit": fit, "records": recs}, f, indent=1)
    md = ["# muster benchmark results\n", "Produced by one command (see `command.txt`):\n",
          "```\n" + cmd.strip() + "\n```\n", "## Targets (ratios within this run)\n",
          table(["target", "bar", "measured", "met"],
                [[a, b, c or "not measured", "—" if d is None else "yes" if d else "**no**"] for a, b, c, d in tg])]
    if crashes:
        md.append("\n**Server exits during the run:** " + "; ".join(
            "%s (status %s) after %s %s" % (c.get("server"), c.get("rc"), c.get("after_section"),
                                            json.dumps(c.get("after", {}))) for c in crashes) + "\n")
    md += ["\n## Single client, one request in flight\n", md_latency(recs),
           "\n## Capacity: closed-loop clients, server on CPU 0, load generator on CPU 1\n",
           "Cells: ops/s [server CPU cores used] ops per server CPU-second.\n\n", md_capacity(recs),
           "\n## Rendezvous storm: one process, N simulated ranks connect at once, barrier, 128-byte id\n",
           md_storm(recs)]
    if fit:
        md.append("\nmusterd (native barrier) fit over %s: %.3f ms per 1000 ranks + %.3f s; projected 100k ranks: %.2f s\n"
                  % (", ".join("%d" % p[0] for p in fit["points"]), fit["slope_s_per_rank"] * 1e6,
                     fit["intercept_s"], fit["projected_100k_s"]))
        cpu = storm_fit(recs, "server_cpu_s")
        if cpu:
            md.append("Server CPU alone (a lower bound on the time with the server saturated): %.3f ms per 1000 ranks; "
                      "projected 100k ranks: %.2f CPU-seconds\n" % (cpu["slope_s_per_rank"] * 1e6, cpu["projected_100k_s"]))
    md += ["\n## Real processes: N forked clients, barrier + id broadcast\n", md_rproc(recs),
           "\n## Memory (fresh servers; keys `/mem/%08d`, 64-byte values)\n", md_memory(recs),
           "\n## Load and fault runs\n", md_faults(recs)]
    if prof:
        p = prof[0]["result"]
        md.append("\n## Profile\n\nmusterd under 128 get clients: %s system calls for %s requests (%s per request); "
                  "perf report in `profile-perf.txt`.\n" % (p.get("syscalls"), p.get("requests"), p.get("syscalls_per_request")))
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("".join(md))
    try:
        plot(recs, os.path.join(out, "plot.png"))
    except Exception as e:  # the tables are still useful without the plot
        sys.stderr.write("report.py: plot failed: %s\n" % e)


if __name__ == "__main__":
    main()
