"""A master in this process and owners as child processes (the `fluxon` binary), so a test
can SIGKILL an owner while a client of this process uses it. Sockets and configs live in a
private temporary directory removed by stop(); every wait is bounded."""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import fluxon

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FLUXON_BIN = os.environ.get("FLUXON_BIN", os.path.join(ROOT, "fluxon"))


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class ProcCluster:
    def __init__(self, owners=2, cluster_id="vllmtest", segment_bytes="64MiB", grant_bytes="8MiB"):
        self.dir = tempfile.mkdtemp(prefix="fluxon-vllm-")
        self.cluster_id = cluster_id
        self.procs = []
        self.master = None
        try:
            self.master = fluxon.Node({"role": "master", "cluster_id": cluster_id, "listen": "127.0.0.1:0",
                                       "log_level": "error"})
            for i in range(owners):
                self._spawn(i, segment_bytes, grant_bytes)
            for i in range(owners):
                self.wait_ready(i)
        except BaseException:
            self.stop()
            raise

    def restart(self, i):
        """Owner i again, on the same socket (after kill(i)); waits until it is ready."""
        self.kill(i)
        p = self.procs[i]
        log = open(os.path.join(self.dir, f"o{i}.log"), "a")
        self.procs[i] = subprocess.Popen(p.args, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        log.close()
        self.wait_ready(i)

    def _spawn(self, i, segment_bytes, grant_bytes):
        cfg = {"role": "owner", "cluster_id": self.cluster_id, "node_id": f"vo{i}", "log_level": "error",
               "master": f"127.0.0.1:{self.master.port}", "socket": self.socket(i),
               "segment_bytes": segment_bytes, "reserve": {"grant_bytes": grant_bytes}}
        path = os.path.join(self.dir, f"o{i}.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        log = open(os.path.join(self.dir, f"o{i}.log"), "w")
        p = subprocess.Popen([FLUXON_BIN, "--role=owner", "--config", path], stdout=log, stderr=subprocess.STDOUT,
                             preexec_fn=_die_with_parent)
        log.close()
        self.procs.append(p)

    def socket(self, i):
        return os.path.join(self.dir, f"s{i}", "owner.sock")

    def client(self, i, **kw):
        kw.setdefault("timeout_ms", 3000)
        return fluxon.Client(self.socket(i), cluster_id=self.cluster_id, log_level="error", **kw)

    def wait_ready(self, i, timeout=15.0):
        """Until owner i answers a client and the master lists it alive."""
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            if self.procs[i].poll() is not None:
                with open(os.path.join(self.dir, f"o{i}.log")) as f:
                    raise RuntimeError(f"owner {i} exited {self.procs[i].returncode}: {f.read()[-2000:]}")
            if not os.path.exists(self.socket(i)):
                time.sleep(0.02)
                continue
            try:
                with self.client(i) as c:
                    nodes = c.cluster_nodes()
                    if any(n["node_id"] == f"vo{i}" and n["alive"] for n in nodes):
                        return
            except fluxon.FluxonError as e:
                last = e
            time.sleep(0.02)
        raise TimeoutError(f"owner {i} not ready within {timeout} s ({last})")

    def kill(self, i):
        p = self.procs[i]
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=10)

    def stop(self):
        for i in range(len(self.procs)):
            self.kill(i)
        if self.master is not None:
            self.master.stop()
            self.master = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
