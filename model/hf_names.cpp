#include "model/hf_names.h"

namespace bertrain {

namespace {
bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::optional<std::string> canonical_param_name(const std::string& checkpoint_name, const ModelFamily& family) {
  const std::string base = family.base;
  // The name without the family's prefix, for the ignore list (which holds both "cls." and "pooler." forms).
  const std::string bare = starts_with(checkpoint_name, base) ? checkpoint_name.substr(base.size()) : checkpoint_name;
  for (const std::string& prefix : family.ignored) {
    if (starts_with(bare, prefix)) return std::nullopt;
  }
  std::string name = checkpoint_name;
  // Tensors of the head keep their names; everything else belongs to the encoder, whose prefix a base model omits.
  const std::string head_dense = family.head_dense, head_out = family.head_out;
  const bool head = starts_with(name, head_dense + ".") || starts_with(name, head_out + ".");
  if (!head && !starts_with(name, base)) name = base + name;
  if (ends_with(name, ".LayerNorm.gamma")) name.replace(name.size() - 5, 5, "weight");
  if (ends_with(name, ".LayerNorm.beta")) name.replace(name.size() - 4, 4, "bias");
  return name;
}

}  // namespace bertrain
