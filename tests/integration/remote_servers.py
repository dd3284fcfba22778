"""Real cache servers for the remote-tier tests: redis-server and nginx (its
http_dav_module answers PUT) from Debian, each started on 127.0.0.1 with a
free port, a temp config and temp data, and stopped by the fixture even when
the test fails. Shared by tests/integration/test_remote*.py and bench/remote.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Redis:
    def __init__(self, workdir: Path):
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [shutil.which("redis-server") or "/usr/bin/redis-server", "--bind", "127.0.0.1", "--port", str(self.port),
             "--save", "", "--appendonly", "no", "--dir", str(self.dir), "--daemonize", "no",
             "--protected-mode", "yes", "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.proc)

    def command(self, *args):
        """One RESP command; returns the decoded reply (int, bytes or None)."""
        payload = f"*{len(args)}\r\n".encode()
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            payload += b"$%d\r\n%s\r\n" % (len(a), a)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(payload)
            f = s.makefile("rb")
            line = f.readline()
            kind, rest = line[:1], line[1:-2]
            if kind == b":":
                return int(rest)
            if kind == b"+":
                return rest.decode()
            if kind == b"-":
                raise RuntimeError(rest.decode())
            if kind == b"$":
                n = int(rest)
                return None if n < 0 else f.read(n + 2)[:-2]
            if kind == b"*":
                n = int(rest)
                out = []
                for _ in range(n):
                    ln = f.readline()
                    m = int(ln[1:-2])
                    out.append(f.read(m + 2)[:-2])
                return out
            raise RuntimeError(f"unexpected reply {line!r}")

    def keys(self):
        return sorted(k.decode() for k in self.command("KEYS", "*"))

    def dbsize(self):
        return self.command("DBSIZE")

    def get(self, key):
        return self.command("GET", key)

    def set(self, key, value):
        return self.command("SET", key, value)

    def stop(self):
        stop(self.proc)


NGINX_CONF = """\
{user}
daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log {dir}/access.log;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  client_max_body_size 1g;
  server {{
    listen 127.0.0.1:{port};
    root {dir}/store;
    location / {{
      dav_methods PUT;
      create_full_put_path on;
      dav_access user:rw;
    }}
  }}
}}
"""


class Nginx:
    """nginx as a WebDAV PUT/GET store: the blob of object O is <store>/O."""

    def __init__(self, workdir: Path):
        self.dir = workdir
        (self.dir / "store").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/cache"
        conf = self.dir / "nginx.conf"
        conf.write_text(NGINX_CONF.format(dir=self.dir, port=self.port,
                                          user="user root root;" if os.geteuid() == 0 else ""))
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([nginx, "-p", str(self.dir), "-c", str(conf), "-e", str(self.dir / "error.log")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.proc)

    def blobs(self):
        return sorted(p for p in (self.dir / "store").rglob("*") if p.is_file())

    def requests(self, method):
        log = self.dir / "access.log"
        return [l for l in log.read_text().splitlines() if f'"{method} ' in l] if log.exists() else []

    def stop(self):
        stop(self.proc)


@contextlib.contextmanager
def server(kind, workdir):
    s = Redis(workdir) if kind == "redis" else Nginx(workdir)
    try:
        yield s
    finally:
        s.stop()


@contextlib.contextmanager
def unresponsive_port():
    """A port whose listen queue is full, so a new connection never completes:
    what a host that does not answer looks like to a client (the connect
    timeout is what bounds it)."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(0)
    port = lst.getsockname()[1]
    fillers = []
    try:
        for _ in range(8):  # the kernel admits backlog + 1; extra SYNs are dropped
            c = socket.socket()
            c.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                c.connect(("127.0.0.1", port))
            fillers.append(c)
        time.sleep(0.05)
        yield port
    finally:
        for c in fillers:
            c.close()
        lst.close()
