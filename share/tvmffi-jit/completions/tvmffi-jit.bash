# bash completion for tvmffi-jit                              -*- shell-script -*-
# Installed as share/bash-completion/completions/tvmffi-jit; or source it.
# The option lists mirror `tvmffi-jit <command> --help` (the tests check that
# every option there appears here).

_tvmffi_jit_commands="build inspect cache doctor"
_tvmffi_jit_cache_commands="path list show verify clean gc stats export import keygen"
# --cache-dir and --json belong to the commands but are accepted before them too.
_tvmffi_jit_global_opts="-h --help --version -v --verbose -q --quiet --cache-dir --json"
_tvmffi_jit_build_opts="-h --help -m --manifest --name --function --cflag --cuda-cflag --ldflag -I --include --isystem --cuda-runtime --cuda-driver
  --arch --backend --emit --compiler --kernel-name --embed-cubin --build-dir --tvm-ffi-root -j --jobs --json
  -k --keep-going --mem-per-job --job-trace --split-compile --cxx-launcher --cuda-launcher
  -v --verbose -q --quiet --cache-dir --no-cache --remote --remote-read-only --remote-namespace --remote-sign-key --remote-trusted-key --base-dir -o --output --link-to --depfile --compile-commands --force --verify --validate --require-driver --device --timeout"
_tvmffi_jit_inspect_opts="-h --help --json -j --jobs --no-demangle --no-ptx --scan-data --load --device --timeout"
_tvmffi_jit_doctor_opts="-h --help --json --cache-dir --tvm-ffi-root --require"
_tvmffi_jit_cache_common_opts="-h --help --cache-dir --json"
_tvmffi_jit_archs="7.5 8.0 8.6 8.7 8.9 9.0 9.0a 10.0 10.0a 10.0f 10.3 11.0 12.0 12.0a 12.0f 12.1 9.0+PTX 10.0+PTX 12.0+PTX"
_tvmffi_jit_components="c++ cc nvcc nvrtc tvm-ffi driver gpu cache"

_tvmffi_jit_cache_opts() {
  case $1 in
    show) echo "$_tvmffi_jit_cache_common_opts" ;;
    verify) echo "$_tvmffi_jit_cache_common_opts --remove --trusted-key" ;;
    clean) echo "$_tvmffi_jit_cache_common_opts --older-than" ;;
    gc) echo "$_tvmffi_jit_cache_common_opts --max-size" ;;
    stats) echo "$_tvmffi_jit_cache_common_opts --zero" ;;
    export) echo "$_tvmffi_jit_cache_common_opts --sign-key" ;;
    keygen) echo "-h --help --json --out" ;;
    *) echo "$_tvmffi_jit_cache_common_opts" ;;
  esac
}

