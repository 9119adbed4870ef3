#!/usr/bin/env python3
"""Check rendered Kubernetes manifests (docker/kubernetes/) against musterd and `muster run` themselves.

usage: check_kubernetes.py MUSTERD MUSTER LAUNCHER_MD RENDERED.yaml...

Static checks, on every workload's containers: each --flag of a musterd
container is in `musterd --help`, each MUSTER_* variable is a twin listed
there; each --flag of a `muster run` container is in `muster run --help`
(up to the program), each PET_* variable one that docs/launcher.md says is
honoured; the ports named store and metrics are the ports of --listen and
--metrics-listen (or their twins, or the image's defaults); the readiness
probe asks /readyz and the liveness probe /healthz on the metrics port;
every Service's targetPort is a port of the pods it selects; the
ServiceMonitor scrapes /metrics on a Service port that reaches the metrics
port; a job's PET_RDZV_ENDPOINT names the client Service and its store
port.  Then each musterd container's command line and environment run for
real: with --print-config (an --ha one: etcd is not started), and without
--ha as a daemon whose /readyz, /healthz and /metrics must answer 200.
Prints one line per check group; exits 1 on the first failed group.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

# The image's defaults (docker/Dockerfile ENV) when neither flag nor variable is given.
IMAGE_ENV = {"MUSTER_LISTEN": "0.0.0.0:29600", "MUSTER_METRICS_LISTEN": "0.0.0.0:29601"}
WORKLOADS = ("StatefulSet", "Deployment", "DaemonSet", "Job")

failures = []


def fail(msg):
    """Record one failed check."""
    failures.append(msg)
    print("FAIL " + msg)


def help_flags(argv):
    """The flags (name -> takes a value) and environment twins a --help text lists."""
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    text = out.stdout + out.stderr
    flags, twins = {}, set()
    for line in text.splitlines():
        m = re.match(r"^  --([a-z0-9-]+)(?: (\S+))?(?:\s+(MUSTER_[A-Z0-9_]+))?", line)
        if m:
            flags[m.group(1)] = bool(m.group(2)) and not m.group(2).startswith("MUSTER_")
            if m.group(3):
                twins.add(m.group(3))
            elif m.group(2) and m.group(2).startswith("MUSTER_"):
                twins.add(m.group(2))
        twins.update(re.findall(r"environment: \$(MUSTER_[A-Z0-9_]+)", line))
    if not flags:
        fail("no flags found in the output of %s" % " ".join(argv))
    return flags, twins


def honoured_pet(path):
    """The PET_* variables docs/launcher.md's table says muster run takes (not the ignored row)."""
    names = set()
    for line in open(path, encoding="utf-8"):
        if line.startswith("| `PET_"):
            cells = line.split("|")
            if not cells[2].strip().startswith("ignored"):
                names.update(re.findall(r"`(PET_[A-Z_]+)`", cells[1]))
    if not names:
        fail("no PET_* table in " + path)
    return names


def port_of(hostport):
    """The port of HOST:PORT or [V6]:PORT."""
    return int(hostport.rsplit(":", 1)[1])


def env_of(container):
    """A container's plain variables (name -> value, None for valueFrom)."""
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def option_values(args, flags, name):
    """Every value given to --name in a musterd command line (--name V or --name=V)."""
    vals = []
    for i, a in enumerate(args):
        if a == "--" + name and i + 1 < len(args):
            vals.append(args[i + 1])
        elif a.startswith("--" + name + "="):
            vals.append(a.split("=", 1)[1])
    return vals


def check_flags(args, flags, what, stop_at_program=False):
    """Each --flag in args is one of flags; with stop_at_program, options end at the first other word."""
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-"):
            if stop_at_program:
                return args[i:]
            i += 1
            continue
        name = a[2:].split("=", 1)[0].replace("_", "-") if a.startswith("--") else {"-m": "module"}.get(a, a)
        if name not in flags:
            fail("%s: %s is not an option (not in --help)" % (what, a))
        elif flags[name] and "=" not in a:
            i += 1
        i += 1
    return []


def pod_port(pod_spec, port):
    """The container port number a Service/probe port (name or number) reaches, or None."""
    for c in pod_spec["containers"]:
        for p in c.get("ports", []):
            if port == p.get("name") or port == p["containerPort"]:
                return p["containerPort"]
    return None


def selects(selector, labels):
    """Whether a label selector (matchLabels or a plain map) selects labels."""
    sel = selector.get("matchLabels", selector) if selector else {}
    return bool(sel) and all(labels.get(k) == v for k, v in sel.items())


