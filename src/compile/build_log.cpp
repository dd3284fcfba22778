#include "tvmffi_jit/compile/build_log.h"

#include <time.h>

#include <nlohmann/json.hpp>
#include <set>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/log.h"

namespace tvmffi_jit::compile {

namespace {

using json = nlohmann::json;

json file_to_json(const std::string& path, const util::FileStamp& s, const std::string& sha256) {
  json j = {{"path", path}, {"size", s.size}, {"mtime_ns", s.mtime_ns}, {"inode", s.inode}, {"device", s.device}};
  if (!sha256.empty()) j["sha256"] = sha256;
  return j;
}

// The log is read as hostile input: any field of the wrong type drops the
// whole log (every step runs), never the process.
template <typename T>
bool get(const json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end()) return false;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return false;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return false;
  } else {
    if (!it->is_number_integer()) return false;
  }
  *out = it->get<T>();
  return true;
}

}  // namespace

int64_t BuildLog::now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string BuildLog::fingerprint(const std::vector<std::string>& argv,
                                  const std::vector<std::pair<std::string, std::string>>& extras) {
  util::KeyHasher h;
  h.field("build-log-command", std::to_string(kFormatVersion));
  h.list("argv", argv);
  for (const auto& [name, value] : extras) h.field(name, value);
  return h.hex_digest();
}

BuildLog::BuildLog(std::string dir) : dir_(std::move(dir)) {
  const std::string path = util::join_path(dir_, kFileName);
  auto text = util::read_small_file(path, kMaxBytes);
  if (!text) {
    why_empty_ = "no build log (" + text.why() + ")";
    return;
  }
  if (auto loaded = load(*text); !loaded) {
    steps_.clear();
    why_empty_ = "the build log " + path + " is " + loaded.why() + "; every step runs";
    spdlog::debug("{}", why_empty_);
  }
}

Expected<void> BuildLog::load(const std::string& text) {
  json root = json::parse(text, nullptr, false);
  int64_t version = 0;
  if (!root.is_object() || !get(root, "format_version", &version)) return Unexpected{"not a build log"};
  if (version != kFormatVersion) return Unexpected{"of format " + std::to_string(version)};
  auto steps = root.find("steps");
  if (steps == root.end() || !steps->is_object()) return Unexpected{"not a build log"};
  auto read_files = [&](const json& s, const char* key, std::vector<File>* out) {
    auto it = s.find(key);
    if (it == s.end() || !it->is_array()) return false;
    for (const auto& f : *it) {
      if (!f.is_object()) return false;
      File file;
      int64_t inode = 0, device = 0, size = 0;
      if (!get(f, "path", &file.path) || !get(f, "size", &size) || !get(f, "mtime_ns", &file.stamp.mtime_ns) ||
          !get(f, "inode", &inode) || !get(f, "device", &device))
        return false;
      if (f.contains("sha256") && !get(f, "sha256", &file.sha256)) return false;
      file.stamp.size = static_cast<uint64_t>(size);
      file.stamp.inode = static_cast<uint64_t>(inode);
      file.stamp.device = static_cast<uint64_t>(device);
      out->push_back(std::move(file));
    }
    return true;
  };
  for (auto it = steps->begin(); it != steps->end(); ++it) {
    const json& s = it.value();
    Step step;
    if (!s.is_object() || !get(s, "command", &step.command) || !get(s, "dirty", &step.dirty) ||
        !read_files(s, "inputs", &step.inputs) || !read_files(s, "outputs", &step.outputs))
      return Unexpected{"damaged (step " + quote_for_message(it.key()) + ")"};
    steps_.emplace(it.key(), std::move(step));
  }
  return {};
}

std::string BuildLog::resolve(const std::string& path) const {
  return !path.empty() && path[0] == '/' ? path : util::join_path(dir_, path);
}

