#include "tvmffi_jit/cli/app.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "output.h"
#include "tvmffi_jit/cli/commands.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/progress.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cli {

namespace {

// The subcommand table: one row per src/cli/cmd_<name>.cpp.
struct CommandRow {
  const char* name;  // as its register function adds it
  RegisterCommand reg;
};
const std::vector<CommandRow> kCommands = {
    {"__driver-probe", register_driver_probe_command},
    {"inspect", register_inspect_command},
    {"cache", register_cache_command},
    {"build", register_build_command},
    {"doctor", register_doctor_command},
};

// The one command a command line names, when exactly one command's name
// appears among its arguments: then only that command is set up (setting up
// every command's options was a fifth of a command-line hit's instructions).
// Anything else (help asked anywhere; no name: --version, a typo; two names:
// a value that happens to be one) sets up them all, as before.
const CommandRow* only_command_named(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)  // help may list every command
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "--help-all") == 0)
      return nullptr;
  const CommandRow* named = nullptr;
  for (const CommandRow& row : kCommands)
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], row.name) == 0) {
        if (named && named != &row) return nullptr;
        named = &row;
      }
  return named;
}

const char* kAbout =
    "tvmffi-jit: build C++/CUDA sources into cached Apache TVM FFI modules, emit and\n"
    "inspect cubin/fatbin/PTX, and validate GPU code through the CUDA driver.";

const char* kExitCodeHelp =
    "Exit codes: 0 ok; 1 compile or link failed; 2 bad usage or manifest; 3 validation failed\n"
    "(invalid file); 4 missing toolchain, tvm-ffi or driver; 5 I/O or cache failure.";

// Options that belong to subcommands but read as global ones: accepted before
// the subcommand too (`tvmffi-jit --cache-dir D cache list`), by moving them
// behind it. -v/-q are the top-level app's own and fall through from every
// subcommand.
struct MovableOption {
  const char* name;
  bool takes_value;
};
constexpr MovableOption kMovableOptions[] = {{"--cache-dir", true}, {"--json", false}};

const MovableOption* movable_option(const std::string& name) {
  for (const auto& m : kMovableOptions)
    if (name == m.name) return &m;
  return nullptr;
}

std::string option_name(const std::string& token) { return token.substr(0, token.find('=')); }

CLI::App* find_subcommand(CLI::App* level, const std::string& name) {
  auto found = level->get_subcommands([&](CLI::App* a) { return !a->get_name().empty() && a->check_name(name); });
  return found.empty() ? nullptr : found.front();
}

bool has_subcommands(CLI::App* level) {
  return !level->get_subcommands([](CLI::App* a) { return !a->get_name().empty(); }).empty();
}

bool takes_value(const CLI::Option* opt) { return opt && opt->get_items_expected_max() > 0; }

// argv[1..] with the movable options that stand before the (deepest)
// subcommand moved right behind it, where the subcommand's own option takes
// them. Everything after the subcommand, and after "--", stays as given.
std::vector<std::string> place_global_options(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> in(argv + 1, argv + argc), out, moved;
  CLI::App* level = &app;
  size_t i = 0;
  for (; i < in.size(); ++i) {
    const std::string& token = in[i];
    if (token == "--") break;
    if (token.empty() || token[0] != '-') {
      CLI::App* sub = find_subcommand(level, token);
      if (!sub) break;
      out.push_back(token);
      level = sub;
      if (!has_subcommands(level)) {
        ++i;
        break;
      }
      continue;
    }
    const std::string name = option_name(token);
    const CLI::Option* own = level->get_option_no_throw(name);
    const MovableOption* movable = own ? nullptr : movable_option(name);
    std::vector<std::string>& to = movable ? moved : out;
    to.push_back(token);
    const bool separate_value = token.find('=') == std::string::npos &&
                                (movable ? movable->takes_value : takes_value(own) && util::starts_with(token, "--"));
    if (separate_value && i + 1 < in.size()) to.push_back(in[++i]);
  }
  out.insert(out.end(), moved.begin(), moved.end());
  out.insert(out.end(), in.begin() + static_cast<std::ptrdiff_t>(i), in.end());
  return out;
}

