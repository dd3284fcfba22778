// `tvmffi-jit doctor [--json]`: what this machine has for building, caching
// and validating, and for each missing piece what to do about it.
//
// Every probe is independent and none of them throws past collect_*(): a
// machine without a GPU, without nvcc or without tvm-ffi is exactly the
// machine doctor exists for. Results go to stdout (they are the command's
// output); the exit status is 4 when a required component is missing.

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "doctor.h"
#include "tvmffi_jit/compile/nvrtc.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cli/commands.h"
#include "tvmffi_jit/driver/devices.h"
#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/environment.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/progress.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cli {

namespace {

using nlohmann::json;

// Components in report order. `required_by_default` ones make doctor exit 4
// when missing; the others only matter for some builds (CUDA, NVRTC,
// validation) and can be made required with --require.
struct ComponentInfo {
  const char* name;
  bool required_by_default;
};
constexpr ComponentInfo kComponents[] = {
    {"c++", true}, {"cc", false},     {"nvcc", false}, {"nvrtc", false},
    {"tvm-ffi", true}, {"driver", false}, {"gpu", false}, {"cache", true},
};

constexpr double kProbeTimeoutSeconds = 20;

std::string self_path() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

// The first non-empty line `<program> --version` prints, or nullopt.
std::optional<std::string> version_line(const std::string& program, const std::string& must_contain = "") {
  try {
    util::ProcessOptions opts;
    opts.merge_stderr = true;
    opts.timeout_seconds = kProbeTimeoutSeconds;
    util::ProcessResult r = util::run_process({program, "--version"}, opts);
    if (!r.ok()) return std::nullopt;
    std::optional<std::string> first;
    for (const auto& line : util::split_lines(r.out)) {
      std::string_view t = util::trim(line);
      if (t.empty()) continue;
      if (!first) first = std::string(t);
      if (!must_contain.empty() && t.find(must_contain) != std::string_view::npos) return std::string(t);
    }
    return first;
  } catch (const Error&) {
    return std::nullopt;
  }
}

// "Cuda compilation tools, release 13.0, V13.0.48" -> "13.0.48".
std::string nvcc_version_number(const std::string& line) {
  size_t v = line.rfind(", V");
  if (v != std::string::npos) return line.substr(v + 3);
  size_t r = line.find("release ");
  if (r != std::string::npos) return util::split_any(line.substr(r + 8), ", ").at(0);
  return line;
}

// tvm-ffi's C ABI version from its headers (TVM_FFI_VERSION_* in c_api.h):
// the version the module is compiled against, which is what matters here.
std::optional<std::string> tvm_ffi_header_version(const std::string& include_dir) {
  auto text = util::try_read_file(util::join_path(include_dir, "tvm/ffi/c_api.h"));
  if (!text) return std::nullopt;
  std::string parts[3];
  const char* names[3] = {"TVM_FFI_VERSION_MAJOR", "TVM_FFI_VERSION_MINOR", "TVM_FFI_VERSION_PATCH"};
  for (const auto& line : util::split_lines(*text)) {
    auto words = util::split_any(line, " \t");
    if (words.size() < 3 || words[0] != "#define") continue;
    for (int i = 0; i < 3; ++i) {
      if (words[1] == names[i]) parts[i] = words[2];
    }
  }
  if (parts[0].empty() || parts[1].empty()) return std::nullopt;
  return parts[0] + "." + parts[1] + (parts[2].empty() ? "" : "." + parts[2]);
}

// 13000 -> "13.0" (cuDriverGetVersion encodes 1000*major + 10*minor).
std::string driver_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

json component(const std::string& name) {
  json c = json::object();
  c["name"] = name;
  c["found"] = false;
  c["path"] = nullptr;
  c["version"] = nullptr;
  c["problem"] = nullptr;
  c["fix"] = nullptr;
  return c;
}

void mark_missing(json& c, const std::string& problem, const std::string& fix) {
  c["found"] = false;
  c["problem"] = problem;
  c["fix"] = fix;
}

// The C++ compiler is found exactly as builds find it. The C compiler is
// looked up on its own (find_host_compilers resolves CXX first and would
// blame a broken CXX on cc), with the same rules: $CC or "cc", a path or a
// name on PATH.
std::optional<std::string> find_c_compiler(const toolchain::EnvLookup& env, std::string* problem) {
  const std::optional<std::string> configured = toolchain::non_empty(env, "CC");
  const std::string program = configured.value_or("cc");
  if (program.find('/') != std::string::npos) {
    if (util::is_regular_file(program)) return util::absolute_path(program);
  } else if (auto found = util::find_program(program)) {
    return *found;
  }
  *problem = configured ? "CC=" + program + ": compiler not found" : "no cc on PATH";
  return std::nullopt;
}

json probe_host_compiler(const toolchain::EnvLookup& env, bool c_compiler) {
  json c = component(c_compiler ? "cc" : "c++");
  const char* var = c_compiler ? "CC" : "CXX";
  const std::string fix = c_compiler
                              ? "install a C compiler (apt-get install gcc) or set CC; needed only for .c sources"
                              : "install a C++ compiler (apt-get install g++) or set CXX=/path/to/c++";
  std::string path;
  try {
    if (c_compiler) {
      std::string problem;
      auto found = find_c_compiler(env, &problem);
      if (!found) {
        mark_missing(c, problem, fix);
        return c;
      }
      path = *found;
    } else {
      path = toolchain::find_host_compilers(env, false).cxx;
    }
  } catch (const Error& e) {
    mark_missing(c, e.what(), fix);
    return c;
  }
  c["path"] = path;
  c["found_by"] = toolchain::non_empty(env, var) ? var : "PATH";
  if (auto v = version_line(path)) {
    c["found"] = true;
    c["version"] = *v;
  } else {
    mark_missing(c, path + " --version failed", std::string("point ") + var + " at a working compiler");
  }
  return c;
}

json probe_nvcc(const toolchain::EnvLookup& env) {
  json c = component("nvcc");
  std::string why;
  auto toolkit = toolchain::find_cuda_toolkit(env, &why);
  const std::string fix =
      "install the CUDA toolkit and set CUDA_HOME (e.g. CUDA_HOME=/usr/local/cuda) or put nvcc on PATH; "
      "needed for .cu sources and --emit cubin|fatbin|ptx with nvcc";
  if (!toolkit) {
    mark_missing(c, why, fix);
    return c;
  }
  c["path"] = toolkit->nvcc;
  c["cuda_home"] = toolkit->home;
  c["found_by"] = toolkit->found_by;
  if (auto line = version_line(toolkit->nvcc, "release")) {
    c["found"] = true;
    c["version"] = nvcc_version_number(*line);
    c["version_line"] = *line;
  } else {
    mark_missing(c, toolkit->nvcc + " --version failed", fix);
  }
  return c;
}

json probe_nvrtc() {
  json c = component("nvrtc");
  try {
    // "<resolved path> <major>.<minor>"
    const std::string identity = compile::nvrtc_identity();
    const size_t space = identity.rfind(' ');
    c["found"] = true;
    c["path"] = identity.substr(0, space);
    c["version"] = space == std::string::npos ? "" : identity.substr(space + 1);
  } catch (const Error& e) {
    mark_missing(c, e.what(),
                 "install the CUDA toolkit's NVRTC (libnvrtc.so) or set TVMFFI_JIT_LIBNVRTC=/path/to/libnvrtc.so; "
                 "needed only for --compiler nvrtc");
  }
  return c;
}

json probe_tvm_ffi(const DoctorOptions& options) {
  json c = component("tvm-ffi");
  try {
    toolchain::TvmFfiSearch search;
    search.root = options.tvm_ffi_root;
    toolchain::TvmFfiLocation loc = toolchain::find_tvm_ffi(search);
    c["path"] = loc.lib_dir;
    c["include_dir"] = loc.include_dir;
    c["dlpack_include_dir"] = loc.dlpack_include_dir;
    c["lib_dir"] = loc.lib_dir;
    c["found_by"] = loc.found_by;
    if (auto v = tvm_ffi_header_version(loc.include_dir)) {
      c["found"] = true;
      c["version"] = *v;
    } else {
      mark_missing(c, loc.include_dir + "/tvm/ffi/c_api.h has no TVM_FFI_VERSION_* macros",
                   "reinstall tvm-ffi (pip install --force-reinstall apache-tvm-ffi)");
    }
  } catch (const Error& e) {
    mark_missing(c, e.what(), "pip install apache-tvm-ffi, or set TVM_FFI_ROOT / pass --tvm-ffi-root DIR");
  }
  return c;
}

struct DriverProbe {
  json driver;
  json gpu;  // the "gpu" component (found when at least one GPU is visible)
  json gpus = json::array();
};

DriverProbe probe_driver() {
  DriverProbe p;
  p.driver = component("driver");
  p.gpu = component("gpu");
  const driver::DriverStatus status = driver::query_driver();
  p.driver["library"] = status.library.empty() ? json(nullptr) : json(status.library);
  p.driver["path"] = p.driver["library"];
  if (status.available) {
    p.driver["found"] = true;
    p.driver["version"] = driver_version_text(status.driver_version);
    p.driver["version_code"] = status.driver_version;
  } else {
    mark_missing(p.driver, status.reason.empty() ? "no CUDA driver" : status.reason,
                 "install the NVIDIA driver (libcuda.so.1) or set TVMFFI_JIT_LIBCUDA=/path/to/libcuda.so.1; "
                 "needed for `inspect --load` and for builds without --arch");
  }
  for (const auto& gpu : status.gpus) {
    json g = json::object();
    g["ordinal"] = gpu.ordinal;
    g["name"] = gpu.name;
    g["compute_capability"] = std::to_string(gpu.cc_major) + "." + std::to_string(gpu.cc_minor);
    g["arch"] = "sm_" + std::to_string(gpu.cc_major) + std::to_string(gpu.cc_minor);
    p.gpus.push_back(g);
  }
  p.gpu["count"] = p.gpus.size();
  if (!p.gpus.empty()) {
    p.gpu["found"] = true;
    std::vector<std::string> caps;
    for (const auto& g : p.gpus) caps.push_back(g["compute_capability"].get<std::string>());
    p.gpu["version"] = util::join(caps, " ");
  } else {
    mark_missing(p.gpu, status.available ? "the driver sees no GPU" : "no driver, so no GPU can be seen",
                 "check nvidia-smi and CUDA_VISIBLE_DEVICES; without a GPU, builds need --arch or "
                 "TVM_FFI_CUDA_ARCH_LIST and `inspect --load` cannot run");
  }
  return p;
}

struct TreeSummary {
  uint64_t bytes = 0;
  uint64_t files = 0;
  uint64_t module_entries = 0;
  uint64_t object_entries = 0;
};

// Walks the cache without following symlinks. An entry is a directory holding
// entry.json (cache/entry.h); those under objects/ are per-translation-unit
// objects, the rest modules. tmp/ (staging) is counted in bytes only.
void summarize_tree(int dir_fd, bool under_objects, bool under_tmp, int depth, TreeSummary& s) {
  if (depth > 16) return;
  DIR* dir = ::fdopendir(dir_fd);
  if (!dir) {
    ::close(dir_fd);
    return;
  }
  bool has_entry_json = false;
  while (struct dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      s.bytes += static_cast<uint64_t>(st.st_size);
      ++s.files;
      if (name == "entry.json") has_entry_json = true;
    } else if (S_ISDIR(st.st_mode)) {
      int child = ::openat(::dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child < 0) continue;
      const bool top = depth == 0;
      summarize_tree(child, under_objects || (top && name == "objects"), under_tmp || (top && name == "tmp"),
                     depth + 1, s);
    }
  }
  ::closedir(dir);
  if (has_entry_json && !under_tmp && depth > 0) (under_objects ? s.object_entries : s.module_entries)++;
}

