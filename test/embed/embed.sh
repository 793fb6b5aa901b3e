#!/usr/bin/env bash
# test/embed/embed.sh — the shell steps of test/integration/test_embed.c (issue 8): build the
# amalgamation the way an embedder does (fluxon.c + fluxon.h copied alone into a scratch
# directory, plus the dependencies' pkg-config flags), check its symbols, build and run
# the C / C++ embed programs, and install into a temporary prefix.
#
#   embed.sh object   CC WORK          compile WORK/src/fluxon.c once per compiler
#                                      (flock'ed: parallel tests share the object)
#   embed.sh hygiene  WORK             every global symbol of the object is fluxon_*
#   embed.sh program  CC CXX SRC WORK  build SRC (C or C++ by suffix) against the object
#                                      of CC with -Wall -Wextra -Werror, then run it
#   embed.sh install  WORK             make install PREFIX=WORK/prefix, build and run a
#                                      program against it with pkg-config, check SONAME
#                                      and exports
#
# Run from the repository root. WORK is a directory the caller owns and removes.
# $FLUXON_SAN (set by `make test`, e.g. the sanitizer flags of `make asan`) is added when
# linking against the installed library, which was built with them.
set -euo pipefail

DEPS="ucx liburing libcjson libxxhash numa libcurl"
EXTRA_LIBS="-lmimalloc -lpthread -lm"

die() { echo "embed.sh: $*" >&2; exit 1; }
if [ ! -f fluxon.c ] || [ ! -f fluxon.h ] || [ ! -f include/fluxon.h ]; then
    die "run from the repository root after 'make amalgamation' (fluxon.c, fluxon.h)"
fi

# Copies the two files (once) into WORK/src: nothing else of the tree is visible there.
stage_sources() {
    local work=$1
    mkdir -p "$work/src"
    exec 8>"$work/src.lock"
    flock 8
    if [ ! -f "$work/src/fluxon.h" ]; then
        cp fluxon.c "$work/src/fluxon.c.tmp" && mv "$work/src/fluxon.c.tmp" "$work/src/fluxon.c"
        cp fluxon.h "$work/src/fluxon.h.tmp" && mv "$work/src/fluxon.h.tmp" "$work/src/fluxon.h"
    fi
    flock -u 8
}

# compiler name -> object path (gcc and g++ share fluxon-gcc.o, clang/clang++ fluxon-clang.o)
object_path() { echo "$2/fluxon-$(basename "$1").o"; }

cmd_object() {
    local cc=$1 work=$2 obj
    obj=$(object_path "$cc" "$work")
    stage_sources "$work"
    exec 9>"$obj.lock"
    flock 9
    if [ ! -f "$obj" ]; then
        # -O0: this object is for symbol checks and functional tests, not speed.
        # -Wno-unused-function: internals only the CLI/bench/tests use are static here.
        # shellcheck disable=SC2046,SC2086
        ( cd "$work/src" && set -x &&
          "$cc" -std=gnu11 -O0 -g -fPIC -Wall -Wextra -Wno-unused-parameter -Wno-unused-function \
              -c fluxon.c -o "$obj.tmp" $(pkg-config --cflags $DEPS) )
        mv "$obj.tmp" "$obj"
    fi
    flock -u 9
    echo "object: $obj"
}

cmd_hygiene() {
    local work=$1 obj bad missing
    obj=$(object_path gcc "$work")
    [ -f "$obj" ] || cmd_object gcc "$work"
    head -3 "$work/src/fluxon.c" | grep -q "Fluxon $(sed -n 's/^#define FLUXON_VERSION_STRING "\(.*\)"/\1/p' include/fluxon.h), source commit" ||
        die "fluxon.c banner lacks 'Fluxon <version>, source commit ...':$(head -3 "$work/src/fluxon.c")"
    cmp -s fluxon.h include/fluxon.h || die "fluxon.h differs from include/fluxon.h (run make amalgamation)"
    bad=$(nm -g -l --defined-only "$obj" | awk 'NF >= 3 && $3 !~ /^fluxon_/ { print }' | sed "s|$work/src/||")
    if [ -n "$bad" ]; then
        echo "global symbols of fluxon.c outside fluxon_* (make them FX_INTERNAL/static; file:line from #line):"
        echo "$bad"
        exit 1
    fi
    # and every function fluxon.h declares is defined (else embedders get link errors)
    missing=$(comm -23 <(grep -oE '\bfluxon_[a-z0-9_]+\(' fluxon.h | tr -d '(' | sort -u) \
                       <(nm -g --defined-only "$obj" | awk 'NF >= 3 { print $3 }' | sort -u))
    [ -z "$missing" ] || die "declared in fluxon.h but not defined in fluxon.c: $missing"
    echo "symbol hygiene ok: $(nm -g --defined-only "$obj" | wc -l) global symbols, all fluxon_*"
}

