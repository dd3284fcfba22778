"""The remote tier against servers that misbehave: each fault is bounded
(first-byte and total deadlines, memory), never kills the build (SIGPIPE),
and a termination signal still ends a transfer at once. The misbehaving
servers are small fakes written here, on 127.0.0.1 with a free port; the
kill -9 case runs a real redis-server behind a pausing proxy. Events are
ordered by handshakes (threading.Event set by the fake when the tool's
request arrived), never by sleeping.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import remote_servers  # noqa: E402

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
HAVE_REDIS = bool(shutil.which("redis-server") or os.path.exists("/usr/bin/redis-server"))
BACKENDS = ["redis", "http"]


# ---- fake servers ---------------------------------------------------------------------------------------------------

class Listener:
    """A socket listening on 127.0.0.1 (a free port) whose accept loop, on a thread of its own,
    hands each connection to `on_connection(conn)` until the socket is closed. Subclasses set
    their own state before calling `start()`."""

    def __init__(self, backlog=16):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()

    def start(self):
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.on_connection(conn)

    def on_connection(self, conn):
        raise NotImplementedError


class FakeServer(Listener):
    """Runs `handler(conn, server)` for each connection on a thread. `requested` is set once a
    connection has sent its first bytes (the handshake tests wait on)."""

    def __init__(self, handler):
        super().__init__()
        self.handler = handler
        self.requested = threading.Event()
        self.conns = []
        self.start()

    def url(self, kind):
        return f"redis://127.0.0.1:{self.port}" if kind == "redis" else f"http://127.0.0.1:{self.port}/cache"

    def on_connection(self, conn):
        self.conns.append(conn)
        threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        with contextlib.suppress(OSError):
            self.handler(conn, self)

    def recv_request(self, conn):
        data = conn.recv(65536)
        if data:
            self.requested.set()
        return data

    def close(self):
        self.stop.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for c in self.conns:
            with contextlib.suppress(OSError):
                c.close()


@contextlib.contextmanager
def fake(handler):
    s = FakeServer(handler)
    try:
        yield s
    finally:
        s.close()


def silent(conn, srv):
    """Accepts and reads, never answers."""
    while not srv.stop.is_set() and srv.recv_request(conn):
        pass


def dripping(kind):
    """Starts an answer at once (so the first-byte deadline is met), then sends one byte every
    0.3 s of a body it claims is 100 bytes long: only a total deadline ends it."""

    def handler(conn, srv):
        srv.recv_request(conn)
        head = b"$100\r\n" if kind == "redis" else b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
        conn.sendall(head)
        while not srv.stop.wait(0.3):
            conn.sendall(b"x")

    return handler


def huge_redis(conn, srv):
    """Answers STRLEN honestly small, and anything else with a bulk reply claiming 3 GiB, then
    streams up to 512 MiB of it and holds the connection."""
    buf = b""
    while not srv.stop.is_set():
        data = srv.recv_request(conn)
        if not data:
            return
        buf += data
        if b"STRLEN" in buf and b"GETRANGE" not in buf:
            conn.sendall(b":100\r\n")
            buf = b""
            continue
        conn.sendall(b"$3221225472\r\n")
        block = b"\0" * (1 << 20)
        for _ in range(512):
            conn.sendall(block)
        srv.stop.wait()
        return


def chunked_http(conn, srv):
    """The key's result list naming one result, then for that result a 200 answer without
    Content-Length (chunked) of 512 MiB, then held open."""
    while True:
        request = srv.recv_request(conn)
        if not request:
            return
        name = request.split(b" ", 2)[1].rsplit(b"/", 1)[-1].decode()
        if "." not in name:  # <key>: its result list (docs/remote.md, "Results on a server")
            body = json.dumps({"format": "tvmffi-jit results 1", "key": name, "results": ["0" * 64]}).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            continue
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        block = os.urandom(1 << 20)
        chunk = b"%x\r\n" % len(block) + block + b"\r\n"
        for _ in range(512):
            conn.sendall(chunk)
        srv.stop.wait()
        return


# ---- the project ----------------------------------------------------------------------------------------------------

@pytest.fixture
def proj(tmp_path):
    """One small C++ module (no tvm-ffi headers: a quick compile), its own cache root and TMPDIR."""
    d = tmp_path / "proj"
    d.mkdir()
    (d / "m.json").write_text(json.dumps({"name": "faults_m", "cpp_sources": "int m() { return 7; }"}))
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ, TVMFFI_JIT_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path / "tmp"))
    for k in list(env):
        if k.startswith("TVMFFI_JIT_REMOTE") or k in ("TVMFFI_JIT_CXX_LAUNCHER", "CXX", "CC"):
            del env[k]

    class P:
        pass

    p = P()
    p.dir, p.env, p.cache, p.tmp, p.root = d, env, tmp_path / "cache", tmp_path / "tmp", tmp_path
    p.manifest = d / "m.json"
    return p


def make_big_module(proj, tmp_path):
    """8 MiB of random bytes in the module (assembled in with .incbin: a quick compile), so its
    blob does not compress and a transfer outlasts the socket buffers."""
    (tmp_path / "noise.bin").write_bytes(os.urandom(8 << 20))
    proj.manifest.write_text(json.dumps({"name": "faults_big", "cpp_sources":
                                         f'__asm__(".section .rodata\\n.incbin \\"{tmp_path / "noise.bin"}\\"\\n'
                                         f'.previous");\nint m() {{ return 7; }}\n'}))


def build(proj, *remotes, env=None, timeout=120):
    args = [TOOL, "build", "-m", str(proj.manifest), "--json"]
    for r in remotes:
        args += ["--remote", r]
    t0 = time.monotonic()
    p = subprocess.run(args, env=dict(proj.env, **(env or {})), capture_output=True, text=True, timeout=timeout)
    p.elapsed = time.monotonic() - t0
    return p


def build_measuring_rss(proj, remote, env=None):
    """The build under a Python parent that reports its children's largest max RSS (KiB)."""
    code = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:])\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
            "sys.exit(p.returncode)\n")
    p = subprocess.run([sys.executable, "-c", code, TOOL, "build", "-m", str(proj.manifest), "--remote", remote],
                       env=dict(proj.env, **(env or {})), capture_output=True, text=True, timeout=300)
    rss_kib = int(p.stderr.strip().splitlines()[-1])
    print(f"max RSS of the build and its children: {rss_kib / 1024:.1f} MiB")
    return p, rss_kib * 1024


