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

}  // namespace bertrain