Expected<void> BuildLog::check_unchanged(const File& f, const char* what) const {
  std::optional<util::FileStamp> now = util::file_stamp(resolve(f.path));
  if (!now) return Unexpected{std::string(what) + " " + f.path + " is gone"};
  if (!(*now == f.stamp)) return Unexpected{std::string(what) + " " + f.path + " changed"};
  if (!f.sha256.empty()) {
    // Same stat, but recorded within a timestamp tick of the step: the
    // content decides.
    std::string digest;
    try {
      digest = util::sha256_file_hex(resolve(f.path));
    } catch (const Error&) {
      return Unexpected{std::string(what) + " " + f.path + " cannot be read"};
    }
    if (digest != f.sha256) return Unexpected{std::string(what) + " " + f.path + " changed (same stat, new content)"};
  }
  return {};
}

Expected<void> BuildLog::check_up_to_date(const std::string& id, const std::string& command) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = steps_.find(id);
  if (it == steps_.end()) return Unexpected{why_empty_.empty() ? "no record of it in the build log" : why_empty_};
  const Step& s = it->second;
  if (s.dirty) return Unexpected{"an input was modified while it last ran"};
  if (s.command != command) return Unexpected{"the command changed"};
  for (const auto& f : s.outputs)
    if (auto same = check_unchanged(f, "output"); !same) return same;
  for (const auto& f : s.inputs)
    if (auto same = check_unchanged(f, "input"); !same) return same;
  return {};
}

void BuildLog::forget(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (steps_.erase(id)) changed_ = true;
}

void BuildLog::record(const std::string& id, const std::string& command, const std::vector<Input>& inputs,
                      const std::vector<std::string>& outputs, int64_t started_ns) {
  Step step;
  step.command = command;
  std::set<std::string> seen;
  for (const auto& in : inputs) {
    if (in.path.empty() || !seen.insert(in.path).second) continue;
    // Paths go into JSON as text; a path that is not UTF-8 would come back
    // altered and never match, so such a step is simply not recorded (it
    // runs every time, which is correct, only slower).
    if (!util::is_valid_utf8(in.path)) return;
    std::optional<util::FileStamp> st = util::file_stamp(resolve(in.path));
    if (!st) return;  // vanished already: leave the step unrecorded so it runs again
    File f{in.path, *st, ""};
    if (st->mtime_ns > started_ns) {
      step.dirty = true;  // written while the step ran: what it read is unknown
    } else if (!in.produced && st->mtime_ns >= started_ns - kAmbiguousWindowNs) {
      try {
        f.sha256 = util::sha256_file_hex(resolve(in.path));
      } catch (const Error&) {
        return;
      }
    }
    step.inputs.push_back(std::move(f));
  }
  for (const auto& out : outputs) {
    if (!util::is_valid_utf8(out)) return;
    std::optional<util::FileStamp> st = util::file_stamp(resolve(out));
    if (!st) return;
    step.outputs.push_back({out, *st, ""});
  }
  std::lock_guard<std::mutex> lock(mutex_);
  steps_[id] = std::move(step);
  changed_ = true;
}

void BuildLog::save(const std::vector<std::string>& ids) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::set<std::string> keep(ids.begin(), ids.end());
  for (auto it = steps_.begin(); it != steps_.end();) {
    if (keep.count(it->first)) {
      ++it;
    } else {
      it = steps_.erase(it);
      changed_ = true;
    }
  }
  if (!changed_) return;
  json steps = json::object();
  for (const auto& [id, s] : steps_) {
    json inputs = json::array(), outputs = json::array();
    for (const auto& f : s.inputs) inputs.push_back(file_to_json(f.path, f.stamp, f.sha256));
    for (const auto& f : s.outputs) outputs.push_back(file_to_json(f.path, f.stamp, ""));
    steps[id] = {{"command", s.command}, {"dirty", s.dirty}, {"inputs", inputs}, {"outputs", outputs}};
  }
  json root = {{"format_version", kFormatVersion}, {"steps", steps}};
  util::write_file_atomic(util::join_path(dir_, kFileName), util::dump_json(root, 1) + "\n");
  changed_ = false;
}

}  // namespace tvmffi_jit::compile
