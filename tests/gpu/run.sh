#!/usr/bin/env bash
# GPU test of driver validation (`inspect --load`), see docs/gpu-validation.md.
#
#   tests/gpu/run.sh prepare DIR   here (toolkit + tvm-ffi, no GPU): build the TVM FFI
#                                  CUDA modules with tvmffi-jit into DIR
#   tests/gpu/run.sh run [DIR]     on a GPU machine with nvcc: build the other fixtures,
#                                  validate every one and check its verdict; DIR holds
#                                  the prepared modules and libtvm_ffi.so (optional:
#                                  without them those cases are SKIP)
#
# Environment: TVMFFI_JIT_BIN (default build/tvmffi-jit), DEVICE (default 0),
# ARCH (sm_XY of the device; default from nvidia-smi).
# Output: one PASS/FAIL/SKIP line per case, then the attribute comparison; exit 1
# if anything failed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${TVMFFI_JIT_BIN:-$ROOT/build/tvmffi-jit}
DEVICE=${DEVICE:-0}
HERE=$ROOT/tests/gpu

prepare() {
  local dir=$1
  mkdir -p "$dir"
  "$BIN" build -m "$ROOT/share/tvmffi-jit/examples/cuda_add_one/manifest.json" --arch 9.0 \
    --build-dir "$dir/b1" >/dev/null && cp "$dir/b1/cuda_add_one.so" "$dir/tvmffi_cuda_module.so"
  local so
  so=$("$BIN" build -m "$ROOT/share/tvmffi-jit/examples/embed_cubin/tvmffi-jit.json" --arch 9.0 \
    --build-dir "$dir/b2") && cp "$so" "$dir/tvmffi_embed_module.so"
  cp "$(tvm-ffi-config --libdir)/libtvm_ffi.so" "$dir/"
  rm -rf "$dir/b1" "$dir/b2"
  ls -la "$dir"
}

fail=0
# check NAME EXPECTED_EXIT PATTERN FILE [extra inspect args]: runs
# `inspect --load --json` and checks the exit code and that the driver
# verdict message matches PATTERN (grep -E).
check() {
  local name=$1 want=$2 pattern=$3 file=$4
  shift 4
  local json=$W/$name.json
  "$BIN" inspect --load --json --device "$DEVICE" "$@" "$file" >"$json" 2>"$W/$name.err"
  local got=$?
  local msg
  msg=$(python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["files"][0]; print(f.get("driver",{}).get("message", f.get("error","")))' "$json" 2>/dev/null ||
        head -c 300 "$W/$name.err")
  if [[ $got == "$want" ]] && grep -Eq -- "$pattern" <<<"$msg"; then
    printf 'PASS  %-26s exit %s  %s\n' "$name" "$got" "$msg"
  else
    printf 'FAIL  %-26s exit %s (want %s, /%s/)  %s\n' "$name" "$got" "$want" "$pattern" "$msg"
    fail=1
  fi
}

