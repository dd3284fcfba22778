// tvmffi-jit cache path | list | show NAME_OR_KEY | verify [--remove] |
//                  clean [--older-than DURATION] | gc --max-size SIZE | stats [--zero] |
//                  export FILE [ENTRY...] [--sign-key FILE] | import FILE |
//                  keygen NAME --out DIR
//
// Every subcommand takes --cache-dir and --json. Exit codes: 0 ok; 3 `verify`
// found bad entries (even when it removed them); 2 usage (no entry matches
// `show`, malformed size/duration, a bare number without a unit); 5 the root is
// unsafe or unreadable, or a deleting command (clean, gc, verify --remove,
// stats --zero) was pointed at a root without tvmffi-jit's markers.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <ctime>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "build_request.h"
#include "output.h"
#include "tvmffi_jit/cache/maintenance.h"
#include "tvmffi_jit/cache/trust.h"
#include "tvmffi_jit/cache/remote/options.h"
#include "tvmffi_jit/cache/transfer/signing.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/cache/transfer/transfer.h"
#include "tvmffi_jit/cli/commands.h"
#include "tvmffi_jit/toolchain/compiler_identity.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cli {

namespace {

struct CacheArgs {
  std::string cache_dir;
  bool json = false;
  std::string show_what;
  bool verify_remove = false;
  std::string older_than;
  std::string max_size;
  bool zero = false;
  std::string transfer_file;                 // export/import FILE
  std::vector<std::string> export_entries;   // export: names, entry dirs or key prefixes
  std::string sign_key;                      // export --sign-key FILE
  std::vector<std::string> trusted_keys;     // verify --trusted-key FILE...
  std::string key_name;                      // keygen NAME
  std::string key_out_dir;                   // keygen --out DIR
  const CommandEnvironment* environment = nullptr;  // cli::run()'s, set at registration
};

void out(const std::string& s) { print_result(s); }

// Every --json object: share/tvmffi-jit/cache.schema.json, whose version this
// is; `command` says which of its shapes the object has.
constexpr int kCacheJsonSchemaVersion = 1;

void out_json(const char* command, nlohmann::json j) {
  j["schema_version"] = kCacheJsonSchemaVersion;
  j["command"] = command;
  out(util::dump_json(j, 2) + "\n");
}

std::string root_path(const CacheArgs& a) { return cache::resolve_root_path(a.cache_dir, a.environment->cache_root); }
std::string root_to_open(const CacheArgs& a) { return cache_root_to_open(a.cache_dir, a.environment->cache_root); }

// Maintenance never creates a root; a missing one is simply empty.
cache::Store open_store(const CacheArgs& a) { return cache::Store(cache::open_root(root_to_open(a), false)); }

// For commands that delete: the root must carry tvmffi-jit's markers
// (cache/root.h). nullopt when the root does not exist (nothing to delete).
std::optional<cache::Store> open_store_to_delete(const CacheArgs& a) {
  cache::CacheRoot root = cache::open_root(root_to_open(a), false);
  if (!cache::require_marked_root(root)) return std::nullopt;
  return cache::Store(std::move(root));
}

// A bare number is refused: `--older-than 3` read as 3 seconds and
// `--max-size 10` as 10 bytes surprised everyone who meant days or GiB.
bool ends_with_unit(const std::string& text) {
  std::string_view t = util::trim(text);
  return !t.empty() && std::isalpha(static_cast<unsigned char>(t.back()));
}

std::string format_time(int64_t t) {
  if (t <= 0) return "-";
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json info_json(const cache::EntryInfo& e, bool full) {
  nlohmann::json j = {{"dir", e.dir}, {"kind", e.is_object ? "object" : "module"}, {"bytes", e.bytes},
                      {"last_used", e.last_used}};
  if (e.entry) {
    j["name"] = e.entry->name;
    j["key"] = e.entry->key;
    j["created"] = e.entry->created;
    j["artifacts"] = nlohmann::json::array();
    for (const auto& a : e.entry->artifacts)
      j["artifacts"].push_back({{"file", a.file}, {"path", e.dir + "/" + a.file}, {"size", a.size}, {"sha256", a.sha256}});
    if (full) j["entry"] = cache::entry_to_json(*e.entry);
  } else {
    j["problem"] = e.problem;
  }
  return j;
}

void run_path(const CacheArgs& a) {
  std::string root = root_path(a);
  if (a.json) out_json("path", {{"path", root}});
  else out(root + "\n");
}

void run_list(const CacheArgs& a) {
  cache::Store store = open_store(a);
  auto entries = cache::list_entries(store.root(), false);
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& e : entries) arr.push_back(info_json(e, false));
    out_json("list", {{"root", store.root()}, {"entries", arr}});
    return;
  }
  // A header row and aligned columns (the last one, the artifact, unpadded);
  // scripts read --json.
  std::vector<std::vector<std::string>> rows = {{"NAME", "KEY", "SIZE", "LAST USED", "ARTIFACT"}};
  for (const auto& e : entries) {
    std::string name = e.entry ? e.entry->name : "?";
    // A result as "<key16>/<result16>" (several per key), an old-layout entry as "<key16>".
    std::string key = e.dir_name.substr(e.dir_name.find('_') == std::string::npos ? 0 : e.dir_name.rfind('_') + 1);
    std::string artifact = e.entry ? e.entry->artifacts.front().file : "(" + e.problem + ")";
    rows.push_back({name, key, util::format_bytes(e.bytes), format_time(e.last_used), artifact});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::string text;
  for (const auto& r : rows) {
    for (size_t c = 0; c + 1 < r.size(); ++c)
      text += (c == 2 ? util::pad_left(r[c], width[c]) : util::pad_right(r[c], width[c])) + "  ";
    text += r.back() + "\n";
  }
  out(text);
}

void run_show(const CacheArgs& a) {
  cache::Store store = open_store(a);
  auto found = cache::find_entries(store.root(), a.show_what);
  if (found.empty())
    throw usage_error("no cache entry matches '" + a.show_what + "' in " + store.root() +
                      " (give a module name, an entry directory name or at least 4 hex digits of a key)");
  if (a.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& e : found) arr.push_back(info_json(e, true));
    out_json("show", {{"root", store.root()}, {"entries", arr}});
    return;
  }
  for (const auto& e : found) {
    out(e.dir + "\n");
    if (!e.entry) {
      out("  problem: " + e.problem + "\n");
      continue;
    }
    const auto& r = *e.entry;
    out("  kind: " + r.kind + "\n  name: " + r.name + "\n  key: " + r.key + "\n  tool version: " + r.tool_version +
        "\n  created: " + format_time(r.created) + "\n  last used: " + format_time(e.last_used) + "\n");
    for (const auto& art : r.artifacts)
      out("  artifact: " + art.file + " (" + std::to_string(art.size) + " bytes, sha256 " + art.sha256 + ")\n");
    out("  headers: " + std::to_string(r.headers.size()) + "\n");
    for (const auto& h : r.headers) out("    " + h.path + "\n");
    if (!r.inputs.empty()) out("  inputs: " + util::dump_json(r.inputs) + "\n");
    // Who made it (cache/trust.h): "built", "adopted" (from where), "imported", or nothing recorded.
    const std::string origin = cache::provenance_origin(r);
    out("  provenance: " + (origin.empty() ? std::string("none recorded") : origin) +
        (r.provenance.contains("source") ? " from " + r.provenance.value("source", std::string()) : "") + "\n");
    if (!r.compiler_output.empty()) out("  compiler output:\n" + r.compiler_output + (r.compiler_output.back() == '\n' ? "" : "\n"));
  }
}

