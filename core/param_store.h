// Flat parameter layout: every named tensor of a model lives at an offset inside one contiguous buffer,
// so parameters, gradients and optimizer moments are each a single allocation with the same layout, and
// the optimizer step (and later the gradient allreduce) is one call over the whole buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bertrain {

struct ParamEntry {
  std::string name;            // Hugging Face name, e.g. "bert.encoder.layer.0.attention.self.query.weight"
  std::vector<int64_t> shape;  // as Hugging Face stores it ([out, in] for linear weights)
  std::size_t offset = 0;      // elements from the buffer start
  std::size_t numel = 0;
};

std::string shape_string(const std::vector<int64_t>& shape);

class ParamLayout {
 public:
  // Offsets are rounded up to kAlignment elements (64 bytes of float) for vector loads.
  static constexpr std::size_t kAlignment = 16;

  void add(const std::string& name, std::vector<int64_t> shape);  // throws on a duplicate name
  // Adds a tensor right after the previous one, without alignment padding, so that tensors read as one
  // (a layer's query, key and value weights: one GEMM with N = 3H) are contiguous. Throws on the first tensor.
  void add_contiguous(const std::string& name, std::vector<int64_t> shape);
  // A fingerprint of the names, shapes and offsets: buffers saved with one layout (optimizer moments) are only
  // read back into the same layout.
  std::string fingerprint() const;
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const ParamEntry& at(const std::string& name) const;  // throws Error naming the missing tensor
  const std::vector<ParamEntry>& entries() const { return entries_; }
  std::size_t total() const { return total_; }  // buffer size in elements, padding included
  std::size_t parameter_count() const;          // elements of all tensors, padding excluded

 private:
  void append(const std::string& name, std::vector<int64_t> shape, bool aligned);

  std::vector<ParamEntry> entries_;
  std::map<std::string, std::size_t> index_;
  std::size_t total_ = 0;
};

}  // namespace bertrain
