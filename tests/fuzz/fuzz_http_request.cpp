// libFuzzer target: the bytes a client sends `bertrain serve`, through HttpRequestReader (tools/serve/
// http_request_reader.h) as the connection loop feeds it. The first byte sets how many bytes arrive at a time
// (1 to 256), so that every split of a request is tried; small limits (64-byte lines, 8 headers, 100-byte bodies)
// bring every refusal within reach of short inputs.
//
// Expected: requests read one after another until the bytes run out or one is refused. A finding is a crash, a hang,
// or a broken invariant (__builtin_trap):
//   - a refusal's status is one the server answers (400, 413, 414, 431, 501, 505), with a message;
//   - a read request has a method, a path starting with "/" (or "*"), and a body within the limit;
//   - the reader never holds more than a line's limit of a line it has not finished (nothing is buffered without
//     bound), and every read request used at least one byte.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tools/serve/http_request_reader.h"

using bertrain::HttpLimits;
using bertrain::HttpRequest;
using bertrain::HttpRequestReader;
using Status = HttpRequestReader::Status;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t step = 1 + data[0];
  const std::string wire(reinterpret_cast<const char*>(data) + 1, size - 1);
  HttpLimits limits;
  limits.max_request_line = 64;
  limits.max_header_line = 64;
  limits.max_header_bytes = 256;
  limits.max_headers = 8;
  limits.max_body = 100;
  HttpRequestReader reader(limits);
  std::string in;
  std::size_t fed = 0;
  for (int requests = 0; requests < 1000; ++requests) {
    reader.reset();
    HttpRequest request;
    bool head = false;
    Status status = Status::kNeedMore;
    const std::size_t before = fed - in.size();  // bytes used by the requests before this one
    for (;;) {
      status = head ? reader.read_body(&in, &request) : reader.read_head(&in, &request);
      if (status == Status::kHeadReady) {
        head = true;
        continue;
      }
      if (status != Status::kNeedMore) break;
      // The longest thing held unfinished: a line (or a chunk's size line) within its limit plus its CR LF.
      if (in.size() > 64 + 2 + step) __builtin_trap();
      if (fed == wire.size()) return 0;  // the client stopped mid-request: the server would time it out
      const std::size_t take = std::min(step, wire.size() - fed);
      in.append(wire, fed, take);
      fed += take;
    }
    if (status == Status::kError) {
      const int s = reader.error_status();
      if (s != 400 && s != 413 && s != 414 && s != 431 && s != 501 && s != 505) __builtin_trap();
      if (reader.error_message().empty()) __builtin_trap();
      return 0;  // the server answers and closes
    }
    if (request.method.empty() || request.path.empty() || (request.path[0] != '/' && request.path != "*")) __builtin_trap();
    if (request.body.size() > limits.max_body) __builtin_trap();
    if (fed - in.size() == before) __builtin_trap();  // a request made of no bytes: the loop would never end
  }
  return 0;
}
