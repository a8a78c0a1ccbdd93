// SPDX-License-Identifier: Apache-2.0
/// \file Wisdom.hpp
/// Wisdom, as FFTW keeps it: what Planning::Measure learned, so that a job measures a kind of
/// plan once. A measured choice is remembered for the process under a key naming everything it
/// depends on (the device or CPU model and threads, backend, memory spaces, value type,
/// layouts, extents, strides, alignment, precision floor, request, tuning, the candidate paths,
/// the versions of this library, Kokkos, Kokkos Kernels, CUDA and cuBLASLt, the host vector
/// ISA); a later Planning::Measure plan with the same key runs the remembered
/// path and times nothing. Exported and imported as a small versioned text format, so that an
/// application can keep it between runs.
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

/// Writes the process's wisdom as text: the line "FusedLinear wisdom 1", one line per entry
/// (entry, key, algorithm, precision, cuBLASLt variant, milliseconds, separated by tabs), "end".
/// The digits are the "C" locale's whatever the process's (std::locale::global, setlocale).
/// A vendor_lt entry's variant is its rank and, after a colon, the cuBLASLt algorithm's
/// configuration, which selects it when the plan is made again.
/// \throws std::runtime_error when the stream cannot be written
inline void export_wisdom(std::ostream& os) { Impl::WisdomStore::instance().write(os); }

/// Adds the wisdom in `is` (written by export_wisdom) to the process's, replacing entries of the
/// same keys. Entries for other devices, Views or versions are kept and never match here. The
/// stream's exception mask is kept, and not acted on for reaching the end of valid input.
/// \throws std::invalid_argument naming FusedLinear::import_wisdom and the line, for input that
///         is not wisdom of this version, malformed or truncated; the process's wisdom is then
///         unchanged
inline void import_wisdom(std::istream& is) {
  Impl::WisdomStore::instance().read(is, "FusedLinear::import_wisdom");
}

/// Forgets all wisdom: Planning::Measure plans made after measure again.
inline void forget_wisdom() { Impl::WisdomStore::instance().forget(); }

/// Entries the process's wisdom holds.
inline std::size_t wisdom_size() { return Impl::WisdomStore::instance().size(); }

}  // namespace FusedLinear

#endif