// "tvmffi-jit cache list" for the deepest subcommand CLI11 selected.
CLI::App* selected_command(CLI::App& app) {
  CLI::App* level = &app;
  for (;;) {
    auto subs = level->get_subcommands();
    if (subs.empty()) return level;
    level = subs.front();
  }
}

std::string command_path(CLI::App* level) {
  std::vector<std::string> names;
  for (CLI::App* a = level; a; a = a->get_parent()) names.insert(names.begin(), a->get_name());
  return util::join(names, " ");
}

// Every option spelling `level` accepts, its parents' included (they fall through).
std::vector<std::string> option_spellings(CLI::App* level) {
  std::vector<std::string> names;
  for (CLI::App* a = level; a; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
      for (const auto& s : opt->get_snames()) names.push_back("-" + s);
    }
  }
  return names;
}

std::vector<std::string> subcommand_names(CLI::App* level) {
  std::vector<std::string> names;
  for (CLI::App* a : level->get_subcommands([](CLI::App* s) { return !s->get_name().empty() && !s->get_group().empty(); }))
    names.push_back(a->get_name());
  return names;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  auto near = util::nearest(word, candidates);
  // A shortened option ("--older" for "--older-than") is too far for an edit
  // distance; one candidate it begins is the answer.
  if (!near && word.size() >= 4) {
    std::vector<std::string> longer;
    for (const auto& c : candidates)
      if (c.size() > word.size() && util::starts_with(c, word)) longer.push_back(c);
    if (longer.size() == 1) near = longer[0];
  }
  return near ? ", did you mean '" + *near + "'?" : "";
}

// The first word that `level` did not take: the first token after the
// subcommand's own name that is not an option (or an option's value).
std::string first_unknown_word(CLI::App* level, const std::vector<std::string>& args) {
  // Walk the arguments the way place_global_options did, down to `level`.
  size_t i = 0;
  std::vector<CLI::App*> chain;
  for (CLI::App* a = level; a && a->get_parent(); a = a->get_parent()) chain.insert(chain.begin(), a);
  for (CLI::App* a : chain) {
    while (i < args.size() && args[i] != a->get_name()) ++i;
    ++i;
  }
  for (; i < args.size(); ++i) {
    const std::string& token = args[i];
    if (token == "--") return i + 1 < args.size() ? args[i + 1] : "";
    if (token.empty() || token[0] != '-') return token;
    const CLI::Option* opt = level->get_option_no_throw(option_name(token));
    if (token.find('=') == std::string::npos && takes_value(opt) && util::starts_with(token, "--")) ++i;
  }
  return "";
}

// An option `level` or its parents take (they fall through), by any spelling.
const CLI::Option* option_at(CLI::App* level, const std::string& name) {
  for (CLI::App* a = level; a; a = a->get_parent())
    if (const CLI::Option* o = a->get_option_no_throw(name)) return o;
  return nullptr;
}

// Every command (its path) below `level` that has an option spelled `name`.
void commands_with_option(CLI::App* level, const std::string& name, std::vector<std::string>& out) {
  for (CLI::App* sub : level->get_subcommands([](CLI::App* s) { return !s->get_name().empty(); })) {
    if (sub->get_option_no_throw(name)) out.push_back(command_path(sub));
    commands_with_option(sub, name, out);
  }
}

struct UnknownOption {
  std::string name;
  CLI::App* level;
};

// The first option on the command line that the command it stands under does
// not take. CLI11 reports a mistyped option only after its own checks, as
// something else ("--max-size is required" for `cache gc --older-than 30d`,
// "unexpected argument '30d'" for `cache clean --older 30d`), so the words are
// walked here first, the way CLI11 assigns them: options to the deepest
// command named before them, a value after an option that takes one.
std::optional<UnknownOption> first_unknown_option(CLI::App& app, const std::vector<std::string>& args) {
  CLI::App* level = &app;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& token = args[i];
    if (token == "--") break;
    if (token.size() < 2 || token[0] != '-') {
      if (CLI::App* sub = find_subcommand(level, token)) level = sub;
      continue;
    }
    const bool long_option = util::starts_with(token, "--");
    const std::string name = long_option ? option_name(token) : token.substr(0, 2);
    const CLI::Option* opt = option_at(level, name);
    if (!opt) {
      // A negative number is a value, not an option (--timeout -1 is checked by the option).
      if (!long_option && std::isdigit(static_cast<unsigned char>(token[1]))) continue;
      return UnknownOption{name, level};
    }
    const bool attached = long_option ? token.find('=') != std::string::npos : token.size() > 2;
    if (takes_value(opt) && !attached) ++i;
  }
  return std::nullopt;
}

