// Manifest parsing: every key and form, and the exact error (JSON pointer and
// problem, exit 2) for each kind of bad manifest.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;

namespace {

// A folder with a few sources for manifests to name.
struct ManifestDir {
  util::TempDir dir;
  ManifestDir() {
    for (const char* f : {"a.cc", "b.cpp", "k.cu", "c.c", "pre.o", "x.h", "kern.cubin", "other.cu"})
      util::write_file(util::join_path(dir.path(), f), "// test\n");
    util::make_directories(util::join_path(dir.path(), "inc"));
  }
  Manifest parse(const std::string& text) const { return parse_manifest_text(text, "m.json", dir.path()); }
  std::string path(const std::string& f) const { return util::join_path(dir.path(), f); }
};

struct ManifestFailure {
  std::string pointer, problem, what;
  ExitCode code = ExitCode::kOk;
};

ManifestFailure failure_of(const ManifestDir& d, const std::string& text, bool combination = false) {
  try {
    Manifest m = d.parse(text);
    if (combination) check_manifest(m);
  } catch (const ManifestError& e) {
    return {e.pointer(), e.problem(), e.what(), e.code()};
  }
  FAIL("manifest was accepted: " << text);
  return {};
}

}  // namespace

TEST_CASE("a manifest with every key parses into the matching fields", "[build][manifest]") {
  ManifestDir d;
  Manifest m = d.parse(R"({
    "$schema": "https://example.invalid/tvmffi-jit.schema.json",
    "name": "add_one",
    "sources": ["a.cc", "k.cu", "pre.o"],
    "cpp_sources": ["int a();", "int b();"],
    "cuda_sources": "__global__ void k() {}",
    "functions": {"zeta": "Z doc", "alpha": ""},
    "extra_cflags": ["-DX=1", " -O3 "],
    "extra_cuda_cflags": ["--use_fast_math"],
    "extra_ldflags": ["-lcuda"],
    "extra_include_paths": ["inc"],
    "cuda_arch": ["8.0", "9.0a+PTX"],
    "emit": "object",
    "embed_cubin": {"kb": "kern.cubin", "ka": "other.cu"},
    "compiler": "nvcc",
    "kernel_names": []
  })");
  CHECK(m.name == "add_one");
  CHECK(m.sources == std::vector<std::string>{d.path("a.cc"), d.path("k.cu"), d.path("pre.o")});
  CHECK(m.cpp_sources == std::vector<std::string>{"int a();", "int b();"});
  CHECK(m.cuda_sources == std::vector<std::string>{"__global__ void k() {}"});
  // Insertion order, as a Python dict keeps it.
  REQUIRE(m.functions.size() == 2);
  CHECK(m.functions[0] == std::make_pair(std::string("zeta"), std::string("Z doc")));
  CHECK(m.functions[1] == std::make_pair(std::string("alpha"), std::string("")));
  CHECK(m.extra_cflags == std::vector<std::string>{"-DX=1", " -O3 "});
  CHECK(m.extra_cuda_cflags == std::vector<std::string>{"--use_fast_math"});
  CHECK(m.extra_ldflags == std::vector<std::string>{"-lcuda"});
  CHECK(m.extra_include_paths == std::vector<std::string>{d.path("inc")});
  REQUIRE(m.cuda_arch.size() == 2);
  CHECK(m.cuda_arch[0].text() == "8.0");
  CHECK(m.cuda_arch[1].text() == "9.0a+PTX");
  CHECK(m.emit == EmitKind::kObject);
  REQUIRE(m.embed_cubin.size() == 2);
  CHECK(m.embed_cubin[0].name == "kb");
  CHECK_FALSE(m.embed_cubin[0].compile_from_cuda());
  CHECK(m.embed_cubin[1].name == "ka");
  CHECK(m.embed_cubin[1].compile_from_cuda());
  CHECK(m.compiler == DeviceCompiler::kNvcc);
  CHECK(m.needs_cuda());
  CHECK(m.manifest_path == util::absolute_path("m.json"));
}

