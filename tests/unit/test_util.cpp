#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/expected.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::util;

TEST_CASE("sha256 of known vectors matches FIPS 180-2", "[util][hash]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("key hasher separates fields so shifted boundaries differ", "[util][hash]") {
  KeyHasher a, b;
  a.field("x", "ab");
  a.field("y", "c");
  b.field("x", "a");
  b.field("y", "bc");
  CHECK(a.hex_digest() != b.hex_digest());
  KeyHasher c, d;
  c.list("l", {"a", "b"});
  d.list("l", {"ab"});
  CHECK(c.hex_digest() != d.hex_digest());
}

TEST_CASE("run_process captures output and exit status without a shell", "[util][process]") {
  auto r = run_process({"sh", "-c", "echo out; echo err >&2; exit 3"});
  CHECK(r.exit_code == 3);
  CHECK(r.out == "out\n");
  CHECK(r.err == "err\n");
  // An argument with shell metacharacters reaches the program verbatim.
  auto e = run_process({"echo", "$HOME;rm -rf /"});
  CHECK(e.out == "$HOME;rm -rf /\n");
}

TEST_CASE("run_process reports signals and timeouts", "[util][process]") {
  auto s = run_process({"sh", "-c", "kill -SEGV $$"});
  CHECK(s.term_signal == SIGSEGV);
  CHECK(s.status_text() == "killed by SIGSEGV");
  ProcessOptions o;
  o.timeout_seconds = 0.3;
  auto t = run_process({"sleep", "5"}, o);
  CHECK(t.timed_out);
  CHECK(t.seconds < 3);
}

TEST_CASE("run_process passes environment, cwd and stdin", "[util][process]") {
  TempDir d;
  ProcessOptions o;
  o.cwd = d.path();
  o.env = {{"TVMFFI_TEST_VAR", "v1"}};
  o.stdin_data = "hello";
  auto r = run_process({"sh", "-c", "pwd; echo $TVMFFI_TEST_VAR; cat"}, o);
  CHECK(r.out == canonical_path(d.path()) + "\nv1\nhello");
}

TEST_CASE("a missing program is a missing-tool error", "[util][process]") {
  try {
    run_process({"definitely-not-a-program-xyz"});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
  }
}

TEST_CASE("atomic write replaces content and leaves no temp files", "[util][fs]") {
  TempDir d;
  std::string p = join_path(d.path(), "f.txt");
  write_file_atomic(p, "one");
  write_file_atomic(p, "two");
  CHECK(read_file(p) == "two");
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(d.path())) (void)e, ++n;
  CHECK(n == 1);
}

TEST_CASE("mapped file sees the file's bytes", "[util][fs]") {
  TempDir d;
  std::string p = join_path(d.path(), "m.bin");
  write_file(p, std::string("a\0b", 3));
  MappedFile m(p);
  REQUIRE(m.size() == 3);
  CHECK(m.data()[1] == 0);
  CHECK(m.data()[2] == 'b');
}

TEST_CASE("readers refuse a FIFO, a directory and a device as not regular files, without blocking", "[util][fs]") {
  // Opening a FIFO for reading used to wait for a writer forever (inspect,
  // manifests, sources and cache lookups all read through these).
  TempDir dir;
  std::string fifo = join_path(dir.path(), "pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto message_of = [](auto&& read) -> std::string {
    try {
      read();
    } catch (const Error& e) {
      CHECK(e.code() == ExitCode::kIo);
      return e.what();
    }
    return "accepted";
  };
  CHECK(message_of([&] { MappedFile f(fifo); }) == "cannot open " + fifo + ": not a regular file (a FIFO)");
  CHECK(message_of([&] { read_file(fifo); }) == "cannot read " + fifo + ": not a regular file (a FIFO)");
  CHECK_FALSE(try_read_file(fifo).has_value());
  CHECK(message_of([&] { open_for_reading(dir.path()); }) ==
        "cannot open " + dir.path() + ": not a regular file (a directory)");
  CHECK(message_of([&] { MappedFile f("/dev/null"); }) == "cannot open /dev/null: not a regular file (a character device)");
  // A regular file still opens, with its size, and reads normally.
  std::string plain = join_path(dir.path(), "plain");
  write_file(plain, "abc");
  uint64_t size = 0;
  int fd = open_for_reading(plain, &size);
  CHECK(size == 3);
  char buf[4] = {};
  CHECK(::read(fd, buf, sizeof buf) == 3);  // blocking mode restored: a plain read
  ::close(fd);
  CHECK(read_file(plain) == "abc");
}

