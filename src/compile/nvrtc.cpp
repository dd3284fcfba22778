#include "tvmffi_jit/compile/nvrtc.h"
#include "tvmffi_jit/compile/nvrtc_includes.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

#include "tvmffi_jit/toolchain/nvrtc_locate.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

// nvrtc.h is used for its types only (the library is dlopen'ed). Without the
// toolkit headers, the handful of declarations needed are spelled out here;
// they are the stable C ABI NVRTC has kept since CUDA 11.
#if defined(TVMFFI_JIT_HAVE_CUDA_H) && __has_include(<nvrtc.h>)
#include <nvrtc.h>
#define TVMFFI_JIT_NVRTC_FROM_HEADER 1
#else
extern "C" {
typedef int nvrtcResult;
typedef struct _nvrtcProgram* nvrtcProgram;
}
#define NVRTC_SUCCESS 0
#endif

namespace tvmffi_jit::compile {

namespace {

using CreateProgramFn = nvrtcResult (*)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                        const char* const*);
using DestroyProgramFn = nvrtcResult (*)(nvrtcProgram*);
using AddNameExpressionFn = nvrtcResult (*)(nvrtcProgram, const char*);
using CompileProgramFn = nvrtcResult (*)(nvrtcProgram, int, const char* const*);
using GetSizeFn = nvrtcResult (*)(nvrtcProgram, size_t*);
using GetBytesFn = nvrtcResult (*)(nvrtcProgram, char*);
using GetLoweredNameFn = nvrtcResult (*)(nvrtcProgram, const char*, const char**);
using VersionFn = nvrtcResult (*)(int*, int*);
using GetErrorStringFn = const char* (*)(nvrtcResult);

#ifdef TVMFFI_JIT_NVRTC_FROM_HEADER
// The pointer types above must be exactly the header's prototypes.
static_assert(std::is_same_v<CreateProgramFn, decltype(&::nvrtcCreateProgram)>);
static_assert(std::is_same_v<DestroyProgramFn, decltype(&::nvrtcDestroyProgram)>);
static_assert(std::is_same_v<AddNameExpressionFn, decltype(&::nvrtcAddNameExpression)>);
static_assert(std::is_same_v<CompileProgramFn, decltype(&::nvrtcCompileProgram)>);
static_assert(std::is_same_v<GetSizeFn, decltype(&::nvrtcGetCUBINSize)>);
static_assert(std::is_same_v<GetBytesFn, decltype(&::nvrtcGetCUBIN)>);
static_assert(std::is_same_v<GetLoweredNameFn, decltype(&::nvrtcGetLoweredName)>);
static_assert(std::is_same_v<VersionFn, decltype(&::nvrtcVersion)>);
static_assert(std::is_same_v<GetErrorStringFn, decltype(&::nvrtcGetErrorString)>);
#endif

// One loaded libnvrtc. Never unloaded: NVRTC keeps process-wide state and
// unloading a library mid-process buys nothing for a command-line tool.
struct NvrtcApi {
  std::string path;  // real path of the loaded file
  int major = 0;
  int minor = 0;
  std::vector<std::string> toolkit_include_dirs;

  CreateProgramFn create_program = nullptr;
  DestroyProgramFn destroy_program = nullptr;
  AddNameExpressionFn add_name_expression = nullptr;
  CompileProgramFn compile_program = nullptr;
  GetSizeFn get_program_log_size = nullptr;
  GetBytesFn get_program_log = nullptr;
  GetSizeFn get_cubin_size = nullptr;
  GetBytesFn get_cubin = nullptr;
  GetSizeFn get_ptx_size = nullptr;
  GetBytesFn get_ptx = nullptr;
  GetLoweredNameFn get_lowered_name = nullptr;
  VersionFn version = nullptr;
  GetErrorStringFn get_error_string = nullptr;

  std::string error_text(nvrtcResult rc) const {
    const char* s = get_error_string(rc);
    return s ? s : ("NVRTC error " + std::to_string(static_cast<int>(rc)));
  }
};

std::string loaded_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && map->l_name[0]) {
    std::string name = map->l_name;
    return util::real_path(name).value_or(name);
  }
  return fallback;
}

