#!/usr/bin/env python3
"""Write scikit-learn's multi-label metrics for fixed cases to tests/fixtures/multilabel_metrics.json.

tests/engine/test_multilabel_metrics.cpp checks engine/multilabel_metrics.cpp against this file. For
each case (0/1 indicator matrices y_true, y_pred of num_samples x num_labels, built from fixed numpy
seeds or by hand) it stores scikit-learn's

    precision_recall_fscore_support(y_true, y_pred, average=A, zero_division="warn")

for A = "micro", "macro", "weighted", "samples" (precision, recall, f1; support = the sum of the
per-label supports, as classification_report prints it, which the script checks) and for A = None
(per_label: one {precision, recall, f1, support} per label column, in column order). labels=None:
every column is a label. The ill-defined-metric warnings are silenced (they are the point of several
cases). The file is a JSON list of

    {"name", "num_samples", "num_labels", "y_true", "y_pred" (lists of rows),
     "micro", "macro", "weighted", "samples": {"precision", "recall", "f1", "support"},
     "per_label": [{"precision", "recall", "f1", "support"}, ...]}

with floats in Python's repr (shortest round-trip form). Run from the repository root:

    pip install scikit-learn==1.9.1 numpy==2.4.6   # the versions that wrote the committed file
    python tests/reference/make_multilabel_metric_cases.py [--out PATH]

It prints the scikit-learn / numpy / Python versions and one line per case. The output is
deterministic: the same versions write the same bytes.

One-label case: sklearn reads an [n x 1] indicator matrix as a "binary" target (type_of_target needs
>= 2 columns for "multilabel-indicator"): it would report classes 0 and 1 and refuses
average="samples". The reference for one label column is therefore computed on the matrix with that
column duplicated ([n x 2]): every count doubles, so each precision/recall/F1 is the same rational
number (same double), the mean of two equal values is that value, and the weighted sum
(2·fl(v·s)) / (2·s) equals fl(v·s) / s exactly. The script checks this against sklearn's binary
results for label 1 (labels=[1]).
"""

import argparse
import json
import platform
import warnings
from pathlib import Path

import numpy as np
import sklearn
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import classification_report, precision_recall_fscore_support
from sklearn.utils.multiclass import type_of_target

AVERAGES = ("micro", "macro", "weighted", "samples")


def random_case(seed, n, densities, flip_rate):
    """y_true with per-label densities; y_pred = y_true with each entry flipped with flip_rate."""
    rng = np.random.default_rng(seed)
    densities = np.asarray(densities)
    y = (rng.random((n, len(densities))) < densities).astype(np.int64)
    flip = rng.random(y.shape) < flip_rate
    return y, np.where(flip, 1 - y, y)


def make_cases():
    cases = []

    cases.append(("random_7x3",) + random_case(101, 7, [0.4, 0.4, 0.4], 0.25))
    cases.append(("random_50x5",) + random_case(202, 50, [0.1, 0.3, 0.5, 0.7, 0.9], 0.2))
    cases.append(("random_200x12",) + random_case(303, 200, np.linspace(0.02, 0.6, 12), 0.15))
    # 129 samples, 10 labels: the sample means sum more than 128 values (numpy's pairwise block size).
    cases.append(("random_129x10_sparse",) + random_case(404, 129, [0.05] * 5 + [0.2] * 5, 0.1))
    # Very noisy predictions: many labels and samples with tp = 0.
    cases.append(("random_40x6_noisy",) + random_case(505, 40, [0.3] * 6, 0.5))

    # Label 2 is never true and never predicted: zeros in per_label, counted as 0 in macro.
    y, yp = random_case(606, 30, [0.5, 0.3, 0.0, 0.4], 0.2)
    y[:, 2] = 0
    yp[:, 2] = 0
    cases.append(("label_never_true_never_predicted", y, yp))

    # Label 1 is predicted but never true: precision 0, recall 0/0 -> 0, support 0.
    y, yp = random_case(707, 25, [0.5, 0.0, 0.6], 0.2)
    y[:, 1] = 0
    yp[:5, 1] = 1
    cases.append(("label_predicted_never_true", y, yp))

    # Samples with an empty true set (rows 0-5): recall 0/0 -> 0 for them in average="samples";
    # rows 0-2 also have an empty prediction (everything 0/0 -> 0).
    y, yp = random_case(808, 20, [0.5, 0.5, 0.5, 0.5], 0.25)
    y[:6] = 0
    yp[:3] = 0
    yp[3:6, 0] = 1
    cases.append(("samples_empty_true", y, yp))

    # Samples with an empty prediction (rows 0-7, whose true sets are not empty): precision 0/0 -> 0.
    y, yp = random_case(909, 24, [0.6, 0.5, 0.4], 0.2)
    y[:8, 1] = 1
    yp[:8] = 0
    cases.append(("samples_empty_pred", y, yp))

    # Nothing predicted at all: every precision 0/0 -> 0, micro precision 0/0 -> 0.
    y, _ = random_case(1010, 15, [0.3, 0.6, 0.2, 0.5, 0.1], 0.0)
    cases.append(("all_predictions_empty", y, np.zeros_like(y)))

    # Nothing true at all: total support 0, np.average raises and sklearn takes the plain mean.
    _, yp = random_case(1111, 12, [0.0, 0.0, 0.0], 0.3)
    cases.append(("no_true_labels", np.zeros_like(yp), yp))

    # Both matrices all zeros.
    cases.append(("all_zero", np.zeros((5, 3), np.int64), np.zeros((5, 3), np.int64)))

    # Perfect predictions, including an empty row and an unused label.
    y, _ = random_case(1212, 18, [0.5, 0.2, 0.7, 0.0], 0.0)
    y[0] = 0
    cases.append(("perfect", y, y.copy()))

    # A single label column (see the docstring).
    cases.append(("single_label",) + random_case(1313, 17, [0.4], 0.3))

    # One sample.
    cases.append(("one_sample", np.array([[1, 0, 1, 1, 0]]), np.array([[1, 1, 0, 1, 0]])))

    # Hand-checkable: counts small enough to verify by eye.
    cases.append(("hand_4x3", np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 0]]),
                  np.array([[1, 0, 0], [0, 1, 1], [0, 1, 0], [1, 0, 0]])))
    return cases


