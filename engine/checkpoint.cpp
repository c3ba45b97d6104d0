#include "engine/checkpoint.h"

#include <string>

#include "core/error.h"
#include "model/safetensors.h"

namespace bertrain {

void save_optimizer_state(const std::string& path, const AdamOptimizer<float>& optimizer,
                          const std::string& layout_fingerprint) {
  const auto n = static_cast<int64_t>(optimizer.first_moment().size());
  SafetensorsWriter writer;
  writer.add_f32("exp_avg", {n}, optimizer.first_moment().data());
  writer.add_f32("exp_avg_sq", {n}, optimizer.second_moment().data());
  writer.set_metadata("step", std::to_string(optimizer.steps_taken()));
  writer.set_metadata("param_layout", layout_fingerprint);
  writer.write(path);
}

void load_optimizer_state(const std::string& path, AdamOptimizer<float>* optimizer,
                          const std::string& layout_fingerprint) {
  const SafetensorsFile file(path);
  const auto layout = file.metadata().find("param_layout");
  BERTRAIN_CHECK(layout != file.metadata().end() && layout->second == layout_fingerprint,
                 path << ": optimizer moments saved for another parameter layout ("
                      << (layout == file.metadata().end() ? std::string("none recorded") : layout->second)
                      << ", this model's is " << layout_fingerprint
                      << "); resume from a checkpoint written by this version of bertrain");
  const std::size_t n = optimizer->first_moment().size();
  for (const char* name : {"exp_avg", "exp_avg_sq"}) {
    BERTRAIN_CHECK(file.contains(name), path << ": missing tensor '" << name << "'");
    BERTRAIN_CHECK(file.info(name).numel() == static_cast<int64_t>(n),
                   path << ": tensor '" << name << "' has " << file.info(name).numel()
                        << " elements, the model needs " << n);
  }
  file.read_float_into("exp_avg", optimizer->first_moment().data(), n);
  file.read_float_into("exp_avg_sq", optimizer->second_moment().data(), n);
  const auto it = file.metadata().find("step");
  BERTRAIN_CHECK(it != file.metadata().end(), path << ": metadata 'step' missing");
  try {
    optimizer->set_steps_taken(std::stol(it->second));
  } catch (const std::exception&) {
    BERTRAIN_FAIL(path << ": metadata 'step' is not an integer: '" << it->second << "'");
  }
}

}  // namespace bertrain