TEST_CASE("write_all writes past short writes into a pipe and read_some reads it back to the end", "[util][fs]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  // Four times a pipe's default capacity: write(2) returns short counts while
  // the reader drains, and write_all must go on from where each one stopped.
  std::string data(4 * 65536, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 23);
  std::string got;
  std::thread reader([&] {
    char buf[1000];
    for (;;) {
      auto n = read_some(fds[0], buf, sizeof buf);
      if (!n || *n == 0) break;
      got.append(buf, *n);
    }
  });
  auto written = write_all(fds[1], data);
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  CHECK(written.has_value());
  CHECK(got == data);
}

TEST_CASE("the descriptor helpers give the errno as the kind and its text as the message", "[util][fs]") {
  TempDir dir;
  std::string f = join_path(dir.path(), "f");
  write_file(f, "0123456789");
  uint64_t size = 0;
  int fd = open_for_reading(f, &size);
  char buf[4] = {};
  auto at_six = pread_some(fd, buf, sizeof buf, 6);
  REQUIRE(at_six);
  CHECK(std::string(buf, *at_six) == "6789");
  auto past_end = pread_some(fd, buf, sizeof buf, 10);
  REQUIRE(past_end);
  CHECK(*past_end == 0);
  auto not_for_writing = write_all(fd, "x");
  REQUIRE_FALSE(not_for_writing);
  CHECK(not_for_writing.error().kind == std::errc::bad_file_descriptor);
  CHECK(not_for_writing.why() == std::strerror(EBADF));
  ::close(fd);
  auto closed = read_some(fd, buf, sizeof buf);
  REQUIRE_FALSE(closed);
  CHECK(closed.error().kind == std::errc::bad_file_descriptor);
}

