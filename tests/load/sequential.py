#!/usr/bin/env python3
"""Many sequential requests of mixed kinds (completions and chat, streamed or not, some
hanging up mid-stream, some refused with 400): no RSS drift. RSS is sampled after every tenth of
the run; the figure checked is the growth from the end of the first tenth (warm-up) to the end.
Takes the binary as --loom, so the same run under a LeakSanitizer build reports leaks: the
server is stopped with SIGTERM and its exit status checked.

  python3 tests/load/sequential.py --loom build/loom --requests 1000
  python3 tests/load/sequential.py --loom build-asan/loom --requests 1000   # LeakSanitizer
"""

import asyncio
import random
import time

import loadlib


def main():
    p = loadlib.common_args(__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--rss-tolerance", type=float, default=0.05)
    a = p.parse_args()
    rng = random.Random(a.seed)
    rep = loadlib.Report("%d sequential requests" % a.requests)
    srv = loadlib.LoomServer(a.loom, a.model, threads=a.threads,
                             args=["--max-model-len", 256, "--max-num-seqs", 8]).start()
    rep.figure("time to ready (s)", "%.2f" % srv.wait_ready(timeout=300))
    rss = [srv.rss_kib()]
    statuses = {"2xx": 0, "4xx": 0, "5xx": 0, "no response": 0}
    failures = []
    ttfts = []
    t0 = time.monotonic()

    def count(status):
        key = "no response" if status == 0 else "2xx" if status < 300 else \
            "4xx" if status < 500 else "5xx"
        statuses[key] += 1

    for i in range(a.requests):
        kind = i % 5
        n = rng.randrange(1, a.max_tokens + 1)
        prompt = [rng.randrange(1, 200) for _ in range(rng.randrange(4, 64))]
        if kind == 0:  # plain completion, checked for its token count
            st, j = srv.request("POST", "/v1/completions", {
                "prompt": prompt, "max_tokens": n, "ignore_eos": True, "seed": i})
            count(st)
            if st != 200 or j["usage"]["completion_tokens"] != n:
                failures.append((i, st, str(j)[:200]))
        elif kind == 1:  # chat, not streamed
            st, j = srv.request("POST", "/v1/chat/completions", {
                "messages": [{"role": "user", "content": "hello %d" % i}], "max_tokens": n,
                "ignore_eos": True})
            count(st)
            if st != 200 or j["usage"]["completion_tokens"] != n:
                failures.append((i, st, str(j)[:200]))
        elif kind in (2, 3):  # streamed; kind 3 hangs up after a few chunks
            hang = rng.randrange(1, n + 1) if kind == 3 and n > 1 else None
            r = asyncio.run(loadlib.stream_completion(srv.port, {
                "prompt": prompt, "max_tokens": n, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}, hang_up_after_chunks=hang))
            if not r["hung_up"]:
                count(r["status"])
                if r["status"] != 200 or not r["usage"] or r["usage"]["completion_tokens"] != n:
                    failures.append((i, r["status"], r["error"]))
            if r["ttft"] is not None:
                ttfts.append(r["ttft"])
        else:  # a bad request: must be refused with 400, nothing allocated for it
            st, j = srv.request("POST", "/v1/completions", {"prompt": prompt, "max_tokens": -1})
            count(st)
            if st != 400:
                failures.append((i, st, str(j)[:200]))
        if (i + 1) % max(1, a.requests // 10) == 0:
            srv.wait_idle(timeout=10)
            rss.append(srv.rss_kib())
    elapsed = time.monotonic() - t0
    m = srv.wait_idle()
    used, free = srv.kv_blocks()
    rss.append(srv.rss_kib())
    expected_4xx = a.requests // 5

    rep.figure("requests", a.requests)
    rep.figure("failures", len(failures))
    rep.figure("2xx / 4xx / 5xx / no response", "%d / %d / %d / %d" % (
        statuses["2xx"], statuses["4xx"], statuses["5xx"], statuses["no response"]))
    rep.figure("TTFT p50 / p99 (ms)", "%.1f / %.1f" % (loadlib.percentile(ttfts, 50) * 1e3,
                                                      loadlib.percentile(ttfts, 99) * 1e3))
    rep.figure("wall time (s)", "%.2f" % elapsed)
    rep.figure("RSS per tenth (MiB)", " ".join("%.1f" % (x / 1024) for x in rss))
    drift = (rss[-1] - rss[1]) / rss[1]
    rep.figure("RSS drift after warm-up", "%+.2f%%" % (100 * drift))
    rep.figure("KV blocks used / free", "%d / %d" % (used, free))
    if failures:
        rep.figure("first failure", failures[0])
    rep.check(not failures, "every request answered as expected")
    rep.check(statuses["5xx"] == 0, "no 5xx")
    rep.check(statuses["4xx"] == expected_4xx, "exactly the %d bad requests got 4xx" % expected_4xx)
    rep.check(abs(drift) <= a.rss_tolerance, "RSS drift within %.0f%%" % (100 * a.rss_tolerance))
    rep.check(used == 0, "every KV block is free afterwards")
    rep.check(m.get("vllm:num_requests_running", -1) == 0, "vllm:num_requests_running is 0")
    rc = srv.stop(timeout=120)
    if rc != 0:
        rep.figure("server log tail", "\n" + srv.log_text()[-4000:])
    rep.check(rc == 0, "loom serve exits cleanly on SIGTERM (exit status %d; a sanitizer "
              "build exits non-zero on a leak)" % rc)
    rep.finish()


if __name__ == "__main__":
    main()