TEST_CASE("functions accept a string, a list and an object, all meaning the same for one name", "[build][manifest]") {
  ManifestDir d;
  const std::string head = R"({"name": "m", "cpp_sources": "void f() {}", "functions": )";
  for (const char* form : {R"("f")", R"(["f"])", R"({"f": ""})"}) {
    Manifest m = d.parse(head + form + "}");
    INFO(form);
    REQUIRE(m.functions.size() == 1);
    CHECK(m.functions[0].first == "f");
    CHECK(m.functions[0].second.empty());
  }
  Manifest many = d.parse(head + R"(["g", "f"]})");
  REQUIRE(many.functions.size() == 2);
  CHECK(many.functions[0].first == "g");
  Manifest none = d.parse(head + R"([]})");
  CHECK(none.functions.empty());
}

TEST_CASE("cuda_arch accepts a list or a string separated by spaces, commas or semicolons", "[build][manifest]") {
  ManifestDir d;
  const std::string head = R"({"name": "m", "cuda_sources": "x", "cuda_arch": )";
  auto texts = [&](const std::string& form) {
    std::vector<std::string> out;
    for (const auto& a : d.parse(head + form + "}").cuda_arch) out.push_back(a.text());
    return out;
  };
  const std::vector<std::string> expected = {"8.0", "9.0a", "10.0f+PTX"};
  CHECK(texts(R"("8.0 9.0a 10.0f+PTX")") == expected);
  CHECK(texts(R"("8.0,9.0a;10.0f+ptx")") == expected);
  CHECK(texts(R"(["8.0", "9.0a", "10.0f+PTX"])") == expected);
  CHECK(texts(R"(["8.0 9.0a", "10.0f+PTX"])") == expected);
  CHECK(texts(R"(["9.0", "9.0+PTX"])") == std::vector<std::string>{"9.0+PTX"});
}

TEST_CASE("sources and inline sources accept one string as well as a list", "[build][manifest]") {
  ManifestDir d;
  Manifest m = d.parse(R"({"name": "m", "sources": "a.cc", "cpp_sources": "int x;"})");
  CHECK(m.sources == std::vector<std::string>{d.path("a.cc")});
  CHECK(m.cpp_sources == std::vector<std::string>{"int x;"});
  CHECK(m.emit == EmitKind::kModule);
  CHECK_FALSE(m.needs_cuda());
}

TEST_CASE("emit and compiler accept each documented value", "[build][manifest]") {
  ManifestDir d;
  for (const char* e : {"module", "object", "cubin", "fatbin", "ptx"}) {
    Manifest m = d.parse(std::string(R"({"name": "m", "cuda_sources": "x", "emit": ")") + e + "\"}");
    CHECK(emit_kind_name(m.emit) == std::string(e));
  }
  Manifest m = d.parse(R"({"name": "m", "cuda_sources": "x", "emit": "ptx", "compiler": "nvrtc", "kernel_names": ["k<float>"]})");
  CHECK(m.compiler == DeviceCompiler::kNvrtc);
  CHECK(m.kernel_names == std::vector<std::string>{"k<float>"});
  CHECK_NOTHROW(check_manifest(m));
}