def metrics(p, r, f, s):
    return {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}


def sklearn_results(y, yp):
    """{average: (p, r, f)} and the per-label arrays for a multilabel-indicator pair (>= 2 columns)."""
    assert type_of_target(y) == "multilabel-indicator" and type_of_target(yp) == "multilabel-indicator"
    per = precision_recall_fscore_support(y, yp, average=None, zero_division="warn")
    avgs = {}
    for average in AVERAGES:
        p, r, f, s = precision_recall_fscore_support(y, yp, average=average, zero_division="warn")
        assert s is None and not any(np.isnan(v) for v in (p, r, f))
        avgs[average] = (p, r, f)
    return avgs, per


def check_report(y, yp, avgs, per):
    """classification_report's average rows: the same values, support = sum of per-label supports."""
    report = classification_report(y, yp, output_dict=True, zero_division="warn")
    for average in AVERAGES:
        row = report[f"{average} avg"]
        assert (row["precision"], row["recall"], row["f1-score"]) == avgs[average], average
        assert row["support"] == int(per[3].sum()), average


def make_case(name, y, yp):
    y = np.asarray(y, dtype=np.int64)
    yp = np.asarray(yp, dtype=np.int64)
    assert y.shape == yp.shape and y.ndim == 2 and set(np.unique(np.r_[y.ravel(), yp.ravel()])) <= {0, 1}
    n, num_labels = y.shape
    if num_labels == 1:
        avgs, per = sklearn_results(np.hstack([y, y]), np.hstack([yp, yp]))
        per = tuple(a[:1] for a in per)
        binary = precision_recall_fscore_support(y[:, 0], yp[:, 0], labels=[1], average=None)
        assert all(np.array_equal(a, b) for a, b in zip(per, binary)), name
        for average in ("micro", "macro", "weighted"):
            b = precision_recall_fscore_support(y[:, 0], yp[:, 0], labels=[1], average=average)
            assert b[:3] == avgs[average], (name, average)
    else:
        avgs, per = sklearn_results(y, yp)
        check_report(y, yp, avgs, per)
    support = int(per[3].sum())
    case = {"name": name, "num_samples": int(n), "num_labels": int(num_labels),
            "y_true": y.tolist(), "y_pred": yp.tolist()}
    for average in AVERAGES:
        case[average] = metrics(*avgs[average], support)
    case["per_label"] = [metrics(*v) for v in zip(*per)]
    return case


def dump(cases):
    """JSON with one matrix row per line (json.dumps writes floats with repr)."""
    def matrix(rows):
        return "[\n" + ",\n".join("      " + json.dumps(r, separators=(",", ":")) for r in rows) + "\n    ]"

    out = []
    for c in cases:
        lines = [f'    "name": {json.dumps(c["name"])}',
                 f'    "num_samples": {c["num_samples"]}',
                 f'    "num_labels": {c["num_labels"]}',
                 f'    "y_true": {matrix(c["y_true"])}',
                 f'    "y_pred": {matrix(c["y_pred"])}']
        lines += [f'    "{a}": {json.dumps(c[a])}' for a in AVERAGES]
        lines.append('    "per_label": [\n' + ",\n".join("      " + json.dumps(m) for m in c["per_label"]) + "\n    ]")
        out.append("  {\n" + ",\n".join(lines) + "\n  }")
    text = "[\n" + ",\n".join(out) + "\n]\n"
    assert json.loads(text) == cases
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "multilabel_metrics.json"
    parser.add_argument("--out", type=Path, default=default, help=f"output file (default {default})")
    args = parser.parse_args()

    warnings.simplefilter("ignore", UndefinedMetricWarning)
    print(f"scikit-learn {sklearn.__version__}, numpy {np.__version__}, Python {platform.python_version()}")
    cases = []
    for name, y, yp in make_cases():
        case = make_case(name, y, yp)
        cases.append(case)
        print(f"  {name}: {case['num_samples']}x{case['num_labels']}, micro f1 {case['micro']['f1']!r},"
              f" samples f1 {case['samples']['f1']!r}")
    args.out.write_text(dump(cases))
    print(f"wrote {len(cases)} cases to {args.out}")


if __name__ == "__main__":
    main()
