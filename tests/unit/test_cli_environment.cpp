// cli/environment.h: the environment is read once, in the CLI, and what the
// lower layers do follows the lookup it was read from, not the process's
// variables. Each test gives a fixed lookup and watches the layer below.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <map>
#include <string>

#include "cli/build_request.h"
#include "cli/driver_load.h"
#include "tvmffi_jit/cli/environment.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::cli;

namespace {

using Vars = std::map<std::string, std::string>;

// Applies a lookup's process-wide settings for one test, then puts back the
// ones tests/unit/main.cpp made from the real environment.
struct AppliedEnvironment {
  explicit AppliedEnvironment(Vars vars) {
    apply_process_settings(resolve_command_environment(toolchain::fixed_environment(std::move(vars))));
  }
  ~AppliedEnvironment() { apply_process_settings(resolve_command_environment(toolchain::process_environment())); }
};

std::string make_program(const std::string& dir, const std::string& name) {
  const std::string path = util::join_path(dir, name);
  util::write_file(path, "#!/bin/sh\necho ran\n");
  ::chmod(path.c_str(), 0755);
  return path;
}

}  // namespace

TEST_CASE("TMPDIR from the lookup is where every temporary directory is made", "[cli][environment]") {
  util::TempDir chosen;  // under the real temp root
  {
    AppliedEnvironment applied(Vars{{"TMPDIR", chosen.path()}});
    CHECK(util::temp_root() == chosen.path());
    util::TempDir made;
    CHECK(util::parent_path(made.path()) == chosen.path());
  }
  {
    AppliedEnvironment applied(Vars{{"TMPDIR", ""}});  // empty is unset
    CHECK(util::temp_root() == "/tmp");
  }
}

TEST_CASE("PATH from the lookup is where programs are looked up and run from", "[cli][environment]") {
  util::TempDir bin;
  const std::string tool = make_program(bin.path(), "tvmffi-jit-env-test-tool");
  {
    AppliedEnvironment applied(Vars{{"PATH", "/nonexistent:" + bin.path()}});
    CHECK(util::find_program("tvmffi-jit-env-test-tool") == tool);
    util::ProcessResult r = util::run_process({"tvmffi-jit-env-test-tool"});
    CHECK(r.ok());
    CHECK(r.out == "ran\n");
  }
  {
    // PATH unset: execvp's default directories, which do not hold it.
    AppliedEnvironment applied(Vars{});
    CHECK_FALSE(util::find_program("tvmffi-jit-env-test-tool"));
    CHECK(util::find_program("sh"));
  }
}

TEST_CASE("the status line's colour follows NO_COLOR, CLICOLOR_FORCE and FORCE_COLOR from the lookup",
          "[cli][environment]") {
  // stderr is not a terminal here: colour only when forced.
  auto options = [](Vars vars, bool quiet = false) {
    return status_line_options(quiet, resolve_command_environment(toolchain::fixed_environment(std::move(vars))));
  };
  CHECK_FALSE(options({}).color);
  CHECK(options({{"CLICOLOR_FORCE", "1"}}).color);
  CHECK_FALSE(options({{"CLICOLOR_FORCE", "1"}, {"NO_COLOR", "1"}}).color);
  CHECK(options({{"NO_COLOR", "1"}, {"FORCE_COLOR", "1"}}).color);
  CHECK(options({}).mode == util::ProgressMode::kLines);
  CHECK(options({}, true).mode == util::ProgressMode::kSilent);
}

TEST_CASE("the cache root and the driver library come from the lookup", "[cli][environment]") {
  CommandEnvironment e = resolve_command_environment(toolchain::fixed_environment(
      {{"TVMFFI_JIT_CACHE_DIR", "/from/lookup"}, {"HOME", "/home/x"}, {"TVMFFI_JIT_LIBCUDA", "/opt/libcuda.so.1"}}));
  CHECK(cache::resolve_root_path("", e.cache_root) == "/from/lookup");
  CHECK(cache::user_toolchain_memo_dir(e.cache_root) == "/home/x/.cache/tvmffi-jit-toolchain");
  CHECK(e.libcuda == "/opt/libcuda.so.1");
  CHECK(resolve_command_environment(toolchain::fixed_environment({{"TVMFFI_JIT_LIBCUDA", ""}})).libcuda ==
        "libcuda.so.1");

  // $HOME from the lookup is refused as a root, whichever way it is named.
  util::TempDir home;
  CommandEnvironment at_home = resolve_command_environment(toolchain::fixed_environment({{"HOME", home.path()}}));
  try {
    cache_root_to_open(home.path() + "/", at_home.cache_root);
    FAIL("the home directory was accepted as a cache root");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kIo);
    CHECK_THAT(e.what(), Catch::Contains("home directory"));
  }
  CHECK(cache_root_to_open("", at_home.cache_root) == util::join_path(home.path(), ".cache/tvmffi-jit"));
}

TEST_CASE("the build request takes its cache root and driver library from the lookup", "[cli][environment]") {
  util::TempDir d;
  BuildArgs args;
  args.inputs.sources = {util::join_path(d.path(), "a.cc")};
  util::write_file(args.inputs.sources[0], "int x;\n");
  MachineResources machine;
  auto env = toolchain::fixed_environment({{"TVMFFI_JIT_CACHE_DIR", util::join_path(d.path(), "c")},
                                           {"XDG_CACHE_HOME", util::join_path(d.path(), "xdg")},
                                           {"TVMFFI_JIT_LIBCUDA", "/opt/fake/libcuda.so"}});
  BuildRequest r = resolve_build_request(args, env, machine);
  CHECK(r.cache_dir == util::join_path(d.path(), "c"));
  CHECK(r.user_toolchain_memo_dir == util::join_path(d.path(), "xdg/tvmffi-jit-toolchain"));
  CHECK(r.libcuda == "/opt/fake/libcuda.so");
  args.cache_dir = util::join_path(d.path(), "flag");  // --cache-dir wins
  CHECK(resolve_build_request(args, env, machine).cache_dir == args.cache_dir);
}

TEST_CASE("validation takes the tvm-ffi library and the ungated switch from the lookup", "[cli][environment]") {
  DriverLoadOptions o;
  o.device = 2;
  driver::ValidateOptions v = to_validate_options(
      o, toolchain::fixed_environment({{"TVMFFI_JIT_TVM_FFI_LIB", "/opt/libtvm_ffi.so"},
                                       {"TVMFFI_JIT_VALIDATE_UNGATED", "1"},
                                       {"TVM_FFI_ROOT", "/opt/tvm-ffi"}}));
  CHECK(v.device == 2);
  CHECK(v.tvm_ffi_library == "/opt/libtvm_ffi.so");
  CHECK(v.ungated);
  CHECK(v.tvm_ffi_search.env("TVM_FFI_ROOT") == "/opt/tvm-ffi");  // the finder searches with the same lookup
  driver::ValidateOptions plain = to_validate_options(o, toolchain::fixed_environment({}));
  CHECK(plain.tvm_ffi_library.empty());
  CHECK_FALSE(plain.ungated);
  try {
    to_validate_options(o, toolchain::fixed_environment({{"TVMFFI_JIT_VALIDATE_UNGATED", "maybe"}}));
    FAIL("a malformed switch was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kUsage);
    CHECK_THAT(e.what(), Catch::Contains("TVMFFI_JIT_VALIDATE_UNGATED"));
  }
}
