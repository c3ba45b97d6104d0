#include "model/hf_names.h"

namespace bertrain {

namespace {
bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::optional<std::string> canonical_param_name(const std::string& checkpoint_name) {
  std::string name = checkpoint_name;
  if (starts_with(name, "cls.")) return std::nullopt;
  if (ends_with(name, "embeddings.position_ids")) return std::nullopt;
  if (!starts_with(name, "bert.") && !starts_with(name, "classifier.")) name = "bert." + name;
  if (ends_with(name, ".LayerNorm.gamma")) name.replace(name.size() - 5, 5, "weight");
  if (ends_with(name, ".LayerNorm.beta")) name.replace(name.size() - 4, 4, "bias");
  return name;
}

}  // namespace bertrain
