#include "tools/serve/http_request_reader.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include "core/ascii.h"

namespace bertrain {

namespace {

bool is_token_char(unsigned char c) {
  return std::isalnum(c) != 0 || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

// The comma-separated elements of every header called `name`, trimmed and lower-cased, empty ones left out.
std::vector<std::string> list_values(const HttpHeaders& headers, const std::string& name) {
  std::vector<std::string> values;
  const std::string want = ascii_lower(name);
  for (const auto& [key, value] : headers) {
    if (ascii_lower(key) != want) continue;
    std::size_t at = 0;
    while (at <= value.size()) {
      const std::size_t comma = std::min(value.find(',', at), value.size());
      const std::string element = ascii_lower(ascii_trim(value.substr(at, comma - at), " \t"));
      if (!element.empty()) values.push_back(element);
      at = comma + 1;
    }
  }
  return values;
}

// The path of a request target, %XX decoded (an invalid escape is kept as it is, as cpp-httplib and most servers do).
std::string decoded_path(const std::string& target) {
  const std::string raw = target.substr(0, target.find_first_of("?#"));
  std::string out;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size() && hex_digit(raw[i + 1]) >= 0 && hex_digit(raw[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(raw[i + 1]) * 16 + hex_digit(raw[i + 2]));
      i += 2;
    } else {
      out += raw[i];
    }
  }
  return out;
}

}  // namespace

std::string header_value(const HttpHeaders& headers, const std::string& name) {
  const std::string want = ascii_lower(name);
  for (const auto& [key, value] : headers) {
    if (ascii_lower(key) == want) return value;
  }
  return "";
}

std::size_t header_count(const HttpHeaders& headers, const std::string& name) {
  const std::string want = ascii_lower(name);
  return static_cast<std::size_t>(
      std::count_if(headers.begin(), headers.end(), [&](const auto& h) { return ascii_lower(h.first) == want; }));
}

bool HttpRequest::wants_keep_alive() const {
  const std::vector<std::string> connection = list_values(headers, "Connection");
  const auto says = [&](const char* token) { return std::find(connection.begin(), connection.end(), token) != connection.end(); };
  return minor_version >= 1 ? !says("close") : says("keep-alive");
}

const char* http_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 307: return "Temporary Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

void HttpRequestReader::reset() {
  part_ = Part::kRequestLine;
  header_bytes_ = 0;
  header_lines_ = 0;
  chunked_ = false;
  declared_ = 0;
  remaining_ = 0;
  failed_ = false;
  error_status_ = 0;
  error_message_.clear();
}

HttpRequestReader::Status HttpRequestReader::fail(int status, std::string message) {
  failed_ = true;
  error_status_ = status;
  error_message_ = std::move(message);
  return Status::kError;
}

bool HttpRequestReader::take_line(std::string* in, std::size_t limit, int status_when_long, std::string* line) {
  const std::size_t end = in->find('\n');
  // A line is refused as soon as more than `limit` bytes of it are here, not once its end arrives: a client that
  // never sends a line feed cannot make the server buffer more than that.
  const std::size_t length = end == std::string::npos ? in->size() : end;
  if (length > limit + 1) {  // + 1: the CR of a CR LF
    fail(status_when_long, status_when_long == 414 ? "the request line is longer than " + std::to_string(limit) + " bytes"
                                                   : "a header line is longer than " + std::to_string(limit) + " bytes");
    return false;
  }
  if (end == std::string::npos) return false;
  line->assign(*in, 0, end);
  if (!line->empty() && line->back() == '\r') line->pop_back();
  in->erase(0, end + 1);
  return true;
}

bool HttpRequestReader::parse_request_line(const std::string& line, HttpRequest* request) {
  const std::size_t first = line.find(' ');
  const std::size_t second = first == std::string::npos ? std::string::npos : line.find(' ', first + 1);
  if (second == std::string::npos || line.find(' ', second + 1) != std::string::npos) {
    fail(400, "malformed request line");
    return false;
  }
  request->method = line.substr(0, first);
  request->target = line.substr(first + 1, second - first - 1);
  const std::string version = line.substr(second + 1);
  if (request->method.empty() || !std::all_of(request->method.begin(), request->method.end(), is_token_char)) {
    fail(400, "malformed request method");
    return false;
  }
  if (version == "HTTP/1.1" || version == "HTTP/1.0") {
    request->minor_version = version.back() - '0';
  } else if (version.size() == 8 && version.compare(0, 5, "HTTP/") == 0 && std::isdigit(static_cast<unsigned char>(version[5])) &&
             version[6] == '.' && std::isdigit(static_cast<unsigned char>(version[7]))) {
    fail(505, "HTTP version " + version.substr(5) + " is not supported (HTTP/1.1 and HTTP/1.0 are)");
    return false;
  } else {
    fail(400, "malformed request line");
    return false;
  }
  std::string target = request->target;
  if (target.empty() || std::any_of(target.begin(), target.end(), [](unsigned char c) { return c <= 0x20 || c == 0x7f; })) {
    fail(400, "malformed request target");
    return false;
  }
  // The absolute form (proxies send it): the path after the authority.
  for (const char* scheme : {"http://", "https://"}) {
    const std::size_t length = std::strlen(scheme);
    if (ascii_lower(target.substr(0, length)) == scheme) {
      const std::size_t slash = target.find_first_of("/?#", length);
      target = slash == std::string::npos ? "/" : target[slash] == '/' ? target.substr(slash) : "/" + target.substr(slash);
    }
  }
  if (target[0] != '/' && target != "*") {
    fail(400, "malformed request target");
    return false;
  }
  request->path = decoded_path(target);
  return true;
}

bool HttpRequestReader::parse_header(const std::string& line, HttpHeaders* headers) {
  if (line[0] == ' ' || line[0] == '\t') {
    fail(400, "a folded header line (obsolete line folding is not accepted)");
    return false;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string::npos || colon == 0 ||
      !std::all_of(line.begin(), line.begin() + static_cast<long>(colon), is_token_char)) {
    fail(400, "malformed header line");
    return false;
  }
  const std::string value = ascii_trim(line.substr(colon + 1), " \t");
  if (std::any_of(value.begin(), value.end(), [](unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; })) {
    fail(400, "a control character in header " + line.substr(0, colon));
    return false;
  }
  headers->emplace_back(line.substr(0, colon), value);
  return true;
}

bool HttpRequestReader::plan_body(const HttpRequest& request) {
  const std::vector<std::string> codings = list_values(request.headers, "Transfer-Encoding");
  const std::vector<std::string> lengths = list_values(request.headers, "Content-Length");
  if (header_count(request.headers, "Transfer-Encoding") > 0) {
    // A length beside chunking is how requests are smuggled past proxies (RFC 9112 6.1): refused.
    if (!lengths.empty()) return fail(400, "both Content-Length and Transfer-Encoding"), false;
    if (request.minor_version == 0) return fail(400, "Transfer-Encoding in an HTTP/1.0 request"), false;
    for (const std::string& coding : codings) {
      if (coding != "chunked") return fail(501, "Transfer-Encoding " + coding + " is not supported (only chunked)"), false;
    }
    if (codings.size() != 1) return fail(400, "Transfer-Encoding must name chunked once"), false;
    chunked_ = true;
    part_ = Part::kChunkSize;
    return true;
  }
  if (header_count(request.headers, "Content-Length") > 0) {
    if (lengths.empty()) return fail(400, "an empty Content-Length"), false;
    for (const std::string& length : lengths) {
      if (length != lengths.front()) return fail(400, "Content-Lengths that disagree"), false;
    }
    const std::string& length = lengths.front();
    if (length.size() > 18 || !std::all_of(length.begin(), length.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
      return fail(400, "Content-Length '" + length + "' is not a number of bytes"), false;
    }
    declared_ = std::stoull(length);
    if (declared_ > limits_.max_body) {
      return fail(413, "the body is larger than --max-body-bytes " + std::to_string(limits_.max_body)), false;
    }
    remaining_ = declared_;
  }
  part_ = remaining_ > 0 ? Part::kBody : Part::kDone;
  return true;
}

HttpRequestReader::Status HttpRequestReader::read_head(std::string* in, HttpRequest* request) {
  if (failed_) return Status::kError;
  std::string line;
  while (part_ == Part::kRequestLine) {
    if (!take_line(in, limits_.max_request_line, 414, &line)) return failed_ ? Status::kError : Status::kNeedMore;
    if (line.empty()) continue;  // a CR LF left after a previous request's body
    if (!parse_request_line(line, request)) return Status::kError;
    part_ = Part::kHeaders;
  }
  while (part_ == Part::kHeaders) {
    if (!take_line(in, limits_.max_header_line, 431, &line)) return failed_ ? Status::kError : Status::kNeedMore;
    if (line.empty()) {
      if (!plan_body(*request)) return Status::kError;
      return Status::kHeadReady;
    }
    header_bytes_ += line.size() + 2;
    if (++header_lines_ > limits_.max_headers || header_bytes_ > limits_.max_header_bytes) {
      return fail(431, "more than " + std::to_string(limits_.max_headers) + " headers or " +
                           std::to_string(limits_.max_header_bytes / 1024) + " KiB of them");
    }
    if (!parse_header(line, &request->headers)) return Status::kError;
  }
  return fail(500, "read_head called out of order");
}

HttpRequestReader::Status HttpRequestReader::read_body(std::string* in, HttpRequest* request) {
  if (failed_) return Status::kError;
  std::string line;
  for (;;) {
    switch (part_) {
      case Part::kDone:
        return Status::kBodyReady;
      case Part::kBody:
      case Part::kChunkData: {
        const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, in->size()));
        request->body.append(*in, 0, take);
        in->erase(0, take);
        remaining_ -= take;
        if (remaining_ > 0) return Status::kNeedMore;
        part_ = part_ == Part::kBody ? Part::kDone : Part::kChunkEnd;
        break;
      }
      case Part::kChunkEnd: {  // the CR LF (or LF) after a chunk's data
        const std::size_t end = in->compare(0, 1, "\n") == 0 ? 1 : in->compare(0, 2, "\r\n") == 0 ? 2 : 0;
        if (end == 0) {
          if (in->empty() || *in == "\r") return Status::kNeedMore;
          return fail(400, "malformed chunked body (no line end after a chunk)");
        }
        in->erase(0, end);
        part_ = Part::kChunkSize;
        break;
      }
      case Part::kChunkSize: {
        if (!take_line(in, limits_.max_header_line, 400, &line)) {
          return failed_ ? fail(400, "malformed chunked body (a chunk size line too long)") : Status::kNeedMore;
        }
        const std::string digits = ascii_trim(line.substr(0, line.find(';')), " \t");  // chunk extensions are ignored
        if (digits.empty() || digits.size() > 15 ||
            !std::all_of(digits.begin(), digits.end(), [](char c) { return hex_digit(c) >= 0; })) {
          return fail(400, "malformed chunked body (chunk size '" + digits.substr(0, 20) + "')");
        }
        remaining_ = std::stoull(digits, nullptr, 16);
        if (request->body.size() + remaining_ > limits_.max_body) {
          return fail(413, "the body is larger than --max-body-bytes " + std::to_string(limits_.max_body));
        }
        part_ = remaining_ > 0 ? Part::kChunkData : Part::kTrailers;
        break;
      }
      case Part::kTrailers:  // trailer fields after the last chunk: bounded like headers, then dropped
        if (!take_line(in, limits_.max_header_line, 431, &line)) return failed_ ? Status::kError : Status::kNeedMore;
        if (line.empty()) {
          part_ = Part::kDone;
          break;
        }
        header_bytes_ += line.size() + 2;
        if (++header_lines_ > limits_.max_headers || header_bytes_ > limits_.max_header_bytes) {
          return fail(431, "more than " + std::to_string(limits_.max_headers) + " headers or " +
                               std::to_string(limits_.max_header_bytes / 1024) + " KiB of them");
        }
        break;
      default:
        return fail(500, "read_body called before the head was read");
    }
  }
}

}  // namespace bertrain
