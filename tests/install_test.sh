#!/bin/sh
# install_test.sh BUILD_DIR SOURCE_DIR CMAKE CC
# Installs the build into a temporary prefix, moves the prefix (the installed files must be relocatable),
# then builds tests/consumer/consumer.c against it four ways: CMake package (shared, static) and
# pkg-config (shared, static). Each program must run, and link the library the way it asked for.
set -eu
. "$(dirname "$0")/test_lib.sh" # die, test_tmpdir
build=$1 src=$2 cmake=$3 cc=$4
test_tmpdir install
tmp=$TEST_TMP

"$cmake" --install "$build" --prefix "$tmp/staging" >/dev/null || die "cmake --install failed"
mv "$tmp/staging" "$tmp/prefix"
p="$tmp/prefix"
[ -f "$p/include/ampc.h" ] || die "header not installed"
libdir=$(dirname "$(find "$p" -name 'libampc.a' | head -n 1)")
[ -f "$libdir/libampc.a" ] || die "static library not installed"
[ -f "$libdir/libampc.so" ] || die "shared library not installed"
[ -f "$libdir/pkgconfig/ampc.pc" ] || die "pkg-config file not installed"
[ -f "$libdir/cmake/ampc/ampcConfig.cmake" ] || die "CMake package config not installed"

links_shared() { readelf -d "$1" | grep -q 'NEEDED.*libampc\.so'; }
check() { # name binary expect(shared|static)
    LD_LIBRARY_PATH="$libdir" "$2" || die "$1: the consumer failed"
    if [ "$3" = shared ]; then links_shared "$2" || die "$1: not linked against libampc.so"
    else ! links_shared "$2" || die "$1: linked against libampc.so, expected the static library"; fi
    echo "install_test: $1 ok"
}

"$cmake" -S "$src/tests/consumer" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$p" -DCMAKE_C_COMPILER="$cc" >/dev/null \
    || die "find_package(ampc) failed"
"$cmake" --build "$tmp/cmake" >/dev/null || die "building the CMake consumer failed"
check "cmake shared" "$tmp/cmake/consumer_shared" shared
check "cmake static" "$tmp/cmake/consumer_static" static

export PKG_CONFIG_PATH="$libdir/pkgconfig"
pkg-config --exists ampc || die "pkg-config cannot find ampc"
[ "$(pkg-config --modversion ampc)" = "$("$tmp/cmake/consumer_static" | sed 's/^ampc \([^,]*\),.*/\1/')" ] \
    || die "pkg-config version differs from the library's"
# shellcheck disable=SC2046
"$cc" "$src/tests/consumer/consumer.c" -o "$tmp/pc_shared" $(pkg-config --cflags --libs ampc) \
    || die "pkg-config shared build failed"
check "pkg-config shared" "$tmp/pc_shared" shared
# shellcheck disable=SC2046
# the archive itself, then every private dependency pkg-config lists (zlib, libm, pthread)
"$cc" "$src/tests/consumer/consumer.c" -o "$tmp/pc_static" $(pkg-config --cflags ampc) "$libdir/libampc.a" \
    $(pkg-config --static --libs ampc | sed 's/-lampc\b//') || die "pkg-config static build failed"
check "pkg-config static" "$tmp/pc_static" static