// Opens one candidate, or says why it cannot be used.
Expected<std::unique_ptr<NvrtcApi>> open_candidate(const std::string& library) {
  ::dlerror();
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    return Unexpected{e ? e : "dlopen failed"};
  }
  auto api = std::make_unique<NvrtcApi>();
  std::vector<std::string> missing;
  auto bind = [&](auto& slot, const char* symbol) {
    void* p = ::dlsym(handle, symbol);
    if (!p) missing.emplace_back(symbol);
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(p);
  };
  bind(api->create_program, "nvrtcCreateProgram");
  bind(api->destroy_program, "nvrtcDestroyProgram");
  bind(api->add_name_expression, "nvrtcAddNameExpression");
  bind(api->compile_program, "nvrtcCompileProgram");
  bind(api->get_program_log_size, "nvrtcGetProgramLogSize");
  bind(api->get_program_log, "nvrtcGetProgramLog");
  bind(api->get_cubin_size, "nvrtcGetCUBINSize");
  bind(api->get_cubin, "nvrtcGetCUBIN");
  bind(api->get_ptx_size, "nvrtcGetPTXSize");
  bind(api->get_ptx, "nvrtcGetPTX");
  bind(api->get_lowered_name, "nvrtcGetLoweredName");
  bind(api->version, "nvrtcVersion");
  bind(api->get_error_string, "nvrtcGetErrorString");
  if (!missing.empty()) {
    ::dlclose(handle);
    return Unexpected{"not a usable libnvrtc (no " + util::join(missing, ", ") +
                      "; NVRTC from CUDA 11.1 or newer is needed)"};
  }
  if (api->version(&api->major, &api->minor) != NVRTC_SUCCESS) {
    ::dlclose(handle);
    return Unexpected{"nvrtcVersion failed"};
  }
  api->path = loaded_path(handle, library);
  api->toolkit_include_dirs = toolchain::cuda_include_dirs_for_library(api->path);
  if (api->toolkit_include_dirs.empty() && library.find('/') != std::string::npos) {
    // The real path may sit in a tree without headers (a versioned copy);
    // the path it was found under may still be inside the toolkit.
    api->toolkit_include_dirs = toolchain::cuda_include_dirs_for_library(library);
  }
  return api;
}

std::mutex nvrtc_mutex;
toolchain::EnvLookup nvrtc_environment = toolchain::fixed_environment({});

// The first usable libnvrtc in search order, or why there is none (where it
// looked, what would not load, what to do). Successful loads are memoised by
// candidate; failures are not (the environment may change between calls, and
// tests change it on purpose).
Expected<const NvrtcApi*> find_nvrtc_api() {
  static std::map<std::string, std::unique_ptr<NvrtcApi>> loaded;
  std::lock_guard<std::mutex> lock(nvrtc_mutex);

  toolchain::NvrtcSearch search = toolchain::nvrtc_search(nvrtc_environment);
  std::vector<std::string> failures;
  for (const auto& candidate : search.candidates) {
    auto it = loaded.find(candidate.library);
    if (it != loaded.end()) return it->second.get();
    auto api = open_candidate(candidate.library);
    if (api) {
      const NvrtcApi* ref = api->get();
      loaded.emplace(candidate.library, std::move(api).value());
      return ref;
    }
    // A soname the loader does not know is the expected miss; report only
    // files that exist but would not load, and a forced path whatever happened.
    if (candidate.library.find('/') != std::string::npos || search.forced) {
      failures.push_back(candidate.library + ": " + api.why());
    }
  }
  std::string message = "cannot load NVRTC (libnvrtc) for --compiler nvrtc.\n  looked in:";
  for (const auto& where : search.looked_in) message += "\n    " + where;
  if (!failures.empty()) {
    message += "\n  found but could not use:";
    for (const auto& f : failures) message += "\n    " + f;
  }
  message += search.forced
                 ? "\n  TVMFFI_JIT_LIBNVRTC must name a libnvrtc.so (unset it to search the CUDA toolkit)."
                 : "\n  Install the CUDA toolkit and set CUDA_HOME to it, set TVMFFI_JIT_LIBNVRTC to the "
                   "library's path, or build with --compiler nvcc.";
  return Unexpected{message};
}

// For builds, for which NVRTC missing is the end (exit 4).
const NvrtcApi& nvrtc_api() { return *find_nvrtc_api().value_or_throw(missing_tool_error); }

