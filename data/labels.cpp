// The label set (see labels.h).
#include "data/labels.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace bertrain {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

}  // namespace

LabelSet LabelSet::from_tags(const std::vector<std::string>& tags) {
  // std::string compares as unsigned bytes, which for UTF-8 is code-point order: Python's sorted().
  std::vector<std::string> names = tags;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return LabelSet(std::move(names));
}

LabelSet::LabelSet(std::vector<std::string> names) : names_(std::move(names)) {
  // A repeated name (e.g. a hand-edited config.json) would make label -> index ambiguous.
  for (std::size_t i = 0; i < names_.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      BERTRAIN_CHECK(names_[i] != names_[j], "label '" << names_[i] << "' appears twice (indices " << j << " and " << i
                                                       << ") in the label set: " << join(names_));
    }
  }
}

int LabelSet::find(const std::string& tag) const {
  // A handful of classes: a linear scan beats a hash map and keeps the class cheap to copy.
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == tag) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int> LabelSet::require_all(const std::vector<std::string>& tags, const std::string& where) const {
  std::vector<int> indices;
  for (const std::string& tag : tags) indices.push_back(require(tag, where));
  std::sort(indices.begin(), indices.end());
  return indices;
}

int LabelSet::require(const std::string& tag, const std::string& where) const {
  const int index = find(tag);
  BERTRAIN_CHECK(index >= 0, "unknown tag '" << tag << "' in " << where << " (the model knows: " << join(names_) << ")");
  return index;
}

}  // namespace bertrain
