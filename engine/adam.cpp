#include "engine/adam.h"

#include <regex>
#include <string>

#include "core/ascii.h"

namespace bertrain {

namespace {

// Trainer.get_decay_parameter_names's name patterns (transformers 5.23, trainer.py), searched in the lower-cased
// name. Its other test, the module being an nn.LayerNorm, adds nothing for these families: every LayerNorm's name
// matches a pattern.
bool trainer_decays(const std::string& name) {
  static const std::regex no_decay(R"(bias|layernorm|rmsnorm|(?:^|\.)norm(?:$|\.)|_norm(?:$|\.))");
  return !std::regex_search(ascii_lower(name), no_decay);
}

}  // namespace

std::vector<uint32_t> trainer_decay_mask(const ParamLayout& layout) {
  std::vector<uint32_t> mask((layout.total() + 31) / 32, 0u);
  for (const ParamEntry& e : layout.entries()) {
    if (!trainer_decays(e.name)) continue;
    for (std::size_t i = e.offset; i < e.offset + e.numel; ++i) mask[i / 32] |= 1u << (i % 32);
  }
  return mask;
}

}  // namespace bertrain
