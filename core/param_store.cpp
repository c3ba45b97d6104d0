#include "core/param_store.h"

#include <sstream>

#include "core/error.h"

namespace bertrain {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

void ParamLayout::add(const std::string& name, std::vector<int64_t> shape) {
  BERTRAIN_CHECK(!contains(name), "parameter '" << name << "' declared twice");
  std::size_t numel = 1;
  for (int64_t d : shape) {
    BERTRAIN_CHECK(d > 0, "parameter '" << name << "' has a non-positive dimension in " << shape_string(shape));
    numel *= static_cast<std::size_t>(d);
  }
  ParamEntry entry;
  entry.name = name;
  entry.shape = std::move(shape);
  entry.offset = (total_ + kAlignment - 1) / kAlignment * kAlignment;
  entry.numel = numel;
  total_ = entry.offset + numel;
  index_[name] = entries_.size();
  entries_.push_back(std::move(entry));
}

const ParamEntry& ParamLayout::at(const std::string& name) const {
  const auto it = index_.find(name);
  BERTRAIN_CHECK(it != index_.end(), "no parameter named '" << name << "'");
  return entries_[it->second];
}

std::size_t ParamLayout::parameter_count() const {
  std::size_t count = 0;
  for (const auto& e : entries_) count += e.numel;
  return count;
}

}  // namespace bertrain
