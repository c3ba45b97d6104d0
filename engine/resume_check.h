// Honest resume: a resumed run must train what its checkpoint trained. The settings a checkpoint recorded
// (trainer_state.json's "params", train_args_json's keys) are compared with the resuming command's; any difference
// outside kResumableSettings is refused, so results.json, MLflow and the report never describe a run that did
// not happen. A setting the checkpoint did not record (written by an older bertrain) is compared with the
// default it had then.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bertrain {

// What may change when a run resumes: how long it trains, where and how often it saves and logs, what it runs on,
// and whether it recomputes activations; none of them changes the training's arithmetic (the device may change the
// rounding, not the method; recomputed activations are the kept ones bit for bit).
inline constexpr const char* kResumableSettings[] = {
    "epochs",     "max_steps", "out",        "save_steps", "keep",       "save_total_limit", "save_optimizer",
    "log_steps",  "threads",   "device",     "world_size", "engine",     "device_memory_bytes",
    "collective_timeout_s",    "gpu_collectives",          "mlflow_dir", "experiment",       "run_name",
    "train_data", "val_data",  "gradient_checkpointing"};

// A setting of train_args_json (and results.json's params) as its flag is spelt: lr_factor -> --lr-factor; the data
// files' fingerprints (train_data_hash, val_data_hash) as "--train-data content", "--val-data content".
std::string setting_flag_name(const std::string& key);

// One line per setting that differs, "--lr 0.0001 (checkpoint) vs 5e-05 (now)"; data files are compared by their
// content fingerprints (train_data_hash, val_data_hash), so a moved but unchanged file is no difference.
// `defaults` holds every setting's default, for settings the checkpoint did not record.
std::vector<std::string> resume_differences(const nlohmann::json& recorded, const nlohmann::json& current,
                                            const nlohmann::json& defaults);

// The settings in kResumableSettings that differ: {"epochs": [10, 12], ...} (recorded, current), for results.json.
nlohmann::json resumable_changes(const nlohmann::json& recorded, const nlohmann::json& current);

}  // namespace bertrain
