#!/usr/bin/env python3
"""Reads `bertrain serve`'s /metrics with the real Prometheus client's parser
(prometheus_client.parser.text_string_to_metric_families) and checks that every bertrain family is there with its
type and that every histogram is consistent; prints a one-line summary, exits 1 on any problem.

    pip install prometheus_client
    python tests/reference/check_prometheus_metrics.py --url http://127.0.0.1:8000/metrics
    python tests/reference/check_prometheus_metrics.py --file metrics.txt

Checks: the text parses; no sample falls outside a declared family (the parser makes such a sample an untyped
family of its own); the counters bertrain_http_requests_total, bertrain_rows_total, bertrain_tokens_total,
bertrain_batches_total, bertrain_truncated_rows_total, the histograms bertrain_http_request_duration_seconds,
bertrain_batch_rows, bertrain_batch_tokens, bertrain_batch_duration_seconds and the gauges bertrain_queue_rows,
bertrain_queue_requests, bertrain_in_flight_requests, bertrain_open_connections,
bertrain_max_open_connections, bertrain_ready (0 or 1) and bertrain_rows_per_second exist
with those types; no series appears twice; in every histogram series the buckets' le bounds ascend, their counts
are cumulative, the last bucket is +Inf and equals _count, and _sum is there; counters are not negative.
"""
import argparse
import math
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

# The parser names a counter family without its _total suffix (its samples keep it).
FAMILIES = {
    "bertrain_http_requests": "counter",
    "bertrain_rows": "counter",
    "bertrain_tokens": "counter",
    "bertrain_batches": "counter",
    "bertrain_truncated_rows": "counter",
    "bertrain_http_request_duration_seconds": "histogram",
    "bertrain_batch_rows": "histogram",
    "bertrain_batch_tokens": "histogram",
    "bertrain_batch_duration_seconds": "histogram",
    "bertrain_queue_rows": "gauge",
    "bertrain_queue_requests": "gauge",
    "bertrain_in_flight_requests": "gauge",
    "bertrain_open_connections": "gauge",
    "bertrain_max_open_connections": "gauge",
    "bertrain_ready": "gauge",
    "bertrain_rows_per_second": "gauge",
}


def check_histogram(family, errors):
    series = {}  # labels without le -> {"buckets": [(le, value)], "count": v, "sum": v}
    for s in family.samples:
        labels = dict(s.labels)
        le = labels.pop("le", None)
        entry = series.setdefault(tuple(sorted(labels.items())), {"buckets": []})
        if s.name == family.name + "_bucket":
            if le is None:
                errors.append("%s: a bucket without le" % family.name)
                continue
            entry["buckets"].append((float(le), s.value))
        elif s.name == family.name + "_count":
            entry["count"] = s.value
        elif s.name == family.name + "_sum":
            entry["sum"] = s.value
    for labels, entry in series.items():
        where = "%s%s" % (family.name, dict(labels) if labels else "")
        buckets = entry["buckets"]
        if not buckets or buckets[-1][0] != math.inf:
            errors.append("%s: the last bucket is not +Inf" % where)
        for (le0, v0), (le1, v1) in zip(buckets, buckets[1:]):
            if not le1 > le0:
                errors.append("%s: le %g after %g" % (where, le1, le0))
            if v1 < v0:
                errors.append("%s: bucket le=%g (%g) below le=%g (%g): not cumulative" % (where, le1, v1, le0, v0))
        if "count" not in entry or "sum" not in entry:
            errors.append("%s: no _count or _sum" % where)
        elif buckets and buckets[-1][1] != entry["count"]:
            errors.append("%s: +Inf bucket %g != _count %g" % (where, buckets[-1][1], entry["count"]))
    return len(series)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--url", help="e.g. http://127.0.0.1:8000/metrics")
    source.add_argument("--file", help="a file holding the text")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for --url")
    args = ap.parse_args()
    try:
        if args.url:
            with urllib.request.urlopen(args.url, timeout=args.timeout) as response:
                content_type = response.headers.get("Content-Type", "")
                text = response.read().decode("utf-8")
            if not content_type.startswith("text/plain"):
                print("check_prometheus_metrics: Content-Type %r, expected text/plain; version=0.0.4" % content_type)
                sys.exit(1)
        else:
            with open(args.file, encoding="utf-8") as f:
                text = f.read()
        families = list(text_string_to_metric_families(text))
    except Exception as e:  # unreadable source or unparsable text: one line, exit 1
        print("check_prometheus_metrics: %s: %s" % (type(e).__name__, e))
        sys.exit(1)

    errors = []
    by_name = {}
    seen_series = set()
    samples = 0
    histogram_series = 0
    for family in families:
        if family.name in by_name:
            errors.append("family %s declared twice" % family.name)
        by_name[family.name] = family
        if family.type == "unknown" or family.type == "untyped":
            errors.append("sample %s outside a declared family" % family.name)
        for s in family.samples:
            samples += 1
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in seen_series:
                errors.append("duplicate series %s%s" % (s.name, s.labels))
            seen_series.add(key)
            if family.type == "counter" and not s.value >= 0:
                errors.append("counter %s%s = %g" % (s.name, s.labels, s.value))
        if family.type == "histogram":
            histogram_series += check_histogram(family, errors)
    for name, type_ in FAMILIES.items():
        family = by_name.get(name)
        if family is None:
            errors.append("no family %s" % name)
        elif family.type != type_:
            errors.append("%s is a %s, expected a %s" % (name, family.type, type_))
        elif type_ != "histogram" and name not in ("bertrain_http_requests",) and len(family.samples) != 1:
            errors.append("%s has %d samples, expected 1" % (name, len(family.samples)))
    ready = by_name.get("bertrain_ready")
    if ready is not None and ready.samples and ready.samples[0].value not in (0.0, 1.0):
        errors.append("bertrain_ready = %g, expected 0 or 1" % ready.samples[0].value)

    for e in errors:
        print("check_prometheus_metrics: " + e)
    requests = sum(s.value for s in by_name["bertrain_http_requests"].samples) if "bertrain_http_requests" in by_name \
        else 0
    print("check_prometheus_metrics: %s: %d families, %d samples, %d histogram series, %d requests counted, %d problems"
          % ("FAIL" if errors else "OK", len(families), samples, histogram_series, requests, len(errors)))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
