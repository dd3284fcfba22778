#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "tvmffi_jit/util/progress.h"

using tvmffi_jit::util::elide_middle;
using tvmffi_jit::util::Progress;
using tvmffi_jit::util::ProgressMode;
using tvmffi_jit::util::terminal_style;

namespace {

// A FILE* backed by memory, read back after the progress object is done.
class MemoryStream {
 public:
  MemoryStream() : file_(open_memstream(&buffer_, &size_)) { REQUIRE(file_ != nullptr); }
  ~MemoryStream() {
    if (file_) std::fclose(file_);
    std::free(buffer_);
  }
  std::FILE* file() { return file_; }
  std::string text() {
    std::fflush(file_);
    return std::string(buffer_, size_);
  }

 private:
  char* buffer_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

Progress::Options options(ProgressMode mode, std::FILE* out, bool color = false, size_t width = 200) {
  Progress::Options o;
  o.mode = mode;
  o.color = color;
  o.out = out;
  o.width = width;
  return o;
}

}  // namespace

TEST_CASE("a smart terminal needs a tty and a TERM other than dumb", "[util][progress]") {
  CHECK(terminal_style(true, "xterm-256color", nullptr, nullptr, nullptr).smart);
  CHECK_FALSE(terminal_style(true, "dumb", nullptr, nullptr, nullptr).smart);
  CHECK_FALSE(terminal_style(true, nullptr, nullptr, nullptr, nullptr).smart);
  CHECK_FALSE(terminal_style(false, "xterm", nullptr, nullptr, nullptr).smart);
}

TEST_CASE("colour follows the terminal, NO_COLOR, CLICOLOR_FORCE and FORCE_COLOR as ninja reads them",
          "[util][progress]") {
  CHECK(terminal_style(true, "xterm", nullptr, nullptr, nullptr).color);
  CHECK_FALSE(terminal_style(false, "xterm", nullptr, nullptr, nullptr).color);
  CHECK_FALSE(terminal_style(true, "xterm", "1", nullptr, nullptr).color);
  CHECK(terminal_style(true, "xterm", "0", nullptr, nullptr).color);   // "0" means unset
  CHECK(terminal_style(true, "xterm", "", nullptr, nullptr).color);    // empty means unset
  CHECK(terminal_style(false, nullptr, nullptr, "1", nullptr).color);  // forced into a pipe
  CHECK_FALSE(terminal_style(false, nullptr, nullptr, "0", nullptr).color);
  CHECK_FALSE(terminal_style(true, "xterm", "1", "1", nullptr).color);  // NO_COLOR wins over CLICOLOR_FORCE
  CHECK(terminal_style(false, nullptr, "1", nullptr, "1").color);       // FORCE_COLOR wins over NO_COLOR
}

TEST_CASE("long status lines are shortened in the middle to the terminal width", "[util][progress]") {
  CHECK(elide_middle("short", 80) == "short");
  CHECK(elide_middle("abcdefghij", 0) == "abcdefghij");
  const std::string elided = elide_middle("[1/2] nvcc /very/long/path/to/kernel.cu", 20);
  CHECK(elided.size() == 20);
  CHECK(elided == "[1/2] nvc...ernel.cu");
  CHECK(elide_middle("abcdef", 2) == "..");
}

TEST_CASE("without a terminal every step is one plain line", "[util][progress]") {
  MemoryStream out;
  Progress progress(options(ProgressMode::kLines, out.file()));
  progress.start(3);
  progress.step(1, 3, "c++ a.cpp");
  CHECK(progress.next("nvcc kernel.cu") == 1);
  progress.step(3, 3, "link add_one.so");
  progress.finish();
  CHECK(out.text() == "[1/3] c++ a.cpp\n[1/3] nvcc kernel.cu\n[3/3] link add_one.so\n");
}

TEST_CASE("on a terminal one status line is rewritten in place and ended once", "[util][progress]") {
  MemoryStream out;
  Progress progress(options(ProgressMode::kTerminal, out.file()));
  progress.start(2);
  progress.next("c++ a.cpp");
  progress.next("link m.so");
  progress.finish();
  progress.finish();  // a second finish adds nothing
  CHECK(out.text() == "\r\x1b[K[1/2] c++ a.cpp\r\x1b[K[2/2] link m.so\n");
}

TEST_CASE("a nested run keeps the outer total and only the outer finish ends the line", "[util][progress]") {
  MemoryStream out;
  Progress progress(options(ProgressMode::kTerminal, out.file()));
  progress.start(3);
  progress.next("c++ a.cpp");
  progress.next("c++ b.cpp");
  progress.start(1);  // e.g. the executor linking for the cache
  progress.next("link m.so");
  progress.finish();
  CHECK(out.text() == "\r\x1b[K[1/3] c++ a.cpp\r\x1b[K[2/3] c++ b.cpp\r\x1b[K[3/3] link m.so");
  progress.finish();
  CHECK(out.text() == "\r\x1b[K[1/3] c++ a.cpp\r\x1b[K[2/3] c++ b.cpp\r\x1b[K[3/3] link m.so\n");
  // A new run starts counting again.
  progress.start(1);
  progress.next("c++ c.cpp");
  progress.finish();
  CHECK(out.text().substr(out.text().size() - 16) == "[1/1] c++ c.cpp\n");
}

TEST_CASE("quiet mode prints nothing at all", "[util][progress]") {
  MemoryStream out;
  Progress progress(options(ProgressMode::kSilent, out.file()));
  progress.start(2);
  progress.next("c++ a.cpp");
  progress.step(2, 2, "link");
  progress.finish();
  CHECK(out.text().empty());
}

TEST_CASE("colour marks only the counter and only when asked for", "[util][progress]") {
  MemoryStream out;
  Progress progress(options(ProgressMode::kLines, out.file(), /*color=*/true));
  progress.start(1);
  progress.next("c++ a.cpp");
  progress.finish();
  CHECK(out.text() == "\x1b[1;32m[1/1]\x1b[0m c++ a.cpp\n");
}

TEST_CASE("terminal status lines are elided to one column less than the width", "[util][progress]") {
  MemoryStream out;
  Progress progress(options(ProgressMode::kTerminal, out.file(), false, /*width=*/16));
  progress.start(1);
  progress.next("nvcc some/long/kernel.cu");
  progress.finish();
  const std::string text = out.text();
  REQUIRE(text.rfind("\r\x1b[K", 0) == 0);
  CHECK(text.substr(4) == "[1/1] ...nel.cu\n");
}

TEST_CASE("output printed during a run erases the status line and redraws it afterwards",
          "[util][progress]") {
  MemoryStream out;
  Progress progress(options(ProgressMode::kTerminal, out.file()));
  progress.start(2);
  progress.next("nvcc k.cu");
  progress.print_above("k.cu(3): warning: unused");
  progress.finish();
  CHECK(out.text() == "\r\x1b[K[1/2] nvcc k.cu\r\x1b[Kk.cu(3): warning: unused\n\r\x1b[K[1/2] nvcc k.cu\n");
}

TEST_CASE("steps from many threads each produce one whole line", "[util][progress]") {
  MemoryStream out;
  Progress progress(options(ProgressMode::kLines, out.file()));
  progress.start(64);
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&] {
      for (int i = 0; i < 16; ++i) progress.next("c++ unit.cpp");
    });
  }
  for (auto& w : workers) w.join();
  progress.finish();
  const std::string text = out.text();
  size_t lines = 0;
  for (size_t pos = 0; (pos = text.find('\n', pos)) != std::string::npos; ++pos) ++lines;
  CHECK(lines == 64);
  CHECK(text.find("[64/64] c++ unit.cpp\n") != std::string::npos);
}

TEST_CASE("log records during a terminal run go above the status line", "[util][progress]") {
  // Route the default logger into a string so the test can see what the
  // progress object does with it; the status line goes to the memory stream.
  std::ostringstream log_text;
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>("progress-test",
                                                 std::make_shared<spdlog::sinks::ostream_sink_st>(log_text));
  logger->set_pattern("%l: %v");
  spdlog::set_default_logger(logger);
  const auto original_sink = logger->sinks().at(0);

  MemoryStream out;
  {
    Progress::Options o = options(ProgressMode::kTerminal, out.file());
    o.out = stderr;  // log routing is only installed for stderr, the real stream
    Progress progress(o);
    progress.start(1);
    REQUIRE(logger->sinks().size() == 1);
    CHECK(logger->sinks()[0] != original_sink);
    spdlog::warn("careful");
    progress.finish();
    CHECK(logger->sinks()[0] == original_sink);
  }
  // The pattern set on the logger still applies: records pass through the original sink.
  CHECK(log_text.str() == "warning: careful\n");
  spdlog::set_default_logger(previous);
}