def remote_warnings(stderr):
    return [l for l in stderr.splitlines() if "remote cache" in l]


# ---- deadlines ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", BACKENDS)
def test_a_server_that_accepts_and_never_answers_costs_the_first_byte_deadline(proj, kind):
    with fake(silent) as srv:
        p = build(proj, srv.url(kind), env={"TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT": "1s"})
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["cache"] == "miss"
    (w,) = remote_warnings(p.stderr)
    assert "first-byte deadline" in w and "TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT" in w, w
    # One deadline (1 s), not the 60 s transfer deadline; the build itself is on top.
    assert p.elapsed < 20, p.elapsed


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_batch_gives_a_silent_server_up_once_for_the_whole_command(proj, kind):
    # One store per command: the first module to ask waits out the first-byte
    # deadline and gives the server up; the other three never connect.
    mods = []
    for i in range(4):
        m = proj.dir / f"b{i}.json"
        m.write_text(json.dumps({"name": f"faults_b{i}", "cpp_sources": f"int b{i}() {{ return {i}; }}"}))
        mods += ["-m", str(m)]
    with fake(silent) as srv:
        p = subprocess.run([TOOL, "build", *mods, "-j", "4", "--remote", srv.url(kind)],
                           env=dict(proj.env, TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT="1s"), capture_output=True,
                           text=True, timeout=120)
        connections = len(srv.conns)
    assert p.returncode == 0, p.stderr
    assert len(remote_warnings(p.stderr)) == 1, p.stderr
    assert connections == 1, connections
    s = stats(proj)
    assert (s["remote_errors"], s["remote_timeouts"], s["misses"]) == (1, 1, 4), s


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_server_dripping_a_byte_at_a_time_is_bounded_by_the_total_deadline(proj, kind):
    with fake(dripping(kind)) as srv:
        p = build(proj, srv.url(kind), env={"TVMFFI_JIT_REMOTE_TIMEOUT": "2s"})
    assert p.returncode == 0, p.stderr
    (w,) = remote_warnings(p.stderr)
    assert "transfer deadline" in w and "TVMFFI_JIT_REMOTE_TIMEOUT" in w, w
    assert p.elapsed < 20, p.elapsed


