#include "compile/module_reads.h"

#include <algorithm>

#include "compile/freshness.h"
#include "compile/include_probes.h"
#include "compile/search_dirs.h"
#include "tvmffi_jit/compile/nvrtc_includes.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// What an NVRTC compile read and whether it can be keyed.
struct NvrtcReads {
  std::vector<cache::HeaderRecord> headers;
  std::optional<std::string> unkeyable;
};

// Where a scanned #include or __has_include would have found a header that
// appearing later changes the compile: the unresolved #include lines' and
// __has_include's candidates, in the dirs the scan searched.
IncludeProbes nvrtc_include_probes(const NvrtcRequest& r, const IncludeScan& scan, const std::string& build_dir) {
  IncludeProbes probes;
  for (const auto& u : scan.unresolved) {
    // "<file>:<line>: <name>[ (with N pre-include lines)]"
    size_t sep = u.find(": ");
    if (sep == std::string::npos) continue;
    std::string name = u.substr(sep + 2);
    if (size_t with = name.find(" (with "); with != std::string::npos) name.resize(with);
    const std::string file = u.substr(0, u.find(':'));
    add_candidates(name, file.empty() || file[0] != '/' ? std::string() : util::parent_path(file), scan.include_dirs,
                   build_dir, probes);
  }
  // Where the scan searched: the request's include paths and the -I options, as NVRTC opens them.
  add_has_include_probes(r.source_name.empty() ? "source.cu" : r.source_name, r.source, scan.include_dirs, build_dir,
                         probes);
  for (const auto& f : scan.files)
    if (auto text = util::read_small_file(f, 16ull << 20))
      add_has_include_probes(f, *text, scan.include_dirs, build_dir, probes);
  return probes;
}

// NVRTC writes no depfile: the headers its #include lines reach (a superset;
// toolkit headers are covered by the NVRTC identity). What the scan cannot
// follow changes the compile without changing the key: a computed #include
// is not keyable; an #include or __has_include that found nothing is
// recorded as absent candidates (one appearing is a miss), one that found a
// header records it. `unkeyable`: the module's reason so far.
NvrtcReads nvrtc_reads(const BuildPlan& plan, const BuildResult& build, const CachedBuildOptions& options,
                       std::optional<std::string> unkeyable) {
  const NvrtcRequest& r = plan.nvrtc->request;
  IncludeScan scan = nvrtc_includes(r);
  if (!scan.complete() && options.exec.verbose)
    spdlog::info("cache: {}: includes not followed: {}", plan.name,
                 util::join(scan.computed.empty() ? scan.unresolved : scan.computed, ", "));
  NvrtcReads reads{cache::hash_headers(scan.files, build.build_dir, {build.build_dir}, {}), std::move(unkeyable)};
  if (!scan.computed.empty())
    reads.unkeyable = "NVRTC source with a computed #include (" + util::join(scan.computed, ", ") +
                      "): what it reads cannot be keyed";
  IncludeProbes probes = nvrtc_include_probes(r, scan, build.build_dir);
  if (!probes.found.empty())
    cache::merge_headers(reads.headers, cache::hash_headers(probes.found, build.build_dir, {build.build_dir}, {}));
  if (!probes.absent.empty()) {
    if (reads.headers.empty()) {
      // Absent candidates are kept as a record's shadows, and there is no record to keep them on.
      if (!reads.unkeyable) reads.unkeyable = "NVRTC probes headers that do not exist and reads no header to record them on";
    } else {
      auto& shadows = reads.headers.front().shadows;
      for (const auto& p : probes.absent)
        if (std::find(shadows.begin(), shadows.end(), p) == shadows.end()) shadows.push_back(p);
    }
  }
  if (probes.unkeyable && !reads.unkeyable) reads.unkeyable = probes.unkeyable;
  return reads;
}

// What the linker read, recorded like headers (a rebuilt libdep.a behind
// -L/-l must miss), with the libraries that would shadow them; or why it
// cannot be recorded: a linker that wrote no list leaves nothing to check.
Expected<std::vector<cache::HeaderRecord>> link_reads(const BuildPlan& plan, const BuildResult& build,
                                                      const cache::DigestMemo& digests,
                                                      const CachedBuildOptions& options) {
  if (!build.link_dependencies)
    return Unexpected{"the linker wrote no " + plan.link->depfile_name + " (-Wl,--dependency-file, GNU ld 2.35+, "
                      "gold or lld), so the libraries it read cannot be checked on a hit"};
  std::vector<cache::HeaderRecord> linked =
      cache::hash_headers(*build.link_dependencies, build.build_dir, {build.build_dir}, {}, digests);
  record_library_shadows(linked, library_search_dirs(*plan.link, build.build_dir, *options.environment));
  return linked;
}

// A source of a step compiled now that changed after the key was computed.
std::optional<std::string> source_changed_since_key(const BuildPlan& plan, int64_t key_start_ns) {
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
    for (const auto& step : *steps)
      if (!step.generated_text && changed_since(step.input_path, key_start_ns)) return step.input_path;
  return std::nullopt;
}

}  // namespace

ModuleReads record_module_reads(const BuildPlan& plan, const BuildResult& build, const UnitCache& units,
                                const cache::DigestMemo& digests, const CachedBuildOptions& options, int64_t build_start_ns,
                                int64_t key_start_ns) {
  std::optional<std::string> moved_header;
  std::optional<std::string> unkeyable = units.unkeyable();
  std::vector<cache::HeaderRecord> headers = units.headers();  // everything the module's units read
  if (plan.nvrtc) {
    NvrtcReads nvrtc = nvrtc_reads(plan, build, options, std::move(unkeyable));
    unkeyable = std::move(nvrtc.unkeyable);
    cache::merge_headers(headers, nvrtc.headers);
    moved_header = header_changed_during_build(nvrtc.headers, build_start_ns);
  }
  std::optional<std::string> unrecorded_link;
  if (plan.link && !plan.link->depfile_name.empty()) {
    auto linked = link_reads(plan, build, digests, options);
    if (!linked) {
      unrecorded_link = linked.why();
    } else {
      if (!moved_header) moved_header = header_changed_during_build(*linked, build_start_ns);
      cache::merge_headers(headers, *linked);
    }
  }
  // Objects reused from the cache were checked against their recorded
  // headers; a header of a unit compiled now that moved during the build may
  // have been read in its old state.
  if (!moved_header) moved_header = units.moved_header();
  if (!moved_header) moved_header = source_changed_since_key(plan, key_start_ns);
  return {std::move(headers), std::move(moved_header), std::move(unrecorded_link), std::move(unkeyable)};
}

}  // namespace tvmffi_jit::compile
