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
#include "output.h"
#include "tvmffi_jit/compile/nvrtc.h"
#include "tvmffi_jit/cache/maintenance.h"
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

// 13000 -> "13.0" (cuDriverGetVersion encodes 1000*major + 10*minor).

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

// The C++ and C compilers are found exactly as builds find them, each on its
// own (find_host_compilers resolves CXX first and would blame a broken CXX on cc).
json probe_host_compiler(const toolchain::EnvLookup& env, bool c_compiler) {
  json c = component(c_compiler ? "cc" : "c++");
  const char* var = c_compiler ? "CC" : "CXX";
  const std::string fix = c_compiler
                              ? "install a C compiler (apt-get install gcc) or set CC; needed only for .c sources"
                              : "install a C++ compiler (apt-get install g++) or set CXX=/path/to/c++";
  auto path = toolchain::find_compiler(env, var, c_compiler ? "cc" : "c++");
  if (!path) {
    mark_missing(c, path.error(), fix);
    return c;
  }
  c["path"] = *path;
  c["found_by"] = toolchain::non_empty(env, var) ? var : "PATH";
  if (auto v = version_line(*path)) {
    c["found"] = true;
    c["version"] = *v;
  } else {
    mark_missing(c, *path + " --version failed", std::string("point ") + var + " at a working compiler");
  }
  return c;
}

