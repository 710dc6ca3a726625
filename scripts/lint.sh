#!/usr/bin/env bash
# Lints src/: clang-format (.clang-format) and clang-tidy (.clang-tidy), clang-tidy in parallel over the
# translation units of a configured build's compile_commands.json. Exits 1 on any finding, 2 on bad usage.
#   scripts/lint.sh [--format-only | --tidy-only] [--changed BASE] [BUILD_DIR]
#     BUILD_DIR        a configured build folder (default build/default: cmake --preset default)
#     --changed BASE   format: only lines changed since the git revision BASE (git clang-format --diff);
#                      tidy: only the .cpp files changed since BASE
#     --cache FILE     tidy: skip the units whose content key (scripts/clean_units.py: the unit preprocessed, the
#                      config, the tool's version) FILE lists as found clean; CI uses .ci/tidy-clean.txt
#     --update-cache   with --cache: rewrite FILE with the keys of every unit now clean (run it after a change,
#                      and commit FILE; a stale FILE only makes CI tidy more)
#   DOOLY_LINT_JOBS=N  clang-tidy processes at once (default: the number of CPUs)
#   DOOLY_LINT_FILES="src/dooly/energy ..."   only files under these paths (and only their findings)
# Findings are printed as file:line: message [check], sorted and deduplicated (a header's finding is reported
# once, not once per file that includes it), then a count per file.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "lint: $1. Usage: scripts/lint.sh [--format-only | --tidy-only] [--changed BASE] [BUILD_DIR]" >&2; exit 2; }
do_format=1 do_tidy=1 base="" build=build/default cache="" update_cache=0
while [ $# -gt 0 ]; do
  case "$1" in
    --format-only) do_tidy=0 ;;
    --tidy-only) do_format=0 ;;
    --changed) [ $# -ge 2 ] || usage "--changed needs a git revision"; base=$2; shift ;;
    --cache) [ $# -ge 2 ] || usage "--cache needs a file"; cache=$2; shift ;;
    --update-cache) update_cache=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) usage "unknown option '$1'" ;;
    *) build=$1 ;;
  esac
  shift
done
for tool in clang-format clang-tidy; do
  command -v "$tool" >/dev/null || { echo "lint: $tool is not installed; install it (apt-get install $tool)" >&2; exit 2; }
done
if [ -n "$base" ] && ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  usage "--changed $base is not a git revision"
fi
# A unit's key holds its flags: keys from a build without CI's -Werror never match in CI, which then tidies every
# unit again (8-12 minutes). Refused before any work.
if [ "$update_cache" = 1 ] && ! grep -q -- '-Werror' "$build/compile_commands.json" 2>/dev/null; then
  echo "lint: --update-cache: $build is not configured as CI's builds are (no -Werror), so its keys would never" \
       "match there; configure it with DOOLY_WERROR=1 scripts/build.sh default (or use a clone's build after" \
       "scripts/test.sh)" >&2
  exit 2
fi

# Tracked and new (not ignored) C++ files under src/.
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- 'src/*.cpp' 'src/*.hpp' | sort -u)
if [ -n "$base" ]; then
  mapfile -t changed < <(git diff --name-only "$base" -- 'src/*.cpp' 'src/*.hpp'; git ls-files --others --exclude-standard -- 'src/*.cpp' 'src/*.hpp')
  files=()
  for f in "${changed[@]}"; do [ -f "$f" ] && files+=("$f"); done