TEST_CASE("each kind of bad manifest names the key and the problem", "[build][manifest]") {
  ManifestDir d;
  struct Case {
    const char* text;
    const char* pointer;
    const char* problem;  // exact, or a prefix when ending in "..."
    bool combination;
  };
  const Case cases[] = {
      {R"([1, 2])", "", "expected a JSON object, got array", false},
      {R"({"name": "m", "extra_cflag": []})", "/extra_cflag", "unknown key (did you mean \"extra_cflags\"?)", false},
      {R"({"name": "m", "zzzzzzzzzzzz": 1})", "/zzzzzzzzzzzz", "unknown key", false},
      {R"({"name": "m", "a/b~": 1})", "/a~1b~0", "unknown key", false},
      {R"({"cpp_sources": "x"})", "/name", "missing required key", false},
      {R"({"name": 3, "cpp_sources": "x"})", "/name", "expected a string, got number", false},
      {R"({"name": "add-one", "cpp_sources": "x"})", "/name",
       "module name \"add-one\" is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", false},
      {R"({"name": "m", "cpp_sources": "x", "extra_cflags": ["-O2", "-g", 3]})", "/extra_cflags/2",
       "expected a string, got number", false},
      {R"({"name": "m", "cpp_sources": "x", "extra_cflags": "-O2"})", "/extra_cflags",
       "expected an array of strings, got string", false},
      {R"({"name": "m", "cpp_sources": {"a": 1}})", "/cpp_sources", "expected a string or an array of strings, got object",
       false},
      {R"({"name": "m", "sources": ["a.cc", "missing.cc"]})", "/sources/1", "no such file \"missing.cc\" (...", false},
      {R"({"name": "m", "sources": ["x.h"]})", "/sources/0",
       "unsupported source type \".h\" (expected .c .cc .cpp .cxx .cu .hip or .o)", false},
      {R"({"name": "m", "sources": ["inc.cc"]})", "/sources/0", "no such file...", false},
      {R"({"name": "m", "sources": [""]})", "/sources/0", "empty path", false},
      {R"({"name": "m", "sources": ["a.cc", "./a.cc"]})", "/sources/1", "source \"./a.cc\" is listed twice", false},
      {R"({"name": "m", "cpp_sources": "x", "functions": 7})", "/functions",
       "expected a string, an array of strings or an object of name: docstring, got number", false},
      {R"({"name": "m", "cpp_sources": "x", "functions": ["add", "1x"]})", "/functions/1",
       "function name \"1x\" is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)", false},
      {R"({"name": "m", "cpp_sources": "x", "functions": {"f": 1}})", "/functions/f",
       "expected a string (the docstring), got number", false},
      {R"({"name": "m", "cpp_sources": "x", "functions": ["f", "f"]})", "/functions/1", "duplicate function \"f\"", false},
      {R"({"name": "m", "cuda_sources": "x", "cuda_arch": "9"})", "/cuda_arch", "bad CUDA architecture \"9\": ...", false},
      {R"({"name": "m", "cuda_sources": "x", "cuda_arch": ["8.0", "sm_90"]})", "/cuda_arch/1",
       "bad CUDA architecture \"sm_90\": ...", false},
      {R"({"name": "m", "cuda_sources": "x", "cuda_arch": []})", "/cuda_arch", "empty CUDA architecture list...", false},
      {R"({"name": "m", "cpp_sources": "x", "emit": "so"})", "/emit",
       "unknown emit kind \"so\" (expected module, object, cubin, fatbin or ptx)", false},
      {R"({"name": "m", "cpp_sources": "x", "compiler": "clang"})", "/compiler",
       "unknown compiler \"clang\" (expected nvcc or nvrtc)", false},
      {R"({"name": "m", "cpp_sources": "x", "embed_cubin": {"bad-name": "kern.cubin"}})", "/embed_cubin/bad-name",
       "embed name \"bad-name\" is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)", false},
      {R"({"name": "m", "cpp_sources": "x", "embed_cubin": ["kern.cubin"]})", "/embed_cubin",
       "expected an object of name: path, got array", false},
      {R"({"name": "m", "sources": ["a.cc"], "sources": ["b.cpp"]})", "/sources", "duplicate key", false},
      {R"({"name": "m", "cpp_sources": "x", "extra_include_paths": ["nope"]})", "/extra_include_paths/0",
       "no such directory \"nope\" (...", false},
      {R"({"name": "m", "cuda_sources": "x", "kernel_names": [" "]})", "/kernel_names/0", "empty kernel name expression",
       false},
      {R"({"name": "m", "$schema": 1, "cpp_sources": "x"})", "/$schema", "expected a string, got number", false},
      // Combination checks.
      {R"({"name": "m"})", "/sources", "no source: ...", true},
      {R"({"name": "m", "cpp_sources": "x", "compiler": "nvrtc"})", "/compiler",
       "nvrtc compiles only for emit cubin or ptx (emit is module); use nvcc", true},
      {R"({"name": "m", "cuda_sources": "x", "emit": "cubin", "kernel_names": ["k"]})", "/kernel_names",
       "kernel name expressions are lowered by NVRTC: ...", true},
      {R"({"name": "m", "cuda_sources": "x", "emit": "cubin", "functions": "f"})", "/functions",
       "functions are exported only by emit module or object (emit is cubin)", true},
      {R"({"name": "m", "sources": ["k.cu", "other.cu"], "emit": "fatbin"})", "/emit",
       "emit fatbin needs exactly one CUDA source (one .cu file or cuda_sources), got 2", true},
      {R"({"name": "m", "sources": ["k.cu", "a.cc"], "emit": "ptx"})", "/emit",
       "emit ptx compiles CUDA kernel sources only; drop the C/C++ sources and objects", true},
      {R"({"name": "m", "sources": ["c.c", "pre.o"], "functions": "f"})", "/functions",
       "exporting functions needs a C++ or CUDA source (.c files and objects cannot hold the exports)", true},
      {R"({"name": "m", "cuda_sources": "x", "emit": "cubin", "embed_cubin": {"k": "kern.cubin"}})", "/embed_cubin",
       "embedding needs emit module or object (emit is cubin)", true},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    ManifestFailure f = failure_of(d, c.text, c.combination);
    CHECK(f.code == ExitCode::kUsage);
    CHECK(f.pointer == c.pointer);
    std::string expected = c.problem;
    if (expected.size() > 3 && expected.compare(expected.size() - 3, 3, "...") == 0) {
      CHECK(f.problem.substr(0, expected.size() - 3) == expected.substr(0, expected.size() - 3));
    } else {
      CHECK(f.problem == expected);
    }
    if (!c.combination)
      CHECK(f.what == "m.json: " + (f.pointer.empty() ? "" : std::string(c.pointer) + ": ") + f.problem);
  }
}

