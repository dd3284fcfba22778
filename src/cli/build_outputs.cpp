#include "build_outputs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "tvmffi_jit/compile/compile_commands.h"
#include "tvmffi_jit/compile/depfile.h"
#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cli {

namespace {

// PATH, or PATH/<artifact file name> when PATH is a directory or ends in '/', as cp does.
std::string destination_for(const std::string& path, const std::string& artifact_path) {
  if (util::ends_with(path, "/") || util::is_directory(path)) {
    return util::join_path(path, util::file_name(artifact_path));
  }
  return path;
}

void make_parent(const std::string& path) {
  const std::string dir = util::parent_path(util::absolute_path(path));
  if (!dir.empty()) util::make_directories(dir);
}

// A copy, not a hard link: the caller may strip or patch its copy, and that
// must never reach the cache entry. write_file_atomic gives the file a fresh
// mtime, which Make and Ninja compare with the depfile's inputs.
void copy_artifact(const std::string& artifact_path, const std::string& destination) {
  if (util::absolute_path(destination) == util::absolute_path(artifact_path)) return;
  struct stat st;
  unsigned mode = 0644;
  if (::stat(artifact_path.c_str(), &st) == 0) mode = st.st_mode & 07777;
  make_parent(destination);
  util::write_file_atomic(destination, util::read_file(artifact_path), mode);
}

// symlink(2) to a unique name beside `link`, then rename over it: readers see
// the old link or the new one.
void link_artifact(const std::string& artifact_path, const std::string& link) {
  make_parent(link);
  const std::string temp = link + ".tmp." + util::unique_name_suffix();
  if (::symlink(util::absolute_path(artifact_path).c_str(), temp.c_str()) != 0) {
    throw io_error(errno_message("cannot create symbolic link " + temp, errno));
  }
  if (::rename(temp.c_str(), link.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    throw io_error(errno_message("cannot replace " + link, err));
  }
}

}  // namespace

void add_build_output_options(CLI::App& cmd, BuildOutputOptions& options) {
  cmd.add_option("-o,--output", options.output,
                 "Also copy the artifact to PATH (atomically; into it if PATH is a directory) and print PATH")
      ->group("Build-system integration");
  cmd.add_option("--link-to", options.link_to, "Point the symbolic link PATH at the artifact (replaced atomically)")
      ->group("Build-system integration");
  cmd.add_option("--depfile", options.depfile,
                 "Write a Make-style depfile: the artifact (or --output) depends on the manifest, sources, embedded\n"
                 "files and every header the compilers read")
      ->group("Build-system integration");
  cmd.add_option("--compile-commands", options.compile_commands,
                 "Add this build's compile commands to the compile_commands.json FILE (for clangd)")
      ->group("Build-system integration");
}

std::string write_build_outputs(const BuildOutputOptions& options, const compile::Manifest& manifest,
                                const compile::BuildPlan& plan, const compile::BuildResult& result,
                                const std::string& cache_entry_dir) {
  const std::string& artifact_path = result.artifact_path;
  std::string shown = artifact_path;
  // The depfile's target is the path the build system asked for, spelled as
  // it was given: ninja matches it textually against the edge's output.
  std::string depfile_target = artifact_path;
  if (!options.output.empty()) {
    const std::string destination = destination_for(options.output, artifact_path);
    copy_artifact(artifact_path, destination);
    shown = util::absolute_path(destination);
    depfile_target = destination;
  }
  if (!options.link_to.empty()) {
    link_artifact(artifact_path, destination_for(options.link_to, artifact_path));
  }
  if (!options.depfile.empty()) {
    std::vector<std::string> recorded_headers;
    if (!cache_entry_dir.empty()) {
      auto entry = cache::read_entry(cache_entry_dir);
      if (!entry)
        throw io_error("cannot write the depfile: the cache entry " + cache_entry_dir + " is unreadable: " + entry.why());
      for (const auto& header : (*entry)->headers) recorded_headers.push_back(header.path);
    }
    compile::write_depfile(options.depfile, {depfile_target}, compile::build_inputs(manifest, result, recorded_headers));
  }
  if (!options.compile_commands.empty()) {
    const std::string directory =
        manifest.manifest_path.empty() ? util::current_directory() : util::parent_path(manifest.manifest_path);
    compile::update_compile_commands(options.compile_commands, compile::plan_compile_commands(plan, manifest, directory));
  }
  return shown;
}

}  // namespace tvmffi_jit::cli
