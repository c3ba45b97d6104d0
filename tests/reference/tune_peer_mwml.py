"""Made-With-ML's own hyper-parameter search (madewithml/tune.py: Ray Tune) on a local BERT directory.

The peer that `bertrain tune` is benchmarked against (issue 28). It calls Made-With-ML's `tune_models`, imported
from a Made-With-ML source tree (by default extracted with `git archive` from --mwml-git into OUT/mwml-src), so
the whole study runs as Made-With-ML wrote it: its Ray Data loading, stratified split and preprocessing, a
`TorchTrainer` per trial running its `train_loop_per_worker` (FinetunedLLM, BCEWithLogitsLoss, Adam,
ReduceLROnPlateau), `HyperOptSearch(points_to_evaluate=--initial-params)` behind `ConcurrencyLimiter(
max_concurrent=2)`, `AsyncHyperBandScheduler(max_t=num_epochs, grace_period=1)` on val_loss (min), the same search
space, `CheckpointConfig(num_to_keep=1)`, `MLflowLoggerCallback(save_artifact=True)`, then `get_best_result`,
`utils.get_run_id` and its results file. Test-only tooling: never needed to build, test or run bertrain.

What is changed, and why (all from outside Made-With-ML's files: an import hook, installed in this process and,
as Ray's `worker_process_setup_hook`, in every Ray worker, wraps the loading of four madewithml modules; nothing
heavy is imported early, each module is patched right after its own code has run):

1. madewithml/config.py puts EFS_DIR at /efs/shared_storage/madewithml/$GITHUB_USERNAME and creates it (as root
   here, that would create /efs on this machine). While config.py runs, a `mkdir` under /efs raises
   PermissionError, so Made-With-ML's own fallback ("local catch for EFS OS/permissions issues") takes its
   ROOT_DIR/efs; right after, `EFS_DIR`, `MODEL_REGISTRY` and `MLFLOW_TRACKING_URI` are set to OUT/efs,
   OUT/efs/mlflow and file://OUT/efs/mlflow (and `mlflow.set_tracking_uri` again), so Ray Tune's storage_path,
   the MLflow file store that MLflowLoggerCallback writes and `get_run_id` reads are all under --out. Its logs go,
   as in Made-With-ML, to the source tree's logs/ (OUT/mwml-src/logs with the default tree).
2. Made-With-ML loads "allenai/scibert_scivocab_uncased" from the Hugging Face hub: the tokenizer in
   `data.tokenize` (each preprocessing batch) and the encoder in `train.train_loop_per_worker` (each trial), and
   `models.FinetunedLLM.load` (unused here). There is no network here: those loads of that name are redirected
   to --model DIR (config.json, model.safetensors, vocab.txt), the same redirect as serve_peer_mwml.py.
   HF_HUB_OFFLINE=1 and TRANSFORMERS_OFFLINE=1 are set so that nothing tries the hub.
3. Its `__main__` (`ray.init(runtime_env={"env_vars": {"GITHUB_USERNAME": ...}})` then the Typer CLI) is this
   script's: the same `ray.init()` (with num_cpus as in 4.), whose runtime_env also carries PYTHONPATH (the
   source tree), the patch hook and the variables it reads; GITHUB_USERNAME is set to --github-username (only
   used in the EFS path that 1. replaces). `tune_models` is then called with the arguments its README's tune
   command gives, except the resources (below).

4. Ray's logical CPUs: a trial reserves 1 CPU for Ray Train's TorchTrainer actor (Ray's default trainer_resources
   with num_workers >= 1) plus cpu_per_worker per worker, 2 in all. Made-With-ML's plain `ray.init()` gives Ray
   the 2 CPUs of this machine, so its ConcurrencyLimiter(max_concurrent=2) would only ever run one trial, with one
   core idle under the idle TorchTrainer actor. Ray is started with num_cpus = max(nproc, 2 x (1 + num_workers x
   cpu_per_worker)) = 4 here (--ray-cpus to change): two trials run at once, and their training workers (Ray sets
   OMP_NUM_THREADS=1 in each, its 1 CPU) use the two cores.

Resources: Made-With-ML's README runs the tune command on its cluster (g5.4xlarge) with --num-runs 2
--num-workers 1 --cpu-per-worker 3 --gpu-per-worker 1 --num-epochs 10 --batch-size 256. This machine has 2 cores
and no GPU, so this script passes `tune_models`' own defaults: --num-workers 1 --cpu-per-worker 1
--gpu-per-worker 0 (its test, tests/code/test_tune.py, also uses cpu_per_worker=1, gpu_per_worker=0).
--num-runs defaults to 10 here (README: 2).

Prints Made-With-ML's own log (its results dict) and Ray's progress, then, last, one JSON line:
`wall_s` (the `tune_models` call, from its start to its return: data loading and preprocessing, every trial,
get_best_result and the MLflow look-up), `best` (the trial `get_best_result(metric="val_loss", mode="min")`
picks, Made-With-ML's pick, with ray's default scope "last": `val_loss_last_epoch` is the value it compared,
`val_loss_min` that trial's lowest val_loss over its epochs), `best_any_epoch` (the lowest val_loss of any trial
at any epoch, get_best_result(scope="all")), the per-trial params, epochs run and val_loss per epoch, how many
ASHA stopped before num_epochs, and the versions of ray, hyperopt, torch, transformers and mlflow.

Set up (outside the repository; Python 3.10 and Made-With-ML's pins, see tests/reference/README.md, "The tune
benchmark"), then from the repository root:

    /work/venv-mwml-tune/bin/python tests/reference/tune_peer_mwml.py --model models/all-MiniLM-L6-v2 \
        --out /tmp/mwml-tune --num-runs 10 --num-epochs 10
"""