def check_musterd(c, flags, twins, what):
    """Static checks of one musterd container; returns its listen and metrics ports."""
    args = (c.get("command") or []) + (c.get("args") or [])
    args = args[1:] if args and args[0] == "musterd" else args
    check_flags(args, flags, what)
    env = env_of(c)
    for name in env:
        if name.startswith("MUSTER_") and name not in twins:
            fail("%s: $%s is not an environment twin of musterd" % (what, name))
    merged = dict(IMAGE_ENV, **{k: v for k, v in env.items() if v is not None})
    listen = option_values(args, flags, "listen") or merged["MUSTER_LISTEN"].split(",")
    metrics = (option_values(args, flags, "metrics-listen") or [merged["MUSTER_METRICS_LISTEN"]])[-1]
    listen_ports = [port_of(v) for v in listen]
    metrics_port = port_of(metrics)
    served = set(listen_ports) | {metrics_port}
    served.update(port_of(v) for v in option_values(args, flags, "tcpstore-listen"))
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    for name, num in ports.items():
        if num not in served:
            fail("%s: containerPort %s (%d) is not a port musterd listens on %s" % (what, name, num, sorted(served)))
    if ports.get("store") not in listen_ports:
        fail("%s: port 'store' %s is not --listen's %s" % (what, ports.get("store"), listen_ports))
    if ports.get("metrics") != metrics_port:
        fail("%s: port 'metrics' %s is not --metrics-listen's %d" % (what, ports.get("metrics"), metrics_port))
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = (c.get(probe) or {}).get("httpGet")
        if not get:
            fail("%s: no %s with httpGet" % (what, probe))
            continue
        num = ports.get(get["port"], get["port"])
        if get.get("path") != path or num != metrics_port:
            fail("%s: %s asks %s on %s, not %s on the metrics port %d" % (what, probe, get.get("path"), get["port"],
                                                                         path, metrics_port))
    sp = (c.get("startupProbe") or {}).get("httpGet")
    if sp and (sp.get("path") not in ("/healthz", "/readyz") or ports.get(sp["port"], sp["port"]) != metrics_port):
        fail("%s: startupProbe asks %s on %s" % (what, sp.get("path"), sp["port"]))
    return args, env


def check_launcher(c, flags, twins, pet, what):
    """Static checks of one `muster run` container; returns its environment."""
    args = (c.get("command") or []) + (c.get("args") or [])
    if "run" not in args:
        return None
    prog = check_flags(args[args.index("run") + 1:], flags, what, stop_at_program=True)
    if not prog:
        fail("%s: muster run has no program" % what)
    env = env_of(c)
    for name in env:
        if name.startswith("PET_") and name not in pet:
            fail("%s: $%s is not a PET_* variable muster run honours (docs/launcher.md)" % (what, name))
        if name.startswith("MUSTER_") and name != "MUSTER_URL" and name not in twins:
            fail("%s: $%s is not a variable of muster run" % (what, name))
    return env


