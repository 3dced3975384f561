#pragma once
// Command line of aerie-serve (sglang's flag names), parsed into DeploymentOptions.
#include <optional>
#include <string>
#include <vector>

#include "launch/deployment.hpp"
#include "launch/sglang_flags.hpp"

namespace aerie::launch {

struct ServeOptions {
  DeploymentOptions deployment;
  std::string host = "127.0.0.1";
  int port = 30000;
  std::string served_model_name;  // default: the model folder's name
  std::string chat_template;      // a .jinja file or a built-in name; default: the model's own template
  bool stdin_json = false;         // read /generate bodies as JSON lines on stdin instead of HTTP
  double shutdown_timeout_s = 30;  // SIGTERM: how long requests in flight may take to finish
  std::string api_key;             // when set, every endpoint but GET /health wants "Authorization: Bearer <key>"
  bool log_requests = false;       // one info line per finished request
  SglangFlags sglang;              // sglang's flags that are not Aerie's own
  std::vector<std::string> warnings;  // for flags accepted without effect
};

// Throws aerie::Error with a clear message on bad flags; nothing when --help was printed.
std::optional<ServeOptions> parse_serve_args(int argc, const char* const* argv);

}  // namespace aerie::launch
