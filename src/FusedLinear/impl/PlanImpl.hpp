// SPDX-License-Identifier: Apache-2.0
/// \file PlanImpl.hpp
/// A plan's resources and its execution, on the library's canonical Views (const, unmanaged,
/// on the plan's execution space: any View a user passes converts to them, whatever its memory
/// traits, and every kernel is instantiated once per layout).
#ifndef FUSED_LINEAR_IMPL_PLAN_IMPL_HPP
#define FUSED_LINEAR_IMPL_PLAN_IMPL_HPP

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Checks.hpp"
#include "FusedLinear/impl/Dispatch.hpp"
#include "FusedLinear/impl/Facts.hpp"
#include "FusedLinear/impl/Planner.hpp"
#include "FusedLinear/impl/Wisdom.hpp"
#include "FusedLinear/impl/kernels/EpiloguePasses.hpp"
#include "FusedLinear/impl/kernels/FusedKernel.hpp"
#include "FusedLinear/impl/kernels/SkinnyKernel.hpp"

namespace FusedLinear {
namespace Impl {

/// The canonical View of a user's View on ExecSpace: what every internal function takes.
template <class ExecSpace, class View, class Value>
using Canonical =
    Kokkos::View<Value, typename View::array_layout,
                 Kokkos::Device<ExecSpace, typename View::memory_space>, Kokkos::MemoryUnmanaged>;
template <class ExecSpace, class View>
using CanonicalInput = Canonical<ExecSpace, View, typename View::const_data_type>;
template <class ExecSpace, class View>
using CanonicalOutput = Canonical<ExecSpace, View, typename View::non_const_data_type>;

/// Pushes a Kokkos profiling region for a scope, exceptions included.
struct ProfilingRegion {
  explicit ProfilingRegion(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~ProfilingRegion() { Kokkos::Profiling::popRegion(); }
  ProfilingRegion(const ProfilingRegion&) = delete;
  ProfilingRegion& operator=(const ProfilingRegion&) = delete;
};

template <class ExecSpace, class XView, class WView, class BView, class YView>
class PlanImpl {
 public:
  using Scalar = typename YView::non_const_value_type;
  using Memory = typename YView::memory_space;
  static constexpr bool on_cuda =
#if defined(KOKKOS_ENABLE_CUDA)
      std::is_same<ExecSpace, Kokkos::Cuda>::value;
#else
      false;
#endif

  PlanImpl(const ExecSpace& exec, const XView& X, const WView& W, const BView& b, const YView& Y,
           Scalar multiplier, Scalar negative_slope, const Options& options, const char* function)
      : m_shape(check_arguments(X, W, b, Y, multiplier, negative_slope, function)),
        m_ep{multiplier, negative_slope} {
    DeviceGuard device(exec, function);
    refuse_if_capturing(exec, function,
                        "a plan cannot be made while its stream is being captured "
                        "into a CUDA graph (it allocates): make it before the capture");
    const Facts facts = gather_facts(exec, X, W, b, Y);
    // Planning::Measure is a step of its own before the dispatch: it times the candidates (or
    // finds the choice in wisdom) and hands the fastest to resolve in the request.
    Request request{options.algorithm, options.precision, multiplier == Scalar(0)};
    bool from_wisdom = false;
    if (options.planning == Planning::Measure) {
      const Measured m = plan_by_measuring(exec, X, W, b, Y, options, facts, request, function);
      if (m == Measured::Done) return;
      from_wisdom = m == Measured::FromWisdom;
    }
    adopt(resolve(request, m_shape, facts, function));
    m_info.measured = request.measured.algorithm != Algorithm::Auto;
    m_info.from_wisdom = from_wisdom;
    if (m_info.gemm != Gemm::None) make_resources(exec, X, W, b, Y, options, function);
  }

  PlanImpl(const PlanImpl&) = delete;
  PlanImpl& operator=(const PlanImpl&) = delete;
  // Planning::Measure takes the winning candidate's state whole (not rebuilt); the workspace's
  // View keeps its allocation when moved, so the offsets into it stay valid.
  PlanImpl(PlanImpl&&) = default;
  PlanImpl& operator=(PlanImpl&&) = default;

  const RunInfo& info() const { return m_info; }
  /// Planning::Measure: the candidates timed when the plan was made (empty otherwise).
  const std::vector<Measurement>& measurements() const { return m_measurements; }
  const Shape& shape() const { return m_shape; }
  std::size_t workspace_bytes() const { return m_workspace.size(); }