json probe_cache(const DoctorOptions& options) {
  json c = component("cache");
  std::string root;
  try {
    root = cache::resolve_root_path(options.cache_dir);
  } catch (const Error& e) {
    mark_missing(c, e.what(), "set TVMFFI_JIT_CACHE_DIR or HOME, or pass --cache-dir DIR");
    return c;
  }
  c["path"] = root;
  c["root"] = root;
  c["exists"] = util::is_directory(root);
  c["size_bytes"] = 0;
  c["files"] = 0;
  c["entries"] = 0;
  c["module_entries"] = 0;
  c["object_entries"] = 0;
  c["writable"] = false;
  if (!util::is_directory(root)) {
    // Not an error: the first build creates it. Writable if the nearest existing parent is.
    std::string parent = root;
    while (!parent.empty() && parent != "/" && !util::is_directory(parent)) parent = util::parent_path(parent);
    const bool can_create = ::access(parent.empty() ? "/" : parent.c_str(), W_OK | X_OK) == 0;
    c["writable"] = can_create;
    if (can_create) {
      c["found"] = true;
      c["version"] = "not created yet";
    } else {
      mark_missing(c, root + " does not exist and " + parent + " is not writable",
                   "set TVMFFI_JIT_CACHE_DIR (or pass --cache-dir) to a writable directory");
    }
    return c;
  }
  TreeSummary s;
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) summarize_tree(fd, false, false, 0, s);
  c["size_bytes"] = s.bytes;
  c["size"] = util::format_bytes(s.bytes);
  c["files"] = s.files;
  c["entries"] = s.module_entries + s.object_entries;
  c["module_entries"] = s.module_entries;
  c["object_entries"] = s.object_entries;
  // The same checks a build makes before using the root (ownership, mode,
  // a write probe), so doctor says what the build would refuse.
  cache::CacheRoot opened;
  try {
    opened = cache::open_root(root, false);
  } catch (const Error& e) {
    mark_missing(c, e.what(), "pick a directory of your own with TVMFFI_JIT_CACHE_DIR or --cache-dir");
    return c;
  }
  c["writable"] = opened.writable;
  if (opened.writable) {
    c["found"] = true;
    c["version"] = std::to_string(s.module_entries + s.object_entries) + " entries, " + util::format_bytes(s.bytes);
  } else {
    mark_missing(c, opened.unwritable_why + ": builds work but nothing is cached",
                 "fix the permissions of " + root + " or set TVMFFI_JIT_CACHE_DIR to a writable directory");
  }
  return c;
}

