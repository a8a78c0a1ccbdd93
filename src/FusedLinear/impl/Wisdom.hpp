// SPDX-License-Identifier: Apache-2.0
/// \file impl/Wisdom.hpp
/// What Planning::Measure learned, kept for the process (FFTW's wisdom): a measured choice per
/// key, the key naming everything the choice depends on (the build, device or CPU, backend,
/// value type, layouts, extents, strides and alignment, precision floor, request, tuning, the
/// candidates). Entries of another build are dropped at import: they could never match.
/// Process-wide by design, behind one lock; FusedLinear/Wisdom.hpp is the public side.
#ifndef FUSED_LINEAR_IMPL_WISDOM_HPP
#define FUSED_LINEAR_IMPL_WISDOM_HPP

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <ios>
#include <istream>
#include <locale>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Config.hpp"
#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Dispatch.hpp"
#include "FusedLinear/impl/Fork.hpp"
#include "FusedLinear/impl/HostBlas.hpp"
#include "FusedLinear/impl/Planner.hpp"
#include "FusedLinear/impl/cuda/CublasHandle.hpp"
#include "FusedLinear/impl/cuda/CublasLt.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"

namespace FusedLinear {
namespace Impl {

/// A remembered choice and the time it was measured at (kept for people reading the file; the
/// choice alone decides).
struct WisdomEntry {
  Choice choice;
  double ms = 0;
};

/// The first line of the text format; the number is its version (2: keys name the CUDA driver's
/// and cuBLAS's versions, so no key of version 1 matches one made now).
inline constexpr const char* wisdom_header = "FusedLinear wisdom 2";

/// A key as one line of text: tabs and line breaks (which the format uses) become spaces.
inline std::string wisdom_text(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}

/// The CPU's model name (/proc/cpuinfo), or "unknown CPU".
inline const std::string& cpu_model() {
  static const std::string model = [] {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
        std::string name = line.substr(line.find(':') + 1);
        name.erase(0, name.find_first_not_of(' '));
        return name;
      }
    return std::string("unknown CPU");
  }();
  return model;
}

/// What the device is, as far as it changes which path is fastest: the GPU's name, compute
/// capability and multiprocessors; on the host the CPU model, the threads the instance runs and
/// the BLAS library loaded. (The CUDA libraries' versions are the build's: build_identity.)
template <class ExecSpace>
std::string device_identity(const ExecSpace& exec) {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os << ExecSpace::name() << ' ';
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    const cudaDeviceProp& p = exec.cuda_device_prop();
    os << p.name << " cc" << p.major << '.' << p.minor << " sms " << p.multiProcessorCount;
    return wisdom_text(os.str());
  }
#endif
  if (is_host_space<ExecSpace>()) {
    os << cpu_model() << " threads " << exec.concurrency() << " blas " << blas_library_path();
  } else {
    os << "multiprocessors " << multiprocessors(exec) << " concurrency " << exec.concurrency();
  }
  return wisdom_text(os.str());
}

template <class Layout>
constexpr const char* layout_name() {
  if (std::is_same<Layout, Kokkos::LayoutRight>::value) return "right";
  if (std::is_same<Layout, Kokkos::LayoutLeft>::value) return "left";
  if (std::is_same<Layout, Kokkos::LayoutStride>::value) return "stride";
  return "other";
}

inline int alignment_class(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  int log2 = 0;
  while (log2 < 8 && (a & ((std::uintptr_t(1) << (log2 + 1)) - 1)) == 0) ++log2;
  return log2;  // log2 of min(256, the alignment)
}

/// The host vector instructions the kernels of this translation unit were compiled for (they
/// are header-only: the caller's flags), as far as they change which path is fastest.
constexpr const char* host_isa() {
#if defined(__AVX512F__)
  return "avx512f";
#elif defined(__AVX2__)
  return "avx2";
#elif defined(__AVX__)
  return "avx";
#elif defined(__ARM_FEATURE_SVE)
  return "sve";
#elif defined(__ARM_NEON)
  return "neon";
#elif defined(__SSE2__)
  return "sse2";
#else
  return "generic";
#endif
}

/// What built and runs the code a choice was measured on: this library's version, Kokkos',
/// Kokkos Kernels', on CUDA builds the runtime's, the driver's, cuBLAS's and cuBLASLt's (whose
/// kernels the vendor paths run), and the host vector ISA. A key's build part: an entry of
/// another build never matches here, and import drops it. No "; " in it (it ends the part).
inline std::string build_identity() {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os << "FusedLinear " << FUSED_LINEAR_VERSION_STRING << ", Kokkos " << KOKKOS_VERSION / 10000
     << '.' << KOKKOS_VERSION / 100 % 100 << '.' << KOKKOS_VERSION % 100 << ", Kokkos Kernels "
     << FUSED_LINEAR_KOKKOSKERNELS_VERSION_STRING;
#if defined(KOKKOS_ENABLE_CUDA)
  os << ", CUDA runtime " << CUDART_VERSION << ", CUDA driver " << cuda_driver_version();
#endif
#if defined(FUSED_LINEAR_CUBLAS)
  os << ", cuBLAS " << cublas_version();
#endif
#if defined(FUSED_LINEAR_CUBLASLT)
  os << ", cuBLASLt " << cublasLtGetVersion();
#endif
  os << ", isa " << host_isa();
  return wisdom_text(os.str());
}

