// aerie-render-template TEMPLATE_FILE: reads one JSON context per line on stdin and prints
// {"text": the rendered template} or {"error": message} per line, for the parity test
// against transformers' Jinja environment.
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "kernels/error.hpp"
#include "launch/jinja/template.hpp"

int main(int argc, char** argv) {
  using namespace aerie;
  try {
    AERIE_CHECK(argc == 2, "usage: aerie-render-template TEMPLATE_FILE");
    std::ifstream in(argv[1]);
    AERIE_CHECK(in.good(), argv[1] << ": cannot open");
    const std::string source{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const jinja::Template tpl(source);
    std::string line;
    while (std::getline(std::cin, line)) {
      nlohmann::json out;
      try {
        out = {{"text", tpl.render(jinja::Value::parse(line))}};
      } catch (const std::exception& e) {
        out = {{"error", e.what()}};
      }
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "aerie-render-template: " << e.what() << "\n";
    return 2;
  }
}