int run_verify(const CacheArgs& a) {
  std::optional<cache::Store> deletable;
  if (a.verify_remove) deletable = open_store_to_delete(a);
  cache::Store store = deletable ? std::move(*deletable) : open_store(a);
  // The keys as a build would trust them ($TVMFFI_JIT_REMOTE_TRUSTED_KEYS
  // when --trusted-key is not given).
  cache::RemoteOptions keys;
  keys.trusted_key_files = a.trusted_keys;
  keys = remote_options_from_environment(keys, false, a.environment->env);
  cache::TrustPolicy policy;
  policy.trusted = keys.trusted_keys;
  auto report = cache::verify_cache(store, a.verify_remove, policy.active() ? &policy : nullptr);
  if (a.json) {
    nlohmann::json bad = nlohmann::json::array();
    for (const auto& p : report.problems) {
      bad.push_back({{"dir", p.dir}, {"problem", p.problem}, {"removed", p.removed}});
      if (!p.kept_why.empty()) bad.back()["kept"] = p.kept_why;
    }
    out_json("verify", {{"root", store.root()}, {"checked", report.checked}, {"bad", bad}});
  } else {
    for (const auto& p : report.problems)
      out("bad: " + p.dir + ": " + p.problem + (p.removed ? " (removed)" : "") +
          (p.kept_why.empty() ? "" : " (" + p.kept_why + ")") + "\n");
    out("checked " + std::to_string(report.checked) + " entries, " + std::to_string(report.problems.size()) + " bad\n");
  }
  return report.problems.empty() ? 0 : static_cast<int>(ExitCode::kInvalid);
}

