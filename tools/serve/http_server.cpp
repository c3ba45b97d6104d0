#include "tools/serve/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/number_text.h"

namespace bertrain {

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Milliseconds to wait in poll(): until `deadline`, at most `slice_s` (so that stop() is noticed), at least 0.
int poll_ms(double deadline, double slice_s) {
  return static_cast<int>(std::clamp(deadline - now_s(), 0.0, slice_s) * 1000.0 + 0.5);
}

// How long a connection with no request in it keeps its thread while other connections wait for one (or while the
// server stops): long enough that a client in the middle of a conversation sends its next request first (closing
// then would lose it), short enough that a waiting health probe is answered within its usual 1 s timeout.
constexpr double kIdleYieldSeconds = 0.5;

// How long a thread waits on a connection with no request in it while other connections wait for a thread, before it
// queues the connection again behind them and takes the next: a health probe behind 3,000 idle connections waited
// for each in turn (10 s at the default 256 threads); now each costs a thread this long per pass of the queue.
constexpr double kRequeueSeconds = 0.02;

// How long a request's head (request line and headers) may take to arrive while other connections wait for a
// thread: a client sends its head at once, so only a trickling one (a byte now and then, to hold the thread) takes
// longer, and it gives its thread up after this (408) instead of after the whole I/O timeout, so that a health probe
// waiting behind `--max-connections` such clients is answered in about a second, not five.
constexpr double kCrowdedHeadSeconds = 1.0;

// Slow bodies get this much time beyond the I/O timeout: a 2 MiB body over a 1 Mbit/s link still arrives, a client
// that sends a byte now and then does not hold its thread for ever.
constexpr double kBodyBytesPerSecond = 256.0 * 1024;

std::string peer_address(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "-";
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof text);
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, text, sizeof text);
  }
  return text;
}

// Writes all of `data` before `deadline`; false when the peer is gone or too slow to take it.
bool send_all(int fd, const std::string& data, double deadline) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    if (now_s() >= deadline) return false;
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, poll_ms(deadline, 1.0));
  }
  return true;
}

// Closes a connection whose client may still be sending (a refused body, a request cut off): our side is shut
// first and what arrives is read and dropped for a moment, so that the kernel does not answer the unread bytes with
// a reset that would destroy the answer before the client reads it. For `seconds` at most, or until the client
// closes its side.
void lingering_close(int fd, double seconds) {
  ::shutdown(fd, SHUT_WR);
  const double deadline = now_s() + seconds;
  char sink[16 * 1024];
  std::size_t dropped = 0;
  while (dropped < (1u << 20) && now_s() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, poll_ms(deadline, 1.0)) <= 0) break;
    const ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n <= 0) break;
    dropped += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

}  // namespace

HttpServer::HttpServer(HttpServerOptions options, HttpHooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)) {}

HttpServer::~HttpServer() {
  threads_.reset();  // joins the connection threads (after listen() they have ended already)
  for (int fd : {listen_fd_, wake_fds_[0], wake_fds_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void HttpServer::bind() {
  const std::string where = "--host " + options_.host + " --port " + std::to_string(options_.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int resolved = ::getaddrinfo(options_.host.c_str(), std::to_string(options_.port).c_str(), &hints, &found);
  BERTRAIN_CHECK(resolved == 0, "cannot listen on " << where << " (not an address of this machine: "
                                                    << gai_strerror(resolved) << ")");
  int error = 0;
  for (const addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR (a restarted server binds at once) but not SO_REUSEPORT: a second server on a port in use is an
    // error, not a silent sharer of its connections.
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
    } else {
      error = errno;
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  BERTRAIN_CHECK(listen_fd_ >= 0, "cannot listen on " << where << " ("
                                                      << (error == EADDRINUSE ? "in use" : std::strerror(error))
                                                      << ", or not an address of this machine)");
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                            : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  BERTRAIN_CHECK(::pipe2(wake_fds_, O_CLOEXEC) == 0, "cannot listen on " << where << ": " << std::strerror(errno));
  threads_ = std::make_unique<ConnectionThreads>(options_.max_connections);
}

void HttpServer::listen() {
  BERTRAIN_CHECK(threads_ != nullptr, "HttpServer::listen: call bind() once first");
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fds_[0], POLLIN, 0}};
  while (!stopping_) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents != 0) break;
    if ((fds[0].revents & POLLIN) == 0) continue;
    sockaddr_storage addr{};
    socklen_t length = sizeof addr;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &length, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors or memory: the connection stays in the backlog; try again shortly.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      continue;
    }
    const int on = 1;  // answers are small: Nagle's delay would add tens of milliseconds to each
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    const std::string remote = peer_address(addr);
    threads_->enqueue([this, fd, remote, accepted = now_s()] { serve_connection(fd, remote, accepted, ""); });
  }
  ::close(listen_fd_);
  listen_fd_ = -1;
  threads_->shutdown();  // every accepted connection is served and closed
}

