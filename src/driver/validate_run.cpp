// Driver validation, step 2: the child processes. All items go to one
// child; when it crashes or hangs, the item it was on is blamed (its last
// progress marker says which) and a fresh child takes the rest.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <map>

#include "validate_internal.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::driver {

using nlohmann::json;

namespace {

std::string self_executable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "/proc/self/exe";
  return std::string(buf, static_cast<size_t>(n));
}

// Reads the child's stdout lines into the driver line and per-item results.
void collect(const std::string& out, std::optional<DriverInfo>& driver, std::map<int, ProbeResult>& results) {
  for (const auto& line : util::split_lines(out)) {
    if (line.empty() || line[0] != '{') continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    try {
      if (j.contains("driver")) {
        if (!driver) driver = driver_from_json(j["driver"]);
      } else if (j.contains("item")) {
        ProbeResult r = result_from_json(j);
        results[r.item] = std::move(r);
      }
    } catch (const json::exception&) {
      // A line the child did not finish (it died mid-write): no result.
    }
  }
}

// The item and step of the child's last progress marker, if any.
std::optional<std::pair<int, std::string>> last_marker(const std::string& err) {
  std::optional<std::pair<int, std::string>> found;
  for (const auto& line : util::split_lines(err)) {
    if (!util::starts_with(line, kProbeMarker)) continue;
    size_t i = line.find(" item="), s = line.find(" step=");
    if (i == std::string::npos || s == std::string::npos) continue;
    found = std::make_pair(std::atoi(line.c_str() + i + 6), line.substr(s + 6));
  }
  return found;
}

std::string child_stderr_tail(const std::string& err) {
  std::vector<std::string> keep;
  for (const auto& line : util::split_lines(err))
    if (!line.empty() && !util::starts_with(line, kProbeMarker)) keep.push_back(line);
  if (keep.size() > 5) keep.erase(keep.begin(), keep.end() - 5);
  return util::join(keep, " | ");
}

std::string describe_death(const util::ProcessResult& pr, double timeout) {
  if (pr.timed_out) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", timeout);
    return std::string("driver did not return within ") + buf + " s";
  }
  if (pr.term_signal) return "driver crashed with " + util::signal_name(pr.term_signal);
  return "the driver probe exited with status " + std::to_string(pr.exit_code);
}

}  // namespace

ProbeOutcome run_probes(const Plan& plan, const ValidateOptions& options) {
  ProbeOutcome outcome;
  std::optional<DriverInfo>& driver = outcome.driver;
  std::map<int, ProbeResult>& results = outcome.results;
  std::map<int, std::string>& deaths = outcome.deaths;
  std::string exe = options.self_exe.empty() ? self_executable() : options.self_exe;

  std::vector<const Item*> pending;
  for (const auto& item : plan.items) pending.push_back(&item);
  while (!pending.empty()) {
    ProbeRequest request;
    request.device = options.device;
    for (const Item* item : pending) request.items.push_back(item->request);
    util::ProcessOptions po;
    po.stdin_data = to_json(request).dump();
    po.timeout_seconds = options.timeout_seconds;
    SPDLOG_DEBUG("driver probe: {} item(s) on device {}", pending.size(), options.device);
    util::ProcessResult pr = util::run_process({exe, kProbeCommand}, po);
    collect(pr.out, driver, results);
    if (pr.ok()) break;
    // The child died or hung. Blame the item it was working on, then start
    // a fresh child for the rest.
    auto marker = last_marker(pr.err);
    std::string death = describe_death(pr, options.timeout_seconds);
    std::string tail = child_stderr_tail(pr.err);
    std::vector<const Item*> rest;
    if (!marker || results.count(marker->first)) {
      // Died outside any item (cuInit, device setup, exit): every pending
      // item without a result shares the verdict, and retrying would only
      // die the same way.
      for (const Item* item : pending)
        if (!results.count(item->request.id))
          deaths[item->request.id] = death + (marker ? "" : " during driver initialisation") +
                             (tail.empty() ? "" : " (" + tail + ")");
      break;
    }
    deaths[marker->first] = death + " in " + marker->second + (tail.empty() ? "" : " (" + tail + ")");
    bool after = false;
    for (const Item* item : pending) {
      if (item->request.id == marker->first) after = true;
      else if (after && !results.count(item->request.id)) rest.push_back(item);
    }
    pending = std::move(rest);
  }

  return outcome;
}

}  // namespace tvmffi_jit::driver
