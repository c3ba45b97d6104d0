// CLI tests of `bertrain serve` over loopback: the real binary as a child process (tests/tools/serve_process.h) on
// the suite's trained run, spoken to by cpp-httplib's client (and a raw socket where a client library would hide
// what is sent): every endpoint and its answers against `bertrain predict`'s, 32 concurrent clients, bad input,
// a full queue, too many requests, the API key, /evaluate/'s root, SIGTERM under load, startup errors and the
// Prometheus text of /metrics. Each test starts its own server on a free port (--port 0).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_threads.h"
#include "tests/tools/cli_test.h"
#include "tests/tools/model_variants.h"
#include "tests/tools/serve_process.h"

namespace bertrain {
namespace {

using namespace cli_test;
using ::bertrain::testing::ServeProcess;
using Clock = std::chrono::steady_clock;

constexpr double kTolerance = 1e-6;  // fp32 on the CPU: the batch around a row changes only float rounding

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// One answer as the tests read it; status 0 when the request got no answer (`error` says why).
struct Answer {
  int status = 0;
  std::string body;
  httplib::Headers headers;
  std::string error;

  std::string header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
  json parsed() const { return json::parse(body, nullptr, false); }
  std::string describe() const {
    return "status " + std::to_string(status) + (error.empty() ? "" : " (" + error + ")") + ": " + body.substr(0, 600);
  }
};

Answer answer_of(const httplib::Result& r) {
  Answer a;
  if (!r) {
    a.error = httplib::to_string(r.error());
    return a;
  }
  a.status = r->status;
  a.body = r->body;
  a.headers = r->headers;
  return a;
}

// A keep-alive client of the server on `port`.
class Client {
 public:
  explicit Client(int port) : cli_("127.0.0.1", port) {
    cli_.set_connection_timeout(5, 0);
    cli_.set_read_timeout(30, 0);
    cli_.set_write_timeout(10, 0);
    cli_.set_url_encode(false);  // the tests send the paths they mean
  }
  Answer get(const std::string& path, const httplib::Headers& headers = {}) {
    return answer_of(cli_.Get(path.c_str(), headers));
  }
  Answer head(const std::string& path) { return answer_of(cli_.Head(path.c_str())); }
  Answer post(const std::string& path, const std::string& body, const httplib::Headers& headers = {}) {
    return answer_of(cli_.Post(path.c_str(), headers, body, "application/json"));
  }
  Answer post(const std::string& path, const char* body, const httplib::Headers& headers = {}) {
    return post(path, std::string(body), headers);
  }
  Answer post(const std::string& path, const json& body, const httplib::Headers& headers = {}) {
    return post(path, body.dump(), headers);
  }
  Answer del(const std::string& path) { return answer_of(cli_.Delete(path.c_str())); }
  Answer options(const std::string& path, const httplib::Headers& headers = {}) {
    return answer_of(cli_.Options(path.c_str(), headers));
  }

 private:
  httplib::Client cli_;
};

// Whether `got` holds one whole answer: its head and a body of its Content-Length.
bool whole_answer(const std::string& got) {
  const std::size_t head_end = got.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  std::smatch m;
  static const std::regex length(R"(\r\n[Cc]ontent-[Ll]ength: *([0-9]+)\r\n)");
  const std::string head = got.substr(0, head_end + 2);
  if (!std::regex_search(head, m, length)) return false;
  return got.size() >= head_end + 4 + std::stoul(m[1].str());
}

// A raw connection to the server, for what a client library would not do (pipeline, trickle, half-close).
class RawConnection {
 public:
  // receive_buffer > 0: that SO_RCVBUF, set before connecting (it then stays that small: a client that reads slowly).
  explicit RawConnection(int port, int receive_buffer = 0) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    if (receive_buffer > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  bool connected() const { return connected_; }
  // Whether all of `bytes` went out (the server may close the connection before taking them all).
  bool send(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }
  void shut_writes() { ::shutdown(fd_, SHUT_WR); }
  // Whether a byte of an answer has arrived within timeout_s (left unread).
  bool answer_begun(double timeout_s) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout_s * 1000)) == 1;
  }
  // Everything received until the server closes or `timeout_s` passes.
  std::string receive_all(double timeout_s) { return receive(timeout_s, false); }
  // Until one whole answer is in, the server closes, or `timeout_s` passes.
  std::string receive_answer(double timeout_s) { return receive(timeout_s, true); }

 private:
  std::string receive(double timeout_s, bool one_answer) {
    std::string got;
    char buffer[65536];
    const auto start = Clock::now();
    while (seconds_since(start) < timeout_s && !(one_answer && whole_answer(got))) {
      timeval tv{0, 100 * 1000};
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n == 0) break;
      if (n > 0) got.append(buffer, static_cast<std::size_t>(n));
    }
    return got;
  }

  int fd_;
  bool connected_ = false;
};

// Sends `bytes` on a new connection and returns what comes back until one whole answer is in, the server closes
// the connection or `timeout_s` passes (for requests a client library would not send as they are).
std::string raw_exchange(int port, const std::string& bytes, double timeout_s = 10) {
  RawConnection c(port);
  if (!c.connected()) return "connect failed";
  c.send(bytes);  // what the server answers counts, whether or not it took every byte
  return c.receive_answer(timeout_s);
}

// The status of the first answer in a raw exchange (0 when there is none).
int raw_status(const std::string& response) {
  std::smatch m;
  static const std::regex status_line(R"(^HTTP/1\.[01] ([0-9]{3}) )");
  return std::regex_search(response, m, status_line) ? std::stoi(m[1].str()) : 0;
}

// Empty when `got` (an answer's {"prediction", "probabilities"}) is `want` (a predict line): the same prediction,
// the same labels, every probability within kTolerance; else what differs.
std::string mismatch(const json& got, const json& want) {
  if (!got.is_object() || !got.contains("prediction") || !got.contains("probabilities")) {
    return "not a prediction: " + got.dump();
  }
  if (got["prediction"] != want["prediction"]) {
    return "prediction " + got["prediction"].dump() + ", predict says " + want["prediction"].dump();
  }
  const json& p = got["probabilities"];
  const json& q = want["probabilities"];
  if (!p.is_object() || p.size() != q.size()) return "labels " + p.dump() + ", predict has " + q.dump();
  for (const auto& [label, value] : q.items()) {
    if (!p.contains(label) || !p[label].is_number()) return "no probability of " + label + " in " + p.dump();
    const double diff = std::abs(p[label].get<double>() - value.get<double>());
    if (!(diff <= kTolerance)) {
      return label + ": " + p[label].dump() + ", predict says " + value.dump() + " (|diff| " + std::to_string(diff) + ")";
    }
  }
  return "";
}

// A TEI answer for one text: [{"label", "score"}] over every label, highest score first; empty when it is, else why.
std::string tei_shape_problem(const json& scores) {
  if (!scores.is_array() || scores.size() != kTags.size()) return "not a list of " + std::to_string(kTags.size()) + ": " + scores.dump();
  std::set<std::string> labels;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    if (!scores[i].is_object() || !scores[i].contains("label") || !scores[i].contains("score") ||
        !scores[i]["score"].is_number() || !scores[i]["label"].is_string()) {
      return "entry " + std::to_string(i) + " is not {label, score}: " + scores.dump();
    }
    labels.insert(scores[i]["label"].get<std::string>());
    if (i > 0 && scores[i]["score"].get<double>() > scores[i - 1]["score"].get<double>()) {
      return "not sorted by score: " + scores.dump();
    }
  }
  if (labels != std::set<std::string>(kTags.begin(), kTags.end())) return "labels differ: " + scores.dump();
  return "";
}

std::map<std::string, double> scores_by_label(const json& scores) {
  std::map<std::string, double> out;
  for (const json& s : scores) out[s["label"].get<std::string>()] = s["score"].get<double>();
  return out;
}

// A synthetic row's text as the model reads it: its text columns joined with one space, as predict --data does.
std::string text_of(const Row& row) { return row.title + " " + row.description; }

// A text of `words` vocabulary words: longer than the model's 40 tokens when words > 38.
std::string long_text(int words) {
  std::string text;
  for (int i = 0; i < words; ++i) text += (i ? " " : "") + kWords[static_cast<std::size_t>(i % 4)][static_cast<std::size_t>(i % 15)];
  return text;
}

// The last `n` words of `text` (words separated by one space).
std::string last_words(const std::string& text, int n) {
  std::size_t start = text.size();
  for (int i = 0; i < n && start != std::string::npos && start > 0; ++i) start = text.rfind(' ', start - 1);
  return start == std::string::npos ? text : text.substr(start + 1);
}

class CliServe : public CliTest {
 protected:
  // A server on the suite's run with `flags` after --model RUN --port 0 --device cpu, waited for until ready.
  std::unique_ptr<ServeProcess> start(const std::vector<std::string>& flags, const std::string& name = "serve",
                                      const std::vector<std::string>& wrapper = {}) {
    std::vector<std::string> args{"--model", suite_run(), "--port", "0", "--device", "cpu"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto server = std::make_unique<ServeProcess>(binary(), args, path(name + ".log"), wrapper);
    if (!server->wait_ready(60)) ADD_FAILURE() << "the server did not get ready\n" << server->describe();
    return server;
  }

  // predict --data's line for every synthetic row, by the row's text (computed once per test process).
  static const std::map<std::string, json>& reference() {
    static std::map<std::string, json>* lines = nullptr;
    if (lines == nullptr) {
      lines = new std::map<std::string, json>();
      const std::vector<Row> rows = synthetic_rows();
      const fs::path csv = fs::path(suite_run()).parent_path() / "rows.csv";
      spit(csv, to_csv(rows, /*with_tag=*/false));
      const RunResult r = run({"predict", "--model", suite_run(), "--data", csv.string(), "--device", "cpu"});
      EXPECT_TRUE(succeeded(r));
      const std::vector<std::string> out = lines_of(r.out);
      EXPECT_EQ(out.size(), rows.size()) << r.describe();
      for (std::size_t i = 0; i < out.size() && i < rows.size(); ++i) (*lines)[text_of(rows[i])] = json::parse(out[i]);
    }
    return *lines;
  }

  // predict --text's answer.
  static json predict_text(const std::string& text, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"predict", "--model", suite_run(), "--text", text, "--device", "cpu"};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = run(args);
    EXPECT_TRUE(succeeded(r));
    return json::parse(r.out, nullptr, false);
  }

  // Checks every 200 among a burst's `answers` (client t sent rows[t]) against predict's answer and hands each
  // other one to `refused`; returns how many were 200.
  template <class Refused>
  static int check_burst_answers(const std::vector<Answer>& answers, const std::vector<Row>& rows, Refused&& refused) {
    int ok = 0;
    for (std::size_t t = 0; t < answers.size(); ++t) {
      const Answer& a = answers[t];
      if (a.status == 200) {
        ++ok;
        EXPECT_EQ(mismatch(a.parsed()["results"][0], reference().at(text_of(rows[t]))), "") << t;
      } else {
        refused(a, "client " + std::to_string(t));
      }
    }
    return ok;
  }

  // A request's answer is the body of an error: {"error": one line containing `needle`, "error_type"}.
  static void expect_error_answer(const Answer& a, int status, const std::string& needle, const std::string& what) {
    EXPECT_EQ(a.status, status) << what << ": " << a.describe();
    const json body = a.parsed();
    ASSERT_TRUE(body.is_object() && body.contains("error") && body["error"].is_string() && body.contains("error_type"))
        << what << ": not a JSON error body: " << a.describe();
    const std::string message = body["error"].get<std::string>();
    EXPECT_NE(message.find(needle), std::string::npos) << what << ": the error does not name '" << needle << "': " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << what << ": not one line: " << message;
  }

  // The server answers a prediction correctly: it is alive and well.
  void expect_serving(ServeProcess& server, const std::string& when) {
    EXPECT_TRUE(server.running()) << when << "\n" << server.describe();
    Client c(server.port());
    const Row row = synthetic_rows()[5];
    const Answer a = c.post("/v1/predict", json{{"texts", {text_of(row)}}});
    ASSERT_EQ(a.status, 200) << when << ": " << a.describe();
    EXPECT_EQ(mismatch(a.parsed()["results"][0], reference().at(text_of(row))), "") << when;
  }
};

