// The manifest corpus in tests/manifests/{good,bad} is shared with the JSON
// Schema test (tests/integration/test_tooling.py): the schema must accept
// exactly what this parser accepts on it. Adding a case there adds it to both.
#include <catch2/catch.hpp>

#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/util/error.h"

using namespace tvmffi_jit;

namespace {

std::vector<std::string> corpus(const std::string& kind) {
  const std::string dir = std::string(TVMFFI_JIT_SOURCE_DIR) + "/tests/manifests/" + kind;
  std::vector<std::string> files;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) files.push_back(dir + "/" + name);
    }
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("every manifest in tests/manifests/good parses and passes the combination checks", "[build][manifest]") {
  const auto files = corpus("good");
  REQUIRE(files.size() >= 10);
  for (const auto& file : files) {
    INFO(file);
    compile::Manifest m;
    REQUIRE_NOTHROW(m = compile::load_manifest(file));
    CHECK_NOTHROW(compile::check_manifest(m));
    CHECK(compile::is_identifier(m.name));
  }
}

TEST_CASE("every manifest in tests/manifests/bad is rejected with exit code 2", "[build][manifest]") {
  const auto files = corpus("bad");
  REQUIRE(files.size() >= 40);
  for (const auto& file : files) {
    INFO(file);
    int code = 0;
    std::string message;
    try {
      compile::Manifest m = compile::load_manifest(file);
      compile::check_manifest(m);
    } catch (const Error& e) {
      code = e.exit_code();
      message = e.what();
    }
    CHECK(code == static_cast<int>(ExitCode::kUsage));
    // The message names the manifest, so a user with many knows which one.
    CHECK(message.find(file.substr(file.rfind('/') + 1)) != std::string::npos);
  }
}