TEST_CASE("create_new_file refuses an existing file and a planted symlink; FileWriter writes, closes and names the path",
          "[util][fs]") {
  TempDir dir;
  std::string victim = join_path(dir.path(), "victim");
  write_file(victim, "keep");
  std::string planted = join_path(dir.path(), "planted");
  REQUIRE(::symlink(victim.c_str(), planted.c_str()) == 0);
  auto over_file = create_new_file(victim, 0644);
  REQUIRE_FALSE(over_file);
  CHECK(over_file.error().kind == std::errc::file_exists);
  auto through_link = create_new_file(planted, 0644);
  REQUIRE_FALSE(through_link);
  CHECK(read_file(victim) == "keep");

  std::string fresh = join_path(dir.path(), "fresh");
  auto created = create_new_file(fresh, 0600);
  REQUIRE(created);
  FileWriter w = std::move(created).value();
  CHECK(w.is_open());
  w.write("hello ");
  w.write("world");
  w.close();
  CHECK_FALSE(w.is_open());
  CHECK(read_file(fresh) == "hello world");
  struct stat st;
  REQUIRE(::stat(fresh.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  // A write that fails says which file, as errno_message did.
  int read_only = open_for_reading(fresh);
  FileWriter wrong(read_only, fresh);
  try {
    wrong.write("x");
    FAIL("a write to a read-only descriptor succeeded");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kIo);
    CHECK(std::string(e.what()) == errno_message("cannot write " + fresh, EBADF));
  }
}

TEST_CASE("can_read_content says why a path cannot be read for its content", "[util][fs]") {
  TempDir dir;
  std::string plain = join_path(dir.path(), "plain");
  write_file(plain, "x");
  CHECK(can_read_content(plain).has_value());
  auto missing = can_read_content(join_path(dir.path(), "missing"));
  REQUIRE_FALSE(missing);
  CHECK(missing.why() == "no such file");
  auto directory = can_read_content(dir.path());
  REQUIRE_FALSE(directory);
  CHECK(directory.why() == "is a directory, not a file");
  std::string fifo = join_path(dir.path(), "pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto pipe = can_read_content(fifo);
  REQUIRE_FALSE(pipe);
  CHECK(pipe.why() == "is not a regular file (a FIFO)");
}

TEST_CASE("opened_path takes a .. after a symlink from the link's target, as the kernel does", "[util][fs]") {
  TempDir tmp;
  const std::string d = canonical_path(tmp.path());
  make_directories(join_path(d, "inc/sub"));
  make_directories(join_path(d, "real/inner"));
  REQUIRE(::symlink(join_path(d, "real/inner").c_str(), join_path(d, "inc/link").c_str()) == 0);
  REQUIRE(::symlink(join_path(d, "inc").c_str(), join_path(d, "alias").c_str()) == 0);
  // Lexically /inc/val.h; the kernel opens real/val.h.
  CHECK(opened_path(d + "/inc/link/../val.h") == d + "/real/val.h");
  CHECK(opened_path(d + "/inc/link/../inner/./x/y.h") == d + "/real/inner/x/y.h");  // the rest as written, normal
  CHECK(opened_path(d + "/inc/link/..") == d + "/real");
  // No ".." after a link: the path as written, normalised (the link itself is not resolved).
  CHECK(opened_path(d + "/inc/link/val.h") == d + "/inc/link/val.h");
  CHECK(opened_path(d + "/inc/sub/../val.h") == d + "/inc/val.h");
  CHECK(opened_path(d + "/alias/sub/../val.h") == d + "/alias/val.h");  // the same folder as the lexical one
  // A folder that does not exist: the kernel cannot go through it either.
  CHECK(opened_path(d + "/inc/missing/../val.h") == d + "/inc/val.h");
}

TEST_CASE("real_path resolves links and says why a dangling one does not resolve; canonical_path throws that",
          "[util][fs]") {
  TempDir dir;
  std::string target = join_path(dir.path(), "target");
  write_file(target, "x");
  std::string link = join_path(dir.path(), "link");
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
  CHECK(real_path(link).value_or("") == canonical_path(target));
  std::string dangling = join_path(dir.path(), "dangling");
  REQUIRE(::symlink(join_path(dir.path(), "gone").c_str(), dangling.c_str()) == 0);
  auto unresolved = real_path(dangling);
  REQUIRE_FALSE(unresolved);
  CHECK(unresolved.why() == std::strerror(ENOENT));
  try {
    canonical_path(dangling);
    FAIL("a dangling link resolved");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kIo);
    CHECK(std::string(e.what()) == errno_message("cannot resolve " + dangling, ENOENT));
  }
}

TEST_CASE("string helpers: split, quote, nearest, sizes, durations", "[util][strings]") {
  CHECK(split_any("8.0, 9.0a;9.0+PTX  10.0", " ,;") == std::vector<std::string>{"8.0", "9.0a", "9.0+PTX", "10.0"});
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(nearest("extra_cflag", {"extra_cflags", "sources", "name"}) == std::optional<std::string>("extra_cflags"));
  CHECK_FALSE(nearest("zzzzzzzz", {"name", "emit"}).has_value());
  CHECK(parse_size("500M") == std::optional<uint64_t>(500ull << 20));
  CHECK(parse_size("1x") == std::nullopt);
  CHECK(parse_duration_seconds("7d") == std::optional<int64_t>(7 * 86400));
  CHECK(parse_duration_seconds("h") == std::nullopt);
}

TEST_CASE("Expected holds a value or the reason there is none", "[util][expected]") {
  Expected<int> found = 42;
  REQUIRE(found);
  CHECK(*found == 42);
  CHECK(found.error().empty());
  Expected<int> missing = Unexpected{"no nvcc on PATH"};
  CHECK_FALSE(missing);
  CHECK(missing.error() == "no nvcc on PATH");
  CHECK(missing.value_or(7) == 7);
  CHECK_FALSE(missing.to_optional());
  try {
    std::move(missing).value_or_throw(missing_tool_error);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
    CHECK(std::string(e.what()) == "no nvcc on PATH");
  }
  CHECK(Expected<int>(5).value_or_throw(missing_tool_error) == 5);
}

TEST_CASE("base64 decoding accepts exactly one spelling of each value", "[util]") {
  CHECK(base64_decode("aGk=") == std::optional<std::string>("hi"));
  CHECK(base64_encode("hi") == "aGk=");
  CHECK(base64_decode("aGk") == std::nullopt);      // unpadded
  CHECK(base64_decode("a Gk=") == std::nullopt);    // whitespace
  CHECK(base64_decode("aG=k") == std::nullopt);     // padding inside
  CHECK(base64_decode("aGk=aGk=") == std::nullopt); // padding then data
  CHECK(base64_decode("") == std::nullopt);
}

namespace {
enum class ProbeFailure { kTimeout, kCorrupt };
Expected<int, Failure<ProbeFailure>> probe(int outcome) {
  if (outcome == 0) return 1;
  if (outcome == 1) return fail(ProbeFailure::kTimeout, "no answer in 5 s");
  return fail(ProbeFailure::kCorrupt, "reply is not JSON");
}
Expected<void, Failure<ProbeFailure>> store(bool ok) {
  if (ok) return {};
  return fail(ProbeFailure::kCorrupt, "short write");
}
}  // namespace

TEST_CASE("Expected with a Failure kind lets callers branch on the kind, not on the message", "[util][expected]") {
  CHECK(*probe(0) == 1);
  CHECK(probe(1).error().kind == ProbeFailure::kTimeout);
  CHECK(probe(2).error().kind == ProbeFailure::kCorrupt);
  CHECK(probe(2).why() == "reply is not JSON");
  CHECK(store(true));
  CHECK_FALSE(store(false));
  CHECK(store(false).error().kind == ProbeFailure::kCorrupt);
  CHECK(store(false).why() == "short write");
  try {
    probe(1).value_or_throw([](const Failure<ProbeFailure>& f) { return io_error(f.message); });
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kIo);
  }
}

