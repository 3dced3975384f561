#include "launch/serving/http_front.hpp"

#include <microhttpd.h>
#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "kernels/error.hpp"
#include "kernels/log.hpp"
#include "launch/serving/worker_pool.hpp"

namespace aerie::launch {

std::string HttpRequest::header(const std::string& lower_case_name) const {
  const auto it = headers.find(lower_case_name);
  return it == headers.end() ? std::string() : it->second;
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Messages may quote what the client sent (a header's value): built as JSON, never pasted.
HttpReply error_reply(int status, const std::string& code, const std::string& message) {
  HttpReply r;
  r.status = status;
  r.body = nlohmann::json{{"error", {{"code", code}, {"type", status >= 500 ? "server_error" : "invalid_request_error"}, {"message", message}}}}
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  r.close = true;
  return r;
}

// The peer closed its end (or reset it). Bytes waiting to be read (a pipelined request) mean
// it is still there.
bool peer_closed(int fd) {
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

// Raises the open-files limit so that max_connections sockets fit (the soft limit is often
// 1,024); returns how many connections fit under the hard limit.
int fit_open_files(int max_connections) {
  constexpr rlim_t kSpare = 1024;  // models, ZeroMQ, MPI, logs
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return max_connections;
  const rlim_t want = static_cast<rlim_t>(max_connections) + kSpare;
  if (lim.rlim_cur < want) {
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &lim);
    ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= want) return max_connections;
  return static_cast<int>(std::max<rlim_t>(64, lim.rlim_cur > kSpare ? lim.rlim_cur - kSpare : lim.rlim_cur / 2));
}

}  // namespace

// One request on a connection, shared by the network thread and its handler thread.
struct Exchange {
  HttpRequest request;
  MHD_Connection* connection = nullptr;
  int fd = -1;
  std::optional<HttpReply> early;  // answered without a handler (refused, too large)
  size_t received = 0;             // body bytes read so far
  bool dispatched = false;         // handed to a handler thread
  bool queued = false;             // the reply is on its way
  std::mutex mu;                   // guards what follows
  bool suspended = false;          // MHD does not read or write the connection
  bool reply_ready = false;
  HttpReply reply;       // without its stream function, which the handler thread runs
  bool streaming = false;
  std::string pending;   // streamed bytes not yet handed to MHD
  bool stream_ended = false;
  bool gone = false;     // the request is over for MHD (client gone, or the server stopped)
};

struct HttpFront::Impl {
  HttpFrontOptions options;
  HttpHandler handler;
  HttpEarlyCheck early_check;
  MHD_Daemon* daemon = nullptr;
  int port = 0;
  std::unique_ptr<WorkerPool> pool;
  std::atomic<bool> stopping{false};
  bool stopped = false;
  std::shared_mutex resume_mu;  // resumes (shared) against stop() (exclusive)
  std::mutex live_mu;
  std::unordered_map<Exchange*, std::weak_ptr<Exchange>> live;

  // Wakes a suspended connection: its reply is ready or a streamed chunk came.
  void wake(Exchange& ex) {
    std::shared_lock<std::shared_mutex> g(resume_mu);
    if (stopped) return;
    {
      std::lock_guard<std::mutex> lock(ex.mu);
      if (!ex.suspended) return;
      ex.suspended = false;
    }
    MHD_resume_connection(ex.connection);
  }

  // The handler thread's side of one request.
  void run(const std::shared_ptr<Exchange>& ex) {
    struct Link : ClientLink {
      Exchange& ex;
      explicit Link(Exchange& e) : ex(e) {}
      bool gone() const override {
        std::lock_guard<std::mutex> lock(ex.mu);
        if (ex.gone) return true;
        // While suspended MHD does not watch the socket (and cannot close it): look ourselves.
        return ex.suspended && peer_closed(ex.fd);
      }
    } link(*ex);
    HttpReply reply;
    try {
      reply = handler(ex->request, link);
    } catch (const std::exception& e) {
      AERIE_LOG_ERROR("HTTP handler for " << ex->request.method << " " << ex->request.path << " failed: " << e.what());
      reply = error_reply(500, "internal_error", "the server failed this request");
    }
    auto stream = std::move(reply.stream);
    reply.stream = nullptr;
    const bool streaming = static_cast<bool>(stream);
    {
      std::lock_guard<std::mutex> lock(ex->mu);
      ex->reply = std::move(reply);
      ex->streaming = streaming;
      ex->reply_ready = true;
    }
    wake(*ex);
    if (!streaming) return;
    const ChunkSink sink = [&](const std::string& chunk) {
      {
        std::lock_guard<std::mutex> lock(ex->mu);
        if (ex->gone) return false;
        ex->pending += chunk;
      }
      wake(*ex);
      return true;
    };
    try {
      stream(sink, link);
    } catch (const std::exception& e) {
      AERIE_LOG_ERROR("HTTP stream for " << ex->request.path << " failed: " << e.what());
    }
    {
      std::lock_guard<std::mutex> lock(ex->mu);
      ex->stream_ended = true;
    }
    wake(*ex);
  }

  static ssize_t read_stream(void* cls, uint64_t, char* buf, size_t max) {
    auto& holder = *static_cast<std::shared_ptr<Exchange>*>(cls);
    Exchange& ex = *holder;
    std::lock_guard<std::mutex> lock(ex.mu);
    if (!ex.pending.empty()) {
      const size_t n = std::min(max, ex.pending.size());
      std::memcpy(buf, ex.pending.data(), n);
      ex.pending.erase(0, n);
      return static_cast<ssize_t>(n);
    }
    if (ex.stream_ended) return MHD_CONTENT_READER_END_OF_STREAM;
    if (ex.gone) return MHD_CONTENT_READER_END_WITH_ERROR;  // the server is stopping
    ex.suspended = true;  // until the next chunk (wake)
    MHD_suspend_connection(ex.connection);
    return 0;
  }

  static void free_stream(void* cls) { delete static_cast<std::shared_ptr<Exchange>*>(cls); }

  static MHD_Result queue(MHD_Connection* c, const HttpReply& r, const std::shared_ptr<Exchange>* stream_of) {
    MHD_Response* resp =
        stream_of ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, &read_stream, new std::shared_ptr<Exchange>(*stream_of), &free_stream)
                  : MHD_create_response_from_buffer(r.body.size(), const_cast<char*>(r.body.data()), MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r.content_type.c_str());
    for (const auto& [name, value] : r.headers) MHD_add_response_header(resp, name.c_str(), value.c_str());
    if (r.close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    const MHD_Result ok = MHD_queue_response(c, static_cast<unsigned>(r.status), resp);
    MHD_destroy_response(resp);
    return ok;
  }

  static MHD_Result collect_header(void* cls, MHD_ValueKind, const char* key, const char* value) {
    static_cast<std::map<std::string, std::string>*>(cls)->emplace(lower(key), value ? value : "");
    return MHD_YES;
  }

  // The reply to a request whose headers are in and whose body is not read yet, if it is
  // refused before any handler sees it.
  std::optional<HttpReply> check_headers(const HttpRequest& req) const {
    if (early_check)
      if (auto r = early_check(req)) return r;
    const std::string encoding = lower(req.header("content-encoding"));
    if (!encoding.empty() && encoding != "identity")
      return error_reply(415, "unsupported_encoding", "Content-Encoding '" + encoding + "' is not accepted; send the body uncompressed");
    if (declared_length(req) > kDrainFactor * options.max_body_bytes) return too_large();
    return std::nullopt;
  }

  // A body over the cap but within kDrainFactor times it is read and dropped before the 413,
  // so that clients which send the whole body before reading (urllib, requests) get the
  // answer instead of a broken pipe; a larger one is answered at once and the connection closed.
  static constexpr size_t kDrainFactor = 4;

  static unsigned long long declared_length(const HttpRequest& req) {
    const std::string length = req.header("content-length");
    if (length.empty()) return 0;
    errno = 0;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(length.c_str(), &end, 10);
    return errno != 0 || end == length.c_str() || *end != '\0' ? ~0ull : n;
  }

  HttpReply too_large() const {
    return error_reply(413, "payload_too_large", "the body is larger than " + std::to_string(options.max_body_bytes) + " bytes");
  }

  static MHD_Result on_access(void* cls, MHD_Connection* c, const char* url, const char* method, const char*, const char* upload,
                              size_t* upload_size, void** con_cls) {
    auto& self = *static_cast<Impl*>(cls);
    if (*con_cls == nullptr) {  // the headers are in
      auto ex = std::make_shared<Exchange>();
      ex->request.method = method;
      ex->request.path = url;
      MHD_get_connection_values(c, MHD_HEADER_KIND, &collect_header, &ex->request.headers);
      ex->connection = c;
      if (const auto* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD)) ex->fd = info->connect_fd;
      *con_cls = new std::shared_ptr<Exchange>(ex);
      {
        std::lock_guard<std::mutex> lock(self.live_mu);
        self.live.emplace(ex.get(), ex);
      }
      if (auto r = self.check_headers(ex->request)) {
        ex->queued = true;
        return queue(c, *r, nullptr);  // before the body: MHD closes the connection after it
      }
      if (declared_length(ex->request) > self.options.max_body_bytes) ex->early = self.too_large();  // drained, then answered
      return MHD_YES;
    }
    const auto& holder = *static_cast<std::shared_ptr<Exchange>*>(*con_cls);
    Exchange& ex = *holder;
    if (ex.queued) {  // refused early: the rest of the body is dropped unread
      *upload_size = 0;
      return MHD_YES;
    }
    if (*upload_size > 0) {
      ex.received += *upload_size;
      if (!ex.early && ex.received > self.options.max_body_bytes) {
        ex.early = self.too_large();  // a chunked body past the cap: dropped from here on
        ex.request.body.clear();
        ex.request.body.shrink_to_fit();
      }
      if (!ex.early) ex.request.body.append(upload, *upload_size);
      *upload_size = 0;
      if (ex.early && ex.received > kDrainFactor * self.options.max_body_bytes) {
        ex.queued = true;  // enough drained: answer and close
        return queue(c, *ex.early, nullptr);
      }
      return MHD_YES;
    }
    if (ex.early) {
      ex.queued = true;
      return queue(c, *ex.early, nullptr);
    }
    if (!ex.dispatched) {
      {
        std::lock_guard<std::mutex> lock(ex.mu);
        if (self.stopping) {
          ex.queued = true;
          return queue(c, error_reply(503, "unavailable", "the server is shutting down"), nullptr);
        }
        ex.dispatched = true;
        ex.suspended = true;  // until the handler's reply is ready (wake)
        MHD_suspend_connection(c);
      }
      self.pool->submit([&self, ex = holder] { self.run(ex); });
      return MHD_YES;
    }
    std::lock_guard<std::mutex> lock(ex.mu);
    if (!ex.reply_ready || ex.queued) return MHD_YES;
    ex.queued = true;
    return queue(c, ex.reply, ex.streaming ? &holder : nullptr);
  }

  static void on_completed(void* cls, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
    if (*con_cls == nullptr) return;
    auto* holder = static_cast<std::shared_ptr<Exchange>*>(*con_cls);
    {
      std::lock_guard<std::mutex> lock((*holder)->mu);
      (*holder)->gone = true;
    }
    {
      auto& self = *static_cast<Impl*>(cls);
      std::lock_guard<std::mutex> lock(self.live_mu);
      self.live.erase(holder->get());
    }
    delete holder;
    *con_cls = nullptr;
  }

  static void log_mhd(void*, const char* fmt, va_list ap) {
    char line[512];
    std::vsnprintf(line, sizeof line, fmt, ap);
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    AERIE_LOG_DEBUG("http: " << s);
  }
};

HttpFront::HttpFront(HttpFrontOptions options, HttpHandler handler, HttpEarlyCheck early_check) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
  impl_->early_check = std::move(early_check);
}

