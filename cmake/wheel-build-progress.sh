#!/usr/bin/env bash
# The wheel's build step (cmake/wheel.cmake): builds the nested tree, and when
# there is a terminal, shows its progress there. pip hides a build backend's
# output unless run with -v, so `pip install .` would otherwise show nothing
# but a spinner for the minutes the first compile takes. Without a terminal
# (CI, pip -v piped to a log) it is the plain build.
#   usage: wheel-build-progress.sh CMAKE TREE
set -o pipefail
cmake=$1 tree=$2
if ! { true >/dev/tty; } 2>/dev/null; then
  exec "$cmake" --build "$tree"
fi
"$cmake" --build "$tree" 2>&1 | {
  shown=0
  while IFS= read -r line; do
    printf '%s\n' "$line"
    case $line in
      \[[0-9]*/[0-9]*\]\ Building*|\[[0-9]*/[0-9]*\]\ Linking*)
        step=${line%%]*}]
        what=${line##* }   # the output file
        what=${what##*/}
        printf '\r\033[Ktvmffi-jit: compiling the CLI for the wheel %s %s' "$step" "$what" >/dev/tty
        shown=1 ;;
    esac
  done
  [ "$shown" = 1 ] && printf '\r\033[Ktvmffi-jit: compiled the CLI for the wheel\n' >/dev/tty
  true
}
