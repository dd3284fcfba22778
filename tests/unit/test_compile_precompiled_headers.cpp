// compile/precompiled_headers.h: which export units get a PCH, how it is
// keyed, when it is built, and what makes it stale. The compiler is faked
// (its PCH build writes the .gch and a depfile naming old system headers:
// a header written by the test itself is too new to stand for its content).
#include "tvmffi_jit/compile/precompiled_headers.h"

#include <catch2/catch.hpp>
#include <mutex>

#include "compile/pch_unit.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/runner.h"
#include "tvmffi_jit/compile/wrapper.h"
#include "tvmffi_jit/util/fs.h"
#include <sys/stat.h>

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;

namespace {

const char* kGccIdentity =
    "g++ (Debian 12.2.0-14) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.\nsha256:0123";

// Old, never rewritten files of the machine: settled stamps.
const std::vector<std::string> kOldHeaders = {"/usr/include/stdio.h", "/usr/include/stdlib.h"};

// A PCH build writes its -o file and its -MF depfile (naming `reads`); any
// other command is not expected here.
class FakePchCompiler : public CommandRunner {
 public:
  std::vector<std::string> reads = kOldHeaders;
  util::ProcessResult run(const std::vector<std::string>& argv, const util::ProcessOptions&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    util::ProcessResult r;
    r.exit_code = 0;
    if (std::find(argv.begin(), argv.end(), "-E") != argv.end()) {  // asked for its include folders
      r.out = "#include <...> search starts here:\n /usr/include\nEnd of search list.\n";
      return r;
    }
    calls.push_back(argv);
    std::string out, dep;
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "-o") out = argv[i + 1];
      if (argv[i] == "-MF") dep = argv[i + 1];
    }
    util::write_file(out, "gpch fake precompiled header");
    std::string text = out + ":";
    for (const auto& r : reads) text += " " + r;
    util::write_file(dep, text + "\n");
    return r;
  }
  std::vector<std::vector<std::string>> calls;

 private:
  std::mutex mutex_;
};

struct Fixture {
  util::TempDir inc, store;
  CompileStep step;
  PrecompiledHeaders::StepContext context;
  FakePchCompiler compiler;
  ExecuteOptions options;
  Fixture() {
    util::make_directories(inc.path() + "/tvm/ffi/container");
    util::write_file(inc.path() + "/tvm/ffi/container/tensor.h", "#pragma once\n");
    step.language = Language::kCxx;
    step.compiler = "/usr/bin/g++";
    step.flags = {"-std=c++17", "-fPIC", "-O2", "-I" + inc.path()};
    step.generated_text = decorate_with_tvm_ffi("int f(int x) { return x; }", {{"f", ""}});
    step.generated_name = "cpp_0_m.exports.cpp";
    step.object_name = "cpp_0.o";
    step.depfile_name = "cpp_0.o.d";
    step.display = "m.cc";
    context.compiler_identity = kGccIdentity;
    context.search_dirs = {inc.path()};
    context.toolchain_roots = {"/usr/include"};
    options.runner = &compiler;
  }
  std::string key(const CompileStep& s) {
    PrecompiledHeaders pch(store.path());
    pch.prepare(s, context);
    return pch.key_of(s);
  }
  std::string key() { return key(step); }
  std::string gch(const std::string& folder) { return folder + "/tvm/ffi/container/tensor.h.gch"; }
};

}  // namespace