  /// Enqueues the layer on `exec` with the plan's resources.
  void execute(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
               const YView& Y, const char* function) const {
    check_views(X, W, b, Y, m_shape, function);
    if (m_shape.M == 0 || m_shape.N == 0) return;
    DeviceGuard device(exec, function);
    check_call(exec, X, W, b, Y, function);  // every refusal before any work: Y stays as it was
    ProfilingRegion region(m_region);
    if (m_shape.K == 0) {
      epilogue_pass<Pass::BiasOnly>("FusedLinear::bias_only", exec, Y, b, m_ep);
      return;
    }
    switch (m_info.algorithm) {
      case Algorithm::Fused: run_fused(exec, X, W, b, Y, m_ep); break;
      case Algorithm::FusedSkinny:
        run_skinny(exec, X, W, b, Y, m_ep, m_skinny, part<Scalar>(m_partials_at),
                   part<unsigned long long>(m_arrivals_at));
        break;
      case Algorithm::Vendor:
        product(exec, Scalar(1), X, W, Scalar(0), Y, nullptr, function);
        epilogue_pass<Pass::BiasScaleActivation>("FusedLinear::vendor::epilogue", exec, Y, b, m_ep);
        break;
      case Algorithm::VendorPrefill:
        epilogue_pass<Pass::PrefillScaledBias>("FusedLinear::vendor_prefill::bias", exec, Y, b,
                                               m_ep);
        product(exec, m_ep.multiplier, X, W, Scalar(1), Y, nullptr, function);
        epilogue_pass<Pass::Activation>("FusedLinear::vendor_prefill::leaky_relu", exec, Y, b,
                                        m_ep);
        break;
      case Algorithm::VendorLt:
        // PyTorch's Linear adds the bias in cuBLASLt's epilogue too; the pass then only scales.
        product(exec, Scalar(1), X, W, Scalar(0), Y, m_bias_in_gemm ? b.data() : nullptr, function);
        if (m_bias_in_gemm)
          epilogue_pass<Pass::ScaleActivation>("FusedLinear::vendor_lt::epilogue", exec, Y, b,
                                               m_ep);
        else
          epilogue_pass<Pass::BiasScaleActivation>("FusedLinear::vendor_lt::epilogue", exec, Y, b,
                                                   m_ep);
        break;
      case Algorithm::FusedSm90:
      case Algorithm::SkinnySm90: run_sm90(exec, X, W, b, Y, function); break;
      case Algorithm::Auto: break;  // resolved when the plan was made
    }
  }

 private:
  /// Takes the dispatch's decision as the plan's path.
  void adopt(const Decision& d) {
    m_info.algorithm = d.algorithm;
    m_info.precision = d.precision;
    m_info.gemm = d.gemm;
    m_info.vendor_blas = d.vendor_blas;
    m_info.note = d.note;
    m_bias_in_gemm = d.bias_in_gemm;
    m_lt_variant = d.lt_variant;
    m_region = std::string("FusedLinear[") + to_string(d.algorithm) + "]";
  }

  /// A candidate of Planning::Measure: the path of an explicit decision, set up in full.
  struct Candidate {};
  PlanImpl(Candidate, const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
           const YView& Y, const Shape& shape, const LeakyReLUEpilogue<Scalar>& ep,
           const Decision& d, int lt_algorithms, const Options& options, const char* function)
      : m_shape(shape), m_ep(ep) {
    adopt(d);
    m_lt_algorithms = lt_algorithms;
    if (m_info.gemm != Gemm::None) make_resources(exec, X, W, b, Y, options, function);
  }