void print_clean(const char* command, const CacheArgs& a, const cache::Store& store, const cache::CleanReport& r) {
  if (a.json) {
    out_json(command, {{"root", store.root()},
              {"entries_removed", r.entries_removed},
              {"bytes_removed", r.bytes_removed},
              {"temporaries_removed", r.temporaries_removed},
              {"bytes_kept", r.bytes_kept}});
  } else {
    out("removed " + std::to_string(r.entries_removed) + " entries (" + util::format_bytes(r.bytes_removed) + ") and " +
        std::to_string(r.temporaries_removed) + " abandoned temporary directories; " +
        util::format_bytes(r.bytes_kept) + " kept\n");
  }
}

void print_nothing_to_clean(const char* command, const CacheArgs& a) {
  std::string root = root_path(a);
  if (a.json)
    out_json(command, {{"root", root}, {"entries_removed", 0}, {"bytes_removed", 0}, {"temporaries_removed", 0}, {"bytes_kept", 0}});
  else
    out("nothing to remove: " + root + " does not exist\n");
}

void run_clean(const CacheArgs& a) {
  std::optional<int64_t> older;
  if (!a.older_than.empty()) {
    if (!ends_with_unit(a.older_than)) {
      std::string n(util::trim(a.older_than));
      throw usage_error("--older-than: '" + a.older_than + "' has no unit; write " + n + "s, " + n + "m, " + n + "h, " +
                        n + "d or " + n + "w");
    }
    older = util::parse_duration_seconds(a.older_than);
    if (!older) throw usage_error("--older-than: cannot parse '" + a.older_than + "' (examples: 30s, 15m, 12h, 7d, 2w)");
  }
  std::optional<cache::Store> store = open_store_to_delete(a);
  if (!store) return print_nothing_to_clean("clean", a);
  const cache::CleanReport report = cache::clean_cache(*store, older);
  if (!older) toolchain::remove_identity_memos(store->compilers_dir());  // removing everything: what they identified too
  print_clean("clean", a, *store, report);
}

void run_gc(const CacheArgs& a) {
  if (!ends_with_unit(a.max_size)) {
    std::string n(util::trim(a.max_size));
    throw usage_error("--max-size: '" + a.max_size + "' has no unit; write " + n + "K, " + n + "M, " + n + "G (or " + n +
                      "B for bytes)");
  }
  auto max = util::parse_size(a.max_size);
  if (!max) throw usage_error("--max-size: cannot parse '" + a.max_size + "' (examples: 500M, 2G, 10GiB, 4096B)");
  std::optional<cache::Store> store = open_store_to_delete(a);
  if (!store) return print_nothing_to_clean("gc", a);
  print_clean("gc", a, *store, cache::gc_cache(*store, *max));
}

void print_remote_stats(const cache::StatsCounters& s) {
  out("remote hits      " + std::to_string(s.remote_hits) + "\n" +
      "remote misses    " + std::to_string(s.remote_misses) + "\n" +
      "remote errors    " + std::to_string(s.remote_errors) + "\n" +
      "remote timeouts  " + std::to_string(s.remote_timeouts) + "\n" +
      "remote corrupt   " + std::to_string(s.remote_corrupt) + "\n" +
      "remote untrusted " + std::to_string(s.remote_untrusted) + "\n" +
      "remote uploads   " + std::to_string(s.remote_stores) + "\n" +
      "remote received  " + util::format_bytes(s.remote_bytes_received) + "\n" +
      "remote sent      " + util::format_bytes(s.remote_bytes_sent) + "\n" +
      "imported hits    " + std::to_string(s.imported_hits) + "\n");
}

