# SPDX-License-Identifier: Apache-2.0
"""The simulated vLLM process: engine start-up (memory checks, loading time), then the
OpenAI-compatible HTTP API in front of the real-time :class:`~vllm_sim.engine.Engine`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
import uuid

from . import engine as engine_mod
from . import memory, textgen
from .errors import VllmError
from .http import HttpError, Response, read_request

GiB = float(1 << 30)
# Wall seconds of idle between two requests that the engine clock absorbs (the client's turnaround).
CATCH_UP_WALL_S = 0.005
# Modelled seconds of engine work before the lag share counts (start-up hiccups are not a verdict).
VERDICT_AFTER_S = 10.0


def serve(cfg) -> int:
    return asyncio.run(Server(cfg).run())


class EngineDead(Exception):
    pass


class Ctx:
    """One prompt of one HTTP request, as the engine sees it (``Request.user``)."""

    def __init__(self, index, gen, queue, prompt_tokens):
        self.index = index
        self.gen = gen
        self.queue = queue
        self.prompt_tokens = prompt_tokens
        self.sent = 0
        self.text = ""
        self.finish_reason = None
        self.stop_reason = None
        self.req = None


class Server:
    def __init__(self, cfg):
        self.cfg = cfg
        self.vlog = cfg.vlog
        self.version = cfg.version
        self.settings = cfg.settings
        self.args = cfg.args
        self.time_scale = float(self.settings["time_scale"])
        self.faults = self.settings["faults"]
        self.engine = None
        self.account = None
        self.dead = False
        self.hung = False
        self.completed = 0
        self.exit_code = 0
        self.phase = "starting"
        self.host = self.args.host or "0.0.0.0"
        self.port = self.args.port
        self.kv = None
        self.requested = 0.0
        self.created = int(time.time())
        self.pid = os.getpid()
        self.chained = False
        self.arrived = 0
        self.lag = LagMeter(float(self.settings["lag_limit"]))

    # ------------------------------------------------------------------------------ helpers
    async def sleep(self, modelled_seconds: float) -> None:
        if modelled_seconds > 0:
            await asyncio.sleep(modelled_seconds * self.time_scale)

    def modelled_now(self) -> float:
        """The engine's clock for new work: the end of the last step while busy; after idling, the
        wall clock's modelled time, but at most CATCH_UP_WALL_S of wall time after the last step.

        A closed-loop client sends its next request a few milliseconds of wall time after the last
        one ended; at a small time_scale those milliseconds would count as many modelled ones (a
        real client on a real device loses well under a millisecond). Idle gaps shorter than the
        allowance are therefore not modelled; longer ones are, in full less the allowance.
        """
        eng = self.engine
        if self.chained or eng is None:
            return eng.now if eng is not None else 0.0
        wall = (time.monotonic() - self.t0) / self.time_scale
        return max(eng.now, wall - CATCH_UP_WALL_S / self.time_scale)

    def write_status(self, **extra) -> None:
        state_dir = self.settings.get("state_dir")
        if not state_dir:
            return
        cfg = self.cfg
        status = {
            "pid": self.pid,
            "phase": self.phase,
            "version": str(self.version),
            "model": cfg.model,
            "served_model_names": cfg.served_names,
            "host": self.host,
            "port": self.port,
            "speculative_config": repr(cfg.spec) if cfg.spec else None,
            "speculative_config_raw": cfg.spec.raw if cfg.spec else None,
            "argv": sys.argv[1:],
            "hf_token_present": cfg.hf_token_present,
            "hf_home": cfg.hf_home,
            "hf_hub_offline": cfg.hf_offline,
            "api_key_set": cfg.api_key is not None,
            "requests_completed": self.completed,
            "memory_reserved_kib": self.account.kib if self.account else 0,
            "time": time.time(),
        }
        status.update(extra)
        try:
            os.makedirs(state_dir, exist_ok=True)
            path = os.path.join(state_dir, f"status-{self.port}.json")
            tmp = path + f".{self.pid}.tmp"
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(status, handle, indent=1)
            os.replace(tmp, path)
        except OSError:
            pass

    # ------------------------------------------------------------------------------ lifecycle
    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self.stop = asyncio.Event()
        self.wake = asyncio.Event()
        self.t0 = time.monotonic()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop.set)
        loop.add_signal_handler(signal.SIGUSR1, lambda: self.kill_engine("SIGUSR1"))
        try:
            sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
        except OSError as exc:
            self.vlog.traceback(("cli",), "OSError", f"[Errno {exc.errno}] {exc.strerror}")
            return 1
        self.phase = "loading"
        self.write_status()
        starter = asyncio.ensure_future(self.start_engine())
        stopper = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({starter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not starter.done():
                starter.cancel()
        if not starter.done() or starter.cancelled():
            sock.close()
            self.phase = "stopped"
            self.write_status()
            return 0
        exc = starter.exception()
        if exc is not None:
            sock.close()
            if isinstance(exc, VllmError):
                self.report_engine_failure(exc)
                self.phase = "failed"
                self.write_status(error=str(exc).split("\n", maxsplit=1)[0])
                return 1
            raise exc
        stopper.cancel()
        return await self.serve_http(sock)

    def report_engine_failure(self, err: VllmError) -> None:
        vlog = self.vlog
        if err.stage == "engine":
            for level, source, text in err.log_before:
                vlog.log(level, source, text, "engine")
            vlog.error("core.py:708", "EngineCore failed to start.", "engine")
            vlog.logged_traceback("core.py:708", err.frames, err.exc_type, err.message)
            vlog.raw(f"Process {self.version.engine_proc_name}:", "engine")
            vlog.traceback(("engine_core", *err.frames[1:]), err.exc_type, err.message, "engine")
            vlog.traceback(
                ("cli", "engine_start_failed"),
                "RuntimeError",
                "Engine core initialization failed. See root cause above. Failed core proc(s): {}",
            )
        else:
            vlog.traceback(err.frames, err.exc_type, err.message)

    def engine_config_repr(self) -> str:
        cfg = self.cfg
        a = self.args
        spec = repr(cfg.spec) if cfg.spec else "None"
        dtype = "torch.bfloat16" if a.dtype in ("auto", "bfloat16") else f"torch.{a.dtype}"
        return (
            f"model={cfg.target.name!r}, speculative_config={spec}, tokenizer={cfg.target.name!r}, "
            f"skip_tokenizer_init=False, tokenizer_mode=auto, revision={a.revision}, "
            f"trust_remote_code={a.trust_remote_code}, dtype={dtype}, "
            f"max_seq_len={cfg.max_model_len or cfg.derived_max}, "
            f"download_dir={a.download_dir!r}, load_format=auto, tensor_parallel_size={a.tensor_parallel_size}, "
            f"pipeline_parallel_size={a.pipeline_parallel_size}, "
            f"quantization={cfg.quant_override or cfg.target.quant}, "
            f"enforce_eager={a.enforce_eager}, kv_cache_dtype={a.kv_cache_dtype}, device_config=cuda, "
            f"seed={a.seed}, served_model_name={cfg.served_names[0]}, "
            f"enable_prefix_caching={a.enable_prefix_caching is not False}, chunked_prefill_enabled=True"
        )

    async def start_engine(self) -> None:
        cfg = self.cfg
        vlog = self.vlog
        version = self.version
        args = self.args
        started = time.monotonic()
        vlog.info(
            "core.py:74",
            f"Initializing a V1 LLM engine (v{version}) with config: {self.engine_config_repr()}",
            "engine",
        )
        if args.tensor_parallel_size * args.pipeline_parallel_size > 1:
            world = args.tensor_parallel_size * args.pipeline_parallel_size
            raise VllmError(
                "AssertionError",
                f"please set tensor_parallel_size ({world}) to less than max local gpu count (1)",
                "engine",
                ("engine_core", "executor"),
            )
        path = memory.meminfo_path(cfg.env)
        if self.settings.get("account_memory") and memory.MemoryAccount.writable(path):
            self.account = memory.MemoryAccount(path, self.settings["state_dir"])
            released = self.account.reconcile()
            if released:
                vlog.info("vllm_sim", f"released a stale memory reservation of {released} kB", "engine")
        try:
            info = memory.read_meminfo(path)
        except OSError as exc:
            raise VllmError("RuntimeError", f"cannot read {path}: {exc.strerror}", "engine", ("engine_core",)) from None
        total, free = memory.device_memory(version, info)
        util = args.gpu_memory_utilization
        vlog.info(
            "parallel_state.py:1165",
            "rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0",
            "engine",
        )
        requested = memory.check_free(version, total, free, util)
        self.requested = requested
        target = cfg.target
        spec = cfg.spec
        target_bytes = float(target.weight_bytes)
        if cfg.quant_override == "fp8":
            target_bytes *= 0.55
        spec_model = spec.model_info if spec is not None else None
        spec_bytes = float(spec_model.weight_bytes) if spec_model is not None else 0.0
        load_gbps = float(self.settings["load_gbps"]) * 1e9
        vlog.info("gpu_model_runner.py:2338", f"Starting to load model {target.name}...", "engine")
        if not spec_model and not target_bytes:
            raise VllmError(
                "RuntimeError",
                f"Cannot find any model weights with `{target.path}`",
                "engine",
                ("engine_core", "load_model"),
            )
        try:
            memory.check_load(version, total, requested, target_bytes, target, spec_bytes, spec_model)
        except VllmError as err:
            await self.sleep((target_bytes + spec_bytes) * getattr(err, "loaded_fraction", 0.0) / load_gbps)
            raise
        if spec_model is not None and spec is not None and spec.method in ("eagle", "eagle3"):
            if spec_model.hidden_size != target.hidden_size and spec_model.is_eagle_head:
                await self.sleep(target_bytes / load_gbps)
                h = spec_model.hidden_size
                raise VllmError(
                    "AssertionError",
                    f"Attempted to load weight (torch.Size([{h}, {3 * h}])) into parameter (torch.Size([{target.hidden_size}, {3 * target.hidden_size}]))",
                    "engine",
                    ("engine_core", "load_model"),
                )
            if version >= (0, 22, 0) and spec.method == "eagle3":
                if not any(t in target.model_type for t in ("llama", "qwen", "minicpm", "gpt_oss", "deepseek", "kimi", "nemotron", "hunyuan")):
                    await self.sleep(target_bytes / load_gbps)
                    raise VllmError(
                        "RuntimeError",
                        "Model does not support EAGLE3 interface",
                        "engine",
                        ("engine_core", "load_model"),
                    )
        t_target = target_bytes / load_gbps
        await self.sleep(t_target)
        vlog.info("default_loader.py:267", f"Loading weights took {t_target:.2f} seconds", "engine")
        t_spec = spec_bytes / load_gbps
        if spec is not None:
            vlog.info("gpu_model_runner.py:2370", "Loading drafter model...", "engine")
            if spec_model is not None:
                await self.sleep(t_spec)
                vlog.info("default_loader.py:267", f"Loading weights took {t_spec:.2f} seconds", "engine")
        vlog.info(
            "gpu_model_runner.py:2392",
            f"Model loading took {(target_bytes + spec_bytes) / GiB:.4f} GiB memory and {t_target + t_spec + 0.35:.6f} seconds",
            "engine",
        )
        init_s = float(self.settings["init_s"]) * (0.35 if args.enforce_eager else 1.0)
        await self.sleep(init_s * 0.3)
        kv = memory.kv_plan(
            version,
            requested,
            target_bytes + spec_bytes,
            target,
            spec_model if spec is not None and spec.method != "ngram" else None,
            cfg.max_model_len,
            cfg.derived_max,
            cfg.max_num_seqs,
            cfg.max_num_batched_tokens,
            cfg.kv_dtype_bytes,
        )
        self.kv = kv
        if cfg.max_model_len is None:
            cfg.max_model_len = kv.max_model_len
            vlog.info("kv_cache_utils.py:720", f"Auto-fitted max_model_len to {kv.max_model_len}", "engine")
        vlog.info("gpu_worker.py:298", f"Available KV cache memory: {kv.available / GiB:.2f} GiB", "engine")
        vlog.info("kv_cache_utils.py:864", f"GPU KV cache size: {kv.tokens:,} tokens", "engine")
        vlog.info(
            "kv_cache_utils.py:868",
            f"Maximum concurrency for {kv.max_model_len:,} tokens per request: {kv.concurrency:.2f}x",
            "engine",
        )
        await self.sleep(init_s * 0.7)
        if not args.enforce_eager:
            vlog.info(
                "gpu_model_runner.py:3118",
                f"Graph capturing finished in {init_s * 0.5:.0f} secs, took 0.45 GiB",
                "engine",
            )
        vlog.info("core.py:218", f"init engine (profile, create kv cache, warmup model) took {init_s:.2f} seconds", "engine")
        await self.sleep(float(self.faults.get("slow_start_s") or 0.0))
        self.engine = engine_mod.make_engine(
            self.settings,
            target,
            spec,
            max_num_seqs=cfg.max_num_seqs,
            max_num_batched_tokens=cfg.max_num_batched_tokens,
            kv_tokens=kv.tokens,
            kv_dtype_bytes=cfg.kv_dtype_bytes,
            enforce_eager=args.enforce_eager,
            quant=cfg.quant_override,
            served_name=cfg.served_names[0],
            log_stats=cfg.log_stats,
        )
        self.engine.now = (time.monotonic() - self.t0) / self.time_scale
        self.load_wall = time.monotonic() - started

    async def serve_http(self, sock) -> int:
        cfg = self.cfg
        vlog = self.vlog
        if self.account is not None:
            try:
                self.account.reserve(self.requested)
            except OSError as exc:
                vlog.warning("vllm_sim", f"memory accounting disabled: {exc}")
                self.account = None
        vlog.info("api_server.py:1611", "Supported_tasks: ['generate']")
        gen_temp = cfg.target.default_temperature
        if self.args.generation_config == "auto" and cfg.target.generation_config:
            params = {k: cfg.target.generation_config[k] for k in ("temperature", "top_k", "top_p", "repetition_penalty") if k in cfg.target.generation_config}
            if params:
                vlog.warning(
                    "__init__.py:1695",
                    "Default sampling parameters have been overridden by the model's Hugging Face generation config "
                    "recommended from the model creator. If this is not intended, please relaunch vLLM instance with "
                    "`--generation-config vllm`.",
                )
                vlog.info("serving_chat.py:139", f"Using default chat sampling params from model: {params}")
                vlog.info("serving_completion.py:76", f"Using default completion sampling params from model: {params}")
        self.default_temperature = gen_temp if (self.args.generation_config == "auto" and gen_temp is not None) else 1.0
        vlog.info("api_server.py:1880", f"Starting vLLM API server 0 on http://{self.host}:{self.port}")
        vlog.info("launcher.py:36", "Available routes are:")
        for route, methods in (
            ("/health", "GET"),
            ("/metrics", "GET"),
            ("/ping", "GET, POST"),
            ("/tokenize", "POST"),
            ("/version", "GET"),
            ("/v1/models", "GET"),
            ("/v1/chat/completions", "POST"),
            ("/v1/completions", "POST"),
        ):
            vlog.info("launcher.py:44", f"Route: {route}, Methods: {methods}")
        vlog.uvicorn_level = {"trace": 5, "debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}[self.args.uvicorn_log_level]
        vlog.uvicorn(f"Started server process [{self.pid}]")
        vlog.uvicorn("Waiting for application startup.")
        vlog.uvicorn("Application startup complete.")
        self.http = await asyncio.start_server(self.handle_conn, sock=sock, backlog=1024)
        self.phase = "ready"
        self.write_status()
        tasks = [asyncio.ensure_future(self.engine_loop()), asyncio.ensure_future(self.stats_loop())]
        await self.stop.wait()
        vlog.uvicorn("Shutting down")
        self.http.close()
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(self.http.wait_closed(), timeout=1.0)
        vlog.uvicorn("Waiting for application shutdown.")
        vlog.uvicorn("Application shutdown complete.")
        vlog.uvicorn(f"Finished server process [{self.pid}]")
        if self.account is not None:
            with contextlib.suppress(OSError):
                self.account.release()
        self.phase = "stopped" if self.exit_code == 0 else "failed"
        self.write_status()
        return self.exit_code

    # ------------------------------------------------------------------------------ engine loop
    async def engine_loop(self) -> None:
        eng = self.engine
        while True:
            if self.dead or self.hung:
                await asyncio.Event().wait()
            if self._dead_file():
                self.kill_engine("engine_dead_file")
                continue
            if not eng.has_work():
                self.chained = False
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), timeout=1.0)
                except TimeoutError:
                    pass
                continue
            # Steps of one busy period follow each other on the modelled clock (eng.now), not on
            # the wall clock: a step that ran late does not push the next one later, the loop
            # catches up. A new busy period starts at the wall clock's modelled time, less the
            # short gap a client needs to send its next request (see modelled_now).
            start = self.modelled_now()
            if not self.chained:
                self.lag.resume(start - eng.now)
            self.chained = True
            step = eng.plan(start)
            if step is None:
                self.chained = False
                self.wake.clear()
                await self.wake.wait()
                continue
            target_wall = self.t0 + (step.start + step.duration) * self.time_scale
            # Sleep until the step's modelled end; yield even when behind so HTTP handlers run.
            await asyncio.sleep(max(0.0, target_wall - time.monotonic()))
            if self.dead or self.hung:
                continue
            self.lag.step(step.duration, (time.monotonic() - target_wall) / self.time_scale)
            done_now = 0
            for req, n, finished in eng.finish(step):
                ctx = req.user
                if ctx is not None:
                    ctx.queue.put_nowait((ctx, n, finished))
                if finished:
                    done_now += 1
                    self.request_done()
            if done_now:
                await self.await_turnaround(done_now)
            self.chained = eng.has_work()
            if not self.chained:
                self.lag.idle()
            self.lag.check(self.vlog)

    async def await_turnaround(self, count: int) -> None:
        """Give the clients of ``count`` just-finished requests up to CATCH_UP_WALL_S of wall time to
        send their next ones before the next step is planned, as a closed-loop client's next request
        joins the very next step on a device. The wait costs no modelled time (the loop catches up)."""
        target = self.arrived + count
        deadline = time.monotonic() + CATCH_UP_WALL_S
        while self.arrived < target and not (self.dead or self.hung):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=left)
            except TimeoutError:
                return

    def request_done(self) -> None:
        self.completed += 1
        faults = self.faults
        if faults.get("crash_after_requests") is not None and self.completed >= faults["crash_after_requests"]:
            asyncio.get_running_loop().call_later(0.05, self.crash)
        if faults.get("hang_after_requests") is not None and self.completed >= faults["hang_after_requests"]:
            asyncio.get_running_loop().call_later(0.05, self.hang)
        if faults.get("engine_dead_after_requests") is not None and self.completed >= faults["engine_dead_after_requests"]:
            asyncio.get_running_loop().call_later(0.05, self.kill_engine, "engine_dead_after_requests")

    def _dead_file(self) -> bool:
        path = self.faults.get("engine_dead_file")
        return bool(path) and os.path.exists(path)

    def crash(self) -> None:
        vlog = self.vlog
        vlog.error("core.py:737", "EngineCore encountered a fatal error.", "engine")
        vlog.logged_traceback(
            "core.py:737",
            ("engine_core",),
            "RuntimeError",
            "CUDA error: unspecified launch failure\nCUDA kernel errors might be asynchronously reported at some "
            "other API call, so the stacktrace below might be incorrect.",
        )
        vlog.error("async_llm.py:485", "AsyncLLM output_handler failed.")
        vlog.traceback(
            ("cli",),
            "vllm.v1.engine.exceptions.EngineDeadError",
            "EngineCore encountered an issue. See stack trace (above) for the root cause.",
        )
        self.phase = "crashed"
        self.write_status()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

    def hang(self) -> None:
        if not self.hung:
            self.hung = True
            self.phase = "hung"
            self.write_status()

    def kill_engine(self, why: str) -> None:
        if self.dead or self.engine is None:
            return
        self.dead = True
        vlog = self.vlog
        vlog.error("core.py:737", "EngineCore encountered a fatal error.", "engine")
        vlog.logged_traceback("core.py:737", ("engine_core",), "RuntimeError", "CUDA error: an illegal memory access was encountered")
        vlog.error("async_llm.py:485", "AsyncLLM output_handler failed.")
        for req in list(self.engine.running) + list(self.engine.waiting):
            if req.user is not None:
                req.user.queue.put_nowait((req.user, None, True))
        self.engine.running.clear()
        self.engine.waiting.clear()
        self.phase = "dead"
        self.write_status(dead_reason=why)
        if not self.version.health_503_on_engine_death and os.environ.get("VLLM_KEEP_ALIVE_ON_ENGINE_DEATH") != "1":
            # 0.10.x: the handler answers 500 and asks uvicorn to exit.
            asyncio.get_running_loop().call_later(0.5, self._exit_after_death)

    def _exit_after_death(self) -> None:
        self.exit_code = 1
        self.stop.set()

    async def stats_loop(self) -> None:
        try:
            interval = float(os.environ.get("VLLM_LOG_STATS_INTERVAL", "10"))
        except ValueError:
            interval = 10.0
        interval = max(interval, 0.05)
        eng = self.engine
        while True:
            await asyncio.sleep(interval)
            if not self.cfg.log_stats or self.dead or self.hung:
                continue
            win = eng.stats.take_window()
            busy = eng.has_work() or win["prompt"] or win["gen"]
            if not busy:
                continue
            modelled = interval / self.time_scale
            self.vlog.info(
                "loggers.py:123",
                f"Engine 000: Avg prompt throughput: {win['prompt'] / modelled:.1f} tokens/s, "
                f"Avg generation throughput: {win['gen'] / modelled:.1f} tokens/s, "
                f"Running: {len(eng.running)} reqs, Waiting: {len(eng.waiting)} reqs, "
                f"GPU KV cache usage: {eng.stats.kv_usage * 100:.1f}%, Prefix cache hit rate: 0.0%",
            )
            if self.cfg.spec is not None and win["drafts"]:
                self.vlog.info("metrics.py:96", spec_log_line(self.version, win, modelled))

    # ------------------------------------------------------------------------------ HTTP
    async def handle_conn(self, reader, writer) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        try:
            while True:
                try:
                    req = await read_request(reader, peer)
                except HttpError as exc:
                    resp = Response(writer, False)
                    await resp.send(exc.status, b"", "text/plain")
                    break
                if req is None:
                    break
                resp = Response(writer, req.keep_alive)
                if self.hung:
                    await asyncio.Event().wait()
                try:
                    await self.dispatch(req, resp)
                except (ConnectionError, asyncio.IncompleteReadError):
                    raise
                except Exception as exc:
                    if not resp.started:
                        await resp.send_json(500, self.error_body(f"vllm-sim internal error: {exc}", "InternalServerError", 500))
                    else:
                        raise
                if not self.args.disable_uvicorn_access_log:
                    self.vlog.uvicorn(f'{peer[0]}:{peer[1]} - "{req.method} {req.target} {req.http_version}" {resp.status} {_reason(resp.status)}')
                if not req.keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def error_body(self, message, err_type="BadRequestError", code=400) -> dict:
        if self.version.nested_error_response:
            return {"error": {"message": message, "type": err_type, "param": None, "code": code}}
        return {"object": "error", "message": message, "type": err_type, "param": None, "code": code}

    async def dispatch(self, req, resp) -> None:
        path = req.path
        routes = {
            "/health": ("GET",),
            "/ping": ("GET", "POST"),
            "/version": ("GET",),
            "/metrics": ("GET",),
            "/tokenize": ("POST",),
            "/v1/models": ("GET",),
            "/v1/completions": ("POST",),
            "/v1/chat/completions": ("POST",),
        }
        if path not in routes and path.rstrip("/") in routes:
            path = path.rstrip("/")
        if path not in routes:
            await resp.send_json(404, {"detail": "Not Found"})
            return
        if req.method not in routes[path]:
            await resp.send_json(405, {"detail": "Method Not Allowed"}, extra=(("allow", ", ".join(routes[path])),))
            return
        if path.startswith("/v1") and self.cfg.api_key is not None:
            auth = req.header("authorization") or ""
            if auth != f"Bearer {self.cfg.api_key}":
                await resp.send_json(401, {"error": "Unauthorized"})
                return
        if path in ("/health", "/ping"):
            if self._dead_file():
                self.kill_engine("engine_dead_file")
            if self.dead:
                await resp.send(503 if self.version.health_503_on_engine_death else 500, b"")
            else:
                await resp.send(200, b"")
            return
        if path == "/version":
            await resp.send_json(200, {"version": str(self.version)})
            return
        if path == "/metrics":
            text = self.engine.stats.prometheus(self.version) + self.lag.prometheus()
            await resp.send(200, text, "text/plain; version=0.0.4; charset=utf-8")
            return
        if path == "/v1/models":
            await resp.send_json(200, self.models_body())
            return
        try:
            body = req.json()
        except ValueError as exc:
            await resp.send_json(400, self.error_body(f"JSON decode error: {exc}"))
            return
        if not isinstance(body, dict):
            await resp.send_json(400, self.error_body("Input should be a valid dictionary or object to extract fields from"))
            return
        if path == "/tokenize":
            await self.tokenize(body, resp)
            return
        await self.generate(req, body, resp, chat=path == "/v1/chat/completions")

    def models_body(self) -> dict:
        data = []
        for name in self.cfg.served_names:
            data.append(
                {
                    "id": name,
                    "object": "model",
                    "created": self.created,
                    "owned_by": "vllm",
                    "root": self.cfg.root,
                    "parent": None,
                    "max_model_len": self.cfg.max_model_len,
                    "permission": [
                        {
                            "id": f"modelperm-{uuid.uuid4().hex}",
                            "object": "model_permission",
                            "created": self.created,
                            "allow_create_engine": False,
                            "allow_sampling": True,
                            "allow_logprobs": True,
                            "allow_search_indices": False,
                            "allow_view": True,
                            "allow_fine_tuning": False,
                            "organization": "*",
                            "group": None,
                            "is_blocking": False,
                        }
                    ],
                }
            )
        return {"object": "list", "data": data}

    async def tokenize(self, body, resp) -> None:
        if "messages" in body:
            text = textgen.render_chat(body["messages"], self.cfg.target.tokenizer_config)
        else:
            text = str(body.get("prompt", ""))
        n = textgen.count_tokens(text)
        state = textgen._h(self.cfg.target.name, text)
        tokens = [(state >> (i % 40)) % self.cfg.target.vocab_size for i in range(n)]
        await resp.send_json(200, {"count": n, "max_model_len": self.cfg.max_model_len, "tokens": tokens, "token_strs": None})

    # ------------------------------------------------------------------------------ generation
    def _prompts(self, body, chat):
        """List of (text, token count) of the request's prompts."""
        target = self.cfg.target
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise ValueError("messages: Field required")
            text = textgen.render_chat(messages, target.tokenizer_config)
            return [(text, textgen.count_tokens(text))]
        prompt = body.get("prompt")
        if prompt is None:
            raise ValueError("prompt: Field required")
        if isinstance(prompt, str):
            return [(prompt, textgen.count_tokens(prompt))]
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            return [(" ".join(map(str, prompt)), len(prompt))]
        if isinstance(prompt, list) and prompt:
            out = []
            for item in prompt:
                if isinstance(item, str):
                    out.append((item, textgen.count_tokens(item)))
                elif isinstance(item, list) and all(isinstance(t, int) for t in item):
                    out.append((" ".join(map(str, item)), max(1, len(item))))
                else:
                    raise ValueError("prompt: Input should be a valid string")
            return out
        raise ValueError("prompt: Input should be a valid string")

    async def generate(self, req, body, resp, chat: bool) -> None:
        cfg = self.cfg
        model = body.get("model")
        if model is not None and model not in cfg.served_names:
            await resp.send_json(404, self.error_body(f"The model `{model}` does not exist.", "NotFoundError", 404))
            return
        model = model or cfg.served_names[0]
        if self.dead:
            await resp.send_json(500, self.error_body(_DEAD_MESSAGE, "InternalServerError", 500))
            return
        try:
            prompts = self._prompts(body, chat)
            params = self._sampling(body, chat)
        except ValueError as exc:
            await resp.send_json(400, self.error_body(str(exc)))
            return
        max_len = cfg.max_model_len
        for _text, n_prompt in prompts:
            max_tokens = params["max_tokens"]
            if n_prompt > max_len or (max_tokens is not None and n_prompt + max_tokens > max_len):
                if max_tokens is None or n_prompt > max_len:
                    message = (
                        f"This model's maximum context length is {max_len} tokens. However, your request has "
                        f"{n_prompt} input tokens. Please reduce the length of the input messages."
                    )
                else:
                    message = (
                        f"This model's maximum context length is {max_len} tokens. However, you requested "
                        f"{max_tokens + n_prompt} tokens ({n_prompt} in the messages, {max_tokens} in the completion). "
                        "Please reduce the length of the messages or completion."
                    )
                await resp.send_json(400, self.error_body(message))
                return
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        queue = asyncio.Queue()
        ctxs = []
        eng = self.engine
        perturb = bool(self.faults.get("wrong_answers")) and cfg.spec is not None
        now = self.modelled_now()
        for index, (text, n_prompt) in enumerate(prompts):
            max_tokens = params["max_tokens"] if params["max_tokens"] is not None else max_len - n_prompt
            gen = textgen.Generation(cfg.target.name, text, params["temperature"], params["seed"], perturb)
            ctx = Ctx(index, gen, queue, n_prompt)
            r = engine_mod.Request(
                f"{rid}-{index}",
                n_prompt,
                max_tokens,
                textgen.classify(text),
                params["temperature"],
                params["ignore_eos"],
                gen.eos_at,
                arrival=now,
                gen=gen,
                user=ctx,
            )
            ctx.req = r
            ctxs.append(ctx)
            if cfg.log_requests:
                self.vlog.info("logger.py:41", f"Received request {r.id}: prompt: {text[:200]!r}, params: {params}")
            eng.add(r, now)
            if cfg.log_requests:
                self.vlog.info("async_llm.py:320", f"Added request {r.id}.")
        self.arrived += 1
        self.wake.set()
        try:
            if params["stream"]:
                await self.stream(resp, rid, created, model, chat, ctxs, queue, params)
            else:
                await self.complete(resp, rid, created, model, chat, ctxs, queue, params)
        except (ConnectionError, asyncio.CancelledError):
            for ctx in ctxs:
                if ctx.finish_reason is None:
                    eng.abort(ctx.req)
            raise

    def _sampling(self, body, chat) -> dict:
        def num(name, default=None, kind=float):
            value = body.get(name, default)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{name}: Input should be a valid number")
            return kind(value)

        max_tokens = body.get("max_completion_tokens") if chat else None
        if max_tokens is None:
            max_tokens = body.get("max_tokens", None if chat else 16)
        if max_tokens is not None:
            if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
                raise ValueError("max_tokens: Input should be a valid integer")
            if max_tokens < 1:
                raise ValueError(f"max_tokens must be at least 1, got {max_tokens}.")
        temperature = num("temperature")
        if temperature is None:
            temperature = self.default_temperature
        if temperature < 0:
            raise ValueError(f"temperature must be non-negative, got {temperature}.")
        n = body.get("n", 1)
        if n not in (1, None):
            raise ValueError("vllm-sim: only n=1 is simulated")
        stop = body.get("stop")
        if isinstance(stop, str):
            stop = [stop]
        stop = [s for s in (stop or []) if isinstance(s, str) and s]
        opts = body.get("stream_options") or {}
        stream = bool(body.get("stream", False))
        if opts and not stream:
            raise ValueError("Stream options can only be defined when `stream=True`.")
        seed = body.get("seed")
        return {
            "max_tokens": max_tokens,
            "temperature": temperature,
            "seed": seed if isinstance(seed, int) else None,
            "ignore_eos": bool(body.get("ignore_eos", False)),
            "stop": stop,
            "stream": stream,
            "include_usage": bool(opts.get("include_usage", False)),
            "continuous_usage": bool(opts.get("continuous_usage_stats", False)),
        }

    def _advance(self, ctx, n, params) -> str:
        """Text of the next ``n`` tokens of ``ctx``; applies stop strings."""
        piece = ctx.gen.text(ctx.sent, ctx.sent + n)
        ctx.sent += n
        if params["stop"]:
            combined = ctx.text + piece
            for s in params["stop"]:
                pos = combined.find(s)
                if pos >= 0:
                    piece = combined[len(ctx.text) : pos] if pos >= len(ctx.text) else ""
                    ctx.text = combined[:pos]
                    ctx.finish_reason = "stop"
                    ctx.stop_reason = s
                    self.engine.abort(ctx.req, "stop")
                    return piece
        ctx.text += piece
        return piece

    async def _next(self, queue):
        ctx, n, finished = await queue.get()
        if n is None:
            raise EngineDead()
        return ctx, n, finished

    async def complete(self, resp, rid, created, model, chat, ctxs, queue, params) -> None:
        remaining = len(ctxs)
        try:
            while remaining:
                ctx, n, finished = await self._next(queue)
                if ctx.finish_reason is not None:
                    continue
                self._advance(ctx, n, params)
                if finished and ctx.finish_reason is None:
                    ctx.finish_reason = ctx.req.finish_reason
                if ctx.finish_reason is not None:
                    remaining -= 1
        except EngineDead:
            await resp.send_json(500, self.error_body(_DEAD_MESSAGE, "InternalServerError", 500))
            return
        prompt_tokens = sum(c.prompt_tokens for c in ctxs)
        completion_tokens = sum(c.sent for c in ctxs)
        usage = {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": None,
        }
        if chat:
            ctx = ctxs[0]
            body = {
                "id": rid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": ctx.text,
                            "refusal": None,
                            "annotations": None,
                            "audio": None,
                            "function_call": None,
                            "tool_calls": [],
                            "reasoning_content": None,
                        },
                        "logprobs": None,
                        "finish_reason": ctx.finish_reason,
                        "stop_reason": ctx.stop_reason,
                    }
                ],
                "service_tier": None,
                "system_fingerprint": None,
                "usage": usage,
                "prompt_logprobs": None,
                "kv_transfer_params": None,
            }
        else:
            body = {
                "id": rid,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": c.index,
                        "text": c.text,
                        "logprobs": None,
                        "finish_reason": c.finish_reason,
                        "stop_reason": c.stop_reason,
                        "prompt_logprobs": None,
                    }
                    for c in ctxs
                ],
                "service_tier": None,
                "system_fingerprint": None,
                "usage": usage,
                "kv_transfer_params": None,
            }
        await resp.send_json(200, body)

    async def stream(self, resp, rid, created, model, chat, ctxs, queue, params) -> None:
        await resp.start_stream()
        obj = "chat.completion.chunk" if chat else "text_completion"

        def chunk(choices, usage=None):
            data = {"id": rid, "object": obj, "created": created, "model": model, "choices": choices}
            if usage is not None:
                data["usage"] = usage
            return "data: " + json.dumps(data, separators=(",", ":")) + "\n\n"

        def usage_of(c_list):
            p = sum(c.prompt_tokens for c in c_list)
            g = sum(c.sent for c in c_list)
            return {"prompt_tokens": p, "total_tokens": p + g, "completion_tokens": g}

        if chat:
            await resp.write_chunk(
                chunk(
                    [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": ""},
                            "logprobs": None,
                            "finish_reason": None,
                        }
                    ]
                )
            )
        remaining = len(ctxs)
        try:
            while remaining:
                ctx, n, finished = await self._next(queue)
                if ctx.finish_reason is not None:
                    continue
                piece = self._advance(ctx, n, params)
                if finished and ctx.finish_reason is None:
                    ctx.finish_reason = ctx.req.finish_reason
                done = ctx.finish_reason is not None
                if chat:
                    choice = {
                        "index": ctx.index,
                        "delta": {"content": piece},
                        "logprobs": None,
                        "finish_reason": ctx.finish_reason,
                    }
                else:
                    choice = {"index": ctx.index, "text": piece, "logprobs": None, "finish_reason": ctx.finish_reason}
                if done:
                    choice["stop_reason"] = ctx.stop_reason
                cont = usage_of([ctx]) if params["continuous_usage"] and params["include_usage"] else None
                await resp.write_chunk(chunk([choice], cont))
                if done:
                    remaining -= 1
        except EngineDead:
            err = self.error_body(_DEAD_MESSAGE, "InternalServerError", 500)
            await resp.write_chunk("data: " + json.dumps(err, separators=(",", ":")) + "\n\n")
        else:
            if params["include_usage"]:
                await resp.write_chunk(chunk([], usage_of(ctxs)))
        await resp.write_chunk("data: [DONE]\n\n")
        await resp.end_stream()


