#!/usr/bin/env python3
"""Print scikit-learn reference numbers as C++ for tests/engine/test_metrics.cpp.

Made-With-ML's evaluate() calls precision_recall_fscore_support three ways; this script does the
same on fixed pseudo-random labels (numpy seeds below) and prints, per case:
  - average="weighted" with labels=None (overall metrics),
  - average=None over labels=range(C) (per-class metrics; equal to labels=None whenever every class
    occurs, which the script checks where it applies), and the class order of Made-With-ML's
    sorted(..., key=f1, reverse=True),
  - average="micro" on y_true[mask], y_pred[mask] (slice metrics),
  - confusion_matrix(y_true, y_pred, labels=range(C)) ([true][pred]).
zero_division is left at sklearn's default "warn" (ill-defined values become 0.0; the warnings
are silenced here). The output is pasted into the test between the BEGIN/END GENERATED markers:

    pip install scikit-learn   # any recent version; 1.9.1 produced the committed numbers
    python tests/reference/make_metric_cases.py

It also prints Made-With-ML's two slicing functions (copied below from its evaluate.py) evaluated by
Python on tricky strings, as {tag, text, nlp_llm, short_text, len(text.split())}.

Floats are printed with repr() (shortest round-trip form).
"""

import platform
import unicodedata
import warnings

import numpy as np
import sklearn
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import confusion_matrix, precision_recall_fscore_support


def noisy_predictions(rng, y_true, num_classes, error_rate):
    y_pred = y_true.copy()
    flip = rng.random(len(y_true)) < error_rate
    y_pred[flip] = rng.integers(0, num_classes, flip.sum())
    return y_pred


def make_cases():
    cases = []

    # Holdout-like: 4 classes with the holdout's class frequencies, ~20% errors.
    rng = np.random.default_rng(1234)
    p = np.array([71, 16, 78, 26]) / 191
    y = rng.choice(4, size=60, p=p)
    cases.append(("holdout_like", 4, y, noisy_predictions(rng, y, 4, 0.25), rng.random(60) < 0.3))

    # Class 3 occurs in y_true but is never predicted: its precision is 0/0 -> 0.
    rng = np.random.default_rng(7)
    y = rng.integers(0, 5, size=37)
    yp = noisy_predictions(rng, y, 5, 0.3)
    yp[yp == 3] = (y[yp == 3] + 1) % 3
    cases.append(("never_predicted", 5, y, yp, rng.random(37) < 0.5))

    # Class 1 is predicted but absent from y_true: recall 0/0 -> 0, support 0, no weight.
    rng = np.random.default_rng(11)
    y = rng.choice([0, 2, 3], size=29)
    yp = noisy_predictions(rng, y, 4, 0.35)
    yp[:3] = 1
    cases.append(("predicted_not_true", 4, y, yp, rng.random(29) < 0.4))

    # Class 4 occurs nowhere: per class all zeros; weighted is unaffected.
    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, size=25)
    cases.append(("absent_class", 5, y, noisy_predictions(rng, y, 4, 0.3), rng.random(25) < 0.5))

    # Only two of four classes present (sklearn sees a "binary" problem; weighted is unchanged).
    rng = np.random.default_rng(5)
    y = rng.choice([1, 3], size=20)
    yp = np.where(rng.random(20) < 0.3, 4 - y, y)
    cases.append(("two_present", 4, y, yp, rng.random(20) < 0.5))

    # Holdout-sized (191 samples), ~10% errors.
    rng = np.random.default_rng(2024)
    y = rng.choice(4, size=191, p=p)
    cases.append(("holdout_size", 4, y, noisy_predictions(rng, y, 4, 0.12), rng.random(191) < 0.2))

    # Every prediction wrong on the mask, and per-class F1 ties (all zero): sort keeps class order.
    y = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    yp = np.array([1, 2, 3, 0, 1, 2, 3, 0])
    cases.append(("all_wrong", 4, y, yp, np.array([1, 0, 1, 0, 1, 0, 0, 0], dtype=bool)))

    # Per-class F1 ties, not adjacent in the sorted order: F1 = [2/3, 2/3, 1, 1] sorts as
    # 2, 3, 0, 1 (Python's sort is stable also with reverse=True).
    y = np.array([0, 0, 1, 2, 2, 3])
    yp = np.array([0, 1, 1, 2, 2, 3])
    cases.append(("f1_ties", 4, y, yp, np.array([0, 0, 0, 0, 0, 1], dtype=bool)))

    # 30 classes, 300 samples: numpy's pairwise sum over the classes present (8 accumulators past 8 values), where a
    # plain sum (or one with fused multiply-adds, or one over classes in neither y_true nor y_pred) differs in the
    # last bit. Classes 25-29 are never true, 28 and 29 never predicted either.
    rng = np.random.default_rng(30)
    y = rng.integers(0, 25, size=300)
    cases.append(("thirty_classes", 30, y, noisy_predictions(rng, y, 28, 0.4), rng.random(300) < 0.3))
    return cases