HttpFront::~HttpFront() { stop(); }

void HttpFront::start() {
  auto& s = *impl_;
  AERIE_CHECK(!s.daemon, "the HTTP server is already running");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(s.options.port);
  const int rc = ::getaddrinfo(s.options.host.c_str(), port.c_str(), &hints, &found);
  AERIE_CHECK(rc == 0 && found, "cannot listen on " << s.options.host << ":" << s.options.port << ": " << ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, &::freeaddrinfo);
  const int connections = fit_open_files(s.options.max_connections);
  if (connections < s.options.max_connections)
    AERIE_LOG_WARNING("the open-files limit allows " << connections << " HTTP connections, not " << s.options.max_connections);
  s.pool = std::make_unique<WorkerPool>(static_cast<size_t>(s.options.handler_threads));
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (found->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
  s.daemon = MHD_start_daemon(flags, static_cast<uint16_t>(s.options.port), nullptr, nullptr, &Impl::on_access, &s,
                              MHD_OPTION_SOCK_ADDR, found->ai_addr,
                              MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(connections),
                              MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(s.options.idle_timeout.count()),
                              MHD_OPTION_LISTEN_BACKLOG_SIZE, static_cast<unsigned>(s.options.listen_backlog),
                              MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
                              MHD_OPTION_NOTIFY_COMPLETED, &Impl::on_completed, &s,
                              MHD_OPTION_EXTERNAL_LOGGER, &Impl::log_mhd, nullptr,
                              MHD_OPTION_END);
  AERIE_CHECK(s.daemon, "cannot listen on " << s.options.host << ":" << s.options.port << " (in use, or not an address of this host)");
  if (const auto* info = MHD_get_daemon_info(s.daemon, MHD_DAEMON_INFO_BIND_PORT)) s.port = info->port;
}

int HttpFront::port() const { return impl_->port; }

void HttpFront::stop() {
  auto& s = *impl_;
  if (!s.daemon) return;
  // Replies still on their way (a stream's last chunks, a reply queued a moment ago) get a
  // short grace to reach their clients before the connections close.
  const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < grace) {
    {
      std::lock_guard<std::mutex> lock(s.live_mu);
      if (s.live.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    // No resume may run while the daemon goes, and none may stay suspended (libmicrohttpd
    // must not be stopped with suspended connections).
    std::unique_lock<std::shared_mutex> g(s.resume_mu);
    s.stopping = true;
    std::vector<std::shared_ptr<Exchange>> live;
    {
      std::lock_guard<std::mutex> lock(s.live_mu);
      for (auto& [_, w] : s.live)
        if (auto ex = w.lock()) live.push_back(std::move(ex));
    }
    for (auto& ex : live) {
      bool resume = false;
      {
        std::lock_guard<std::mutex> lock(ex->mu);
        ex->gone = true;
        resume = ex->suspended;
        ex->suspended = false;
      }
      if (resume) MHD_resume_connection(ex->connection);
    }
    s.stopped = true;
  }
  MHD_stop_daemon(s.daemon);
  s.daemon = nullptr;
  s.pool.reset();  // handlers still running see their client gone and end
}

}  // namespace aerie::launch
