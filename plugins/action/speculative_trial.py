# -*- coding: utf-8 -*-
# Copyright (c) 2026, jetson_llm.speculative contributors
# SPDX-License-Identifier: Apache-2.0
"""Action plugin of jetson_llm.speculative.speculative_trial (documentation in plugins/modules/speculative_trial.py).

Controller-side, in the shape of ``ansible.builtin.reboot``: one task per host runs the whole trial. It asks
``_trial.next_action`` (the one home of the trial's control flow) what to do, carries it out on the device
with the collection's own modules (the same ones the roles run: ``ansible.builtin.copy``,
``ansible.builtin.systemd_service``, ``vllm_ready``, ``vllm_server_info``, ``vllm_benchmark``,
``vllm_output_probe``, ``speculative_lock``), feeds the observation back, and returns the outcome.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.jetson_llm.speculative.plugins.module_utils import _trial
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import SPECULATIVE
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.ksweep import draft_cost
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._planning.checks import SpecdecError
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rendering.unit import service_files
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._rollout_steps import RolloutStepError, trial_blocks
from ansible_collections.jetson_llm.speculative.plugins.plugin_utils._values import plain

display = Display()

_FQCN = "jetson_llm.speculative.speculative_trial"
_SERVER_KEYS = {
    "url": str,
    "service": str,
    "config_path": str,
    "model": str,
    "api_key": str,
    "ready_timeout": (int, float),
    "ready_delay": (int, float),
    "config_files": list,
    "start_record": str,
    "unit": dict,
}
_REQUIRED_SERVER = ("url", "service", "config_path", "model", "unit")
# vllm_benchmark options the caller may set once for every measurement (the trial sets the rest per call)
_BENCH_KEYS = frozenset(
    ("url", "model", "api_key", "output_len", "endpoint", "prompts_file", "prompts_name", "deadline", "result_dir", "label", "service", "timeout")
)
_PROBE_KEYS = frozenset(("url", "model", "api_key", "endpoint", "count", "min_match_fraction", "output_len", "timeout"))
_LOCK_KEYS = frozenset(("path", "run_id", "controller", "pid", "ttl"))


class _Fault(Exception):
    """A fault of the device during the trial (not a verdict): the task fails with this message."""


def _estimate(verdict):
    if not isinstance(verdict, dict):
        return ""
    parts = []
    for key, level in (("gain_c1", "c=1"), ("gain_c8", "c=8")):
        est = verdict.get(key)
        if isinstance(est, dict) and est.get("estimate") is not None and est.get("ci"):
            parts.append("%s %+.1f %% [%+.1f, %+.1f]" % (level, 100.0 * est["estimate"], 100.0 * est["ci"][0], 100.0 * est["ci"][1]))
    return ", ".join(parts)


class ActionModule(ActionBase):
    TRANSFERS_FILES = True
    _VALID_ARGS = frozenset(("settings", "serve", "rungs", "server", "benchmark", "probe", "lock", "log_progress"))

    # ------------------------------------------------------------------ arguments

    def _fail_arg(self, name, allowed):
        raise AnsibleActionFail("host %s: %s: option %s must be %s" % (self._host_name, _FQCN, name, allowed))

    def _args(self):
        args = plain(dict(self._task.args))
        unknown = sorted(set(args) - self._VALID_ARGS)
        if unknown:
            self._fail_arg(", ".join(unknown), "one of " + ", ".join(sorted(self._VALID_ARGS)) + " (unknown option)")
        for name in ("settings", "serve", "server", "benchmark"):
            if not isinstance(args.get(name), dict):
                self._fail_arg(name, "a dictionary")
        rungs = args.get("rungs")
        if not isinstance(rungs, list) or not rungs or not all(isinstance(r, dict) and r.get("decision") == "enabled" for r in rungs):
            self._fail_arg("rungs", "a non-empty list of enabled plans (the out-of-memory ladder, the plan first)")
        server = args["server"]
        for key, value in server.items():
            if key not in _SERVER_KEYS:
                self._fail_arg("server." + key, "one of " + ", ".join(sorted(_SERVER_KEYS)) + " (unknown key)")
            if value is not None and not isinstance(value, _SERVER_KEYS[key]):
                self._fail_arg("server." + key, "of type %s" % getattr(_SERVER_KEYS[key], "__name__", "number"))
        for key in _REQUIRED_SERVER:
            if not server.get(key):
                self._fail_arg("server." + key, "set (a non-empty string)" if key != "unit" else "set (vllm_server_result.server.unit)")
        for name, keys in (("benchmark", _BENCH_KEYS), ("probe", _PROBE_KEYS), ("lock", _LOCK_KEYS)):
            value = args.get(name)
            if value is None:
                continue
            if not isinstance(value, dict):
                self._fail_arg(name, "a dictionary")
            bad = sorted(set(value) - keys)
            if bad:
                self._fail_arg("%s.%s" % (name, bad[0]), "one of " + ", ".join(sorted(keys)) + " (unknown key)")
        try:
            trial, _thresholds = _trial.split_settings(args["settings"])
        except _trial.TrialError as exc:
            self._fail_arg("settings", "the trial settings and verdict thresholds (%s)" % exc)
        if int(trial["output_proof"] or 0) > 0 and not args.get("probe"):
            self._fail_arg("probe", "set when settings.output_proof is above 0")
        ladder = int(trial["ladder_rungs"])
        if ladder != len(rungs) - 1:
            self._fail_arg("settings.ladder_rungs", "the number of rungs after the plan (%d)" % (len(rungs) - 1))
        return args

    # ------------------------------------------------------------------ the device

    def _module(self, name, module_args, what):
        """Run one module on the device; a failure is a fault naming what it was for."""
        self._steps_run += 1
        result = self._execute_module(module_name=name, module_args=module_args, task_vars=self._task_vars)
        if result.get("failed"):
            raise _Fault("%s failed: %s" % (what, result.get("msg", "no message")))
        return result

    def _write_files(self, files):
        """Write the arm's files (service_files: the configuration and the unit) through ansible.builtin.copy,
        as the vllm_server role writes the same renderer's output; True when any of them changed."""
        changed = False
        for entry in files:
            self._steps_run += 1
            task = self._task.copy()
            task.args = {"content": entry["content"], "dest": entry["path"], "owner": "root", "group": "root", "mode": entry["mode"]}
            copy = self._shared_loader_obj.action_loader.get(
                "ansible.legacy.copy",
                task=task,
                connection=self._connection,
                play_context=self._play_context,
                loader=self._loader,
                templar=self._templar,
                shared_loader_obj=self._shared_loader_obj,
            )
            result = copy.run(task_vars=self._task_vars)
            if result.get("failed"):
                raise _Fault("writing %s failed: %s" % (entry["path"], result.get("msg", "no message")))
            changed = changed or bool(result.get("changed"))
        return changed

    def _live(self, arm):
        """What the server serves, and whether it is the arm (vllm_server_info's ``wanted``: the one rule)."""
        server = self._server
        args = {"url": server["url"], "model": server["model"], "service": server["service"]}
        args.update(want_speculative=arm == SPECULATIVE, want_label="the %s arm" % arm)
        for key in ("api_key", "config_files", "start_record"):
            if server.get(key):
                args[key] = server[key]
        return self._module("jetson_llm.speculative.vllm_server_info", args, "reading what the server serves")

    @staticmethod
    def _mismatch(live):
        """Why the live server is not the arm it was read for (``_live(arm)``); [] when it is."""
        wanted = live.get("wanted")
        if not isinstance(wanted, dict):
            raise _Fault("vllm_server_info did not say whether the server is the wanted configuration")
        return list(wanted.get("gaps") or [])

    def _plan_of(self, action):
        """The arm's plan: none for the baseline; the rung of the ladder, at the action's k when it names one."""
        if action["arm"] != SPECULATIVE:
            return {}
        plan = dict(self._rungs[int(action["rung"])])
        if action.get("k") is not None:
            plan["num_speculative_tokens"] = int(action["k"])
        return plan

    def _apply(self, action):
        arm, rung = action["arm"], int(action["rung"])
        plan = self._plan_of(action)
        try:
            files = service_files(self._serve, self._server["unit"], plan or None, host=self._host_name)
        except SpecdecError as exc:
            raise _Fault("rendering the %s configuration failed: %s" % (arm, exc)) from exc
        changed = self._write_files(files)
        force = action.get("reason", "").startswith("re-apply")
        restart = True
        if not changed and not force:
            # a file on disk is not the configuration served: restart unless the live server is this arm
            live = self._live(arm)
            restart = bool(self._mismatch(live))
        if restart:
            res = self._module(
                "ansible.builtin.systemd_service",
                {"name": self._server["service"], "state": "restarted", "daemon_reload": True},
                "restarting %s" % self._server["service"],
            )
            ready_args = {
                "url": self._server["url"],
                "served_model_name": self._server["model"],
                "service": self._server["service"],
                "fail_on_not_ready": False,
                "timeout": self._server.get("ready_timeout") or 900,
                "delay": self._server.get("ready_delay") or 2,
            }
            if self._server.get("api_key"):
                ready_args["api_key"] = self._server["api_key"]
            active = (res.get("status") or {}).get("ActiveState")
            if active:
                ready_args["restarted_from"] = active
            ready = self._module("jetson_llm.speculative.vllm_ready", ready_args, "waiting until vLLM serves")
            began = float(ready.get("restart_began_at") or ready.get("started_at") or 0.0)
            ready_at = float(ready.get("started_at") or 0.0) + float(ready.get("elapsed") or 0.0)
            self._intervals.append(["restart", began, ready_at])
            if not ready.get("ready"):
                cause = "oom" if ready.get("out_of_memory") else (ready.get("cause") or "not ready")
                detail = str(ready.get("detail") or "")
                if arm == SPECULATIVE:
                    self._ladder.append(
                        "%s at %s: %s (%s)"
                        % (plan.get("model"), plan.get("gpu_memory_utilization"), ready.get("cause"), detail[:197] + "..." if len(detail) > 200 else detail)
                    )
                    if cause != "oom":
                        self._start_failure = "vLLM did not start with speculation (%s): %s" % (
                            ready.get("cause"),
                            detail[:297] + "..." if len(detail) > 300 else detail,
                        )
                self._restarts.append(
                    {
                        "arm": arm,
                        "rung": rung,
                        "k": plan.get("num_speculative_tokens"),
                        "ready": False,
                        "cause": ready.get("cause"),
                        "detail": ready.get("detail"),
                    }
                )
                return {"rung": rung, "ok": False, "cause": cause, "detail": ready.get("detail") or "", "restarted": True}
            live = self._live(arm)
            gaps = self._mismatch(live)
            if gaps:
                raise _Fault("after its restart the server is not the %s arm: %s" % (arm, "; ".join(gaps)))
            self._restarts.append({"arm": arm, "rung": rung, "k": plan.get("num_speculative_tokens"), "ready": True, "elapsed": ready.get("elapsed")})
        written = None
        for entry in live.get("config_files") or []:
            if entry.get("path") == self._server["config_path"]:
                written = entry.get("mtime")
        self._served = dict(live, arm=arm, rung=rung, k=action.get("k") if arm == SPECULATIVE else None)
        if arm == SPECULATIVE:
            self._fitted = plan
        return {
            "rung": rung,
            "ok": True,
            "invocation": live.get("invocation_id") or live.get("main_pid"),
            "server_started": live.get("started_at"),
            "config_written": written,
            "restarted": restart,
        }

    def _measure(self, action):
        segment = action["blocks"]
        arm = action["arm"]
        sweep = segment[0].get("phase") == "sweep"
        kept = self._sweep_blocks if sweep else self._blocks
        args = dict(self._bench)
        args.update(
            concurrency=[int(b["concurrency"]) for b in segment],
            num_prompts_per_level=[int(b["n_requests"]) for b in segment],
            num_warmups=max(int(b["warmups"]) for b in segment),
            seed=int(segment[0]["seed"]),
            label="%s-%s%s" % (self._bench.get("label") or "trial", "sweep-" if sweep else "", arm),
        )
        self._steps_run += 1
        result = self._execute_module(module_name="jetson_llm.speculative.vllm_benchmark", module_args=args, task_vars=self._task_vars)
        if result.get("failed"):
            return {"arm": arm, "error": "%s%s" % (result.get("msg", "no result"), " (%s)" % result["cause"] if result.get("cause") else "")}
        try:
            tagged = trial_blocks(result.get("runs") or [], segment, len(kept), result_file=result.get("result_file"))
        except RolloutStepError as exc:
            raise _Fault("the benchmark's result does not fit its blocks: %s" % exc) from exc
        self._intervals.append(["benchmark", result.get("started_at"), result.get("finished_at")])
        unit = result.get("unit") or {}
        if unit.get("invocation_before") or unit.get("invocation_after"):
            before, after = unit.get("invocation_before"), unit.get("invocation_after")
        else:
            before, after = unit.get("main_pid_before"), unit.get("main_pid_after")
        served = {"arm": self._served.get("arm"), "k": self._served.get("k"), "invocation": self._served.get("invocation_id") or self._served.get("main_pid")}
        blocks = []
        for planned, run in zip(segment, tagged):
            block = dict(run)
            block.update(planned)
            block.update(spec_metrics=unit.get("speculative"), invocation_before=before, invocation_after=after)
            if arm == SPECULATIVE and self._fitted.get("num_speculative_tokens") is not None:
                block["num_speculative_tokens"] = run["num_speculative_tokens"] = int(self._fitted["num_speculative_tokens"])
            if sweep:
                run["phase"] = "sweep"
            reason = _trial.prove_block(block, served)
            if reason:
                run["arm_proof"] = reason
                run["discard"] = "it did not measure the %s arm: %s" % (arm, reason)
            elif run.get("discard"):
                block["late"] = run["discard"]
            blocks.append(block)
            kept.append(run)
        self._prompt_set = (result.get("config") or {}).get("prompt_set", self._prompt_set)
        return {"blocks": blocks}

    def _probe(self, action):
        args = dict(self._probe_args)
        if not action["reference"]:
            args["expected"] = self._reference
        result = self._module("jetson_llm.speculative.vllm_output_probe", args, "the output probe")
        if action["reference"]:
            self._reference = result.get("outputs") or []
            return {"agree": None, "summary": "reference of %d answers" % len(self._reference)}
        self._output_proof = {
            "agree": bool(result.get("agree")),
            "matches": result.get("matches"),
            "required": result.get("required"),
            "total": len(result.get("outputs") or []),
            "summary": result.get("summary"),
            "active": "speculative:%s" % self._plan_of(action).get("num_speculative_tokens"),
        }
        return {"agree": bool(result.get("agree")), "summary": result.get("summary")}

    @staticmethod
    def _ended(final, last):
        """The verdict of a trial that ended before the statistics decided: the last estimates, the end's cause."""
        if final["outcome"] != "revert" or final["cause"]["kind"] in ("start_failed", "measure_failed"):
            return {}
        out = dict(last or {})
        kind, detail = final["cause"]["kind"], final["cause"].get("detail", "")
        out.update(decision="revert", cause={"code": kind, "text": detail}, label="revert (%s)" % kind, reason=detail, next_blocks=[])
        return out

    def _renew_lock(self):
        if self._lock:
            self._module("jetson_llm.speculative.speculative_lock", dict(self._lock), "renewing the rollout lock")

    # ------------------------------------------------------------------ the trial

    def _say(self, step, action, verdict):
        if not self._log:
            return
        arm = action.get("arm")
        if arm == SPECULATIVE and action.get("k") is not None:
            arm = "%s k=%s" % (arm, action["k"])
        if action["action"] == "apply":
            what = "apply %s (rung %s): %s" % (arm, action["rung"], action.get("reason", ""))
        elif action["action"] == "measure":
            sweep = "k sweep: " if action["blocks"][0].get("phase") == "sweep" else ""
            what = "%smeasure %s %s" % (sweep, arm, ", ".join("c=%s x%s" % (b["concurrency"], b["n_requests"]) for b in action["blocks"]))
        elif action["action"] == "probe":
            what = "output proof on %s%s" % (arm, " (reference)" if action["reference"] else "")
        else:
            chosen = ""
            if action.get("sweep"):
                choice = action["sweep"].get("choice")
                chosen = "; k=%s chosen by the k sweep" % choice["k"] if choice else "; the k sweep chose no k (%s)" % action["sweep"].get("reason", "")
            what = "done: %s (%s)%s" % (action["outcome"], action["cause"].get("detail", ""), chosen)
        est = _estimate(verdict)
        display.display("%s: trial step %d: %s%s" % (self._host_name, step, what, "; estimate " + est if est else ""))

    def _sweep_settings(self, settings):
        """The settings with each rung's draft cost filled in for a k sweep that does not give one."""
        settings = dict(settings)
        sweep = settings.get("k_sweep")
        if isinstance(sweep, dict) and sweep.get("draft_cost") is None:
            settings["k_sweep"] = dict(sweep, draft_cost=[draft_cost(rung.get("budget")) for rung in self._rungs])
        return settings

    def _count_round_trips(self):
        """Count every command and file transfer the trial sends over the connection (SSH round trips)."""
        conn = self._connection
        counts = {"exec": 0, "put": 0, "fetch": 0}
        originals = {}
        for name, key in (("exec_command", "exec"), ("put_file", "put"), ("fetch_file", "fetch")):
            original = getattr(conn, name)
            originals[name] = original

            def wrapper(*a, _original=original, _key=key, **kw):
                counts[_key] += 1
                return _original(*a, **kw)

            setattr(conn, name, wrapper)
        return counts, originals

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        self._task_vars = task_vars or {}
        self._host_name = str(self._task_vars.get("inventory_hostname", "?"))
        args = self._args()
        if self._task.check_mode:
            result.update(skipped=True, changed=False, msg="Check mode: a trial restarts and benchmarks the server and is not run.")
            return result
        self._serve = args["serve"]
        self._rungs = args["rungs"]
        self._settings = self._sweep_settings(args["settings"])
        self._server = args["server"]
        self._bench = dict(args["benchmark"])
        self._bench.setdefault("url", self._server["url"])
        self._bench.setdefault("model", self._server["model"])
        self._bench.setdefault("service", self._server["service"])
        self._probe_args = dict(args.get("probe") or {})
        self._probe_args.setdefault("url", self._server["url"])
        self._probe_args.setdefault("model", self._server["model"])
        self._lock = args.get("lock")
        self._log = args.get("log_progress", True)
        self._steps_run = 0
        self._intervals, self._restarts, self._blocks, self._sweep_blocks = [], [], [], []
        self._served, self._fitted = {}, {}
        self._reference, self._output_proof, self._prompt_set = None, None, None
        self._ladder, self._start_failure = [], None
        last_verdict = None
        observations = []
        counts, originals = self._count_round_trips()
        began = time.time()
        final = None
        try:
            for step in range(1, 1001):
                action = _trial.next_action(self._settings, observations)
                last_verdict = action.get("verdict") or last_verdict
                self._say(step, action, action.get("verdict"))
                if action["action"] == "done":
                    final = action
                    break
                self._renew_lock()
                carry_out = {"apply": self._apply, "probe": self._probe, "measure": self._measure}[action["action"]]
                observations.append(_trial.observed(action, carry_out(action)))
            else:
                raise _Fault("the trial did not end within 1000 steps")
            outcome = final["outcome"]
            kind = final["cause"]["kind"]
            if kind == "measure_failed" and final["cause"].get("arm") != SPECULATIVE:
                raise _Fault(final["cause"]["detail"])
            if kind == "start_failed" and final["cause"].get("arm") != SPECULATIVE:
                raise _Fault("the baseline configuration does not serve: %s" % final["cause"]["detail"])
            if kind == "arm_proof":
                raise _Fault(
                    "the benchmark could not prove its arm %d times (%s); something else restarts or reconfigures vLLM on this device"
                    % (final["counters"]["discarded"], final["cause"]["detail"])
                )
            if kind == "start_failed":
                outcome = "skip"
                if self._start_failure is None:
                    self._start_failure = "speculation did not start on any rung of the out-of-memory ladder: " + "; ".join(self._ladder)
            elif kind == "measure_failed":
                outcome = "skip"
                self._start_failure = "the speculative configuration failed under load: %s" % final["cause"]["detail"][:300]
            elif outcome == "keep" and (self._served.get("arm") != SPECULATIVE or self._served.get("k") != final.get("k")):
                # leave the kept configuration serving (the last measured arm may be the baseline)
                kept = {
                    "action": "apply",
                    "arm": SPECULATIVE,
                    "rung": max(int(final["counters"]["rung"]), 0),
                    "k": final.get("k"),
                    "reason": "serve the kept configuration",
                }
                self._say(step + 1, kept, None)
                obs = self._apply(kept)
                if not obs["ok"]:
                    raise _Fault("the kept configuration did not start again: %s (%s)" % (obs["cause"], obs.get("detail", "")))
        except _Fault as exc:
            raise AnsibleActionFail(
                "host %s: the speculative decoding trial failed: %s" % (self._host_name, exc),
                result=dict(blocks=self._blocks, intervals=self._intervals, restarts=self._restarts, observations=len(observations)),
            ) from exc
        finally:
            for name, original in originals.items():
                setattr(self._connection, name, original)
        verdict = dict(final.get("verdict") or self._ended(final, last_verdict))
        if verdict:
            # every block the trial left out (arm proof, measured late), as the report counts them
            listed = {d.get("index") for d in verdict.get("discarded") or [] if isinstance(d, dict)}
            verdict["discarded"] = list(verdict.get("discarded") or []) + [
                {"index": b.get("index"), "arm": b.get("arm"), "concurrency": b.get("concurrency"), "reason": str(b["discard"])}
                for b in self._blocks
                if b.get("discard") and b.get("index") not in listed
            ]
        result.update(
            changed=bool(self._restarts),
            outcome=outcome,
            decision=final["outcome"],
            cause=final["cause"],
            verdict=verdict,
            start_failure=self._start_failure,
            ladder=self._ladder,
            counters=final["counters"],
            blocks=self._blocks,
            sweep=final.get("sweep"),
            sweep_blocks=self._sweep_blocks,
            k=final.get("k"),
            fitted=self._fitted,
            restarts=self._restarts,
            intervals=self._intervals,
            output_proof=self._output_proof,
            prompt_set=self._prompt_set,
            steps=len(observations),
            modules_run=self._steps_run,
            round_trips=dict(counts, total=counts["exec"] + counts["put"] + counts["fetch"]),
            elapsed=round(time.time() - began, 3),
        )
        return result