import argparse
import importlib.abc
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HUB_ID = "allenai/scibert_scivocab_uncased"
ENV_MODEL = "MWML_PEER_MODEL_DIR"
ENV_EFS = "MWML_PEER_EFS_DIR"
DEFAULT_MIRROR = "/work/.mirror/GokuMohandas+Made-With-ML/repo"
DEFAULT_INITIAL_PARAMS = '[{"train_loop_config": {"dropout_p": 0.5, "lr": 1e-4, "lr_factor": 0.8, "lr_patience": 3}}]'


def _install_patches():
    """Changes 1 and 2 of the docstring. Installs an import hook that patches madewithml.config, .data, .train and
    .models as each is loaded; runs in the driver and, as Ray's worker_process_setup_hook, in every Ray worker
    (Ray Data's preprocessing tasks and each trial's training worker import madewithml on their own)."""
    import pathlib
    import sys as _sys

    model_dir = os.environ.get(ENV_MODEL)
    efs_dir = os.environ.get(ENV_EFS)
    if not model_dir or not efs_dir:
        return
    if any(getattr(finder, "_mwml_peer", False) for finder in _sys.meta_path):
        return  # once per process

    class HubRedirect:
        """Stands in for a transformers class: from_pretrained(HUB_ID) loads --model DIR instead."""

        def __init__(self, cls):
            self._cls = cls

        def from_pretrained(self, name, *args, **kwargs):
            return self._cls.from_pretrained(model_dir if name == HUB_ID else name, *args, **kwargs)

        def __getattr__(self, attr):
            return getattr(self._cls, attr)

    real_mkdir = pathlib.Path.mkdir

    def mkdir_without_efs(self, *args, **kwargs):
        # Change 1: Made-With-ML's config.py catches OSError here and falls back to ROOT_DIR/efs.
        if str(self) == "/efs" or str(self).startswith("/efs/"):
            raise PermissionError(13, "tune_peer_mwml: /efs is not used on this machine", str(self))
        return real_mkdir(self, *args, **kwargs)

    def before(name):
        if name == "madewithml.config":
            pathlib.Path.mkdir = mkdir_without_efs

    def after(name, module):
        if name == "madewithml.config":
            pathlib.Path.mkdir = real_mkdir
            efs = pathlib.Path(efs_dir)
            registry = pathlib.Path(efs, "mlflow")
            registry.mkdir(parents=True, exist_ok=True)
            module.EFS_DIR = efs
            module.MODEL_REGISTRY = registry
            module.MLFLOW_TRACKING_URI = "file://" + str(registry.absolute())
            module.mlflow.set_tracking_uri(module.MLFLOW_TRACKING_URI)
        elif name == "madewithml.data":
            module.BertTokenizer = HubRedirect(module.BertTokenizer)
        elif name in ("madewithml.train", "madewithml.models"):
            module.BertModel = HubRedirect(module.BertModel)

    class Finder(importlib.abc.MetaPathFinder):
        _mwml_peer = True
        targets = ("madewithml.config", "madewithml.data", "madewithml.train", "madewithml.models")

        def find_spec(self, name, path, target=None):
            if name not in self.targets:
                return None
            for finder in _sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            else:
                return None
            loader_exec = spec.loader.exec_module

            def exec_module(module):
                before(name)
                try:
                    loader_exec(module)
                finally:
                    if name == "madewithml.config":
                        pathlib.Path.mkdir = real_mkdir
                after(name, module)

            spec.loader.exec_module = exec_module  # this spec's own loader instance
            return spec

    _sys.meta_path.insert(0, Finder())


