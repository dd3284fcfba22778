#include "tvmffi_jit/compile/compile_commands.h"

#include <unordered_set>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// Splits a "command" string the way the compilation-database spec asks:
// blanks separate arguments, '\' escapes, double and single quotes group.
std::vector<std::string> split_command(const std::string& command) {
  std::vector<std::string> args;
  std::string current;
  bool in_arg = false;
  char quote = 0;
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < command.size()) {
        current.push_back(command[++i]);
      } else {
        current.push_back(c);
      }
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in_arg = true;
    } else if (c == '\\' && i + 1 < command.size()) {
      current.push_back(command[++i]);
      in_arg = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_arg) args.push_back(std::move(current));
      current.clear();
      in_arg = false;
    } else {
      current.push_back(c);
      in_arg = true;
    }
  }
  if (in_arg) args.push_back(std::move(current));
  return args;
}

nlohmann::json to_json(const CompileCommand& command) {
  nlohmann::json entry = nlohmann::json::object();
  entry["directory"] = command.directory;
  entry["arguments"] = command.arguments;
  entry["file"] = command.file;
  if (!command.output.empty()) entry["output"] = command.output;
  return entry;
}

// The file an entry is for, as an absolute path, so "a.cu" relative to its
// directory and "/src/a.cu" are recognised as the same translation unit.
std::string entry_file(const CompileCommand& command) {
  if (!command.file.empty() && command.file[0] == '/') return util::absolute_path(command.file);
  return util::absolute_path(util::join_path(command.directory, command.file));
}

}  // namespace

std::string format_compile_commands(const std::vector<CompileCommand>& commands) {
  nlohmann::json db = nlohmann::json::array();
  for (const auto& command : commands) db.push_back(to_json(command));
  return util::dump_json(db, 2) + "\n";
}

std::vector<CompileCommand> parse_compile_commands(const std::string& text, const std::string& origin) {
  nlohmann::json db;
  try {
    db = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw io_error(origin + ": not a compilation database: " + e.what());
  }
  if (!db.is_array()) throw io_error(origin + ": not a compilation database: expected a JSON array");
  std::vector<CompileCommand> commands;
  for (size_t i = 0; i < db.size(); ++i) {
    const auto& entry = db[i];
    const std::string where = origin + ": entry " + std::to_string(i);
    if (!entry.is_object() || !entry.contains("directory") || !entry.contains("file") ||
        !entry["directory"].is_string() || !entry["file"].is_string()) {
      throw io_error(where + ": expected an object with string \"directory\" and \"file\"");
    }
    CompileCommand command;
    command.directory = entry["directory"].get<std::string>();
    command.file = entry["file"].get<std::string>();
    if (entry.contains("output") && entry["output"].is_string()) command.output = entry["output"].get<std::string>();
    if (entry.contains("arguments") && entry["arguments"].is_array()) {
      for (const auto& arg : entry["arguments"]) {
        if (!arg.is_string()) throw io_error(where + ": \"arguments\" must hold strings");
        command.arguments.push_back(arg.get<std::string>());
      }
    } else if (entry.contains("command") && entry["command"].is_string()) {
      command.arguments = split_command(entry["command"].get<std::string>());
    } else {
      throw io_error(where + ": expected \"arguments\" (array) or \"command\" (string)");
    }
    commands.push_back(std::move(command));
  }
  return commands;
}

void update_compile_commands(const std::string& path, const std::vector<CompileCommand>& commands) {
  std::vector<CompileCommand> merged;
  std::unordered_set<std::string> replaced;
  for (const auto& command : commands) replaced.insert(entry_file(command));
  if (auto existing = util::try_read_file(path); existing && !util::trim(*existing).empty()) {
    for (auto& old : parse_compile_commands(*existing, path)) {
      if (!replaced.count(entry_file(old))) merged.push_back(std::move(old));
    }
  }
  merged.insert(merged.end(), commands.begin(), commands.end());
  const std::string dir = util::parent_path(util::absolute_path(path));
  if (!dir.empty()) util::make_directories(dir);
  util::write_file_atomic(path, format_compile_commands(merged));
}

std::vector<CompileCommand> plan_compile_commands(const BuildPlan& plan, const Manifest& manifest,
                                                  const std::string& directory) {
  std::vector<CompileCommand> commands;
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps}) {
    for (const auto& step : *steps) {
      std::string file = step.input_path;
      if (step.generated_text) {
        file.clear();
        for (const auto& source : manifest.sources) {
          if (step.generated_text->find("#include \"" + source + "\"") != std::string::npos) {
            file = source;
            break;
          }
        }
      }
      if (file.empty()) continue;  // inline code: no file of the user's to describe
      std::vector<std::string> argv = step.argv();
      const std::string given_input = step.compiler_input();
      for (auto& arg : argv) {
        if (arg == given_input) arg = file;
      }
      commands.push_back({directory, std::move(argv), file, ""});
    }
  }
  return commands;
}

}  // namespace tvmffi_jit::compile
