// SPDX-License-Identifier: Apache-2.0
/// \file PlanImpl.hpp
/// A plan: its decision, the engine of that path (engines/Engines.hpp) and its execution, on the
/// library's canonical Views (const, unmanaged, on the plan's execution space: any View a user
/// passes converts to them, whatever its memory traits, and every kernel is instantiated once
/// per layout).
#ifndef FUSED_LINEAR_IMPL_PLAN_IMPL_HPP
#define FUSED_LINEAR_IMPL_PLAN_IMPL_HPP

#include <algorithm>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Config.hpp"
#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Checks.hpp"
#include "FusedLinear/impl/Dispatch.hpp"
#include "FusedLinear/impl/Facts.hpp"
#include "FusedLinear/impl/GatherFacts.hpp"
#include "FusedLinear/impl/Fork.hpp"
#include "FusedLinear/impl/Planner.hpp"
#include "FusedLinear/impl/Wisdom.hpp"
#include "FusedLinear/impl/engines/Engine.hpp"
#include "FusedLinear/impl/engines/Engines.hpp"

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

template <class ExecSpace, class XView, class WView, class BView, class YView>
class PlanImpl;
/// The plan of the canonical Views of a user's View types.
template <class ExecSpace, class XView, class WView, class BView, class YView>
using PlanImplOf =
    PlanImpl<ExecSpace, CanonicalInput<ExecSpace, XView>, CanonicalInput<ExecSpace, WView>,
             CanonicalInput<ExecSpace, BView>, CanonicalOutput<ExecSpace, YView>>;

/// Pushes a Kokkos profiling region for a scope, exceptions included.
struct ProfilingRegion {
  explicit ProfilingRegion(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~ProfilingRegion() { Kokkos::Profiling::popRegion(); }
  ProfilingRegion(const ProfilingRegion&) = delete;
  ProfilingRegion& operator=(const ProfilingRegion&) = delete;
};

template <class ExecSpace, class XView, class WView, class BView, class YView>
class PlanImpl {
  using Engines_ = Engines<ExecSpace, XView, WView, BView, YView>;
  using Setup = EngineSetup<ExecSpace, XView, WView, BView, YView>;

 public:
  using Scalar = typename YView::non_const_value_type;

  // The members that reach the engines are defined below the class, not inline: where the
  // library instantiates this plan (PlanImplEti.hpp, which the public headers include for it), a
  // user's translation unit compiles none of its engines.
  PlanImpl(const ExecSpace& exec, const XView& X, const WView& W, const BView& b, const YView& Y,
           Scalar multiplier, Scalar negative_slope, const Options& options, const char* function);
  ~PlanImpl();

  PlanImpl(const PlanImpl&) = delete;
  PlanImpl& operator=(const PlanImpl&) = delete;
  // Planning::Measure takes the winning candidate's engine whole (not rebuilt); the engines'
  // workspaces keep their allocations when moved, so pointers into them stay valid.
  PlanImpl(PlanImpl&&);
  PlanImpl& operator=(PlanImpl&&);

  const RunInfo& info() const { return m_decision; }
  /// Planning::Measure: the candidates timed when the plan was made (empty otherwise).
  const std::vector<Measurement>& measurements() const { return m_measurements; }
  const Shape& shape() const { return m_shape; }
  std::size_t workspace_bytes() const;
  /// Planning::Measure: the engine's variants to time (cuBLASLt's ranked algorithms), and the
  /// one that runs.
  int variants() const;
  void select(int variant);
  /// The selected variant's configuration (cuBLASLt's), which wisdom keeps with its rank.
  std::string variant_config() const;

  /// Enqueues the layer on `exec` with the plan's engine; every refusal (the engine's check of
  /// what its path was planned for) comes before any work, so Y stays as it was.
  void execute(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
               const YView& Y, const char* function) const;

 private:
  /// Takes the dispatch's decision as the plan's path and sets up its engine.
  void adopt(const Setup& s);

