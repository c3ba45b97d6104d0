#include "core/error.h"

namespace bertrain {

[[noreturn]] void throw_error(const char* file, int line, const std::string& message) {
  // Keep only the path below the source root so messages stay short and machine-independent.
  std::string where = file;
  for (const char* root : {"/core/", "/kernels/", "/engine/", "/model/", "/data/", "/dist/", "/tools/", "/tests/"}) {
    const auto pos = where.rfind(root);
    if (pos != std::string::npos) {
      where = where.substr(pos + 1);
      break;
    }
  }
  throw Error(message + " [" + where + ":" + std::to_string(line) + "]");
}

std::string without_source_location(const std::string& what) {
  if (what.empty() || what.back() != ']') return what;
  const std::size_t open = what.rfind(" [");
  const std::size_t colon = what.rfind(':');
  if (open == std::string::npos || colon == std::string::npos || colon < open) return what;
  for (std::size_t i = colon + 1; i + 1 < what.size(); ++i) {
    if (what[i] < '0' || what[i] > '9') return what;
  }
  return colon + 2 < what.size() ? what.substr(0, open) : what;
}

}  // namespace bertrain