void run_stats(const CacheArgs& a) {
  if (a.zero) {
    std::optional<cache::Store> marked = open_store_to_delete(a);
    if (marked) cache::zero_stats(marked->root());
  }
  cache::Store store = open_store(a);
  // Folding renames and rewrites files: only in a root that is ours.
  if (!a.zero && store.writable() && store.marked()) cache::fold_stats(store.root());
  cache::StatsCounters s = cache::read_stats(store.root());
  const cache::CacheSummary summary = cache::summarize_cache(store.root());
  const uint64_t modules = summary.module_entries, objects = summary.object_entries;
  const uint64_t module_bytes = summary.module_bytes, object_bytes = summary.object_bytes;
  if (a.json) {
    nlohmann::json j = cache::stats_to_json(s);
    j["root"] = store.root();
    j["module_entries"] = modules;  // results
    j["module_keys"] = summary.module_keys;
    j["object_entries"] = objects;
    j["module_bytes"] = module_bytes;
    j["object_bytes"] = object_bytes;
    j["total_bytes"] = module_bytes + object_bytes;
    out_json("stats", j);
    return;
  }
  const uint64_t answered = s.hits + s.remote_hits + s.imported_hits;
  uint64_t lookups = answered + s.misses;
  std::string rate = lookups ? std::to_string(static_cast<int>(100.0 * answered / lookups + 0.5)) + "%" : "-";
  out("cache root       " + store.root() + "\n" +
      "module hits      " + std::to_string(s.hits) + "\n" +
      "module misses    " + std::to_string(s.misses) + "\n" +
      "hit rate         " + rate + "\n" +
      "object hits      " + std::to_string(s.object_hits) + "\n" +
      "object misses    " + std::to_string(s.object_misses) + "\n" +
      "stores           " + std::to_string(s.stores) + " (" + util::format_bytes(s.bytes_stored) + ")\n" +
      "store failures   " + std::to_string(s.store_failures) + "\n" +
      "corrupt entries  " + std::to_string(s.corrupt_entries) + "\n" +
      "launch fallbacks " + std::to_string(s.launcher_fallbacks) + "\n" +
      "re-hashed        " + std::to_string(s.rehashed_files) + " files (" + util::format_bytes(s.rehashed_bytes) +
      ") whose stamps changed\n" +
      "modules          " + std::to_string(modules) + " results of " + std::to_string(summary.module_keys) +
      " keys (" + util::format_bytes(module_bytes) + ")\n" +
      "objects          " + std::to_string(objects) + " (" + util::format_bytes(object_bytes) + ")\n");
  print_remote_stats(s);
}

// ---- export / import (docs/remote.md) --------------------------------------

void run_export(const CacheArgs& a) {
  cache::Store store = open_store(a);
  std::vector<std::string> dirs;
  if (a.export_entries.empty()) {
    for (const auto& e : cache::list_entries(store.root(), false))
      if (e.entry) dirs.push_back(e.dir);
  } else {
    for (const auto& what : a.export_entries) {
      auto found = cache::find_entries(store.root(), what);
      size_t before = dirs.size();
      for (const auto& e : found)
        if (e.entry && !e.is_object) dirs.push_back(e.dir);
      if (dirs.size() == before)
        throw usage_error("no module entry matches '" + what + "' in " + store.root() +
                          " (give a module name, an entry directory name or at least 4 hex digits of a key)");
    }
  }
  // The key as a build's uploads would use it ($TVMFFI_JIT_REMOTE_SIGN_KEY
  // when --sign-key is not given): read before anything is written.
  cache::RemoteOptions keys;
  keys.sign_key_file = a.sign_key;
  keys = remote_options_from_environment(keys, false, a.environment->env);
  cache::ExportReport r =
      cache::export_entries(dirs, a.transfer_file, keys.sign_key ? &*keys.sign_key : nullptr);
  for (const auto& s : r.skipped) spdlog::warn("not exported: {}", s);
  if (a.json) {
    out_json("export", {{"file", a.transfer_file}, {"exported", r.exported}, {"skipped", r.skipped}, {"bytes", r.bytes}});
  } else {
    out("exported " + std::to_string(r.exported) + " entries (" + util::format_bytes(r.bytes) + ") to " +
        a.transfer_file + "\n");
  }
}

void run_import(const CacheArgs& a) {
  cache::Store store(cache::open_root(root_to_open(a), true));
  if (!store.writable()) throw io_error("cannot import into " + store.root() + ": " + store.unwritable_why());
  cache::ImportReport r = cache::import_entries(store, a.transfer_file);
  if (a.json) {
    out_json("import", {{"file", a.transfer_file}, {"imported", r.imported}, {"replaced", r.replaced}, {"entries", r.entries}});
  } else {
    out("imported " + std::to_string(r.imported) + " entries from " + a.transfer_file +
        (r.replaced ? " (" + std::to_string(r.replaced) + " replaced earlier imports)" : "") + "\n");
  }
}

void run_keygen(const CacheArgs& a) {
  cache::KeyPairFiles f = cache::generate_key_pair(a.key_name, a.key_out_dir);
  if (a.json) {
    out_json("keygen", {{"name", a.key_name}, {"secret_key", f.secret_file}, {"public_key", f.public_file}});
  } else {
    out(f.secret_file + "\n" + f.public_file + "\n");
  }
}

}  // namespace

