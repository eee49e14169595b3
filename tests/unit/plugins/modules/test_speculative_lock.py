# SPDX-License-Identifier: Apache-2.0
"""speculative_lock: take, renew, busy, stale detection, safe breaking, and concurrent acquirers."""

import importlib.util
import json
import multiprocessing
import os
import subprocess
import time

import pytest
from ansible_collections.jetson_llm.speculative.plugins.modules import speculative_lock as lock

HERE = os.path.dirname(os.path.abspath(__file__))


def test_take_renew_release(tmp_path):
    path = str(tmp_path / "state" / "rollout.lock")
    first = lock.acquire(path, "run-a", controller="ctl-1", pid=11, ttl=60, now=1000.0)
    assert first["acquired"] and not first["busy"] and first["changed"]
    with open(path) as handle:
        record = json.load(handle)
    assert record == {"run_id": "run-a", "controller": "ctl-1", "pid": 11, "started_at": 1000.0, "renewed_at": 1000.0, "expires_at": 1060.0}
    again = lock.acquire(path, "run-a", controller="ctl-1", pid=11, ttl=60, now=1030.0)
    assert again["acquired"] and not again["changed"]
    assert again["holder"]["started_at"] == 1000.0 and again["holder"]["expires_at"] == 1090.0
    other = lock.acquire(path, "run-b", controller="ctl-2", ttl=60, now=1080.0)
    assert other["busy"] and not other["acquired"] and not other["changed"]
    assert other["msg"] == "busy: rollout run-a since 1970-01-01T00:16:40Z (controller ctl-1)"
    assert other["holder"]["run_id"] == "run-a"
    # the other run cannot release it
    kept = lock.release(path, "run-b")
    assert not kept["changed"] and os.path.exists(path)
    gone = lock.release(path, "run-a")
    assert gone["changed"] and gone["released"] and not os.path.exists(path)
    assert not lock.release(path, "run-a")["changed"]


def test_expired_lock_is_broken_and_kept_aside(tmp_path):
    path = str(tmp_path / "rollout.lock")
    lock.acquire(path, "old", ttl=10, now=1000.0)
    res = lock.acquire(path, "new", ttl=10, now=1011.0)
    assert res["acquired"] and res["changed"]
    assert res["broken"]["run_id"] == "old"
    assert res["broken"]["reason"] == "expired at 1970-01-01T00:16:50Z"
    with open(res["broken"]["moved_to"]) as handle:
        assert json.load(handle)["run_id"] == "old"
    with open(path) as handle:
        assert json.load(handle)["run_id"] == "new"


def test_dead_runs_force_and_check_mode(tmp_path):
    path = str(tmp_path / "rollout.lock")
    lock.acquire(path, "old", ttl=3600, now=1000.0)
    assert lock.acquire(path, "new", ttl=60, dead_runs=["other"], now=1001.0)["busy"]
    preview = lock.acquire(path, "new", ttl=60, dead_runs=["old"], check=True, now=1001.0)
    assert preview["acquired"] and preview["broken"]["reason"] == "run old is known to be dead"
    with open(path) as handle:
        assert json.load(handle)["run_id"] == "old"  # check mode wrote nothing
    assert [f for f in os.listdir(str(tmp_path)) if ".broken-" in f] == []
    res = lock.acquire(path, "new", ttl=60, dead_runs=["old"], now=1001.0)
    assert res["acquired"] and res["broken"]["run_id"] == "old"
    forced = lock.acquire(path, "third", ttl=60, force=True, now=1002.0)
    assert forced["acquired"] and forced["broken"]["reason"] == "forced"


def test_local_holder_process_gone(tmp_path):
    path = str(tmp_path / "rollout.lock")
    proc = subprocess.Popen(["true"])
    proc.wait()
    lock.acquire(path, "old", controller="localhost", pid=proc.pid, ttl=3600, now=1000.0)
    res = lock.acquire(path, "new", controller="localhost", pid=os.getpid(), ttl=3600, now=1001.0)
    assert res["acquired"] and "is gone" in res["broken"]["reason"]
    # a live local holder is respected
    assert lock.acquire(path, "third", ttl=3600, now=1002.0)["busy"]


def test_unreadable_lock(tmp_path):
    path = tmp_path / "rollout.lock"
    path.write_text("{not json")
    young = lock.acquire(str(path), "new", ttl=3600)
    assert young["busy"] and not young["acquired"]
    assert young["msg"].startswith("busy: %s is not JSON" % path) and "counts as held until" in young["msg"]
    os.utime(str(path), (time.time() - 7200, time.time() - 7200))
    old = lock.acquire(str(path), "new", ttl=3600)
    assert old["acquired"] and old["broken"]["reason"].startswith("unreadable and older than 3600 s")


