// tvmffi-jit inspect [--json] [-j N] FILE...
//
// Lists the GPU code in cubin, fatbin, PTX and host ELF files without a GPU or
// a driver. One FileReport per file (parse), then printing; exit 3 when any
// file is invalid (its error says what and where), 2 for usage errors.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/driver_load.h"
#include "output.h"
#include "tvmffi_jit/cli/commands.h"
#include "tvmffi_jit/devcode/parse.h"
#include "tvmffi_jit/devcode/print.h"
#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::cli {

namespace {

struct InspectArgs {
  std::vector<std::string> files;
  bool json = false;
  unsigned jobs = 0;  // 0 = one per core
  bool no_demangle = false;
  bool no_ptx = false;
  bool scan_data = false;
  bool load = false;  // --load: also validate through the CUDA driver (docs/driver.md)
  DriverLoadOptions driver;
};

// The process exits right after the command: freeing the reports of big
// libraries (tens of thousands of kernels and their names, allocated by many
// threads) took longer than formatting them in parallel, and the kernel
// reclaims the memory at exit in one go. Held through a reachable pointer so
// leak checkers stay quiet.
void keep_until_exit(std::vector<devcode::FileReport>&& reports) {
  static auto* kept = new std::vector<std::vector<devcode::FileReport>>();
  kept->push_back(std::move(reports));
}

int run_inspect(const InspectArgs& args, const CommandEnvironment& environment) {
  // Before anything is printed: a bad variable is exit 2 with nothing on stdout.
  std::optional<driver::ValidateOptions> load;
  if (args.load) load = to_validate_options(args.driver, environment.env);
  devcode::InspectOptions options;
  options.threads = args.jobs ? args.jobs : std::max(1u, std::thread::hardware_concurrency());
  options.demangle = !args.no_demangle;
  options.parse_ptx = !args.no_ptx;
  options.scan_data = args.scan_data;

  std::vector<devcode::FileReport> reports;
  bool all_ok = true;
  for (const std::string& path : args.files) {
    devcode::FileReport report = devcode::inspect_file(path, options);
    if (!report.ok()) {
      all_ok = false;
      print_diagnostic(path, report.error);
    }
    if (!args.json && !devcode::write_text(stdout, report, options.threads)) stdout_failed();
    // Text is printed file by file, so memory stays flat over many files.
    if (args.json || args.load) reports.push_back(std::move(report));
  }
  int code = all_ok ? 0 : static_cast<int>(ExitCode::kInvalid);
  if (load) {
    int load_code = finish_inspect_load(reports, *load, args.json);
    if (all_ok) code = load_code;
  } else {
    if (args.json && !devcode::write_json(stdout, reports, options.threads)) stdout_failed();
    if (std::fflush(stdout) != 0) stdout_failed();
  }
  keep_until_exit(std::move(reports));
  return code;
}

}  // namespace

void register_inspect_command(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand(
      "inspect", "List kernels, resources and embedded images of cubin, fatbin, PTX and host ELF files (offline)");
  sub->add_flag("--json", args->json, "Print one JSON object (schema: docs/inspect.md)");
  sub->add_option("-j,--jobs", args->jobs, "Threads for decompressing and parsing entries (default: one per core)")
      ->check(CLI::Range(1u, 1024u));
  sub->add_flag("--no-demangle", args->no_demangle, "Do not demangle kernel names (faster on huge libraries)");
  sub->add_flag("--no-ptx", args->no_ptx, "Do not decompress and list PTX entries");
  sub->add_flag("--scan-data", args->scan_data,
                "Host ELF files: also find fatbin containers in other data sections (e.g. cuFFT's .ldata)");
  sub->add_flag("--load", args->load,
                "Also load each file through the CUDA driver (in a child process) and give a verdict");
  add_driver_load_options(sub, args->driver);
  sub->add_option("files", args->files, "cubin, fatbin, PTX or ELF (.so/.o/executable) files")->required();
  sub->footer("Exit codes: 0 every file parsed; 3 a file is invalid or unreadable (its error says why);\n"
              "2 usage error; with --load also 3 if the driver rejects a file, 4 if there is no driver or device.");
  sub->callback([args, &ctx] { ctx.exit_code = run_inspect(*args, ctx.environment); });
}

}  // namespace tvmffi_jit::cli
