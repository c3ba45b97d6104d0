"""A load generator for `bertrain serve` in the Python standard library only, for machines without `wrk`
(the GPU machines of ./bertrain.sh gpu-check have no Debian packages); bench_serve.py (wrk) is the one for
numbers recorded side by side with the Made-With-ML peer.

--concurrency C keep-alive connections (spread over --processes worker processes, so that Python's GIL is not the
bottleneck) each POST one body in a loop for --duration seconds; every answer must be 200 and hold --expect.
Prints one line per concurrency: requests/s, rows/s (x --rows-per-request), p50 / p99 latency, errors; exits 1
on any error. Test-only tooling: never needed to build, test or run bertrain.

    python3 tests/reference/serve_load.py --url http://127.0.0.1:8000 --path /v1/predict \\
        --body '{"texts": ["object detection with yolo"]}' --concurrency 1,8,64
"""

import argparse
import http.client
import json
import multiprocessing
import sys
import threading
import time
from urllib.parse import urlparse


def worker(host, port, path, body, expect, connections, duration, out):
    latencies, errors, first_error = [], 0, ""
    lock = threading.Lock()
    deadline = time.monotonic() + duration

    def loop():
        nonlocal errors, first_error
        conn = http.client.HTTPConnection(host, port, timeout=30)
        mine = []
        while time.monotonic() < deadline:
            start = time.monotonic()
            try:
                conn.request("POST", path, body, {"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read().decode("utf-8", "replace")
                ok = response.status == 200 and expect in data
                problem = "" if ok else "status %d: %s" % (response.status, data[:200])
            except (OSError, http.client.HTTPException) as e:
                ok, problem = False, repr(e)
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=30)
            if ok:
                mine.append(time.monotonic() - start)
            else:
                with lock:
                    errors += 1
                    first_error = first_error or problem
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=loop) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((latencies, errors, first_error))


def run(url, path, body, expect, concurrency, processes, duration):
    parsed = urlparse(url)
    processes = max(1, min(processes, concurrency))
    share = [concurrency // processes + (1 if i < concurrency % processes else 0) for i in range(processes)]
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=worker, args=(parsed.hostname, parsed.port, path, body, expect, n,
                                                          duration, out)) for n in share]
    start = time.monotonic()
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    elapsed = time.monotonic() - start
    latencies = sorted(l for r in results for l in r[0])
    errors = sum(r[1] for r in results)
    first_error = next((r[2] for r in results if r[2]), "")
    return latencies, errors, first_error, elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--path", default="/v1/predict")
    parser.add_argument("--body", default=json.dumps({"texts": ["EfficientDet: Scalable and Efficient Object "
                                                                "Detection. Implementation EfficientDet in PyTorch."]}))
    parser.add_argument("--rows-per-request", type=int, default=0,
                        help="rows per request (default: the length of the body's \"texts\" or \"rows\", else 1)")
    parser.add_argument("--expect", default="prediction", help="substring every answer must hold")
    parser.add_argument("--concurrency", default="1,8,64")
    parser.add_argument("--processes", type=int, default=max(1, multiprocessing.cpu_count() // 2))
    parser.add_argument("--duration", type=float, default=15)
    parser.add_argument("--json-out", help="write the results as JSON here")
    args = parser.parse_args()
    body = json.loads(args.body)
    rows = args.rows_per_request or len(body.get("texts", body.get("rows", [None])))
    failed, table = False, []
    print("conc    req/s    rows/s   p50 ms   p99 ms  errors")
    for c in (int(x) for x in args.concurrency.split(",")):
        latencies, errors, first_error, elapsed = run(args.url, args.path, args.body, args.expect, c,
                                                      args.processes, args.duration)
        n = len(latencies)
        p50 = latencies[n // 2] * 1000 if n else float("nan")
        p99 = latencies[min(n - 1, int(n * 0.99))] * 1000 if n else float("nan")
        print("%4d %8.1f %9.1f %8.2f %8.2f %7d" % (c, n / elapsed, n * rows / elapsed, p50, p99, errors))
        if errors:
            print("  first error: %s" % first_error)
            failed = True
        table.append({"concurrency": c, "requests_per_s": n / elapsed, "rows_per_s": n * rows / elapsed,
                      "p50_ms": p50, "p99_ms": p99, "errors": errors, "rows_per_request": rows})
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(table, f, indent=2)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
