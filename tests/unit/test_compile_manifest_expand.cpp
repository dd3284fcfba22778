// The modules of a request: -m arguments (files, directories, globs, modules
// manifests) expanded into manifests.
#include <catch2/catch.hpp>

#include <set>

#include "tvmffi_jit/compile/manifest_expand.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;

namespace {

struct Tree {
  util::TempDir dir;
  std::string path(const std::string& f) const { return util::join_path(dir.path(), f); }
  std::string add_module(const std::string& rel, const std::string& name) {
    util::make_directories(util::parent_path(path(rel)));
    util::write_file(path(rel), R"({"name": ")" + name + R"(", "cpp_sources": "int x;"})");
    return path(rel);
  }
};

std::set<std::string> names(const ExpandedManifests& e) {
  std::set<std::string> out;
  for (const auto& m : e.modules) out.insert(m.manifest.name);
  return out;
}

}  // namespace

TEST_CASE("one plain manifest is not a batch; two are", "[build][batch]") {
  Tree t;
  std::string a = t.add_module("a.json", "a");
  std::string b = t.add_module("b.json", "b");
  ExpandedManifests one = expand_manifest_arguments({a});
  CHECK_FALSE(one.batch);
  REQUIRE(one.modules.size() == 1);
  CHECK(one.modules[0].manifest.name == "a");
  ExpandedManifests two = expand_manifest_arguments({a, b});
  CHECK(two.batch);
  CHECK(names(two) == std::set<std::string>{"a", "b"});
  // The same file twice is one module.
  CHECK(expand_manifest_arguments({a, a, b}).modules.size() == 2);
}

TEST_CASE("a directory or a glob of manifests is a batch, sorted by name", "[build][batch]") {
  Tree t;
  t.add_module("mods/b.json", "b");
  t.add_module("mods/a.json", "a");
  util::write_file(t.path("mods/notes.txt"), "not a manifest");
  ExpandedManifests d = expand_manifest_arguments({t.path("mods")});
  CHECK(d.batch);
  REQUIRE(d.modules.size() == 2);
  CHECK(d.modules[0].manifest.name == "a");
  ExpandedManifests g = expand_manifest_arguments({t.path("mods/*.json")});
  CHECK(g.batch);
  CHECK(g.modules.size() == 2);
  CHECK_THROWS_AS(expand_manifest_arguments({t.path("mods/*.nothing")}), Error);
  util::make_directories(t.path("empty"));
  try {
    expand_manifest_arguments({t.path("empty")});
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kUsage);
  }
}

TEST_CASE("a modules manifest lists paths, globs and inline manifests", "[build][batch]") {
  Tree t;
  t.add_module("sub/a.json", "a");
  t.add_module("sub/b.json", "b");
  util::write_file(t.path("all.json"), R"({"modules": ["sub/a.json", "sub/b*.json",
      {"name": "inline_one", "cpp_sources": "int y;"}]})");
  ExpandedManifests e = expand_manifest_arguments({t.path("all.json")});
  CHECK(e.batch);
  CHECK(names(e) == std::set<std::string>{"a", "b", "inline_one"});
  CHECK(e.modules[2].origin == t.path("all.json") + "#/modules/2");
}

TEST_CASE("batch manifest mistakes are exit 2 naming the place", "[build][batch]") {
  Tree t;
  t.add_module("a.json", "same");
  t.add_module("b.json", "same");
  try {
    expand_manifest_arguments({t.path("a.json"), t.path("b.json")});
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kUsage);
    CHECK(std::string(e.what()).find("two modules are named \"same\"") != std::string::npos);
  }
  util::write_file(t.path("bad.json"), R"({"modules": [{"name": "m", "cpp_sources": "int y;", "sourcez": []}]})");
  try {
    expand_manifest_arguments({t.path("bad.json")});
    FAIL("accepted");
  } catch (const ManifestError& e) {
    CHECK(e.pointer() == "/modules/0/sourcez");
  }
  util::write_file(t.path("loop.json"), R"({"modules": ["loop2.json"]})");
  util::write_file(t.path("loop2.json"), R"({"modules": ["loop.json"]})");
  // A file reached twice is read once, so a cycle ends (with no module: exit 2) rather than looping.
  try {
    expand_manifest_arguments({t.path("loop.json")});
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kUsage);
  }
  util::write_file(t.path("extra.json"), R"({"modules": ["a.json"], "cuda_arch": "9.0"})");
  CHECK_THROWS_AS(expand_manifest_arguments({t.path("extra.json")}), ManifestError);
}
