// Asking tools about themselves (toolchain/version.h) and launcher precedence
// (toolchain::choose_launcher), the one place each is written.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/version.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::toolchain;
using Words = std::vector<std::string>;

namespace {

std::string script(const util::TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.path() + "/" + name;
  util::write_file(path, "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0755);
  return path;
}

}  // namespace

TEST_CASE("version_of is what --version prints, asked with LC_ALL=C", "[toolchain][version]") {
  util::TempDir dir;
  const std::string tool = script(dir, "tool", "echo \"tool 1.2 $1 LC_ALL=$LC_ALL\"\necho 'to stderr' >&2\n");
  auto v = version_of(tool);
  REQUIRE(v);
  CHECK(*v == "tool 1.2 --version LC_ALL=C\nto stderr\n");
  QueryOptions stdout_only;
  stdout_only.merge_stderr = false;
  CHECK(query_program({tool, "--list-gpu-arch"}, stdout_only).value_or("") == "tool 1.2 --list-gpu-arch LC_ALL=C\n");
}

TEST_CASE("a missing or failing program is a reason, not an error", "[toolchain][version]") {
  util::TempDir dir;
  auto missing = version_of(dir.path() + "/no-such-tool");
  REQUIRE_FALSE(missing);
  CHECK(missing.error() == "cannot run '" + dir.path() + "/no-such-tool': not found (looked on PATH)");
  CHECK_FALSE(version_of("no-such-tool-on-path-xyz"));
  util::write_file(dir.path() + "/not-executable", "#!/bin/sh\n");
  CHECK_FALSE(version_of(dir.path() + "/not-executable"));
  // Executable, but not a format the kernel runs (no #! line): a reason too.
  util::write_file(dir.path() + "/no-shebang", "echo hi\n");
  ::chmod((dir.path() + "/no-shebang").c_str(), 0755);
  auto unrunnable = version_of(dir.path() + "/no-shebang");
  REQUIRE_FALSE(unrunnable);
  CHECK(unrunnable.error().find("Exec format error") != std::string::npos);
  const std::string failing = script(dir, "failing", "exit 3\n");
  auto failed = version_of(failing);
  REQUIRE_FALSE(failed);
  CHECK(failed.error() == failing + " --version: exit status 3");
}

TEST_CASE("launcher precedence: given (flag or manifest), then the variable, then CXX's words", "[toolchain][launcher]") {
  const std::optional<Words> none;
  const Words cxx_words = {"/usr/bin/ccache"};
  auto chosen = [](const LauncherWords& l) { return std::make_pair(l.words, l.source); };
  using Chosen = std::pair<Words, std::string>;
  CHECK(chosen(choose_launcher(Words{"sccache", "-x"}, "--cxx-launcher", "ccache", "TVMFFI_JIT_CXX_LAUNCHER", cxx_words,
                               "CXX")) == Chosen{{"sccache", "-x"}, "--cxx-launcher"});
  CHECK(chosen(choose_launcher(none, "manifest", "ccache  --opt", "TVMFFI_JIT_CXX_LAUNCHER", cxx_words, "CXX")) ==
        Chosen{{"ccache", "--opt"}, "TVMFFI_JIT_CXX_LAUNCHER"});
  CHECK(chosen(choose_launcher(none, "manifest", " \t", "TVMFFI_JIT_CXX_LAUNCHER", cxx_words, "CXX")) ==
        Chosen{cxx_words, "CXX"});  // a blank variable is unset
  CHECK(chosen(choose_launcher(none, "manifest", std::nullopt, "TVMFFI_JIT_CUDA_LAUNCHER", {}, "")) == Chosen{{}, ""});
  // Given and empty turns launchers off, whatever the environment says.
  CHECK(choose_launcher(Words{}, "manifest", "ccache", "TVMFFI_JIT_CXX_LAUNCHER", cxx_words, "CXX").words.empty());
}
