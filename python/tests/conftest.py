"""pytest fixtures: an embedded cluster (master + owners in this process) per test."""
import gc
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import fluxon  # noqa: E402


@pytest.fixture
def cluster():
    lc = fluxon.LocalCluster(owners=2, cluster_id="pytest", cluster_token="tok", segment_bytes="96MiB")
    yield lc
    gc.collect()
    lc.stop()


@pytest.fixture
def client(cluster):
    c = cluster.client(0)
    yield c
    c.close()


def wait_stat(c, name, want, timeout=5.0):
    """Polls an owner counter until it equals want (bounded)."""
    end = time.monotonic() + timeout
    v = None
    while time.monotonic() < end:
        v = c.stats()["owner"][name]
        if v == want:
            return True
        time.sleep(0.01)
    raise AssertionError(f"owner stat {name} is {v}, expected {want} within {timeout}s")


def quiet(c):
    gc.collect()
    wait_stat(c, "holders", 0)
    wait_stat(c, "handles_open", 0)
    wait_stat(c, "slots_prepared", 0)