# Made-With-ML madewithml/evaluate.py, on a row x with x.tag and x.text = title + " " + description.
def nlp_llm(x):
    nlp_project = "natural-language-processing" in x.tag
    llm_terms = ["transformer", "llm", "bert"]
    llm_project = any(s.lower() in x.text.lower() for s in llm_terms)
    return nlp_project and llm_project


def short_text(x):
    return len(x.text.split()) < 8  # less than 8 words


class Row:
    def __init__(self, tag, text):
        self.tag, self.text = tag, text


NLP = "natural-language-processing"
SLICE_CASES = [
    (NLP, "BERT for sentence classification"),
    (NLP, "Fine-tuning bErT"),
    (NLP, "HuggingFace Transformers library"),
    (NLP, "TRANSFORMER"),
    (NLP, "transformed data"),  # no "transformer"
    (NLP, "LLMs in production"),
    (NLP, "AlBERTa and RoBERTa"),  # substring match
    (NLP, "B E R T and L L M"),
    (NLP, "What's new? LLM!"),
    (NLP, "\u212a\u0130llm"),  # Kelvin sign, dotted capital I, then llm
    (NLP, "\u0130\u212a"),  # lowercases to "i\u0307k": no term
    (NLP, "be\u0280t"),  # U+0280 (small capital R) is not 'r'
    (NLP, "\uff42\uff45\uff52\uff54 fullwidth"),  # fullwidth letters stay non-ASCII
    (NLP, "gpt and diffusion"),
    ("computer-vision", "Vision Transformer (ViT)"),
    ("natural-language-processing-extra", "bert"),  # a substring test on the tag
    ("mlops", "LLM ops"),
    (NLP, ""),
    ("other", "one two three four five six seven"),
    ("other", "one two three four five six seven eight"),
    ("other", "  one   two three four five six seven  "),
    ("other", "one\ttwo\nthree\rfour\x0bfive\x0csix\x1cseven\x1deight"),
    ("other", "one\x1etwo\x1fthree\x85four\xa0five\u1680six\u2000seven\u200aeight"),
    ("other", "a\u2028b\u2029c\u202fd\u205fe\u3000f\u2001g\u2007h"),
    ("other", "a\u200bb\u180ec\ufeffd e f g h"),  # zero-width space, U+180E, BOM: not spaces
    ("other", "a\u2009b\u00a0c d e f g"),
    ("other", " \t\n "),
    ("other", "Diffusion to Vector Reference implementation of Diffusion2Vec (Complenet 2018) built on"
              " Gensim and NetworkX. "),
    ("other", "基于transformer的 模型 x"),
]


def check_assumptions():
    """The facts engine/metrics.h relies on, checked on this Python's Unicode tables."""
    # Only U+0130 and U+212A lowercase to something containing ASCII, and none of the terms
    # contains 'i' or 'k', so ASCII-only lowercasing finds the same terms as str.lower().
    to_ascii = [c for c in range(0x80, 0x110000) if any(ord(ch) < 0x80 for ch in chr(c).lower())]
    assert to_ascii == [0x130, 0x212A], [hex(c) for c in to_ascii]
    assert not any(ch in term for term in ("transformer", "llm", "bert") for ch in "ik")
    # str.split()'s whitespace: the set is_python_space() hard-codes.
    spaces = [c for c in range(0x110000) if chr(c).isspace()]
    expected = (list(range(0x09, 0x0E)) + list(range(0x1C, 0x21)) + [0x85, 0xA0, 0x1680]
                + list(range(0x2000, 0x200B)) + [0x2028, 0x2029, 0x202F, 0x205F, 0x3000])
    assert spaces == expected, [hex(c) for c in spaces]