run() {
  local prepared=${1:-}
  ARCH=${ARCH:-sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i "$DEVICE" | tr -d ' .')}
  W=$(mktemp -d "${TMPDIR:-/tmp}/tvmffi-jit-gpu.XXXXXX")
  echo "binary: $BIN"
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader -i "$DEVICE"
  nvcc --version | tail -n 2
  echo "fixtures in $W (arch $ARCH)"
  local cu=$HERE/kernels.cu
  local vnum=${ARCH#sm_}
  (
    cd "$W" || exit 1
    nvcc -cubin -arch="$ARCH" -o good.cubin "$cu"
    for m in none speed size; do
      nvcc -fatbin -gencode "arch=compute_$vnum,code=$ARCH" -gencode "arch=compute_$vnum,code=compute_$vnum" \
        --compress-mode=$m -Xfatbin -compress-all -o "fatbin-$m.fatbin" "$cu"
    done
    nvcc -ptx -arch="compute_$vnum" -o good.ptx "$cu"
    # Older SASS the device cannot run + PTX it can JIT: the driver must pick the PTX.
    nvcc -fatbin -DTVMFFI_JIT_NO_CLUSTER -gencode arch=compute_80,code=sm_80 \
      -gencode arch=compute_80,code=compute_80 -o ptx-fallback.fatbin "$cu"
    nvcc -shared -Xcompiler -fPIC -arch="$ARCH" -o host.so "$cu"
    # __cluster_dims__ needs sm_90: build the sm_80 cubin without clu.
    nvcc -cubin -arch=sm_80 -DTVMFFI_JIT_NO_CLUSTER -o wrong-arch-sm80.cubin "$cu"
    nvcc -cubin -arch=sm_100a -o wrong-arch-sm100a.cubin "$cu"
    nvcc -fatbin -gencode arch=compute_100a,code=sm_100a -gencode arch=compute_100a,code=compute_100a \
      -o wrong-arch.fatbin "$cu"
    sed 's/^\([[:space:]]*\)ret;/\1retx;/' good.ptx >broken.ptx
    sed 's/^\.version [0-9.]*/.version 9.9/' good.ptx >future-version.ptx
    sed 's/^\.target sm_[0-9a-z]*/.target sm_100a/' good.ptx >target-too-new.ptx
    head -c 4096 /dev/urandom >random.bin
    for n in 1000 4000 8000 12000; do head -c $n good.cubin >"truncated-$n.cubin"; done
    # One flipped bit in the kernel name "add" (0x64 -> 0xe4: not UTF-8) wherever it is
    # stored, so symbol and section names still agree: the probe protocol must carry the
    # name's bytes to the driver and back (it was `internal error`, exit 5, before).
    python3 -c 'import re,sys; d=bytearray(open(sys.argv[1],"rb").read())
for m in re.finditer(rb"add\x00", bytes(d)): d[m.start()+1] ^= 0x80
open(sys.argv[2],"wb").write(d)' good.cubin non-utf8-name.cubin
  ) >"$W/build.log" 2>&1 || { cat "$W/build.log"; echo "FAIL  fixtures did not build"; exit 1; }

  check good-cubin 0 '^valid: 5 kernel' "$W/good.cubin"
  check non-utf8-kernel-name 0 '^valid: 5 kernel' "$W/non-utf8-name.cubin"
  check fatbin-plain 0 '^valid: 5 kernel' "$W/fatbin-none.fatbin"
  check fatbin-lz4 0 '^valid: 5 kernel' "$W/fatbin-speed.fatbin"
  check fatbin-zstd 0 '^valid: 5 kernel' "$W/fatbin-size.fatbin"
  check ptx-jit 0 '^valid: 5 kernel' "$W/good.ptx"
  check fatbin-ptx-fallback 0 '^valid: 4 kernel' "$W/ptx-fallback.fatbin"
  CUDA_MODULE_LOADING=EAGER check good-cubin-eager 0 '^valid: 5 kernel' "$W/good.cubin"
  DEVICE=99 check no-such-device 4 'no device: device 99 not found' "$W/good.cubin"
  check host-so 0 '^valid: 5 kernel' "$W/host.so"
  if [[ -n $prepared && -f $prepared/tvmffi_cuda_module.so ]]; then
    export TVMFFI_JIT_TVM_FFI_LIB=$prepared/libtvm_ffi.so
    check tvmffi-cuda-module 0 '^valid: 1 kernel.*module loads, 1 function' "$prepared/tvmffi_cuda_module.so"
    check tvmffi-embed-module 0 '^valid: .*module loads' "$prepared/tvmffi_embed_module.so"
  else
    echo "SKIP  tvmffi modules (no prepared DIR; see 'prepare')"
  fi
  check wrong-arch-sm80 3 'CUDA_ERROR_NO_BINARY_FOR_GPU' "$W/wrong-arch-sm80.cubin"
  check wrong-arch-sm100a 3 'CUDA_ERROR_NO_BINARY_FOR_GPU' "$W/wrong-arch-sm100a.cubin"
  check wrong-arch-fatbin 3 'CUDA_ERROR_NO_BINARY_FOR_GPU' "$W/wrong-arch.fatbin"
  check broken-ptx 3 'CUDA_ERROR_INVALID_PTX.*retx' "$W/broken.ptx"
  check future-version-ptx 3 'CUDA_ERROR_UNSUPPORTED_PTX_VERSION.*9\.9' "$W/future-version.ptx"
  check ptx-target-too-new 3 'CUDA_ERROR_INVALID_PTX' "$W/target-too-new.ptx"
  check random-bytes 3 'unrecognized content|not device code' "$W/random.bin"
  for n in 1000 4000 8000 12000; do
    check "truncated-$n" 3 'offline structure check failed' "$W/truncated-$n.cubin"
  done
  # The same truncated cubins handed to the real driver anyway (test hook):
  # whatever it does (crash, hang, error), the tool must survive and say so.
  for n in 1000 4000 8000 12000; do
    TVMFFI_JIT_VALIDATE_UNGATED=1 check "truncated-$n-ungated" 3 \
      'the driver \(loaded anyway\): (driver crashed with SIG[A-Z]+|driver did not return within 10 s|entry 1: |accepted it)' \
      "$W/truncated-$n.cubin" --timeout 10
  done

  echo
  echo "load mode under CUDA_MODULE_LOADING=EAGER: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["files"][0]["driver"]["load_mode"])' "$W/good-cubin-eager.json")"
  echo "driver attributes vs offline parse (good.cubin, $ARCH):"
  python3 - "$W/good-cubin.json" <<'PY' || fail=1
import json, sys
f = json.load(open(sys.argv[1]))["files"][0]
offline = {k["name"]: k for e in f["entries"] for k in e["kernels"]}
d = f["driver"]
print(f"  device {d['device']['name']} cc {d['device']['compute_capability']} driver {d['driver_version']} load mode {d['load_mode']}")
print("  (driver/offline; offline shared is the raw .nv.shared size, local the frame size)")
print(f"  {'kernel':<20} {'regs':>9} {'shared':>13} {'const':>11} {'local':>11} {'max thr':>11} {'cluster':>8}")
for e in d["entries"]:
    for k in e["kernels"]:
        a, o = k["attributes"], offline.get(k["name"], {})
        pair = lambda x, y: f"{x}/{'-' if y is None else y}"
        print(f"  {k['name']:<20} {pair(a['num_regs'], o.get('registers')):>9} "
              f"{pair(a['shared_size_bytes'], o.get('shared_bytes')):>13} {a['const_size_bytes']:>11} "
              f"{pair(a['local_size_bytes'], o.get('stack_bytes')):>11} "
              f"{pair(a['max_threads_per_block'], o.get('max_threads')):>11} {str(a['cluster_dims']):>8}")
    mm = e["mismatches"]
    print("  mismatches:", mm if mm else "none")
    if mm:
        sys.exit(1)
PY
  echo
  if [[ $fail == 0 ]]; then echo "ALL PASS"; else echo "SOME FAILED"; fi
  return $fail
}

case ${1:-} in
  prepare) prepare "${2:?DIR}" ;;
  run) run "${2:-}" ;;
  *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
