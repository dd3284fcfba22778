#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/time.h>

#include <string>
#include <vector>

#include "tvmffi_jit/toolchain/compiler_identity.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::toolchain;

TEST_CASE("compiler identity is memoised by stamp and follows the version output and content, not the mtime",
          "[toolchain][identity]") {
  util::TempDir dir;
  std::string log = util::join_path(dir.path(), "calls.log");
  std::string cc = util::join_path(dir.path(), "fakecc");
  auto write_compiler = [&](const std::string& version) {
    util::write_file(cc, "#!/bin/sh\necho called >> '" + log + "'\necho '" + version + "'\n");
    REQUIRE(::chmod(cc.c_str(), 0755) == 0);
  };
  write_compiler("fakecc 1.0");
  IdentifyOptions opts;
  opts.memo_dir = util::join_path(dir.path(), "compilers");

  CompilerIdentity first = identify_compiler("cxx", cc, opts);
  // --version, then the content (ccache's compiler_check=content).
  CHECK(first.identity == "fakecc 1.0\n\nsha256:" + util::sha256_file_hex(cc));
  CHECK(first.path == cc);
  CompilerIdentity second = identify_compiler("cxx", cc, opts);
  CHECK(second.identity == first.identity);
  CHECK(util::read_file(log) == "called\n");  // the memo answered: nothing was spawned

  // Touching the compiler invalidates the memo but not the identity.
  struct timeval old[2] = {{1000000000, 0}, {1000000000, 0}};
  REQUIRE(::utimes(cc.c_str(), old) == 0);
  CompilerIdentity touched = identify_compiler("cxx", cc, opts);
  CHECK(util::read_file(log) == "called\ncalled\n");
  CHECK(touched.identity == first.identity);

  // Another version under the same path is another identity.
  write_compiler("fakecc 2.0");
  CHECK(identify_compiler("cxx", cc, opts).identity.rfind("fakecc 2.0\n\nsha256:", 0) == 0);

  // A wrapper edited in place, same size and mtime, same --version: the
  // ctime in the memo's stamp notices it, the content hash tells it apart.
  const CompilerIdentity before = identify_compiler("cxx", cc, opts);
  struct stat st;
  REQUIRE(::stat(cc.c_str(), &st) == 0);
  std::string text = util::read_file(cc);
  text.replace(text.find("called"), 6, "callee");  // same size, same --version
  util::write_file(cc, text);
  REQUIRE(::chmod(cc.c_str(), 0755) == 0);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, cc.c_str(), times, 0) == 0);
  const CompilerIdentity after = identify_compiler("cxx", cc, opts);
  CHECK(after.identity != before.identity);
}

TEST_CASE("a compiler whose --version fails is identified by its content", "[toolchain][identity]") {
  util::TempDir dir;
  std::string cc = util::join_path(dir.path(), "nover");
  util::write_file(cc, "#!/bin/sh\nexit 1\n");
  REQUIRE(::chmod(cc.c_str(), 0755) == 0);
  CompilerIdentity id = identify_compiler("cxx", cc, {});
  CHECK(id.identity.rfind("sha256:", 0) == 0);
  util::write_file(cc, "#!/bin/sh\nexit 2\n");
  CHECK(identify_compiler("cxx", cc, {}).identity != id.identity);
}

TEST_CASE("removing identity memos removes what identify_compiler wrote and nothing else", "[toolchain][identity]") {
  util::TempDir dir;
  std::string cc = util::join_path(dir.path(), "fakecc");
  util::write_file(cc, "#!/bin/sh\necho 'fakecc 1.0'\n");
  REQUIRE(::chmod(cc.c_str(), 0755) == 0);
  IdentifyOptions opts;
  opts.memo_dir = util::join_path(dir.path(), "compilers");
  identify_compiler("cxx", cc, opts);
  const std::string other = util::join_path(opts.memo_dir, "notes.json");
  const std::string upper = util::join_path(opts.memo_dir, std::string(32, 'A') + ".json");
  util::write_file(other, "{}");
  util::write_file(upper, "{}");
  REQUIRE(util::list_directory(opts.memo_dir).size() == 3);

  CHECK(remove_identity_memos(opts.memo_dir) == 1);
  CHECK(util::list_directory(opts.memo_dir) == std::vector<std::string>{std::string(32, 'A') + ".json", "notes.json"});
  CHECK(remove_identity_memos(util::join_path(dir.path(), "missing")) == 0);
}
