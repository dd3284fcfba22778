#!/usr/bin/env bash
# Enforces the layer rule in ARCHITECTURE.md: a layer includes only itself and
# the layers below it.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed=(
  [util]="util"
  [toolchain]="util toolchain"
  [devcode]="util devcode"
  [cache]="util toolchain cache"
  [compile]="util toolchain cache devcode compile"
  [driver]="util toolchain devcode driver"
  [cli]="util toolchain compile cache devcode driver cli"
)
status=0
for layer in "${!allowed[@]}"; do
  for f in $(ls src/$layer/*.cpp src/$layer/*.h include/tvmffi_jit/$layer/*.h 2>/dev/null); do
    while read -r inc; do
      dep=${inc#tvmffi_jit/}
      dep=${dep%%/*}
      if [[ " ${allowed[$layer]} " != *" $dep "* ]]; then
        echo "layer violation: $f includes tvmffi_jit/$dep (layer '$layer' may use: ${allowed[$layer]})" >&2
        status=1
      fi
    done < <(grep -ohE '#include "tvmffi_jit/[a-z_]+/' "$f" | sed -E 's/#include "//; s/\/$//')
  done
done
exit $status
