#pragma once
// HttpFront: aerie-serve's HTTP/1.1 server, on libmicrohttpd's epoll loop. One thread reads
// every connection; a request reaches a handler thread only once its headers and body are
// complete, so a slow or idle client costs a socket and a few KB, never a thread
// (cpp-httplib kept a thread per connection: 1,100 trickling sockets took all of them).
// Pipelined requests on one connection are answered in order. Bodies are capped whether
// they come with a Content-Length or chunked; compressed bodies are refused (415).
// A handler may stream (chunked transfer, each chunk sent as it comes) and may ask whether
// its client is still there: a closed connection is noticed while the handler waits.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace aerie::launch {

struct HttpRequest {
  std::string method;
  std::string path;  // without the query string
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string header(const std::string& lower_case_name) const;
};

// Tells a handler that its client went away (so that work nobody will read can stop).
class ClientLink {
 public:
  virtual ~ClientLink() = default;
  virtual bool gone() const = 0;
};

// Sends one chunk of a streamed reply; false once the client is gone.
using ChunkSink = std::function<bool(const std::string& chunk)>;

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;  // close the connection after this reply
  // Set: the reply is streamed; after the status line and headers are sent, the handler's
  // thread calls it, and it emits the body chunk by chunk until it returns.
  std::function<void(const ChunkSink&, const ClientLink&)> stream;
};

// Runs on a handler thread; may block (on the engine) for as long as the request lasts.
using HttpHandler = std::function<HttpReply(const HttpRequest&, const ClientLink&)>;
// Runs on the network thread once the headers are in, before the body is read: a reply
// here (for example 401) is sent without reading the body. Must not block.
using HttpEarlyCheck = std::function<std::optional<HttpReply>(const HttpRequest&)>;

struct HttpFrontOptions {
  std::string host = "127.0.0.1";
  int port = 30000;  // 0: any free port (see port())
  size_t max_body_bytes = 16u << 20;
  int max_connections = 16384;  // open sockets at once; the open-files limit is raised to fit
  std::chrono::seconds idle_timeout{60};  // a connection with no traffic for this long is closed
  int listen_backlog = 4096;
  int handler_threads = 1024;  // requests in progress at once; more wait for a thread
};

class HttpFront {
 public:
  HttpFront(HttpFrontOptions options, HttpHandler handler, HttpEarlyCheck early_check = {});
  ~HttpFront();
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;
  // Binds and starts serving on its own thread; throws when the address cannot be bound.
  void start();
  int port() const;
  // Closes every connection, after up to 2 s for requests in progress to finish sending;
  // handlers still running then see their client gone.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aerie::launch
