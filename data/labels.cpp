// The label set (see labels.h).
#include "data/labels.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace bertrain {

namespace {

// The names for a message: every one of a handful, the first 20 of many (a 10,000-label model's list was one line of
// 120 kB).
std::string join(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 20;
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kShown) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

// An integer as Python's str(int) writes one ("0", "12", "-3"; not "012", "+1", "1.0"), of at most 18 digits.
bool is_integer_text(const std::string& s) {
  const std::size_t digits = s.size() - (!s.empty() && s[0] == '-' ? 1 : 0);
  if (digits == 0 || digits > 18) return false;
  const std::size_t first = s.size() - digits;
  if (s[first] == '0' && (digits > 1 || first > 0)) return false;  // a leading zero, or "-0"
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(first), s.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

LabelSet LabelSet::from_tags(const std::vector<std::string>& tags) {
  // std::string compares as unsigned bytes, which for UTF-8 is code-point order: Python's sorted().
  std::vector<std::string> names = tags;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  // Class ids of integer labels are the labels' order as numbers (class 10 after class 2), as Python sorts ints (a
  // dataset's integer column, Hugging Face's run_glue): a model's logit k is then label k's where labels are 0..n-1.
  if (std::all_of(names.begin(), names.end(), is_integer_text)) {
    std::sort(names.begin(), names.end(),
              [](const std::string& a, const std::string& b) { return std::stoll(a) < std::stoll(b); });
  }
  return LabelSet(std::move(names));
}

LabelSet::LabelSet(std::vector<std::string> names) : names_(std::move(names)) {
  index_.reserve(names_.size());
  for (std::size_t i = 0; i < names_.size(); ++i) {
    // A repeated name (e.g. a hand-edited config.json) would make label -> index ambiguous.
    const auto [at, added] = index_.emplace(names_[i], static_cast<int>(i));
    BERTRAIN_CHECK(added, "label '" << names_[i] << "' appears twice (indices " << at->second << " and " << i
                                    << ") in the label set: " << join(names_));
  }
}

int LabelSet::find(const std::string& tag) const {
  const auto at = index_.find(tag);
  return at == index_.end() ? -1 : at->second;
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
