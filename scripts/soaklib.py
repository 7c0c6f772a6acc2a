"""Shared plumbing for scripts/soak-crash and scripts/soak-relay: real processes on loopback (the bridge
binary, a radio-hub island, a mesh reader, `nostr post` phones, a real relay from .venv), each stopped by
the script. Standard library only."""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
GEOHASH = "u4pruy"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} never opened")


class Proc:
    """A child whose stdout and stderr lines are collected by two threads."""

    def __init__(self, argv, env=None, name="proc"):
        self.name = name
        self.lines = {"out": [], "err": []}
        self.lock = threading.Lock()
        self.p = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        for stream, key in ((self.p.stdout, "out"), (self.p.stderr, "err")):
            threading.Thread(target=self._pump, args=(stream, key), daemon=True).start()

    def _pump(self, stream, key):
        for raw in stream:
            with self.lock:
                self.lines[key].append(raw.decode("utf-8", "replace").rstrip("\n"))

    def snapshot(self, key):
        with self.lock:
            return list(self.lines[key])

    def wait_line(self, predicate, key="out", timeout=60.0, what="a line"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.snapshot(key):
                if predicate(line):
                    return line
            if self.p.poll() is not None and not any(predicate(l) for l in self.snapshot(key)):
                raise RuntimeError(f"{self.name} exited ({self.p.returncode}) before {what}:\n" + "\n".join(self.snapshot("err")[-20:]))
            time.sleep(0.02)
        raise RuntimeError(f"timed out waiting for {what} from {self.name}")

    def kill(self, sig=signal.SIGKILL):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()


def json_lines(lines):
    for line in lines:
        try:
            yield json.loads(line)
        except ValueError:
            continue


class World:
    def __init__(self, binary, venv):
        self.binary = binary
        self.venv = venv
        self.dir = tempfile.mkdtemp(prefix="soak-")
        self.procs = []
        self.relay_port = free_port()
        self.relay = None

    @property
    def relay_url(self):
        return f"ws://127.0.0.1:{self.relay_port}"

    def spawn(self, args, env=None, name="proc"):
        p = Proc([self.binary] + args, env=env, name=name)
        self.procs.append(p)
        return p

    def start_relay(self, kind="nostr-relay"):
        if kind == "nostr-relay":
            template = open(os.path.join(ROOT, "tools/peers/nostr-relay.yaml.in")).read()
            config = template.replace("@DB_PATH@", f"{self.dir}/relay.sqlite3").replace("17011", str(self.relay_port))
            path = f"{self.dir}/nostr-relay.yaml"
            open(path, "w").write(config)
            argv = [f"{self.venv}/bin/nostr-relay", "-c", path, "serve", "--use-uvicorn"]
        else:
            argv = [f"{self.venv}/bin/python", os.path.join(ROOT, "tools/peers/sdk_relay.py"), "--port", str(self.relay_port)]
        self.relay = Proc(argv, name="relay")
        self.procs.append(self.relay)
        wait_port(self.relay_port)

    def start_island(self):
        port = free_port()
        hub = self.spawn(["radio-hub", "--listen", f"127.0.0.1:{port}", "--mtu", "512"], name="hub")
        hub.wait_line(lambda l: '"listening"' in l, what="hub listening")
        return port

    def bridge_env(self, name, island, extra=None):
        env = {"BRIDGE_GEOHASH": GEOHASH, "BRIDGE_DATA_DIR": f"{self.dir}/{name}", "BRIDGE_RELAYS": self.relay_url,
               "BRIDGE_RELAY_DIRECTORY": "off", "BRIDGE_MESH": f"tcp://127.0.0.1:{island}", "BRIDGE_HTTP_LISTEN": "off",
               "BRIDGE_NICKNAME": name, "BRIDGE_POW_BITS": "8"}
        env.update(extra or {})
        return env

    def start_bridge(self, name, island, extra=None, wait_relay=True):
        bridge = self.spawn(["run"], env=self.bridge_env(name, island, extra), name=name)
        if wait_relay:
            bridge.wait_line(lambda l: "relay connected" in l, key="err", timeout=60, what="relay connected")
        return bridge

    def start_reader(self, island):
        reader = self.spawn(["mesh", "listen", "--mesh", f"tcp://127.0.0.1:{island}", "--ephemeral", "--nickname", "reader"],
                            name="reader")
        reader.wait_line(lambda l: '"ready"' in l, what="reader ready")
        return reader

    def post(self, text, user=None, timeout=15.0):
        """Posts to the channel; returns the event id when the relay accepted it, else None."""
        data = f"{self.dir}/phone-{user}" if user else tempfile.mkdtemp(dir=self.dir, prefix="poster-")
        args = [self.binary, "nostr", "post", "--geohash", GEOHASH, "--relay", self.relay_url, "--pow", "8"]
        if user:
            args += ["--nickname", user]
        try:
            out = subprocess.run(args + [text], env={**os.environ, "BRIDGE_DATA_DIR": data}, capture_output=True,
                                 timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        for obj in json_lines(out.stdout.decode("utf-8", "replace").splitlines()):
            if obj.get("type") == "published" and isinstance(obj.get("event"), dict):
                return obj["event"].get("id")
        return None

    def close(self, keep=False):
        for p in reversed(self.procs):
            p.kill()
        if keep:
            for i, p in enumerate(self.procs):
                for key in ("out", "err"):
                    with open(f"{self.dir}/{i:03d}-{p.name}.{key}.log", "w") as f:
                        f.write("\n".join(p.snapshot(key)) + "\n")
            print(f"kept {self.dir} (logs: NNN-<process>.out/err.log)")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def carriers(reader):
    """event id → number of carriers the reader printed for it."""
    counts = {}
    for obj in json_lines(reader.snapshot("out")):
        if obj.get("event") == "carrier":
            eid = (obj.get("nostrEvent") or {}).get("id")
            if eid:
                counts[eid] = counts.get(eid, 0) + 1
    return counts


def metrics(port):
    """The bridge's /metrics as {series: value} (empty when unreachable)."""
    import urllib.request
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def common_args(parser):
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build/debug/bitchat-bridge"))
    parser.add_argument("--venv", default=os.environ.get("BRIDGE_TEST_VENV", os.path.join(ROOT, ".venv")))
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
