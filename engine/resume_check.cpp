#include "engine/resume_check.h"

#include <algorithm>
#include <iterator>

namespace bertrain {

namespace {

using nlohmann::json;

bool resumable(const std::string& key) {
  return std::find(std::begin(kResumableSettings), std::end(kResumableSettings), key) != std::end(kResumableSettings);
}


// 1e-4 and 0.0001 are the same setting: numbers compare as doubles.
bool same(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

}  // namespace

std::string setting_flag_name(const std::string& key) {
  if (key == "train_data_hash") return "--train-data content";
  if (key == "val_data_hash") return "--val-data content";
  if (key == "collective_timeout_s") return "--collective-timeout";  // recorded with its unit, the flag has none
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::vector<std::string> resume_differences(const json& recorded, const json& current, const json& defaults) {
  std::vector<std::string> lines;
  for (auto it = current.begin(); it != current.end(); ++it) {
    if (resumable(it.key())) continue;
    const json& then = recorded.contains(it.key()) ? recorded.at(it.key()) : defaults.value(it.key(), json());
    if (same(then, it.value())) continue;
    lines.push_back(setting_flag_name(it.key()) + " " + then.dump() + " (checkpoint) vs " + it.value().dump() +
                    " (now)");
  }
  return lines;
}

json resumable_changes(const json& recorded, const json& current) {
  json changes = json::object();
  for (auto it = current.begin(); it != current.end(); ++it) {
    if (!resumable(it.key()) || !recorded.contains(it.key())) continue;
    const json& then = recorded.at(it.key());
    if (it.key() == "engine" || it.key() == "device_memory_bytes" || same(then, it.value())) continue;
    changes[it.key()] = json::array({then, it.value()});
  }
  return changes;
}

}  // namespace bertrain