/// The build part of a key: what follows "library " (at the start, or after "; " as in a
/// gradient's keys) up to the next "; "; empty where the key names none.
inline std::string wisdom_build_of(const std::string& key) {
  std::string::size_type at = 0;
  if (key.rfind("library ", 0) != 0) {
    at = key.find("; library ");
    if (at == std::string::npos) return {};
    at += 2;
  }
  at += 8;  // "library "
  const auto end = key.find("; ", at);
  return key.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

/// What an import kept and dropped.
struct WisdomCounts {
  std::size_t kept = 0, other_builds = 0;
};

/// The key of a measured decision: everything the candidates and their times depend on besides
/// the values (multiplier and slope only through "multiplier 0", which changes the candidates).
template <class ExecSpace, class XView, class WView, class BView, class YView>
std::string wisdom_key(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                       const YView& Y, const Request& r, const Experimental::Tuning& t,
                       const std::vector<Choice>& candidates) {
  using Scalar = typename YView::non_const_value_type;
  std::ostringstream os;
  os.imbue(std::locale::classic());  // no digit grouping from a global locale
  os << "library " << build_identity() << "; device " << device_identity(exec) << "; memory "
     << YView::memory_space::name() << ',' << XView::memory_space::name() << ','
     << WView::memory_space::name() << ',' << BView::memory_space::name() << "; value "
     << (std::is_same<Scalar, float>::value ? "float" : "double") << "; layouts "
     << layout_name<typename XView::array_layout>() << ','
     << layout_name<typename WView::array_layout>() << ','
     << layout_name<typename BView::array_layout>() << ','
     << layout_name<typename YView::array_layout>() << "; shape " << X.extent(0) << 'x'
     << X.extent(1) << 'x' << W.extent(0) << "; strides " << X.stride(0) << ',' << X.stride(1)
     << ',' << W.stride(0) << ',' << W.stride(1) << ',' << b.stride(0) << ',' << Y.stride(0) << ','
     << Y.stride(1) << "; alignment " << alignment_class(X.data()) << ','
     << alignment_class(W.data()) << ',' << alignment_class(b.data()) << ','
     << alignment_class(Y.data()) << "; request " << to_string(r.algorithm) << '/'
     << to_string(r.precision) << (r.zero_multiplier ? " multiplier 0" : "") << "; tuning "
     << t.skinny_splits << ',' << t.sm90_tf32x3_kernel << ',' << t.tf32x3_partials_limit
     << "; cublasLt variants " << MeasureRule::cublaslt_algorithms << "+1MiB; candidates";
  for (const Choice& c : candidates)
    os << ' ' << to_string(c.algorithm) << '/' << to_string(c.precision);
  return wisdom_text(os.str());
}

/// The process's wisdom: key -> choice, behind one lock. Never destroyed (plans may be made
/// during static destruction); holds no device memory, so Kokkos::finalize leaves it alone.
class WisdomStore {
 public:
  static WisdomStore& instance() {
    static WisdomStore* store = new WisdomStore();
    return *store;
  }

  std::optional<WisdomEntry> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(m_mutex);
    const auto it = m_entries.find(key);
    if (it == m_entries.end()) return std::nullopt;
    return it->second;
  }
  void remember(const std::string& key, const WisdomEntry& entry) {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_entries[key] = entry;
  }
  void forget() {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_entries.clear();
  }
  std::size_t size() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_entries.size();
  }

  /// The text format: the header line, one line per entry, "end":
  ///   entry <TAB> key <TAB> algorithm <TAB> precision <TAB> variant <TAB> milliseconds
  /// (names as to_string prints them; the variant cuBLASLt's rank, then for vendor_lt a colon
  /// and the algorithm's configuration, which is what selects it), entries in key order, in
  /// the "C" locale's digits whatever the process's locale.
  void write(std::ostream& os) {
    std::ostringstream text;
    text.imbue(std::locale::classic());  // the format's digits, whatever the global locale
    text << wisdom_header << '\n' << std::setprecision(9);
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      for (const auto& e : m_entries)
        text << "entry\t" << e.first << '\t' << to_string(e.second.choice.algorithm) << '\t'
             << to_string(e.second.choice.precision) << '\t' << e.second.choice.variant
             << (e.second.choice.lt_config.empty() ? "" : ":") << e.second.choice.lt_config << '\t'
             << e.second.ms << '\n';
    }
    text << "end\n";
    os << text.str();
    if (!os) throw std::runtime_error("FusedLinear::export_wisdom: cannot write the stream");
  }

  /// Reads the text format whole, then adds its entries whose build part is `build` (replacing
  /// those of the same keys) and drops the others, which could never match; counts both.
  /// std::invalid_argument naming `function` and the line for anything malformed or of another
  /// version, and then nothing has changed.
  WisdomCounts read(std::istream& is, const char* function, const std::string& build) {
    // The caller's exception mask is set aside while reading (getline sets failbit at the end
    // of valid input) and put back after, without the state bits it would throw for.
    struct KeepMask {
      std::istream& is;
      std::ios::iostate mask;
      explicit KeepMask(std::istream& s) : is(s), mask(s.exceptions()) {
        is.exceptions(std::ios::goodbit);
      }
      ~KeepMask() {
        is.clear(is.rdstate() & ~mask);
        is.exceptions(mask);
      }
    } keep(is);
    std::map<std::string, WisdomEntry> read;
    std::string line;
    int number = 0;
    const auto fail = [&](const std::string& why) {
      throw std::invalid_argument(std::string(function) + ": line " + std::to_string(number) +
                                  ": " + why);
    };
    const auto next = [&]() -> bool {
      if (!std::getline(is, line)) return false;
      ++number;
      if (!line.empty() && line.back() == '\r') line.pop_back();  // written on Windows
      return true;
    };
    if (!next()) {
      number = 1;
      fail("empty input, expected \"" + std::string(wisdom_header) + "\"");
    }
    if (line == "FusedLinear wisdom 1")
      fail("\"" + line +
           "\" is version 1, whose keys predate this library's (they lack the CUDA driver's "
           "and cuBLAS's versions) and would never match: re-measure, and export again");
    if (line.rfind("FusedLinear wisdom ", 0) == 0 && line != wisdom_header)
      fail("unsupported version \"" + line + "\" (this library reads \"" + wisdom_header + "\")");
    if (line != wisdom_header)
      fail("not FusedLinear wisdom (expected \"" + std::string(wisdom_header) + "\")");
    bool ended = false;
    while (next()) {
      if (line == "end") {
        ended = true;
        break;
      }
      std::vector<std::string> fields;
      std::string::size_type start = 0;
      for (;;) {
        const auto tab = line.find('\t', start);
        fields.push_back(line.substr(start, tab - start));
        if (tab == std::string::npos) break;
        start = tab + 1;
      }
      if (fields.size() != 6 || fields[0] != "entry")
        fail(
            "expected \"entry\", key, algorithm, precision, variant, milliseconds separated by "
            "tabs");
      const std::string& key = fields[1];
      if (key.empty()) fail("empty key");
      for (const char c : key)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
          fail("a control character in the key");
      WisdomEntry e;
      try {
        e.choice.algorithm = algorithm_from_string(fields[2]);
        e.choice.precision = precision_from_string(fields[3]);
      } catch (const std::invalid_argument& ex) {
        const std::string what = ex.what();
        fail(what.substr(what.find(": ") + 2));
      }
      if (e.choice.algorithm == Algorithm::Auto) fail("a measured choice is a path, not auto");
      // The variant: cuBLASLt's rank, and after a colon the algorithm's configuration.
      const std::string& field = fields[4];
      const std::string variant = field.substr(0, field.find(':'));
      if (variant.empty() || variant.size() > 3 ||
          variant.find_first_not_of("0123456789") != std::string::npos)
        fail("variant '" + field + "' is not an integer in [0, 999]");
      e.choice.variant = std::atoi(variant.c_str());
      if (variant.size() < field.size()) {
        e.choice.lt_config = field.substr(variant.size() + 1);
        if (e.choice.lt_config.empty() ||
            e.choice.lt_config.find_first_not_of("0123456789,") != std::string::npos)
          fail("variant '" + field + "': the configuration is not integers separated by commas");
      }
      const std::string& ms = fields[5];
      std::istringstream number_in(ms);
      number_in.imbue(std::locale::classic());  // not strtod: it follows the C locale
      e.ms = -1;
      const bool number = !ms.empty() && ms.find_first_of(" \t") == std::string::npos &&
                          (number_in >> e.ms) && number_in.peek() == EOF;
      if (!number || !std::isfinite(e.ms) || e.ms < 0)
        fail("milliseconds '" + ms + "' is not a finite number >= 0");
      read[key] = e;
    }
    if (is.bad()) fail("cannot read the stream");
    if (!ended) fail("no \"end\" line: the input is truncated");
    while (next())
      if (!line.empty()) fail("text after \"end\"");
    WisdomCounts counts;
    std::lock_guard<std::mutex> lock(m_mutex);
    for (auto& e : read) {
      if (wisdom_build_of(e.first) != build) {
        ++counts.other_builds;
        continue;
      }
      m_entries[e.first] = e.second;
      ++counts.kept;
    }
    return counts;
  }

 private:
  WisdomStore() {
    // The lock is held across fork(), so that a child never inherits it taken by a thread it
    // does not have.
    ForkRegistry::process().add(ForkSlot::Wisdom,
                                {[] { WisdomStore::instance().m_mutex.lock(); },
                                 [] { WisdomStore::instance().m_mutex.unlock(); },
                                 [] { WisdomStore::instance().m_mutex.unlock(); }});
  }
  std::mutex m_mutex;
  std::map<std::string, WisdomEntry> m_entries;
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