TEST_CASE("invalid JSON reports the line and column", "[build][manifest]") {
  ManifestDir d;
  ManifestFailure f = failure_of(d, "{\n  \"name\": \"m\",\n  \"sources\": [\"a.cc\",]\n}");
  CHECK(f.code == ExitCode::kUsage);
  CHECK(f.pointer.empty());
  CHECK(f.problem.rfind("invalid JSON at line 3, column ", 0) == 0);
}

TEST_CASE("a directory given as a source is rejected as not a file", "[build][manifest]") {
  ManifestDir d;
  util::make_directories(d.path("dir.cc"));
  ManifestFailure f = failure_of(d, R"({"name": "m", "sources": ["dir.cc"]})");
  CHECK(f.pointer == "/sources/0");
  CHECK(f.problem.find("is a directory, not a file") != std::string::npos);
}

TEST_CASE("load_manifest resolves paths against the manifest's folder", "[build][manifest]") {
  ManifestDir d;
  util::make_directories(d.path("sub"));
  util::write_file(d.path("sub/m.json"), R"({"name": "m", "sources": ["../a.cc"], "extra_include_paths": ["../inc"]})");
  Manifest m = load_manifest(d.path("sub/m.json"));
  CHECK(m.sources == std::vector<std::string>{d.path("a.cc")});
  CHECK(m.extra_include_paths == std::vector<std::string>{d.path("inc")});
  try {
    load_manifest(d.path("sub/none.json"));
    FAIL("a missing manifest was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kUsage);
    CHECK(std::string(e.what()).find("none.json") != std::string::npos);
  }
}

TEST_CASE("command-line values extend the manifest's lists and replace its scalars", "[build][manifest]") {
  ManifestDir d;
  Manifest m = d.parse(R"({"name": "m", "sources": ["a.cc"], "functions": "f", "extra_cflags": ["-DA"],
                           "cuda_arch": "8.0", "emit": "module"})");
  CommandLineInputs cli;
  cli.sources = {d.path("k.cu")};
  cli.name = "renamed";
  cli.functions = {"g=Adds: a=b", "h"};
  cli.cflags = {"-DB"};
  cli.cuda_cflags = {"-lineinfo"};
  cli.ldflags = {"-lcuda"};
  cli.include_paths = {d.path("inc")};
  cli.arch = {"9.0,10.0a"};
  cli.emit = "object";
  apply_command_line(m, cli);
  CHECK(m.name == "renamed");
  CHECK(m.sources == std::vector<std::string>{d.path("a.cc"), d.path("k.cu")});
  REQUIRE(m.functions.size() == 3);
  CHECK(m.functions[1] == std::make_pair(std::string("g"), std::string("Adds: a=b")));
  CHECK(m.functions[2].second.empty());
  CHECK(m.extra_cflags == std::vector<std::string>{"-DA", "-DB"});
  CHECK(m.extra_cuda_cflags == std::vector<std::string>{"-lineinfo"});
  CHECK(m.extra_ldflags == std::vector<std::string>{"-lcuda"});
  CHECK(m.cuda_arch.size() == 1);
  REQUIRE(m.command_line_arch.size() == 2);
  CHECK(m.command_line_arch[1].text() == "10.0a");
  CHECK(m.emit == EmitKind::kObject);
}

