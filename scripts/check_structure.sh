#!/usr/bin/env bash
# Structure checks the test suite runs (scripts/test.sh): no import circles between modules
# (scripts/check_module_cycles.py) and no non-test Rust source file over 500 lines (test files:
# tests.rs, anything under tests/ or testing/).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
python3 scripts/check_module_cycles.py || status=1
long=$(git ls-files 'crates/*.rs' | grep -vE '(^|/)(tests|testing)(/|\.rs$)' \
  | while read -r f; do n=$(wc -l <"$f"); [ "$n" -gt 500 ] && echo "$f: $n lines"; done || true)
if [ -n "$long" ]; then
  echo "non-test source files over 500 lines:"; echo "$long"; status=1
else
  echo "no non-test source file over 500 lines"
fi
exit $status
