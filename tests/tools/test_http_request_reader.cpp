// HttpRequestReader (tools/serve/http_request_reader.h) on byte strings: requests read whole, one after another,
// however the bytes are split; every length refused as soon as it is exceeded; the framing rules of RFC 9112.
#include <gtest/gtest.h>

#include <string>

#include "tools/serve/http_request_reader.h"

namespace bertrain {
namespace {

using Status = HttpRequestReader::Status;

struct Read {
  Status status = Status::kNeedMore;
  HttpRequest request;
  int error = 0;
  std::string message;
};

// Reads one request from the front of `in` (what it used is removed), fed `step` bytes at a time (0: all at once).
Read read_one(std::string* in, std::size_t step = 0, HttpLimits limits = {}) {
  HttpRequestReader reader(limits);
  Read r;
  std::string buffer;
  std::size_t fed = 0;
  bool head = false;
  for (;;) {
    const std::size_t take = step == 0 ? in->size() - fed : std::min(step, in->size() - fed);
    buffer.append(*in, fed, take);
    fed += take;
    r.status = head ? reader.read_body(&buffer, &r.request) : reader.read_head(&buffer, &r.request);
    if (r.status == Status::kHeadReady) {
      head = true;
      r.status = reader.read_body(&buffer, &r.request);
    }
    if (r.status != Status::kNeedMore || fed == in->size()) break;
  }
  in->erase(0, fed - buffer.size());  // what the reader did not use stays for the next request
  r.error = reader.error_status();
  r.message = reader.error_message();
  return r;
}

TEST(HttpRequestReader, ReadsARequestWhateverTheSplit) {
  const std::string wire =
      "POST /v1/pre%64ict?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
      "{\"a\": \"b\"}\n";
  for (std::size_t step : {0, 1, 7, 64}) {
    std::string in = wire;
    const Read r = read_one(&in, step);
    ASSERT_EQ(r.status, Status::kBodyReady) << step << " " << r.message;
    EXPECT_EQ(r.request.method, "POST");
    EXPECT_EQ(r.request.target, "/v1/pre%64ict?x=1");
    EXPECT_EQ(r.request.path, "/v1/predict");
    EXPECT_EQ(r.request.header("content-type"), "application/json");
    EXPECT_EQ(r.request.body, "{\"a\": \"b\"}\n");
    EXPECT_TRUE(in.empty()) << step;
  }
}

TEST(HttpRequestReader, PipelinedRequestsAreReadInTurn) {
  std::string in =
      "GET /healthz HTTP/1.1\r\n\r\n"
      "POST /predict HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"
      "POST /predict HTTP/1.1\nTransfer-Encoding: chunked\n\n1\nx\n0\n\n";  // bare line feeds are accepted
  Read r = read_one(&in);
  ASSERT_EQ(r.status, Status::kBodyReady);
  EXPECT_EQ(r.request.path, "/healthz");
  EXPECT_TRUE(r.request.body.empty());
  r = read_one(&in);
  ASSERT_EQ(r.status, Status::kBodyReady) << r.message;
  EXPECT_EQ(r.request.body, "{}");
  r = read_one(&in);
  ASSERT_EQ(r.status, Status::kBodyReady) << r.message;
  EXPECT_EQ(r.request.body, "x");
  EXPECT_TRUE(in.empty());
}

TEST(HttpRequestReader, ChunksAreJoinedExtensionsAndTrailersDropped) {
  std::string in =
      "POST /v1/predict HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "5;name=value\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Checksum: 1\r\n\r\n";
  const Read r = read_one(&in, 3);
  ASSERT_EQ(r.status, Status::kBodyReady) << r.message;
  EXPECT_EQ(r.request.body, "hello 0123456789");
}

// A line is refused once more than its limit has arrived, without waiting for its end: a client sending no line
// feed cannot make the server hold more than that.
TEST(HttpRequestReader, LongLinesAreRefusedBeforeTheirEnd) {
  std::string in = "GET /" + std::string(9000, 'a');
  Read r = read_one(&in);
  EXPECT_EQ(r.status, Status::kError);
  EXPECT_EQ(r.error, 414);
  in = "GET / HTTP/1.1\r\nX-Big: " + std::string(9000, 'a');
  r = read_one(&in);
  EXPECT_EQ(r.status, Status::kError);
  EXPECT_EQ(r.error, 431);
  in = "GET /" + std::string(8000, 'a') + " HTTP/1.1\r\nX-Fine: " + std::string(8000, 'b') + "\r\n\r\n";
  EXPECT_EQ(read_one(&in).status, Status::kBodyReady);  // both just within their 8 KiB
}

TEST(HttpRequestReader, HeadersAreCountedAndSized) {
  const auto with_headers = [](int count, std::size_t value_bytes) {
    std::string in = "GET / HTTP/1.1\r\n";
    for (int i = 0; i < count; ++i) in += "X-" + std::to_string(i) + ": " + std::string(value_bytes, 'v') + "\r\n";
    return in + "\r\n";
  };
  std::string in = with_headers(100, 1);
  EXPECT_EQ(read_one(&in).status, Status::kBodyReady);
  in = with_headers(101, 1);
  Read r = read_one(&in);
  EXPECT_EQ(r.error, 431);
  EXPECT_NE(r.message.find("more than 100 headers"), std::string::npos) << r.message;
  in = with_headers(20, 4000);  // 80 KiB in all
  EXPECT_EQ(read_one(&in).error, 431);
}

TEST(HttpRequestReader, BodiesOverTheLimitAre413) {
  HttpLimits limits;
  limits.max_body = 10;
  std::string in = "POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n";  // refused on the head: the body is never read
  Read r = read_one(&in, 0, limits);
  EXPECT_EQ(r.error, 413);
  in = "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789";
  EXPECT_EQ(read_one(&in, 0, limits).status, Status::kBodyReady);
  in = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n012345\r\n5\r\n";
  r = read_one(&in, 0, limits);
  EXPECT_EQ(r.error, 413);
  in = "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n";
  EXPECT_EQ(read_one(&in, 0, limits).error, 400);
}

TEST(HttpRequestReader, AmbiguousFramingIsRefused) {
  const std::pair<std::string, int> cases[] = {
      {"POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", 400},  // how requests are smuggled
      {"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 2, 3\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n", 400},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET /\r\n\r\n", 400},
      {"GET  / HTTP/1.1\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET nowhere HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nX A: 1\r\n\r\n", 400},
      {std::string("GET / HTTP/1.1\r\nX-A: a\0b\r\n\r\n", 29), 400},
  };
  for (const auto& [wire, status] : cases) {
    std::string in = wire;
    const Read r = read_one(&in);
    EXPECT_EQ(r.status, Status::kError) << wire;
    EXPECT_EQ(r.error, status) << wire << " -> " << r.message;
  }
  // The same length twice is one length.
  std::string in = "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}";
  EXPECT_EQ(read_one(&in).request.body, "{}");
}

TEST(HttpRequestReader, KeepAliveFollowsTheVersionAndConnection) {
  const std::pair<std::string, bool> cases[] = {
      {"GET / HTTP/1.1\r\n\r\n", true},
      {"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", false},
      {"GET / HTTP/1.1\r\nConnection: Upgrade, Close\r\n\r\n", false},
      {"GET / HTTP/1.0\r\n\r\n", false},
      {"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true},
  };
  for (const auto& [wire, keep] : cases) {
    std::string in = wire;
    EXPECT_EQ(read_one(&in).request.wants_keep_alive(), keep) << wire;
  }
}

TEST(HttpRequestReader, AbsoluteTargetsGiveTheirPath) {
  std::string in = "GET http://example.com:8000/run_id/?a HTTP/1.1\r\n\r\nGET http://example.com HTTP/1.1\r\n\r\n";
  EXPECT_EQ(read_one(&in).request.path, "/run_id/");
  EXPECT_EQ(read_one(&in).request.path, "/");
}

}  // namespace
}  // namespace bertrain
