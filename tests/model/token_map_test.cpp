// --speculative-token-map files: JSON arrays and single-tensor safetensors files are read;
// torch pickles, ids outside the vocabulary, repeats, empty maps and malformed files give
// errors naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/error.hpp"
#include "model/token_map.hpp"

using namespace aerie;
using namespace aerie::model;
namespace fs = std::filesystem;

namespace {

// Files written by a test, removed when it ends.
struct Written {
  std::vector<fs::path> paths;
  ~Written() {
    for (const auto& p : paths) fs::remove(p);
  }
};
Written* written = nullptr;

fs::path temp_file(const std::string& name, const std::string& bytes) {
  const fs::path p = fs::temp_directory_path() / ("aerie_token_map_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << bytes;
  if (written) written->paths.push_back(p);
  return p;
}

// A safetensors file with one tensor of int64 or int32 ids.
fs::path safetensors_ids(const std::string& name, const std::vector<int64_t>& ids, const std::string& dtype) {
  std::string data;
  for (int64_t v : ids) {
    if (dtype == "I64") data.append(reinterpret_cast<const char*>(&v), 8);
    else {
      const auto w = static_cast<int32_t>(v);
      data.append(reinterpret_cast<const char*>(&w), 4);
    }
  }
  nlohmann::json h = {{"hot", {{"dtype", dtype}, {"shape", {static_cast<int64_t>(ids.size())}}, {"data_offsets", {0, data.size()}}}}};
  const std::string header = h.dump();
  std::string bytes;
  uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  return temp_file(name, bytes + header + data);
}

std::string error_of(const fs::path& p, int64_t vocab) {
  try {
    load_token_map(p, vocab);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TokenMap, ReadsJsonAndSafetensors) {
  Written files;
  written = &files;
  EXPECT_EQ(load_token_map(temp_file("a.json", "[5, 0, 17, 3]"), 32), (std::vector<int32_t>{5, 0, 17, 3}));
  EXPECT_EQ(load_token_map(safetensors_ids("b.safetensors", {9, 1, 4}, "I64"), 32), (std::vector<int32_t>{9, 1, 4}));
  EXPECT_EQ(load_token_map(safetensors_ids("c.safetensors", {2, 31}, "I32"), 32), (std::vector<int32_t>{2, 31}));
  written = nullptr;
}

TEST(TokenMap, BadFilesNameTheFileAndTheProblem) {
  Written files;
  written = &files;
  auto has = [](const std::string& err, const std::string& what) { EXPECT_NE(err.find(what), std::string::npos) << err; };
  has(error_of(temp_file("d.json", "[1, 40]"), 32), "token id 40 is outside the vocabulary of 32");
  has(error_of(temp_file("e.json", "[1, 2, 1]"), 32), "token id 1 appears twice");
  has(error_of(temp_file("f.json", "[]"), 32), "the token map is empty");
  has(error_of(temp_file("g.json", "{\"ids\": [1]}"), 32), "must be an array of token ids");
  has(error_of(temp_file("h.json", "[1, \"x\"]"), 32), "is not an integer");
  has(error_of(temp_file("i.json", "[1, 2"), 32), "must be an array of token ids");
  has(error_of(temp_file("j.pt", "PK"), 32), "does not read torch pickles");
  has(error_of(fs::temp_directory_path() / "aerie_no_such_map.json", 32), "cannot open the token map");
  has(error_of(safetensors_ids("k.safetensors", {-1}, "I64"), 32), "token id -1 is outside");
  const std::string neg = error_of(temp_file("l.json", "[-3]"), 32);
  has(neg, "aerie_token_map_");  // the file is named
  written = nullptr;
}