void HttpServer::stop() {
  if (stopping_.exchange(true)) return;
  if (wake_fds_[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fds_[1], &byte, 1);
  }
}

void HttpServer::refuse_arriving() { refusing_arriving_ = true; }

template <class Ready>
int HttpServer::read_until(int fd, std::string* in, double deadline, double idle_since, Ready ready,
                           double crowded_deadline) {
  char buffer[16 * 1024];
  const bool idle = idle_since >= 0;
  const double requeue_at = now_s() + kRequeueSeconds;
  // What already arrived is read before any rule below gives the connection up: a request that waited in the queue
  // longer than a rule allows is answered, not closed unread.
  if (ready()) return 1;  // (a reader's step is not asked again once it said it is done)
  const ssize_t waiting_bytes = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
  if (waiting_bytes == 0) return 0;
  if (waiting_bytes > 0) in->append(buffer, static_cast<std::size_t>(waiting_bytes));
  while (!ready()) {
    if (refusing_arriving_) return idle && in->empty() ? 0 : -2;
    // A connection with no request in it gives its thread up after kIdleYieldSeconds when the server stops or
    // other connections wait for a thread (as nginx closes idle kept-alive connections when it runs out); before
    // that, while others wait, it goes back in the queue behind them every kRequeueSeconds. Not once the server
    // stops: the threads then end when the queue is empty, and this one waits here instead.
    const bool crowded = !stopping_ && threads_->waiting() > 0;
    if (idle && in->empty() && now_s() - idle_since >= kIdleYieldSeconds && (stopping_ || crowded)) return 0;
    if (idle && in->empty() && crowded && now_s() >= requeue_at) return -4;
    if (now_s() >= deadline) return -1;
    if (now_s() >= crowded_deadline && threads_->waiting() > 0) return -3;
    pollfd p{fd, POLLIN, 0};
    const int polled = ::poll(&p, 1, poll_ms(deadline, idle && in->empty() ? kRequeueSeconds : 0.1));
    if (polled < 0 && errno != EINTR) return 0;
    if (polled <= 0) continue;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return 0;
    }
    in->append(buffer, static_cast<std::size_t>(n));
  }
  return 1;
}

