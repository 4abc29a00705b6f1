#!/usr/bin/env bash
# Size measures of the product code, so that docs/architecture.md's figures
# (largest file, largest function, files over the size targets) can be
# measured again after a restructure by anyone, the same way.
#
#   bash deploy/code_metrics.sh [N]            # the N largest of each (default 10)
#   bash deploy/code_metrics.sh --mentions REGEX
#       # product files whose text matches REGEX (grep -E), per directory:
#       # a crude upper bound on the files a kind or a name reaches
#
# Product code: agent/, cupti_shim/, bpf/, proto/gpuos_trace.proto (not the
# tests, benchmarks, workloads or generated code).  Lines are physical lines
# (comments included: they are read too).  Functions come from Universal Ctags
# (Debian: universal-ctags), each one's lines from its first line to its end
# line; lambdas count inside the function that holds them.  Classes and
# structs are listed too (a class can be large where no function is).
set -eu  # no pipefail: `head` closing a pipe early is not an error here
cd "$(dirname "$0")/.."

PRODUCT=(agent cupti_shim bpf proto/gpuos_trace.proto)
FILE_TARGET=600
FUNCTION_TARGET=80

product_files() {
  find "${PRODUCT[@]}" -type f \( -name '*.cc' -o -name '*.h' -o -name '*.c' -o -name '*.py' \
    -o -name '*.proto' \) -not -path 'proto/perfetto/*' | sort
}

if [[ "${1:-}" == "--mentions" ]]; then
  [[ $# -eq 2 ]] || { echo "usage: $0 --mentions REGEX" >&2; exit 2; }
  mapfile -t hits < <(product_files | xargs grep -lE -- "$2" || true)
  printf '%s\n' "${hits[@]}"
  echo "${#hits[@]} product files match /$2/:"
  printf '%s\n' "${hits[@]}" | awk -F/ 'NF { d = (NF > 2 ? $1 "/" $2 : $1); n[d]++ }
    END { for (d in n) printf "  %-20s %d\n", d, n[d] }' | sort
  exit 0
fi

N=${1:-10}
mapfile -t files < <(product_files)

echo "== Product files: ${#files[@]}, lines: $(cat "${files[@]}" | wc -l)"
echo
echo "== Largest files (lines; target <= $FILE_TARGET)"
wc -l "${files[@]}" | grep -v ' total$' | sort -rn | head -n "$N"
over=$(wc -l "${files[@]}" | grep -v ' total$' | awk -v t=$FILE_TARGET '$1 > t' | wc -l)
echo "files over $FILE_TARGET lines: $over"

echo
echo "== Lines per directory"
wc -l "${files[@]}" | grep -v ' total$' | awk '{ split($2, p, "/"); d = (p[3] != "" ? p[1] "/" p[2] : p[1]);
  lines[d] += $1; n[d]++ } END { for (d in lines) printf "%7d lines %4d files  %s\n", lines[d], n[d], d }' |
  sort -rn

if ! command -v ctags >/dev/null || ! ctags --version 2>/dev/null | grep -q 'Universal Ctags'; then
  echo
  echo "== Functions: skipped (needs Universal Ctags: apt-get install universal-ctags)"
  exit 0
fi

# One line per definition of the given ctags kinds (C/C++, Python): lines,
# name, file:line, and whether it is a class member or free.
# .h files are read as C++ (the bpf/ ones are C, which the C++ parser reads
# as well).
definitions() {
  ctags --output-format=u-ctags --fields=+neK --kinds-C++="$1" --kinds-C="$1" --kinds-Python="$2" \
    --langmap=C++:+.h -f - "${files[@]}" 2>/dev/null |
    awk -F'\t' '$1 !~ /^__anon/ {
      line = 0; end = 0
      for (i = 4; i <= NF; i++) {
        if ($i ~ /^line:/) line = substr($i, 6) + 0
        if ($i ~ /^end:/) end = substr($i, 5) + 0
      }
      member = ($0 ~ /\t(class|struct):/) ? "member" : "free"
      if (line > 0 && end >= line) printf "%d\t%s\t%s:%d\t%s\n", end - line + 1, $1, $2, line, member
    }'
}

functions() { definitions f f; }

echo
echo "== Largest functions (lines; target <= $FUNCTION_TARGET)"
functions | sort -t$'\t' -k1,1rn | head -n "$N" | awk -F'\t' '{ printf "%6d  %-32s %s\n", $1, $2, $3 }'
echo "functions over $FUNCTION_TARGET lines: $(functions | awk -F'\t' -v t=$FUNCTION_TARGET '$1 > t' | wc -l)"

echo
echo "== Largest classes and structs (lines)"
definitions cs c | sort -t$'\t' -k1,1rn | head -n "$N" | awk -F'\t' '{ printf "%6d  %-32s %s\n", $1, $2, $3 }'

echo
echo "== Free functions of one name defined in 3 or more files (helpers without one home)"
functions | awk -F'\t' '$4 == "free" { split($3, a, ":"); k = $2 SUBSEP a[1]
    if (!(k in seen)) { seen[k] = 1; n[$2]++; where[$2] = where[$2] " " a[1] } }
  END { for (x in n) if (n[x] >= 3) printf "%3d  %-16s%s\n", n[x], x, where[x] }' | sort -rn
