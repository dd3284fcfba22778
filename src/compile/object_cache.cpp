#include "compile/object_cache.h"

#include <unistd.h>

#include <algorithm>

#include "compile/adoptable_roots.h"
#include "compile/compiler_output.h"
#include "compile/include_probes.h"
#include "compile/freshness.h"
#include "compile/module_key.h"
#include "compile/search_dirs.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/log.h"

namespace tvmffi_jit::compile {

namespace {

// Hard link when possible (the staging dir and the store share a filesystem),
// else copy.
void place_file(const std::string& from, const std::string& to) {
  util::remove_all(to);
  if (::link(from.c_str(), to.c_str()) == 0) return;
  util::write_file(to, util::read_file(from));
}

}  // namespace

UnitCache::UnitCache(const BuildPlan& plan, const Manifest& m, const toolchain::Toolchain& tc,
                     cache::EntryStorage& storage, CompilerIdentities& ids, const CachedBuildOptions& options,
                     bool reuse_objects)
    : storage_(storage), options_(options), reuse_objects_(reuse_objects) {
  // A signing build links only objects it compiled itself (cache/trust.h).
  if (const cache::TrustPolicy* p = storage.trust_policy()) policy_.sign_key = p->sign_key;
  toolchain_roots_ = toolchain_roots(plan, tc);
  // Keys are computed up front, on this thread: compiler identities are
  // memoised in `ids`, which the workers must not share.
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
    for (const auto& step : *steps) {
      Unit u;
      if (reuse_objects_) {
        cache::Key key =
            compute_object_key(object_key_inputs(step, m, tc, ids, *options.environment), options.keep_key_trace);
        if (options.keep_key_trace)
          spdlog::debug("cache: object key of {}: {}, hashed from:\n{}", step.display, key.hex, key.trace);
        u.key = key.hex;
      }
      units_.push_back(std::move(u));
    }
}

void UnitCache::count(uint64_t cache::StatsCounters::*counter, size_t* ours) {
  cache::StatsCounters one;
  one.*counter = 1;
  storage_.count(one);
  if (!ours) return;
  std::lock_guard<std::mutex> lock(mutex_);
  ++*ours;
}

compile::CompileHooks UnitCache::hooks() {
  compile::CompileHooks h;
  h.before_compile = [this](const UnitRef& ref, const std::string& dir) { return before_compile(ref, dir); };
  h.after_compile = [this](const UnitRef& ref, const std::string& dir, const CommandRecord& rec) {
    after_compile(ref, dir, rec);
  };
  return h;
}

std::vector<cache::ObjectRecord> UnitCache::objects() const {
  std::vector<cache::ObjectRecord> all;
  if (!reuse_objects_) return all;
  for (const auto& u : units_)
    if (!u.sha256.empty()) all.push_back({u.key, u.sha256});
  return all;
}

std::vector<cache::HeaderRecord> UnitCache::headers() const {
  std::vector<cache::HeaderRecord> all;
  for (const auto& u : units_) cache::merge_headers(all, u.headers);
  return all;
}

std::optional<CommandRecord> UnitCache::before_compile(const UnitRef& ref, const std::string& dir) {
  Unit& u = units_.at(ref.index);
  u.start_ns = now_ns();
  if (!reuse_objects_ || options_.force) return std::nullopt;
  // Objects are re-hashed before they are linked (find_object): a same-size
  // corruption would otherwise spread into every module linked from them.
  // A signing build links only objects it compiled itself (cache/trust.h).
  auto look = [&] {
    cache::LookupResult found = storage_.find_object(u.key);
    if (found.hit && policy_.active()) {
      if (auto why = policy_.refuses(*found.entry)) {
        found.hit = false;
        found.miss_reason = "not trusted: " + *why;
      }
    }
    return found;
  };
  cache::LookupResult r = look();
  spdlog::debug("cache: object of {}: {}", ref.step.display, r.hit ? "hit in " + r.entry_dir : "miss (" + r.miss_reason + ")");
  // Another module of a batch compiling this very unit now: wait for it and
  // take its object from the store (compile here only if it did not store one).
  while (!r.hit && options_.in_flight) {
    u.claim = options_.in_flight->claim(u.key);
    // Whoever held the key may have stored the object, also just before
    // this claim: look again either way.
    r = look();
    if (u.claim.owned()) break;
  }
  if (r.hit) u.claim = {};  // nothing to compile: let waiters look it up
  if (!r.hit) return std::nullopt;  // a corrupt one was counted by find_object
  const CompileStep& step = ref.step;
  if (step.generated_text)  // later steps (embed, link) may read generated files
    util::write_file(util::join_path(dir, step.generated_name), *step.generated_text);
  place_file(r.artifact_path(), util::join_path(dir, step.object_name));
  ref.unit.object_path = util::join_path(dir, step.object_name);
  for (const auto& h : r.entry->headers) ref.unit.dependencies.push_back(h.path);
  u.headers = r.entry->headers;
  u.sha256 = r.entry->artifacts.front().sha256;
  if (options_.exec.verbose) spdlog::info("reusing the cached object of {}", step.display);
  CommandRecord rec;
  rec.description = "reused the cached object of " + step.display;
  rec.output = capped_output(r.entry->compiler_output);
  count(&cache::StatsCounters::object_hits, &reused_);
  return rec;
}

void UnitCache::after_compile(const UnitRef& ref, const std::string& dir, const CommandRecord& rec) {
  Unit& u = units_.at(ref.index);
  u.headers = cache::hash_headers(ref.unit.dependencies, dir, {dir}, {}, storage_.digest_memo());
  const std::vector<std::string> search = include_search_dirs(ref.step, dir, *options_.environment);
  record_shadows(u.headers, search);
  const Expected<void> keyable = record_include_probes(ref.step, dir, search, u.headers);
  if (!keyable) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!unkeyable_) unkeyable_ = keyable.why();
  }
  std::optional<std::string> moved = header_changed_during_build(u.headers, u.start_ns);
  if (moved) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!moved_) moved_ = moved;
  }
  if (rec.launcher_fallback) count(&cache::StatsCounters::launcher_fallbacks);
  if (!reuse_objects_) return;
  u.sha256 = util::sha256_file_hex(ref.unit.object_path);
  count(&cache::StatsCounters::object_misses, &compiled_);
  if (storage_.writable() && !moved && keyable) store_object(ref.step, u.key, ref.unit, u.headers, rec);
  u.claim = {};  // stored (or not storable): units waiting for it look it up now
}