std::string explain_unknown_option(CLI::App& app, const UnknownOption& u) {
  const std::string command = command_path(u.level);
  const std::string help = " (" + command + " --help)";
  if (movable_option(u.name)) return command + " takes no " + u.name + help;
  std::string message = "unknown option '" + u.name + "' for " + command;
  std::vector<std::string> owners;
  commands_with_option(u.level, u.name, owners);
  if (owners.empty() && u.level->get_parent()) commands_with_option(u.level->get_parent(), u.name, owners);
  if (owners.empty()) commands_with_option(&app, u.name, owners);
  if (!owners.empty()) {
    message += ": it is an option of " + util::join(owners, ", ");
    if (owners.size() == 1 && util::starts_with(owners[0], command + " "))
      message += " (write it after '" + owners[0].substr(command.size() + 1) + "')";
    return message + help;
  }
  return message + did_you_mean(u.name, option_spellings(u.level)) + help;
}

// CLI11's messages ("A subcommand is required", "The following arguments were
// not expected: x --y") turned into what happened and what to do.
std::string explain_parse_error(CLI::App& app, const CLI::ParseError& e, const std::vector<std::string>& args) {
  if (auto u = first_unknown_option(app, args)) return explain_unknown_option(app, *u);
  CLI::App* level = selected_command(app);
  const std::string command = command_path(level);
  const std::string help = " (" + command + " --help)";
  const std::string what = e.what();
  std::string unknown;
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    // "The following argument(s) was/were not expected: a b": the first one.
    const size_t colon = what.find(": ");
    if (colon != std::string::npos) unknown = util::split_any(what.substr(colon + 2), " ").at(0);
  } else if (dynamic_cast<const CLI::RequiredError*>(&e) && what.find("subcommand is required") != std::string::npos) {
    unknown = first_unknown_word(level, args);
    if (unknown.empty()) {
      return "missing command: " + command + " needs one of " + util::join(subcommand_names(level), ", ") + help;
    }
  } else {
    return command + ": " + what + help;
  }
  if (!unknown.empty() && unknown[0] == '-') {
    const std::string name = option_name(unknown);
    if (movable_option(name)) return command + " takes no " + name + help;
    return "unknown option '" + name + "' for " + command + did_you_mean(name, option_spellings(level)) + help;
  }
  if (has_subcommands(level))
    return "unknown command '" + unknown + "' for " + command + did_you_mean(unknown, subcommand_names(level)) + help;
  return "unexpected argument '" + unknown + "' for " + command + help;
}

// The top-level app with its commands, options bound into `ctx`.
// `embedded`: inside another program (the engine library): its signal
// dispositions are left alone, and only `build` is registered.
// `only`: the single command to set up (all when null).
void configure_app(CLI::App& app, CommandContext& ctx, const CommandRow* only) {
  app.name("tvmffi-jit");
  app.footer(kExitCodeHelp);
  app.require_subcommand(1);
  app.fallthrough();
  // Counted across the command line: `-v build -v` is -vv.
  app.add_flag_function(
      "-v,--verbose", [&](std::int64_t n) { ctx.global.verbosity += static_cast<int>(n); },
      "Show every command (-vv: debug log); accepted anywhere on the command line");
  app.add_flag_function(
      "-q,--quiet", [&](std::int64_t n) { ctx.global.quiet += static_cast<int>(n); },
      "No progress or info messages on stderr: warnings (one line each), errors and compiler output only;\n"
      "-qq: errors and compiler output only. Accepted anywhere on the command line");
  // No probing here: `doctor` reports the toolchain.
  app.set_version_flag("--version", std::string("tvmffi-jit ") + TVMFFI_JIT_VERSION,
                       "Print tvmffi-jit's version (`tvmffi-jit doctor` reports tvm-ffi, nvcc and the driver)");
  // Re-initialise once -v/-q are known; this runs before any subcommand callback.
  app.parse_complete_callback([&] {
    util::init_logging(ctx.global.verbosity, ctx.global.quiet);
    util::Progress::global().configure(status_line_options(ctx.global.quiet > 0, ctx.environment));
  });
  // Embedded, the engine library serves `build` only (the Python package's
  // in-process hits); a command line that names one command gets only that
  // one: setting up the others' options was a fifth of the CPU time of a hit.
  if (only) only->reg(app, ctx);
  else
    for (const CommandRow& row : kCommands) row.reg(app, ctx);
}