def real_run(musterd, args, env, what):
    """Run a musterd container's command line for real: --print-config, then (without --ha) the daemon
    itself, whose /readyz, /healthz and /metrics must answer 200."""
    tmp = tempfile.mkdtemp(prefix="muster-k8s-")
    try:
        argv, i = [], 0
        while i < len(args):
            a = args[i].replace("$(POD_NAME)", "musterd-0")
            name = a[2:] if a.startswith("--") else None
            if name in ("listen", "metrics-listen", "tcpstore-listen", "data-dir") and i + 1 < len(args):
                val = {"data-dir": tmp}.get(name, "127.0.0.1:0")
                argv += [a, val]
                i += 2
                continue
            argv.append(a)
            i += 1
        argv += ["--port-file", tmp + "/port", "--metrics-port-file", tmp + "/mport"]
        denv = {k: v for k, v in os.environ.items() if not k.startswith("MUSTER_")}
        denv.update({k: v for k, v in env.items() if v is not None and k.startswith("MUSTER_")})
        denv.setdefault("MUSTER_METRICS_LISTEN", "127.0.0.1:0")
        pc = subprocess.run([musterd] + argv + ["--print-config"], capture_output=True, text=True, env=denv, timeout=30)
        if pc.returncode != 0:
            fail("%s: musterd %s --print-config exits %d: %s" % (what, " ".join(argv), pc.returncode, pc.stderr.strip()))
            return
        if "--ha" in argv or any(a.startswith("--ha=") for a in argv):
            print("ok   %s: flags and values accepted (--print-config; --ha not started: no etcd)" % what)
            return
        with open(tmp + "/log", "w") as log:
            d = subprocess.Popen([musterd] + argv, stdout=log, stderr=log, env=denv)
        try:
            deadline = time.time() + 20
            while not os.path.exists(tmp + "/mport") and time.time() < deadline and d.poll() is None:
                time.sleep(0.05)
            port = open(tmp + "/mport").read().strip() if os.path.exists(tmp + "/mport") else None
            if not port:
                fail("%s: the daemon did not start: %s" % (what, open(tmp + "/log").read()[-2000:]))
                return
            for path in ("/readyz", "/healthz", "/metrics"):
                code = 0
                while time.time() < deadline:
                    try:
                        code = urllib.request.urlopen("http://127.0.0.1:%s%s" % (port, path), timeout=5).status
                    except Exception as e:  # a 503 while recovering, or not yet listening
                        code = getattr(e, "code", 0)
                    if code == 200:
                        break
                    time.sleep(0.1)
                if code != 200:
                    fail("%s: GET %s answered %s" % (what, path, code))
            print("ok   %s: ran as a daemon; /readyz, /healthz, /metrics answer 200" % what)
        finally:
            d.terminate()
            try:
                d.wait(15)
            except subprocess.TimeoutExpired:
                d.kill()
                d.wait()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    """Check every rendered file given."""
    musterd, muster, launcher_md = sys.argv[1:4]
    d_flags, d_twins = help_flags([musterd, "--help"])
    r_flags, r_twins = help_flags([muster, "run", "--help"])
    pet = honoured_pet(launcher_md)
    docs = []
    for path in sys.argv[4:]:
        docs += [(os.path.basename(path), d) for d in yaml.safe_load_all(open(path)) if d]
    services = [(f, d) for f, d in docs if d["kind"] == "Service"]
    pods = [(f, d) for f, d in docs if d["kind"] in WORKLOADS]
    n_musterd = n_launcher = 0
    runs = []
    for f, w in pods:
        spec = w["spec"]["template"]["spec"]
        for c in spec["containers"]:
            what = "%s %s/%s container %s" % (f, w["kind"], w["metadata"]["name"], c["name"])
            words = (c.get("command") or []) + (c.get("args") or [])
            if words[:1] == ["musterd"] or (c["name"] == "musterd" and not words):
                args, env = check_musterd(c, d_flags, d_twins, what)
                runs.append((args, env, what))
                n_musterd += 1
            elif words[:2] == ["muster", "run"]:
                env = check_launcher(c, r_flags, r_twins, pet, what)
                n_launcher += 1
                ep = (env or {}).get("PET_RDZV_ENDPOINT")
                if ep:
                    host, port = ep.rsplit(":", 1)
                    svc = [s for _, s in services if s["metadata"]["name"] == host.split(".")[0]
                           and (host.count(".") == 0 or host.split(".")[1] == s["metadata"].get("namespace"))]
                    if not svc:
                        fail("%s: PET_RDZV_ENDPOINT %s names no Service of the manifests" % (what, ep))
                    elif not any(p["port"] == int(port) and p.get("name") == "store" for p in svc[0]["spec"]["ports"]):
                        fail("%s: PET_RDZV_ENDPOINT %s is not the Service's store port" % (what, ep))
    if n_musterd == 0 or n_launcher == 0:
        fail("found %d musterd and %d `muster run` containers; expected both" % (n_musterd, n_launcher))
    print("ok   flags, variables, ports and probes of %d musterd and %d muster run containers" % (n_musterd, n_launcher)
          if not failures else "FAIL static checks")
    # Services reach container ports of the pods they select; ServiceMonitors scrape /metrics on one.
    for f, s in services:
        targets = [w for _, w in pods if selects(s["spec"].get("selector"), w["spec"]["template"]["metadata"]["labels"])
                   and w["metadata"].get("namespace") == s["metadata"].get("namespace")]
        if not targets:
            fail("%s: Service %s selects no pod" % (f, s["metadata"]["name"]))
        for p in s["spec"]["ports"]:
            for w in targets:
                if pod_port(w["spec"]["template"]["spec"], p.get("targetPort", p["port"])) is None:
                    fail("%s: Service %s port %s: targetPort %s is no container port of %s" % (
                        f, s["metadata"]["name"], p.get("name"), p.get("targetPort"), w["metadata"]["name"]))
    for f, m in [(f, d) for f, d in docs if d["kind"] == "ServiceMonitor"]:
        for ep in m["spec"]["endpoints"]:
            ok = False
            for _, s in services:
                if selects(m["spec"]["selector"], s["metadata"].get("labels", {})):
                    for p in s["spec"]["ports"]:
                        if p.get("name") == ep.get("port"):
                            ok = any(pod_port(w["spec"]["template"]["spec"], p.get("targetPort")) and
                                     p.get("targetPort") == "metrics" for _, w in pods)
            if not ok or ep.get("path", "/metrics") != "/metrics":
                fail("%s: ServiceMonitor %s endpoint %s does not reach /metrics on a metrics port" % (
                    f, m["metadata"]["name"], ep))
    if not failures:
        print("ok   Services and ServiceMonitors reach the ports they name")
    for args, env, what in runs:
        real_run(musterd, args, env, what)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