  /// A candidate of Planning::Measure: the path of an explicit decision, set up in full.
  struct AsCandidate {};
  PlanImpl(AsCandidate, const Setup& s, const Shape& shape) : m_shape(shape) { adopt(s); }

  enum class Measured { Nothing, FromWisdom, Done };
  /// Planning::Measure (Planner.hpp): finds the candidates, then either the process's wisdom
  /// for them (FromWisdom: `request` then names the remembered choice, which the constructor
  /// sets up) or times each on the plan's Views and instance, keeps the fastest one's engine as
  /// this plan's and remembers the choice (Done). Nothing where there is nothing to choose.
  Measured plan_by_measuring(const Setup& s, const Facts& facts, Request& request);

  Shape m_shape;
  Decision m_decision;
  std::vector<Measurement> m_measurements;
  std::string m_region;
  typename Engines_::Any m_engine;
};

template <class ExecSpace, class XView, class WView, class BView, class YView>
PlanImpl<ExecSpace, XView, WView, BView, YView>::PlanImpl(
    const ExecSpace& exec, const XView& X, const WView& W, const BView& b, const YView& Y,
    Scalar multiplier, Scalar negative_slope, const Options& options, const char* function)
    : m_shape(check_arguments(X, W, b, Y, multiplier, negative_slope, function)) {
  const LeakyReLUEpilogue<Scalar> ep{multiplier, negative_slope};
  refuse_if_forked(exec, function);  // before any device call
  ExecDeviceGuard<ExecSpace> device(exec, function);
  refuse_if_capturing(exec, function,
                      "a plan cannot be made while its stream is being captured "
                      "into a CUDA graph (it allocates): make it before the capture");
  const Facts facts = gather_facts(exec, X, W, b, Y);
  // Planning::Measure is a step of its own before the dispatch: it times the candidates (or
  // finds the choice in wisdom) and hands the fastest to resolve in the request.
  Request request{options.algorithm, options.precision, multiplier == Scalar(0)};
  Setup setup{exec, X, W, b, Y, Decision{}, ep, options, 1, function};
  Measured m = Measured::Nothing;
  if (options.planning == Planning::Measure) {
    m = plan_by_measuring(setup, facts, request);
    if (m == Measured::Done) return;
  }
  setup.decision = resolve(request, m_shape, facts, function);
  adopt(setup);
  m_decision.measured = request.measured.algorithm != Algorithm::Auto;
  m_decision.from_wisdom = m == Measured::FromWisdom;
}

template <class ExecSpace, class XView, class WView, class BView, class YView>
PlanImpl<ExecSpace, XView, WView, BView, YView>::~PlanImpl() = default;
template <class ExecSpace, class XView, class WView, class BView, class YView>
PlanImpl<ExecSpace, XView, WView, BView, YView>::PlanImpl(PlanImpl&&) = default;
template <class ExecSpace, class XView, class WView, class BView, class YView>
auto PlanImpl<ExecSpace, XView, WView, BView, YView>::operator=(PlanImpl&&) -> PlanImpl& = default;

template <class ExecSpace, class XView, class WView, class BView, class YView>
std::size_t PlanImpl<ExecSpace, XView, WView, BView, YView>::workspace_bytes() const {
  return std::visit([](const auto& e) { return e.workspace_bytes(); }, m_engine);
}

template <class ExecSpace, class XView, class WView, class BView, class YView>
int PlanImpl<ExecSpace, XView, WView, BView, YView>::variants() const {
  return std::visit([](const auto& e) { return e.variants(); }, m_engine);
}

template <class ExecSpace, class XView, class WView, class BView, class YView>
void PlanImpl<ExecSpace, XView, WView, BView, YView>::select(int variant) {
  std::visit([variant](auto& e) { e.select(variant); }, m_engine);
}

template <class ExecSpace, class XView, class WView, class BView, class YView>
std::string PlanImpl<ExecSpace, XView, WView, BView, YView>::variant_config() const {
  return std::visit([](const auto& e) { return e.variant_config(); }, m_engine);
}

template <class ExecSpace, class XView, class WView, class BView, class YView>
void PlanImpl<ExecSpace, XView, WView, BView, YView>::execute(const ExecSpace& exec, const XView& X,
                                                              const WView& W, const BView& b,
                                                              const YView& Y,
                                                              const char* function) const {
  check_views(X, W, b, Y, m_shape, function);
  if (m_shape.M == 0 || m_shape.N == 0) return;
  refuse_if_forked(exec, function);
  ExecDeviceGuard<ExecSpace> device(exec, function);
  std::visit(
      [&](const auto& e) {
        e.check(exec, X, W, b, Y, function);
        ProfilingRegion region(m_region);
        e.run(exec, X, W, b, Y, function);
      },
      m_engine);
}

template <class ExecSpace, class XView, class WView, class BView, class YView>
void PlanImpl<ExecSpace, XView, WView, BView, YView>::adopt(const Setup& s) {
  m_decision = s.decision;
  m_region = std::string("FusedLinear[") + to_string(s.decision.algorithm) + "]";
  Engines_::make(m_engine, s);
}

template <class ExecSpace, class XView, class WView, class BView, class YView>
auto PlanImpl<ExecSpace, XView, WView, BView, YView>::plan_by_measuring(const Setup& s,
                                                                        const Facts& facts,
                                                                        Request& request)
    -> Measured {
  if (m_shape.M == 0 || m_shape.N == 0 || m_shape.K == 0) return Measured::Nothing;
  const std::vector<Choice> candidates = measure_candidates(request, m_shape, facts, s.function);
  if (candidates.size() == 1 && !has_variants(candidates[0])) return Measured::Nothing;
  const Experimental::Tuning& tuning = s.options.tuning;
  const std::string key = wisdom_key(s.exec, s.X, s.W, s.b, s.Y, request, tuning, candidates);
  if (const auto known = WisdomStore::instance().find(key)) {
    // Only a candidate: wisdom edited by hand or for another build must not run a refused path.
    if (std::any_of(candidates.begin(), candidates.end(),
                    [&](const Choice& c) { return same_path(c, known->choice); })) {
      request.measured = known->choice;
      return Measured::FromWisdom;
    }
  }
  CallTimer<ExecSpace> timer(s.exec, s.function);
  const auto make = [&](const Choice& c) {
    Setup one = s;
    one.decision = resolve(Request{c.algorithm, c.precision, request.zero_multiplier, {}}, m_shape,
                           facts, s.function);
    one.lt_algorithms = has_variants(c) ? MeasureRule::cublaslt_algorithms : 1;
    return std::unique_ptr<PlanImpl>(new PlanImpl(AsCandidate{}, one, m_shape));
  };
  const auto call = [&](const PlanImpl& p, const Choice& c, int variant, int i) {
    const double ms = timer([&] { p.execute(s.exec, s.X, s.W, s.b, s.Y, s.function); });
    return tuning.measure_clock ? tuning.measure_clock(c.algorithm, c.precision, variant, i, ms)
                                : ms;
  };
  Fastest<PlanImpl> fastest = time_candidates<PlanImpl>(
      candidates, !tuning.measure_clock, make, call,
      [&](const Choice& c) { return compute_bound_ms(c, m_shape, facts); },
      facts.backend == Backend::Host ? MeasureRule::host_min_timed_calls : 1);
  // None could be set up: the rule's path runs, or raises its error.
  if (!fastest.plan) return Measured::Nothing;
  fastest.choice.lt_config = fastest.plan->variant_config();
  WisdomStore::instance().remember(key, WisdomEntry{fastest.choice, fastest.ms});
  request.measured = fastest.choice;
  const Decision d = resolve(request, m_shape, facts, s.function);
  const Decision& best = fastest.plan->m_decision;
  if (d.algorithm != best.algorithm || d.precision != best.precision || d.gemm != best.gemm ||
      d.bias_in_gemm != best.bias_in_gemm)
    throw std::logic_error("FusedLinear: the measured path differs from its decision");
  *this = std::move(*fastest.plan);
  m_decision = d;
  m_decision.measured = true;
  m_measurements = std::move(fastest.timed);
  return Measured::Done;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
