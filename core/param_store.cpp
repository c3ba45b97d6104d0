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

void ParamLayout::add(const std::string& name, std::vector<int64_t> shape) { append(name, std::move(shape), true); }

void ParamLayout::add_contiguous(const std::string& name, std::vector<int64_t> shape) {
  BERTRAIN_CHECK(!entries_.empty(), "parameter '" << name << "' cannot follow contiguously: it is the first");
  append(name, std::move(shape), false);
}

void ParamLayout::append(const std::string& name, std::vector<int64_t> shape, bool aligned) {
  BERTRAIN_CHECK(!contains(name), "parameter '" << name << "' declared twice");
  std::size_t numel = 1;
  for (int64_t d : shape) {
    BERTRAIN_CHECK(d > 0, "parameter '" << name << "' has a non-positive dimension in " << shape_string(shape));
    numel *= static_cast<std::size_t>(d);
  }
  ParamEntry entry;
  entry.name = name;
  entry.shape = std::move(shape);
  entry.offset = aligned ? (total_ + kAlignment - 1) / kAlignment * kAlignment : total_;
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

std::string ParamLayout::fingerprint() const {
  // FNV-1a over "name shape offset;" of every entry: stable across builds and platforms.
  uint64_t hash = 1469598103934665603ull;
  for (const auto& e : entries_) {
    const std::string item = e.name + ' ' + shape_string(e.shape) + ' ' + std::to_string(e.offset) + ';';
    for (const unsigned char ch : item) hash = (hash ^ ch) * 1099511628211ull;
  }
  std::ostringstream os;
  os << std::hex << hash;
  return os.str();
}

std::size_t ParamLayout::parameter_count() const {
  std::size_t count = 0;
  for (const auto& e : entries_) count += e.numel;
  return count;
}

}  // namespace bertrain
