// Cross-origin requests from pages in a browser (the Fetch standard's CORS protocol) for `bertrain serve
// --cors-allow-origin`: which origins may read the answers, and the answer to a browser's preflight. Without the flag
// no CORS header is sent (as Made-With-ML's serve.py), and a page on another origin cannot read an answer.
#pragma once

#include <string>
#include <vector>

#include "tools/serve/http_message.h"

namespace bertrain {

class CorsPolicy {
 public:
  CorsPolicy() = default;  // no origin allowed: no CORS headers

  // --cors-allow-origin's value: "*" (any origin), or a comma-separated list of origins as browsers send them,
  // scheme://host[:port] with no path and no default port. "null" is refused: sandboxed frames and data: pages of
  // any site send it. Throws UsageError naming the flag.
  static CorsPolicy parse(const std::string& value);

  bool enabled() const { return any_ || !origins_.empty(); }
  // Whether a page of `origin` (the request's Origin header) may read answers.
  bool allows(const std::string& origin) const;

  // Every answer: Access-Control-Allow-Origin (and Access-Control-Expose-Headers) when the request's Origin is
  // allowed; with a list of origins also "Vary: Origin", so that a cache keeps one answer per origin.
  void add_headers(const HttpRequest& req, HttpResponse& res) const;

  // A browser's preflight is OPTIONS with Access-Control-Request-Method. Answers it (`methods`: the path's, as
  // "GET, HEAD, POST"): 204 with the methods, the requested headers and how long to keep them, or 403 when its origin
  // is not allowed. Returns false, leaving `res` alone, for any other request.
  bool answer_preflight(const HttpRequest& req, const std::string& methods, HttpResponse& res) const;

 private:
  bool any_ = false;
  std::vector<std::string> origins_;  // lower case
};

}  // namespace bertrain