void register_cache_command(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<CacheArgs>();
  args->environment = &ctx.environment;
  CLI::App* cache = app.add_subcommand("cache", "Inspect, verify and evict the module cache");
  cache->require_subcommand(1);
  cache->footer("The root is --cache-dir, else $TVMFFI_JIT_CACHE_DIR, else $XDG_CACHE_HOME/tvmffi-jit, else\n"
                "~/.cache/tvmffi-jit. Layout and guarantees: docs/cache.md.");
  auto common = [&](CLI::App* sub) {
    sub->add_option("--cache-dir", args->cache_dir, "Cache root (default: see `tvmffi-jit cache --help`)");
    sub->add_flag("--json", args->json, "Print one JSON object");
  };
  CLI::App* path = cache->add_subcommand("path", "Print the cache root");
  common(path);
  path->callback([args, &ctx] { run_path(*args); ctx.exit_code = 0; });

  CLI::App* list = cache->add_subcommand("list", "List module entries: name, key, size, last use, artifact");
  common(list);
  list->callback([args, &ctx] { run_list(*args); ctx.exit_code = 0; });

  CLI::App* show = cache->add_subcommand("show", "Show the entries of a module name, entry directory or key prefix");
  common(show);
  show->add_option("name_or_key", args->show_what, "Module name, <name>_<key16> or >= 4 hex digits of a key")->required();
  show->callback([args, &ctx] { run_show(*args); ctx.exit_code = 0; });

  CLI::App* verify = cache->add_subcommand("verify", "Re-hash every artifact against entry.json; exit 3 if any is bad");
  common(verify);
  verify->add_flag("--remove", args->verify_remove, "Remove the bad entries (the next build rebuilds them)");
  verify->add_option("--trusted-key", args->trusted_keys,
                     "Also count as bad an adopted entry no such public key signed (repeatable; default:\n"
                     "$TVMFFI_JIT_REMOTE_TRUSTED_KEYS)");
  verify->callback([args, &ctx] { ctx.exit_code = run_verify(*args); });

  CLI::App* clean = cache->add_subcommand("clean", "Remove entries (all, or those unused for a while)");
  common(clean);
  clean->add_option("--older-than", args->older_than,
                    "Only entries last used longer ago than this; a unit is required (30m, 12h, 7d, 2w)");
  clean->callback([args, &ctx] { run_clean(*args); ctx.exit_code = 0; });

  CLI::App* gc = cache->add_subcommand("gc", "Remove least recently used entries until the cache fits a size");
  common(gc);
  gc->add_option("--max-size", args->max_size, "Size limit; a unit is required (500M, 2G, 10GiB, 4096B)")->required();
  gc->callback([args, &ctx] { run_gc(*args); ctx.exit_code = 0; });

  CLI::App* stats = cache->add_subcommand("stats", "Hit/miss counters and the cache's size");
  common(stats);
  stats->add_flag("--zero", args->zero, "Reset the counters before printing them");
  stats->callback([args, &ctx] { run_stats(*args); ctx.exit_code = 0; });

  CLI::App* exp = cache->add_subcommand("export", "Write module entries (default: all) to one file, for `cache import`");
  common(exp);
  exp->add_option("file", args->transfer_file, "The file to write (a zstd-compressed tar; docs/remote.md)")->required();
  exp->add_option("entries", args->export_entries, "Module names, <name>_<key16> or >= 4 hex digits of a key");
  exp->add_option("--sign-key", args->sign_key,
                  "Sign every exported entry with this secret key (NAME.sec from `cache keygen`; default:\n"
                  "$TVMFFI_JIT_REMOTE_SIGN_KEY)");
  exp->callback([args, &ctx] { run_export(*args); ctx.exit_code = 0; });

  CLI::App* imp = cache->add_subcommand("import", "Verify and keep the entries of a `cache export` file; builds adopt them");
  common(imp);
  imp->add_option("file", args->transfer_file, "A file written by `tvmffi-jit cache export`")->required();
  imp->callback([args, &ctx] { run_import(*args); ctx.exit_code = 0; });

  CLI::App* keygen = cache->add_subcommand(
      "keygen", "Make an ed25519 key pair for signing cache entries: DIR/NAME.sec (0600) and DIR/NAME.pub");
  keygen->add_flag("--json", args->json, "Print one JSON object");
  keygen->add_option("name", args->key_name, "The key's name (inside every signature; [A-Za-z0-9_.-])")->required();
  keygen->add_option("--out", args->key_out_dir, "The directory to write the two files into (it must exist)")
      ->required();
  keygen->callback([args, &ctx] { run_keygen(*args); ctx.exit_code = 0; });
}

}  // namespace tvmffi_jit::cli
