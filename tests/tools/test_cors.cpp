// CorsPolicy (bertrain serve --cors-allow-origin): what the flag accepts, which origins it allows, the headers every
// answer gets, and the answer to a browser's preflight. CliServe.CorsLetsTheGivenOriginsReadAnswers drives the same
// through the server.
#include "tools/serve/cors.h"

#include <gtest/gtest.h>

#include <string>

#include "tools/args.h"

namespace bertrain {
namespace {

HttpRequest request(const std::string& method, const std::string& origin, const std::string& asked_method = "",
                    const std::string& asked_headers = "") {
  HttpRequest req;
  req.method = method;
  req.path = "/v1/predict";
  if (!origin.empty()) req.headers.emplace_back("Origin", origin);
  if (!asked_method.empty()) req.headers.emplace_back("Access-Control-Request-Method", asked_method);
  if (!asked_headers.empty()) req.headers.emplace_back("access-control-request-headers", asked_headers);
  return req;
}

std::string header(const HttpResponse& res, const std::string& name) { return header_value(res.headers, name); }

TEST(CorsPolicy, TakesOriginsAsBrowsersSendThem) {
  const CorsPolicy list = CorsPolicy::parse("https://app.example.com, http://localhost:3000");
  EXPECT_TRUE(list.enabled());
  EXPECT_TRUE(list.allows("https://app.example.com"));
  EXPECT_TRUE(list.allows("HTTPS://App.Example.com"));  // scheme and host are case-insensitive
  EXPECT_TRUE(list.allows("http://localhost:3000"));
  EXPECT_FALSE(list.allows("null"));
  EXPECT_FALSE(list.allows("http://localhost:3001"));
  EXPECT_FALSE(list.allows("https://app.example.com.evil.example"));
  EXPECT_FALSE(list.allows("http://app.example.com"));
  EXPECT_FALSE(list.allows(""));
  EXPECT_TRUE(CorsPolicy::parse("*").allows("https://anywhere.example"));
  EXPECT_FALSE(CorsPolicy().enabled());
  EXPECT_FALSE(CorsPolicy().allows("https://app.example.com"));
  EXPECT_TRUE(CorsPolicy::parse("http://[::1]:8080").allows("http://[::1]:8080"));
  EXPECT_TRUE(CorsPolicy::parse("http://[::1]").allows("http://[::1]"));
  EXPECT_TRUE(CorsPolicy::parse("https://a.example:8443").allows("https://a.example:8443"));
}

TEST(CorsPolicy, RefusesWhatNoBrowserSendsNamingTheFlag) {
  for (const char* bad : {"https://app.example.com/", "https://app.example.com/path", "app.example.com", "://x",
                          "https://", "", "https://a.example,", ",https://a.example", "*,https://a.example",
                          "https://a.example b.example", "null", "https://a.example:443", "http://a.example:80",
                          "https://a.example:", "http://[::1]:"}) {
    try {
      CorsPolicy::parse(bad);
      ADD_FAILURE() << "'" << bad << "' was taken";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--cors-allow-origin"), std::string::npos) << e.what();
    }
  }
}

TEST(CorsPolicy, EveryAnswerToAnAllowedOriginCarriesItsHeaders) {
  const CorsPolicy list = CorsPolicy::parse("https://app.example.com");
  HttpResponse allowed;
  list.add_headers(request("POST", "https://app.example.com"), allowed);
  EXPECT_EQ(header(allowed, "Access-Control-Allow-Origin"), "https://app.example.com");
  EXPECT_EQ(header(allowed, "Vary"), "Origin");
  EXPECT_EQ(header(allowed, "Access-Control-Expose-Headers"), "Retry-After");
  HttpResponse other;
  list.add_headers(request("POST", "https://evil.example"), other);
  EXPECT_EQ(header(other, "Access-Control-Allow-Origin"), "");
  EXPECT_EQ(header(other, "Vary"), "Origin");  // a cache must not give this answer to the allowed origin
  HttpResponse any;
  CorsPolicy::parse("*").add_headers(request("GET", "https://x.example"), any);
  EXPECT_EQ(header(any, "Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(header(any, "Vary"), "");
  HttpResponse none;
  CorsPolicy().add_headers(request("GET", "https://x.example"), none);
  EXPECT_TRUE(none.headers.empty());
}

TEST(CorsPolicy, PreflightsAreAnsweredAndOnlyThey) {
  const CorsPolicy list = CorsPolicy::parse("https://app.example.com");
  HttpResponse res;
  ASSERT_TRUE(list.answer_preflight(request("OPTIONS", "https://app.example.com", "POST", "authorization,content-type"),
                                    "POST", res));
  EXPECT_EQ(res.status, 204);
  EXPECT_EQ(header(res, "Access-Control-Allow-Methods"), "POST");
  EXPECT_EQ(header(res, "Access-Control-Allow-Headers"), "authorization,content-type");
  EXPECT_EQ(header(res, "Access-Control-Max-Age"), "600");
  EXPECT_EQ(res.body, "");
  HttpResponse refused;
  ASSERT_TRUE(list.answer_preflight(request("OPTIONS", "https://evil.example", "POST"), "POST", refused));
  EXPECT_EQ(refused.status, 403);
  EXPECT_NE(refused.body.find("--cors-allow-origin"), std::string::npos) << refused.body;
  HttpResponse untouched;
  EXPECT_FALSE(list.answer_preflight(request("OPTIONS", "https://app.example.com"), "POST", untouched));  // not one
  EXPECT_FALSE(list.answer_preflight(request("POST", "https://app.example.com", "POST"), "POST", untouched));
  EXPECT_FALSE(CorsPolicy().answer_preflight(request("OPTIONS", "https://app.example.com", "POST"), "POST", untouched));
  EXPECT_EQ(untouched.status, 200);
  EXPECT_TRUE(untouched.headers.empty());
}

}  // namespace
}  // namespace bertrain
