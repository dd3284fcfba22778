// `tvmffi-jit doctor [--json]`: what this machine has for building, caching
// and validating, and for each missing piece what to do about it.
//
// Every probe (cli/doctor_probes.h) is independent and none of them throws
// past collect_*(): a machine without a GPU, without nvcc or without tvm-ffi
// is exactly the machine doctor exists for. Results go to stdout (they are the command's
// output); the exit status is 4 when a required component is missing.

#include <unistd.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "doctor.h"
#include "doctor_probes.h"
#include "output.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cli/commands.h"
#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/environment.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/error.h"
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

std::string self_path() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
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
  toolchain::TvmFfiSearch search;
  search.root = options.tvm_ffi_root;
  search.env = env;
  const Expected<toolchain::TvmFfiLocation> tvm_ffi = toolchain::find_tvm_ffi(search);
  DriverProbe driver = probe_driver(environment.libcuda);
  // In kComponents order.
  std::vector<json> components = {probe_host_compiler(env, false), probe_host_compiler(env, true), probe_nvcc(env),
                                  probe_nvrtc(), probe_tvm_ffi(tvm_ffi), driver.driver, driver.gpu,
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
      {"cxx", probe_launcher(options.cxx_launcher, "--cxx-launcher", "TVMFFI_JIT_CXX_LAUNCHER", cxx_words, "CXX", false,
                             env, tvm_ffi)},
      {"cuda", probe_launcher(options.cuda_launcher, "--cuda-launcher", "TVMFFI_JIT_CUDA_LAUNCHER", {}, "", true, env,
                              tvm_ffi)}};
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