void HttpServer::serve_connection(int fd, const std::string& remote, double idle_since, std::string in) {
  const double timeout = options_.io_timeout_s;
  HttpRequestReader reader(options_.limits);
  for (;;) {
    reader.reset();
    HttpRequest request;
    request.remote_addr = remote;
    HttpResponse response;
    // A kept-alive connection waits this long for its next request; nothing arrives: it is closed, silently.
    const int waited = read_until(fd, &in, idle_since + timeout, idle_since, [&] { return !in.empty(); });
    if (waited == -4) {
      threads_->enqueue([this, fd, remote, idle_since, in = std::move(in)]() mutable {
        serve_connection(fd, remote, idle_since, std::move(in));
      });
      return;
    }
    if (waited <= 0) break;
    const double started = now_s();
    double deadline = started + timeout;  // for the whole request, however its bytes trickle in
    HttpRequestReader::Status status = HttpRequestReader::Status::kNeedMore;
    const auto refuse = [&](int code, const std::string& message) {
      hooks_.error(response, code, message);
      write_answer(fd, request, response, false, started);
    };
    const auto timed_out = [&] {
      refuse(408, "the request did not arrive within " + std::to_string(options_.io_timeout_s) + " s");
    };
    // Reads the head or the body (`read`: the reader's step) by the deadline (and the head by kCrowdedHeadSeconds
    // while connections wait for a thread); false when the connection is done with: the client went away
    // mid-request, or was answered a refusal (408, or the reader's).
    const auto read_part = [&](const auto& read, double crowded_deadline) {
      const int got = read_until(
          fd, &in, deadline, -1,
          [&] {
            status = read();
            return status != HttpRequestReader::Status::kNeedMore;
          },
          crowded_deadline);
      if (got == -1) timed_out();
      if (got == -3) {
        refuse(408, "the request's head did not arrive within " + shortest_double(kCrowdedHeadSeconds) +
                        " s while other connections waited for a thread");
      }
      if (got == -2) {
        ++refused_arriving_;
        refuse(503, "the server is stopping and this request had not arrived whole within its drain time");
      }
      if (got > 0 && status == HttpRequestReader::Status::kError) refuse(reader.error_status(), reader.error_message());
      return got > 0 && status != HttpRequestReader::Status::kError;
    };
    if (!read_part([&] { return reader.read_head(&in, &request); }, started + kCrowdedHeadSeconds)) break;
    // Kept alive unless the client closes it, the server is stopping, or connections wait for a thread (they get
    // this one: however many clients keep connections open, a new one waits one request at most).
    const auto keep_alive = [&] { return request.wants_keep_alive() && !stopping_ && threads_->waiting() == 0; };
    if (!hooks_.accept_head(request, response)) {
      const bool keep = !reader.has_body() && keep_alive();  // an unread body would be read as the next request
      if (!write_answer(fd, request, response, keep, started) || !keep) break;
      idle_since = now_s();
      continue;
    }
    if (reader.has_body()) {
      if (request.minor_version >= 1 && header_value(request.headers, "Expect") == "100-continue" && in.empty()) {
        send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", now_s() + timeout);
      }
      const double body_bytes = reader.declared_length() > 0 ? static_cast<double>(reader.declared_length())
                                                             : static_cast<double>(options_.limits.max_body);
      deadline += body_bytes / kBodyBytesPerSecond;
      if (!read_part([&] { return reader.read_body(&in, &request); }, std::numeric_limits<double>::infinity())) break;
    }
    hooks_.handle(request, response);
    const bool keep = keep_alive();
    if (!write_answer(fd, request, response, keep, started) || !keep) break;
    idle_since = now_s();
  }
  // A second for the client to close its side; a tenth while connections wait for this thread (3,000 clients that
  // kept their connections open after a Connection: close answer held every thread a second each).
  lingering_close(fd, threads_->waiting() > 0 ? 0.1 : 1.0);
}

bool HttpServer::write_answer(int fd, const HttpRequest& request, HttpResponse& response, bool keep_alive,
                              double started) {
  hooks_.before_write(request, response, now_s() - started);
  std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " + http_reason(response.status) + "\r\n";
  if (!response.content_type.empty()) head += "Content-Type: " + response.content_type + "\r\n";
  head += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  head += keep_alive ? "Connection: keep-alive\r\nKeep-Alive: timeout=" + std::to_string(options_.io_timeout_s) + "\r\n"
                     : "Connection: close\r\n";
  for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
  head += "\r\n";
  if (request.method != "HEAD") head += response.body;
  const bool sent = send_all(fd, head, now_s() + options_.io_timeout_s);
  hooks_.after_write(request, response, now_s() - started);
  return sent;
}

}  // namespace bertrain