  enum class Measured { Nothing, FromWisdom, Done };
  /// Planning::Measure (Planner.hpp): finds the candidates, then either the process's wisdom
  /// for them (FromWisdom: `request` then names the remembered choice, which the constructor
  /// sets up) or times each on the plan's Views and instance, keeps the fastest one's state as
  /// this plan's and remembers the choice (Done). Nothing where there is nothing to choose.
  Measured plan_by_measuring(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                             const YView& Y, const Options& options, const Facts& facts,
                             Request& request, const char* function) {
    if (m_shape.M == 0 || m_shape.N == 0 || m_shape.K == 0) return Measured::Nothing;
    const std::vector<Choice> candidates = measure_candidates(request, m_shape, facts, function);
    if (candidates.size() == 1 && !has_variants(candidates[0])) return Measured::Nothing;
    const std::string key = wisdom_key(exec, X, W, b, Y, request, options.tuning, candidates);
    if (const auto known = WisdomStore::instance().find(key)) {
      // Only a candidate: wisdom edited by hand or for another build must not run a refused path.
      if (std::any_of(candidates.begin(), candidates.end(),
                      [&](const Choice& c) { return same_path(c, known->choice); })) {
        request.measured = known->choice;
        return Measured::FromWisdom;
      }
    }
    CallTimer<ExecSpace> timer(exec, function);
    std::vector<Measurement> timed;
    std::unique_ptr<PlanImpl> best;
    Choice best_choice;
    double best_ms = std::numeric_limits<double>::infinity(), spent_ms = 0;
    for (const Choice& c : candidates) {
      if (best && !options.tuning.measure_clock &&
          spent_ms > std::max(MeasureRule::budget_calls * best_ms, MeasureRule::budget_min_ms)) {
        // Past the budget: listed, not timed (a test's fake clock has every candidate timed).
        timed.push_back(
            {c.algorithm, c.precision, 0, std::numeric_limits<double>::infinity(), 0, false});
        continue;
      }
      const Decision d =
          resolve(Request{c.algorithm, c.precision, request.zero_multiplier, Choice{}}, m_shape,
                  facts, function);
      std::unique_ptr<PlanImpl> candidate;
      try {
        candidate.reset(new PlanImpl(Candidate{}, exec, X, W, b, Y, m_shape, m_ep, d,
                                     has_variants(c) ? MeasureRule::cublaslt_algorithms : 1,
                                     options, function));
      } catch (const std::runtime_error&) {
        // Its resources cannot be had (memory): listed, not timed.
        timed.push_back(
            {c.algorithm, c.precision, 0, std::numeric_limits<double>::infinity(), 0, false});
        continue;
      }
      bool leads = false;
      for (int v = 0; v < candidate->lt_variants(); ++v) {
        candidate->select_lt(v);
        const Timing t = time_candidate(
            [&](int call) {
              const double ms = timer([&] { candidate->execute(exec, X, W, b, Y, function); });
              return options.tuning.measure_clock
                         ? options.tuning.measure_clock(c.algorithm, c.precision, v, call, ms)
                         : ms;
            },
            best_ms);
        spent_ms += t.spent_ms;
        timed.push_back({c.algorithm, c.precision, v, t.ms, t.calls, false});
        if (t.ms < best_ms) {
          best_ms = t.ms;
          best_choice = Choice{c.algorithm, c.precision, v};
          leads = true;
        }
      }
      if (leads) {
        candidate->select_lt(best_choice.variant);
        best = std::move(candidate);  // the previous best goes: every call of it was waited for
      }
    }
    if (!best) return Measured::Nothing;  // none could be set up: the rule's path, or its error
    for (Measurement& m : timed)
      m.chosen = m.algorithm == best_choice.algorithm && m.precision == best_choice.precision &&
                 m.variant == best_choice.variant;
    WisdomStore::instance().remember(key, {best_choice, best_ms});
    request.measured = best_choice;
    const Decision d = resolve(request, m_shape, facts, function);
    if (d.algorithm != best->m_info.algorithm || d.precision != best->m_info.precision ||
        d.gemm != best->m_info.gemm || d.bias_in_gemm != best->m_bias_in_gemm)
      throw std::logic_error("FusedLinear: the measured path differs from its decision");
    *this = std::move(*best);
    adopt(d);
    m_info.measured = true;
    m_measurements = std::move(timed);
    return Measured::Done;
  }

  /// vendor_lt (strict, tf32): cuBLASLt's ranked algorithms the plan holds, and the one it runs.
  int lt_variants() const {
#if defined(FUSED_LINEAR_CUBLASLT)
    if constexpr (lt_possible) {
      if (m_lt) return m_lt->variants();
    }
#endif
    return 1;
  }
  void select_lt(int variant) {
#if defined(FUSED_LINEAR_CUBLASLT)
    if constexpr (lt_possible) {
      if (m_lt) m_lt->select(variant);
    }
#endif
    (void)variant;
  }

