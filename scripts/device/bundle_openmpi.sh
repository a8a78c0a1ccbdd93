#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Gathers this machine's Open MPI 4.1 runtime (Debian's openmpi-bin + libopenmpi3) into one
# relocatable folder, for running MPI programs on a single node that has no MPI installed (a GPU
# machine with only the CUDA image, say). What it takes: mpiexec (orterun) and orted, the Open MPI
# libraries and the libraries they need beyond glibc and libstdc++, the MCA plugins a single node
# uses (shared memory, TCP, self, collectives, PMIx; not the network fabrics UCX, OFI, verbs, PSM,
# nor OpenSHMEM), PMIx's plugins, the help texts and Debian's default MCA parameters; with each
# PROGRAM given, the libraries it needs too, except CUDA's (the target machine has its own).
#
#   usage: bundle_openmpi.sh DEST [PROGRAM...]
#   there: source DEST/env.sh && mpiexec -np 2 ./mpi_sharded_linear ...
#
# Open MPI finds its plugins and help texts from OPAL_PREFIX, PMIx its own from PMIX_PREFIX,
# PMIX_LIBDIR and PMIX_DATADIR: env.sh sets them to where the folder lies, with PATH and
# LD_LIBRARY_PATH. The target needs the same processor architecture and a glibc at least as new
# as this machine's.
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: $0 DEST [PROGRAM...]" >&2; exit 2; }
dest="$1"
shift
command -v orterun >/dev/null || { echo "$0: no orterun: apt-get install openmpi-bin" >&2; exit 1; }

triplet="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
ompi_lib="/usr/lib/${triplet}/openmpi/lib"      # Open MPI's libdir under prefix /usr
pmix_root="/usr/lib/${triplet}/pmix2"           # PMIx's own prefix
[ -d "${ompi_lib}/openmpi3" ] || { echo "$0: no ${ompi_lib}/openmpi3 (Debian's layout)" >&2; exit 1; }

if [ -e "$dest" ] && [ ! -f "$dest/env.sh" ]; then  # replace an earlier bundle, nothing else
  echo "$0: $dest exists and is no bundle of this script's" >&2
  exit 1
fi
rm -rf "$dest"
# The same layout below DEST as below /usr, so that OPAL_PREFIX=DEST finds everything.
mkdir -p "$dest/bin" "$dest/lib" "$dest/share/openmpi" "$dest/etc" \
         "$dest/lib/${triplet}/openmpi/lib/openmpi3" "$dest/lib/${triplet}/pmix2/lib/pmix"

# glibc's own libraries and the C++ runtime come with every target image (a newer libstdc++
# serves older programs; an older bundled one would break the target's newer programs).
system_lib='^(ld-linux.*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so'

# Shared libraries that $@ need, one "name path" a line, CUDA's left out.
deps() { ldd "$@" 2>/dev/null | awk '/=> \// { print $1, $3 }' | grep -v '/cuda' | sort -u; }

copy_lib() {  # name path: the library under its soname, links resolved
  [ -e "$dest/lib/$1" ] || cp -L "$2" "$dest/lib/$1"
}

# 1. The launcher, the daemon, the libraries of both and of libmpi, and the programs' libraries.
cp -L "$(command -v orterun)" "$dest/bin/mpiexec"
ln -s mpiexec "$dest/bin/mpirun"
cp -L "$(command -v orted)" "$dest/bin/orted"
for p in "$@"; do cp -L "$p" "$dest/bin/"; done
while read -r name path; do
  [[ "$name" =~ $system_lib ]] || copy_lib "$name" "$path"
done < <(deps "$(command -v orterun)" "$(command -v orted)" "/usr/lib/${triplet}/libmpi.so.40" "$@")
copy_lib libmpi.so.40 "/usr/lib/${triplet}/libmpi.so.40"  # what programs built here link
# libpmix and its plugins' needs (ext3x loads it at run time, so no ldd above saw it).
while read -r name path; do
  [[ "$name" =~ $system_lib ]] || copy_lib "$name" "$path"
done < <(deps "${ompi_lib}/openmpi3/mca_pmix_ext3x.so" "${pmix_root}"/lib/pmix/*.so)

# 2. Plugins whose every library is now in the bundle (or glibc's): the fabrics and OpenSHMEM,
#    whose libraries a single node does not need, stay behind, so no plugin fails to load. The
#    common component libraries (libmca_common_*) of the shared-memory, monitoring and MPI-IO
#    plugins come along first.
for common in libmca_common_sm.so.40 libmca_common_monitoring.so.50 libmca_common_ompio.so.41; do
  [ -e "/usr/lib/${triplet}/${common}" ] && copy_lib "$common" "/usr/lib/${triplet}/${common}"
done
kept=0 left=()
for plugin in "${ompi_lib}"/openmpi3/*.so; do
  missing=0
  while read -r name path; do
    [[ "$name" =~ $system_lib ]] || [ -e "$dest/lib/$name" ] || { missing=1; break; }
  done < <(deps "$plugin")
  if [ "$missing" -eq 0 ]; then
    cp -L "$plugin" "$dest/lib/${triplet}/openmpi/lib/openmpi3/"
    kept=$((kept + 1))
  else
    left+=("$(basename "$plugin" .so)")
  fi
done
cp -L "${pmix_root}"/lib/pmix/*.so "$dest/lib/${triplet}/pmix2/lib/pmix/"
# PMIx's libdir is below its prefix too: its library is also reached through LD_LIBRARY_PATH.
ln -s ../../../libpmix.so.2 "$dest/lib/${triplet}/pmix2/lib/libpmix.so.2"

# 3. Help texts (for readable error messages) and Debian's MCA defaults (they turn the fabrics
#    off). /etc/openmpi is not below the prefix: env.sh points OPAL_SYSCONFDIR here.
cp -L /usr/share/openmpi/*.txt "$dest/share/openmpi/" 2>/dev/null || true
[ -d "${pmix_root}/share" ] && cp -rL "${pmix_root}/share" "$dest/lib/${triplet}/pmix2/"
cp -L /etc/openmpi/openmpi-mca-params.conf "$dest/etc/"

cat > "$dest/env.sh" <<EOF
# Source this (bash) to use the bundled Open MPI: points OPAL_*, PMIX_*, PATH and LD_LIBRARY_PATH
# to this folder, wherever it lies, and lets mpiexec run as root.
_ompi_bundle="\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
export OPAL_PREFIX="\$_ompi_bundle"
export OPAL_SYSCONFDIR="\$_ompi_bundle/etc"
export PMIX_PREFIX="\$_ompi_bundle/lib/${triplet}/pmix2"
export PMIX_LIBDIR="\$PMIX_PREFIX/lib" PMIX_DATADIR="\$PMIX_PREFIX/share"  # absolute in Debian's build
export PATH="\$_ompi_bundle/bin:\$PATH"
export LD_LIBRARY_PATH="\$_ompi_bundle/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset _ompi_bundle
EOF

echo "bundle_openmpi: $kept plugins kept, ${#left[@]} left out (${left[*]:-none})" >&2
du -sh "$dest"