def cpp_string(text):
    """A C++ narrow string literal holding text's UTF-8 bytes (non-ASCII and controls as \\x escapes,
    split so that a following hex digit is not swallowed)."""
    out = []
    for b in text.encode("utf-8"):
        if 0x20 <= b < 0x7F and b not in (0x22, 0x5C, 0x3F):
            if out and out[-1].startswith("\\x") and chr(b) in "0123456789abcdefABCDEF":
                out.append('" "')
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02x}")
    return '"' + "".join(out) + '"'


def ints(a, indent=6, per_line=30):
    """A C++ braced list of integers, wrapped every per_line values."""
    values = [str(int(v)) for v in a]
    lines = [", ".join(values[i:i + per_line]) for i in range(0, len(values), per_line)]
    return "{" + (",\n" + " " * indent).join(lines) + "}"


def main():
    check_assumptions()
    warnings.simplefilter("ignore", UndefinedMetricWarning)
    print(f"// Generated by tests/reference/make_metric_cases.py with scikit-learn {sklearn.__version__},"
          f" numpy {np.__version__},")
    print(f"// Python {platform.python_version()} (Unicode {unicodedata.unidata_version}).")
    print("const std::vector<MetricCase> kSklearnCases = {")
    for name, C, y, yp, mask in make_cases():
        labels = list(range(C))
        wp, wr, wf, _ = precision_recall_fscore_support(y, yp, average="weighted")
        # Weighted over unique_labels (sklearn's default) equals weighted over every class.
        alt = precision_recall_fscore_support(y, yp, average="weighted", labels=labels)
        assert np.allclose(alt[:3], (wp, wr, wf), rtol=0, atol=1e-15), name
        pp, pr, pf, ps = precision_recall_fscore_support(y, yp, average=None, labels=labels)
        if len(np.union1d(y, yp)) == C:
            q = precision_recall_fscore_support(y, yp, average=None)
            assert all(np.array_equal(a, b) for a, b in zip(q, (pp, pr, pf, ps))), name
        # Made-With-ML: OrderedDict(sorted(per_class.items(), key=lambda t: t[1]["f1"], reverse=True))
        order = [c for c, _ in sorted(enumerate(pf), key=lambda t: t[1], reverse=True)]
        assert mask.any()
        mp, mr, mf, _ = precision_recall_fscore_support(y[mask], yp[mask], average="micro")
        cm = confusion_matrix(y, yp, labels=labels)
        print(f'    {{"{name}", {C},')
        print(f"     {ints(y)},")
        print(f"     {ints(yp)},")
        print(f"     {ints(mask)},")
        print(f"     {{{float(wp)!r}, {float(wr)!r}, {float(wf)!r}}},")
        print("     {" + ",\n      ".join(f"{{{float(a)!r}, {float(b)!r}, {float(c)!r}, {int(d)}}}"
                                         for a, b, c, d in zip(pp, pr, pf, ps)) + "},")
        print(f"     {ints(order)},")
        print(f"     {{{float(mp)!r}, {float(mr)!r}, {float(mf)!r}, {int(mask.sum())}}},")
        print("     {" + ", ".join(ints(row) for row in cm) + "}},")
    print("};")
    print()
    print("// {tag, raw text, nlp_llm, short_text, len(text.split())} from Made-With-ML's functions.")
    print("const std::vector<SliceCase> kPythonSliceCases = {")
    for tag, text in SLICE_CASES:
        row = Row(tag, text)
        print(f"    {{{cpp_string(tag)}, {cpp_string(text)}, {str(nlp_llm(row)).lower()},"
              f" {str(short_text(row)).lower()}, {len(text.split())}}},")
    print("};")


if __name__ == "__main__":
    main()
