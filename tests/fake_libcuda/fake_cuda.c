/* A fake CUDA driver for testing tvmffi-jit's driver plumbing without a GPU.
 *
 * Built as libfakecuda.so and selected with TVMFFI_JIT_LIBCUDA=<path>. It
 * exports cuGetProcAddress_v2 (the only symbol the tool resolves with dlsym)
 * and answers every entry point the tool asks for. Behaviour:
 *
 *   FAKE_CUDA_MODE=ok (default)  loads succeed; kernels are the STT_FUNC
 *                                 symbols with STO_ENTRY of a cubin (or of the
 *                                 first uncompressed cubin in a fatbin), the
 *                                 `.entry` names of PTX, or FAKE_CUDA_KERNELS
 *   FAKE_CUDA_MODE=zero_kernels  load "succeeds" with 0 kernels and a ptxas
 *                                 message in the error log; cuLibraryGetKernel
 *                                 and cuLibraryGetModule return INVALID_PTX
 *                                 (what driver 580 does for broken PTX)
 *   FAKE_CUDA_MODE=kernel_error  kernels are listed but cuLibraryGetKernel
 *                                 returns NO_BINARY_FOR_GPU
 *   FAKE_CUDA_MODE=load_error    cuLibraryLoadFromFile returns INVALID_IMAGE
 *   FAKE_CUDA_MODE=crash         cuLibraryLoadFromFile dies with SIGSEGV
 *   FAKE_CUDA_MODE=hang          cuLibraryLoadFromFile never returns
 *   FAKE_CUDA_MODE=no_device     cuInit returns CUDA_ERROR_NO_DEVICE
 *   FAKE_CUDA_MODE=old_driver    a 12.0 driver: no kernel count/enumeration/name
 *   FAKE_CUDA_MODE=stub          every call returns CUDA_ERROR_STUB_LIBRARY
 *
 *   FAKE_CUDA_FAIL_ON_LOAD=N     apply crash/hang/load_error only to the N-th
 *                                 load in the process (1-based); others succeed
 *   FAKE_CUDA_KERNELS=a,b        kernel names to report instead of parsing
 *   FAKE_CUDA_ATTR_<n>=v         value of CUfunction_attribute n for every kernel
 *   FAKE_CUDA_LOG=path           append one line per driver call (for tests)
 *
 * Self-contained on purpose: no CUDA headers, so it builds anywhere.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_FILE_NOT_FOUND = 301,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
};

#define MAX_KERNELS 256
#define MAX_NAME 256

struct fake_kernel {
  char name[MAX_NAME];
};
struct fake_library {
  unsigned count;
  struct fake_kernel kernels[MAX_KERNELS];
  CUresult deferred_error; /* what GetKernel/GetModule report */
};

static int g_initialized;
static int g_loads;
static int g_context_current;
static int g_module_token;

static const char* mode(void) {
  const char* m = getenv("FAKE_CUDA_MODE");
  return m && *m ? m : "ok";
}
static int mode_is(const char* m) { return strcmp(mode(), m) == 0; }

static void trace(const char* what) {
  const char* path = getenv("FAKE_CUDA_LOG");
  if (!path || !*path) return;
  FILE* f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "%s\n", what);
  fclose(f);
}

static CUresult cuInit(unsigned flags) {
  trace("cuInit");
  if (mode_is("stub")) return CUDA_ERROR_STUB_LIBRARY;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (mode_is("no_device")) return CUDA_ERROR_NO_DEVICE;
  g_initialized = 1;
  return CUDA_SUCCESS;
}

static CUresult cuGetErrorName(CUresult rc, const char** out) {
  switch (rc) {
#define NAME(x) case x: *out = #x; return CUDA_SUCCESS
    NAME(CUDA_SUCCESS);
    NAME(CUDA_ERROR_INVALID_VALUE);
    NAME(CUDA_ERROR_STUB_LIBRARY);
    NAME(CUDA_ERROR_NO_DEVICE);
    NAME(CUDA_ERROR_INVALID_DEVICE);
    NAME(CUDA_ERROR_INVALID_IMAGE);
    NAME(CUDA_ERROR_INVALID_CONTEXT);
    NAME(CUDA_ERROR_NO_BINARY_FOR_GPU);
    NAME(CUDA_ERROR_INVALID_PTX);
    NAME(CUDA_ERROR_FILE_NOT_FOUND);
    NAME(CUDA_ERROR_INVALID_HANDLE);
    NAME(CUDA_ERROR_NOT_FOUND);
#undef NAME
  }
  *out = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}