TEST_CASE("a GCC export unit gets a PCH keyed by its compiler, flags and header; others get none",
          "[compile][pch]") {
  Fixture f;
  const std::string base = f.key();
  REQUIRE(base.size() == 64);
  CHECK(f.key() == base);  // the same unit, the same PCH

  CompileStep other = f.step;
  other.flags.push_back("-DNDEBUG");
  CHECK(f.key(other) != base);
  other = f.step;
  other.compiler = "/opt/other/g++";  // another path of the same compiler: GCC checks its own build
  CHECK(f.key(other) == base);
  f.context.compiler_identity += "5";
  CHECK(f.key() != base);
  f.context.compiler_identity = kGccIdentity;
  f.context.environment = {{"CPATH", "/x", true}};
  CHECK(f.key() != base);
  // CXX chose the compiler (its identity is keyed); nvcc's variables do not reach g++.
  f.context.environment = {{"CXX", "/tmp/t/cxx", true}, {"NVCC_APPEND_FLAGS", "-G", true}};
  CHECK(f.key() == base);
  f.context.environment.clear();

  SECTION("not GCC") {
    f.context.compiler_identity = "clang version 16.0.6\nsha256:0123";
    CHECK(f.key().empty());
  }
  SECTION("a source whose first include is not a tvm-ffi header, or comes after a token") {
    for (const char* text : {"int f(int x) { return x; }\n", "#include <vector>\n#include <tvm/ffi/function.h>\n",
                             "int x;\n#include <tvm/ffi/function.h>\n", "#include <tvm/ffi/../../etc/passwd>\n"}) {
      other.generated_text = text;
      INFO(text);
      CHECK(f.key(other).empty());
    }
  }
  SECTION("a source file that starts with a tvm-ffi include, past comments") {
    util::TempDir src;
    util::make_directories(f.inc.path() + "/tvm/ffi");
    util::write_file(f.inc.path() + "/tvm/ffi/function.h", "#pragma once\n");
    util::write_file(src.path() + "/k.cc", "// k.cc\n/* a kernel */\n#include <tvm/ffi/function.h>\nint k;\n");
    other.generated_text.reset();
    other.input_path = src.path() + "/k.cc";
    // Its own folder first (as include_search_dirs lists it), then -I.
    f.context.search_dirs = {src.path(), f.inc.path()};
    const std::string k = f.key(other);
    CHECK(k.size() == 64);
    CHECK(k != base);
    // <...> does not search the source's own folder: a copy there is not the header.
    util::make_directories(src.path() + "/tvm/ffi");
    util::write_file(src.path() + "/tvm/ffi/function.h", "#pragma once\n");
    CHECK(f.key(other) == k);
    // "..." does: the copy is the header the unit reads.
    util::write_file(src.path() + "/k.cc", "#include \"tvm/ffi/function.h\"\nint k;\n");
    CHECK(f.key(other) != k);
  }
  SECTION("a launcher compiles it") {
    other.launcher = {"/usr/bin/ccache"};
    CHECK(f.key(other).empty());
  }
  SECTION("flags a PCH cannot stand for, or that would change the object") {
    for (const char* flag : {"-g", "-g3", "-ggdb", "-frecord-gcc-switches", "-include", "-includefoo.h", "-imacros",
                             "-xc++", "-save-temps", "@flags.rsp", "-iquote/x"}) {
      other = f.step;
      other.flags.push_back(flag);
      INFO(flag);
      CHECK(f.key(other).empty());
    }
    other = f.step;
    other.flags.push_back("-g0");
    CHECK_FALSE(f.key(other).empty());
  }
  SECTION("its header is not found, or a relative folder comes first") {
    f.context.search_dirs = {"/nonexistent"};
    CHECK(f.key().empty());
    f.context.search_dirs = {"rel", f.inc.path()};
    CHECK(f.key().empty());
  }
  SECTION("the header the search finds first is the one keyed") {
    util::TempDir earlier;
    util::make_directories(earlier.path() + "/tvm/ffi/container");
    util::write_file(earlier.path() + "/tvm/ffi/container/tensor.h", "#pragma once\n");
    f.context.search_dirs = {earlier.path(), f.inc.path()};
    CHECK(f.key() != base);
  }
}