// The value of the sample `name` (with its labels exactly as written, e.g. `x{a="b"}`) in a /metrics text; NaN
// when it is absent.
double metric_value(const std::string& text, const std::string& name) {
  for (const std::string& line : lines_of(text)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return std::nan("");
}

// ---- the endpoints --------------------------------------------------------------------------------------------

// Made-With-ML's health answer, the run id, the health probes and the model's description.
TEST_F(CliServe, InfoEndpointsAnswerAsDocumented) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({"--threads", "2"});
  ASSERT_GT(server->port(), 0);
  Client c(server->port());

  const Answer root = c.get("/");
  EXPECT_EQ(root.status, 200) << root.describe();
  EXPECT_EQ(root.body, R"({"message":"OK","status-code":200,"data":{}})");
  EXPECT_EQ(root.header("Content-Type").rfind("application/json", 0), 0u) << root.header("Content-Type");
  const Answer head = c.head("/");
  EXPECT_EQ(head.status, 200) << head.describe();
  EXPECT_EQ(head.body, "");

  // Trained without MLflow: the run id is the model directory the server loaded (the run's best/).
  const Answer run_id = c.get("/run_id/");
  EXPECT_EQ(run_id.status, 200) << run_id.describe();
  ASSERT_TRUE(run_id.parsed().is_object()) << run_id.describe();
  EXPECT_EQ(run_id.parsed().size(), 1u) << run_id.body;
  EXPECT_EQ(fs::weakly_canonical(run_id.parsed().value("run_id", "")), fs::weakly_canonical(suite_run() + "/best"))
      << run_id.body;

  const Answer health = c.get("/healthz");
  EXPECT_EQ(health.status, 200) << health.describe();
  const Answer ready = c.get("/readyz");
  EXPECT_EQ(ready.status, 200) << ready.describe();
  EXPECT_EQ(ready.parsed().value("status", ""), "ready") << ready.body;

  const Answer model = c.get("/v1/model");
  ASSERT_EQ(model.status, 200) << model.describe();
  const json m = model.parsed();
  EXPECT_EQ(m["labels"], json(kTags)) << model.body;
  EXPECT_EQ(m["problem_type"], "single_label_classification") << model.body;
  const json config = json::parse(slurp(suite_run() + "/best/config.json"));
  EXPECT_EQ(m["max_length"], config["bertrain_data"]["max_length"]) << model.body;
  EXPECT_EQ(m["max_length"], 40) << model.body;
  EXPECT_EQ(m["device"], "cpu") << model.body;
  EXPECT_EQ(m["precision"], "fp32") << model.body;
  // The engine thread's OpenMP count (--threads), not an HTTP thread's default (the tests' children run with
  // OMP_NUM_THREADS=1: it said 1 thread here, and 2 under --threads 1 on a 2-core machine).
  EXPECT_EQ(m["engine"], cpu_engine_description(2)) << model.body;
  EXPECT_TRUE(m["parameters"].is_number_integer() && m["parameters"].get<long>() > 0) << model.body;
  EXPECT_TRUE(m["threshold"].is_null()) << model.body;  // single-label without --threshold: the arg-max
  // A multi-label model predicts the labels at p >= 0.5 unless told another --threshold, and says so.
  ASSERT_TRUE(succeeded(run(train_args(path("multi"), {"--multi-label", "--epochs", "1"}))));
  ServeProcess multi(binary(), {"--model", path("multi"), "--port", "0", "--device", "cpu", "--quiet"}, path("multi.log"));
  ASSERT_TRUE(multi.wait_ready(60)) << multi.describe();
  const Answer multi_model = Client(multi.port()).get("/v1/model");
  ASSERT_EQ(multi_model.status, 200) << multi_model.describe();
  EXPECT_EQ(multi_model.parsed()["problem_type"], "multi_label_classification") << multi_model.body;
  EXPECT_EQ(multi_model.parsed()["threshold"], 0.5) << multi_model.body;
}

// POST /predict/ with Made-With-ML's body answers as its serve.py (the "other" threshold 0.9) and as
// `predict --title --description --threshold 0.9`; /predict takes that body too.
TEST_F(CliServe, MadeWithMlPredictMatchesPredictWithItsThreshold) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({});
  ASSERT_GT(server->port(), 0);
  Client c(server->port());
  const std::vector<std::pair<std::string, std::string>> projects = {
      {"The image camera", "pixel segmentation video model"},
      {"Kubernetes deployment", "A docker pipeline for mlflow tracking in production"},
      {"Transformer", ""}};
  for (const auto& [title, description] : projects) {
    const RunResult want_run = run({"predict", "--model", suite_run(), "--title", title, "--description", description,
                                    "--threshold", "0.9", "--device", "cpu"});
    ASSERT_TRUE(succeeded(want_run));
    const json want = json::parse(want_run.out);
    for (const char* route : {"/predict/", "/predict"}) {
      const Answer a = c.post(route, json{{"title", title}, {"description", description}});
      ASSERT_EQ(a.status, 200) << route << " " << a.describe();
      const json got = a.parsed();
      ASSERT_TRUE(got.is_object() && got.contains("results") && got["results"].size() == 1) << a.body;
      EXPECT_EQ(mismatch(got["results"][0], want), "") << route << " " << title;
      EXPECT_EQ(got["results"][0].size(), 2u) << "only prediction and probabilities: " << a.body;
    }
  }
  // serve.py's data.get("title", ""): a body with only one of the two fields is a project too.
  const json want = predict_text("Transformer", {"--threshold", "0.9"});
  const Answer only_title = c.post("/predict/", json{{"title", "Transformer"}});
  ASSERT_EQ(only_title.status, 200) << only_title.describe();
  EXPECT_EQ(mismatch(only_title.parsed()["results"][0], want), "");
}

// Made-With-ML's 0.9 rule answers --other-label, which a model trained on other data may not have: serve says so
// once at its start, not for a model that has it (Made-With-ML's, the suite's) or a --threshold given.
TEST_F(CliServe, AnOtherLabelTheModelLacksIsSaidAtTheStart) {
  ASSERT_TRUE(succeeded(suite_train()));
  const std::string note = "bertrain serve: note: POST /predict/ (Made-With-ML's API) answers 'unheard-of', which is "
                           "not one of the model's labels, when the top probability is below 0.9";
  EXPECT_NE(start({"--other-label", "unheard-of"}, "lacking")->log().find(note), std::string::npos);
  EXPECT_EQ(start({}, "having")->log().find("answers 'other'"), std::string::npos);
  EXPECT_EQ(start({"--other-label", "unheard-of", "--threshold", "0.5"}, "given")->log().find("note: POST"),
            std::string::npos);
}

// --threshold replaces Made-With-ML's 0.9 and applies to /v1/predict as well.
TEST_F(CliServe, ThresholdFlagAppliesToEveryPrediction) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({"--threshold", "0.1"});
  ASSERT_GT(server->port(), 0);
  Client c(server->port());
  // A row whose top label is not "other": below 0.9 Made-With-ML's rule would say "other", over 0.1 it is the top one.
  const std::vector<Row> rows = synthetic_rows();
  const auto top_not_other = std::find_if(rows.begin(), rows.end(), [](const Row& r) {
    return reference().at(text_of(r))["prediction"] != "other";
  });
  ASSERT_NE(top_not_other, rows.end()) << "every row's top label is other: the check cannot fail";
  const Row row = *top_not_other;
  const json want = predict_text(text_of(row), {"--threshold", "0.1"});
  ASSERT_NE(want["prediction"], "other") << want;
  const Answer mwml = c.post("/predict/", json{{"title", row.title}, {"description", row.description}});
  ASSERT_EQ(mwml.status, 200) << mwml.describe();
  EXPECT_EQ(mismatch(mwml.parsed()["results"][0], want), "");
  const Answer v1 = c.post("/v1/predict", json{{"texts", {text_of(row)}}});
  ASSERT_EQ(v1.status, 200) << v1.describe();
  EXPECT_EQ(mismatch(v1.parsed()["results"][0], want), "");
}

// text-embeddings-inference's POST /predict (and /predict/): one text or a list; scores are the probabilities,
// or the logits with raw_scores (softmax of them is the probabilities); every label, highest first.
TEST_F(CliServe, TeiPredictAnswersScoresSortedByScore) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({});
  ASSERT_GT(server->port(), 0);
  Client c(server->port());
  const std::vector<Row> rows = synthetic_rows();
  for (const char* route : {"/predict", "/predict/"}) {
    for (const int i : {0, 1, 2, 3}) {
      const std::string text = text_of(rows[static_cast<std::size_t>(i)]);
      const json& want = reference().at(text)["probabilities"];
      const Answer a = c.post(route, json{{"inputs", text}});
      ASSERT_EQ(a.status, 200) << route << " " << a.describe();
      const json got = a.parsed();
      ASSERT_EQ(tei_shape_problem(got), "") << route;
      for (const auto& [label, score] : scores_by_label(got)) {
        EXPECT_NEAR(score, want[label].get<double>(), kTolerance) << route << " " << label << " of row " << i;
      }
    }
    // [text] is that text; a batch [[text], ...] (TEI's list of inputs) a list of such lists, in the inputs' order.
    const Answer one = c.post(route, json{{"inputs", {text_of(rows[0])}}});
    ASSERT_EQ(one.status, 200) << route << " " << one.describe();
    ASSERT_EQ(tei_shape_problem(one.parsed()), "") << route << " [text]";
    json inputs = json::array(), batch = json::array();
    for (int i = 4; i < 9; ++i) {
      inputs.push_back(text_of(rows[static_cast<std::size_t>(i)]));
      batch.push_back(json::array({inputs.back()}));
    }
    const Answer list = c.post(route, json{{"inputs", batch}, {"truncate", false}});
    ASSERT_EQ(list.status, 200) << route << " " << list.describe();
    const json got = list.parsed();
    ASSERT_TRUE(got.is_array() && got.size() == inputs.size()) << list.body;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      ASSERT_EQ(tei_shape_problem(got[k]), "") << route << " item " << k;
      const json& want = reference().at(inputs[k].get<std::string>())["probabilities"];
      for (const auto& [label, score] : scores_by_label(got[k])) {
        EXPECT_NEAR(score, want[label].get<double>(), kTolerance) << route << " item " << k << " " << label;
      }
    }
    // raw_scores: logits, whose softmax is the probabilities (and not themselves probabilities).
    const Answer raw = c.post(route, json{{"inputs", batch}, {"raw_scores", true}});
    ASSERT_EQ(raw.status, 200) << route << " " << raw.describe();
    const json logits = raw.parsed();
    ASSERT_TRUE(logits.is_array() && logits.size() == inputs.size()) << raw.body;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      ASSERT_EQ(tei_shape_problem(logits[k]), "") << route << " raw item " << k;
      const std::map<std::string, double> z = scores_by_label(logits[k]);
      double top = -INFINITY, sum = 0, score_sum = 0;
      for (const auto& [label, v] : z) top = std::max(top, v);
      for (const auto& [label, v] : z) {
        sum += std::exp(v - top);
        score_sum += v;
      }
      EXPECT_GT(std::abs(score_sum - 1.0), 1e-3) << "raw scores that sum to 1 look like probabilities: " << raw.body;
      const json& want = reference().at(inputs[k].get<std::string>())["probabilities"];
      for (const auto& [label, v] : z) {
        EXPECT_NEAR(std::exp(v - top) / sum, want[label].get<double>(), kTolerance) << route << " softmax " << label;
      }
    }
  }
}

// text-embeddings-inference's other routes: POST / and /invocations predict as /predict; GET /health and /ping answer
// 200 with no body; GET /info is its Info, with the classifier's labels.
TEST_F(CliServe, TeiRoutesAnswerAsTei) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({"--quiet"});
  Client c(server->port());
  const std::string text = text_of(synthetic_rows()[2]);
  const Answer want = c.post("/predict", json{{"inputs", text}});
  ASSERT_EQ(want.status, 200) << want.describe();
  for (const char* route : {"/", "/invocations"}) {
    const Answer a = c.post(route, json{{"inputs", text}});
    ASSERT_EQ(a.status, 200) << route << " " << a.describe();
    EXPECT_EQ(a.body, want.body) << route;
  }
  for (const char* probe : {"/health", "/ping"}) {
    const Answer a = c.get(probe);
    EXPECT_EQ(a.status, 200) << probe;
    EXPECT_EQ(a.body, "") << probe;
  }
  const Answer info = c.get("/info");
  ASSERT_EQ(info.status, 200) << info.describe();
  const json i = info.parsed();
  EXPECT_EQ(i["model_type"]["classifier"]["id2label"]["0"], kTags[0]) << info.body;
  EXPECT_EQ(i["model_type"]["classifier"]["label2id"][kTags[1]], 1) << info.body;
  EXPECT_EQ(i["max_input_length"], 40) << info.body;
  EXPECT_EQ(i["auto_truncate"], true) << info.body;
  EXPECT_EQ(i["model_dtype"], "float32") << info.body;
  for (const char* key : {"model_id", "max_concurrent_requests", "max_batch_tokens", "max_client_batch_size", "version"}) {
    EXPECT_TRUE(i.contains(key)) << key << ": " << info.body;
  }
  const Answer put = c.post("/health", json::object());
  EXPECT_EQ(put.status, 405) << put.describe();
  EXPECT_EQ(put.header("Allow"), "GET, HEAD");
}

