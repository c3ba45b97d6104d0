#!/usr/bin/env python3
"""Writes train.jsonl and test.jsonl: a small synthetic multi-label text-classification set in JSON Lines,
the README's example of a dataset that is not Made-With-ML's. Each row is
{"id": ..., "abstract": ..., "topics": [...]}: a made-up paper abstract built from phrases of one to three
topics, labelled with exactly those topics. Standard library only; the output is fixed by the seed.

    python3 examples/papers/make_papers.py   # rewrites examples/papers/{train,test}.jsonl
"""
import json
import os
import random

PHRASES = {
    "vision": ["image segmentation", "object detection in video", "convolutional backbones",
               "pixel-level labels", "camera pose estimation", "vision transformers on photos"],
    "language": ["machine translation", "text summarization", "question answering over documents",
                 "named entity recognition", "large language models", "sentiment of product reviews"],
    "audio": ["speech recognition", "speaker identification", "music generation",
              "noisy audio recordings", "spoken keyword spotting", "acoustic features"],
    "efficiency": ["model quantization", "pruning of weights", "knowledge distillation",
                   "low-latency inference on phones", "memory-efficient training", "sparse kernels on GPUs"],
    "robotics": ["robot grasping", "motion planning", "reinforcement learning for manipulation",
                 "legged locomotion", "sim-to-real transfer", "navigation with lidar"],
}
OPENINGS = ["We study", "This paper revisits", "We propose a method for", "A benchmark for",
            "We present a survey of", "An empirical analysis of"]
JOINS = ["combined with", "and its use for", "applied to", "together with"]


def abstract(rng, topics):
    parts = [rng.choice(PHRASES[t]) for t in topics]
    text = rng.choice(OPENINGS) + " " + parts[0]
    for p in parts[1:]:
        text += " " + rng.choice(JOINS) + " " + p
    return text + ". " + rng.choice(["Results improve on strong baselines.", "Code is released.",
                                      "We report ablations.", "Experiments cover three datasets."])


def rows(rng, n, start):
    names = sorted(PHRASES)
    out = []
    for i in range(n):
        k = rng.choices([1, 2, 3], weights=[5, 4, 1])[0]
        topics = sorted(rng.sample(names, k))
        out.append({"id": "paper-%03d" % (start + i), "abstract": abstract(rng, topics), "topics": topics})
    return out


def main():
    rng = random.Random(2026)
    here = os.path.dirname(os.path.abspath(__file__))
    for name, n, start in [("train.jsonl", 240, 0), ("test.jsonl", 80, 240)]:
        with open(os.path.join(here, name), "w") as f:
            for row in rows(rng, n, start):
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
