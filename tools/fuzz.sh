#!/usr/bin/env bash
# Run every fuzz harness of fuzz/ for MINUTES each (default 1), JOBS at a time (default 2).
#
#   tools/fuzz.sh [MINUTES] [HARNESS ...]        e.g. tools/fuzz.sh 10 fuzz_gguf fuzz_blocks
#
# C harnesses (libFuzzer + ASan + UBSan) are built with clang into build-fuzz/ (CMake
# -DCOLIBRI_FUZZ=ON); Python harnesses (atheris) run against the source tree with the library
# in build/ (or $COLIBRI_LIB). Seeds come from fuzz/make_seeds.py (the test models); corpora
# grow in build-fuzz/corpus/, crashes land in build-fuzz/findings/, logs in build-fuzz/logs/.
# A harness whose tools are missing (no clang or libFuzzer runtime, no atheris) is skipped
# with a message. Prints one line per harness (CPU seconds, executions, coverage, result) and
# exits 1 if any harness found something. NICE=10 runs them at lower priority.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MINUTES=${1:-1}
shift || true
JOBS=${JOBS:-2}
OUT=$ROOT/build-fuzz
C_HARNESSES="fuzz_native_load fuzz_json_check fuzz_blocks"
PY_HARNESSES="fuzz_gguf fuzz_safetensors fuzz_config fuzz_tokenizer fuzz_chat_template"
HARNESSES=${*:-$C_HARNESSES $PY_HARNESSES}
SECONDS_EACH=$(python3 -c "print(max(1, int(float('$MINUTES') * 60)))")
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT/corpus" "$OUT/findings" "$OUT/logs"

have_c=0
if command -v clang >/dev/null && echo 'int LLVMFuzzerTestOneInput(const char*d,long n){return 0;}' |
        clang -x c -fsanitize=fuzzer,address,undefined -o "$OUT/probe" - >/dev/null 2>&1; then
    if CC=clang cmake -S . -B "$OUT" -DCMAKE_BUILD_TYPE=Release -DCOLIBRI_FUZZ=ON >"$OUT/logs/cmake.log" 2>&1 &&
            cmake --build "$OUT" -j2 --target $C_HARNESSES >>"$OUT/logs/cmake.log" 2>&1; then
        have_c=1
    else
        echo "fuzz: the C harnesses did not build (see $OUT/logs/cmake.log)"; exit 1
    fi
else
    echo "fuzz: no clang with libFuzzer (Debian: apt-get install clang libclang-rt-14-dev); C harnesses skipped"
fi

have_py=0
if "$PYTHON" -c "import atheris" 2>/dev/null; then
    have_py=1
    if [ -z "${COLIBRI_LIB:-}" ]; then
        cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >"$OUT/logs/lib.log" 2>&1 &&
            cmake --build build -j2 --target colibri >>"$OUT/logs/lib.log" 2>&1 ||
            { echo "fuzz: libcolibri did not build (see $OUT/logs/lib.log)"; exit 1; }
        export COLIBRI_LIB=$ROOT/build/libcolibri.so
    fi
else
    echo "fuzz: atheris is not installed (pip install '.[fuzz]'); Python harnesses skipped"
fi

if [ ! -d "$OUT/seeds" ]; then
    PYTHONPATH=$ROOT "$PYTHON" fuzz/make_seeds.py "$OUT/seeds.partial" >"$OUT/logs/seeds.log" 2>&1 ||
        { echo "fuzz: making the seeds failed (see $OUT/logs/seeds.log)"; exit 1; }
    mv "$OUT/seeds.partial" "$OUT/seeds"
fi

run_one() {   # harness -> runs it, writes $OUT/logs/<harness>.log and .status
    local name=$1 cmd
    # -timeout is by the clock: 10 s for C; 30 s for Python, whose harnesses also fail any call
    # past 8 CPU seconds themselves (common.allowed), so a loaded machine makes no false hangs
    local timeout=10
    case " $C_HARNESSES " in
        *" $name "*) [ $have_c = 1 ] || { echo skipped >"$OUT/logs/$name.status"; return; }
                     cmd=("$OUT/fuzz/$name") ;;
        *) [ $have_py = 1 ] || { echo skipped >"$OUT/logs/$name.status"; return; }
           cmd=("$PYTHON" "fuzz/python/$name.py"); timeout=30 ;;
    esac
    mkdir -p "$OUT/corpus/$name"
    cp -n "$OUT/seeds/$name"/* "$OUT/corpus/$name/" 2>/dev/null
    local dict=fuzz/dict/$name.dict extra=()
    [ -f "$dict" ] && extra=("-dict=$dict")
    local TIMEFORMAT="%U %S" cpu rc
    cpu=$( { time ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 PYTHONPATH=$ROOT \
        nice -n "${NICE:-0}" "${cmd[@]}" "$OUT/corpus/$name" -max_total_time="$SECONDS_EACH" -timeout=$timeout \
        -rss_limit_mb=4096 -max_len=1048576 -print_final_stats=1 -artifact_prefix="$OUT/findings/$name-" \
        "${extra[@]}" >"$OUT/logs/$name.log" 2>&1; echo "rc=$?" >>"$OUT/logs/$name.log"; } 2>&1 )
    rc=$(grep -o 'rc=[0-9]*' "$OUT/logs/$name.log" | tail -1 | cut -d= -f2)
    echo "$rc $(echo "$cpu" | awk '{printf "%.0f", $1 + $2}')" >"$OUT/logs/$name.status"
}

running=0
for name in $HARNESSES; do
    run_one "$name" &
    running=$((running + 1))
    if [ $running -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
done
wait

passed=0 failed=0
printf "%-20s %8s %12s %10s  %s\n" harness cpu_s executions coverage result
for name in $HARNESSES; do
    status=$(cat "$OUT/logs/$name.status" 2>/dev/null || echo missing)
    if [ "$status" = skipped ]; then printf "%-20s %8s %12s %10s  %s\n" "$name" - - - skipped; continue; fi
    rc=${status%% *} secs=${status##* }
    log=$OUT/logs/$name.log
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
    if [ "$rc" = 0 ]; then result=ok; passed=$((passed + 1))
    else result="FOUND (exit $rc): $(ls -t "$OUT/findings/$name-"* 2>/dev/null | head -1), log $log"; failed=$((failed + 1)); fi
    printf "%-20s %8s %12s %10s  %s\n" "$name" "$secs" "${execs:-?}" "${cov:-?}" "$result"
done
echo "fuzz: $passed passed, $failed failed"
[ $failed = 0 ]