  /// What this call's Views must have for the plan's path beyond their extents, where the plan
  /// decided on its own Views' strides or alignment; std::invalid_argument naming `function`
  /// otherwise. (The portable kernels and KokkosBlas::gemm decide per call.)
  void check_call(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                  const YView& Y, const char* function) const {
    if (m_shape.K == 0) return;  // the bias pass only
    const Algorithm a = m_info.algorithm;
    const auto differ = [&](const std::string& why) {
      refuse(function, std::string(to_string(a)) +
                           ": these Views differ from those the plan was made for (" + why +
                           "); make a plan for them");
    };
#if defined(FUSED_LINEAR_CUBLASLT)
    if constexpr (lt_possible) {
      if (m_lt) {
        if (const char* why = m_lt->refusal(X, W, Y, m_bias_in_gemm, m_base + m_lt_at)) differ(why);
        if (m_bias_in_gemm && !cublaslt_takes_bias(b))
          differ("cuBLASLt adds b in its epilogue, planned for a contiguous, 16-byte aligned b");
      }
    }
#endif
#if defined(FUSED_LINEAR_SM90A)
    if constexpr (on_cuda && std::is_same<Scalar, float>::value) {
      if (a == Algorithm::FusedSm90 || a == Algorithm::SkinnySm90) {
        const Sm90::Problem p = sm90_problem(X, W, b, Y, m_ep);
        const bool tf32x3 = a == Algorithm::FusedSm90;
        const char* why = sm90_layouts_refusal(X, W, b, Y);
        if (!why)
          why = tf32x3 ? Sm90::tf32x3_refusal(m_sm90_device, p)
                       : Sm90::skinny_refusal(m_sm90_device, p);
        if (!why && (tf32x3 ? Sm90::tf32x3_workspace_bytes(p)
                            : Sm90::skinny_workspace_bytes(m_sm90_device, p)) > m_sm90_bytes)
          why = "their alignment needs more workspace";
        if (why) differ(why);
      }
    }
#endif
    if (m_info.gemm == Gemm::KokkosKernelsNative && !kokkos_blas_gemm_on_instance)
      refuse_if_capturing(exec, function,
                          "Kokkos Kernels' native gemm (on these Views) runs on the default "
                          "instance, ordered by fences, and cannot be captured into a CUDA graph");
    (void)exec, (void)X, (void)W, (void)b, (void)Y, (void)differ;
  }

  /// Refuses (std::invalid_argument naming `function`, saying `why`) where `exec`'s stream is
  /// being captured into a CUDA graph; nothing elsewhere.
  static void refuse_if_capturing(const ExecSpace& exec, const char* function, const char* why) {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (on_cuda) {
      if (stream_is_capturing(exec.cuda_stream())) refuse(function, why);
    }
#endif
    (void)exec, (void)function, (void)why;
  }

  /// Makes the execution space's device current for a scope (CUDA; nothing elsewhere).
  struct DeviceGuard {
#if defined(KOKKOS_ENABLE_CUDA)
    std::optional<CudaDeviceGuard> guard;
    DeviceGuard(const ExecSpace& exec, const char* function) {
      if constexpr (on_cuda) guard.emplace(exec.cuda_device(), function);
      (void)exec, (void)function;
    }
#else
    DeviceGuard(const ExecSpace&, const char*) {}
#endif
  };

  template <class T>
  T* part(std::size_t offset) const {
    return reinterpret_cast<T*>(m_base + offset);
  }

  /// Lays out and allocates the workspace the decision needs; every piece starts at a 256-byte
  /// boundary (cuBLASLt's preferred alignment, TMA's 16 bytes, and Scalars' own).
  void make_resources(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                      const YView& Y, const Options& options, const char* function) {
    std::size_t bytes = 0;
    const auto reserve = [&bytes](std::size_t n) {
      const std::size_t at = bytes;
      bytes += (n + 255) / 256 * 256;
      return at;
    };
    const Algorithm a = m_info.algorithm;
    if (a == Algorithm::FusedSkinny) {
      m_skinny = choose_skinny<ExecSpace, Scalar>(exec, m_shape.M, m_shape.N, m_shape.K,
                                                  options.tuning.skinny_splits);
      if (m_skinny.partials > 0) {
        m_partials_at = reserve(std::size_t(m_skinny.partials) * sizeof(Scalar));
        m_arrivals_at = reserve(std::size_t(m_skinny.tiles) * sizeof(unsigned long long));
      }
    }
#if defined(FUSED_LINEAR_CUBLASLT)
    if constexpr (lt_possible) {
      if (a == Algorithm::VendorLt || (m_info.precision == Precision::TF32x3 &&
                                       (a == Algorithm::Vendor || a == Algorithm::VendorPrefill))) {
        m_lt.reset(new Lt(X, W, Y, m_bias_in_gemm, m_info.precision,
                          options.tuning.tf32x3_partials_limit, m_lt_algorithms, m_lt_variant));
        m_lt_at = reserve(m_lt->workspace_bytes());
      }
    }
#endif
#if defined(FUSED_LINEAR_SM90A)
    if constexpr (on_cuda && std::is_same<Scalar, float>::value) {
      if (a == Algorithm::FusedSm90 || a == Algorithm::SkinnySm90) {
        m_sm90_device = sm90_device(exec);
        m_sm90_choice = options.tuning.sm90_tf32x3_kernel;
        m_sm90_splits = options.tuning.skinny_splits;
        const Sm90::Problem p = sm90_problem(X, W, b, Y, m_ep);
        m_sm90_bytes = a == Algorithm::FusedSm90 ? Sm90::tf32x3_workspace_bytes(p)
                                                 : Sm90::skinny_workspace_bytes(m_sm90_device, p);
        m_sm90_at = reserve(m_sm90_bytes);
      }
    }
#endif
    (void)X, (void)W, (void)b, (void)Y;
    if (bytes == 0) return;
    try {
      m_workspace = Workspace(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "FusedLinear::workspace"), bytes + 256);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string(function) + ": cannot allocate " +
                               std::to_string(bytes) + " bytes of workspace for " + to_string(a) +
                               " (" + e.what() + ")");
    }
    const auto start = reinterpret_cast<std::uintptr_t>(m_workspace.data());
    m_base = m_workspace.data() + ((start + 255) / 256 * 256 - start);
    if (m_skinny.partials > 0) {
      // The arrival counters start at zero once; each call numbers itself (see fix_up).
      Kokkos::deep_copy(exec, Counters(part<unsigned long long>(m_arrivals_at), m_skinny.tiles),
                        0ull);
      exec.fence();
    }
  }