def stats(proj):
    return json.loads(subprocess.run([TOOL, "cache", "stats", "--json"], env=proj.env, capture_output=True,
                                     text=True, check=True).stdout)


@pytest.mark.parametrize("kind", BACKENDS)
def test_cache_stats_count_a_missed_deadline_as_a_remote_timeout_and_a_refusal_as_an_error_only(proj, kind):
    with fake(silent) as srv:
        assert build(proj, srv.url(kind), env={"TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT": "1s"}).returncode == 0
    s = stats(proj)
    assert (s["remote_errors"], s["remote_timeouts"]) == (1, 1), s
    # Another module (a miss again) against a port nobody listens on: refused at
    # once, an error that is not a timeout.
    proj.manifest.write_text(json.dumps({"name": "faults_m", "cpp_sources": "int m() { return 8; }"}))
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"redis://127.0.0.1:{port}" if kind == "redis" else f"http://127.0.0.1:{port}/c"
    assert build(proj, url, env={"TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT": "1s"}).returncode == 0
    s = stats(proj)
    assert (s["remote_errors"], s["remote_timeouts"]) == (2, 1), s


def test_bad_deadline_and_size_variables_are_usage_errors_naming_the_variable(proj):
    for var, value in (("TVMFFI_JIT_REMOTE_TIMEOUT", "soon"), ("TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT", "0"),
                       ("TVMFFI_JIT_REMOTE_MAX_BLOB", "-1")):
        p = build(proj, "redis://127.0.0.1:1", env={var: value})
        assert p.returncode == 2 and var in p.stderr, (var, p.stderr)


# ---- memory ---------------------------------------------------------------------------------------------------------

def test_a_redis_claiming_a_3_gib_reply_does_not_make_the_tool_buffer_it(proj):
    with fake(huge_redis) as srv:
        p, rss = build_measuring_rss(proj, srv.url("redis"))
    assert p.returncode == 0, p.stderr
    assert "more than the" in p.stderr, p.stderr
    # The fake sends 512 MiB: buffering it would show. Compilers are children too (tens of MiB).
    assert rss < 200 << 20, rss


def test_an_http_chunked_answer_beyond_the_limit_is_cut_at_the_limit_without_doubling(proj):
    limit = 160 << 20
    with fake(chunked_http) as srv:
        # Read-only: the fake answers every request with the chunked body, an upload's too.
        p, rss = build_measuring_rss(proj, srv.url("http"), env={"TVMFFI_JIT_REMOTE_MAX_BLOB": str(limit),
                                                                  "TVMFFI_JIT_REMOTE_READ_ONLY": "1"})
    assert p.returncode == 0, p.stderr
    assert "larger than the limit (167772160 bytes)" in p.stderr and "TVMFFI_JIT_REMOTE_MAX_BLOB" in p.stderr, p.stderr
    # At most the limit plus a small constant (the tool itself, a block): a string grown by
    # doubling would have held 256 MiB at one point.
    assert rss < limit + (48 << 20), rss / (1 << 20)


# ---- result lists and what one lookup may download -------------------------------------------------------------------

def redis_sent(srv):
    """The bytes redis-server has sent its clients so far (INFO stats)."""
    for line in srv.command("INFO", "stats").decode().splitlines():
        if line.startswith("total_net_output_bytes:"):
            return int(line.split(":")[1])
    raise AssertionError("no total_net_output_bytes in INFO stats")


def portable_key(build_json):
    return json.loads((Path(build_json["entry_dir"]) / "entry.json").read_text())["portable_key"]


