// SPDX-License-Identifier: Apache-2.0
/// \file Wisdom.hpp
/// Wisdom, as FFTW keeps it: what Planning::Measure learned, so that a job measures a kind of
/// plan once. A measured choice is remembered for the process under a key naming everything it
/// depends on (the device or CPU model and threads, backend, memory spaces, value type,
/// layouts, extents, strides, alignment, precision floor, request, tuning, the candidate paths,
/// and the build: the versions of this library, Kokkos, Kokkos Kernels, and on CUDA builds the
/// CUDA runtime and driver, cuBLAS and cuBLASLt, the host vector ISA); a later
/// Planning::Measure plan with the same key runs the remembered path and times nothing.
/// Exported and imported as a small versioned text format, so that an application can keep it
/// between runs. Import keeps only this build's entries (those of others could never match),
/// so an upgrade's first export leaves the old build's entries behind.
///
/// Process-wide state, behind one lock: every function here may be called from any host thread,
/// also while plans are made. Two plans of one key measured at the same moment both measure;
/// the later result is kept. Wisdom holds no device memory and outlives Kokkos::finalize.
#ifndef FUSED_LINEAR_WISDOM_HPP
#define FUSED_LINEAR_WISDOM_HPP

#include <cstddef>
#include <istream>
#include <ostream>

#include "FusedLinear/impl/Wisdom.hpp"

namespace FusedLinear {

/// What import_wisdom did with the entries it read.
struct WisdomImport {
  std::size_t kept = 0;          ///< entries of this build: added, or replacing those of their keys
  std::size_t other_builds = 0;  ///< entries of another build (or naming none): dropped
};

/// Writes the process's wisdom as text: the line "FusedLinear wisdom 2", one line per entry
/// (entry, key, algorithm, precision, cuBLASLt variant, milliseconds, separated by tabs), "end".
/// The digits are the "C" locale's whatever the process's (std::locale::global, setlocale).
/// A vendor_lt entry's variant is its rank and, after a colon, the cuBLASLt algorithm's
/// configuration, which selects it when the plan is made again.
/// \throws std::runtime_error when the stream cannot be written
inline void export_wisdom(std::ostream& os) { Impl::WisdomStore::instance().write(os); }

/// Adds the wisdom in `is` (written by export_wisdom) to the process's, replacing entries of the
/// same keys. Entries of this build for other devices or Views are kept (a file may serve
/// several machines) and match where they were measured. Entries whose build part differs from
/// this process's (another version of this library, Kokkos, Kokkos Kernels, CUDA, the driver,
/// cuBLAS or cuBLASLt, another host ISA) could never match: they are dropped and counted, so
/// export_wisdom never writes them again. The stream's exception mask is kept, and not acted on
/// for reaching the end of valid input.
/// \returns the entries kept and those of other builds dropped
/// \throws std::invalid_argument naming FusedLinear::import_wisdom and the line, for input that
///         is not wisdom of this version (version 1: re-measure), malformed or truncated; the
///         process's wisdom is then unchanged
inline WisdomImport import_wisdom(std::istream& is) {
  // The build part the process's plans put in their keys.
  const Impl::WisdomCounts c =
      Impl::WisdomStore::instance().read(is, "FusedLinear::import_wisdom", Impl::build_identity());
  return WisdomImport{c.kept, c.other_builds};
}

/// Forgets all wisdom: Planning::Measure plans made after measure again.
inline void forget_wisdom() { Impl::WisdomStore::instance().forget(); }

/// Entries the process's wisdom holds.
inline std::size_t wisdom_size() { return Impl::WisdomStore::instance().size(); }

}  // namespace FusedLinear

#endif