TEST_CASE("quote_for_message() shows NULs, control bytes, quotes and backslashes instead of passing them through",
          "[util][error]") {
  CHECK(quote_for_message("plain") == "\"plain\"");
  CHECK(quote_for_message(std::string("ab\0cd", 5)) == "\"ab\\x00cd\"");
  CHECK(quote_for_message("a\"b\\c\n\t\x1b[31m") == "\"a\\\"b\\\\c\\n\\t\\x1b[31m\"");
  CHECK(quote_for_message("ü") == "\"ü\"");  // UTF-8 passes unchanged
}

TEST_CASE("booleans: the usual spellings in any case, nothing else", "[util][strings]") {
  for (const char* t : {"1", "true", "TRUE", "True", "yes", "YES", "on", "On", "y", "Y", " true "})
    CHECK(parse_bool(t) == std::optional<bool>(true));
  for (const char* f : {"0", "false", "False", "no", "NO", "off", "OFF", "n", "N"})
    CHECK(parse_bool(f) == std::optional<bool>(false));
  for (const char* bad : {"", "2", "-1", "maybe", "enable", "truee", "yess", "o"}) CHECK_FALSE(parse_bool(bad));
}

TEST_CASE("durations in milliseconds accept ms and every seconds unit", "[util][strings]") {
  CHECK(parse_duration_ms("250ms") == std::optional<int64_t>(250));
  CHECK(parse_duration_ms("250 MS") == std::optional<int64_t>(250));
  CHECK(parse_duration_ms("5s") == std::optional<int64_t>(5000));
  CHECK(parse_duration_ms("5") == std::optional<int64_t>(5000));
  CHECK(parse_duration_ms("2m") == std::optional<int64_t>(120000));
  for (const char* bad : {"", "ms", "-5s", "5x", "1.5s"}) CHECK_FALSE(parse_duration_ms(bad));
  CHECK_FALSE(parse_duration_ms("1 2ms"));  // the digits before "ms" are the whole number
  // The number is refused where it would overflow, not wrapped.
  CHECK(parse_size("18446744073709551615") == std::optional<uint64_t>(18446744073709551615ull));
  CHECK(parse_size("18446744073709551616") == std::nullopt);
  CHECK(parse_size("17179869184G") == std::nullopt);
  CHECK(parse_duration_seconds("9223372036854775808") == std::nullopt);
  CHECK(parse_duration_ms("9223372036854775808ms") == std::nullopt);
}

TEST_CASE("an atomic write never follows a symlink planted at a temp name, and names are unique per thread",
          "[util][fs]") {
  TempDir d;
  const std::string target = d.path() + "/out";
  const std::string victim = d.path() + "/victim";
  write_file(victim, "precious");
  // A name another thread would have picked, if names were per process: never equal.
  std::string other;
  std::thread([&] { other = unique_name_suffix(); }).join();
  CHECK(other != unique_name_suffix());
  CHECK(unique_name_suffix() != unique_name_suffix());
  write_file_atomic(target, "new");
  CHECK(read_file(target) == "new");
  CHECK(read_file(victim) == "precious");
  {
    AtomicFile f(target);
    f.write("abandoned");
  }  // not committed: removed
  CHECK(read_file(target) == "new");
  size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(d.path())) (void)e, ++files;
  CHECK(files == 2);
}

TEST_CASE("make_directories: EEXIST is success for a directory made by someone else, an error for a file",
          "[util][fs]") {
  TempDir d;
  const std::string tree = d.path() + "/a/b/c/d";
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      try {
        make_directories(tree, 0700);
      } catch (const Error&) {
        ++failures;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(is_directory(tree));
  write_file(d.path() + "/file", "x");
  CHECK_THROWS_AS(make_directories(d.path() + "/file", 0700), Error);
}