  void product(const ExecSpace& exec, Scalar alpha, const XView& X, const WView& W, Scalar beta,
               const YView& Y, const Scalar* bias, const char* function) const {
#if defined(FUSED_LINEAR_CUBLASLT)
    if constexpr (lt_possible) {
      if (m_lt) {
        CacheConfigGuard cache_config(exec.cuda_stream());
        m_lt->run(exec, alpha, X, W, beta, Y, bias, m_base + m_lt_at);
        return;
      }
    }
#endif
    (void)bias, (void)function;
    kokkos_blas_gemm_nt(exec, alpha, X, W, beta, Y, m_info.precision == Precision::TF32);
  }

  void run_sm90(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                const YView& Y, const char* function) const {
#if defined(FUSED_LINEAR_SM90A)
    if constexpr (on_cuda && std::is_same<Scalar, float>::value) {
      const Sm90::Problem p = sm90_problem(X, W, b, Y, m_ep);
      const bool tf32x3 = m_info.algorithm == Algorithm::FusedSm90;
      const cudaStream_t stream = exec.cuda_stream();
      void* workspace = m_sm90_bytes > 0 ? m_base + m_sm90_at : nullptr;
      cuda_check(tf32x3 ? Sm90::tf32x3_linear_leaky_relu(stream, m_sm90_device, p, workspace,
                                                         m_sm90_bytes, m_sm90_choice)
                        : Sm90::skinny_linear_leaky_relu(stream, m_sm90_device, p, workspace,
                                                         m_sm90_bytes, m_sm90_splits),
                 function,
                 tf32x3 ? "run the sm_90a 3xTF32 kernel" : "run the sm_90a few-rows kernel");
      return;
    }
#endif
    (void)exec, (void)X, (void)W, (void)b, (void)Y, (void)function;
    throw std::logic_error("FusedLinear: an sm_90a kernel was chosen where it cannot run");
  }

  using Workspace = Kokkos::View<unsigned char*, Memory>;
  using Counters = Kokkos::View<unsigned long long*, Memory, Kokkos::MemoryUnmanaged>;

  Shape m_shape;
  LeakyReLUEpilogue<Scalar> m_ep;
  RunInfo m_info;
  std::vector<Measurement> m_measurements;
  bool m_bias_in_gemm = false;
  int m_lt_variant = 0, m_lt_algorithms = 1;  // cuBLASLt's algorithm run, and those held
  std::string m_region;
  Workspace m_workspace;
  unsigned char* m_base = nullptr;
  SkinnyChoice m_skinny;
  std::size_t m_partials_at = 0, m_arrivals_at = 0;
#if defined(FUSED_LINEAR_CUBLASLT)
  static constexpr bool lt_possible = cublaslt_serves<ExecSpace, XView, WView, YView>();
  using Lt =
      LtProduct<Scalar,
                std::conditional_t<lt_possible, typename YView::array_layout, Kokkos::LayoutRight>>;
  std::unique_ptr<Lt> m_lt;
  std::size_t m_lt_at = 0;
#endif
#if defined(FUSED_LINEAR_SM90A)
  Sm90::Device m_sm90_device;
  int m_sm90_choice = 0, m_sm90_splits = 0;
  std::size_t m_sm90_bytes = 0, m_sm90_at = 0;
#endif
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