@pytest.mark.skipif(not HAVE_REDIS, reason="redis-server comes from scripts/setup.sh")
def test_an_oversized_result_list_misses_its_own_module_only_and_a_writer_repairs_it(proj, tmp_path):
    (proj.dir / "n.json").write_text(json.dumps({"name": "faults_n", "cpp_sources": "int n() { return 9; }"}))
    batch = [TOOL, "build", "-m", str(proj.manifest), "-m", str(proj.dir / "n.json"), "--json"]

    def run_batch(root, *extra):
        env = dict(proj.env, TVMFFI_JIT_CACHE_DIR=str(tmp_path / root))
        p = subprocess.run([*batch, *extra], env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        return {j["name"]: j for j in map(json.loads, p.stdout.splitlines())}, p.stderr, env

    with remote_servers.server("redis", tmp_path / "redis") as srv:
        first, _, _ = run_batch("root-a", "--remote", srv.url)  # uploads both modules
        list_name = f"tvmffi-jit:{portable_key(first['faults_m'])}"
        listed = json.loads(srv.get(list_name))
        srv.set(list_name, json.dumps(listed) + " " * (16 << 10))  # still valid JSON, over the 16 KiB cap
        got, err, env = run_batch("root-b", "--remote", srv.url, "--remote-read-only")
        assert (got["faults_m"]["cache"], got["faults_n"]["cache"]) == ("miss", "remote-hit"), err
        assert "cap of a result list" in err and "TVMFFI_JIT_REMOTE_MAX_BLOB" not in err, err
        assert "not using it again" not in err, err
        s = json.loads(subprocess.run([TOOL, "cache", "stats", "--json"], env=env, capture_output=True,
                                      text=True, check=True).stdout)
        assert (s["remote_errors"], s["remote_corrupt"], s["remote_hits"]) == (0, 1, 1), s
        # A read-write build that misses on it writes a list that reads again.
        run_batch("root-c", "--remote", srv.url)
        repaired = json.loads(srv.get(list_name))
        assert len(srv.get(list_name)) < 1024 and len(repaired["results"]) == 1, repaired
        assert srv.get(f"{list_name}.{repaired['results'][0]}"), "the list names the result just uploaded"


@pytest.mark.skipif(not HAVE_REDIS, reason="redis-server comes from scripts/setup.sh")
def test_one_lookup_downloads_at_most_its_budget_from_a_list_of_garbage_results(proj, tmp_path):
    with remote_servers.server("redis", tmp_path / "redis") as srv:
        p = build(proj, srv.url, env={"TVMFFI_JIT_REMOTE_READ_ONLY": "1"})
        assert p.returncode == 0, p.stderr
        key = portable_key(json.loads(p.stdout))
        # What a writer to the server can plant: 8 listed ids, each object 4 MiB of garbage.
        ids = [f"{i:064x}" for i in range(1, 9)]
        for rid in ids:
            srv.set(f"tvmffi-jit:{key}.{rid}", os.urandom(4 << 20))
        srv.set(f"tvmffi-jit:{key}", json.dumps({"format": "tvmffi-jit results 1", "key": key, "results": ids}))
        before = redis_sent(srv)
        env = {"TVMFFI_JIT_REMOTE_READ_ONLY": "1", "TVMFFI_JIT_REMOTE_MAX_LOOKUP": "10M",
               "TVMFFI_JIT_CACHE_DIR": str(tmp_path / "fresh-root")}
        p = build(proj, srv.url, env=env)
        sent = redis_sent(srv) - before
    assert p.returncode == 0 and json.loads(p.stdout)["cache"] == "miss", p.stderr
    print(f"one lookup of a list of 8 x 4 MiB garbage results downloaded {sent / (1 << 20):.2f} MiB")
    # Two whole results and half of a third (refused once its size is over what is left), not 8 x 4 MiB.
    assert sent < (10 << 20) + (64 << 10), sent
    assert "TVMFFI_JIT_REMOTE_MAX_LOOKUP" in p.stderr, p.stderr


# ---- SIGPIPE ----------------------------------------------------------------------------------------------------------

class PausingProxy(Listener):
    """Forwards client <-> real Redis, until the client starts a SET: then it stops reading
    from the client (the upload blocks in the tool's send) and sets `upload_started`. After
    the test kills Redis, `cut()` ends the client's connection as a dead server's host does."""

    def __init__(self, upstream_port):
        super().__init__(backlog=8)
        self.upstream_port = upstream_port
        self.upload_started = threading.Event()
        self.clients = []
        self.start()

    def on_connection(self, c):
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.clients.append(c)
        up = socket.create_connection(("127.0.0.1", self.upstream_port))
        threading.Thread(target=self._up, args=(c, up), daemon=True).start()
        threading.Thread(target=self._down, args=(c, up), daemon=True).start()

    def _up(self, c, up):
        with contextlib.suppress(OSError):
            while True:
                data = c.recv(65536)
                if not data:
                    return
                if b"SET" in data:
                    self.upload_started.set()
                    return  # never read again
                up.sendall(data)

    def _down(self, c, up):
        with contextlib.suppress(OSError):
            while True:
                data = up.recv(65536)
                if not data:
                    return
                c.sendall(data)

    def cut(self):
        """What the client sees from a Redis killed mid-upload: a FIN (the kernel closes the dead
        process's socket), then a RST for the bytes that keep arriving. A socket in CLOSE_WAIT
        that gets a RST reports EPIPE on the next send: the SIGPIPE case."""
        for c in self.clients:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_WR)
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
                c.close()
        self.sock.close()