cmd_program() {
    local cc=$1 cxx=$2 src=$3 work=$4 obj name comp std out
    obj=$(object_path "$cc" "$work")
    [ -f "$obj" ] || cmd_object "$cc" "$work"
    name=$(basename "$src"); name=${name%.*}
    case "$src" in
        *.cpp) comp=$cxx; std="-std=c++17" ;;
        *)     comp=$cc;  std="-std=c11 -Wpedantic" ;;
    esac
    out="$work/$name-$(basename "$comp")"
    # shellcheck disable=SC2046,SC2086
    ( set -x; "$comp" $std -O1 -g -Wall -Wextra -Werror -I"$work/src" "$src" "$obj" -o "$out" \
          $(pkg-config --cflags --libs $DEPS) $EXTRA_LIBS )
    mkdir -p "$work/run"
    ( set -x; timeout -k 5 120 "$out" "$work/run" )
}

cmd_install() {
    local work=$1 prefix lib so soname exports prog
    prefix="$work/prefix"
    lib="$prefix/lib"
    ( set -x; make install PREFIX="$prefix" )
    for f in bin/fluxon include/fluxon.h lib/libfluxon.a lib/libfluxon.so lib/pkgconfig/fluxon.pc \
             share/fluxon/conversation_trace.jsonl; do
        [ -e "$prefix/$f" ] || die "make install did not install $f"
    done
    so=$(readlink -f "$lib/libfluxon.so")
    [ "$(readlink "$lib/libfluxon.so")" = libfluxon.so.0 ] || die "lib/libfluxon.so does not point to libfluxon.so.0"
    [ -f "$lib/libfluxon.so.0" ] || die "lib/libfluxon.so.0 is missing or dangling"
    soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
    [ "$soname" = libfluxon.so.0 ] || die "SONAME of $so is '$soname', expected libfluxon.so.0"
    # the version node of the symbol map (FLUXON_0, an absolute symbol) is allowed
    exports=$(nm -D --defined-only "$so" | awk 'NF >= 3 && $3 !~ /^fluxon_/ && !($2 == "A" && $3 == "FLUXON_0") { print }')
    [ -z "$exports" ] || die "libfluxon.so exports symbols outside fluxon_*:
$exports"
    nm -D --defined-only "$so" | grep -Eq ' T fluxon_get_transfer(@@FLUXON_0)?$' || die "libfluxon.so does not export fluxon_get_transfer"
    cmp -s "$prefix/include/fluxon.h" include/fluxon.h || die "installed fluxon.h differs from include/fluxon.h"
    "$prefix/bin/fluxon" --version
    # the demo finds the installed trace from any directory (no FLUXON_TRACE)
    ( cd "$work" && env -u FLUXON_TRACE "$prefix/bin/fluxon" demo --simulate --requests 10 --capacity-blocks 100 ) |
        grep -qF "/bin/../share/fluxon/conversation_trace.jsonl" || die "the installed fluxon demo did not find share/fluxon/conversation_trace.jsonl"
    export PKG_CONFIG_PATH="$lib/pkgconfig"
    [ "$(pkg-config --modversion fluxon)" = "$(sed -n 's/^#define FLUXON_VERSION_STRING "\(.*\)"/\1/p' include/fluxon.h)" ] ||
        die "fluxon.pc version mismatch: $(pkg-config --modversion fluxon)"
    pkg-config --cflags --libs fluxon | grep -q -- "$prefix" || die "fluxon.pc does not point into $prefix"
    prog=test/embed/install_prog.c
    # static: the archive through pkg-config, exactly as the README says
    # shellcheck disable=SC2046,SC2086
    ( set -x; cc -std=c11 -Wall -Wextra -Werror ${FLUXON_SAN:-} "$prog" -o "$work/prog-static" \
          $(pkg-config --cflags --libs fluxon) )
    # shared: -lfluxon resolves to the versioned shared library
    # shellcheck disable=SC2046,SC2086
    ( set -x; cc -std=c11 -Wall -Wextra -Werror ${FLUXON_SAN:-} "$prog" -o "$work/prog-shared" \
          $(pkg-config --cflags fluxon) -L"$lib" -Wl,-rpath,"$lib" -lfluxon )
    readelf -d "$work/prog-shared" | grep -q 'NEEDED.*\[libfluxon.so.0\]' ||
        die "prog-shared does not depend on libfluxon.so.0"
    ( set -x; timeout -k 5 60 "$work/prog-static" )
    ( set -x; timeout -k 5 60 "$work/prog-shared" )
    echo "install ok: $prefix"
}

cmd=${1:-}
shift || true
case "$cmd" in
    object)  [ $# = 2 ] || die "usage: embed.sh object CC WORK";           cmd_object "$@" ;;
    hygiene) [ $# = 1 ] || die "usage: embed.sh hygiene WORK";             cmd_hygiene "$@" ;;
    program) [ $# = 4 ] || die "usage: embed.sh program CC CXX SRC WORK";  cmd_program "$@" ;;
    install) [ $# = 1 ] || die "usage: embed.sh install WORK";             cmd_install "$@" ;;
    *) die "usage: embed.sh object|hygiene|program|install ..." ;;
esac
