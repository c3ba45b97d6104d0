// libFuzzer target: bytes -> TorchCheckpoint (zip or legacy torch.save, restricted unpickler; it maps a
// path, so the bytes go through a scratch file), then every floating tensor read as the loaders read it.
// bertrain::Error is the documented rejection; anything else (crash, sanitizer report, leak, other
// exception, hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "model/torch_checkpoint.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string& path = bertrain_fuzz::write_scratch("torch_checkpoint", data, size);
  try {
    const bertrain::TorchCheckpoint file(path);
    volatile uint64_t sink = file.tensors().size();
    for (const bertrain::TorchTensorInfo& t : file.tensors()) {
      if (t.dtype == bertrain::DType::I64) continue;  // read_float rejects it; the loaders never read it
      const std::vector<float> values = file.read_float(t.name);
      sink = sink + values.size() + (file.contains(t.name) ? 1 : 0);
    }
    (void)sink;
  } catch (const bertrain::Error&) {
    // Rejected cleanly.
  }
  return 0;
}
