// libFuzzer target: bytes -> SafetensorsFile (which maps a path, so the bytes go through a scratch
// file), then every tensor read the way the loaders read it. bertrain::Error is the documented
// rejection; anything else (crash, sanitizer report, leak, other exception, hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "model/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string& path = bertrain_fuzz::write_scratch("safetensors", data, size);
  try {
    bertrain::SafetensorsFile file(path);
    volatile uint64_t sink = file.metadata().size();
    for (const bertrain::TensorInfo& t : file.tensors()) {
      const bertrain::TensorInfo& again = file.info(t.name);
      const uint8_t* raw = file.raw(t.name);
      if (again.end > again.begin) sink = sink + raw[0] + raw[again.end - again.begin - 1];
      if (bertrain::dtype_is_float(t.dtype)) {
        std::vector<float> values = file.read_float(t.name);
        if (!values.empty()) sink = sink + static_cast<uint64_t>(values.size());
        std::vector<float> into(static_cast<std::size_t>(t.numel()));
        file.read_float_into(t.name, into.data(), into.size());
      } else {
        std::vector<int64_t> values = file.read_int(t.name);
        for (int64_t v : values) sink = sink + static_cast<uint64_t>(v);
      }
    }
    (void)sink;
  } catch (const bertrain::Error&) {
    // Rejected cleanly.
  }
  return 0;
}
