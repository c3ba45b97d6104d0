// The HTTP server of `bertrain serve` (tools/serve/http_server.h) with trivial hooks, for runs under ThreadSanitizer
// and AddressSanitizer with mixed clients (tests/stress/http_server.sh): bare_http_server PORT THREADS. Every path is
// answered {"n": body bytes}, except /refuse, refused at its head (404), and /big, answered 6 MiB of 'x' (more than
// a socket takes at once: the listening thread sends the rest); an I/O timeout of 2 s, bodies up to 16 KiB.
// SIGTERM stops it (the drain), and 0.3 s later it refuses what is still arriving, as serve does after
// --drain-timeout.
#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "tools/serve/http_server.h"

int main(int argc, char** argv) {
  using namespace bertrain;
  if (argc != 3) {
    std::fprintf(stderr, "usage: bare_http_server PORT THREADS\n");
    return 2;
  }
  HttpServerOptions options;
  options.port = std::atoi(argv[1]);
  options.answering_threads = std::atoi(argv[2]);
  options.io_timeout_s = 2;
  // Small, so that the bodies the listening thread holds pass its budget (THREADS x 16 KiB) now and then, and
  // answering threads read the rest themselves: both ways are exercised.
  options.limits.max_body = 16 * 1024;
  HttpHooks hooks;
  hooks.accept_head = [](const HttpRequest& request, HttpResponse& response) {
    if (request.path != "/refuse") return true;
    response.status = 404;
    response.set_content("{}", "application/json");
    return false;
  };
  hooks.handle = [](HttpRequest& request, HttpResponse& response) {
    if (request.path == "/big") return response.set_content(std::string(6 << 20, 'x'), "text/plain");
    response.set_content("{\"n\":" + std::to_string(request.body.size()) + "}", "application/json");
  };
  hooks.error = [](HttpResponse& response, int status, const std::string& message) {
    response.status = status;
    response.set_content(message, "text/plain");
  };
  hooks.before_write = hooks.after_write = [](const HttpRequest&, const HttpResponse&, double) {};

  // Blocked before any thread starts, so that only the waiter below receives it.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  HttpServer server(options, hooks);
  server.bind();
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    server.stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    server.refuse_arriving();
  });
  std::fprintf(stderr, "ready %d\n", server.port());
  server.listen();
  waiter.join();
  std::fprintf(stderr, "stopped; %d requests still arriving refused\n", server.refused_arriving());
  return 0;
}
