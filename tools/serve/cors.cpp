#include "tools/serve/cors.h"

#include <algorithm>
#include <cctype>

#include "core/ascii.h"
#include "tools/args.h"
#include "tools/serve/api_requests.h"

namespace bertrain {

namespace {

// How long a browser may keep a preflight's answer (Chrome keeps at most 2 hours, Firefox 1 day; the default is 5 s,
// which would send a preflight before almost every request).
constexpr const char* kPreflightMaxAgeS = "600";

// "https://example.com", "http://localhost:3000": what a browser sends as Origin, so what can equal it (a browser
// leaves out a scheme's default port, and never sends an empty one).
bool is_origin(const std::string& v) {
  const std::size_t scheme_end = v.find("://");
  if (scheme_end == std::string::npos || scheme_end == 0) return false;
  const std::string scheme = ascii_lower(v.substr(0, scheme_end));
  const std::string authority = v.substr(scheme_end + 3);
  const auto scheme_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
  };
  const auto authority_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']' ||
           c == '_';
  };
  if (!std::all_of(scheme.begin(), scheme.end(), scheme_char) || authority.empty() ||
      !std::all_of(authority.begin(), authority.end(), authority_char)) {
    return false;
  }
  const std::size_t bracket = authority.rfind(']');  // an IPv6 address's colons are not its port's
  const std::size_t colon = authority.rfind(':');
  if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) return true;
  const std::string port = authority.substr(colon + 1);
  return !port.empty() && !(scheme == "http" && port == "80") && !(scheme == "https" && port == "443");
}

}  // namespace

CorsPolicy CorsPolicy::parse(const std::string& value) {
  CorsPolicy policy;
  if (value == "*") {
    policy.any_ = true;
    return policy;
  }
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = value.find(',', from);
    std::string origin = value.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    origin.erase(0, origin.find_first_not_of(' '));
    origin.erase(origin.find_last_not_of(' ') + 1);
    if (origin == "*") throw UsageError("serve: --cors-allow-origin: '*' allows every origin: give it alone");
    if (origin.empty()) throw UsageError("serve: --cors-allow-origin '" + value + "' has an empty origin");
    if (ascii_lower(origin) == "null") {
      throw UsageError("serve: --cors-allow-origin: 'null' is the origin of sandboxed frames and data: pages, which "
                       "any site can make: allowing it allows every site (give * if that is meant)");
    }
    if (!is_origin(origin)) {
      throw UsageError("serve: --cors-allow-origin: '" + origin + "' is not an origin as a browser sends it: " +
                       "scheme://host[:port] with no path, trailing slash or default port (e.g. " +
                       "https://example.com), or *");
    }
    policy.origins_.push_back(ascii_lower(origin));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return policy;
}

bool CorsPolicy::allows(const std::string& origin) const {
  if (origin.empty()) return false;
  return any_ || std::find(origins_.begin(), origins_.end(), ascii_lower(origin)) != origins_.end();
}

void CorsPolicy::add_headers(const HttpRequest& req, HttpResponse& res) const {
  if (!enabled()) return;
  const std::string origin = req.header("Origin");
  if (!any_) res.set_header("Vary", "Origin");
  if (!allows(origin)) return;
  res.set_header("Access-Control-Allow-Origin", any_ ? "*" : origin);
  // What a page may read of an answer besides the safelisted headers: when to retry a 429 or 503.
  res.set_header("Access-Control-Expose-Headers", "Retry-After");
}

bool CorsPolicy::answer_preflight(const HttpRequest& req, const std::string& methods, HttpResponse& res) const {
  if (!enabled() || req.method != "OPTIONS" || req.header("Access-Control-Request-Method").empty()) return false;
  if (!allows(req.header("Origin"))) {
    res.status = 403;
    res.set_content(error_body(req.header("Origin").empty() ? "a preflight without Origin"
                                                            : "this origin is not allowed (--cors-allow-origin)",
                               "forbidden"),
                    "application/json");
    return true;
  }
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", methods);
  // The headers the page asked to send (Authorization for the API key, Content-Type for JSON, ...): the server reads
  // only the ones it knows, so allowing what was asked gives nothing away.
  if (const std::string asked = req.header("Access-Control-Request-Headers"); !asked.empty()) {
    res.set_header("Access-Control-Allow-Headers", asked);
  }
  res.set_header("Access-Control-Max-Age", kPreflightMaxAgeS);
  return true;
}

}  // namespace bertrain
