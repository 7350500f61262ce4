#!/usr/bin/env python3
"""`kill -9` during load, then restart on the same port: the new process must become ready
(/health 200), serve the same greedy output as before the kill, and carry a fresh load without
a failure. Prints the time to ready of the first start and of the restart.

  python3 tests/load/kill_restart.py --loom build/loom --clients 64 --rounds 3
"""

import asyncio
import random
import time

import loadlib


def main():
    p = loadlib.common_args(__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--rounds", type=int, default=1, help="kill and restart this many times")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--kill-at", type=float, default=0.25,
                   help="share of the load's output tokens received when the server is killed")
    a = p.parse_args()
    rng = random.Random(a.seed)
    rep = loadlib.Report("kill -9 under load of %d streams, restart, %d round(s)" %
                         (a.clients, a.rounds))
    port = loadlib.free_port()
    args = ["--max-model-len", 256, "--max-num-seqs", 16]
    probe = {"prompt": [rng.randrange(1, 200) for _ in range(16)], "max_tokens": 24,
             "ignore_eos": True, "temperature": 0}

    def body():
        return {"prompt": [rng.randrange(1, 200) for _ in range(24)], "max_tokens": a.max_tokens,
                "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}

    srv = loadlib.LoomServer(a.loom, a.model, port=port, threads=a.threads, args=args).start()
    rep.figure("time to ready, first start (s)", "%.2f" % srv.wait_ready())
    st, ref = srv.request("POST", "/v1/completions", probe)
    ref_text = ref["choices"][0]["text"] if st == 200 else None

    ready_times, interrupted, probes_ok, after_ok, after_total = [], 0, 0, 0, 0
    classes_after = {"2xx": 0, "4xx": 0, "5xx": 0, "no response": 0}
    for _ in range(a.rounds):
        async def load_and_kill():
            received = [0]
            killed = asyncio.Event()

            def on_chunk():  # kill -9 mid-decode, once the load is well under way
                received[0] += 1
                if received[0] == int(a.kill_at * a.clients * a.max_tokens):
                    srv.kill9()
                    killed.set()
            tasks = [asyncio.ensure_future(loadlib.stream_completion(
                srv.port, body(), timeout=a.timeout, on_chunk=on_chunk))
                for _ in range(a.clients)]
            results = await asyncio.gather(*tasks)
            if not killed.is_set():
                srv.kill9()
            return results
        results = asyncio.run(load_and_kill())
        interrupted += sum(1 for r in results if r["error"])

        srv = loadlib.LoomServer(a.loom, a.model, port=port, threads=a.threads, args=args).start()
        ready_times.append(srv.wait_ready())
        st, again = srv.request("POST", "/v1/completions", probe)
        probes_ok += int(st == 200 and again["choices"][0]["text"] == ref_text)

        async def fresh_load():
            return await asyncio.gather(*[loadlib.stream_completion(srv.port, body(),
                                                                    timeout=a.timeout)
                                          for _ in range(a.clients)])
        results = asyncio.run(fresh_load())
        after_total += len(results)
        after_ok += sum(1 for r in results if r["status"] == 200 and r["usage"] and
                        r["usage"]["completion_tokens"] == a.max_tokens)
        for k, v in loadlib.status_classes(results).items():
            classes_after[k] += v
    m = srv.wait_idle()
    used, free = srv.kv_blocks()

    rep.figure("time to ready after kill -9 (s)", " ".join("%.2f" % t for t in ready_times))
    rep.figure("streams cut by the kill", "%d of %d" % (interrupted, a.clients * a.rounds))
    rep.figure("requests after restart", after_total)
    rep.figure("failures after restart", after_total - after_ok)
    rep.figure("2xx / 4xx / 5xx / no response", "%d / %d / %d / %d" % (
        classes_after["2xx"], classes_after["4xx"], classes_after["5xx"],
        classes_after["no response"]))
    rep.figure("KV blocks used / free", "%d / %d" % (used, free))
    rep.check(ref_text is not None, "the first server answers the probe")
    rep.check(interrupted > 0, "the kill cut streams in flight")
    rep.check(probes_ok == a.rounds, "after each restart the probe's greedy output is unchanged")
    rep.check(after_ok == after_total, "every request after a restart completes")
    rep.check(used == 0 and m.get("vllm:num_requests_running", -1) == 0,
              "nothing running and every KV block free at the end")
    rc = srv.stop()
    rep.check(rc == 0, "loom serve exits cleanly on SIGTERM (exit status %d)" % rc)
    rep.finish()


if __name__ == "__main__":
    main()
