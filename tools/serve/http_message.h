// An HTTP/1.1 request and answer as `bertrain serve`'s handlers see them (tools/serve/http_server.h reads and writes
// them on the sockets).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace bertrain {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;  // in the order sent, names as sent

// The value of the first header called `name` (case-insensitive), "" when there is none.
std::string header_value(const HttpHeaders& headers, const std::string& name);
// How many headers are called `name` (case-insensitive).
std::size_t header_count(const HttpHeaders& headers, const std::string& name);

struct HttpRequest {
  std::string method;       // "GET", "POST", ...
  std::string target;       // as sent: "/v1/predict?x=1"
  std::string path;         // the target's path, percent-decoded: "/v1/predict"
  int minor_version = 1;    // HTTP/1.0 or HTTP/1.1
  HttpHeaders headers;
  std::string body;         // de-chunked
  std::string remote_addr;  // the client's address, for the access log

  std::string header(const std::string& name) const { return header_value(headers, name); }
  // Whether the client keeps the connection after this answer: HTTP/1.1 unless it sent "Connection: close",
  // HTTP/1.0 only with "Connection: keep-alive".
  bool wants_keep_alive() const;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;  // besides Content-Type, Content-Length and Connection, which the server writes
  std::string content_type;
  std::string body;

  void set_content(std::string content, std::string type) {
    body = std::move(content);
    content_type = std::move(type);
  }
  void set_header(const std::string& name, const std::string& value) { headers.emplace_back(name, value); }
};

// "OK", "Not Found", ... for the status line.
const char* http_reason(int status);

}  // namespace bertrain