std::string strip_trailing_nuls(std::string s) {
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string program_log(const NvrtcApi& api, nvrtcProgram program) {
  size_t size = 0;
  if (api.get_program_log_size(program, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::string log(size, '\0');
  if (api.get_program_log(program, log.data()) != NVRTC_SUCCESS) return {};
  return strip_trailing_nuls(std::move(log));
}

// Appends one line to a log, keeping NVRTC's own text first.
void append_line(std::string& log, const std::string& line) {
  if (!log.empty() && log.back() != '\n') log += '\n';
  log += line + '\n';
}

}  // namespace

void set_nvrtc_environment(toolchain::EnvLookup env) {
  std::lock_guard<std::mutex> lock(nvrtc_mutex);
  nvrtc_environment = std::move(env);
}

std::string nvrtc_architecture(const NvrtcRequest& request) {
  return request.output == NvrtcOutput::kCubin ? request.arch.sm() : request.arch.compute();
}

namespace {

// Order as nvcc searches: the user's -I first, then the toolkit (CUDA headers
// and CCCL's cuda/std, which NVRTC does not find on its own), then the
// user's options, so a user -arch or -I can still override what precedes it.
std::vector<std::string> nvrtc_options(const NvrtcRequest& request, const NvrtcApi& api) {
  if (request.arch.major == 0)
    throw usage_error("NVRTC needs a target architecture (e.g. --arch sm_90); none was given");
  std::vector<std::string> options;
  options.push_back("--gpu-architecture=" + nvrtc_architecture(request));
  // A directory listed twice (tvm-ffi's include and dlpack dirs are one in a
  // wheel) is searched once.
  std::vector<std::string> seen_dirs;
  auto add_include = [&](const std::string& dir) {
    if (std::find(seen_dirs.begin(), seen_dirs.end(), dir) != seen_dirs.end()) return;
    seen_dirs.push_back(dir);
    options.push_back("-I" + dir);
  };
  for (const auto& dir : request.include_paths) add_include(dir);
  for (const auto& dir : api.toolkit_include_dirs) add_include(dir);
  for (const auto& opt : request.options) options.push_back(opt);
  return options;
}

struct ProgramGuard {
  const NvrtcApi& api;
  nvrtcProgram& program;
  ~ProgramGuard() { api.destroy_program(&program); }
};

// Each step below: false when the compile cannot go on (why is in result.log).

bool add_name_expressions(const NvrtcApi& api, nvrtcProgram program, const NvrtcRequest& request,
                          NvrtcResult& result) {
  for (const auto& expr : request.name_expressions) {
    nvrtcResult rc = api.add_name_expression(program, expr.c_str());
    if (rc != NVRTC_SUCCESS) {
      result.log = "cannot register name expression '" + expr + "': " + api.error_text(rc) + "\n";
      return false;
    }
  }
  return true;
}

bool compile_program(const NvrtcApi& api, nvrtcProgram program, const std::string& source_name, NvrtcResult& result) {
  std::vector<const char*> argv;
  argv.reserve(result.effective_options.size());
  for (const auto& opt : result.effective_options) argv.push_back(opt.c_str());
  auto start = std::chrono::steady_clock::now();
  nvrtcResult rc = api.compile_program(program, static_cast<int>(argv.size()), argv.data());
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  result.log = program_log(api, program);
  if (util::log_verbosity() >= 1) {
    spdlog::info("nvrtc {}.{}: {} {} ({:.1f} ms in NVRTC)", api.major, api.minor, source_name,
                 util::join(result.effective_options, " "), ms);
  }
  if (rc != NVRTC_SUCCESS) {
    // NVRTC_ERROR_COMPILATION comes with a log; other codes (a bad option) may not.
    if (result.log.empty()) result.log = "NVRTC: " + api.error_text(rc) + "\n";
    return false;
  }
  return true;
}

// The cubin or PTX into result.binary.
bool read_output(const NvrtcApi& api, nvrtcProgram program, NvrtcOutput output, const std::string& source_name,
                 NvrtcResult& result) {
  const bool cubin = output == NvrtcOutput::kCubin;
  size_t size = 0;
  nvrtcResult rc = cubin ? api.get_cubin_size(program, &size) : api.get_ptx_size(program, &size);
  if (rc != NVRTC_SUCCESS || size == 0) {
    // A user option such as -arch=compute_XX after ours leaves no SASS.
    append_line(result.log, std::string("NVRTC produced no ") + (cubin ? "cubin" : "PTX") + " for " + source_name +
                                (rc != NVRTC_SUCCESS ? ": " + api.error_text(rc) : " (check -arch in the options)"));
    return false;
  }
  result.binary.assign(size, '\0');
  rc = cubin ? api.get_cubin(program, result.binary.data()) : api.get_ptx(program, result.binary.data());
  if (rc != NVRTC_SUCCESS) {
    result.binary.clear();
    append_line(result.log, "cannot read NVRTC's output: " + api.error_text(rc));
    return false;
  }
  if (!cubin) result.binary = strip_trailing_nuls(std::move(result.binary));  // the size counts the NUL
  return true;
}

// The mangled name of each name expression; without one, no binary either.
bool read_lowered_names(const NvrtcApi& api, nvrtcProgram program, const NvrtcRequest& request, NvrtcResult& result) {
  for (const auto& expr : request.name_expressions) {
    const char* lowered = nullptr;
    nvrtcResult rc = api.get_lowered_name(program, expr.c_str(), &lowered);
    if (rc != NVRTC_SUCCESS || !lowered) {
      append_line(result.log, "no lowered name for '" + expr + "': " + api.error_text(rc));
      result.binary.clear();
      return false;
    }
    result.lowered_names.emplace_back(expr, lowered);
  }
  return true;
}

}  // namespace

NvrtcResult nvrtc_compile(const NvrtcRequest& request) {
  const NvrtcApi& api = nvrtc_api();
  NvrtcResult result;
  result.effective_options = nvrtc_options(request, api);
  std::string source_name = request.source_name.empty() ? "source.cu" : request.source_name;
  nvrtcProgram program = nullptr;
  nvrtcResult rc = api.create_program(&program, request.source.c_str(), source_name.c_str(), 0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS) {
    result.log = "nvrtcCreateProgram failed for " + source_name + ": " + api.error_text(rc) + "\n";
    return result;
  }
  ProgramGuard guard{api, program};
  result.ok = add_name_expressions(api, program, request, result) &&
              compile_program(api, program, source_name, result) &&
              read_output(api, program, request.output, source_name, result) &&
              read_lowered_names(api, program, request, result);
  return result;
}

Expected<std::string> find_nvrtc_identity() {
  auto api = find_nvrtc_api();
  if (!api) return Unexpected{api.error()};
  return (*api)->path + " " + std::to_string((*api)->major) + "." + std::to_string((*api)->minor);
}

std::string nvrtc_identity() { return find_nvrtc_identity().value_or_throw(missing_tool_error); }

std::vector<std::string> nvrtc_toolkit_include_dirs() { return nvrtc_api().toolkit_include_dirs; }

std::string nvrtc_missing_header_hint(const std::string& log) {
  // Headers <cuda/std/...> provides (CCCL 2.x/3.x, CUDA 12 and 13).
  static const char* kCudaStd[] = {"array", "atomic", "barrier", "bit", "bitset", "cassert", "cfloat", "chrono",
                                   "climits", "cmath", "complex", "concepts", "cstddef", "cstdint", "cstdlib",
                                   "cstring", "ctime", "expected", "functional", "initializer_list", "iterator",
                                   "latch", "limits", "mdspan", "memory", "numbers", "numeric", "optional", "ranges",
                                   "ratio", "semaphore", "source_location", "span", "tuple", "type_traits",
                                   "utility", "variant", "version"};
  const std::string marker = "cannot open source file \"";
  std::vector<std::string> with_equivalent, without;
  for (size_t at = log.find(marker); at != std::string::npos; at = log.find(marker, at + 1)) {
    const size_t begin = at + marker.size();
    const size_t end = log.find('"', begin);
    if (end == std::string::npos) break;
    const std::string header = log.substr(begin, end - begin);
    if (header.empty() || header.find('/') != std::string::npos || header.find('.') != std::string::npos)
      continue;  // a user's or a toolkit header, not a standard one
    const bool cccl = std::find_if(std::begin(kCudaStd), std::end(kCudaStd),
                                   [&](const char* h) { return header == h; }) != std::end(kCudaStd);
    auto& list = cccl ? with_equivalent : without;
    if (std::find(list.begin(), list.end(), header) == list.end()) list.push_back(header);
  }
  std::string hint;
  for (const auto& h : with_equivalent)
    hint += "hint: NVRTC has no host C++ headers: include <cuda/std/" + h + "> instead of <" + h +
            "> (CCCL, shipped with the CUDA toolkit; names in cuda::std)\n";
  for (const auto& h : without)
    hint += "hint: NVRTC has no host C++ headers, and <" + h +
            "> has no device equivalent: drop it from device code, or build with nvcc\n";
  return hint;
}

}  // namespace tvmffi_jit::compile