class LagMeter:
    """How far the served timing runs behind the modelled clock (all figures in modelled seconds).

    ``lag`` is how late the last step's tokens left the engine. Within a busy period the loop catches
    up, so lateness does not accumulate there; what is lost for good is the lag left when the engine
    goes idle (the client sees that request end late and sends its next one late). ``lost / busy`` is
    the share by which the served figures are slower than the model; above ``limit`` the host is out
    of spec (a warning in the log, ``vllm_sim:out_of_spec`` 1).
    """

    def __init__(self, limit: float):
        self.limit = limit
        self.lag = 0.0
        self.max_lag = 0.0
        self.steps = 0
        self.late_steps = 0
        self.busy = 0.0
        self.lost = 0.0
        self.pending = 0.0
        self.warned_at = 0.0

    def step(self, duration: float, lag: float) -> None:
        self.lag = max(0.0, lag)
        self.max_lag = max(self.max_lag, self.lag)
        self.steps += 1
        self.busy += duration
        if self.lag > duration:
            self.late_steps += 1

    def idle(self) -> None:
        self.pending = self.lag
        self.lag = 0.0

    def resume(self, gap: float) -> None:
        """A new busy period after ``gap`` modelled seconds of idle: the part of the gap that the
        last step's lag caused (not recovered by the turnaround allowance) is lost."""
        if gap > 0:
            self.lost += min(gap, self.pending)
        self.pending = 0.0

    @property
    def share(self) -> float:
        return (self.lost + self.lag) / self.busy if self.busy > 0 else 0.0

    @property
    def out_of_spec(self) -> bool:
        return self.busy >= VERDICT_AFTER_S and self.share > self.limit

    def check(self, vlog) -> None:
        """Log a warning when the share exceeds the limit (at most once per 60 modelled seconds)."""
        if self.out_of_spec and (not self.warned_at or self.busy - self.warned_at >= 60.0):
            self.warned_at = self.busy
            vlog.warning(
                "vllm_sim",
                f"simulator out of spec: served timing {100 * self.share:.1f} % behind the modelled clock "
                f"(limit {100 * self.limit:.1f} %, {self.late_steps} of {self.steps} steps late, "
                f"max lag {1000 * self.max_lag:.1f} ms modelled); the host is too busy for this time_scale",
            )

    def prometheus(self) -> str:
        out = []
        for kind, name, helptext, value in (
            ("gauge", "vllm_sim:lag_seconds", "Modelled seconds the last engine step ran behind its modelled end.", self.lag),
            ("gauge", "vllm_sim:lag_max_seconds", "Largest step lag so far (modelled seconds).", self.max_lag),
            ("gauge", "vllm_sim:lag_share", "Modelled time lost to lateness over modelled busy time.", self.share),
            ("gauge", "vllm_sim:lag_limit", "Lag share above which the simulator is out of spec.", self.limit),
            ("gauge", "vllm_sim:out_of_spec", "1 when the lag share exceeds the limit.", 1.0 if self.out_of_spec else 0.0),
            ("counter", "vllm_sim:steps_total", "Engine steps run.", self.steps),
            ("counter", "vllm_sim:late_steps_total", "Engine steps that ended more than their own duration late.", self.late_steps),
            ("counter", "vllm_sim:busy_seconds_total", "Modelled seconds of engine steps.", self.busy),
            ("counter", "vllm_sim:lost_seconds_total", "Modelled seconds lost to lateness (lag left at idle).", self.lost),
        ):
            family = name[: -len("_total")] if kind == "counter" else name
            out.append(f"# HELP {family} {helptext}")
            out.append(f"# TYPE {family} {kind}")
            out.append(f"{name} {float(value)!r}")
        return "".join(line + "\n" for line in out)


