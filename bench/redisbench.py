#!/usr/bin/python3
"""Run redis-benchmark for one test and print one JSON object in the load generator's
shape: ops/s, latency percentiles (redis-benchmark's CSV: no p99.9) and, given the
server's pid, the server CPU seconds spent during the run and ops per server CPU second.

Usage: redisbench.py --port P --test get|set|incr --clients C --requests N [--server-pid PID]
                     [--cpu CPU]   (the benchmark itself is pinned with taskset when given)
"""
import argparse
import csv
import io
import json
import os
import subprocess
import time


def server_cpu(pid):
    """utime + stime of pid in seconds, from /proc/PID/stat."""
    if not pid:
        return 0.0
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    """Run the benchmark and print the JSON line."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--requests", type=int, default=100000)
    ap.add_argument("--server-pid", type=int, default=0)
    ap.add_argument("--cpu", default="")
    ap.add_argument("--value-size", type=int, default=64)
    args = ap.parse_args()
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(args.port), "-c", str(args.clients),
           "-n", str(args.requests), "-P", "1", "-d", str(args.value_size), "-r", "1000",
           "-t", args.test, "--csv"]
    if args.cpu:
        cmd = ["taskset", "-c", args.cpu] + cmd
    cpu0, t0 = server_cpu(args.server_pid), time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
    secs, cpu = time.monotonic() - t0, server_cpu(args.server_pid) - cpu0
    rows = list(csv.DictReader(io.StringIO(out)))
    res = {"tool": "redis-benchmark", "op": args.test, "conns": args.clients, "requests": args.requests}
    if rows:
        r = rows[0]
        rps = float(r["rps"])
        res.update({
            "ops_per_s": rps, "errors": 0, "seconds": args.requests / rps if rps else secs,
            "latency_us": {"mean": 1e3 * float(r["avg_latency_ms"]), "min": 1e3 * float(r["min_latency_ms"]),
                           "p50": 1e3 * float(r["p50_latency_ms"]), "p95": 1e3 * float(r["p95_latency_ms"]),
                           "p99": 1e3 * float(r["p99_latency_ms"]), "max": 1e3 * float(r["max_latency_ms"])},
        })
    else:
        res.update({"errors": args.requests, "ops_per_s": 0})
    if args.server_pid:
        res.update({"server_cpu_s": cpu, "server_cpu_util": cpu / secs if secs else 0,
                    "ops_per_server_cpu_s": args.requests / cpu if cpu > 0 else 0})
    print(json.dumps(res, separators=(",", ":")))


if __name__ == "__main__":
    main()