TEST_CASE("a flag set's PCH is built at its third compile, used from then on, and rebuilt when its .gch changes",
          "[compile][pch]") {
  Fixture f;
  std::string folder;
  {
    PrecompiledHeaders pch(f.store.path());
    pch.prepare(f.step, f.context);
    // The first and second compiles of this flag set: no PCH, nothing built.
    CHECK_FALSE(pch.folder_for(f.step, f.options));
    CHECK_FALSE(pch.folder_for(f.step, f.options));
    CHECK(f.compiler.calls.empty());
    // The third: built with the unit's flags from the header its search finds.
    auto got = pch.folder_for(f.step, f.options);
    REQUIRE(got);
    folder = *got;
    REQUIRE(f.compiler.calls.size() == 1);
    const auto& argv = f.compiler.calls[0];
    CHECK(argv[0] == "/usr/bin/g++");
    CHECK(std::vector<std::string>(argv.begin() + 1, argv.begin() + 5) == f.step.flags);
    CHECK(std::find(argv.begin(), argv.end(), f.inc.path() + "/tvm/ffi/container/tensor.h") != argv.end());
    CHECK(std::find(argv.begin(), argv.end(), "c++-header") != argv.end());
    CHECK(util::read_file(f.gch(folder)) == "gpch fake precompiled header");
    CHECK(util::read_file(util::parent_path(folder) + "/" + PrecompiledHeaders::kRecordName).find("stdio.h") !=
          std::string::npos);
    // Once proven, the command asks nothing again.
    CHECK(pch.folder_for(f.step, f.options) == folder);
    CHECK(f.compiler.calls.size() == 1);
  }
  {  // The next command finds it current: no build.
    PrecompiledHeaders pch(f.store.path());
    pch.prepare(f.step, f.context);
    CHECK(pch.folder_for(f.step, f.options) == folder);
    CHECK(f.compiler.calls.size() == 1);
  }
  util::write_file(f.gch(folder), "gpch fake precompiled header, rewritten");
  {  // A .gch that is not the one recorded is rebuilt.
    PrecompiledHeaders pch(f.store.path());
    pch.prepare(f.step, f.context);
    CHECK(pch.folder_for(f.step, f.options) == folder);
    CHECK(f.compiler.calls.size() == 2);
    CHECK(util::read_file(f.gch(folder)) == "gpch fake precompiled header");
  }
  {  // One the compiler could not load is removed and not used again by that command.
    PrecompiledHeaders pch(f.store.path());
    pch.prepare(f.step, f.context);
    REQUIRE(pch.folder_for(f.step, f.options));
    pch.discard(f.step);
    CHECK_FALSE(util::path_exists(util::parent_path(folder)));
    CHECK_FALSE(pch.folder_for(f.step, f.options));
    CHECK(f.compiler.calls.size() == 2);
  }
}

TEST_CASE("a PCH goes stale when a file that would shadow one of its headers appears", "[compile][pch]") {
  Fixture f;
  util::TempDir shadow;
  // stdio.h is found in /usr/include, searched after `shadow`.
  f.context.search_dirs = {shadow.path(), "/usr/include", f.inc.path()};
  auto ask = [&] {
    PrecompiledHeaders pch(f.store.path());
    pch.prepare(f.step, f.context);
    return pch.folder_for(f.step, f.options);
  };
  CHECK_FALSE(ask());
  CHECK_FALSE(ask());
  REQUIRE(ask());
  REQUIRE(ask());
  CHECK(f.compiler.calls.size() == 1);
  util::write_file(shadow.path() + "/stdio.h", "/* would be read instead */\n");
  CHECK(ask());
  CHECK(f.compiler.calls.size() == 2);  // rebuilt: a new record with what the search finds now
}