static CUresult cuGetErrorString(CUresult rc, const char** out) {
  *out = rc == CUDA_SUCCESS ? "no error" : "fake driver error";
  return CUDA_SUCCESS;
}
static CUresult cuDriverGetVersion(int* v) {
  *v = mode_is("old_driver") ? 12000 : 13000;
  return CUDA_SUCCESS;
}
static CUresult cuDeviceGetCount(int* n) {
  if (!g_initialized) return 3; /* CUDA_ERROR_NOT_INITIALIZED */
  *n = 1;
  return CUDA_SUCCESS;
}
static CUresult cuDeviceGet(int* dev, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *dev = 0;
  return CUDA_SUCCESS;
}
static CUresult cuDeviceGetName(char* name, int len, int dev) {
  snprintf(name, (size_t)len, "Fake GPU (tvmffi-jit tests)");
  return CUDA_SUCCESS;
}
static CUresult cuDeviceGetAttribute(int* v, int attr, int dev) {
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  switch (attr) {
    case 75: *v = 9; break; /* compute capability major */
    case 76: *v = 0; break; /* minor */
    case 1: *v = 1024; break;
    default: *v = 0;
  }
  return CUDA_SUCCESS;
}
static CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) {
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *ctx = &g_context_current;
  return CUDA_SUCCESS;
}
static CUresult cuDevicePrimaryCtxRelease(int dev) { return CUDA_SUCCESS; }
static CUresult cuCtxSetCurrent(void* ctx) {
  g_context_current = ctx != NULL;
  return CUDA_SUCCESS;
}
static CUresult cuModuleGetLoadingMode(int* m) {
  const char* env = getenv("CUDA_MODULE_LOADING");
  *m = env && strcmp(env, "EAGER") == 0 ? 1 : 2;
  return CUDA_SUCCESS;
}

/* --- finding kernel names the way the driver would --------------------- */

static void add_kernel(struct fake_library* lib, const char* name, size_t len) {
  if (lib->count >= MAX_KERNELS || len == 0 || len >= MAX_NAME) return;
  memcpy(lib->kernels[lib->count].name, name, len);
  lib->kernels[lib->count].name[len] = 0;
  lib->count++;
}

static void kernels_from_list(struct fake_library* lib, const char* list) {
  while (*list) {
    const char* end = strchr(list, ',');
    size_t len = end ? (size_t)(end - list) : strlen(list);
    add_kernel(lib, list, len);
    if (!end) break;
    list = end + 1;
  }
}

/* Bounds-checked walk of an ELF64 .symtab: STT_FUNC with st_other & 0x10. */
static void kernels_from_cubin(struct fake_library* lib, const unsigned char* d, size_t n) {
  if (n < 64) return;
  uint64_t shoff;
  uint16_t shentsize, shnum;
  memcpy(&shoff, d + 0x28, 8);
  memcpy(&shentsize, d + 0x3a, 2);
  memcpy(&shnum, d + 0x3c, 2);
  if (shentsize < 64 || shoff > n || (uint64_t)shnum * shentsize > n - shoff) return;
  for (unsigned i = 0; i < shnum; ++i) {
    const unsigned char* sh = d + shoff + (uint64_t)i * shentsize;
    uint32_t type, link;
    uint64_t off, size, entsize;
    memcpy(&type, sh + 4, 4);
    memcpy(&off, sh + 0x18, 8);
    memcpy(&size, sh + 0x20, 8);
    memcpy(&link, sh + 0x28, 4);
    memcpy(&entsize, sh + 0x38, 8);
    if (type != 2 /* SHT_SYMTAB */ || entsize < 24 || off > n || size > n - off || link >= shnum) continue;
    const unsigned char* strsh = d + shoff + (uint64_t)link * shentsize;
    uint64_t stroff, strsize;
    memcpy(&stroff, strsh + 0x18, 8);
    memcpy(&strsize, strsh + 0x20, 8);
    if (stroff > n || strsize > n - stroff) continue;
    for (uint64_t s = 0; s + entsize <= size; s += entsize) {
      const unsigned char* sym = d + off + s;
      uint32_t name;
      memcpy(&name, sym, 4);
      if ((sym[4] & 0xf) != 2 /* STT_FUNC */ || !(sym[5] & 0x10) || name >= strsize) continue;
      const char* str = (const char*)d + stroff + name;
      size_t len = strnlen(str, strsize - name);
      add_kernel(lib, str, len);
    }
  }
}