@pytest.mark.skipif(not HAVE_REDIS, reason="redis-server comes from scripts/setup.sh")
def test_kill_9_of_redis_during_an_upload_is_a_warning_and_the_build_prints_its_path(proj, tmp_path):
    make_big_module(proj, tmp_path)
    redis = remote_servers.Redis(tmp_path / "redis")
    proxy = PausingProxy(redis.port)
    try:
        p = subprocess.Popen([TOOL, "build", "-m", str(proj.manifest), "--json", "--remote",
                              f"redis://127.0.0.1:{proxy.port}"], env=proj.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        assert proxy.upload_started.wait(120), "the upload never started"
        redis.proc.kill()  # kill -9
        redis.proc.wait()
        proxy.cut()
        out, err = p.communicate(timeout=60)
    finally:
        redis.stop()
        proxy.sock.close()
    assert p.returncode == 0, (p.returncode, err)
    j = json.loads(out)
    assert Path(j["path"]).is_file() and j["cache"] == "miss"
    assert remote_warnings(err), err


# ---- signals ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_a_transfer_ends_it_within_a_second_and_removes_staging(proj, kind, sig, code):
    # Deadlines far away: only the signal can end this transfer.
    env = dict(proj.env, TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT="60s", TVMFFI_JIT_REMOTE_TIMEOUT="120s")
    with fake(silent) as srv:
        p = subprocess.Popen([TOOL, "build", "-m", str(proj.manifest), "--remote", srv.url(kind)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert srv.requested.wait(60), "the tool never asked the server"
            t0 = time.monotonic()
            p.send_signal(sig)
            out, err = p.communicate(timeout=10)
            elapsed = time.monotonic() - t0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert p.returncode == code, (p.returncode, err)
    assert elapsed < 1.0, elapsed
    assert out == ""
    staging = proj.cache / "tmp"
    assert not staging.exists() or list(staging.iterdir()) == []
    assert list(proj.tmp.iterdir()) == []


class HoldingProxy(Listener):
    """Forwards client <-> real Redis, but after the first MiB of an answer holds the rest back
    (sets `holding`) until `release()`: a download caught in the middle, for as long as the test
    needs to send its signal."""

    def __init__(self, upstream_port):
        super().__init__(backlog=8)
        self.upstream_port = upstream_port
        self.holding = threading.Event()
        self.released = threading.Event()
        self.start()

    def on_connection(self, c):
        up = socket.create_connection(("127.0.0.1", self.upstream_port))
        threading.Thread(target=self._pipe, args=(c, up, False), daemon=True).start()
        threading.Thread(target=self._pipe, args=(up, c, True), daemon=True).start()

    def _pipe(self, src, dst, hold):
        sent = 0
        with contextlib.suppress(OSError):
            while True:
                data = src.recv(65536)
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                if hold and sent >= (1 << 20) and not self.released.is_set():
                    self.holding.set()
                    self.released.wait()
                dst.sendall(data)
                sent += len(data)

    def release(self):
        self.released.set()

    def close(self):
        self.release()
        self.sock.close()


@pytest.mark.skipif(not HAVE_REDIS, reason="redis-server comes from scripts/setup.sh")
def test_a_sigint_during_a_download_that_would_succeed_is_not_lost(proj, tmp_path):
    make_big_module(proj, tmp_path)
    with remote_servers.server("redis", tmp_path / "redis") as redis:
        assert build(proj, redis.url).returncode == 0  # fills the server
        proxy = HoldingProxy(redis.port)
        env = dict(proj.env, TVMFFI_JIT_CACHE_DIR=str(tmp_path / "second-root"))
        p = subprocess.Popen([TOOL, "build", "-m", str(proj.manifest), "--json", "--remote",
                              f"redis://127.0.0.1:{proxy.port}"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            assert proxy.holding.wait(120), "the download never started"
            t0 = time.monotonic()
            p.send_signal(signal.SIGINT)
            proxy.release()  # the rest of a valid blob arrives
            out, err = p.communicate(timeout=30)
            elapsed = time.monotonic() - t0
        finally:
            proxy.close()
            if p.poll() is None:
                p.kill()
                p.wait()
    assert p.returncode == 130, (p.returncode, err)
    assert out == "" and elapsed < 1.0, (out, elapsed)
    staging = tmp_path / "second-root" / "tmp"
    assert not staging.exists() or list(staging.iterdir()) == []


# ---- READ_ONLY --------------------------------------------------------------------------------------------------------

@pytest.mark.skipif(not HAVE_REDIS, reason="redis-server comes from scripts/setup.sh")
@pytest.mark.parametrize("value,uploads", [("True", False), ("YES", False), ("On", False), ("y", False),
                                           ("off", True), ("N", True), ("FALSE", True)])
def test_read_only_accepts_the_usual_boolean_spellings_in_any_case(proj, tmp_path, value, uploads):
    with remote_servers.server("redis", tmp_path / "redis") as srv:
        p = build(proj, srv.url, env={"TVMFFI_JIT_REMOTE_READ_ONLY": value})
        assert p.returncode == 0, p.stderr
        assert (srv.dbsize() == 3) == uploads  # a result, the key's result list and the team's costs


@pytest.mark.parametrize("value", ["2", "maybe", "enabled"])
def test_read_only_with_an_unknown_spelling_is_exit_2_naming_the_variable(proj, value):
    p = build(proj, "redis://127.0.0.1:1", env={"TVMFFI_JIT_REMOTE_READ_ONLY": value})
    assert p.returncode == 2, p.stderr
    assert "TVMFFI_JIT_REMOTE_READ_ONLY" in p.stderr and "true" in p.stderr
    failure = json.loads(p.stdout)  # --json: one failure object, nothing built
    assert failure["status"] == "failed" and failure["exit_code"] == 2 and "path" not in failure


# ---- export temp file --------------------------------------------------------------------------------------------------

def test_export_does_not_write_through_a_symlink_planted_at_its_temp_name(proj, tmp_path):
    assert build(proj).returncode == 0
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "out" / "entries.tar.zst"
    out.parent.mkdir()
    # The next pids (a busy machine may hand out a few in between): FILE.tmp.<pid> for each.
    last = int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    for pid in range(last + 1, last + 3000):
        os.symlink(victim, f"{out}.tmp.{pid}")
    p = subprocess.run([TOOL, "cache", "export", str(out)], env=proj.env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert victim.read_text() == "precious\n"
    assert out.is_file() and not out.is_symlink() and out.stat().st_size > 0
    # Only the planted links and the export are there: no temp file of ours was left.
    assert sorted(x.name for x in out.parent.iterdir() if not x.is_symlink()) == ["entries.tar.zst"]
