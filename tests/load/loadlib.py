"""Shared pieces of the load and fault scripts in tests/load (Python 3 standard library only).

A `LoomServer` runs `loom serve` as a child process (the binary is a parameter, so the same
scripts drive a sanitizer build), parses the port it listens on from its log, reads its RSS from
/proc and its Prometheus /metrics. `stream_completion` is a small asyncio HTTP/1.1 client that
reads an SSE stream chunk by chunk and can hang up at a chosen moment, which is what the
disconnect tests need and what urllib cannot do.
"""

import argparse
import asyncio
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time


def common_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--loom", default=os.environ.get("LOOM", "build/loom"),
                   help="loom binary (a sanitizer build works too); default $LOOM or build/loom")
    p.add_argument("--model", default="synth:tiny", help="model for loom serve -m")
    p.add_argument("--threads", type=int, default=1, help="loom serve -t")
    p.add_argument("--seed", type=int, default=1, help="seed of the load's random choices")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds the whole load may take before requests count as stuck")
    return p


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoomServer:
    """One `loom serve` child process. `args` are extra serve flags."""

    def __init__(self, loom, model, args=(), port=0, threads=1, log_path=None):
        self.loom = loom
        self.cmd = [loom, "serve", "-m", model, "--host", "127.0.0.1", "--port", str(port),
                    "-t", str(threads), "--disable-log-requests", *[str(a) for a in args]]
        self.log_path = log_path or tempfile.mktemp(prefix="loom-load-", suffix=".log")
        self.proc = None
        self.port = port
        self.started_at = None

    def start(self):
        self.log = open(self.log_path, "ab")
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT)
        return self

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def wait_ready(self, timeout=60.0):
        """Seconds from start() until /health answers 200."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("loom serve exited (%d):\n%s" % (self.proc.returncode,
                                                                    self.log_text()[-3000:]))
            if not self.port:
                m = re.search(r"listening on http://[^:]+:(\d+)", self.log_text())
                if m:
                    self.port = int(m.group(1))
            if self.port:
                try:
                    status, _ = self.request("GET", "/health", timeout=2)
                    if status == 200:
                        return time.monotonic() - self.started_at
                except OSError:
                    pass
            time.sleep(0.02)
        raise RuntimeError("loom serve not ready after %.0f s:\n%s" % (timeout,
                                                                     self.log_text()[-3000:]))

    def request(self, method, path, body=None, timeout=60):
        """(status, parsed JSON or text) of one plain request."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            raw = r.read().decode("utf-8", "replace")
            try:
                return r.status, json.loads(raw)
            except ValueError:
                return r.status, raw
        finally:
            c.close()

    def metrics(self):
        """{metric name: value}; samples of one name with several label sets are summed, and a
        label set can be asked for as 'name{label="v"}' (exact label text, model_name last)."""
        status, text = self.request("GET", "/metrics")
        if status != 200:
            raise RuntimeError("/metrics answered %d" % status)
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            name = key.split("{", 1)[0]
            out[name] = out.get(name, 0.0) + float(value)
            out[key] = float(value)
            m = re.match(r"(\w[\w:]*)\{(.*)\}$", key)
            if m:  # the same sample without model_name, for readable lookups
                labels = ",".join(l for l in m.group(2).split(",")
                                  if l and not l.startswith("model_name="))
                out["%s{%s}" % (m.group(1), labels)] = float(value)
        return out

    def kv_blocks(self):
        """(used, free) KV blocks over the layer groups."""
        m = self.metrics()
        used = sum(v for k, v in m.items() if k.startswith("loom:kv_cache_group_blocks{")
                   and 'state="used"' in k and "model_name" in k)
        free = sum(v for k, v in m.items() if k.startswith("loom:kv_cache_group_blocks{")
                   and 'state="free"' in k and "model_name" in k)
        return int(used), int(free)

    def wait_idle(self, timeout=30.0):
        """Waits until nothing runs or waits and every KV block is free; returns the last
        metrics. A request still running after `timeout` is stuck: the caller reports it."""
        deadline = time.monotonic() + timeout
        while True:
            m = self.metrics()
            used, _ = self.kv_blocks()
            if (m.get("vllm:num_requests_running", 0) == 0
                    and m.get("vllm:num_requests_waiting", 0) == 0 and used == 0):
                return m
            if time.monotonic() > deadline:
                return m
            time.sleep(0.05)

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self, timeout=30.0):
        """SIGTERM and wait: the exit status (non-zero when a sanitizer found something)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return -9
        return self.proc.returncode

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


async def stream_completion(port, body, path="/v1/completions", hang_up_after_chunks=None,
                            hang_up_after_s=None, timeout=120.0, on_chunk=None):
    """Sends one streaming request and reads its SSE events. Hangs up (closes the socket)
    after `hang_up_after_chunks` content chunks or `hang_up_after_s` seconds, whichever comes
    first, when given; calls on_chunk() after each content chunk. Returns a dict: status, ttft (s), chunks (content events), usage,
    finish_reason, hung_up ('' | 'before first token' | 'mid-decode'), error, seconds."""
    out = {"status": 0, "ttft": None, "chunks": 0, "usage": None, "finish_reason": None,
           "hung_up": "", "error": "", "seconds": 0.0, "text": ""}
    t0 = time.monotonic()
    writer = None
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        payload = json.dumps(body).encode()
        writer.write(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % (path.encode(), len(payload)) + payload)
        await writer.drain()

        async def read_all():
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            out["status"] = int(lines[0].split()[1])
            headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip()
                       for l in lines[1:] if ":" in l}
            if headers.get("transfer-encoding", "").lower() != "chunked":
                n = int(headers.get("content-length", "0"))
                out["error"] = (await reader.readexactly(n)).decode("utf-8", "replace")[:300]
                return
            buf = b""
            while True:
                size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                chunk = await reader.readexactly(size + 2)
                if size == 0:
                    return
                buf += chunk[:-2]
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    data = event.decode("utf-8", "replace")
                    if not data.startswith("data: "):
                        continue
                    data = data[6:]
                    if data == "[DONE]":
                        continue
                    j = json.loads(data)
                    if j.get("usage"):
                        out["usage"] = j["usage"]
                    for c in j.get("choices", []):
                        text = c.get("text")
                        if text is None:
                            text = (c.get("delta") or {}).get("content") or ""
                        if out["ttft"] is None:
                            out["ttft"] = time.monotonic() - t0
                        out["chunks"] += 1
                        if on_chunk:
                            on_chunk()
                        out["text"] += text
                        if c.get("finish_reason"):
                            out["finish_reason"] = c["finish_reason"]
                    if hang_up_after_chunks is not None and out["chunks"] >= hang_up_after_chunks:
                        out["hung_up"] = "mid-decode"
                        return

        limit = timeout if hang_up_after_s is None else min(timeout, hang_up_after_s)
        try:
            await asyncio.wait_for(read_all(), limit)
        except asyncio.TimeoutError:
            if hang_up_after_s is None:
                out["error"] = "timed out after %.0f s (stuck?)" % timeout
            else:
                out["hung_up"] = "mid-decode" if out["chunks"] else "before first token"
    except (OSError, asyncio.IncompleteReadError, ValueError) as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        if writer is not None:
            writer.transport.abort() if out["hung_up"] else writer.close()
    out["seconds"] = time.monotonic() - t0
    return out


def percentile(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


class Report:
    """Prints `name: value` figures and collects failed checks; exit status 1 on any."""

    def __init__(self, title):
        self.failures = []
        print("== %s" % title, flush=True)

    def figure(self, name, value):
        print("  %-34s %s" % (name + ":", value), flush=True)

    def check(self, ok, what):
        print("  %-34s %s" % ("check", ("ok   " if ok else "FAIL ") + what), flush=True)
        if not ok:
            self.failures.append(what)

    def finish(self):
        if self.failures:
            print("FAILED: %d check(s)" % len(self.failures), flush=True)
            sys.exit(1)
        print("PASSED", flush=True)


def status_classes(results):
    """Counts of 2xx, 4xx, 5xx and connection errors (status 0) among results."""
    c = {"2xx": 0, "4xx": 0, "5xx": 0, "no response": 0}
    for r in results:
        s = r["status"]
        key = "no response" if s == 0 else "2xx" if s < 300 else "4xx" if s < 500 else "5xx"
        c[key] += 1
    return c