fi
if [ -n "${DOOLY_LINT_FILES:-}" ]; then
  kept=()
  for f in "${files[@]}"; do
    for prefix in $DOOLY_LINT_FILES; do case "$f" in "$prefix"/*) kept+=("$f"); break ;; esac; done
  done
  files=("${kept[@]}")
fi
status=0

if [ "$do_format" = 1 ]; then
  if [ -n "$base" ]; then
    out=$(git clang-format --binary clang-format --diff "$base" -- src 2>&1 || true)
    if [ -n "$out" ] && ! grep -qE '^(no modified files to format|clang-format did not modify any files)' <<<"$out"; then
      echo "$out"; echo "lint: clang-format would change the lines above (fix: git clang-format $base)"; status=1
    else
      echo "lint: format: changed lines are formatted"
    fi
  else
    bad=0
    for f in "${files[@]}"; do
      n=$(clang-format --style=file "$f" | diff "$f" - | grep -c '^<' || true)
      if [ "$n" -gt 0 ]; then echo "format: $f: $n lines differ (clang-format --dry-run $f)"; bad=$((bad + n)); fi
    done
    if [ "$bad" -gt 0 ]; then echo "lint: format: $bad lines differ from .clang-format"; status=1
    else echo "lint: format: ${#files[@]} files formatted"; fi
  fi
fi

if [ "$do_tidy" = 1 ]; then
  db="$build/compile_commands.json"
  [ -f "$db" ] || usage "$db is missing; configure first: cmake --preset default -B $build"
  root=$PWD
  # The src/ translation units the build compiles (header_check units live in the build folder: not these).
  mapfile -t units < <(python3 - "$db" "$root" "${files[@]}" <<'PY'
import json, os, sys
db, root, wanted = sys.argv[1], sys.argv[2], set(sys.argv[3:])
seen = set()
for e in json.load(open(db)):
    f = os.path.relpath(os.path.join(e["directory"], e["file"]), root)
    if f.startswith("src/") and f.endswith(".cpp") and f in wanted and f not in seen:
        seen.add(f); print(f)
PY
  )
  jobs=${DOOLY_LINT_JOBS:-$(nproc)}
  logs=$(mktemp -d)
  trap 'rm -rf "$logs"' EXIT
  # clang-tidy reads the commands without the precompiled header of a DOOLY_PCH build (gcc's, which clang cannot
  # load): scripts/clean_units.py compdb.
  python3 scripts/clean_units.py compdb "$build" "$logs/db"
  declare -A key_of=()
  clean_before=()
  if [ -n "$cache" ]; then
    todo=()
    while read -r f k; do
      key_of[$f]=$k
      if [ "$k" != none ] && [ -f "$cache" ] && grep -qxF "$k" "$cache"; then clean_before+=("$f"); else todo+=("$f"); fi
    done < <(DOOLY_LINT_JOBS=$jobs python3 scripts/clean_units.py keys "$build" "${units[@]}")
    echo "lint: clang-tidy: ${#clean_before[@]} of ${#units[@]} files are as they were when found clean ($cache)"
    units=("${todo[@]}")
  fi
  echo "lint: clang-tidy over ${#units[@]} files, $jobs at a time"
  printf '%s\n' "${units[@]}" | xargs -r -P "$jobs" -I{} sh -c \
    'clang-tidy -p "$1" --quiet "$2" > "$3/$(echo "$2" | tr / _).log" 2>&1 || true' _ "$logs/db" {} "$logs"
  if [ -n "$cache" ] && [ "$update_cache" = 1 ]; then
    # Clean: no finding in our own files (src/) in its log. Only current units' keys are kept.
    {
      for f in "${clean_before[@]}"; do echo "${key_of[$f]}"; done
      for f in "${units[@]}"; do
        log="$logs/$(echo "$f" | tr / _).log"
        if [ "${key_of[$f]}" != none ] && ! grep -E '^/.*: (warning|error): ' "$log" | grep -q "^$root/src/"; then
          echo "${key_of[$f]}"
        fi
      done
    } | sort -u > "$cache"
    echo "lint: clang-tidy: $cache now lists $(wc -l < "$cache") clean units"
  fi
  # warning/error lines of our own files, made relative, deduplicated.
  findings=$(cat "$logs"/*.log 2>/dev/null | grep -E '^/.*: (warning|error): ' | sed "s|^$root/||" \
             | grep -E '^src/' | sort -u || true)
  if [ -n "${DOOLY_LINT_FILES:-}" ] && [ -n "$findings" ]; then
    pattern=$(for prefix in $DOOLY_LINT_FILES; do printf '^%s/|' "$prefix"; done)
    findings=$(grep -E "${pattern%|}" <<<"$findings" || true)
  fi
  if [ -n "$findings" ]; then
    echo "$findings"
    echo "lint: clang-tidy findings per file:"
    cut -d: -f1 <<<"$findings" | sort | uniq -c | sort -rn
    echo "lint: clang-tidy: $(wc -l <<<"$findings") findings"
    status=1
  else
    echo "lint: clang-tidy: no findings"
  fi
fi
exit "$status"
