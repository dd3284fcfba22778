// Cubin embedding: the generated assembler is compiled and linked into a real
// shared object with the host compiler, then checked the way a loader and
// tvm-ffi's launcher would see it.
#include <dlfcn.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tvmffi_jit/compile/embed.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

using namespace tvmffi_jit;

namespace {

std::string run_ok(const std::vector<std::string>& argv) {
  util::ProcessResult r = util::run_process(argv);
  INFO(util::format_command(argv) << "\n" << r.out << r.err);
  REQUIRE(r.ok());
  return r.out;
}

// The launcher side, as TVM_FFI_EMBED_CUBIN declares it, plus accessors the
// test can dlsym.
std::string accessor_source(const std::vector<std::string>& names) {
  std::string s = "#include <cstddef>\n";
  for (const auto& n : names) {
    s += "extern \"C\" const char __tvm_ffi__cubin_" + n + "[];\n";
    s += "extern \"C\" const char __tvm_ffi__cubin_" + n + "_end[];\n";
    s += "extern \"C\" const char* test_begin_" + n + "() { return __tvm_ffi__cubin_" + n + "; }\n";
    s += "extern \"C\" size_t test_size_" + n + "() { return __tvm_ffi__cubin_" + n + "_end - __tvm_ffi__cubin_" + n +
         "; }\n";
  }
  return s;
}

// Builds <dir>/module.so from the embed source text and the accessor TU with `cxx`.
std::string link_module(const std::string& cxx, const std::string& embed_text, const std::vector<std::string>& names,
                        const std::string& dir) {
  std::string accessor = dir + "/accessor.cpp";
  util::write_file(accessor, accessor_source(names));
  std::string embed_source = dir + "/" + compile::kEmbedSourceName;
  util::write_file(embed_source, embed_text);
  std::vector<std::string> compile = {cxx, "-fPIC", "-O2", "-g", "-c"};
  for (const auto& f : compile::embed_source_flags()) compile.push_back(f);
  compile.insert(compile.end(), {embed_source, "-o", dir + "/embed.o"});
  run_ok(compile);
  run_ok({cxx, "-fPIC", "-O2", "-std=c++17", "-c", accessor, "-o", dir + "/accessor.o"});
  std::string so = dir + "/module.so";
  run_ok({cxx, "-shared", "-o", so, dir + "/accessor.o", dir + "/embed.o"});
  return so;
}

struct SymbolRow {
  std::string bind, type, visibility, ndx;
};

// `readelf -sW` rows, per symbol table (".symtab", ".dynsym"), by name.
std::map<std::string, std::map<std::string, SymbolRow>> symbol_tables(const std::string& so) {
  std::map<std::string, std::map<std::string, SymbolRow>> tables;
  std::string current;
  for (const auto& line : util::split_lines(run_ok({"readelf", "-sW", so}))) {
    auto q = line.find("Symbol table '");
    if (q != std::string::npos) {
      auto start = q + 14;
      current = line.substr(start, line.find('\'', start) - start);
      continue;
    }
    auto f = util::split_any(line, " ");
    // Num: Value Size Type Bind Vis Ndx Name
    if (current.empty() || f.size() < 8 || !util::ends_with(f[0], ":")) continue;
    tables[current][f[7]] = {f[4], f[3], f[5], f[6]};
  }
  return tables;
}

// Section index (as readelf prints it in symbol rows) -> flag letters.
std::map<std::string, std::string> section_flags(const std::string& so) {
  std::map<std::string, std::string> flags;
  for (const auto& line : util::split_lines(run_ok({"readelf", "-SW", so}))) {
    auto open = line.find('[');
    auto close = line.find(']');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    std::string index(util::trim(line.substr(open + 1, close - open - 1)));
    if (index.empty() || index == "Nr") continue;
    // Name Type Address Off Size ES [Flg] Lk Inf Al
    auto f = util::split_any(line.substr(close + 1), " ");
    flags[index] = f.size() == 10 ? f[6] : "";
  }
  return flags;
}

std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(gen() & 0xff);
  return s;
}

void check_module(const std::string& so, const std::map<std::string, std::string>& expected) {
  auto tables = symbol_tables(so);
  REQUIRE(tables.count(".symtab"));
  REQUIRE(tables.count(".dynsym"));
  for (const auto& [name, bytes] : expected) {
    for (const std::string& sym : {"__tvm_ffi__cubin_" + name, "__tvm_ffi__cubin_" + name + "_end"}) {
      INFO(sym);
      REQUIRE(tables[".symtab"].count(sym));
      CHECK(tables[".symtab"][sym].bind == "LOCAL");
      CHECK(tables[".symtab"][sym].type == "OBJECT");
      CHECK(tables[".dynsym"].count(sym) == 0);
    }
  }
  for (const auto& [table, rows] : tables) {
    for (const auto& [sym, row] : rows) {
      INFO(table << " " << sym);
      CHECK(sym.find("_binary_") == std::string::npos);
    }
  }
  // The data sits in an allocated, read-only, non-executable section.
  auto flags = section_flags(so);
  for (const auto& [name, bytes] : expected) {
    const SymbolRow& row = tables[".symtab"]["__tvm_ffi__cubin_" + name];
    INFO(name << " in section " << row.ndx);
    REQUIRE(flags.count(row.ndx));
    CHECK(flags[row.ndx].find('A') != std::string::npos);
    CHECK(flags[row.ndx].find('W') == std::string::npos);
    CHECK(flags[row.ndx].find('X') == std::string::npos);
  }
  std::string segments = run_ok({"readelf", "-lW", so});
  auto stack = segments.find("GNU_STACK");
  REQUIRE(stack != std::string::npos);
  CHECK(segments.substr(stack, segments.find('\n', stack) - stack).find("RWE") == std::string::npos);

  void* handle = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  INFO((handle ? "" : ::dlerror()));
  REQUIRE(handle);
  for (const auto& [name, bytes] : expected) {
    INFO(name);
    auto begin = reinterpret_cast<const char* (*)()>(::dlsym(handle, ("test_begin_" + name).c_str()));
    auto size = reinterpret_cast<size_t (*)()>(::dlsym(handle, ("test_size_" + name).c_str()));
    REQUIRE(begin);
    REQUIRE(size);
    REQUIRE(size() == bytes.size());
    CHECK(std::string(begin(), size()) == bytes);
    CHECK(reinterpret_cast<uintptr_t>(begin()) % 64 == 0);
    // Not exported under the embedding's names.
    CHECK(::dlsym(handle, ("__tvm_ffi__cubin_" + name).c_str()) == nullptr);
  }
  ::dlclose(handle);
}

}  // namespace