// POST /v1/predict with "texts" and with "rows" answers every row as `predict --data` does, in order.
TEST_F(CliServe, V1PredictMatchesPredictDataRowByRow) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({});
  ASSERT_GT(server->port(), 0);
  Client c(server->port());
  const std::vector<Row> rows = synthetic_rows();
  spit(path("rows.csv"), to_csv(rows, /*with_tag=*/false));
  const RunResult predicted = run({"predict", "--model", suite_run(), "--data", path("rows.csv"), "--device", "cpu"});
  ASSERT_TRUE(succeeded(predicted));
  const std::vector<std::string> want = lines_of(predicted.out);
  ASSERT_EQ(want.size(), rows.size());

  json texts = json::array(), objects = json::array();
  for (const Row& row : rows) {
    texts.push_back(text_of(row));
    objects.push_back(json{{"title", row.title}, {"description", row.description}, {"tag", "ignored"}});
  }
  for (const json& body : {json{{"texts", texts}}, json{{"rows", objects}}}) {
    const Answer a = c.post("/v1/predict", body);
    ASSERT_EQ(a.status, 200) << a.describe();
    const json got = a.parsed();
    ASSERT_TRUE(got.is_object() && got["results"].is_array()) << a.body;
    ASSERT_EQ(got["results"].size(), rows.size()) << a.body;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const json line = json::parse(want[i]);
      EXPECT_EQ(mismatch(got["results"][i], line), "") << body.begin().key() << " row " << i;
      EXPECT_FALSE(got["results"][i].contains("truncated")) << got["results"][i];
    }
  }
  // A row without a text column's value (absent or null) reads as an empty one, as in a JSON Lines file.
  const Answer partial = c.post("/v1/predict", json{{"rows", {{{"title", "Transformer"}, {"description", nullptr}}}}});
  ASSERT_EQ(partial.status, 200) << partial.describe();
  EXPECT_EQ(mismatch(partial.parsed()["results"][0], predict_text("Transformer")), "");
}

// --no-clean gives the model the text as it is, as predict --no-clean does, whatever its config.json records.
TEST_F(CliServe, NoCleanGivesTheModelTheTextAsItIs) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({"--no-clean", "--quiet"});
  Client c(server->port());
  const Answer model = c.get("/v1/model");
  ASSERT_EQ(model.status, 200) << model.describe();
  EXPECT_EQ(model.parsed()["clean_text"], false) << model.body;
  const std::string text = "The IMAGE segmentation, of the camera!";
  const Answer a = c.post("/v1/predict", json{{"texts", {text}}});
  ASSERT_EQ(a.status, 200) << a.describe();
  EXPECT_EQ(mismatch(a.parsed()["results"][0], predict_text(text, {"--no-clean"})), "");
  EXPECT_NE(mismatch(a.parsed()["results"][0], predict_text(text)), "") << "cleaning changed nothing in the test text";
  EXPECT_EQ(server->log().find("note:"), std::string::npos) << server->describe();  // its training recorded it
}

// A text longer than the model's max length: /v1/predict cuts it as predict does and says so; TEI's truncate
// false refuses it (413), true cuts it.
TEST_F(CliServe, LongTextsAreTruncatedAsPredictDoesOrRefused) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({});
  ASSERT_GT(server->port(), 0);
  Client c(server->port());
  const std::string text = long_text(90);
  const json want = predict_text(text);
  const std::string short_text = text_of(synthetic_rows()[3]);

  const Answer v1 = c.post("/v1/predict", json{{"texts", {short_text, text}}});
  ASSERT_EQ(v1.status, 200) << v1.describe();
  const json results = v1.parsed()["results"];
  ASSERT_EQ(results.size(), 2u) << v1.body;
  EXPECT_FALSE(results[0].contains("truncated")) << results[0];
  EXPECT_EQ(results[1].value("truncated", false), true) << results[1];
  json cut = results[1];
  cut.erase("truncated");
  EXPECT_EQ(mismatch(cut, want), "");
  EXPECT_EQ(mismatch(results[0], reference().at(short_text)), "");

  // TEI (since 1.9) cuts unless told "truncate": false, and then refuses with 422, its status for validation.
  const Answer refused = c.post("/predict", json{{"inputs", text}, {"truncate", false}});
  expect_error_answer(refused, 422, "\"inputs\" has more than the model's", "TEI, truncate false");
  const Answer refused_list = c.post("/predict", json{{"inputs", {{short_text}, {text}}}, {"truncate", false}});
  expect_error_answer(refused_list, 422, "inputs[1]", "TEI batch, truncate false");
  for (const json& body : {json{{"inputs", text}}, json{{"inputs", text}, {"truncate", true}},
                           json{{"inputs", text}, {"truncation_direction", "right"}}}) {
    const Answer accepted = c.post("/predict", body);
    ASSERT_EQ(accepted.status, 200) << accepted.describe();
    ASSERT_EQ(tei_shape_problem(accepted.parsed()), "");
    for (const auto& [label, score] : scores_by_label(accepted.parsed())) {
      EXPECT_NEAR(score, want["probabilities"][label].get<double>(), kTolerance) << label << " " << body.dump().substr(0, 60);
    }
  }
  // "truncation_direction": "left" keeps the end: the text's last 38 tokens, which predict gives for them alone
  // (its words are one token each: long_text's).
  const std::string tail = last_words(text, 38);
  const Answer left = c.post("/predict", json{{"inputs", text}, {"truncation_direction", "Left"}});
  ASSERT_EQ(left.status, 200) << left.describe();
  const json want_tail = predict_text(tail);
  EXPECT_NE(mismatch(want_tail, want), "") << "the test text's two ends give the same prediction";
  for (const auto& [label, score] : scores_by_label(left.parsed())) {
    EXPECT_NEAR(score, want_tail["probabilities"][label].get<double>(), kTolerance) << label;
  }
  // The cut rows are counted.
  const Answer metrics = c.get("/metrics");
  EXPECT_EQ(metric_value(metrics.body, "bertrain_truncated_rows_total"), 5.0) << metrics.body.substr(0, 2000);
}

// ---- many clients ---------------------------------------------------------------------------------------------

// 32 clients × 50 requests (single rows and several rows, texts and rows bodies) at once: every answer 200 and
// predict's for that text, whatever the batch around it; requests are batched together (more than one row per
// forward pass on average) and split over batches (--max-batch-size 8 < the largest request's 12 rows).
TEST_F(CliServe, ConcurrentClientsAllGetPredictsAnswers) {
  ASSERT_TRUE(succeeded(suite_train()));
  const std::map<std::string, json>& want = reference();
  ASSERT_EQ(want.size(), static_cast<std::size_t>(kRows));
  // Rows answered in another row's place are caught only if no two rows have the same probabilities.
  for (auto a = want.begin(); a != want.end(); ++a) {
    for (auto b = std::next(a); b != want.end(); ++b) {
      EXPECT_NE(mismatch(a->second, b->second), "") << "rows with the same answer: " << a->first << " / " << b->first;
    }
  }
  auto server = start({"--max-wait-ms", "2", "--max-batch-size", "8", "--quiet"});
  ASSERT_GT(server->port(), 0);
  const std::vector<Row> rows = synthetic_rows();
  constexpr int kClients = 32, kRequests = 50;

  std::atomic<long> rows_sent{0}, ok{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  const auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(failures_mutex);
    failures.push_back(what);
  };
  std::atomic<bool> go{false};
  const auto started = Clock::now();
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      Client c(server->port());
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kRequests; ++i) {
        const int n = (t + i) % 3 == 0 ? 1 + (t * 7 + i) % 12 : 1;  // a third of the requests: 1..12 rows
        std::vector<std::string> texts;
        json objects = json::array();
        for (int k = 0; k < n; ++k) {
          const Row& row = rows[static_cast<std::size_t>((t * 13 + i * 5 + k * 3) % kRows)];
          texts.push_back(text_of(row));
          objects.push_back(json{{"title", row.title}, {"description", row.description}});
        }
        const json body = (t + i) % 2 == 0 ? json{{"texts", texts}} : json{{"rows", objects}};
        rows_sent += n;
        const Answer a = c.post("/v1/predict", body);
        const std::string where = "client " + std::to_string(t) + " request " + std::to_string(i) + ": ";
        if (a.status != 200) {
          fail(where + a.describe());
          continue;
        }
        const json got = a.parsed();
        if (!got.is_object() || !got["results"].is_array() || got["results"].size() != texts.size()) {
          fail(where + "not " + std::to_string(n) + " results: " + a.body);
          continue;
        }
        bool all = true;
        for (std::size_t k = 0; k < texts.size(); ++k) {
          const std::string why = mismatch(got["results"][k], want.at(texts[k]));
          if (!why.empty()) {
            fail(where + "row " + std::to_string(k) + ": " + why);
            all = false;
          }
        }
        ok += all;
      }
    });
  }
  go = true;
  for (std::thread& t : clients) t.join();
  const double seconds = seconds_since(started);
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures; the first: " << failures.front();
  EXPECT_EQ(ok.load(), kClients * kRequests);
  EXPECT_LT(seconds, 60) << "32 × 50 requests took " << seconds << " s";
  std::printf("[ serve    ] %d requests (%ld rows) from %d clients in %.2f s\n", kClients * kRequests, rows_sent.load(),
              kClients, seconds);

  Client c(server->port());
  const Answer metrics = c.get("/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.describe();
  const double batches = metric_value(metrics.body, "bertrain_batch_rows_count");
  const double batch_rows = metric_value(metrics.body, "bertrain_batch_rows_sum");
  EXPECT_EQ(batch_rows, static_cast<double>(rows_sent.load())) << "every row ran once";
  EXPECT_EQ(metric_value(metrics.body, "bertrain_rows_total"), static_cast<double>(rows_sent.load()));
  EXPECT_GT(batch_rows / batches, 1.0) << "no batching: " << batches << " forward passes for " << batch_rows << " rows";
  EXPECT_EQ(metric_value(metrics.body, "bertrain_batch_rows_bucket{le=\"8\"}"), batches)
      << "a batch over --max-batch-size 8";
  EXPECT_EQ(metric_value(metrics.body, R"(bertrain_http_requests_total{path="/v1/predict",method="POST",code="200"})"),
            static_cast<double>(kClients * kRequests));
  EXPECT_TRUE(server->running()) << server->describe();
}

// ---- bad input ------------------------------------------------------------------------------------------------