_DEAD_MESSAGE = "EngineCore encountered an issue. See stack trace (above) for the root cause."


def _reason(status) -> str:
    from .http import REASONS

    return REASONS.get(status, "")


def spec_log_line(version, win, modelled_seconds) -> str:
    drafts = win["drafts"] or 1
    draft_tokens = win["draft_tokens"]
    accepted = win["accepted"]
    per_pos = ", ".join(f"{v / drafts:.3f}" for v in win["pos"])
    mean_len = 1.0 + accepted / drafts
    rate = 100.0 * accepted / draft_tokens if draft_tokens else 0.0
    if version < (0, 10, 2):
        return (
            f"SpecDecoding metrics: Draft acceptance rate: {rate:.1f}%, Mean acceptance length: {mean_len:.2f}, "
            f"Accepted: {accepted} tokens, Drafted: {draft_tokens} tokens, Per-position acceptance rate: {per_pos}"
        )
    return (
        f"SpecDecoding metrics: Mean acceptance length: {mean_len:.2f}, "
        f"Accepted throughput: {accepted / modelled_seconds:.2f} tokens/s, "
        f"Drafted throughput: {draft_tokens / modelled_seconds:.2f} tokens/s, "
        f"Accepted: {accepted} tokens, Drafted: {draft_tokens} tokens, "
        f"Per-position acceptance rate: {per_pos}, Avg Draft acceptance rate: {rate:.1f}%"
    )
