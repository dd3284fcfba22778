/* The floor for `tvmffi-jit inspect --load FILE`: the same driver calls in one
 * minimal C process, with no offline parse, no child process and no output
 * formatting. dlopen + cuGetProcAddress_v2 (no -lcuda), cuInit, the primary
 * context, cuLibraryLoadFromFile with an error log, count, enumerate, names,
 * cuLibraryGetModule, cuLibraryGetKernel and seven attributes per kernel.
 *
 *   cc -O2 -o floor floor.c -ldl && ./floor FILE [DEVICE]
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef void* H;
typedef CUresult (*gpa_t)(const char*, void**, int, unsigned long long, int*);

static gpa_t gpa;
static void* get(const char* name, int version) {
  void* p = NULL;
  int status = 0;
  if (gpa(name, &p, version, 0, &status) != 0 || status != 0 || !p) {
    fprintf(stderr, "floor: %s unavailable\n", name);
    exit(4);
  }
  return p;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: floor FILE [DEVICE]\n");
    return 2;
  }
  int ordinal = argc > 2 ? atoi(argv[2]) : 0;
  const char* lib = getenv("TVMFFI_JIT_LIBCUDA");
  void* h = dlopen(lib && *lib ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return 4;
  gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
  if (!gpa) return 4;
  CUresult (*cuInit)(unsigned) = get("cuInit", 2000);
  CUresult (*cuDeviceGet)(int*, int) = get("cuDeviceGet", 2000);
  CUresult (*cuCtxRetain)(H*, int) = get("cuDevicePrimaryCtxRetain", 7000);
  CUresult (*cuCtxSetCurrent)(H) = get("cuCtxSetCurrent", 4000);
  CUresult (*cuLoad)(H*, const char*, int*, void**, unsigned, void*, void**, unsigned) =
      get("cuLibraryLoadFromFile", 12000);
  CUresult (*cuCount)(unsigned*, H) = get("cuLibraryGetKernelCount", 12040);
  CUresult (*cuEnum)(H*, unsigned, H) = get("cuLibraryEnumerateKernels", 12040);
  CUresult (*cuName)(const char**, H) = get("cuKernelGetName", 12030);
  CUresult (*cuGetModule)(H*, H) = get("cuLibraryGetModule", 12000);
  CUresult (*cuGetKernel)(H*, H, const char*) = get("cuLibraryGetKernel", 12000);
  CUresult (*cuAttr)(int*, int, H, int) = get("cuKernelGetAttribute", 12000);
  CUresult (*cuUnload)(H) = get("cuLibraryUnload", 12000);

  int dev = 0;
  H ctx = NULL, library = NULL, module = NULL;
  if (cuInit(0) || cuDeviceGet(&dev, ordinal) || cuCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 4;
  static char log[65536];
  int opts[] = {5, 6};
  void* vals[] = {log, (void*)(uintptr_t)sizeof log};
  CUresult rc = cuLoad(&library, argv[1], opts, vals, 2, NULL, NULL, 0);
  if (rc) {
    printf("load: %d %s\n", rc, log);
    return 3;
  }
  unsigned n = 0;
  cuCount(&n, library);
  H* kernels = calloc(n ? n : 1, sizeof(H));
  if (n) cuEnum(kernels, n, library);
  rc = cuGetModule(&module, library);
  printf("kernels %u module %d log '%s'\n", n, rc, log);
  for (unsigned i = 0; i < n; ++i) {
    const char* name = "";
    H k = NULL;
    cuName(&name, kernels[i]);
    rc = cuGetKernel(&k, library, name);
    int a[7];
    for (int j = 0; j < 7; ++j) cuAttr(&a[j], j, k, dev);
    printf("%s %d regs %d shared %d const %d local %d threads %d\n", name, rc, a[4], a[1], a[2], a[3], a[0]);
  }
  cuUnload(library);
  return n ? 0 : 3;
}