Expected<void> UnitCache::record_include_probes(const CompileStep& step, const std::string& dir,
                                                const std::vector<std::string>& search,
                                                std::vector<cache::HeaderRecord>& headers) {
  std::vector<std::string> files;
  if (!step.generated_text && !step.input_path.empty()) files.push_back(util::opened_path(step.input_path));
  for (const auto& h : headers) files.push_back(h.path);
  IncludeProbes probes = has_include_probes(files, search, toolchain_roots_, dir);
  // Inline sources are generated text, written into the build dir: scanned
  // as that file (its own folder, the build dir, is not searched).
  if (step.generated_text)
    add_has_include_probes(util::join_path(dir, step.generated_name), *step.generated_text, search, dir, probes);
  if (!probes.found.empty())
    cache::merge_headers(headers, cache::hash_headers(probes.found, dir, {dir}, {}, storage_.digest_memo()));
  if (probes.unkeyable) return Unexpected{*probes.unkeyable};
  if (!probes.absent.empty()) {
    // "Did not exist, and would have changed the compile": a shadow, on any record.
    if (headers.empty()) return Unexpected{std::string("__has_include probes in a unit that read no header")};
    auto& shadows = headers.front().shadows;
    for (const auto& p : probes.absent)
      if (std::find(shadows.begin(), shadows.end(), p) == shadows.end()) shadows.push_back(p);
  }
  return {};
}

void UnitCache::store_object(const CompileStep& step, const std::string& key, const CompiledUnit& unit,
                             const std::vector<cache::HeaderRecord>& headers, const CommandRecord& rec) {
  try {
    cache::Staging s = storage_.stage();
    std::string name = util::file_name(step.object_name);
    std::string copy = util::join_path(s.build_dir(), name);
    place_file(unit.object_path, copy);
    cache::EntryRecord entry;
    entry.kind = "object";
    entry.name = step.display;
    entry.key = key;
    entry.headers = headers;
    entry.inputs = {{"language", language_name(step.language)},
                    {"compiler", step.compiler},
                    {"source", step.generated_text ? step.generated_name : step.input_path}};
    entry.compiler_output = capped_output(rec.output);
    if (policy_.sign_key) {
      auto stamp = util::file_stamp(copy);
      if (!stamp) throw io_error("cannot stat " + copy);
      entry.artifacts = {{name, stamp->size, util::sha256_file_hex(copy), {}}};
    }
    entry.provenance = cache::built_provenance(entry, policy_.sign_key);
    // --force replaces what is there; a signing build replaces what it would not link.
    cache::KeepOccupant keep;
    if (options_.force) keep = [](const cache::EntryRecord&) { return false; };
    else if (policy_.active()) keep = [this](const cache::EntryRecord& e) { return !policy_.refuses(e); };
    storage_.publish_object(s, key, std::move(entry), {{copy, name}}, keep);  // counted there
  } catch (const Error& e) {
    spdlog::warn("could not cache the object of {}: {}", step.display, e.what());
  }
}

}  // namespace tvmffi_jit::compile
