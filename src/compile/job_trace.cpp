// JobTrace (compile/executor.h): the --job-trace timeline, one JSON line per
// process a compile or link ran.
#include <chrono>
#include <mutex>

#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/util/json.h"

namespace tvmffi_jit::compile {

JobTrace::JobTrace() : start_(std::chrono::steady_clock::now()) {}

double JobTrace::now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

void JobTrace::add(const std::string& module, const CommandRecord& record) {
  nlohmann::json j;
  j["module"] = module;
  j["step"] = record.description;
  j["queued"] = record.queued_at;
  j["start"] = record.started_at;
  j["end"] = record.started_at + record.seconds;
  j["cpu"] = record.cpu_seconds;
  j["rss"] = record.max_rss_bytes;
  j["threads"] = record.threads;
  if (record.slots > 0) j["slots"] = record.slots;
  if (record.split > 0) j["split"] = record.split;
  if (!record.estimate_source.empty()) {
    // How good the estimate was: the cost model's CPU seconds beside the
    // measured ones (cpu), and what it was based on.
    j["estimate"] = record.estimated_cpu_seconds;
    j["estimate_source"] = record.estimate_source;
  }
  std::string line = util::dump_json(j, -1) + "\n";
  std::lock_guard<std::mutex> lock(mutex_);
  lines_ += line;
}

std::string JobTrace::json_lines() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lines_;
}

}  // namespace tvmffi_jit::compile