// Every malformed, incomplete or mistyped body is a 400 naming what is wrong; a body over --max-body-bytes is 413;
// unknown paths 404; wrong methods 405 with Allow; a slow client holds nothing up; the server lives on.
TEST_F(CliServe, BadInputIsRefusedByNameAndTheServerLivesOn) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({"--max-body-bytes", "4096"});
  ASSERT_GT(server->port(), 0);
  const int port = server->port();
  Client c(port);

  struct Bad {
    const char* route;
    std::string body;
    const char* needle;
  };
  std::string deep = std::string(2000, '[') + std::string(2000, ']');
  const std::vector<Bad> bad = {
      {"/v1/predict", "{\"texts\": [\"a\"", "JSON"},
      {"/v1/predict", "", "JSON"},
      {"/predict", "not json at all", "JSON"},
      {"/predict/", "{\"title\": \"a\",}", "JSON"},
      {"/v1/predict", "{\"texts\": [\"\xff\xfe\"]}", "UTF-8"},  // not UTF-8: the parser's reason is passed on
      {"/v1/predict", "[\"a\"]", "object"},
      {"/v1/predict", "{}", "texts"},
      {"/v1/predict", R"({"text": ["a"]})", "texts"},
      {"/v1/predict", R"({"texts": ["a"], "rows": [{"title": "a"}]})", "texts"},
      {"/predict", "{}", "inputs"},
      {"/predict/", R"({"tilte": "a"})", "inputs"},
      {"/v1/predict", R"({"texts": 3})", "texts"},
      {"/v1/predict", R"({"texts": "one text"})", "texts"},
      {"/v1/predict", R"({"texts": ["ok", 3]})", "texts[1]"},
      {"/v1/predict", R"({"texts": ["ok", null]})", "texts[1]"},
      {"/v1/predict", R"({"rows": [{"title": 5}]})", "rows[0].title"},
      {"/v1/predict", R"({"rows": ["a title"]})", "rows[0]"},
      {"/v1/predict", R"({"rows": {"title": "a"}})", "rows"},
      {"/predict/", R"({"title": 5})", "title"},
      {"/predict/", R"({"title": "a", "description": ["b"]})", "description"},
      {"/predict", R"({"inputs": 5})", "inputs"},
      // TEI's shapes: a flat list is one input ([text], or a pair), a batch is a list of lists.
      {"/predict", R"({"inputs": ["a", null]})", "\"inputs\" is a text pair"},
      {"/predict", R"({"inputs": ["a", "b", "c"]})", "\"inputs\" must be a text, [text] or a pair [text, text], got a list of 3"},
      {"/predict", R"({"inputs": [["a", "b"]]})", "inputs[0] is a text pair"},
      {"/predict", R"({"inputs": [["a"], [null]]})", "inputs[1][0] must be a string"},
      {"/predict", R"({"inputs": [["a"], "b"]})", "inputs[1] must be a list"},
      {"/predict", R"({"inputs": [[]]})", "inputs[0] must be a text, [text] or a pair"},
      {"/predict", R"({"inputs": "a", "truncation_direction": "up"})", "truncation_direction"},
      {"/predict", R"({"inputs": "a", "raw_scores": "yes"})", "raw_scores"},
      {"/predict", R"({"inputs": "a", "truncate": 1})", "truncate"},
      {"/v1/predict", R"({"texts": []})", "texts"},
      {"/v1/predict", R"({"texts": [""]})", "texts[0]"},
      // Unicode's whitespace is empty too (it was answered as the model's guess for [CLS] [SEP]).
      {"/v1/predict", "{\"texts\": [\"\u00a0\u3000\"]}", "texts[0] is empty"},
      {"/predict", "{\"inputs\": \"\u2028\"}", "is empty"},
      {"/predict/", "{\"title\": \"\u00a0\", \"description\": \"\u0085\"}", "both empty"},
      {"/v1/predict", R"({"texts": ["a", "  \n "]})", "texts[1]"},
      {"/v1/predict", R"({"rows": []})", "rows"},
      {"/v1/predict", R"({"rows": [{"tag": "mlops"}]})", "rows[0]"},
      {"/predict", R"({"inputs": ""})", "inputs"},
      {"/predict", R"({"inputs": []})", "inputs"},
      {"/predict", R"({"inputs": [["a"], [""]]})", "inputs[1][0] is empty"},
      {"/predict/", R"({"title": "", "description": " "})", "title"},
      // Nested beyond core/json_text.h's bound (2,000 levels, within this server's --max-body-bytes): refused as such.
      {"/v1/predict", "{\"texts\": " + deep + "}", "the body nests deeper than 512 levels"},
      // A number beyond a double (valid JSON the parser cannot hold) was a 500 "internal error" (fuzz_serve_requests).
      {"/v1/predict", R"({"texts": ["a"], "n": 1e400})", "number overflow"},
      {"/predict/", R"({"title": "a", "n": -66.6e6000})", "number overflow"},
  };
  for (const Bad& b : bad) {
    const Answer a = c.post(b.route, b.body);
    expect_error_answer(a, 400, b.needle, std::string(b.route) + " " + b.body.substr(0, 80));
  }
  expect_serving(*server, "after the 400s");

  // Over --max-body-bytes: 413, with Content-Length and chunked alike.
  const std::string big = json{{"texts", {std::string(5000, 'a')}}}.dump();
  expect_error_answer(c.post("/v1/predict", big), 413, "--max-body-bytes", "a body of 5000 bytes");
  const std::string head = "POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  std::string chunked = head;
  for (std::size_t at = 0; at < big.size(); at += 1000) {
    const std::string piece = big.substr(at, 1000);
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
    chunked += size + piece + "\r\n";
  }
  chunked += "0\r\n\r\n";
  const std::string chunked_answer = raw_exchange(port, chunked);
  EXPECT_EQ(raw_status(chunked_answer), 413) << "a chunked body of 5000 bytes with --max-body-bytes 4096:\n"
                                             << chunked_answer.substr(0, 600);
  expect_serving(*server, "after the 413s");

  // Unknown paths: 404 (also one that is not UTF-8 once decoded); wrong methods: 405 naming the allowed ones.
  for (const char* unknown : {"/nope", "/predict//", "/v1/predict/", "/V1/model", "/%FF", "/%C0%AF"}) {
    const Answer a = c.get(unknown);
    EXPECT_EQ(a.status, 404) << unknown << ": " << a.describe();
    EXPECT_TRUE(a.parsed().is_object() && a.parsed().contains("error")) << unknown << ": " << a.describe();
    EXPECT_EQ(a.header("EXCEPTION_WHAT"), "") << unknown << ": an exception escaped a handler";
  }
  expect_error_answer(c.post("/nope", R"({"texts": ["a"]})"), 404, "/nope", "POST /nope");
  // Made-With-ML's paths without their slash: redirected there, as FastAPI does (307 keeps a POST's method and body).
  const Answer run_id = c.get("/run_id?x=1");
  EXPECT_EQ(run_id.status, 307) << run_id.describe();
  EXPECT_EQ(run_id.header("Location"), "/run_id/?x=1");
  const Answer evaluate = c.post("/evaluate", R"({"dataset": "a.csv"})");
  EXPECT_EQ(evaluate.status, 307) << evaluate.describe();
  EXPECT_EQ(evaluate.header("Location"), "/evaluate/");
  const Answer get_predict = c.get("/predict/");
  expect_error_answer(get_predict, 405, "POST", "GET /predict/");
  EXPECT_EQ(get_predict.header("Allow"), "POST");
  const Answer get_v1 = c.get("/v1/predict");
  EXPECT_EQ(get_v1.status, 405) << get_v1.describe();
  EXPECT_EQ(get_v1.header("Allow"), "POST");
  const Answer post_health = c.post("/healthz", "{}");
  EXPECT_EQ(post_health.status, 405) << post_health.describe();
  EXPECT_NE(post_health.header("Allow").find("GET"), std::string::npos) << post_health.header("Allow");
  const Answer delete_model = c.del("/v1/model");
  EXPECT_EQ(delete_model.status, 405) << delete_model.describe();
  EXPECT_NE(delete_model.header("Allow").find("GET"), std::string::npos) << delete_model.header("Allow");

  // A path that decodes to a line break stays one line in the error and in the access log.
  const Answer newline = c.get("/x%0Aforged%20line");
  expect_error_answer(newline, 404, "/x", "a path with %0A");
  EXPECT_EQ(server->log().find("\nforged line"), std::string::npos) << "a request wrote a line of its own into the log:\n"
                                                                    << server->describe();

  // Headers are bounded: a megabyte of them is refused, not stored.
  std::string headers = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (int i = 0; headers.size() < (1u << 20); ++i) headers += "X-Filler-" + std::to_string(i) + ": v\r\n";
  const std::string many_headers = raw_exchange(port, headers + "\r\n");
  EXPECT_NE(raw_status(many_headers), 200) << "1 MiB of headers accepted:\n" << many_headers.substr(0, 300);
  const std::string long_header = raw_exchange(
      port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Long: " + std::string(100000, 'a') + "\r\n\r\n");
  EXPECT_NE(raw_status(long_header), 200) << "a 100 kB header line accepted:\n" << long_header.substr(0, 300);

  // A request that is not HTTP: 400, and the connection closes.
  EXPECT_EQ(raw_status(raw_exchange(port, "HELLO\r\n\r\n", 10)), 400);

  // A slow client (half a request, then silence) holds neither the engine nor other clients.
  {
    RawConnection slow(port);
    ASSERT_TRUE(slow.connected());
    ASSERT_TRUE(slow.send("POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"texts\""));
    const auto before = Clock::now();
    expect_serving(*server, "with a slow client connected");
    EXPECT_LT(seconds_since(before), 2.0) << "a slow client delayed another's prediction";
  }

  expect_serving(*server, "after everything");
  Client fresh(port);
  EXPECT_EQ(fresh.get("/healthz").status, 200);
}

