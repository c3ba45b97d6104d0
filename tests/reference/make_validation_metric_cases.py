#!/usr/bin/env python3
"""Write scikit-learn's validation metrics for fixed logits and targets to tests/fixtures/validation_metrics.json.

tests/engine/test_validation_metrics.cpp checks engine/validation_metrics.cpp (the accuracy and F1 training reports
per epoch, computed from the engine's logits) against this file. For each case, logits [rows x labels] and targets
[rows x labels] (one-hot rows for single-label, 0/1 rows for multi-label) as the engine and the batcher give them,
the predictions are made as bertrain makes them:

    single-label: y_pred = argmax(logits, axis=1) (the first on ties), y_true = argmax(targets, axis=1)
    multi-label:  y_pred = sigmoid(logits) >= 0.5 in float32 (bertrain evaluate's default --threshold),
                  y_true = targets > 0.5

and the file stores

    accuracy_score(y_true, y_pred)                                   (multi-label: subset accuracy)
    f1_score(y_true, y_pred, average=A, zero_division="warn")        for A = weighted, micro, macro

with labels=None, so scikit-learn's own label set: unique_labels(y_true, y_pred) for single-label class vectors
(a class neither true nor predicted is left out of the macro mean) and every column for indicator matrices. It
also stores how many labels that set has ("labels_averaged"), and for single-label the macro F1 over every class
(labels=range(num_labels), "f1_macro_every_label"), which differs where a class is left out. The ill-defined-metric
warnings are silenced (they are the point of several cases). The logits are multiples of 1/64 (exact in float32
and in JSON), and multi-label logits are at least 1/64 away from 0, so the sigmoid rule and logit > 0 agree and
the predictions do not depend on how exp rounds. The file is a JSON list of

    {"name", "multi_label", "num_labels", "logits", "targets" (lists of rows),
     "accuracy", "f1_weighted", "f1_micro", "f1_macro", "labels_averaged"[, "f1_macro_every_label"]}

with floats in Python's repr (shortest round-trip form). Run from the repository root:

    pip install scikit-learn==1.9.1 numpy==2.4.6   # the versions that wrote the committed file
    python tests/reference/make_validation_metric_cases.py [--out PATH]

It prints the scikit-learn / numpy / Python versions and one line per case. The output is deterministic: the same
versions write the same bytes.
"""

import argparse
import json
import platform
import warnings
from pathlib import Path

import numpy as np
import sklearn
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import accuracy_score, f1_score
from sklearn.utils.multiclass import type_of_target, unique_labels

AVERAGES = ("weighted", "micro", "macro")
STEP = 1 / 64  # logits are multiples of it: exact in float32


def quantize(x):
    return np.round(np.asarray(x, dtype=np.float64) / STEP) * STEP


