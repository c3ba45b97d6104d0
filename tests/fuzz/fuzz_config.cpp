// libFuzzer target: bytes -> config.json -> BertConfig::load (a path, so through a scratch file; it
// parses, validates and names the file in every error), then written back with to_classifier_json and
// parsed again. bertrain::Error is the documented rejection: load turns every nlohmann exception
// (syntax errors, and number overflows, which nlohmann reports as out_of_range) into one; any other
// exception escaping is a finding.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "model/bert_config.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string& path = bertrain_fuzz::write_scratch("config", data, size);
  try {
    const bertrain::BertConfig c = bertrain::BertConfig::load(path);
    volatile int sink = c.head_dim() + c.num_labels();
    (void)sink;
    (void)c.activation();
    // The classifier config written back must parse to the same configuration.
    const nlohmann::json out = c.to_classifier_json();
    const bertrain::BertConfig back = bertrain::BertConfig::from_json(out, "fuzz/written.json");
    if (back.labels != c.labels || back.hidden_size != c.hidden_size || back.vocab_size != c.vocab_size) {
      __builtin_trap();  // a round-trip mismatch is a finding
    }
  } catch (const bertrain::Error&) {
    // Rejected cleanly.
  }
  return 0;
}
