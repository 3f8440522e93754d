#!/bin/sh
# Runs a GoogleTest binary (arguments: the binary and its options) and exits 77, CTest's
# SKIP_RETURN_CODE, when it passed without running a case: every selected case skipped (the CUDA
# instances without a GPU) or none was selected. A binary where some case ran keeps its own exit code.
# --fail-when-none-ran (first argument): a CPU entry, where a run of no case is a failure instead (its
# cases moved elsewhere, or a filter that matches nothing).
fail_when_none=0
if [ "${1:-}" = "--fail-when-none-ran" ]; then
  fail_when_none=1
  shift
fi
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q '^\[  PASSED  \] 0 tests\.'; then
  reason=$(printf '%s\n' "$out" | grep -A1 ': Skipped$' | sed -n 2p)
  if [ "$fail_when_none" -eq 1 ]; then
    echo "no case ran (${reason:-no case selected}): a CPU entry must run at least one"
    exit 1
  fi
  echo "every case skipped (${reason:-no case selected}): reported to CTest as skipped"
  exit 77
fi
exit "$rc"
