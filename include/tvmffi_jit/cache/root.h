// The cache root: where it is, and whether it is safe and writable.
//
// Layout under the root:
//   <name>_<key16>/            module entries (artifact files + entry.json); a name
//                              too long for 128 characters is shortened (module_entry_dir_name)
//   objects/<kk>/<key>/        per-translation-unit objects (object file + entry.json)
//   compilers/<hash>.json      compiler identity memo (toolchain/compiler_identity.h)
//   locks/<entry>.lock         per-key flock files (duplicate-work avoidance only)
//   tmp/                       private staging dirs, published by one rename
//   stats.json, stats.log      counters: folded totals and journal (cache/stats.h)
//   stats.lock                 taken while folding the journal
//   costs.log, costs.lock      what each compile and link cost (compile/cost_log.h), for the
//                              batch's schedule; costs.lock is taken while it is rewritten
//   CACHEDIR.TAG               Cache Directory Tagging spec (backup tools skip the root)
//   TVMFFI_JIT_CACHE           "tvmffi-jit cache layout <N>": the root is ours
//
// The two marker files are what make a directory a tvmffi-jit cache. `cache
// clean|gc|verify --remove|stats --zero` refuse a root without them (exit 5):
// pointed at a home directory by mistake they would otherwise delete what
// looks like cache names. A build marks the root it creates, and adopts an
// unmarked existing root only when it is empty or holds nothing but names
// of this layout (a root made by a tool from before the marker); it refuses
// (exit 5) an unmarked root holding anything else. `/` and the home directory
// itself are never a cache root.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tvmffi_jit::cache {

// The variables where the root is depends on, as the CLI read them from the
// environment it resolved (the cache takes values, not variable names);
// nullopt: unset.
struct RootEnvironment {
  std::optional<std::string> cache_dir;       // TVMFFI_JIT_CACHE_DIR
  std::optional<std::string> xdg_cache_home;  // XDG_CACHE_HOME (used when absolute)
  std::optional<std::string> home;            // HOME (else the passwd entry's home)
};

// --cache-dir, else $TVMFFI_JIT_CACHE_DIR, else $XDG_CACHE_HOME/tvmffi-jit,
// else ~/.cache/tvmffi-jit. Returned absolute (lexically), not resolved.
// Throws Error(kIo, exit 5) when no home directory is known for the default.
std::string resolve_root_path(const std::string& cli_value, const RootEnvironment& env);

// Throws Error(kIo, exit 5) when `path` is the directory `home` ($HOME,
// which may differ from the passwd entry's home that open_root() refuses
// itself); for whoever opens a root and has the environment.
void refuse_home_directory(const std::string& path, const std::string& home);

// The per-user directory of toolchain memos that every cache root of this
// user may share ($XDG_CACHE_HOME/tvmffi-jit-toolchain, else
// ~/.cache/tvmffi-jit-toolchain): a new root reads what another root has
// learnt about the toolchain instead of running tvm-ffi-config again.
// Not a cache root: it holds memos only, each validated before use.
// Throws Error(kIo) when no home directory is known.
std::string user_toolchain_memo_dir(const RootEnvironment& env);

inline constexpr const char* kCacheDirTagName = "CACHEDIR.TAG";
inline constexpr const char* kRootMarkerName = "TVMFFI_JIT_CACHE";
// The layout of names under the root (this file's comment); bump when it changes.
inline constexpr int kRootLayout = 1;

struct CacheRoot {
  std::string path;            // absolute
  bool marked = false;         // carries CACHEDIR.TAG and TVMFFI_JIT_CACHE
  int layout = 0;              // from TVMFFI_JIT_CACHE when marked
  bool writable = false;       // false: lookups still work, stores are skipped
  bool write_probed = false;   // false: `writable` is assumed, not yet tried
  std::string unwritable_why;  // for the warning
};

// Opens the root. With `create` (the build path), a missing root is created
// (mode 0700, parents included) and marked, and an unmarked one is adopted
// or refused as described above; without it nothing is written and
// `marked` says whether the markers are there. Throws Error(kIo, exit 5)
// when the root is `/` or the home directory, is not a directory, is not
// owned by the current user, or is writable by group or others (a
// shared-writable cache would let another user plant artifacts), and, with
// `create`, when it is an unmarked directory holding names this tool does
// not create.
// A root that cannot be created or written is not an error: `writable` is
// false and the caller warns and builds elsewhere. Without `probe_write`
// writability is assumed until probe_root_writable() tries it: a cache hit
// writes nothing that matters, and creating and removing a probe file costs
// the hit a tenth of its time budget.
CacheRoot open_root(const std::string& path, bool create, bool probe_write = true);
// Creates and removes a file in the root; sets writable/unwritable_why.
void probe_root_writable(CacheRoot& root);

// The longest name is_valid_entry_name() accepts.
constexpr size_t kMaxEntryNameLength = 128;
// The longest file name in an entry (an artifact named after its module):
// one name component of the file system (NAME_MAX on Linux).
constexpr size_t kMaxFileNameLength = 255;

// For commands that delete: throws Error(kIo, exit 5) unless the root is
// marked with this tool's layout. A root that does not exist passes (there
// is nothing to delete); returns whether it exists.
bool require_marked_root(const CacheRoot& root);

// Writes CACHEDIR.TAG and TVMFFI_JIT_CACHE into `root` (each atomically).
void write_root_markers(const std::string& root);

// "<name>_<16 lower hex>" with <name> a valid entry name: a module entry directory.
bool is_module_entry_dir_name(std::string_view name);

// Names that may appear in a path under the root: [A-Za-z0-9_.-]{1,128},
// not starting with '.', so no name escapes the root or hides as a dotfile.
bool is_valid_entry_name(std::string_view name);
// The same characters, up to kMaxFileNameLength: a file inside an entry.
bool is_valid_file_name(std::string_view name);
// Throws usage_error naming the problem.
void check_entry_name(std::string_view name);

// The directory of a module's entry: "<name>_<first 16 hex of the key>", or,
// when that would pass kMaxEntryNameLength (module names may be up to 223
// characters, FlashInfer's are 140-169), the name's first 94 characters, '-',
// 16 hex of the name's SHA-256, '_' and the key's 16: still one name per
// module and key, and still matched by is_module_entry_dir_name(). `name` must
// be is_valid_file_name().
std::string module_entry_dir_name(std::string_view name, std::string_view key_hex);

}  // namespace tvmffi_jit::cache
