// Reader of torch.save'd state dicts (pytorch_model.bin), without Python and without executing anything.
// Two container formats, told apart by their first bytes (never by the file name):
// - zip (PyTorch >= 1.6): "PK\x03\x04"; entries <prefix>/data.pkl (the pickle), <prefix>/data/<key> (one
//   storage each, raw little-endian) and <prefix>/byteorder; entries must be stored (method 0);
// - legacy (before 1.6, SciBERT's format): pickles back to back (magic number 0x1950a86a20f9469cfc6c,
//   protocol version 1001, sys_info, the state dict, the list of storage keys), then per storage key, in
//   that list's order, an int64 element count and the raw bytes.
// The pickle is read by a restricted unpickler: the opcodes torch.save emits for a state dict, and only the
// globals collections.OrderedDict, torch._utils._rebuild_tensor(_v2), torch._utils._rebuild_parameter and
// torch.{Float,Half,BFloat16,Double,Long}Storage. It builds a small value tree, never calls or imports
// anything; anything else is an Error naming the file and what was wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/safetensors.h"  // DType

namespace bertrain {

struct TorchTensorInfo {
  std::string name;            // state dict key, as saved
  DType dtype = DType::F32;    // F32, F16, BF16, F64 or I64
  std::vector<int64_t> shape;
  uint64_t file_offset = 0;    // byte offset of the first element in the file (the view's storage offset applied)
  int64_t numel() const;
};

// True when `path` starts like a torch checkpoint: a zip local header, or the legacy format's magic number (a pickle
// PROTO opcode, for protocols 4 and 5 a FRAME, then the 10-byte LONG1 of torch's MAGIC_NUMBER). A PROTO opcode alone
// is not enough: a safetensors header length such as 0x280 starts with the same two bytes.
bool looks_like_torch_checkpoint(const std::string& path);

// Read-only view of one torch.save'd state dict; the file stays mapped for the object's lifetime.
class TorchCheckpoint {
 public:
  explicit TorchCheckpoint(const std::string& path);  // maps, unpickles and validates; throws bertrain::Error
  ~TorchCheckpoint();
  TorchCheckpoint(const TorchCheckpoint&) = delete;
  TorchCheckpoint& operator=(const TorchCheckpoint&) = delete;

  const std::string& path() const { return path_; }
  bool is_zip() const { return zip_; }
  const std::vector<TorchTensorInfo>& tensors() const { return tensors_; }  // in state-dict order
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const TorchTensorInfo& info(const std::string& name) const;  // throws when absent

  // Floating tensors (F16, BF16, F32, F64) converted to float32; `count` must equal the element count.
  void read_float_into(const std::string& name, float* out, std::size_t count) const;
  std::vector<float> read_float(const std::string& name) const;

 private:
  std::string path_;
  const uint8_t* map_ = nullptr;
  std::size_t size_ = 0;
  bool zip_ = false;
  std::vector<TorchTensorInfo> tensors_;
  std::map<std::string, std::size_t> index_;
};

}  // namespace bertrain