// The app and context the engine library parses every call with: setting
// up CLI11's options was most of an in-process hit's CPU time after the
// cache's own checks. Kept only while calls end normally: a parse error,
// --help or an exception may leave values bound from a half-parsed command
// line, so the next call builds a new one. Guarded by the engine lock
// (src/cli/engine.cpp); a forked child inherits it idle.
struct EmbeddedApp {
  CommandContext ctx;
  CLI::App app{kAbout};
  EmbeddedApp() {
    ctx.embedded = true;
    static const CommandRow build{"build", register_build_command};
    configure_app(app, ctx, &build);
  }
};
std::unique_ptr<EmbeddedApp> embedded_app;

int parse_and_run(CLI::App& app, CommandContext& ctx, int argc, char** argv, bool* clean) {
  *clean = false;
  const std::vector<std::string> args = place_global_options(app, argc, argv);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last-first
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_diagnostic("error", explain_parse_error(app, e, args));
    return static_cast<int>(ExitCode::kUsage);
  } catch (const Error& e) {
    print_diagnostic("error", e.what());
    // Stopped by a signal: 128 + its number, whichever error the unwinding raised first.
    if (int sig = util::termination_signal()) return 128 + sig;
    return e.exit_code();
  } catch (const std::exception& e) {
    print_diagnostic("internal error", e.what());
    return static_cast<int>(ExitCode::kIo);
  }
  *clean = true;
  return ctx.exit_code;
}

int run_program(int argc, char** argv, bool embedded) {
  // The environment, read here once for every command (and again for every
  // call of the engine library: its caller may have changed it in between).
  CommandEnvironment environment = resolve_command_environment(toolchain::process_environment());
  apply_process_settings(environment);
  if (!embedded) util::install_termination_handlers();  // children never outlive a Ctrl-C (util/process.h)
  util::init_logging(0, 0);
  if (!embedded) {
    CommandContext ctx;
    ctx.embedded = false;
    ctx.environment = std::move(environment);
    CLI::App app{kAbout};
    configure_app(app, ctx, only_command_named(argc, argv));
    bool clean = false;
    return parse_and_run(app, ctx, argc, argv, &clean);
  }
  if (!embedded_app) embedded_app = std::make_unique<EmbeddedApp>();
  EmbeddedApp& e = *embedded_app;
  e.app.clear();
  e.ctx.global = GlobalOptions{};
  e.ctx.exit_code = 0;
  e.ctx.environment = std::move(environment);
  bool clean = false;
  const int code = parse_and_run(e.app, e.ctx, argc, argv, &clean);
  if (!clean) embedded_app.reset();
  return code;
}

}  // namespace

int run(int argc, char** argv) { return run_program(argc, argv, false); }

EmbeddedResult run_embedded(const std::vector<std::string>& args) {
  std::vector<std::string> storage;
  storage.reserve(args.size() + 1);
  storage.push_back("tvmffi-jit");
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  EmbeddedResult result;
  CapturedOutput captured;
  capture_output(&captured);
  util::redirect_logging(&captured.err);
  try {
    result.exit_code = run_program(static_cast<int>(storage.size()), argv.data(), true);
  } catch (...) {
    result.exit_code = static_cast<int>(ExitCode::kIo);
    captured.err += "tvmffi-jit: internal error: unexpected exception\n";
  }
  capture_output(nullptr);
  util::redirect_logging(nullptr);
  util::init_logging(0, 0);  // the logger must not keep pointing at `captured`
  result.out = std::move(captured.out);
  result.err = std::move(captured.err);
  return result;
}

}  // namespace tvmffi_jit::cli