TEST_CASE("projects that differ in their own -I folders after tvm-ffi's share a PCH unless one shadows what it read",
          "[compile][pch]") {
  Fixture f;
  util::TempDir a, b;
  CompileStep in_a = f.step, in_b = f.step;
  in_a.flags.push_back("-I" + a.path());
  in_b.flags.push_back("-I" + b.path());
  f.context.search_dirs = {f.inc.path(), a.path()};
  const std::string key_a = f.key(in_a);
  f.context.search_dirs = {f.inc.path(), b.path()};
  REQUIRE(f.key(in_b) == key_a);
  CHECK(f.key(in_b) == f.key());  // nor from none

  auto ask = [&](const CompileStep& s, const std::string& dir) {
    PrecompiledHeaders pch(f.store.path());
    f.context.search_dirs = {f.inc.path(), dir};
    pch.prepare(s, f.context);
    return pch.folder_for(s, f.options);
  };
  CHECK_FALSE(ask(in_a, a.path()));
  CHECK_FALSE(ask(in_a, a.path()));
  REQUIRE(ask(in_a, a.path()));
  // Built without the project's folder: its flags end with tvm-ffi's -I.
  REQUIRE(f.compiler.calls.size() == 1);
  CHECK(std::find(f.compiler.calls[0].begin(), f.compiler.calls[0].end(), "-I" + a.path()) ==
        f.compiler.calls[0].end());
  CHECK(ask(in_b, b.path()));
  // B's folder holds stdio.h, which the PCH read from /usr/include: B's unit
  // would read B's, so it compiles without the PCH; A's still loads it.
  util::write_file(b.path() + "/stdio.h", "/* B's own */\n");
  CHECK_FALSE(ask(in_b, b.path()));
  CHECK(ask(in_a, a.path()));
  CHECK(f.compiler.calls.size() == 1);
}

TEST_CASE("a PCH whose build read a file written moments before is not kept", "[compile][pch]") {
  Fixture f;
  util::TempDir fresh;
  util::write_file(fresh.path() + "/new.h", "#define NEW 1\n");
  f.compiler.reads = {kOldHeaders[0], fresh.path() + "/new.h"};
  PrecompiledHeaders pch(f.store.path());
  pch.prepare(f.step, f.context);
  CHECK_FALSE(pch.folder_for(f.step, f.options));
  CHECK_FALSE(pch.folder_for(f.step, f.options));
  CHECK_FALSE(pch.folder_for(f.step, f.options));  // built, could not prove itself later: not kept
  CHECK(f.compiler.calls.size() == 1);
  CHECK_FALSE(pch.folder_for(f.step, f.options));  // nor built again by this command
  CHECK(f.compiler.calls.size() == 1);
  for (const auto& name : util::list_directory(f.store.path())) CHECK(name.find(".tmp-") == std::string::npos);
}

TEST_CASE("a PCH folder another user could write is never used", "[compile][pch]") {
  Fixture f;
  util::TempDir open_dir;
  REQUIRE(::chmod(open_dir.path().c_str(), 0777) == 0);
  PrecompiledHeaders pch(open_dir.path());
  pch.prepare(f.step, f.context);
  for (int i = 0; i < 3; ++i) CHECK_FALSE(pch.folder_for(f.step, f.options));  // the third would build one
  CHECK(f.compiler.calls.empty());
  CHECK(util::list_directory(open_dir.path()).empty());
}

TEST_CASE("a source's first include is found past comments and blank lines, never after a token", "[compile][pch]") {
  auto name = [](std::string_view text) {
    auto f = first_include(text);
    return f ? (f->angle ? "<" + f->name + ">" : "\"" + f->name + "\"") : std::string("none");
  };
  CHECK(name("#include <tvm/ffi/function.h>\n") == "<tvm/ffi/function.h>");
  CHECK(name("  // c\n/* multi\nline */\n\t#  include   \"a/b.h\" // why\n") == "\"a/b.h\"");
  CHECK(name("#include <a.h") == "none");
  CHECK(name("#include <a.h\n>") == "none");
  CHECK(name("#include <>\n") == "none");
  CHECK(name("#define X 1\n#include <a.h>\n") == "none");
  CHECK(name("int x;\n#include <a.h>\n") == "none");
  CHECK(name("/* never closed") == "none");
  CHECK(name("") == "none");
}

TEST_CASE("a compiler's complaint about a PCH is told from a compile error", "[compile][pch]") {
  CHECK(mentions_precompiled_header("u.cc:1: fatal error: cannot read PCH file: No such file or directory"));
  CHECK(mentions_precompiled_header("/p/tvm/ffi/container/tensor.h.gch: not used because `X' is defined"));
  CHECK_FALSE(mentions_precompiled_header("m.cc:3:10: error: 'y' was not declared in this scope"));
}
