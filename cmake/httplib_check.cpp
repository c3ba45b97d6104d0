// Configure-time check (CMakeLists.txt): the dependency bundle's cpp-httplib compiles and links with this
// machine's compiler and C++ library (Debian's build needs a libstdc++ at least as new as its own).
#include <httplib.h>

int main() {
  httplib::Server server;
  return server.is_valid() ? 0 : 1;
}
