#!/usr/bin/env bash
# Builds the DocSession fuzzer and runs it: Fuzz/run.sh [SECONDS] [libFuzzer options...]
#
#   Fuzz/run.sh            600 seconds (the default)
#   Fuzz/run.sh 60         a short smoke run, for CI
#   Fuzz/run.sh 60 -seed=1 -print_pcs=1    extra options go to libFuzzer as they are
#   FUZZ_REPRODUCE=Fuzz/findings/x Fuzz/run.sh    build, then run one input and exit
#   FUZZ_SANITIZERS=fuzzer Fuzz/run.sh 600         without AddressSanitizer (about 3 times faster)
#
# One worker. New corpus entries go to Fuzz/corpus-generated/ (not committed); crashes, leaks,
# timeouts and out-of-memory inputs to Fuzz/artifacts/. The full libFuzzer log is in
# Fuzz/.build/fuzz.log; the last line printed is the summary. The exit status is libFuzzer's:
# 0 when nothing was found.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
seconds=600
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then
    seconds="$1"
    shift
fi
if [[ $# -gt 0 && "$1" != -* ]]; then
    echo "usage: Fuzz/run.sh [SECONDS] [-libFuzzer_option=value...]" >&2
    exit 2
fi

sanitizers="${FUZZ_SANITIZERS:-fuzzer,address}"
scratch="$here/.build"
if [[ "$sanitizers" != "fuzzer,address" ]]; then scratch="$here/.build/sanitize-${sanitizers//,/-}"; fi
generated="$here/corpus-generated"
artifacts="$here/artifacts"
large="$here/.build/seeds-large"
log="$scratch/fuzz.log"

# -sanitize=fuzzer instruments every Swift module for coverage and links libFuzzer; address adds
# AddressSanitizer. json-c is Debian's prebuilt library: not instrumented, but its allocations are
# still tracked by ASan and LeakSanitizer.
echo "Fuzz/run.sh: building (release, -sanitize=$sanitizers) in $scratch" >&2
swift build --package-path "$here" --scratch-path "$scratch" -c release \
    -Xswiftc -sanitize="$sanitizers" 2>&1 | { grep -v "Cannot export local symbol '__asan_extra_spill_area'" || true; } >&2
binary="$scratch/release/DocSessionFuzz"

# Leak checks stay on; short malloc stacks keep ASan's per-allocation cost down (a report still
# names the allocating frames).
export ASAN_OPTIONS="${ASAN_OPTIONS:-malloc_context_size=8:detect_leaks=1}"
# Swift's own crash backtracer would take over a trap (a violated property is a fatalError), fight
# ASan while reading the dead process's memory and keep the run waiting: libFuzzer handles it.
export SWIFT_BACKTRACE=enable=no

# The private directory the target confines the document methods' files to (see README.md).
export DOCSESSION_FUZZ_SANDBOX="$scratch/sandbox"
trap 'rm -rf "$DOCSESSION_FUZZ_SANDBOX"' EXIT

if [[ -n "${FUZZ_REPRODUCE:-}" ]]; then
    "$binary" "$@" "$FUZZ_REPRODUCE"
    exit $?
fi

mkdir -p "$generated" "$artifacts"
# The two 1,000,000-deep seeds are 2 MB each: written here rather than committed.
if [[ ! -s "$large/framed-nest-1000000" ]]; then
    python3 "$here/make-seeds.py" --large "$large"
fi

set +e
# The 1,000,000-deep seeds run once, whole, as checks: as fuzzing seeds they would fill the corpus
# with 2 MB mutants and slow every run tenfold, and 65 levels already cross the nesting limit.
echo "Fuzz/run.sh: checking the 1,000,000-deep seeds" >&2
"$binary" -rss_limit_mb=4096 -timeout=60 -artifact_prefix="$artifacts/" \
    "$large/framed-nest-1000000" "$large/bare-nest-1000000" >"$log" 2>&1
status=$?
if [[ $status -ne 0 ]]; then
    tail -n 60 "$log" >&2
    echo "DocSessionFuzz: 0 executions: FAILED on the 1,000,000-deep seeds (status $status)"
    exit $status
fi

echo "Fuzz/run.sh: fuzzing for ${seconds}s (log: $log)" >&2
# -max_len: 128 KiB, above the 8 KiB header line limit and the 4 KiB body cap the target sometimes
# sets, so both are crossed. -timeout: an input that takes 10 s is a hang (a normal one takes
# milliseconds).
"$binary" "$generated" "$here/corpus" \
    -dict="$here/docsession.dict" \
    -max_total_time="$seconds" \
    -max_len=131072 \
    -rss_limit_mb=4096 \
    -timeout=10 \
    -artifact_prefix="$artifacts/" \
    -print_final_stats=1 \
    "$@" >>"$log" 2>&1
status=$?
set -e

{ grep -E '^#[0-9]+[[:space:]]+(INITED|pulse)' "$log" || true; } | tail -n 3 >&2
executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
rss="$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)"
last="$({ grep -E '^#[0-9]+[[:space:]]' "$log" || true; } | tail -n 1)"
cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")"
ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")"
corp="$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$last")"
if [[ -z "$executions" ]]; then
    # A crash stops libFuzzer before its final stats: take the count from the last status line.
    executions="$(sed -n 's/^#\([0-9]*\)[[:space:]].*/\1/p' <<<"$last")"
fi
if [[ $status -eq 0 ]]; then
    result="no failure"
else
    tail -n 60 "$log" >&2
    artifact="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)"
    result="FAILED (status $status${artifact:+, input $artifact})"
fi
echo "DocSessionFuzz: ${executions:-?} executions in ${seconds}s (${rate:-?} exec/s), cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, peak RSS ${rss:-?} MB: $result"
exit $status