std::string line_for(const json& c) {
  std::string detail;
  if (c["found"].get<bool>()) {
    if (c["version"].is_string()) detail = c["version"].get<std::string>();
    const std::string shown_path = c.contains("include_dir") ? c["include_dir"].get<std::string>()
                                   : c["path"].is_string() ? c["path"].get<std::string>() : "";
    if (!shown_path.empty() && c["name"] != "cache") detail += (detail.empty() ? "" : "  ") + shown_path;
    if (c["name"] == "cache") detail = c["path"].get<std::string>() + "  " + detail;
    if (c.contains("found_by") && c["found_by"].is_string()) detail += "  (" + c["found_by"].get<std::string>() + ")";
  } else {
    detail = c["problem"].get<std::string>();
  }
  return detail;
}

void print_text(const json& report, bool color) {
  auto paint = [&](const char* code, const std::string& text) {
    return color ? std::string("\x1b[") + code + "m" + text + "\x1b[0m" : text;
  };
  std::string out = report["tool"]["name"].get<std::string>() + " " + report["tool"]["version"].get<std::string>();
  if (report["tool"]["path"].is_string()) out += "  " + report["tool"]["path"].get<std::string>();
  out += "\n";
  const json components[] = {report["compilers"]["c++"], report["compilers"]["cc"], report["compilers"]["nvcc"],
                             report["compilers"]["nvrtc"], report["tvm_ffi"], report["driver"], report["gpu"],
                             report["cache"]};
  for (const auto& c : components) {
    const bool found = c["found"].get<bool>();
    const bool required = c["required"].get<bool>();
    const std::string tag = found ? paint("32", "ok     ") : required ? paint("1;31", "MISSING") : paint("33", "missing");
    char name[16];
    std::snprintf(name, sizeof name, "%-8s", c["name"].get<std::string>().c_str());
    out += "  " + tag + "  " + name + "  " + line_for(c) + "\n";
    if (!found) out += "           " + std::string(8, ' ') + "  fix: " + c["fix"].get<std::string>() + "\n";
  }
  for (const auto& g : report["gpus"]) {
    out += "  gpu " + std::to_string(g["ordinal"].get<int>()) + ": " + g["name"].get<std::string>() + "  compute capability " +
           g["compute_capability"].get<std::string>() + " (" + g["arch"].get<std::string>() + ")\n";
  }
  const size_t missing = report["missing"].size();
  if (missing == 0) {
    out += "everything found\n";
  } else {
    std::vector<std::string> names;
    for (const auto& m : report["missing"]) names.push_back(m["name"].get<std::string>());
    out += std::to_string(missing) + " missing: " + util::join(names, ", ") +
           (report["ok"].get<bool>() ? " (none required)\n" : "\n");
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

nlohmann::json collect_doctor_report(const DoctorOptions& options) {
  const toolchain::EnvLookup env = toolchain::process_environment();
  DriverProbe driver = probe_driver();
  // In kComponents order.
  std::vector<json> components = {probe_host_compiler(env, false), probe_host_compiler(env, true), probe_nvcc(env),
                                  probe_nvrtc(), probe_tvm_ffi(options), driver.driver, driver.gpu,
                                  probe_cache(options)};
  std::set<std::string> required(options.require.begin(), options.require.end());
  for (const auto& c : kComponents) {
    if (c.required_by_default) required.insert(c.name);
  }
  json missing = json::array();
  bool ok = true;
  for (auto& c : components) {
    const bool is_required = required.count(c["name"].get<std::string>()) > 0;
    c["required"] = is_required;
    if (!c["found"].get<bool>()) {
      missing.push_back({{"name", c["name"]}, {"required", is_required}, {"problem", c["problem"]}, {"fix", c["fix"]}});
      if (is_required) ok = false;
    }
  }

  json report = json::object();
  report["tool"] = {{"name", "tvmffi-jit"}, {"version", TVMFFI_JIT_VERSION}, {"path", self_path()}};
  report["compilers"] = {{"c++", components[0]}, {"cc", components[1]}, {"nvcc", components[2]}, {"nvrtc", components[3]}};
  report["tvm_ffi"] = components[4];
  report["driver"] = components[5];
  report["gpu"] = components[6];
  report["gpus"] = driver.gpus;
  report["cache"] = components[7];
  report["missing"] = missing;
  report["ok"] = ok;
  return report;
}

std::vector<std::string> component_names() {
  std::vector<std::string> names;
  for (const auto& c : kComponents) names.push_back(c.name);
  return names;
}

std::string version_report() {
  std::string text = std::string("tvmffi-jit ") + TVMFFI_JIT_VERSION + "\n";
  try {
    const toolchain::EnvLookup env = toolchain::process_environment();
    json tvm_ffi = probe_tvm_ffi({});
    text += tvm_ffi["found"].get<bool>()
                ? "tvm-ffi " + tvm_ffi["version"].get<std::string>() + " (" + tvm_ffi["include_dir"].get<std::string>() + ")\n"
                : "tvm-ffi: not found\n";
    json nvcc = probe_nvcc(env);
    text += nvcc["found"].get<bool>()
                ? "nvcc " + nvcc["version"].get<std::string>() + " (" + nvcc["path"].get<std::string>() + ")\n"
                : "nvcc: not found\n";
    const driver::DriverStatus status = driver::query_driver();
    text += status.available ? "CUDA driver " + driver_version_text(status.driver_version) + " (" + status.library + ")\n"
                             : "CUDA driver: not found (" + status.reason + ")\n";
  } catch (const std::exception& e) {
    text += std::string("(version probe failed: ") + e.what() + ")\n";
  }
  text.pop_back();  // CLI11 adds the final newline
  return text;
}

void register_doctor_command(CLI::App& app, CommandContext& ctx) {
  struct Options {
    bool json = false;
    DoctorOptions doctor;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "doctor", "Report the compilers, tvm-ffi, CUDA driver, GPUs and cache this machine has, and how to fix what is missing");
  cmd->add_flag("--json", opts->json, "Print the report as one JSON object on stdout");
  cmd->add_option("--cache-dir", opts->doctor.cache_dir, "Cache root to report on (default: TVMFFI_JIT_CACHE_DIR, "
                                                         "XDG_CACHE_HOME/tvmffi-jit, ~/.cache/tvmffi-jit)");
  cmd->add_option("--tvm-ffi-root", opts->doctor.tvm_ffi_root, "Look for tvm-ffi in DIR only");
  const std::vector<std::string> names = component_names();
  cmd->add_option("--require", opts->doctor.require,
                  "Also fail (exit 4) when these are missing; comma-separated: " + util::join(names, ","))
      ->delimiter(',')
      ->check(CLI::IsMember(names));
  cmd->footer("Exit status: 0 when every required component is found (c++, tvm-ffi, a usable cache root, and\n"
              "whatever --require names); 4 otherwise. Missing optional components are reported, not fatal.");
  cmd->callback([opts, &ctx] {
    const json report = collect_doctor_report(opts->doctor);
    if (opts->json) {
      const std::string text = util::dump_json(report, 2) + "\n";
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
      print_text(report, util::terminal_style_for_fd(STDOUT_FILENO).color);
    }
    ctx.exit_code = report["ok"].get<bool>() ? 0 : static_cast<int>(ExitCode::kMissingTool);
  });
}

}  // namespace tvmffi_jit::cli