def single_label_case(seed, rows, num_labels, accuracy, class_probs=None):
    """One-hot targets drawn from class_probs; logits noise plus a margin on the true class for about
    `accuracy` of the rows (the rest put it on a random other class)."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(num_labels, size=rows, p=class_probs)
    targets = np.eye(num_labels, dtype=np.int64)[truth]
    logits = rng.normal(0.0, 1.0, (rows, num_labels))
    hit = rng.random(rows) < accuracy
    other = (truth + rng.integers(1, num_labels, rows)) % num_labels if num_labels > 1 else truth
    logits[np.arange(rows), np.where(hit, truth, other)] += 4.0
    return quantize(logits), targets


def multi_label_case(seed, rows, densities, flip_rate):
    """Targets with per-label densities; logits of magnitude >= 1/64 whose sign is the target, flipped with
    flip_rate."""
    rng = np.random.default_rng(seed)
    densities = np.asarray(densities)
    targets = (rng.random((rows, len(densities))) < densities).astype(np.int64)
    flip = rng.random(targets.shape) < flip_rate
    predicted = np.where(flip, 1 - targets, targets)
    magnitude = quantize(np.abs(rng.normal(0.0, 2.0, targets.shape))) + STEP
    return np.where(predicted == 1, magnitude, -magnitude), targets


def make_cases():
    cases = []

    # Single-label.
    cases.append(("single_holdout_like", False) + single_label_case(1, 200, 4, 0.8, [0.3, 0.15, 0.4, 0.15]))

    logits, targets = single_label_case(2, 60, 5, 0.7)
    logits[:, 3] = -8.0  # class 3 is true in some rows but never predicted
    cases.append(("single_class_never_predicted", False, logits, targets))

    logits, targets = single_label_case(3, 60, 5, 0.6, [0.3, 0.0, 0.3, 0.2, 0.2])
    logits[::7, 1] = 8.0  # class 1 is never true but predicted in every 7th row
    cases.append(("single_class_never_true", False, logits, targets))

    # Class 4 is neither true nor predicted: scikit-learn's label set leaves it out of macro.
    logits, targets = single_label_case(4, 50, 5, 0.7, [0.25, 0.25, 0.25, 0.25, 0.0])
    logits[:, 4] = -8.0
    cases.append(("single_class_neither_true_nor_predicted", False, logits, targets))

    # Two classes absent among eight: the mean runs over six labels.
    logits, targets = single_label_case(5, 80, 8, 0.5, [0.2, 0.0, 0.2, 0.2, 0.1, 0.0, 0.2, 0.1])
    logits[:, [1, 5]] = -8.0
    cases.append(("single_two_of_eight_classes_unused", False, logits, targets))

    # Every row wrong: the predicted class is the next one.
    _, targets = single_label_case(6, 30, 4, 1.0)
    truth = np.argmax(targets, axis=1)
    logits = np.full(targets.shape, -1.0)
    logits[np.arange(len(truth)), (truth + 1) % 4] = 2.0
    cases.append(("single_all_wrong", False, logits, targets))

    cases.append(("single_one_row", False, quantize([[0.5, 2.25, -1.0]]), np.array([[0, 0, 1]])))
    cases.append(("single_one_row_right", False, quantize([[0.5, 2.25, -1.0]]), np.array([[0, 1, 0]])))

    logits, targets = single_label_case(7, 40, 4, 1.0)
    cases.append(("single_perfect", False, logits, targets))

    # Only one class in y_true and y_pred (scikit-learn's "binary" target with one label).
    logits = np.zeros((6, 4))
    logits[:, 2] = 1.0
    cases.append(("single_one_class_only", False, logits, np.eye(4, dtype=np.int64)[[2] * 6]))

    # Ties: a row of equal logits predicts its first class, as numpy's argmax and std::max_element do.
    logits, targets = single_label_case(8, 24, 3, 0.7)
    logits[::3] = 0.25
    cases.append(("single_tied_logits", False, logits, targets))

    # 20 classes, some unused: the per-label sums run over more than 8 values (numpy's pairwise blocks).
    probs = np.r_[np.full(17, 1 / 17), np.zeros(3)]
    logits, targets = single_label_case(9, 150, 20, 0.6, probs)
    logits[:, 17:19] = -8.0  # classes 17, 18 unused; 19 never true but may be predicted
    cases.append(("single_20_classes", False, logits, targets))

    # Multi-label.
    cases.append(("multi_random", True) + multi_label_case(101, 100, [0.1, 0.3, 0.5, 0.7, 0.9], 0.2))

    logits, targets = multi_label_case(102, 40, [0.4, 0.5, 0.3], 0.2)
    logits[:10] = -np.abs(logits[:10])  # rows 0-9 predict no label at all
    cases.append(("multi_empty_predictions_in_some_rows", True, logits, targets))

    logits, targets = multi_label_case(103, 25, [0.3, 0.6, 0.2, 0.5], 0.3)
    cases.append(("multi_nothing_predicted", True, -np.abs(logits), targets))

    # Label 2 is never true and never predicted: it counts as 0 in macro (indicator targets keep every column).
    logits, targets = multi_label_case(104, 30, [0.5, 0.3, 0.0, 0.4], 0.2)
    logits[:, 2] = -np.abs(logits[:, 2])
    cases.append(("multi_label_never_true_never_predicted", True, logits, targets))

    # Nothing true at all: weighted falls back to the plain mean.
    logits, targets = multi_label_case(105, 20, [0.0, 0.0, 0.0], 0.3)
    cases.append(("multi_no_true_labels", True, logits, targets))

    # Nothing true and nothing predicted: every row exactly right, every F1 0/0 -> 0.
    logits, targets = multi_label_case(106, 8, [0.0, 0.0, 0.0], 0.0)
    cases.append(("multi_all_empty", True, logits, targets))

    logits, targets = multi_label_case(107, 30, [0.5, 0.5, 0.5], 0.0)
    cases.append(("multi_all_wrong", True, -logits, targets))

    cases.append(("multi_one_row", True, quantize([[1.5, -0.25, 0.5, -3.0]]), np.array([[1, 1, 0, 0]])))

    logits, targets = multi_label_case(108, 130, np.linspace(0.02, 0.6, 12), 0.15)
    cases.append(("multi_12_labels", True, logits, targets))
    return cases


def make_case(name, multi_label, logits, targets):
    logits = np.asarray(logits, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.int64)
    assert logits.shape == targets.shape and logits.ndim == 2, name
    assert np.array_equal(logits, quantize(logits)), name
    num_labels = logits.shape[1]
    case = {"name": name, "multi_label": multi_label, "num_labels": int(num_labels),
            "logits": logits.tolist(), "targets": targets.tolist()}
    if multi_label:
        assert num_labels >= 2 and set(np.unique(targets)) <= {0, 1}, name
        assert np.all(np.abs(logits) >= STEP), name
        x = logits.astype(np.float32)
        probability = np.float32(1) / (np.float32(1) + np.exp(-x))
        y_pred = (probability >= np.float32(0.5)).astype(np.int64)
        assert np.array_equal(y_pred, (logits > 0).astype(np.int64)), name
        y_true = targets
        assert type_of_target(y_true) == "multilabel-indicator" and type_of_target(y_pred) == "multilabel-indicator"
        labels_averaged = num_labels
    else:
        assert np.all(targets.sum(axis=1) == 1), name
        y_pred = np.argmax(logits, axis=1)
        y_true = np.argmax(targets, axis=1)
        labels_averaged = len(unique_labels(y_true, y_pred))
    case["accuracy"] = float(accuracy_score(y_true, y_pred))
    for average in AVERAGES:
        case[f"f1_{average}"] = float(f1_score(y_true, y_pred, average=average, zero_division="warn"))
    case["labels_averaged"] = int(labels_averaged)
    if not multi_label:
        case["f1_macro_every_label"] = float(f1_score(y_true, y_pred, average="macro", labels=np.arange(num_labels),
                                                      zero_division="warn"))
        # Single-label micro F1 is the accuracy.
        assert case["f1_micro"] == case["accuracy"], name
    return case


def dump(cases):
    """The cases as JSON, a matrix row a line, keys in the cases' order (json.dumps writes floats with repr)."""
    def value(v):
        if not isinstance(v, list):
            return json.dumps(v)
        return "[\n" + ",\n".join("      " + json.dumps(row, separators=(",", ":")) for row in v) + "\n    ]"

    objects = ("  {\n" + ",\n".join(f"    {json.dumps(k)}: {value(v)}" for k, v in c.items()) + "\n  }" for c in cases)
    text = "[\n" + ",\n".join(objects) + "\n]\n"
    assert json.loads(text) == cases
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "validation_metrics.json"
    parser.add_argument("--out", type=Path, default=default, help=f"output file (default {default})")
    args = parser.parse_args()

    warnings.simplefilter("ignore", UndefinedMetricWarning)
    print(f"scikit-learn {sklearn.__version__}, numpy {np.__version__}, Python {platform.python_version()}")
    cases = []
    for name, multi_label, logits, targets in make_cases():
        case = make_case(name, multi_label, logits, targets)
        cases.append(case)
        print(f"  {name}: {len(case['logits'])}x{case['num_labels']}, accuracy {case['accuracy']!r}, f1 weighted "
              f"{case['f1_weighted']!r} micro {case['f1_micro']!r} macro {case['f1_macro']!r} over "
              f"{case['labels_averaged']} labels")
    args.out.write_text(dump(cases))
    print(f"wrote {len(cases)} cases to {args.out}")


if __name__ == "__main__":
    main()
