# Sourced by scripts/setup.sh and scripts/browser.sh: `with_uv ARGS` installs ARGS into .venv with
# uv (installed there by pip first), given the package sources pip is configured with. uv installs
# the same versions as pip in a fraction of the time (`bash scripts/setup.sh dev` into a fresh
# .venv: 29 s against 74 with TFM_INSTALLER=pip, docs/results.md); it returns non-zero where uv
# cannot be had or fails, and the caller then uses pip. TFM_INSTALLER=pip skips uv.

# pip's configured sources (`pip config list`: index-url, extra-index-url, find-links,
# constraint) as uv's options, one per line
pip_sources_for_uv() {
  .venv/bin/python -m pip config list 2>/dev/null | while IFS= read -r line; do
    local key=${line%%=*} value=${line#*=}
    value=${value#\'} && value=${value%\'}
    for v in $value; do
      case "${key##*.}" in
        index-url | extra-index-url | find-links | constraint) printf '%s\n' "--${key##*.}" "$v" ;;
      esac
    done
  done
}

with_uv() {
  [ "${TFM_INSTALLER:-uv}" = uv ] || return 1
  [ -x .venv/bin/uv ] || .venv/bin/python -m pip install -q uv >/dev/null 2>&1 || return 1
  local sources=()
  mapfile -t sources < <(pip_sources_for_uv)
  # pip's behaviour across several indexes (the best version anywhere), and .pyc files written
  # now as pip writes them (a process that may not write them would compile at every start)
  .venv/bin/uv pip install -q --python .venv/bin/python --index-strategy unsafe-best-match \
    --compile-bytecode "${sources[@]}" "$@"
}
