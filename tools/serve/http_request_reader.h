// Reads HTTP/1.1 requests (RFC 9112) from the bytes a connection received, one after another (pipelined requests
// stay in the buffer for the next), with every length bounded before it is buffered: a request line, a header
// line, all headers, a body. No sockets: tools/serve/http_server.h feeds it; the tests feed it strings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tools/serve/http_message.h"

namespace bertrain {

struct HttpLimits {
  std::size_t max_request_line = 8 * 1024;   // longer: 414
  std::size_t max_header_line = 8 * 1024;    // one header line longer: 431
  std::size_t max_header_bytes = 64 * 1024;  // all header lines (and chunked trailers) together: 431
  std::size_t max_headers = 100;             // more header lines: 431
  std::size_t max_body = 2 << 20;            // a larger body, declared or received: 413
};

class HttpRequestReader {
 public:
  enum class Status {
    kNeedMore,   // the buffer holds part of it: append what the connection receives next and call again
    kHeadReady,  // the request line and headers are read (read_head); call read_body for the body
    kBodyReady,  // the body is read (read_body): the request is whole
    kError,      // the request cannot be read: answer error_status() and close the connection
  };

  explicit HttpRequestReader(HttpLimits limits) : limits_(limits) {}

  // Starts over, for the next request on the connection.
  void reset();
  // Takes the request line and headers from the front of `in` (removing what it read) into `request`. Empty lines
  // before the request line are skipped (RFC 9112 2.2). A body is announced by Content-Length or by
  // Transfer-Encoding: chunked (only chunked: other codings are 501); both at once, or Content-Lengths that
  // disagree, are 400.
  Status read_head(std::string* in, HttpRequest* request);
  // After kHeadReady: the body from the front of `in` into request->body (chunks joined; trailers read and dropped).
  Status read_body(std::string* in, HttpRequest* request);

  bool has_body() const { return chunked_ || remaining_ > 0; }
  // The declared Content-Length (0 for a chunked body, whose length is not known in advance).
  std::uint64_t declared_length() const { return chunked_ ? 0 : declared_; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

 private:
  enum class Part { kRequestLine, kHeaders, kBody, kChunkSize, kChunkData, kChunkEnd, kTrailers, kDone };
  Status fail(int status, std::string message);
  // The next line at the front of `in` (without its CR LF or LF), removed from `in`; false when `in` has no line
  // feed yet, or (with an error set) when the line is longer than `limit`.
  bool take_line(std::string* in, std::size_t limit, int status_when_long, std::string* line);
  bool parse_request_line(const std::string& line, HttpRequest* request);
  bool parse_header(const std::string& line, HttpHeaders* headers);
  bool plan_body(const HttpRequest& request);

  HttpLimits limits_;
  Part part_ = Part::kRequestLine;
  std::size_t header_bytes_ = 0;
  std::size_t header_lines_ = 0;
  bool chunked_ = false;
  std::uint64_t declared_ = 0;
  std::uint64_t remaining_ = 0;  // bytes of the body (or of the current chunk) still to read
  bool failed_ = false;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace bertrain
