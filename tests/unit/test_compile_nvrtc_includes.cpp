// The #include follower that stands in for -M under NVRTC.
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <unistd.h>

#include "tvmffi_jit/compile/nvrtc.h"
#include "tvmffi_jit/compile/nvrtc_includes.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;

namespace {

struct Tree {
  util::TempDir dir;
  std::string put(const std::string& rel, const std::string& text) {
    std::string path = dir.path() + "/" + rel;
    util::make_directories(util::parent_path(path));
    util::write_file(path, text);
    return path;
  }
  std::string at(const std::string& rel) const { return dir.path() + "/" + rel; }
};

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("quote includes are searched next to the including file, then the include dirs", "[build][nvrtc_includes]") {
  Tree t;
  t.put("src/local.cuh", "#include \"sub/nested.cuh\"\n");
  t.put("src/sub/nested.cuh", "#include \"sibling.cuh\"\n");  // next to nested.cuh, not next to the source
  t.put("src/sub/sibling.cuh", "// leaf\n");
  t.put("inc/lib/api.cuh", "#include <lib/detail.cuh>\n");
  t.put("inc/lib/detail.cuh", "");
  std::string source = "#include \"local.cuh\"\n#include <lib/api.cuh>\n";
  compile::IncludeScan scan = compile::scan_includes(source, t.at("src/k.cu"), {t.at("inc")}, {});
  CHECK(scan.files == std::vector<std::string>{t.at("src/local.cuh"), t.at("src/sub/nested.cuh"),
                                               t.at("src/sub/sibling.cuh"), t.at("inc/lib/api.cuh"),
                                               t.at("inc/lib/detail.cuh")});
  CHECK(scan.complete());
}

TEST_CASE("angle includes do not search the including file's directory", "[build][nvrtc_includes]") {
  Tree t;
  t.put("src/only_here.cuh", "");
  compile::IncludeScan scan = compile::scan_includes("#include <only_here.cuh>\n", t.at("src/k.cu"), {}, {});
  CHECK(scan.files.empty());
  REQUIRE(scan.unresolved.size() == 1);
  CHECK(scan.unresolved[0] == t.at("src/k.cu") + ":1: only_here.cuh");
  CHECK_FALSE(scan.complete());
}

TEST_CASE("headers in system dirs are neither recorded nor followed", "[build][nvrtc_includes]") {
  Tree t;
  t.put("toolkit/cuda/std/cstdint", "#include \"user_would_be_wrong.cuh\"\n");
  t.put("user/user_would_be_wrong.cuh", "");
  compile::IncludeScan scan =
      compile::scan_includes("#include <cuda/std/cstdint>\n", t.at("k.cu"), {t.at("user")}, {t.at("toolkit")});
  CHECK(scan.files.empty());
  CHECK(scan.complete());
}

TEST_CASE("an include dir written through a symlink then .. is searched beside the link's target",
          "[build][nvrtc_includes]") {
  Tree t;
  const std::string d = util::canonical_path(t.dir.path());
  t.put("real/inner/.keep", "");
  t.put("real/val.cuh", "");
  t.put("inc/val.cuh", "");  // where a lexical clean-up of the directory looks
  REQUIRE(::symlink((d + "/real/inner").c_str(), (d + "/inc/link").c_str()) == 0);
  compile::IncludeScan r = compile::scan_includes("#include <val.cuh>\n", d + "/k.cu", {d + "/inc/link/.."}, {});
  CHECK(r.files == std::vector<std::string>{d + "/real/val.cuh"});
  CHECK(r.include_dirs == std::vector<std::string>{d + "/real"});
}

TEST_CASE("include cycles end and every header is listed once", "[build][nvrtc_includes]") {
  Tree t;
  t.put("a.cuh", "#pragma once\n#include \"b.cuh\"\n");
  t.put("b.cuh", "#pragma once\n#include \"a.cuh\"\n#include \"a.cuh\"\n");
  compile::IncludeScan scan = compile::scan_includes("#include \"a.cuh\"\n#include \"b.cuh\"\n", t.at("k.cu"), {}, {});
  CHECK(scan.files == std::vector<std::string>{t.at("a.cuh"), t.at("b.cuh")});
}

TEST_CASE("comments and strings hide include lines; splices and spacing do not", "[build][nvrtc_includes]") {
  Tree t;
  for (const char* h : {"real1.cuh", "real2.cuh", "real3.cuh", "real4.cuh", "real5.cuh"}) t.put(h, "");
  std::string source =
      "// #include \"commented1.cuh\"\n"
      "/* #include \"commented2.cuh\"\n"
      "   #include \"commented3.cuh\" */\n"
      "const char* s = \"/* not a comment\";\n"
      "#include \"real1.cuh\"\n"
      "  #  include   \"real2.cuh\"  // trailing\n"
      "#\\\n"
      "include \"real3.cuh\"\n"
      "#include<real4.cuh>\n"
      "/* a */ #include \"real5.cuh\"\n"
      "#includes \"not_a_directive.cuh\"\n"
      "#define INCLUDE_ME \"x\"\n"
      "#include INCLUDE_ME\n";
  compile::IncludeScan scan = compile::scan_includes(source, t.at("k.cu"), {t.at("")}, {});
  CHECK(scan.files ==
        std::vector<std::string>{t.at("real1.cuh"), t.at("real2.cuh"), t.at("real3.cuh"), t.at("real4.cuh"),
                                 t.at("real5.cuh")});
  CHECK(scan.unresolved.empty());
  // Line numbers count physical lines: the computed include is on line 13.
  CHECK(scan.computed == std::vector<std::string>{t.at("k.cu") + ":13"});
}

TEST_CASE("both branches of a conditional are followed", "[build][nvrtc_includes]") {
  Tree t;
  t.put("fast.cuh", "");
  t.put("slow.cuh", "");
  compile::IncludeScan scan = compile::scan_includes(
      "#ifdef FAST\n#include \"fast.cuh\"\n#else\n#include \"slow.cuh\"\n#endif\n", t.at("k.cu"), {}, {});
  CHECK(scan.files == std::vector<std::string>{t.at("fast.cuh"), t.at("slow.cuh")});
}

TEST_CASE("an NVRTC request's headers come from its include paths and -I options, not the toolkit",
          "[build][nvrtc_includes]") {
  Tree t;
  t.put("a/first.cuh", "#define FIRST 1\n");
  t.put("b/second.cuh", "#define SECOND 2\n");
  t.put("c/forced.cuh", "#define FORCED 3\n");
  t.put("src/near.cuh", "#include <cuda/std/cstdint>\n#define NEAR 4\n");
  compile::NvrtcRequest r;
  r.source =
      "#include <cuda/std/type_traits>\n#include <first.cuh>\n#include <second.cuh>\n#include \"near.cuh\"\n"
      "extern \"C\" __global__ void k(cuda::std::int32_t* x) { x[0] = FIRST + SECOND + FORCED + NEAR; }\n";
  r.source_name = t.at("src/k.cu");
  r.arch = {9, 0};
  r.include_paths = {t.at("a")};
  r.options = {"-I", t.at("b"), "--pre-include=" + t.at("c/forced.cuh")};
  compile::IncludeScan scan = compile::nvrtc_includes(r);
  CHECK(scan.complete());
  CHECK(scan.files == std::vector<std::string>{t.at("c/forced.cuh"), t.at("a/first.cuh"), t.at("b/second.cuh"),
                                               t.at("src/near.cuh")});
  // And NVRTC itself agrees those are enough to compile it.
  compile::NvrtcResult compiled = compile::nvrtc_compile(r);
  INFO(compiled.log);
  CHECK(compiled.ok);
  for (const auto& dir : compile::nvrtc_toolkit_include_dirs()) CHECK(util::is_directory(dir));
  CHECK_FALSE(contains(scan.files, "cuda/std/cstdint"));
}