def _versions():
    import hyperopt
    import mlflow
    import ray
    import torch
    import transformers

    return {"ray": ray.__version__, "hyperopt": hyperopt.__version__, "torch": torch.__version__,
            "transformers": transformers.__version__, "mlflow": mlflow.__version__,
            "python": platform.python_version()}


def _trial_rows(results, num_epochs):
    rows = []
    for result in results:
        df = result.metrics_dataframe
        row = {"trial_id": (result.metrics or {}).get("trial_id"),
               "params": (result.config or {}).get("train_loop_config"),
               "epochs": 0, "val_loss": [], "error": repr(result.error) if result.error else None}
        if df is not None and len(df):
            df = df.sort_values("training_iteration")
            row["epochs"] = int(df["training_iteration"].max())
            row["val_loss"] = [float(v) for v in df["val_loss"]]
            row["train_loss"] = [float(v) for v in df["train_loss"]]
            row["time_total_s"] = round(float(df["time_total_s"].iloc[-1]), 2)
        row["stopped_by_asha"] = row["error"] is None and 0 < row["epochs"] < num_epochs
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, type=Path,
                        help="BERT directory (config.json, model.safetensors, vocab.txt) used instead of SciBERT")
    parser.add_argument("--dataset", type=Path,
                        default=Path(__file__).resolve().parents[3] / "shared/data/madewithml/dataset.csv",
                        help="Made-With-ML's dataset.csv (default: ../shared/data/madewithml/dataset.csv from the "
                             "repository root)")
    parser.add_argument("--out", required=True, type=Path,
                        help="output folder: efs/ (Ray Tune storage + MLflow store), tuning_results.json, "
                             "peer_summary.json, mwml-src/ (the extracted source tree)")
    parser.add_argument("--mwml-src", type=Path, help="an existing Made-With-ML source tree (holds madewithml/); "
                                                      "default: extract --mwml-git's HEAD into OUT/mwml-src")
    parser.add_argument("--mwml-git", default=DEFAULT_MIRROR, help="Made-With-ML git directory (bare is fine)")
    parser.add_argument("--num-runs", type=int, default=10, help="tune_models num_runs (trials)")
    parser.add_argument("--num-epochs", type=int, default=10, help="tune_models num_epochs (ASHA max_t)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--num-samples", type=int,
                        help="tune_models num_samples: only the first N shuffled rows (default: all); its from_items "
                             "path makes one Ray block per row: much slower preprocessing than the whole file")
    parser.add_argument("--num-workers", type=int, default=1, help="Ray Train workers per trial (its default 1)")
    parser.add_argument("--cpu-per-worker", type=int, default=1, help="its default 1 (README on its cluster: 3)")
    parser.add_argument("--initial-params", default=DEFAULT_INITIAL_PARAMS,
                        help="HyperOptSearch points_to_evaluate (Made-With-ML's README: %(default)s)")
    parser.add_argument("--experiment-name", default="llm", help="MLflow experiment (Made-With-ML's README: llm)")
    parser.add_argument("--github-username", default=os.environ.get("GITHUB_USERNAME", "bertrain-peer"))
    parser.add_argument("--ray-cpus", type=int,
                        help="ray.init(num_cpus=...): Ray's logical CPUs (default: the machine's CPUs, but at least "
                             "2 x (1 + num_workers x cpu_per_worker), what two concurrent trials reserve)")
    args = parser.parse_args()

    model_dir = args.model.resolve()
    for name in ("config.json", "vocab.txt"):
        if not (model_dir / name).exists():
            sys.exit(f"tune_peer_mwml: {model_dir}/{name} not found")
    dataset = args.dataset.resolve()
    if not dataset.exists():
        sys.exit(f"tune_peer_mwml: {dataset} not found")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.mwml_src:
        mwml_src = args.mwml_src.resolve()
        commit = None
    else:  # Made-With-ML's code as committed, never copied into this repository
        mwml_src = out / "mwml-src"
        commit = subprocess.run(["git", "-C", args.mwml_git, "rev-parse", "HEAD"], check=True, capture_output=True,
                                text=True).stdout.strip()
        if not (mwml_src / "madewithml" / "tune.py").exists():
            mwml_src.mkdir(parents=True, exist_ok=True)
            archive = subprocess.run(["git", "-C", args.mwml_git, "archive", "HEAD"], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(mwml_src)], input=archive, check=True)
    if not (mwml_src / "madewithml" / "tune.py").exists():
        sys.exit(f"tune_peer_mwml: {mwml_src}/madewithml/tune.py not found")
    efs_dir = out / "efs"

    env_vars = {
        ENV_MODEL: str(model_dir),
        ENV_EFS: str(efs_dir),
        "GITHUB_USERNAME": args.github_username,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(p for p in [str(mwml_src), os.environ.get("PYTHONPATH", "")] if p),
    }
    os.environ.update(env_vars)
    sys.path.insert(0, str(mwml_src))
    _install_patches()

    import ray

    if ray.is_initialized():
        ray.shutdown()
    start = time.perf_counter()
    # Change 4 of the docstring: each trial reserves 1 CPU for Ray Train's TorchTrainer actor (Ray's default
    # trainer_resources with num_workers >= 1, outside Colab) plus cpu_per_worker per worker: 2 with the defaults.
    # Made-With-ML's plain ray.init() gives 2 logical CPUs on this machine, so only one trial would ever run and one
    # core would sit idle under the idle TorchTrainer actor. Ray is given enough logical CPUs for the
    # ConcurrencyLimiter's two trials; the two training workers (OMP_NUM_THREADS=1 each) then use the two cores.
    ray_cpus = args.ray_cpus or max(os.cpu_count() or 1, 2 * (1 + args.num_workers * args.cpu_per_worker))
    ray.init(num_cpus=ray_cpus, runtime_env={"env_vars": env_vars, "worker_process_setup_hook": _install_patches})
    ray_init_s = time.perf_counter() - start

    from madewithml import tune as mwml_tune  # Made-With-ML's module, patched only as the docstring says

    results_fp = out / "tuning_results.json"
    start = time.perf_counter()
    results = mwml_tune.tune_models(
        experiment_name=args.experiment_name,
        dataset_loc=str(dataset),
        initial_params=args.initial_params,
        num_workers=args.num_workers,
        cpu_per_worker=args.cpu_per_worker,
        gpu_per_worker=0,
        num_runs=args.num_runs,
        num_samples=args.num_samples,
        num_epochs=args.num_epochs,
        batch_size=args.batch_size,
        results_fp=str(results_fp),
    )
    wall_s = time.perf_counter() - start

    trials = _trial_rows(results, args.num_epochs)
    best = results.get_best_result(metric="val_loss", mode="min")  # scope "last", as tune_models calls it
    best_df = best.metrics_dataframe
    best_any = results.get_best_result(metric="val_loss", mode="min", scope="all")
    best_any_df = best_any.metrics_dataframe
    best_any_row = best_any_df.loc[best_any_df["val_loss"].idxmin()]
    mwml_results = json.loads(results_fp.read_text())
    summary = {
        "peer": "made-with-ml tune_models",
        "wall_s": round(wall_s, 2),
        "ray_init_s": round(ray_init_s, 2),
        "best": {
            "trial_id": best.metrics["trial_id"],
            "params": best.config["train_loop_config"],
            "val_loss_last_epoch": float(best.metrics["val_loss"]),
            "val_loss_min": float(best_df["val_loss"].min()),
            "epoch_of_min": int(best_df.loc[best_df["val_loss"].idxmin(), "epoch"]) + 1,
            "epochs": int(best_df["training_iteration"].max()),
            "mlflow_run_id": mwml_results.get("run_id"),
        },
        "best_any_epoch": {
            "trial_id": best_any.metrics["trial_id"],
            "params": best_any.config["train_loop_config"],
            "val_loss": float(best_any_row["val_loss"]),
            "epoch": int(best_any_row["epoch"]) + 1,
        },
        "trial_count": len(trials),
        "trials_errored": sum(1 for t in trials if t["error"]),
        "epochs_per_trial": [t["epochs"] for t in trials],
        "stopped_by_asha": sum(1 for t in trials if t["stopped_by_asha"]),
        "epochs_total": sum(t["epochs"] for t in trials),
        "trials": trials,
        "study": {"num_runs": args.num_runs, "num_epochs": args.num_epochs, "batch_size": args.batch_size,
                  "num_samples": args.num_samples, "num_workers": args.num_workers,
                  "cpu_per_worker": args.cpu_per_worker, "gpu_per_worker": 0, "max_concurrent": 2,
                  "ray_cpus": ray_cpus, "machine_cpus": os.cpu_count(),
                  "initial_params": json.loads(args.initial_params),
                  "experiment_name": args.experiment_name},
        "model": str(model_dir),
        "dataset": str(dataset),
        "mwml_src": str(mwml_src),
        "mwml_commit": commit,
        "out": str(out),
        "versions": _versions(),
    }
    ray.shutdown()
    (out / "peer_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
