#!/usr/bin/env python3
"""Reads a bertrain run from an MLflow file store with the real `mlflow` package (MlflowClient on the file store)
and compares every param and metric with the run directory's results.json, and its logged model with best/; exits
1 on any difference.

    pip install "mlflow<3"
    python tests/reference/check_mlflow_run.py --mlflow-dir STORE --run-dir RUN_DIR [--experiment bertrain]

STORE may be a folder or a file: URI, as bertrain's --mlflow-dir takes it.
Checks: the experiment is found by name; exactly one run has the run directory's run id (trainer_state.json's
mlflow_run_id); its status is FINISHED with an end time; every results.json param is an MLflow param with the
same text; the metrics train_loss, val_loss, lr, samples_per_s, elapsed_s have one value per epoch, step = epoch,
equal to results.json's per-epoch metrics; the artifacts hold results.json and the MLflow Model model/:
mlflow.models.Model.load("runs:/<id>/model") reads its MLmodel (run id, artifact path, a bertrain flavor whose
labels and problem type are results.json's, no python_function flavor claimed), its files (config.json,
model.safetensors, vocab.txt) have best/'s bytes, and the run's mlflow.log-model.history lists it; the tags
mlflow.runName, mlflow.user (= the run's user_id), mlflow.source.name, mlflow.source.type LOCAL and, when present,
mlflow.source.git.commit (40 hex digits).
"""
import argparse
import filecmp
import json
import os
import re
import sys

import mlflow
from mlflow.models import Model
from mlflow.tracking import MlflowClient


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mlflow-dir", required=True)
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("--experiment", default="bertrain")
    args = ap.parse_args()
    store = args.mlflow_dir if args.mlflow_dir.startswith("file:") else "file:" + os.path.abspath(args.mlflow_dir)
    mlflow.set_tracking_uri(store)  # for runs:/ URIs
    client = MlflowClient(tracking_uri=store)
    errors = []
    experiment = client.get_experiment_by_name(args.experiment)
    if experiment is None:
        sys.exit("experiment %r not found" % args.experiment)
    state = json.load(open(os.path.join(args.run_dir, "last", "trainer_state.json")))
    results = json.load(open(os.path.join(args.run_dir, "results.json")))
    run = client.get_run(state["mlflow_run_id"])
    if run.info.experiment_id != experiment.experiment_id:
        errors.append("run in experiment %s, expected %s" % (run.info.experiment_id, experiment.experiment_id))
    if run.info.status != "FINISHED" or not run.info.end_time:
        errors.append("status %s, end_time %s" % (run.info.status, run.info.end_time))
    for key, value in results["params"].items():
        want = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        got = run.data.params.get(key)
        if got is None:
            errors.append("param %s missing" % key)
        elif got != want and not (isinstance(value, (int, float)) and float(got) == float(value)):
            errors.append("param %s = %r, results.json %r" % (key, got, want))
    for key in ("train_loss", "val_loss", "lr", "samples_per_s", "elapsed_s"):
        history = client.get_metric_history(run.info.run_id, key)
        steps = [(m.step, m.value) for m in sorted(history, key=lambda m: (m.step, m.timestamp))]
        want = [(m["epoch"], m[key]) for m in results["metrics"]]
        if steps != want:
            errors.append("metric %s: %s, results.json %s" % (key, steps, want))
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    model_files = {a.path for a in client.list_artifacts(run.info.run_id, "model")}
    want_files = {"model/" + f for f in ("MLmodel", "config.json", "model.safetensors", "vocab.txt")}
    if "results.json" not in artifacts or not want_files <= model_files:
        errors.append("artifacts %s, model/ %s" % (sorted(artifacts), sorted(model_files)))
    errors += check_model(client, run, results, args.run_dir)
    errors += check_tags(run)
    print("run %s (%s) in experiment %s: %d params, %d epochs of 5 metrics, artifacts %s, model/ %s"
          % (run.info.run_id, run.info.run_name, experiment.name, len(run.data.params), len(results["metrics"]),
             sorted(artifacts), sorted(os.path.basename(f) for f in model_files)))
    for e in errors:
        print("MISMATCH:", e)
    print("OK" if not errors else "FAILED")
    sys.exit(1 if errors else 0)


def check_model(client, run, results, run_dir):
    """The MLflow Model as MLflow loads it: MLmodel by runs:/ URI, the files downloaded by MlflowClient."""
    errors = []
    model = Model.load("runs:/%s/model" % run.info.run_id)
    flavor = model.flavors.get("bertrain", {})
    print("MLmodel: run_id %s, artifact_path %s, model_uuid %s, utc_time_created %s, flavors %s"
          % (model.run_id, model.artifact_path, model.model_uuid, model.utc_time_created, json.dumps(model.flavors)))
    if model.run_id != run.info.run_id or model.artifact_path != "model" or not model.model_uuid:
        errors.append("MLmodel run_id %s, artifact_path %s, model_uuid %s" % (model.run_id, model.artifact_path,
                                                                          model.model_uuid))
    if flavor.get("labels") != results["labels"] or flavor.get("problem_type") != results["problem_type"]:
        errors.append("bertrain flavor %s; results.json labels %s, problem_type %s"
                      % (flavor, results["labels"], results["problem_type"]))
    if flavor.get("transformers_class") != "BertForSequenceClassification" or "python_function" in model.flavors:
        errors.append("flavors %s" % model.flavors)
    local = client.download_artifacts(run.info.run_id, "model")
    best = os.path.join(run_dir, "best")
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        if not filecmp.cmp(os.path.join(local, name), os.path.join(best, name), shallow=False):
            errors.append("model/%s differs from best/%s" % (name, name))
    linked = os.path.samefile(os.path.join(local, "model.safetensors"), os.path.join(best, "model.safetensors"))
    print("model/ files: best/'s bytes, %s" % ("hard links to best/'s" if linked else "copies"))
    history = json.loads(run.data.tags.get("mlflow.log-model.history", "[]"))
    if not history or history[-1].get("model_uuid") != model.model_uuid:
        errors.append("mlflow.log-model.history %s, MLmodel's model_uuid %s" % (history, model.model_uuid))
    return errors


def check_tags(run):
    tags = run.data.tags
    errors = []
    print("tags: " + ", ".join("%s=%s" % (k, tags[k]) for k in sorted(tags) if k != "mlflow.log-model.history"))
    if tags.get("mlflow.runName") != run.info.run_name:
        errors.append("mlflow.runName %r, run name %r" % (tags.get("mlflow.runName"), run.info.run_name))
    if not tags.get("mlflow.user") or tags.get("mlflow.user") != run.info.user_id:
        errors.append("mlflow.user %r, user_id %r" % (tags.get("mlflow.user"), run.info.user_id))
    if not tags.get("mlflow.source.name") or tags.get("mlflow.source.type") != "LOCAL":
        errors.append("mlflow.source.name %r, type %r" % (tags.get("mlflow.source.name"),
                                                         tags.get("mlflow.source.type")))
    commit = tags.get("mlflow.source.git.commit")
    if commit is not None and not re.fullmatch("[0-9a-f]{40}", commit):
        errors.append("mlflow.source.git.commit %r" % commit)
    return errors


if __name__ == "__main__":
    main()