static void kernels_from_ptx(struct fake_library* lib, const char* text) {
  const char* p = text;
  while ((p = strstr(p, ".entry")) != NULL) {
    p += 6;
    while (*p == ' ' || *p == '\t') ++p;
    const char* start = p;
    while (*p && (p[0] == '_' || p[0] == '$' || (p[0] >= '0' && p[0] <= '9') ||
                  (p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z')))
      ++p;
    add_kernel(lib, start, (size_t)(p - start));
  }
}

static void fill_log(void** values, unsigned* slots, unsigned n_opts, int* opts, const char* text) {
  for (unsigned i = 0; i < n_opts; ++i) {
    if (opts[i] != 5 /* CU_JIT_ERROR_LOG_BUFFER */) continue;
    for (unsigned j = 0; j < n_opts; ++j) {
      if (opts[j] != 6 /* CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */) continue;
      unsigned cap = (unsigned)(uintptr_t)values[j];
      if (cap == 0) return;
      snprintf((char*)values[i], cap, "%s", text);
      values[j] = (void*)(uintptr_t)(strlen(text) < cap ? strlen(text) + 1 : cap);
    }
  }
  (void)slots;
}

static CUresult cuLibraryLoadFromFile(struct fake_library** out, const char* path, int* jit_opts,
                                      void** jit_values, unsigned n_jit, void* lib_opts,
                                      void** lib_values, unsigned n_lib) {
  trace("cuLibraryLoadFromFile");
  ++g_loads;
  const char* fail_on = getenv("FAKE_CUDA_FAIL_ON_LOAD");
  int failing = !fail_on || !*fail_on || atoi(fail_on) == g_loads;
  if (failing && mode_is("crash")) {
    /* Die by the signal itself, as the real driver does, even in a sanitizer
     * build whose handler would otherwise turn it into an abort. */
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
  }
  if (failing && mode_is("hang")) {
    for (;;) pause();
  }
  FILE* f = fopen(path, "rb");
  if (!f) return CUDA_ERROR_FILE_NOT_FOUND;
  static unsigned char buf[64 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  if (failing && mode_is("load_error")) {
    fill_log(jit_values, NULL, n_jit, jit_opts, "error   : Binary format for key='0', ident='' is not recognized");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  struct fake_library* lib = calloc(1, sizeof *lib);
  if (mode_is("zero_kernels")) {
    fill_log(jit_values, NULL, n_jit, jit_opts,
             "ptxas application ptx input, line 63; error   : Not a name of any known instruction: 'retx'\n"
             "ptxas fatal   : Ptx assembly aborted due to errors");
    lib->deferred_error = CUDA_ERROR_INVALID_PTX;
    *out = lib;
    return CUDA_SUCCESS;
  }
  const char* names = getenv("FAKE_CUDA_KERNELS");
  if (names) kernels_from_list(lib, names);
  else if (n >= 4 && memcmp(buf, "\x7f" "ELF", 4) == 0) kernels_from_cubin(lib, buf, n);
  else if (n >= 4 && memcmp(buf, "\x50\xed\x55\xba", 4) == 0) {
    /* A fatbin: use the first uncompressed CUDA ELF inside it. */
    for (size_t off = 0; off + 64 <= n; ++off) {
      if (memcmp(buf + off, "\x7f" "ELF", 4) == 0 && buf[off + 0x12] == 190) {
        kernels_from_cubin(lib, buf + off, n - off);
        break;
      }
    }
  } else kernels_from_ptx(lib, (const char*)buf);
  fill_log(jit_values, NULL, n_jit, jit_opts, "");
  if (mode_is("kernel_error")) lib->deferred_error = CUDA_ERROR_NO_BINARY_FOR_GPU;
  *out = lib;
  return CUDA_SUCCESS;
}

static CUresult cuLibraryUnload(struct fake_library* lib) {
  free(lib);
  return CUDA_SUCCESS;
}
static CUresult cuLibraryGetKernelCount(unsigned* count, struct fake_library* lib) {
  *count = lib->count;
  return CUDA_SUCCESS;
}
static CUresult cuLibraryEnumerateKernels(struct fake_kernel** out, unsigned n, struct fake_library* lib) {
  if (n > lib->count) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n; ++i) out[i] = &lib->kernels[i];
  return CUDA_SUCCESS;
}
static CUresult cuKernelGetName(const char** name, struct fake_kernel* k) {
  *name = k->name;
  return CUDA_SUCCESS;
}
static CUresult cuLibraryGetKernel(struct fake_kernel** out, struct fake_library* lib, const char* name) {
  trace("cuLibraryGetKernel");
  /* The real driver only reports deferred load errors with a context current. */
  if (lib->deferred_error && g_context_current) return lib->deferred_error;
  for (unsigned i = 0; i < lib->count; ++i)
    if (strcmp(lib->kernels[i].name, name) == 0) {
      *out = &lib->kernels[i];
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}
static CUresult cuLibraryGetModule(void** mod, struct fake_library* lib) {
  if (!g_context_current) return CUDA_ERROR_INVALID_CONTEXT;
  if (lib->deferred_error) return lib->deferred_error;
  *mod = &g_module_token;
  return CUDA_SUCCESS;
}
static CUresult cuKernelGetAttribute(int* v, int attr, struct fake_kernel* k, int dev) {
  char var[32];
  snprintf(var, sizeof var, "FAKE_CUDA_ATTR_%d", attr);
  const char* env = getenv(var);
  if (env) *v = atoi(env);
  else if (attr == 0) *v = 1024; /* MAX_THREADS_PER_BLOCK */
  else if (attr == 5 || attr == 6) *v = 90;  /* PTX / binary version */
  else *v = 0;
  return CUDA_SUCCESS;
}

/* --- the entry-point table -------------------------------------------- */

struct entry {
  const char* name;
  void* fn;
  int version; /* introduction version */
  int optional_in_old_driver;
};

#define E(fn, ver, newer) {#fn, (void*)fn, ver, newer}
static const struct entry kEntries[] = {
    E(cuInit, 2000, 0),
    E(cuGetErrorName, 6000, 0),
    E(cuGetErrorString, 6000, 0),
    E(cuDriverGetVersion, 2020, 0),
    E(cuDeviceGetCount, 2000, 0),
    E(cuDeviceGet, 2000, 0),
    E(cuDeviceGetName, 2000, 0),
    E(cuDeviceGetAttribute, 2000, 0),
    E(cuDevicePrimaryCtxRetain, 7000, 0),
    E(cuDevicePrimaryCtxRelease, 11000, 0),
    E(cuCtxSetCurrent, 4000, 0),
    E(cuModuleGetLoadingMode, 11070, 0),
    E(cuLibraryLoadFromFile, 12000, 0),
    E(cuLibraryUnload, 12000, 0),
    E(cuLibraryGetKernel, 12000, 0),
    E(cuLibraryGetModule, 12000, 0),
    E(cuKernelGetAttribute, 12000, 0),
    E(cuKernelGetName, 12030, 1),
    E(cuLibraryGetKernelCount, 12040, 1),
    E(cuLibraryEnumerateKernels, 12040, 1),
};
#undef E

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** pfn,
                                                                     int version, uint64_t flags,
                                                                     int* status) {
  *pfn = NULL;
  if (mode_is("stub")) return CUDA_ERROR_STUB_LIBRARY;
  int driver_version = mode_is("old_driver") ? 12000 : 13000;
  if (version > driver_version) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof kEntries / sizeof kEntries[0]; ++i) {
    if (strcmp(kEntries[i].name, symbol) != 0) continue;
    if (kEntries[i].version > version || (kEntries[i].optional_in_old_driver && driver_version < 12030)) {
      if (status) *status = 2; /* CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT */
      return CUDA_SUCCESS;
    }
    *pfn = kEntries[i].fn;
    if (status) *status = 0;
    return CUDA_SUCCESS;
  }
  if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
  return CUDA_SUCCESS;
}