// ---- connections ----------------------------------------------------------------------------------------------

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// HTTP/1.1 as clients use it: pipelined requests answered in order, a half-closed client answered, a line without
// an end refused once it passes its limit (not buffered until the client stops), a request without a body answered
// at once.
TEST_F(CliServe, PipelinedHalfClosedAndEndlessRequestsAreAnswered) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({"--quiet"});
  const int port = server->port();
  {
    RawConnection c(port);
    ASSERT_TRUE(c.connected());
    const std::string predict = json{{"texts", {"object detection with yolo"}}}.dump();
    ASSERT_TRUE(c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nPOST /v1/predict HTTP/1.1\r\nHost: x\r\n"
                       "Content-Type: application/json\r\nContent-Length: " + std::to_string(predict.size()) +
                       "\r\n\r\n" + predict + "GET /run_id/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const std::string got = c.receive_all(10);
    EXPECT_EQ(count_of(got, "HTTP/1.1 200 OK"), 3u) << got;
    const std::size_t alive = got.find("\"alive\""), prediction = got.find("\"probabilities\""),
                      run_id = got.find("\"run_id\"");
    EXPECT_TRUE(alive < prediction && prediction < run_id && run_id != std::string::npos) << "out of order:\n" << got;
  }
  {
    RawConnection c(port);  // the client's request, then its end of the connection: the answer still comes
    ASSERT_TRUE(c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    c.shut_writes();
    EXPECT_EQ(raw_status(c.receive_all(10)), 200);
  }
  {
    RawConnection c(port);  // a request line that never ends: 414 after 8 KiB, while the client still sends
    const auto start = Clock::now();
    ASSERT_TRUE(c.send("GET /" + std::string(16 * 1024, 'a')));
    const std::string got = c.receive_answer(10);
    EXPECT_EQ(raw_status(got), 414) << got;
    EXPECT_LT(seconds_since(start), 2.0);
  }
  {
    RawConnection c(port);  // a POST without Content-Length has no body (RFC 9112): refused at once, not awaited
    const auto start = Clock::now();
    ASSERT_TRUE(c.send("POST /v1/predict HTTP/1.1\r\nHost: x\r\n\r\n"));
    const std::string got = c.receive_answer(10);
    EXPECT_EQ(raw_status(got), 400) << got;
    EXPECT_LT(seconds_since(start), 2.0);
  }
  expect_serving(*server, "after the raw connections");
}

// Clients that hold connections open cost no thread (--max-connections 2: two answering threads): two that trickle a
// request head a byte a second, two that trickle a body so, 300 whose heads stopped half-way, 60 that say nothing,
// two kept alive after their answers. A health probe behind them is answered at once; the tricklers get 408 when the
// 5 s I/O timeout is up.
// Before, each such connection held a thread: the probe waited about 1 s behind the tricklers (cut off at 1 s while
// others waited), 20 ms per silent connection, and behind 3,000 trickled heads and 256 threads 11.6 s.
TEST_F(CliServe, ClientsThatHoldConnectionsOpenDoNotShutOthersOut) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({"--max-connections", "2", "--quiet"});
  const int port = server->port();
  const auto probe_within = [&](double seconds, const std::string& behind) {
    const auto start = Clock::now();
    Client probe(port);
    EXPECT_EQ(probe.get("/healthz").status, 200) << behind;
    EXPECT_LT(seconds_since(start), seconds) << "a probe waited behind " << behind;
  };
  {
    std::vector<std::unique_ptr<RawConnection>> slow;
    std::atomic<bool> stop{false};
    std::vector<std::thread> tricklers;
    for (int i = 0; i < 4; ++i) {
      slow.push_back(std::make_unique<RawConnection>(port));
      ASSERT_TRUE(slow.back()->connected());
    }
    const auto first_byte = Clock::now();
    for (int i = 0; i < 4; ++i) {
      tricklers.emplace_back([&, i] {
        // 0 and 1 trickle their heads; 2 and 3 send their heads at once and trickle their bodies.
        const std::string head = "POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                 "Content-Length: 200\r\n\r\n";
        RawConnection& c = *slow[static_cast<std::size_t>(i)];
        if (i >= 2 && !c.send(head)) return;
        for (char byte : i < 2 ? head : std::string(200, ' ')) {
          if (stop.load() || !c.send(std::string(1, byte))) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        }
      });
    }
    std::vector<std::unique_ptr<RawConnection>> stalled;
    for (int i = 0; i < 300; ++i) {
      stalled.push_back(std::make_unique<RawConnection>(port));
      ASSERT_TRUE(stalled.back()->send("POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    for (int i = 0; i < 3; ++i) probe_within(1.0, "4 trickling clients and 300 stalled heads");
    for (int i = 0; i < 4; ++i) {
      const std::string got = slow[static_cast<std::size_t>(i)]->receive_answer(10);
      EXPECT_EQ(raw_status(got), 408) << "trickling client " << i << ": " << got;
      EXPECT_GT(seconds_since(first_byte), 4.5) << "a trickling client was cut off before the I/O timeout";
    }
    EXPECT_EQ(raw_status(stalled.back()->receive_answer(5)), 408) << "a stalled head";
    stop = true;
    for (std::thread& t : tricklers) t.join();
  }
  {
    std::vector<std::unique_ptr<RawConnection>> silent;
    for (int i = 0; i < 60; ++i) {
      silent.push_back(std::make_unique<RawConnection>(port));
      ASSERT_TRUE(silent.back()->connected());
    }
    // Two clients each ask once and keep their connections open, and are kept alive (with two threads for 62 open
    // connections, they were closed after their answers).
    RawConnection a(port), b(port);
    for (RawConnection* c : {&a, &b}) {
      ASSERT_TRUE(c->send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
      const std::string got = c->receive_answer(5);
      ASSERT_EQ(raw_status(got), 200) << got;
      EXPECT_NE(got.find("Connection: keep-alive"), std::string::npos) << got;
    }
    probe_within(1.0, "60 silent and 2 kept-alive connections");
    for (RawConnection* c : {&a, &b}) {  // still open, and answered on the same connection
      ASSERT_TRUE(c->send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
      EXPECT_EQ(raw_status(c->receive_answer(5)), 200);
    }
  }
  expect_serving(*server, "after the held connections");
}

// At --max-open-connections, a further connection waits in the listen backlog (it is not accepted, so it takes no
// descriptor the server needs for its own files) and is answered once another closes. auto is the descriptor limit,
// with the soft limit raised to the hard one, less what the server keeps for itself (128, at most half).
TEST_F(CliServe, ConnectionsPastTheOpenLimitWaitForOneToClose) {
  ASSERT_TRUE(succeeded(suite_train()));
  {
    auto server = start({"--max-open-connections", "3", "--max-connections", "2"}, "limit");
    EXPECT_NE(server->log().find("; up to 3 open connections)"), std::string::npos) << server->describe();
    const int port = server->port();
    std::vector<std::unique_ptr<RawConnection>> idle;
    for (int i = 0; i < 3; ++i) {
      idle.push_back(std::make_unique<RawConnection>(port));
      ASSERT_TRUE(idle.back()->connected());
    }
    RawConnection waiting(port);  // connected by the kernel, in the backlog
    ASSERT_TRUE(waiting.connected());
    ASSERT_TRUE(waiting.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(waiting.receive_answer(1.0), "") << "answered past --max-open-connections 3";
    idle.front().reset();
    const std::string got = waiting.receive_answer(5);
    ASSERT_EQ(raw_status(got), 200) << got;
    EXPECT_NE(got.find("\nbertrain_open_connections 3\n"), std::string::npos) << got;
    EXPECT_NE(got.find("\nbertrain_max_open_connections 3\n"), std::string::npos) << got;
    EXPECT_NE(server->log().find(" bertrain serve: 3 connections open (--max-open-connections): new ones wait in the "
                                 "listen backlog until one closes\n"),
              std::string::npos)
        << server->describe();
    idle.clear();
    expect_serving(*server, "after the connection limit");
  }
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max < 1000) GTEST_SKIP() << "the hard descriptor limit is " << limit.rlim_max << ", below 1000";
  const std::vector<std::string> soft_200_hard_1000 = {"/bin/sh", "-c", "ulimit -Sn 200 && ulimit -Hn 1000 && exec \"$@\"",
                                                       "sh"};
  auto raised = start({"--quiet"}, "raised", soft_200_hard_1000);
  EXPECT_NE(raised->log().find("; up to 872 open connections)"), std::string::npos) << raised->describe();
  EXPECT_EQ(raised->stop().code, 0);
  auto low = start({"--quiet"}, "low", {"/bin/sh", "-c", "ulimit -n 200 && exec \"$@\"", "sh"});
  EXPECT_NE(low->log().find("; up to 100 open connections)"), std::string::npos) << low->describe();
  EXPECT_EQ(low->stop().code, 0);
  const RunResult r = testing::run_process(
      {"/bin/sh", "-c", "ulimit -n 200 && exec \"$0\" serve --model \"$1\" --port 0 --device cpu --threads 1 "
                        "--max-open-connections 101",
       binary(), suite_run()},
      {}, 60);
  expect_error(r, "serve: --max-open-connections 101 is more than the descriptor limit allows (ulimit -n 200, less 100 "
                  "the server keeps for its own files): give at most 100, or raise ulimit -n");
}

// An answer the client does not take at once (a large one it does not read yet) is sent on by the listening thread as
// the client reads it: with one answering thread, a probe behind a client that leaves 100,000 rows of predictions
// unread is answered at once (the thread waited up to the 5 s I/O timeout for the client before), and the client
// still gets its whole answer when it reads, on a connection kept alive.
TEST_F(CliServe, ClientsThatDoNotReadTheirAnswersHoldNoThread) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({"--max-connections", "1", "--max-queue", "200000", "--quiet"});
  const int port = server->port();
  constexpr int kRows = 100000;  // about 15 MB of answer: past the 4 MB a socket's send buffer can hold here
  json texts = json::array();
  for (int i = 0; i < kRows; ++i) texts.push_back("image");
  const std::string body = json{{"texts", texts}}.dump();
  RawConnection lazy(port, 4096);
  ASSERT_TRUE(lazy.send("POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body));
  ASSERT_TRUE(lazy.answer_begun(60)) << server->describe();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the socket's buffers fill
  const auto start = Clock::now();
  EXPECT_EQ(Client(port).get("/healthz").status, 200);
  EXPECT_LT(seconds_since(start), 1.0) << "a probe waited behind a client that does not read its answer";
  const std::string got = lazy.receive_answer(10);
  ASSERT_EQ(raw_status(got), 200) << got.substr(0, 300);
  const json answer = json::parse(got.substr(got.find("\r\n\r\n") + 4), nullptr, false);
  ASSERT_TRUE(answer.is_object()) << got.substr(0, 300);
  EXPECT_EQ(answer["results"].size(), static_cast<std::size_t>(kRows));
  EXPECT_EQ(mismatch(answer["results"][kRows - 1], predict_text("image")), "");
  ASSERT_TRUE(lazy.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));  // still kept alive
  EXPECT_EQ(raw_status(lazy.receive_answer(5)), 200);
  expect_serving(*server, "after a client that read its answer late");
}

// The listening thread reads bodies while those it holds are under what the answering threads would hold
// (--max-connections x --max-body-bytes: 1 x 4096 bytes here); past that, the answering thread reads a body itself,
// as before the listening thread read any: a new one whole, or the rest of one begun. Two stalled bodies of 3,000
// bytes fill the budget; a whole request behind them is answered right, so is one of the stalled ones when its last
// 1,000 bytes come (read by the thread), and the other gets 408 at the I/O timeout.
TEST_F(CliServe, BodiesPastTheBudgetAreReadByTheAnsweringThread) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({"--max-connections", "1", "--max-body-bytes", "4096", "--quiet"});
  const int port = server->port();
  std::string body = json{{"texts", {"object detection with yolo"}}}.dump();
  body.resize(4000, ' ');  // JSON may end in white space
  std::vector<std::unique_ptr<RawConnection>> stalled;
  for (int i = 0; i < 2; ++i) {
    stalled.push_back(std::make_unique<RawConnection>(port));
    ASSERT_TRUE(stalled.back()->send("POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                     "Content-Length: 4000\r\nConnection: close\r\n\r\n" + body.substr(0, 3000)));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Client c(port);
  const Answer answer = c.post("/v1/predict", json{{"texts", {"object detection with yolo"}}});
  ASSERT_EQ(answer.status, 200) << answer.describe();
  EXPECT_EQ(answer.parsed()["results"].size(), 1u) << answer.describe();
  ASSERT_TRUE(stalled[0]->send(body.substr(3000)));
  const std::string finished = stalled[0]->receive_all(10);
  ASSERT_EQ(raw_status(finished), 200) << finished;
  EXPECT_NE(finished.find("\"results\""), std::string::npos) << finished;
  EXPECT_EQ(raw_status(stalled[1]->receive_answer(10)), 408);
  expect_serving(*server, "after the stalled bodies");
}

// A model whose scores are not finite (finite weights that overflow float32 on the way): its requests are answered
// 500 saying so, and the server lives on (it answered 200 with null probabilities).
TEST_F(CliServe, ScoresThatAreNotFiniteAreAnswered500) {
  ASSERT_TRUE(succeeded(suite_train()));
  fs::copy(suite_run(), path("spoiled"), fs::copy_options::recursive);
  make_scores_overflow(path("spoiled/best/model.safetensors"));
  ServeProcess server(binary(), {"--model", path("spoiled"), "--port", "0", "--device", "cpu", "--quiet"},
                      path("spoiled.log"));
  ASSERT_TRUE(server.wait_ready(60)) << server.describe();
  Client c(server.port());
  const Answer a = c.post("/v1/predict", json{{"texts", {"object detection", "text classification"}}});
  expect_error_answer(a, 500, "gives scores that are not finite for text 0 of the request", "a spoiled model");
  EXPECT_EQ(c.get("/healthz").status, 200);
  EXPECT_EQ(c.get("/readyz").status, 200);  // the engine did not fail: the next request is answered as well
  expect_error_answer(c.post("/v1/predict", json{{"texts", {"graph neural network"}}}), 500, "not finite", "again");
}

// ---- overload -------------------------------------------------------------------------------------------------

// `count` clients released together, client t POSTing rows[t]'s text alone to /v1/predict: their answers, by client.
std::vector<Answer> burst_of_single_rows(int port, const std::vector<Row>& rows, int count) {
  std::vector<Answer> answers(static_cast<std::size_t>(count));
  std::atomic<bool> go{false};
  std::vector<std::thread> clients;
  for (int t = 0; t < count; ++t) {
    clients.emplace_back([&, t] {
      Client c(port);
      while (!go.load()) std::this_thread::yield();
      answers[static_cast<std::size_t>(t)] = c.post("/v1/predict", json{{"texts", {text_of(rows[static_cast<std::size_t>(t)])}}});
    });
  }
  go = true;
  for (std::thread& t : clients) t.join();
  return answers;
}


// A full queue answers 503 with Retry-After (the rest 200 and right); a request with more rows than the queue can
// ever hold is 413; the server stays healthy.
TEST_F(CliServe, FullQueueAnswers503WithRetryAfter) {
  ASSERT_TRUE(succeeded(suite_train()));
  // Rows wait up to 500 ms for a batch of 64 that never fills: 4 queued rows fill the queue meanwhile.
  auto server = start({"--max-queue", "4", "--max-batch-size", "64", "--max-wait-ms", "500", "--quiet"});
  ASSERT_GT(server->port(), 0);
  const std::vector<Row> rows = synthetic_rows();
  constexpr int kClients = 16;
  const std::vector<Answer> answers = burst_of_single_rows(server->port(), rows, kClients);
  const int ok = check_burst_answers(answers, rows, [](const Answer& a, const std::string& who) {
    expect_error_answer(a, 503, "--max-queue", who);
    EXPECT_FALSE(a.header("Retry-After").empty()) << "503 without Retry-After: " << a.describe();
  });
  const int full = kClients - ok;
  EXPECT_GE(ok, 4) << "the queue holds 4 rows";
  EXPECT_GE(full, 1) << "16 rows at once into a queue of 4 with a 500 ms wait: none refused";
  Client c(server->port());
  json five = json::array();
  for (int i = 0; i < 5; ++i) five.push_back(text_of(rows[static_cast<std::size_t>(i)]));
  expect_error_answer(c.post("/v1/predict", json{{"texts", five}}), 413, "--max-queue", "5 rows, queue of 4");
  EXPECT_EQ(c.get("/readyz").status, 200);
  expect_serving(*server, "after the overload");
}

// More than --max-concurrent-requests predictions at once: 429 for the excess, 200 for the others.
TEST_F(CliServe, TooManyConcurrentRequestsAnswer429) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({"--max-concurrent-requests", "1", "--max-wait-ms", "300", "--quiet"});
  ASSERT_GT(server->port(), 0);
  const std::vector<Row> rows = synthetic_rows();
  constexpr int kClients = 6;
  const std::vector<Answer> answers = burst_of_single_rows(server->port(), rows, kClients);
  const int ok = check_burst_answers(answers, rows, [](const Answer& a, const std::string& who) {
    expect_error_answer(a, 429, "--max-concurrent-requests", who);
  });
  const int refused = kClients - ok;
  EXPECT_GE(ok, 1);
  EXPECT_GE(refused, 1) << "6 requests held 300 ms each with --max-concurrent-requests 1: none refused";
  // The probes are not predictions: they answer while one is in flight.
  expect_serving(*server, "after the 429s");
}

// ---- the API key ----------------------------------------------------------------------------------------------

TEST_F(CliServe, ApiKeyGuardsEverythingButTheHealthProbes) {
  ASSERT_TRUE(succeeded(suite_train()));
  spit(path("key"), "s3cret-key-0123\n");
  auto server = start({"--api-key-file", path("key")});
  ASSERT_GT(server->port(), 0);
  Client c(server->port());
  const json body{{"texts", {text_of(synthetic_rows()[1])}}};
  const httplib::Headers right{{"Authorization", "Bearer s3cret-key-0123"}};

  const Answer none = c.post("/v1/predict", body);
  expect_error_answer(none, 401, "Authorization", "no key");
  EXPECT_NE(none.header("WWW-Authenticate").find("Bearer"), std::string::npos) << none.describe();
  for (const char* wrong : {"Bearer nope", "Bearer s3cret-key-012", "Bearer s3cret-key-01234",
                                   "Bearer S3CRET-KEY-0123", "Basic czNjcmV0", "s3cret-key-0123", "Bearers3cret-key-0123",
                                   "Bearer "}) {
    const Answer a = c.post("/v1/predict", body, {{"Authorization", wrong}});
    EXPECT_EQ(a.status, 401) << "'" << wrong << "': " << a.describe();
    EXPECT_FALSE(a.header("WWW-Authenticate").empty()) << wrong;
  }
  // The scheme's name is case-insensitive (RFC 9110), the key is not.
  for (const char* scheme : {"bearer", "BEARER"}) {
    const Answer a = c.post("/v1/predict", body, {{"Authorization", std::string(scheme) + " s3cret-key-0123"}});
    EXPECT_EQ(a.status, 200) << scheme << ": " << a.describe();
  }
  const Answer ok = c.post("/v1/predict", body, right);
  ASSERT_EQ(ok.status, 200) << ok.describe();
  EXPECT_EQ(mismatch(ok.parsed()["results"][0], reference().at(text_of(synthetic_rows()[1]))), "");
  for (const char* guarded : {"/run_id/", "/v1/model", "/metrics", "/info"}) {
    EXPECT_EQ(c.get(guarded).status, 401) << guarded;
    EXPECT_EQ(c.get(guarded, right).status, 200) << guarded;
  }
  EXPECT_EQ(c.post("/predict/", json{{"title", "a"}}).status, 401);
  EXPECT_EQ(c.post("/predict", json{{"inputs", "a"}}).status, 401);
  EXPECT_EQ(c.post("/", json{{"inputs", "a"}}).status, 401);  // GET / is a probe, POST / a prediction
  EXPECT_EQ(c.post("/invocations", json{{"inputs", "a"}}).status, 401);
  EXPECT_EQ(c.post("/evaluate/", json{{"dataset", "x.csv"}}).status, 401);
  for (const char* probe : {"/", "/healthz", "/readyz", "/health", "/ping"}) EXPECT_EQ(c.get(probe).status, 200) << probe;
  EXPECT_EQ(server->log().find("s3cret-key-0123"), std::string::npos) << "the key is in the log";
  const Answer unknown = c.get("/nope");  // unknown paths are 404 or 401; never a 200
  EXPECT_TRUE(unknown.status == 404 || unknown.status == 401) << unknown.describe();
}

// --cors-allow-origin: a browser's preflight is answered without the API key; every answer to an allowed origin,
// a refusal too, names it; other origins get no CORS header (their pages cannot read the answers) and a 403
// preflight. Without the flag there is no CORS header and OPTIONS is 405, as before.
TEST_F(CliServe, CorsLetsTheGivenOriginsReadAnswers) {
  ASSERT_TRUE(succeeded(suite_train()));
  spit(path("key"), "s3cret-key-0123\n");
  auto server = start({"--api-key-file", path("key"), "--cors-allow-origin", "https://app.example.com,http://localhost:3000"});
  ASSERT_GT(server->port(), 0);
  Client c(server->port());
  const httplib::Headers app{{"Origin", "https://app.example.com"}};
  const Answer preflight = c.options("/v1/predict", {{"Origin", "https://app.example.com"},
                                                     {"Access-Control-Request-Method", "POST"},
                                                     {"Access-Control-Request-Headers", "authorization, content-type"}});
  EXPECT_EQ(preflight.status, 204) << preflight.describe();
  EXPECT_EQ(preflight.header("Access-Control-Allow-Origin"), "https://app.example.com") << preflight.describe();
  EXPECT_EQ(preflight.header("Access-Control-Allow-Methods"), "POST");
  EXPECT_EQ(preflight.header("Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_EQ(preflight.header("Content-Length"), "") << "a 204 has none (RFC 9110 8.6)";
  // A preflight to Made-With-ML's path without its slash: answered, where the request itself is redirected (a
  // browser fails a preflight that redirects).
  const Answer unslashed = c.options("/evaluate", {{"Origin", "https://app.example.com"},
                                                   {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(unslashed.status, 204) << unslashed.describe();
  EXPECT_EQ(unslashed.header("Access-Control-Allow-Methods"), "POST");

  EXPECT_EQ(c.options("/v1/model", {{"Origin", "http://localhost:3000"}, {"Access-Control-Request-Method", "GET"}})
                .header("Access-Control-Allow-Methods"),
            "GET, HEAD");
  const Answer evil_preflight = c.options("/v1/predict", {{"Origin", "https://evil.example"},
                                                          {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(evil_preflight.status, 403) << evil_preflight.describe();
  EXPECT_EQ(evil_preflight.header("Access-Control-Allow-Origin"), "");

  const json body{{"texts", {text_of(synthetic_rows()[1])}}};
  httplib::Headers keyed = app;
  keyed.emplace("Authorization", "Bearer s3cret-key-0123");
  const Answer ok = c.post("/v1/predict", body, keyed);
  ASSERT_EQ(ok.status, 200) << ok.describe();
  EXPECT_EQ(ok.header("Access-Control-Allow-Origin"), "https://app.example.com");
  EXPECT_EQ(ok.header("Vary"), "Origin");
  EXPECT_EQ(mismatch(ok.parsed()["results"][0], reference().at(text_of(synthetic_rows()[1]))), "");
  const Answer redirected = c.post("/evaluate", json{{"dataset", "x.csv"}}, keyed);
  EXPECT_EQ(redirected.status, 307) << redirected.describe();
  EXPECT_EQ(redirected.header("Access-Control-Allow-Origin"), "https://app.example.com");  // the browser follows it
  const Answer no_key = c.post("/v1/predict", body, app);
  EXPECT_EQ(no_key.status, 401);
  EXPECT_EQ(no_key.header("Access-Control-Allow-Origin"), "https://app.example.com") << no_key.describe();
  const Answer evil = c.post("/v1/predict", body, {{"Origin", "https://evil.example"}, {"Authorization", "Bearer s3cret-key-0123"}});
  EXPECT_EQ(evil.status, 200);  // the server answers; the browser keeps the answer from the page
  EXPECT_EQ(evil.header("Access-Control-Allow-Origin"), "");
  EXPECT_EQ(c.get("/healthz", app).header("Access-Control-Allow-Origin"), "https://app.example.com");
  server->stop();

  auto plain = start({"--quiet"}, "plain");
  Client p(plain->port());
  const Answer no_cors = p.options("/v1/predict", {{"Origin", "https://app.example.com"},
                                                    {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(no_cors.status, 405) << no_cors.describe();
  EXPECT_EQ(no_cors.header("Access-Control-Allow-Origin"), "");
  EXPECT_EQ(p.get("/healthz", app).header("Access-Control-Allow-Origin"), "");
  EXPECT_EQ(p.get("/healthz", app).header("Vary"), "");
}

// An empty (or blank) key file would accept an empty key: the server refuses to start, exit 2, one line.
TEST_F(CliServe, EmptyApiKeyFileIsAStartupError) {
  ASSERT_TRUE(succeeded(suite_train()));
  for (const std::string& contents : {std::string(""), std::string("\n"), std::string("a\nb\n")}) {
    spit(path("key"), contents);
    ServeProcess server(binary(), {"--model", suite_run(), "--port", "0", "--device", "cpu", "--api-key-file", path("key")},
                        path("empty-key.log"));
    const ServeProcess::Exit e = server.wait_exit(30);
    ASSERT_TRUE(e.exited) << server.describe();
    EXPECT_EQ(e.code, 2) << server.describe();
    EXPECT_TRUE(is_one_line(server.log())) << server.describe();
    EXPECT_NE(server.log().find("--api-key-file"), std::string::npos) << server.describe();
    EXPECT_EQ(server.log().find("ready on"), std::string::npos) << server.describe();
  }
  ServeProcess missing(binary(), {"--model", suite_run(), "--port", "0", "--device", "cpu", "--api-key-file",
                                  path("no-such-key")},
                       path("missing-key.log"));
  const ServeProcess::Exit e = missing.wait_exit(30);
  EXPECT_EQ(e.code, 2) << missing.describe();
  EXPECT_NE(missing.log().find("--api-key-file"), std::string::npos) << missing.describe();
}

// ---- /evaluate/ -----------------------------------------------------------------------------------------------

TEST_F(CliServe, EvaluateIsDisabledWithoutARoot) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({});
  ASSERT_GT(server->port(), 0);
  Client c(server->port());
  expect_error_answer(c.post("/evaluate/", json{{"dataset", data()}}), 403, "--evaluate-root", "no root");
}

// POST /evaluate/ scores the arg-max of the logits, as `evaluate` does (tests/tools/model_variants.h: two logits an
// ulp apart, one probability): every row is predicted the second tag, whose recall is then 1.
TEST_F(CliServe, EvaluatePredictsTheArgMaxOfTheLogits) {
  save_logit_tie_model(model(), dir_ / "tie");
  fs::create_directories(path("root"));
  fs::copy_file(data(), path("root/data.csv"));
  ServeProcess server(binary(), {"--model", path("tie"), "--port", "0", "--device", "cpu", "--quiet",
                                 "--evaluate-root", path("root")},
                      path("tie.log"));
  ASSERT_TRUE(server.wait_ready(60)) << server.describe();
  Client c(server.port());
  const Answer a = c.post("/evaluate/", json{{"dataset", "data.csv"}});
  ASSERT_EQ(a.status, 200) << a.describe();
  const json results = a.parsed()["results"];
  EXPECT_EQ(results["per_class"][kTags[1]]["recall"], 1.0) << a.body;
  const RunResult evaluated = run({"evaluate", "--model", path("tie"), "--data", path("root/data.csv")});
  ASSERT_TRUE(succeeded(evaluated)) << evaluated.describe();
  EXPECT_EQ(results["confusion_matrix"], json::parse(evaluated.out)["confusion_matrix"]);
}

// Inside --evaluate-root: evaluate's results; outside it, by "..", an absolute path or a link: 403; missing: 404.
TEST_F(CliServe, EvaluateReadsOnlyInsideItsRoot) {
  ASSERT_TRUE(succeeded(suite_train()));
  fs::create_directories(path("root/sub"));
  fs::copy_file(data(), path("root/data.csv"));
  fs::copy_file(data(), path("secret.csv"));
  fs::create_symlink(path("secret.csv"), path("root/link.csv"));
  fs::create_symlink("../../secret.csv", path("root/sub/relative-link.csv"));
  fs::create_directory_symlink(dir_, path("root/sub/up"));
  spit(path("root/garbage.csv"), std::string("\x00\x01\xff\xfe binary,\"\n", 14));
  auto server = start({"--evaluate-root", path("root")});
  ASSERT_GT(server->port(), 0);
  Client c(server->port());

  const RunResult evaluated = run({"evaluate", "--model", suite_run(), "--data", path("root/data.csv"), "--device", "cpu",
                                   "--out", path("eval.json")});
  ASSERT_TRUE(succeeded(evaluated));
  const json want = json::parse(slurp(path("eval.json")));
  for (const std::string& inside : {std::string("data.csv"), path("root/data.csv"), std::string("sub/../data.csv")}) {
    const Answer a = c.post("/evaluate/", json{{"dataset", inside}});
    ASSERT_EQ(a.status, 200) << inside << ": " << a.describe();
    const json got = a.parsed();
    ASSERT_TRUE(got.is_object() && got.contains("results") && got["results"].contains("overall")) << a.body;
    for (const char* key : {"precision", "recall", "f1", "num_samples"}) {
      EXPECT_NEAR(got["results"]["overall"][key].get<double>(), want["overall"][key].get<double>(), 1e-9) << key;
    }
    EXPECT_EQ(got["results"]["per_class"].size(), want["per_class"].size()) << a.body;
    EXPECT_EQ(got["results"]["num_rows"], want["num_rows"]) << a.body;
  }
  for (const std::string& outside : {std::string("../secret.csv"), path("secret.csv"), std::string("link.csv"),
                                     std::string("sub/relative-link.csv"), std::string("sub/up/secret.csv"),
                                     std::string("/etc/passwd"), std::string("../root/../secret.csv")}) {
    const Answer a = c.post("/evaluate/", json{{"dataset", outside}});
    expect_error_answer(a, 403, "--evaluate-root", outside);
  }
  expect_error_answer(c.post("/evaluate/", json{{"dataset", "missing.csv"}}), 404, "missing.csv", "missing");
  expect_error_answer(c.post("/evaluate/", json{{"dataset", "https://example.com/holdout.csv"}}), 404,
                      "URLs are not fetched", "a URL, as Made-With-ML's evaluate.py takes");
  expect_error_answer(c.post("/evaluate/", json{{"dataset", "sub"}}), 400, "sub", "a directory");
  const Answer garbage = c.post("/evaluate/", json{{"dataset", "garbage.csv"}});
  expect_error_answer(garbage, 400, "garbage.csv", "not a dataset");
  // Said as the client named it: neither the server's path to the root nor a place in bertrain's source.
  EXPECT_EQ(garbage.body.find(path("root")), std::string::npos) << garbage.body;
  EXPECT_EQ(garbage.body.find(".cpp:"), std::string::npos) << garbage.body;
  expect_error_answer(c.post("/evaluate/", json{{"dataset", 5}}), 400, "dataset", "mistyped");
  // A NUL ends the path where the file system reads it: data.csv\0../x would have evaluated data.csv.
  expect_error_answer(c.post("/evaluate/", json{{"dataset", std::string("data.csv\0../../outside.csv", 26)}}), 400,
                      "holds a NUL character", "NUL");
  expect_error_answer(c.post("/evaluate/", json::object()), 400, "dataset", "missing field");
  expect_serving(*server, "after the evaluations");
}

// ---- lifecycle ------------------------------------------------------------------------------------------------

// SIGTERM while 8 clients send requests: every answer is a full, right 200 or a clean 503; after the signal a
// client may find the door shut, but the requests waiting in the engine's queue when the signal came are answered
// (200), no request the server answered (its access log) is lost on the way, and the server exits 0 within
// seconds and says it stopped. Batches wait 100 ms so that requests are queued when the signal comes.
TEST_F(CliServe, SigtermDuringLoadLosesNoAcceptedRequest) {
  ASSERT_TRUE(succeeded(suite_train()));
  const std::map<std::string, json>& want = reference();
  auto server = start({"--max-wait-ms", "100", "--max-batch-size", "64"});
  ASSERT_GT(server->port(), 0);
  const std::vector<Row> rows = synthetic_rows();
  constexpr int kClients = 8;
  const auto now_ns = [] { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); };
  std::atomic<long long> signal_ns{std::numeric_limits<long long>::max()};
  std::atomic<long> ok{0};
  std::mutex mutex;
  std::vector<std::string> failures;
  struct Sent {
    long long sent_ns, answered_ns;
    int status;
  };
  std::vector<Sent> requests;
  const auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    failures.push_back(what);
  };
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      Client c(server->port());
      for (int i = 0; Clock::now() < deadline; ++i) {
        const int n = 1 + (t + i) % 3;
        std::vector<std::string> texts;
        for (int k = 0; k < n; ++k) texts.push_back(text_of(rows[static_cast<std::size_t>((t * 11 + i * 3 + k) % kRows)]));
        const long long sent = now_ns();
        const Answer a = c.post("/v1/predict", json{{"texts", texts}});
        const long long answered = now_ns();
        {
          std::lock_guard<std::mutex> lock(mutex);
          requests.push_back({sent, answered, a.status});
        }
        const std::string where = "client " + std::to_string(t) + " request " + std::to_string(i) + ": ";
        if (a.status == 0) {
          // No answer: only once the server was told to stop (it closes its connections as it drains).
          if (answered < signal_ns.load()) fail(where + "no answer before SIGTERM: " + a.error);
          return;
        }
        if (a.status == 503) {
          const json body = a.parsed();
          if (answered < signal_ns.load() || !body.is_object() ||
              body.value("error", "").find("shutting down") == std::string::npos) {
            fail(where + "503 that is not a clean 'shutting down' after SIGTERM: " + a.describe());
          }
          return;
        }
        if (a.status != 200) {
          fail(where + a.describe());
          return;
        }
        const json got = a.parsed();
        if (!got.is_object() || !got["results"].is_array() || got["results"].size() != texts.size()) {
          fail(where + "not a full answer: " + a.body);
          return;
        }
        for (std::size_t k = 0; k < texts.size(); ++k) {
          const std::string why = mismatch(got["results"][k], want.at(texts[k]));
          if (!why.empty()) fail(where + why);
        }
        ++ok;
      }
      fail("client " + std::to_string(t) + " still sending after 30 s");
    });
  }
  // Under load; then, the moment /metrics shows requests waiting in the queue, the signal.
  const auto load_start = Clock::now();
  while (ok.load() < 30 && seconds_since(load_start) < 20) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const long ok_before = ok.load();
  Client scraper(server->port());
  long long scrape_start = 0, scrape_end = 0;
  double queued = 0;
  while (seconds_since(load_start) < 25) {
    scrape_start = now_ns();
    queued = metric_value(scraper.get("/metrics").body, "bertrain_queue_requests");
    scrape_end = now_ns();
    if (queued >= 4) break;
  }
  signal_ns = now_ns();
  const auto stop_start = Clock::now();
  const ServeProcess::Exit e = server->stop(15);
  const double stop_seconds = seconds_since(stop_start);
  for (std::thread& t : clients) t.join();

  EXPECT_GE(ok_before, 30) << "the load never got going";
  ASSERT_GE(queued, 4) << "never 4 requests in the queue: the check below could not fail";
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures; the first: " << failures.front();
  ASSERT_TRUE(e.exited) << "still running 15 s after SIGTERM\n" << server->describe();
  EXPECT_EQ(e.code, 0) << server->describe();
  EXPECT_EQ(e.signal, 0) << server->describe();
  EXPECT_LT(stop_seconds, 5.0) << server->describe();
  const std::string log = server->log();
  EXPECT_NE(log.find("bertrain serve: stopped"), std::string::npos) << server->describe();
  // The requests queued at the scrape were sent before it ended and answered after it began: all of them 200.
  long drained = 0, cut = 0, after_signal = 0;
  for (const Sent& r : requests) {
    const bool across = r.sent_ns < scrape_end && r.answered_ns > scrape_start;
    drained += across && r.status == 200;
    cut += across && r.status != 200;
    after_signal += r.status == 200 && r.answered_ns > signal_ns.load();
  }
  EXPECT_GE(drained, static_cast<long>(queued)) << queued << " requests were queued when SIGTERM came; " << cut
                                                << " of those around it got no 200";
  // Every 200 the server wrote reached its client.
  long logged = 0;
  for (const std::string& line : lines_of(log)) logged += line.find("\"POST /v1/predict\" 200 ") != std::string::npos;
  EXPECT_EQ(logged, ok.load()) << "the server answered " << logged << " requests with 200, the clients got " << ok.load();
  std::printf("[ serve    ] SIGTERM with %g requests queued, after %ld answers; %ld answered after it (%ld across the "
              "scrape, %ld cut); %ld in all; stopped in %.2f s\n",
              queued, ok_before, after_signal, drained, cut, ok.load(), stop_seconds);
}

// While the model loads and warms up, /healthz answers, /readyz and the predictions say 503; once the ready line
// is out, /readyz is 200. (A warm-up pass of 4096 rows of 40 tokens takes long enough to be seen.)
TEST_F(CliServe, ReadyzWaitsForTheWarmUp) {
  ASSERT_TRUE(succeeded(suite_train()));
  // A free port, known before the ready line (which names it only once ready).
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  ::close(probe);
  ServeProcess server(binary(),
                      {"--model", suite_run(), "--port", std::to_string(port), "--device", "cpu", "--max-batch-size",
                       "4096", "--max-batch-tokens", "163840", "--max-queue", "8192"},
                      path("warm-up.log"));
  Client c(port);
  const auto start = Clock::now();
  Answer health;
  while (seconds_since(start) < 30 && server.running()) {
    health = c.get("/healthz");
    if (health.status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(health.status, 200) << health.describe() << "\n" << server.describe();
  const bool still_loading = server.log().find("ready on") == std::string::npos;
  const Answer ready = c.get("/readyz");
  const Answer predicted = c.post("/v1/predict", json{{"texts", {"image camera"}}});
  if (still_loading && server.log().find("ready on") == std::string::npos) {
    expect_error_answer(ready, 503, "loading", "/readyz while warming up");
    expect_error_answer(predicted, 503, "loading", "a prediction while warming up");
  } else {
    ADD_FAILURE() << "the warm-up ended before the check (" << seconds_since(start) << " s): it cannot see /readyz's 503";
  }
  ASSERT_TRUE(server.wait_ready(60)) << server.describe();
  EXPECT_EQ(c.get("/readyz").status, 200);
  expect_serving(server, "after the warm-up");
}

// SIGINT, SIGUSR1 (what train and predict stop on) and SIGHUP drain as SIGTERM does: exit 0, "stopped".
TEST_F(CliServe, SigintSigusr1AndSighupStopCleanly) {
  ASSERT_TRUE(succeeded(suite_train()));
  for (int sig : {SIGINT, SIGUSR1, SIGHUP}) {
    auto server = start({}, "serve-" + std::to_string(sig));
    ASSERT_GT(server->port(), 0);
    expect_serving(*server, "before signal " + std::to_string(sig));
    const ServeProcess::Exit e = server->stop(10, sig);
    ASSERT_TRUE(e.exited) << "signal " << sig << "\n" << server->describe();
    EXPECT_EQ(e.code, 0) << server->describe();
    EXPECT_NE(server->log().find("bertrain serve: stopped"), std::string::npos) << server->describe();
  }
}

// Under `nohup` SIGHUP is ignored, and stays so: a closed terminal does not stop the server (blocked for sigwait, the
// kernel queued it instead of dropping it, and the server drained and stopped).
TEST_F(CliServe, ASighupIgnoredAtStartStaysIgnored) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({}, "nohup", {"/bin/sh", "-c", "trap '' HUP; exec \"$0\" \"$@\""});
  ASSERT_GT(server->port(), 0);
  ASSERT_EQ(::kill(server->pid(), SIGHUP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the signal watch looks every 100 ms
  ASSERT_TRUE(server->running()) << server->describe();
  expect_serving(*server, "after SIGHUP under nohup");
  const ServeProcess::Exit e = server->stop(10);
  ASSERT_TRUE(e.exited) << server->describe();
  EXPECT_EQ(e.code, 0) << server->describe();
}

// A client that has sent half a request when the server stops does not fail the drain: every accepted request is
// answered, so once --drain-timeout is up the half-sent request is answered 503 and the server stops cleanly (exit 0).
// Before, it exited 1 saying "0 requests still unanswered" whenever --drain-timeout was below the 5 s I/O timeout.
TEST_F(CliServe, ARequestStillArrivingWhenTheDrainEndsIsAnswered503) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({"--drain-timeout", "1"});
  ASSERT_GT(server->port(), 0);
  RawConnection c(server->port());
  ASSERT_TRUE(c.send("POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: 100\r\n\r\n{\"texts\": [\"object"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its head is read: the request has begun
  const auto start = Clock::now();
  const ServeProcess::Exit e = server->stop(10);
  const double seconds = seconds_since(start);
  ASSERT_TRUE(e.exited) << server->describe();
  EXPECT_EQ(e.code, 0) << server->describe();
  EXPECT_LT(seconds, 1 + 2 + 1.0) << server->describe();  // the drain, its 2 s grace, a second for a loaded machine
  EXPECT_NE(server->log().find("answered 1 requests still arriving after --drain-timeout 1 s with 503"),
            std::string::npos) << server->describe();
  EXPECT_NE(server->log().find("bertrain serve: stopped"), std::string::npos) << server->describe();
  const std::string got = c.receive_answer(5);
  EXPECT_EQ(raw_status(got), 503) << got;
}

// Connection threads the system will not start are a startup error naming --max-connections, before the ready line
// (cpp-httplib started them after it, on the listener thread: an uncaught exception, exit 134 after "ready"). A 3 GB
// address space holds a few hundred of their 8 MB stacks, not 2000. (Not under AddressSanitizer, whose shadow
// memory needs more address space than that.)
TEST_F(CliServe, ConnectionThreadsTheSystemWillNotStartAreAStartupError) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit this test sets";
#endif
  ASSERT_TRUE(succeeded(suite_train()));
  const RunResult r = testing::run_process(
      {"/bin/sh", "-c", "ulimit -v 3000000 && exec \"$0\" serve --model \"$1\" --port 0 --device cpu --threads 1 "
                        "--max-connections 2000",
       binary(), suite_run()},
      {}, 60);
  expect_error(r, "cannot start 2000 answering threads (--max-connections 2000): the system started ");
  EXPECT_EQ(r.err.find("ready"), std::string::npos) << r.describe();
}

// A port in use, a missing model and impossible limits: exit 2 with one line naming the culprit, before ready.
TEST_F(CliServe, StartupErrorsExit2WithOneLine) {
  ASSERT_TRUE(succeeded(suite_train()));
  const int taken = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(taken, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(taken, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  // A single-label model without the label "other": an explicit --threshold needs --other-label, as predict's.
  std::vector<Row> three_tags = synthetic_rows();
  three_tags.erase(std::remove_if(three_tags.begin(), three_tags.end(), [](const Row& r) { return r.tag == "other"; }),
                   three_tags.end());
  spit(path("three.csv"), to_csv(three_tags));
  ASSERT_TRUE(succeeded(run({"train", "--model", model(), "--train-data", path("three.csv"), "--out", path("three"),
                             "--epochs", "1", "--batch-size", "8", "--quiet"})));

  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--model", suite_run(), "--port", port, "--device", "cpu"}, "--port " + port},
      {{"--model", path("no-such-run"), "--port", "0", "--device", "cpu"}, "no-such-run"},
      {{"--model", suite_run(), "--port", "0", "--device", "cpu", "--max-batch-tokens", "10"}, "--max-batch-tokens"},
      {{"--model", suite_run(), "--port", "70000", "--device", "cpu"}, "--port"},
      {{"--model", suite_run(), "--port", "0", "--device", "cpu", "--max-batch-size", "0"}, "--max-batch-size"},
      {{"--model", suite_run(), "--port", "0", "--device", "cpu", "--max-batch-size", "99999999999"},
       "--max-batch-size must be between 1 and 65536"},
      {{"--model", suite_run(), "--port", "0", "--device", "cpu", "--max-body-bytes", "3000000000"},
       "--max-body-bytes must be between 1 and 2147483647"},
      {{"--model", suite_run(), "--port", "0", "--device", "cpu", "--evaluate-root", path("no-such-dir")}, "--evaluate-root"},
      {{"--model", path("three"), "--port", "0", "--device", "cpu", "--threshold", "0.9"},
       "--threshold predicts the label 'other' below it, but the model's labels are"},
      {{"--model", suite_run(), "--port", "0", "--device", "cpu", "--other-label", ""}, "--other-label is empty"},
      {{"--model", suite_run(), "--host", "999.1.1.1", "--port", "0", "--device", "cpu"},
       "--host 999.1.1.1 --port 0 (not an address of this machine"},
      {{"--model", suite_run(), "--port", "0", "--device", "cpu", "--max-connections", "10001"},
       "--max-connections must be between 1 and 10000, got 10001"},
      {{"--model", suite_run(), "--port", "0", "--device", "cpu", "--max-connections", "0"},
       "--max-connections must be between 1 and 10000, got 0"},
  };
  for (const Case& k : cases) {
    ServeProcess server(binary(), k.args, path("startup.log"));
    const ServeProcess::Exit e = server.wait_exit(30);
    ASSERT_TRUE(e.exited) << k.needle << "\n" << server.describe();
    EXPECT_EQ(e.code, 2) << k.needle << "\n" << server.describe();
    EXPECT_TRUE(is_one_line(server.log())) << k.needle << "\n" << server.describe();
    EXPECT_NE(server.log().find(k.needle), std::string::npos) << k.needle << "\n" << server.describe();
  }
  ::close(taken);

  // The port of a running bertrain serve is in use too: a second server must not share it (SO_REUSEPORT would
  // have the kernel spread connections over both).
  auto first = start({"--quiet"}, "first");
  ASSERT_GT(first->port(), 0);
  ServeProcess second(binary(), {"--model", suite_run(), "--port", std::to_string(first->port()), "--device", "cpu"},
                      path("second.log"));
  ASSERT_FALSE(second.wait_ready(30)) << "a second server started on the port of the first\n" << second.describe();
  const ServeProcess::Exit e = second.wait_exit(10);
  ASSERT_TRUE(e.exited) << second.describe();
  EXPECT_EQ(e.code, 2) << second.describe();
  EXPECT_NE(second.log().find("--port " + std::to_string(first->port())), std::string::npos) << second.describe();
  expect_serving(*first, "after a second server tried its port");
}

// ---- /metrics -------------------------------------------------------------------------------------------------

// Prometheus text format 0.0.4: every sample's family has one # TYPE line before its samples; histograms are
// cumulative and end in +Inf = _count; the requests just made are counted by path and code (unknown paths as
// "other"). The text is kept in the test's directory (and copied to $BERTRAIN_SERVE_METRICS_OUT when set) for
// tests/reference/check_prometheus_metrics.py.
TEST_F(CliServe, MetricsAreWellFormedPrometheusText) {
  ASSERT_TRUE(succeeded(suite_train()));
  auto server = start({});
  ASSERT_GT(server->port(), 0);
  Client c(server->port());
  ASSERT_EQ(c.get("/").status, 200);
  ASSERT_EQ(c.get("/healthz").status, 200);
  ASSERT_EQ(c.get("/v1/model").status, 200);
  ASSERT_EQ(c.post("/v1/predict", json{{"texts", {"image camera", "docker pipeline"}}}).status, 200);
  ASSERT_EQ(c.post("/predict", json{{"inputs", "bert"}}).status, 200);
  ASSERT_EQ(c.post("/v1/predict", "{").status, 400);
  ASSERT_EQ(c.get("/nope?a=\"b\"").status, 404);
  ASSERT_EQ(c.get("/predict/").status, 405);
  const Answer m = c.get("/metrics");
  ASSERT_EQ(m.status, 200) << m.describe();
  EXPECT_EQ(m.header("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u) << m.header("Content-Type");
  spit(path("metrics.txt"), m.body);
  if (const char* out = std::getenv("BERTRAIN_SERVE_METRICS_OUT"); out != nullptr && *out != '\0') {
    spit(out, m.body);
  }
  ASSERT_FALSE(m.body.empty());
  EXPECT_EQ(m.body.back(), '\n');

  static const std::regex type_line(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
  static const std::regex help_line(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .*$)");
  static const std::regex sample_line(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*)?\})? (\S+)$)");
  std::map<std::string, std::string> types;
  std::set<std::string> sampled;
  int samples = 0;
  for (const std::string& line : lines_of(m.body)) {
    std::smatch g;
    if (std::regex_match(line, g, type_line)) {
      EXPECT_EQ(types.count(g[1].str()), 0u) << "two TYPE lines for " << g[1];
      EXPECT_EQ(sampled.count(g[1].str()), 0u) << "TYPE of " << g[1] << " after its samples";
      types[g[1].str()] = g[2].str();
      continue;
    }
    if (std::regex_match(line, help_line)) continue;
    ASSERT_NE(line.rfind('#', 0), 0u) << "a comment that is neither HELP nor TYPE: " << line;
    ASSERT_TRUE(std::regex_match(line, g, sample_line)) << "not a sample line: " << line;
    ++samples;
    const std::string name = g[1].str();
    std::string family = name;
    if (types.count(name) == 0) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s = suffix;
        if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
          family = name.substr(0, name.size() - s.size());
          break;
        }
      }
    }
    ASSERT_EQ(types.count(family), 1u) << "no # TYPE line for the family of " << line;
    if (family != name) {
      EXPECT_EQ(types[family], "histogram") << line;
    }
    sampled.insert(family);
    const std::string value = g[g.size() - 1].str();
    char* end = nullptr;
    std::strtod(value.c_str(), &end);
    EXPECT_TRUE(*end == '\0' || value == "+Inf" || value == "-Inf" || value == "NaN") << "value of " << line;
  }
  EXPECT_GT(samples, 20);
  for (const char* family : {"bertrain_http_requests_total", "bertrain_http_request_duration_seconds", "bertrain_batch_rows",
                             "bertrain_batch_tokens", "bertrain_queue_rows", "bertrain_rows_per_second",
                             "bertrain_truncated_rows_total"}) {
    EXPECT_EQ(types.count(family), 1u) << family;
  }
  // Histograms: cumulative buckets, +Inf last and equal to _count.
  const std::string hist = "bertrain_http_request_duration_seconds";
  double previous = 0;
  for (const std::string& line : lines_of(m.body)) {
    if (line.rfind(hist + "_bucket{path=\"/v1/predict\"", 0) != 0) continue;
    const double v = std::stod(line.substr(line.rfind(' ') + 1));
    EXPECT_GE(v, previous) << line;
    previous = v;
  }
  EXPECT_EQ(previous, metric_value(m.body, hist + "_count{path=\"/v1/predict\"}"));
  EXPECT_EQ(previous, 2.0) << "two POST /v1/predict";

  for (const char* counted : {R"(bertrain_http_requests_total{path="/",method="GET",code="200"})",
                              R"(bertrain_http_requests_total{path="/healthz",method="GET",code="200"})",
                              R"(bertrain_http_requests_total{path="/v1/model",method="GET",code="200"})",
                              R"(bertrain_http_requests_total{path="/v1/predict",method="POST",code="200"})",
                              R"(bertrain_http_requests_total{path="/v1/predict",method="POST",code="400"})",
                              R"(bertrain_http_requests_total{path="/predict",method="POST",code="200"})",
                              R"(bertrain_http_requests_total{path="other",method="GET",code="404"})",
                              R"(bertrain_http_requests_total{path="/predict/",method="GET",code="405"})"}) {
    EXPECT_EQ(metric_value(m.body, counted), 1.0) << counted << "\n" << m.body.substr(0, 1500);
  }
  EXPECT_EQ(metric_value(m.body, "bertrain_rows_total"), 3.0);
  EXPECT_EQ(metric_value(m.body, "bertrain_ready"), 1.0);
  EXPECT_EQ(metric_value(m.body, "bertrain_queue_rows"), 0.0);
  EXPECT_EQ(m.body.find("/nope"), std::string::npos) << "a random path became a label value";
}

}  // namespace
}  // namespace bertrain
