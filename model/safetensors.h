// safetensors reader (memory-mapped, validated as the reference implementation validates) and writer.
// Format: u64 little-endian header length N, N bytes of UTF-8 JSON header, then the data buffer.
// Header: {"__metadata__": {str: str}, "<tensor>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}}
// with offsets relative to the data buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bertrain {

enum class DType { BOOL, U8, I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64 };

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
bool dtype_is_float(DType dtype);
// out[0, n) (=) the n little-endian elements at `data` (any alignment) of a float dtype (F16, BF16, F32,
// F64) as float32. Shared by every checkpoint reader; dtype must satisfy dtype_is_float.
void decode_floats(DType dtype, const uint8_t* data, std::size_t n, float* out);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data buffer, [begin, end)
  uint64_t end = 0;
  int64_t numel() const;
};

// Read-only view of one .safetensors file. The file stays mapped for the object's lifetime.
// Every error names the file, the tensor (when there is one) and what was expected versus found.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // maps and validates; throws bertrain::Error
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by name
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws when absent

  // Floating tensors (F16, BF16, F32, F64) converted to float32.
  std::vector<float> read_float(const std::string& name) const;
  // Same, into caller memory; `count` must equal the tensor's element count.
  void read_float_into(const std::string& name, float* out, std::size_t count) const;
  // Integer and BOOL tensors converted to int64.
  std::vector<int64_t> read_int(const std::string& name) const;
  // The tensor's raw little-endian bytes inside the mapping.
  const uint8_t* raw(const std::string& name) const;

 private:
  void release() noexcept;

  std::string path_;
  const uint8_t* map_ = nullptr;  // whole file
  std::size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;  // start of the data buffer inside map_
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Collects tensors and writes one file atomically (temporary file, fsync, rename).
// Tensor data is referenced, not copied: it must stay alive until write() returns.
class SafetensorsWriter {
 public:
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data);
  void add_f32(const std::string& name, std::vector<int64_t> shape, const float* data) {
    add(name, DType::F32, std::move(shape), data);
  }
  void add_i64(const std::string& name, std::vector<int64_t> shape, const int64_t* data) {
    add(name, DType::I64, std::move(shape), data);
  }
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const void* data;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace bertrain
