#include "kernels/error.hpp"

namespace aerie {

void throw_error(const char* file, int line, const std::string& message) {
  std::string where = file;
  // Keep the path relative to the repository so messages stay short and stable.
  for (const char* root : {"/kernels/", "/model/", "/parallel/", "/spec/", "/transport/", "/actors/", "/launch/"}) {
    auto pos = where.rfind(root);
    if (pos != std::string::npos) { where = where.substr(pos + 1); break; }
  }
  throw Error(message, where + ":" + std::to_string(line));
}

std::string client_message(const std::exception& e) {
  if (const auto* a = dynamic_cast<const Error*>(&e)) return a->message();
  return e.what();
}

}  // namespace aerie