TEST_CASE("command-line mistakes are usage errors naming the option", "[build][manifest]") {
  ManifestDir d;
  auto problem_of = [&](CommandLineInputs cli) -> std::string {
    Manifest m;
    try {
      apply_command_line(m, cli);
    } catch (const ManifestError& e) {
      CHECK(e.code() == ExitCode::kUsage);
      CHECK(e.where() == "command line");
      return e.pointer() + ": " + e.problem();
    }
    return "accepted";
  };
  CommandLineInputs base;
  base.sources = {d.path("a.cc")};
  {
    CommandLineInputs c = base;
    c.functions = {"f", "f=again"};
    CHECK(problem_of(c) == "--function f=again: duplicate function \"f\"");
  }
  {
    CommandLineInputs c = base;
    c.arch = {"9.0 nine"};
    CHECK(problem_of(c).rfind("--arch 9.0 nine: bad CUDA architecture \"nine\"", 0) == 0);
  }
  {
    CommandLineInputs c = base;
    c.sources.push_back(d.path("a.cc"));
    CHECK(problem_of(c) == "source \"" + d.path("a.cc") + "\": source \"" + d.path("a.cc") + "\" is listed twice");
  }
  {
    CommandLineInputs c = base;
    c.embed_cubin = {"kern.cubin"};
    CHECK(problem_of(c) == "--embed-cubin kern.cubin: expected NAME=FILE");
  }
  {
    CommandLineInputs c;
    c.sources = {d.path("c.c")};
    c.name = "9lives";
    CHECK(problem_of(c) == "--name: module name \"9lives\" is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  }
  {
    // Nothing at all: say what to give, not which flag is missing.
    CommandLineInputs c;
    CHECK(problem_of(c) ==
          ": nothing to build: give source files (tvmffi-jit build kernel.cu) or a manifest (tvmffi-jit build -m "
          "manifest.json); see tvmffi-jit build --help");
  }
  {
    // Combination rules name the flag, never a JSON pointer, when the command line set the value.
    CommandLineInputs c = base;
    c.compiler = "nvrtc";
    CHECK(problem_of(c).rfind("--compiler: nvrtc compiles only for emit cubin or ptx", 0) == 0);
    c = base;
    c.kernel_names = {"k<int>"};
    CHECK(problem_of(c).rfind("--kernel-name: kernel name expressions are lowered by NVRTC", 0) == 0);
    c = base;
    c.emit = "cubin";
    CHECK(problem_of(c).rfind("--emit: emit cubin compiles CUDA kernel sources only", 0) == 0);
  }
  {
    // Without --name, the first source's stem names the module.
    Manifest m;
    apply_command_line(m, base);
    CHECK(m.name == "a");
  }
}

TEST_CASE("a combination problem points at the manifest key or the flag, whichever set the value", "[build][manifest]") {
  ManifestDir d;
  util::write_file(d.path("m.json"), R"({"name": "m", "sources": ["a.cc"], "emit": "module"})");
  auto failure_with = [&](CommandLineInputs cli) -> std::pair<std::string, std::string> {
    Manifest m = load_manifest(d.path("m.json"));
    try {
      apply_command_line(m, cli);
    } catch (const ManifestError& e) {
      return {e.where(), e.pointer()};
    }
    return {"accepted", ""};
  };
  CommandLineInputs cli;
  cli.compiler = "nvrtc";  // the flag is the mistake
  CHECK(failure_with(cli) == std::make_pair(std::string("command line"), std::string("--compiler")));
  util::write_file(d.path("m.json"), R"({"name": "m", "sources": ["a.cc"], "compiler": "nvrtc"})");
  CHECK(failure_with({}) == std::make_pair(d.path("m.json"), std::string("/compiler")));  // the manifest's key is
}

TEST_CASE("a JSON number too large for a double is a manifest error (exit 2) with its line", "[build][manifest]") {
  ManifestDir d;
  ManifestFailure f = failure_of(d, "{\"name\": \"m\",\n \"sources\": [\"a.cc\"], \"cuda_arch\": 1e999}");
  CHECK(f.code == ExitCode::kUsage);
  CHECK(f.pointer.empty());
  CHECK(f.problem == "invalid JSON at line 2, column 36: number 1e999 is out of range (larger than a double can hold)");
}

TEST_CASE("a module name too long for a file name is refused by the parser, before anything is written",
          "[build][manifest]") {
  ManifestDir d;
  const std::string longest(kMaxModuleNameLength, 'a'), too_long(kMaxModuleNameLength + 1, 'a');
  CHECK(d.parse(R"({"name": ")" + longest + R"(", "sources": ["a.cc"]})").name == longest);
  ManifestFailure f = failure_of(d, R"({"name": ")" + std::string(300, 'a') + R"(", "sources": ["a.cc"]})");
  CHECK(f.code == ExitCode::kUsage);
  CHECK(f.pointer == "/name");
  CHECK(f.problem == "module name \"aaaaaaaaaaaaaaaaaaaaaaaa...\" is 300 characters long; the file names made from it "
                     "(<name>.fatbin.d, .<name>.so.tmp.<pid>) must fit the file system's 255 bytes, which allows at "
                     "most 223");
  CommandLineInputs cli;
  cli.sources = {d.path("a.cc")};
  cli.name = too_long;
  Manifest m;
  CHECK_THROWS_WITH(apply_command_line(m, cli), Catch::Contains("--name: module name") && Catch::Contains("224 characters"));
  // A source whose stem names the module is held to the same rule.
  util::write_file(d.path(too_long + ".cc"), "int x;\n");
  cli.name.reset();
  cli.sources = {d.path(too_long + ".cc")};
  Manifest m2;
  CHECK_THROWS_WITH(apply_command_line(m2, cli), Catch::Contains("pass --name NAME"));
}

TEST_CASE("a NUL in a name is shown escaped, so the message is not cut", "[build][manifest]") {
  ManifestDir d;
  ManifestFailure f = failure_of(d, R"({"name": "ab\u0000cd", "sources": ["a.cc"]})");
  CHECK(f.pointer == "/name");
  CHECK(f.problem == "module name \"ab\\x00cd\" is not an identifier ([A-Za-z_][A-Za-z0-9_]*)");
  CHECK(std::string(f.what).find('\0') == std::string::npos);
}

TEST_CASE("a /proc pseudo-file is refused as a source or embedded file, not read as empty", "[build][manifest]") {
  ManifestDir d;
  ::symlink("/proc/self/environ", d.path("environ.cc").c_str());
  ManifestFailure f = failure_of(d, R"({"name": "m", "sources": ["environ.cc"]})");
  CHECK(f.pointer == "/sources/0");
  CHECK(f.problem.find("is a pseudo-file (its size reads 0 but it has content") != std::string::npos);
  f = failure_of(d, R"({"name": "m", "sources": ["a.cc"], "embed_cubin": {"k": "/proc/self/maps"}})");
  CHECK(f.pointer == "/embed_cubin/k");
  CHECK(f.problem.find("is a pseudo-file") != std::string::npos);
  // A really empty file is a file: an empty source compiles to an empty object.
  util::write_file(d.path("empty.cc"), "");
  CHECK(d.parse(R"({"name": "m", "sources": ["empty.cc"]})").sources.size() == 1);
}

TEST_CASE("a FIFO given as a source is refused without blocking on it", "[build][manifest]") {
  ManifestDir d;
  REQUIRE(::mkfifo(d.path("fifo.cc").c_str(), 0600) == 0);
  ManifestFailure f = failure_of(d, R"({"name": "m", "sources": ["fifo.cc"]})");
  CHECK(f.problem.find("is not a regular file (a FIFO)") != std::string::npos);
}

TEST_CASE("an unreadable source says permission denied, not no such file", "[build][manifest]") {
  ManifestDir d;
  // Root reads any file, but not through a path whose directory is not a directory.
  util::make_directories(d.path("locked"));
  util::write_file(d.path("locked/s.cc"), "int x;\n");
  ::chmod(d.path("locked").c_str(), 0);
  const bool can_enter = ::access(d.path("locked/s.cc").c_str(), R_OK) == 0;  // root can
  ManifestFailure f = failure_of(d, R"({"name": "m", "sources": ["a.cc/s.cc"]})");
  CHECK(f.problem == "cannot read \"a.cc/s.cc\" (" + d.path("a.cc/s.cc") + "): not a directory");
  if (!can_enter) {
    f = failure_of(d, R"({"name": "m", "sources": ["locked/s.cc"]})");
    CHECK(f.problem == "cannot read \"locked/s.cc\" (" + d.path("locked/s.cc") + "): permission denied");
  }
  ::chmod(d.path("locked").c_str(), 0700);
  CHECK(failure_of(d, R"({"name": "m", "sources": ["gone.cc"]})").problem.rfind("no such file \"gone.cc\"", 0) == 0);
}

TEST_CASE("flags beyond the system's command-line limit are refused up front, naming the key", "[build][manifest]") {
  ManifestDir d;
  std::string many = R"({"name": "m", "sources": ["a.cc"], "extra_cflags": [)";
  const long arg_max = ::sysconf(_SC_ARG_MAX);
  const size_t count = static_cast<size_t>(arg_max / 8);  // 14 bytes each in argv: 1.75 x ARG_MAX
  for (size_t i = 0; i < count; ++i) many += std::string(i ? "," : "") + "\"-DX=1\"";
  many += "]}";
  ManifestFailure f = failure_of(d, many, true);
  CHECK(f.code == ExitCode::kUsage);
  CHECK(f.pointer == "/extra_cflags");
  CHECK(f.problem.find("more than the system allows (ARG_MAX") != std::string::npos);
  // One argument longer than the kernel's per-argument limit.
  ManifestFailure one = failure_of(d, R"({"name": "m", "sources": ["a.cc"], "extra_ldflags": ["-Wl,)" + std::string(200000, 'x') + R"("]})", true);
  CHECK(one.pointer == "/extra_ldflags");
  CHECK(one.problem.find("per argument (E2BIG)") != std::string::npos);
}

TEST_CASE("absolute paths on the command line need no current directory", "[build][manifest]") {
  ManifestDir d;
  util::TempDir gone;
  const std::string before = util::current_directory();
  util::make_directories(gone.path() + "/cwd");
  REQUIRE(::chdir((gone.path() + "/cwd").c_str()) == 0);
  ::rmdir((gone.path() + "/cwd").c_str());
  CommandLineInputs cli;
  cli.sources = {d.path("a.cc")};
  cli.include_paths = {d.path("inc")};
  Manifest m;
  CHECK_NOTHROW(apply_command_line(m, cli));
  CHECK(m.sources == std::vector<std::string>{d.path("a.cc")});
  // A relative one says why it cannot be resolved.
  CommandLineInputs relative;
  relative.sources = {"a.cc"};
  Manifest m2;
  CHECK_THROWS_WITH(apply_command_line(m2, relative), Catch::Contains("the current directory is unavailable"));
  REQUIRE(::chdir(before.c_str()) == 0);
}

TEST_CASE("the accepted key set is exactly the documented one", "[build][manifest]") {
  CHECK(manifest_keys() == std::vector<std::string>{"$schema", "name", "sources", "cpp_sources", "cuda_sources",
                                                    "functions", "extra_cflags", "extra_cuda_cflags", "extra_ldflags",
                                                    "extra_include_paths", "system_include_paths", "cuda_runtime", "cuda_driver", "cuda_arch", "emit", "embed_cubin",
                                                    "compiler", "kernel_names", "cxx_launcher", "cuda_launcher", "backend",
                                                    "rocm_arch"});
}

TEST_CASE("a duplicate among 100,000 functions is found at its index, and names from the manifest count on the command line",
          "[build][manifest]") {
  ManifestDir d;
  // 100,000 names: the duplicate check used to compare each name with every
  // earlier one (80,000 names took 8.8 s); it is a hash set now.
  std::string list;
  for (int i = 0; i < 100000; ++i) list += (i ? ",\"f" : "\"f") + std::to_string(i) + "\"";
  Manifest ok = d.parse(R"({"name": "m", "cpp_sources": "x", "functions": [)" + list + "]}");
  CHECK(ok.functions.size() == 100000);
  ManifestFailure f = failure_of(d, R"({"name": "m", "cpp_sources": "x", "functions": [)" + list + R"(, "f99999"]})");
  CHECK(f.pointer == "/functions/100000");
  CHECK(f.problem == "duplicate function \"f99999\"");
  // --function adds to the manifest's names and must see them.
  CommandLineInputs cli;
  cli.functions = {"g", "f12345"};
  try {
    apply_command_line(ok, cli);
    FAIL("duplicate accepted");
  } catch (const ManifestError& e) {
    CHECK(e.pointer() == "--function f12345");
    CHECK(e.problem() == "duplicate function \"f12345\"");
  }
}

TEST_CASE("module names of FlashInfer's length (140-169 characters) are accepted", "[build][manifest]") {
  ManifestDir d;
  const std::string name = "batch_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_head_dim_qk_128_"
                           "head_dim_vo_128_posenc_0_use_swa_False_use_logits_cap_False_f16qk_False";
  REQUIRE(name.size() > 160);
  CHECK(d.parse(R"({"name": ")" + name + R"(", "sources": ["a.cc"]})").name == name);
}

TEST_CASE("system_include_paths resolve against the manifest and must be directories", "[build][manifest]") {
  ManifestDir d;
  Manifest m = d.parse(R"({"name": "m", "sources": ["a.cc"], "system_include_paths": ["inc"],
                           "cuda_runtime": true, "cuda_driver": false})");
  CHECK(m.system_include_paths == std::vector<std::string>{d.path("inc")});
  CHECK(m.cuda_runtime);
  CHECK_FALSE(m.cuda_driver);
  CHECK(m.needs_cuda_toolkit());
  CHECK_FALSE(m.needs_cuda());

  ManifestFailure missing = failure_of(d, R"({"name": "m", "sources": ["a.cc"], "system_include_paths": ["inc", "nope"]})");
  CHECK(missing.code == ExitCode::kUsage);
  CHECK(missing.pointer == "/system_include_paths/1");
  CHECK_THAT(missing.problem, Catch::StartsWith("no such directory \"nope\""));
  ManifestFailure file = failure_of(d, R"({"name": "m", "sources": ["a.cc"], "system_include_paths": ["x.h"]})");
  CHECK(file.pointer == "/system_include_paths/0");
  CHECK_THAT(file.problem, Catch::Contains("is not a directory"));
  ManifestFailure type = failure_of(d, R"({"name": "m", "sources": ["a.cc"], "cuda_driver": "yes"})");
  CHECK(type.pointer == "/cuda_driver");

  CommandLineInputs cli;
  cli.system_include_paths = {d.path("a.cc")};
  Manifest m2 = d.parse(R"({"name": "m", "sources": ["a.cc"]})");
  CHECK_THROWS_WITH(apply_command_line(m2, cli), Catch::Contains("--isystem") && Catch::Contains("is not a directory"));
}

TEST_CASE("a path too long for the file system is exit 2 naming its key, not a missing file", "[build][manifest]") {
  ManifestDir d;
  const std::string long_name(300, 'x');
  ManifestFailure inc = failure_of(d, R"({"name": "m", "sources": ["a.cc"], "system_include_paths": ["inc/)" + long_name + R"("]})");
  CHECK(inc.code == ExitCode::kUsage);
  CHECK(inc.pointer == "/system_include_paths/0");
  CHECK_THAT(inc.problem, Catch::Contains("too long for the file system") && Catch::Contains("300 bytes"));
  ManifestFailure src = failure_of(d, R"({"name": "m", "sources": [")" + long_name + R"(.cc"]})");
  CHECK(src.pointer == "/sources/0");
  CHECK_THAT(src.problem, Catch::Contains("too long for the file system"));
  std::string deep;
  for (int i = 0; i < 600; ++i) deep += "dir_" + std::to_string(i) + "/";
  ManifestFailure total = failure_of(d, R"({"name": "m", "sources": ["a.cc"], "extra_include_paths": [")" + deep + R"("]})");
  CHECK(total.pointer == "/extra_include_paths/0");
  CHECK_THAT(total.problem, Catch::Contains("too long for the file system") && Catch::Contains("at most 4095"));
}

TEST_CASE("cuda_runtime and cuda_driver are refused with backend hip", "[build][manifest]") {
  ManifestDir d;
  ManifestFailure f = failure_of(d, R"({"name": "m", "sources": ["a.cc"], "backend": "hip", "cuda_driver": true})", true);
  CHECK(f.code == ExitCode::kUsage);
  CHECK(f.pointer == "/cuda_driver");
}