def test_broken_copies_are_bounded(tmp_path):
    path = str(tmp_path / "rollout.lock")
    for i in range(9):
        assert lock.acquire(path, "run-%d" % i, ttl=1, now=1000.0 + 10 * i)["acquired"]
    assert len([f for f in os.listdir(str(tmp_path)) if ".broken-" in f]) == lock.KEEP_BROKEN


# ---------------------------------------------------------------------------- races


def _contend(path, run_id, start, queue, now):
    start.wait()
    res = lock.acquire(path, run_id, controller="ctl-%s" % run_id, ttl=60, now=now)
    queue.put((run_id, res["acquired"], res["busy"], (res["broken"] or {}).get("run_id")))


def _race(path, n, now=None):
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    queue = ctx.Queue()
    procs = [ctx.Process(target=_contend, args=(path, "run-%d" % i, start, queue, now)) for i in range(n)]
    for proc in procs:
        proc.start()
    time.sleep(0.2)
    start.set()
    results = [queue.get(timeout=60) for _proc in procs]
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    return results


@pytest.mark.parametrize("rounds", range(3))
def test_concurrent_acquirers_exactly_one_wins(tmp_path, rounds):
    path = str(tmp_path / ("r%d" % rounds) / "rollout.lock")
    results = _race(path, 8)
    winners = [r for r in results if r[1]]
    assert len(winners) == 1, results
    assert all(r[2] for r in results if not r[1])
    with open(path) as handle:
        assert json.load(handle)["run_id"] == winners[0][0]


@pytest.mark.parametrize("rounds", range(3))
def test_concurrent_breakers_of_a_stale_lock_exactly_one_wins(tmp_path, rounds):
    path = str(tmp_path / ("r%d" % rounds) / "rollout.lock")
    lock.acquire(path, "dead", ttl=1, now=1000.0)
    results = _race(path, 8, now=2000.0)
    winners = [r for r in results if r[1]]
    assert len(winners) == 1, results
    assert winners[0][3] == "dead"
    assert all(r[2] and r[3] is None for r in results if not r[1])
    with open(path) as handle:
        assert json.load(handle)["run_id"] == winners[0][0]
    assert len([f for f in os.listdir(os.path.dirname(path)) if ".broken-" in f]) == 1


# ---------------------------------------------------------------------------- through ansible


def _ansible():
    spec = importlib.util.spec_from_file_location("_vllm_benchmark_helpers_lock", os.path.join(HERE, "test_vllm_benchmark.py"))
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    return helpers


def _run(tmp_path, args, check=False):
    helpers = _ansible()
    cmd = [os.path.join(helpers.BIN, "ansible"), "localhost", "-m", "jetson_llm.speculative.speculative_lock", "-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    return subprocess.Popen(cmd, env=helpers.ansible_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _host(proc):
    out, _err = proc.communicate(timeout=300)
    return json.loads(out)["plays"][0]["tasks"][0]["hosts"]["localhost"]


@pytest.mark.skipif(not os.path.exists(os.path.join(os.path.dirname(HERE), "..", "..", "..", ".venv", "bin", "ansible")), reason="needs the venv")
def test_two_controllers_at_once_through_ansible(tmp_path):
    path = str(tmp_path / "state" / "rollout.lock")
    procs = [_run(tmp_path, {"path": path, "run_id": rid, "controller": rid, "fail_on_busy": False}) for rid in ("ctl-a", "ctl-b")]
    results = [_host(p) for p in procs]
    assert sorted(r["acquired"] for r in results) == [False, True], results
    loser = next(r for r in results if not r["acquired"])
    winner = next(r for r in results if r["acquired"])
    assert loser["busy"] and loser.get("failed") is not True
    assert loser["msg"].startswith("busy: rollout %s since " % winner["holder"]["run_id"])
    failing = _host(_run(tmp_path, {"path": path, "run_id": "ctl-c"}))
    assert failing["failed"] is True and failing["msg"].startswith("busy: rollout ")
    preview = _host(_run(tmp_path, {"path": path, "run_id": winner["holder"]["run_id"], "state": "released"}, check=True))
    assert preview["changed"] is True and os.path.exists(path)
    done = _host(_run(tmp_path, {"path": path, "run_id": winner["holder"]["run_id"], "state": "released"}))
    assert done["changed"] is True and not os.path.exists(path)
