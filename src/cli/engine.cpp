// libtvmffi_jit_engine.so: the CLI behind a two-function C ABI, so that the
// Python package answers cache hits inside its own process (no fork/exec,
// no second dynamic loader) and loads it with ctypes: the wheel stays
// py3-none, with no CPython extension to build per interpreter
// (docs/python.md, "In-process hits").
//
//   int tvmffi_jit_run(const char* request_json, char** result_json);
//   void tvmffi_jit_free(char* result_json);
//
// request: {"argv": ["build", "--json", ...]}, the CLI's arguments without
// the program name. result: {"exit_code": N, "stdout": "...", "stderr": "..."},
// what the program would have printed and returned. The return value is 0
// when the request was run (whatever its exit code) and 2 when it could not
// be read; *result_json is then {"error": "..."}. Every result is freed with
// tvmffi_jit_free. One call at a time per process: the logger and the output
// capture are process-wide, so calls take the engine lock (the Python
// package also has a lock of its own). That lock is a util::ForkSafeMutex of
// the engine rank: a fork() in another thread waits for the call in flight
// to end and the child starts with every lock and memo of the library
// unlocked (util/fork_safe.h; docs/python.md, "Fork and threads").
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tvmffi_jit/cli/app.h"
#include "tvmffi_jit/util/fork_safe.h"
#include "tvmffi_jit/util/json.h"

namespace {

// A request is an argv: a manifest path and flags. Anything near this size is
// not one of ours.
constexpr size_t kMaxRequestBytes = 1 << 20;

char* copy_out(const std::string& text) {
  char* p = static_cast<char*>(std::malloc(text.size() + 1));
  if (!p) return nullptr;
  std::memcpy(p, text.data(), text.size());
  p[text.size()] = '\0';
  return p;
}

// Constructed when the library is loaded, before any call (and any memo).
tvmffi_jit::util::ForkSafeMutex engine_lock(tvmffi_jit::util::ForkSafeMutex::kEngineRank);

std::string error_result(const std::string& message) {
  return tvmffi_jit::util::dump_json(nlohmann::json{{"error", message}}, -1);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int tvmffi_jit_run(const char* request_json, char** result_json) {
  if (!result_json) return 2;
  *result_json = nullptr;
  try {
    if (!request_json) {
      *result_json = copy_out(error_result("tvmffi_jit_run: the request is a null pointer"));
      return 2;
    }
    const size_t size = ::strnlen(request_json, kMaxRequestBytes + 1);
    if (size > kMaxRequestBytes) {
      *result_json = copy_out(error_result("tvmffi_jit_run: the request is over 1 MiB; pass sources in files"));
      return 2;
    }
    nlohmann::json request = nlohmann::json::parse(request_json, request_json + size, nullptr, false);
    const nlohmann::json* argv = request.is_object() && request.contains("argv") ? &request["argv"] : nullptr;
    if (!argv || !argv->is_array()) {
      *result_json = copy_out(error_result("tvmffi_jit_run: the request must be a JSON object {\"argv\": [strings]}"));
      return 2;
    }
    std::vector<std::string> args;
    for (const auto& a : *argv) {
      if (!a.is_string()) {
        *result_json = copy_out(error_result("tvmffi_jit_run: every element of \"argv\" must be a string"));
        return 2;
      }
      args.push_back(a.get<std::string>());
    }
    std::unique_lock<tvmffi_jit::util::ForkSafeMutex> one_call_at_a_time(engine_lock);
    tvmffi_jit::cli::EmbeddedResult r = tvmffi_jit::cli::run_embedded(args);
    one_call_at_a_time.unlock();
    nlohmann::json out{{"exit_code", r.exit_code}, {"stdout", r.out}, {"stderr", r.err}};
    *result_json = copy_out(tvmffi_jit::util::dump_json(out, -1));
    return *result_json ? 0 : 2;
  } catch (const std::exception& e) {
    *result_json = copy_out(error_result(std::string("tvmffi_jit_run: ") + e.what()));
    return 2;
  } catch (...) {
    *result_json = copy_out(error_result("tvmffi_jit_run: unexpected exception"));
    return 2;
  }
}

extern "C" __attribute__((visibility("default"))) void tvmffi_jit_free(char* result_json) { std::free(result_json); }