# Completes the last element of a comma-separated list ("8.0,9.0" or "nvcc,gpu").
_tvmffi_jit_complete_list() {
  local cur=$1 words=$2 prefix=""
  if [[ $cur == *,* ]]; then
    prefix=${cur%,*},
    cur=${cur##*,}
  fi
  local w
  COMPREPLY=()
  for w in $words; do
    [[ $w == "$cur"* ]] && COMPREPLY+=("$prefix$w")
  done
  compopt -o nospace 2>/dev/null
}

_tvmffi_jit_files() {
  # $1: a glob pattern of extensions (e.g. "@(c|cc|cpp|cxx|cu|o)"), or empty for any file.
  local cur=$1 pattern=$2
  if declare -F _filedir >/dev/null; then
    if [[ -n $pattern ]]; then _filedir "$pattern"; else _filedir; fi
  else
    local IFS=$'\n'
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}

_tvmffi_jit_dirs() {
  if declare -F _filedir >/dev/null; then
    _filedir -d
  else
    local IFS=$'\n'
    COMPREPLY=($(compgen -d -- "$1"))
  fi
}

_tvmffi_jit() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null; then
    _init_completion -n =: || return
  else
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
  fi

  # The command (and the cache subcommand): the first words that are not options.
  local i command="" subcommand=""
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
      --cache-dir) ((i++)) ;;  # its value is not the command
      -*) ;;
      *)
        if [[ -z $command ]]; then
          command=${words[i]}
        elif [[ $command == cache && -z $subcommand ]]; then
          subcommand=${words[i]}
          break
        fi
        ;;
    esac
  done

  # Values of options that take one.
  case $prev in
    -m | --manifest) _tvmffi_jit_files "$cur" "json"; return ;;
    --emit) COMPREPLY=($(compgen -W "module object cubin fatbin ptx" -- "$cur")); return ;;
    --compiler) COMPREPLY=($(compgen -W "nvcc nvrtc" -- "$cur")); return ;;
    --backend) COMPREPLY=($(compgen -W "cuda hip" -- "$cur")); return ;;
    --split-compile) COMPREPLY=($(compgen -W "off auto" -- "$cur")); return ;;
    --arch) _tvmffi_jit_complete_list "$cur" "$_tvmffi_jit_archs"; return ;;
    --require) _tvmffi_jit_complete_list "$cur" "$_tvmffi_jit_components"; return ;;
    -I | --include | --isystem | --build-dir | --cache-dir | --tvm-ffi-root | --base-dir | --out) _tvmffi_jit_dirs "$cur"; return ;;
    -o | --output | --link-to | --depfile | --compile-commands) _tvmffi_jit_files "$cur" ""; return ;;
    --remote-sign-key | --sign-key) _tvmffi_jit_files "$cur" "sec"; return ;;
    --remote-trusted-key) _tvmffi_jit_files "$cur" "pub"; return ;;
    --embed-cubin)
      if [[ $cur == *=* ]]; then
        local name=${cur%%=*}
        cur=${cur#*=}
        _tvmffi_jit_files "$cur" "@(cubin|fatbin|cu)"
        COMPREPLY=("${COMPREPLY[@]/#/$name=}")
      fi
      return
      ;;
    --cxx-launcher | --cuda-launcher)
      COMPREPLY=($(compgen -c -- "$cur"))
      return
      ;;
    --older-than)  # a unit is required: a bare number is refused
      COMPREPLY=($(compgen -W "12h 1d 7d 30d" -- "$cur"))
      return
      ;;
    --max-size)
      COMPREPLY=($(compgen -W "500M 1G 2G 10G" -- "$cur"))
      return
      ;;
    --name | --function | --cflag | --cuda-cflag | --ldflag | --kernel-name | -j | --jobs | --device | --timeout | \
      --mem-per-job)
      return
      ;;
  esac

  case $command in
    "")
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$_tvmffi_jit_global_opts" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "$_tvmffi_jit_commands" -- "$cur"))
      fi
      ;;
    build)
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$_tvmffi_jit_build_opts" -- "$cur"))
      else
        _tvmffi_jit_files "$cur" "@(c|cc|cpp|cxx|cu|o|C|CC|CPP|CXX|CU)"
      fi
      ;;
    inspect)
      if [[ $cur == -* ]]; then
        local opts_var=_tvmffi_jit_${command}_opts
        COMPREPLY=($(compgen -W "${!opts_var}" -- "$cur"))
      else
        _tvmffi_jit_files "$cur" ""
      fi
      ;;
    doctor)
      COMPREPLY=($(compgen -W "$_tvmffi_jit_doctor_opts" -- "$cur"))
      ;;
    cache)
      if [[ -z $subcommand ]]; then
        if [[ $cur == -* ]]; then
          COMPREPLY=($(compgen -W "-h --help" -- "$cur"))
        else
          COMPREPLY=($(compgen -W "$_tvmffi_jit_cache_commands" -- "$cur"))
        fi
      else
        COMPREPLY=($(compgen -W "$(_tvmffi_jit_cache_opts "$subcommand")" -- "$cur"))
      fi
      ;;
  esac
}

complete -F _tvmffi_jit tvmffi-jit
