#include <catch2/catch.hpp>

#include <string>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/json.h"

using namespace tvmffi_jit;

TEST_CASE("dump_json replaces invalid UTF-8 where dump() throws", "[util][json]") {
  nlohmann::json j = {{"out", std::string("ok \xff\xfe end")}, {"path", "/d\xc3/x"}};
  CHECK_THROWS(j.dump());
  std::string text = util::dump_json(j);
  CHECK(util::is_valid_utf8(text));
  CHECK(text.find("ok \xef\xbf\xbd") != std::string::npos);
  CHECK(util::dump_json(nlohmann::json("plain")) == "\"plain\"");
}

TEST_CASE("is_valid_utf8 follows RFC 3629", "[util][json]") {
  for (const char* good : {"", "abc", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"}) CHECK(util::is_valid_utf8(good));
  for (const char* bad : {"\xff", "\xc3", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\x80"}) {
    INFO(bad);
    CHECK_FALSE(util::is_valid_utf8(bad));
  }
}

TEST_CASE("json_text is the text as a dump_json round trip reads it back", "[util][json]") {
  for (std::string s : {std::string("g++ (Debian 12.2.0) 12.2.0\n"), std::string("cc \xff version\n\xc3")}) {
    std::string back = nlohmann::json::parse(util::dump_json(nlohmann::json(s))).get<std::string>();
    CHECK(util::json_text(s) == back);
  }
}

TEST_CASE("read_small_file caps the size and refuses what is not a regular file", "[util][fs]") {
  util::TempDir tmp;
  std::string f = util::join_path(tmp.path(), "f");
  util::write_file(f, "12345");
  CHECK(util::read_small_file(f, 5).value_or("") == "12345");
  auto too_large = util::read_small_file(f, 4);
  CHECK_FALSE(too_large);
  CHECK(too_large.why() == "has 5 bytes, more than the 4 allowed");
  auto directory = util::read_small_file(tmp.path(), 100);
  CHECK_FALSE(directory);
  CHECK(directory.why() == "is not a regular file");
  CHECK_FALSE(util::read_small_file(util::join_path(tmp.path(), "missing"), 100));
}