json probe_nvcc(const toolchain::EnvLookup& env) {
  json c = component("nvcc");
  auto toolkit = toolchain::find_cuda_toolkit(env);
  const std::string fix =
      "install the CUDA toolkit and set CUDA_HOME (e.g. CUDA_HOME=/usr/local/cuda) or put nvcc on PATH; "
      "needed for .cu sources and --emit cubin|fatbin|ptx with nvcc";
  if (!toolkit) {
    mark_missing(c, toolkit.error(), fix);
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

// "version" is the headers' (the ABI modules are compiled against, as the
// cache key records it); "package_version" the installed wheel's, which can
// differ ("0.1.16" headers in the 0.1.15.post2 wheel). Both are shown, named.
json probe_tvm_ffi(const DoctorOptions& options, const toolchain::EnvLookup& env) {
  json c = component("tvm-ffi");
  toolchain::TvmFfiSearch search;
  search.root = options.tvm_ffi_root;
  search.env = env;
  auto loc = toolchain::find_tvm_ffi(search);
  if (!loc) {
    mark_missing(c, loc.error(), "pip install apache-tvm-ffi, or set TVM_FFI_ROOT / pass --tvm-ffi-root DIR");
    return c;
  }
  c["path"] = loc->lib_dir;
  c["include_dir"] = loc->include_dir;
  c["dlpack_include_dir"] = loc->dlpack_include_dir;
  c["lib_dir"] = loc->lib_dir;
  c["found_by"] = loc->found_by;
  auto package = toolchain::tvm_ffi_package_version(*loc);
  c["package_version"] = package ? json(*package) : json(nullptr);
  auto header = toolchain::tvm_ffi_header_version(loc->include_dir);
  c["header_version"] = header ? json(*header) : json(nullptr);
  if (header) {
    c["found"] = true;
    c["version"] = *header;
  } else {
    mark_missing(c, header.error(), "reinstall tvm-ffi (pip install --force-reinstall apache-tvm-ffi)");
  }
  return c;
}

struct DriverProbe {
  json driver;
  json gpu;  // the "gpu" component (found when at least one GPU is visible)
  json gpus = json::array();
};

DriverProbe probe_driver(const std::string& libcuda) {
  DriverProbe p;
  p.driver = component("driver");
  p.gpu = component("gpu");
  const driver::DriverStatus status = driver::query_driver(libcuda);
  p.driver["library"] = status.library.empty() ? json(nullptr) : json(status.library);
  p.driver["path"] = p.driver["library"];
  if (status.available) {
    p.driver["found"] = true;
    p.driver["version"] = driver::format_driver_version(status.driver_version);
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

json probe_cache(const DoctorOptions& options, const cache::RootEnvironment& root_env) {
  json c = component("cache");
  std::string root;
  try {
    root = cache::resolve_root_path(options.cache_dir, root_env);
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
  const cache::CacheSummary s = cache::summarize_cache(root);
  c["size_bytes"] = s.total_bytes;
  c["size"] = util::format_bytes(s.total_bytes);
  c["files"] = s.total_files;
  c["entries"] = s.module_entries + s.object_entries;
  c["module_entries"] = s.module_entries;
  c["object_entries"] = s.object_entries;
  // The same checks a build makes before using the root (ownership, mode,
  // a write probe), so doctor says what the build would refuse.
  cache::CacheRoot opened;
  try {
    opened = cache::open_root(cache_root_to_open(root, root_env), false);
  } catch (const Error& e) {
    mark_missing(c, e.what(), "pick a directory of your own with TVMFFI_JIT_CACHE_DIR or --cache-dir");
    return c;
  }
  c["writable"] = opened.writable;
  if (opened.writable) {
    c["found"] = true;
    c["version"] = std::to_string(s.module_entries + s.object_entries) + " entries, " + util::format_bytes(s.total_bytes);
  } else {
    mark_missing(c, opened.unwritable_why + ": builds work but nothing is cached",
                 "fix the permissions of " + root + " or set TVMFFI_JIT_CACHE_DIR to a writable directory");
  }
  return c;
}

// --- compiler launchers ------------------------------------------------------
//
// Not components (a build needs none), but a launcher that is configured and
// broken silently costs every build a second compile, so doctor names its
// known limits and, for a CUDA launcher, compiles a tiny kernel through it in
// each nvcc mode the tool uses and checks the outputs as builds do.

std::vector<std::string> launcher_limits(const std::string& program, bool cuda) {
  std::vector<std::string> out;
  if (program == "ccache" && cuda)
    out.push_back("ccache caches nvcc -c only: --emit cubin/fatbin/ptx and embedded cubins run uncached "
                  "(ccache counts them as \"called for link\")");
  if (program == "sccache" && cuda)
    out.push_back("released sccache versions may exit 0 without writing the output for newer nvcc releases "
                  "(the probe below tests this nvcc); such steps are re-run without the launcher and counted "
                  "as launcher_fallbacks");
  if ((program == "distcc" || program == "icecc" || program == "icecream") && cuda)
    out.push_back(program + " cannot distribute nvcc (nvcc does not compile preprocessed input): use sccache-dist "
                            "(docs/farm.md)");
  return out;
}

json probe_launcher(const std::optional<std::string>& given, const char* option, const char* variable,
                    const std::vector<std::string>& compiler_words, const char* compiler_variable, bool cuda,
                    const toolchain::EnvLookup& env) {
  json l = json::object();
  std::vector<std::string> words;
  std::string source;
  if (given) {
    words = toolchain::split_launcher_text(*given);
    source = option;
  } else if (auto v = toolchain::non_empty(env, variable)) {
    words = toolchain::split_launcher_text(*v);
    source = variable;
  } else if (!compiler_words.empty()) {
    words = compiler_words;
    source = compiler_variable;
  }
  l["configured"] = !words.empty();
  l["source"] = source.empty() ? json(nullptr) : json(source);
  l["argv"] = words;
  l["program"] = nullptr;
  l["version"] = nullptr;
  l["limits"] = json::array();
  l["probe"] = json::array();
  l["problem"] = nullptr;
  if (words.empty()) return l;
  auto found = toolchain::find_launcher(words, source);
  if (!found) {
    l["problem"] = found.error();
    return l;
  }
  const toolchain::Launcher& resolved = *found;
  l["argv"] = resolved.argv;
  const std::string program = util::file_name(resolved.argv[0]);
  l["program"] = resolved.argv[0];
  if (auto v = version_line(resolved.argv[0])) l["version"] = *v;
  l["limits"] = launcher_limits(program, cuda);
  if (!cuda) return l;
  auto toolkit = toolchain::find_cuda_toolkit(env);
  if (!toolkit) return l;
  // Each nvcc mode the tool runs, through the launcher, with its outputs checked.
  try {
    util::TempDir dir(util::temp_root(), "tvmffi-jit-doctor-");
    util::write_file(util::join_path(dir.path(), "k.cu"), "__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n");
    const std::string gencode = "-gencode=arch=compute_80,code=sm_80";
    const std::vector<std::pair<std::string, std::vector<std::string>>> modes = {
        {"object", {"-MD", "-MF", "k.o.d", "-Xcompiler", "-fPIC", gencode, "-c", "k.cu", "-o", "k.o"}},
        {"cubin", {gencode, "-cubin", "k.cu", "-o", "k.cubin"}},
        {"fatbin", {gencode, "-gencode=arch=compute_90,code=sm_90", "-fatbin", "k.cu", "-o", "k.fatbin"}},
        {"ptx", {"-arch=compute_80", "-ptx", "k.cu", "-o", "k.ptx"}},
    };
    std::vector<std::string> broken;
    for (const auto& [mode, args] : modes) {
      std::vector<std::string> argv = resolved.argv;
      argv.push_back(toolkit->nvcc);
      argv.insert(argv.end(), args.begin(), args.end());
      util::ProcessOptions po;
      po.cwd = dir.path();
      po.merge_stderr = true;
      po.timeout_seconds = 120;
      util::ProcessResult r = util::run_process(argv, po);
      const std::string out_name = args[args.size() - 1];
      auto stamp = util::file_stamp(util::join_path(dir.path(), out_name));
      json p = {{"mode", mode}, {"exit", r.status_text()}, {"output_ok", stamp && stamp->size > 0}};
      if (r.ok() && !(stamp && stamp->size > 0)) broken.push_back(mode);
      if (!r.ok()) p["output"] = r.out.substr(0, 2000);
      l["probe"].push_back(p);
    }
    if (!broken.empty())
      l["problem"] = program + " exited 0 without writing the output of nvcc " + util::join(broken, ", ") +
                     " with " + toolkit->nvcc + ": builds re-run those steps without it (launcher_fallbacks); "
                     "upgrade it or leave it unset for CUDA";
  } catch (const Error& e) {
    l["problem"] = std::string("probe failed: ") + e.what();
  }
  return l;
}

void print_launchers(const json& launchers, std::string& out) {
  for (const char* which : {"cxx", "cuda"}) {
    const json& l = launchers[which];
    if (!l["configured"].get<bool>()) continue;
    out += std::string("  launcher ") + which + ": " + util::join(l["argv"].get<std::vector<std::string>>(), " ");
    if (l["version"].is_string()) out += "  " + l["version"].get<std::string>();
    out += "  (" + l["source"].get<std::string>() + ")\n";
    for (const auto& p : l["probe"])
      out += "    nvcc " + p["mode"].get<std::string>() + " through it: " + p["exit"].get<std::string>() +
             (p["output_ok"].get<bool>() ? ", output written" : ", NO OUTPUT") + "\n";
    for (const auto& lim : l["limits"]) out += "    limit: " + lim.get<std::string>() + "\n";
    if (l["problem"].is_string()) out += "    problem: " + l["problem"].get<std::string>() + "\n";
  }
}

std::string line_for(const json& c) {
  std::string detail;
  if (c["found"].get<bool>()) {
    if (c["version"].is_string()) detail = c["version"].get<std::string>();
    if (c["name"] == "tvm-ffi") {
      // Two versions that can differ: say which is which.
      detail = "headers " + c["header_version"].get<std::string>() + ", package " +
               (c["package_version"].is_string() ? c["package_version"].get<std::string>() : "unknown");
    }
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
  print_launchers(report["launchers"], out);
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
  print_result(out);
}

}  // namespace

nlohmann::json collect_doctor_report(const DoctorOptions& options, const CommandEnvironment& environment) {
  const toolchain::EnvLookup& env = environment.env;
  DriverProbe driver = probe_driver(environment.libcuda);
  // In kComponents order.
  std::vector<json> components = {probe_host_compiler(env, false), probe_host_compiler(env, true), probe_nvcc(env),
                                  probe_nvrtc(), probe_tvm_ffi(options, env), driver.driver, driver.gpu,
                                  probe_cache(options, environment.cache_root)};
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
  // When CXX itself is broken the c++ component reports it; no launcher then.
  const std::vector<std::string> cxx_words =
      toolchain::find_host_compilers(env, false).value_or(toolchain::HostCompilers{}).cxx_launcher;
  report["launchers"] = {
      {"cxx", probe_launcher(options.cxx_launcher, "--cxx-launcher", "TVMFFI_JIT_CXX_LAUNCHER", cxx_words, "CXX", false, env)},
      {"cuda", probe_launcher(options.cuda_launcher, "--cuda-launcher", "TVMFFI_JIT_CUDA_LAUNCHER", {}, "", true, env)}};
  report["missing"] = missing;
  report["ok"] = ok;
  return report;
}

std::vector<std::string> component_names() {
  std::vector<std::string> names;
  for (const auto& c : kComponents) names.push_back(c.name);
  return names;
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
  cmd->add_option("--cxx-launcher", opts->doctor.cxx_launcher,
                  "Report on this C/C++ compiler launcher (default: $TVMFFI_JIT_CXX_LAUNCHER, else CXX's launcher words)");
  cmd->add_option("--cuda-launcher", opts->doctor.cuda_launcher,
                  "Report on this nvcc launcher and compile a tiny kernel through it in each nvcc mode\n"
                  "(default: $TVMFFI_JIT_CUDA_LAUNCHER)");
  const std::vector<std::string> names = component_names();
  cmd->add_option("--require", opts->doctor.require,
                  "Also fail (exit 4) when these are missing; comma-separated: " + util::join(names, ","))
      ->delimiter(',')
      ->check(CLI::IsMember(names));
  cmd->footer("Exit status: 0 when every required component is found (c++, tvm-ffi, a usable cache root, and\n"
              "whatever --require names); 4 otherwise. Missing optional components are reported, not fatal.");
  cmd->callback([opts, &ctx] {
    const json report = collect_doctor_report(opts->doctor, ctx.environment);
    if (opts->json) {
      print_result(util::dump_json(report, 2) + "\n");
    } else {
      print_text(report, util::terminal_style_for_fd(STDOUT_FILENO, ctx.environment.terminal).color);
    }
    ctx.exit_code = report["ok"].get<bool>() ? 0 : static_cast<int>(ExitCode::kMissingTool);
  });
}

}  // namespace tvmffi_jit::cli
