#!/usr/bin/env bash
# Builds llama.cpp's OpenAI-compatible server (llama-server), which runs the embedded `local:` models,
# and installs it with its shared libraries into the virtualenv: .venv/lib/personagraph-llama/.
#
# Portable by construction: GGML_NATIVE=OFF with GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS builds one CPU
# backend per x86-64 level and ggml loads the best one for the CPU it runs on, at start. Never the
# native-CPU flags: a binary built on one CPU must not be reused on another. Of ggml's 14 x86 variants the
# build keeps the three that differ in speed for the embedded models (KEPT): x64 (any x86-64), haswell
# (AVX2) and cascadelake (AVX-512 with VNNI: Cascade Lake, Ice Lake, Sapphire Rapids, Zen 4 and later).
# Measured on one AVX-512/AMX Xeon, the 1.5B's prompt speed on each variant: haswell, alderlake
# (AVX-VNNI) and skylakex (AVX-512 without VNNI) 66 tok/s; icelake, zen4 and sapphirerapids (with
# --no-repack) 127 tok/s; decode 8.5 tok/s on all (docs/benchmarks.md#install). The other eleven only add
# compile time; a CPU between two kept ones loads the lower. No AMX variant: its kernels crashed on an AMX
# host (models/engine.py), and without weight repacking it was no faster. llamafile's sgemm is left out
# too: it multiplies F16/Q8_0/Q4_0 weights, and the embedded models are Q4_K_M.
# A unity build (CMAKE_UNITY_BUILD): CMake compiles each target's sources in batches, which parse the
# headers they share once per batch; scripts/llama-build.cmake names the files compiled on their own and
# compiles the multimodal library mtmd, which the server links but never runs here, with -O1.
# The source is llama.cpp as vendored in the pinned llama-cpp-python sdist on PyPI (hash-checked), with
# the patches in scripts/llama-patches/ applied (each says what it changes and why).
# Idempotent: skips the build when the installed stamp matches the pinned version and flags.
#
# Usage: bash scripts/build_llama_server.sh [VENV]      (default: .venv)
# Takes ~5 minutes on 2 cores (measured: docs/benchmarks.md#install); set JOBS to change the parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${1:-.venv}"
dest="$venv/lib/personagraph-llama"
version="0.3.36"
sdist_sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
flags=(
  -DCMAKE_BUILD_TYPE=Release
  -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DBUILD_SHARED_LIBS=ON -DGGML_LLAMAFILE=OFF
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF  # the prebuilt UI is a download
  -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
  -DCMAKE_UNITY_BUILD=ON
)  # no RPATH games: personagraph starts the server with LD_LIBRARY_PATH set to its folder
kept=(x64 haswell cascadelake)  # the CPU variants built (the header says why these)
patches=(scripts/llama-patches/*.patch)
settings=scripts/llama-build.cmake  # per-file and per-target settings (the unity build, mtmd)
stamp="llama-cpp-python $version sdist $sdist_sha256 ${flags[*]} variants ${kept[*]} patches $(cat "${patches[@]}" "$settings" | sha256sum | cut -c1-16)"

if [ -x "$dest/llama-server" ] && [ "$(cat "$dest/BUILD_STAMP" 2>/dev/null)" = "$stamp" ]; then
  echo "llama-server $version already built in $dest"
  exit 0
fi

# A finished build is also kept in the user's cache, keyed by its stamp, so that a second virtualenv (a
# fresh clone, CI on the same machine) copies it instead of compiling again. Safe to share
# between machines and CPUs because the build holds every CPU variant and chooses at run time; a build
# with one machine's native flags could not be shared like this.
cache_root="${PERSONAGRAPH_CACHE_DIR:-$HOME/.cache/personagraph}/llama-server"
cached="$cache_root/$(printf '%s' "$stamp" | sha256sum | cut -c1-16)"
install_from() {  # replaces $dest as a whole, so a half-copied install is never used
  rm -rf "$dest.new"
  mkdir -p "$dest.new"
  cp -a "$1"/. "$dest.new/"
  rm -rf "$dest"
  mv "$dest.new" "$dest"
}
if [ -x "$cached/llama-server" ] && [ "$(cat "$cached/BUILD_STAMP" 2>/dev/null)" = "$stamp" ]; then
  install_from "$cached"
  echo "llama-server $version installed in $dest (from the build cache $cached)"
  exit 0
fi
command -v c++ >/dev/null || { echo "error: a C++ compiler is needed (Debian: apt-get install g++)" >&2; exit 1; }
command -v git >/dev/null || { echo "error: git is needed to apply scripts/llama-patches (Debian: apt-get install git)" >&2; exit 1; }
recent_cmake() {  # whether $1 is a cmake of at least 3.21 (the unity build's include needs 3.19)
  local found
  found="$("$1" --version 2>/dev/null | head -n 1 | awk '{print $3}')" || return 1
  [ -n "$found" ] && [ "$(printf '3.21\n%s\n' "$found" | sort -V | head -n 1)" = 3.21 ]
}
cmake_bin="$(command -v cmake || true)"
recent_cmake "$cmake_bin" || cmake_bin="$venv/bin/cmake"
if ! recent_cmake "$cmake_bin"; then  # no recent system cmake: PyPI's
  "$venv/bin/pip" install -q "cmake>=3.21"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "building llama-server $version (every x86-64 CPU level; ~5 minutes on 2 cores) ..."
printf 'llama-cpp-python==%s --hash=sha256:%s\n' "$version" "$sdist_sha256" >"$work/requirements.txt"
"$venv/bin/pip" download -q --no-deps --no-binary :all: --require-hashes \
  -r "$work/requirements.txt" -d "$work"
tar -xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
for patch_file in "${patches[@]}"; do
  git -C "$src" apply "$PWD/$patch_file" \
    || { echo "error: $patch_file does not apply to llama.cpp $version" >&2; exit 1; }
done
lists="$src/ggml/src/CMakeLists.txt"  # ggml's list of x86 variants: one ggml_add_cpu_backend_variant line each
for variant in "${kept[@]}"; do
  grep -Eq "^\s*ggml_add_cpu_backend_variant\($variant(\s|\))" "$lists" \
    || { echo "error: ggml lists no CPU variant $variant to build (another llama.cpp?)" >&2; exit 1; }
done
x86=(x64 sse42 sandybridge ivybridge piledriver haswell skylakex cannonlake cascadelake icelake cooperlake zen4
     alderlake sapphirerapids)  # ggml's x86 variants; the lines of those not kept are deleted
for variant in "${x86[@]}"; do
  [[ " ${kept[*]} " == *" $variant "* ]] || sed -i -E "/^\s*ggml_add_cpu_backend_variant\($variant(\s|\))/d" "$lists"
done
"$cmake_bin" -S "$src" -B "$work/build" "${flags[@]}" -DCMAKE_PROJECT_INCLUDE="$PWD/$settings" >"$work/cmake.log" \
  || { tail -n 30 "$work/cmake.log" >&2; exit 1; }
"$cmake_bin" --build "$work/build" -j "${JOBS:-$(nproc)}" --target llama-server >"$work/build.log" 2>&1 \
  || { grep -m 20 -i "error" "$work/build.log" >&2; exit 1; }

# The binary, the libraries it links and every CPU variant, in one folder (ggml looks for the variants
# beside the executable), stamped; then the same folder is kept in the build cache.
mkdir -p "$work/out"
cp -a "$work/build/bin/llama-server" "$work/build/bin/"*.so* "$work/out/"
echo "$stamp" >"$work/out/BUILD_STAMP"
install_from "$work/out"
mkdir -p "$cache_root"
rm -rf "$cached.new" && cp -a "$work/out" "$cached.new" && rm -rf "$cached" && mv "$cached.new" "$cached"
echo "llama-server installed in $dest"