TEST_CASE("embedded binaries link into a module as local symbols around their exact bytes", "[build][embed]") {
  util::TempDir dir;
  std::map<std::string, std::string> expected = {
      {"kernels", util::read_file(std::string(TVMFFI_JIT_ORACLES_DIR) + "/a90.cubin")},
      {"odd_size", random_bytes(1001, 7)},  // not a multiple of anything, NULs included
      {"linux", "a name that is a predefined macro in GNU C"},
  };
  std::vector<compile::EmbeddedBinary> items;
  std::vector<std::string> names;
  for (const auto& [name, bytes] : expected) {
    std::string path = dir.path() + "/" + name + ".bin";
    util::write_file(path, bytes);
    items.push_back({name, path});
    names.push_back(name);
  }
  const std::string embed = compile::embed_source_text(items);

  for (const char* cxx : {"c++", "clang++"}) {
    if (!util::find_program(cxx)) continue;
    SECTION(std::string("linked with ") + cxx) {
      util::TempDir out;
      check_module(link_module(cxx, embed, names, out.path()), expected);
    }
  }
}

TEST_CASE("an embedded file's path may hold quotes, backslashes and spaces", "[build][embed]") {
  util::TempDir dir;
  std::string odd_dir = dir.path() + "/we\"ird \\dir";
  util::make_directories(odd_dir);
  std::string bytes = random_bytes(4096, 11);
  util::write_file(odd_dir + "/x.cubin", bytes);
  const std::string embed = compile::embed_source_text({{"x", odd_dir + "/x.cubin"}});
  util::TempDir out;
  check_module(link_module("c++", embed, {"x"}, out.path()), {{"x", bytes}});
}

TEST_CASE("embedding refuses bad names, duplicates, missing, empty and unwritable paths", "[build][embed]") {
  util::TempDir dir;
  std::string file = dir.path() + "/k.cubin";
  util::write_file(file, "bytes");
  auto code_of = [&](const std::vector<compile::EmbeddedBinary>& items) {
    try {
      for (const auto& item : items) compile::check_embedded_file(item);
      compile::embed_source_text(items);
    } catch (const Error& e) {
      return e.code();
    }
    return ExitCode::kOk;
  };
  for (const char* bad : {"", "1abc", "a-b", "a.b", "a b", "x\n"}) {
    INFO(bad);
    CHECK(code_of({{bad, file}}) == ExitCode::kUsage);
  }
  CHECK(code_of({{"a", file}, {"a", file}}) == ExitCode::kUsage);
  CHECK(code_of({{"a", dir.path() + "/missing.cubin"}}) == ExitCode::kIo);
  util::write_file(dir.path() + "/empty.cubin", "");
  CHECK(code_of({{"a", dir.path() + "/empty.cubin"}}) == ExitCode::kUsage);
  std::string newline_dir = dir.path() + "/line\nbreak";
  util::make_directories(newline_dir);
  util::write_file(newline_dir + "/k.cubin", "bytes");
  CHECK(code_of({{"a", newline_dir + "/k.cubin"}}) == ExitCode::kUsage);
  CHECK(code_of({{"_Ok9", file}}) == ExitCode::kOk);
}

TEST_CASE("a relative path is embedded from the directory the assembler runs in", "[build][embed]") {
  // How the plan names a cubin it builds: relative to the build dir, so the
  // embed unit's text is the same in every build directory.
  util::TempDir dir;
  std::string bytes = random_bytes(512, 3);
  util::write_file(dir.path() + "/built.cubin", bytes);
  util::write_file(dir.path() + "/" + compile::kEmbedSourceName, compile::embed_source_text({{"built", "built.cubin"}}));
  std::vector<std::string> assemble = {"c++", "-fPIC", "-c"};
  for (const auto& f : compile::embed_source_flags()) assemble.push_back(f);
  assemble.insert(assemble.end(), {compile::kEmbedSourceName, "-o", "embed.o"});
  util::ProcessOptions po;
  po.cwd = dir.path();
  util::ProcessResult r = util::run_process(assemble, po);
  INFO(r.out << r.err);
  REQUIRE(r.ok());
  util::write_file(dir.path() + "/accessor.cpp", accessor_source({"built"}));
  run_ok({"c++", "-fPIC", "-std=c++17", "-c", dir.path() + "/accessor.cpp", "-o", dir.path() + "/accessor.o"});
  run_ok({"c++", "-shared", "-o", dir.path() + "/module.so", dir.path() + "/accessor.o", dir.path() + "/embed.o"});
  check_module(dir.path() + "/module.so", {{"built", bytes}});
}
