// SPDX-License-Identifier: Apache-2.0
/// \file Planner.hpp
/// Planning::Measure, the step before the dispatch: which paths to time (the candidates `auto`
/// may choose from, found by asking the pure Impl::resolve), how long to time each, the timer,
/// and the timing of the candidates the plan (PlanImpl.hpp) sets up. The fastest enters
/// Impl::resolve as Request::measured, so the dispatch stays a pure function of its inputs.
#ifndef FUSED_LINEAR_IMPL_PLANNER_HPP
#define FUSED_LINEAR_IMPL_PLANNER_HPP

#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Dispatch.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"

namespace FusedLinear {
namespace Impl {

/// How long Planning::Measure times a candidate (docs/design/dispatch.md, "Planning").
struct MeasureRule {
  /// Timed calls after the warm-up call (which loads kernels, fills caches and the cuBLASLt
  /// handle's state): until they add up to `enough_ms` (one call of a large layer varies by well
  /// under 1%), at least one and at most this many (a small layer's single calls vary by
  /// several per cent). A candidate's time is their lower median, the time its calls take, not
  /// their minimum: a path of two launches varies more, and its luckiest call beat a steadier
  /// path whose calls were all faster than its typical one.
  static constexpr int timed_calls = 10;
  static constexpr double enough_ms = 1.5;
  /// On the host, at least this many timed calls: a shared machine stalls a call now and then
  /// (one stalled call of a small layer can exceed enough_ms alone), and the median of three
  /// passes over one stall. On GPUs the events time the device, which the host's stalls miss.
  static constexpr int host_min_timed_calls = 3;
  /// A candidate whose warm-up call took more than this multiple of the best time so far, plus
  /// the slack (a first launch may load a module), gets no timed call: it cannot win.
  static constexpr double warmup_drop_factor = 2.0;
  static constexpr double warmup_drop_slack_ms = 0.5;
  /// A warm-up this far behind is more likely a one-time cost (the process's first cuBLAS call
  /// makes its handle) than the path's speed: the candidate gets a second warm-up call.
  static constexpr double warmup_retry_factor = 8.0;
  /// A later cuBLASLt variant is another kernel, whose first launch loads its module (CUDA's
  /// lazy loading: milliseconds): every warm-up that would drop it gets a second one.
  static constexpr double variant_retry_factor = warmup_drop_factor;
  /// A candidate whose first timed call is this much slower than the best gets no more.
  static constexpr double first_call_drop_factor = 1.25;
  /// The rule's choice (the first candidate, its first variant) stays unless another is faster
  /// by more than this share: within it, the timing's noise decides more often than speed does
  /// (docs/design/dispatch.md, "Planning"), and the rule was fitted on many more calls.
  static constexpr double rule_margin = 0.02;
  /// Before another candidate replaces the rule's choice, the two are timed again, their calls
  /// interleaved (a clock or cache state that drifts meets both alike), at least this many each
  /// and until each adds up to `enough_ms`, at most `timed_calls`: Measure must not end slower
  /// than the plan Estimate makes because one pass of calls was lucky.
  static constexpr int retimed_calls = 2;
  /// vendor_lt in strict or tf32: cuBLASLt's first ranked algorithms timed, each a candidate.
  static constexpr int cublaslt_algorithms = 4;
  /// The whole measurement's bound: once the candidates' calls (warm-ups included, each counted
  /// at its candidate's time, so that a one-time cost does not use the budget up) add up to this
  /// many calls of the best candidate so far, and to at least `budget_min_ms`, the rest are not
  /// timed (they come last: the slower arithmetic).
  static constexpr double budget_calls = 16;
  static constexpr double budget_min_ms = 30.0;
};

inline bool same_path(const Choice& a, const Choice& b) {
  return a.algorithm == b.algorithm && a.precision == b.precision;
}

/// Whether a path has variants of its own to time: cuBLASLt's ranked algorithms for vendor_lt's
/// single product (strict, tf32; 3xtf32's several products keep the heuristic's first).
inline bool has_variants(const Choice& c) {
  return c.algorithm == Algorithm::VendorLt && c.precision != Precision::TF32x3;
}

/// The least time (ms) a candidate can take, where its arithmetic's peak is known: strict fp32
/// runs on the CUDA cores, at best at Facts::fp32_gflops (2 M N K flops). 0 where nothing is
/// known (the tensor-core precisions, the host, HIP, and CUDA from compute capability 10 on:
/// Facts::fp32_bound). A candidate whose bound is not below the best time so far is not timed:
/// it cannot win.
inline double compute_bound_ms(const Choice& c, const Shape& s, const Facts& f) {
  if (c.precision != Precision::Strict || !f.fp32_bound || f.fp32_gflops <= 0) return 0;
  return 2.0 * double(s.M) * double(s.N) * double(s.K) / (f.fp32_gflops * 1e6);
}

/// The paths Planning::Measure times for a request: under Algorithm::Auto every explicit
/// algorithm at every precision that meets the floor and that resolve serves for these facts
/// (refusals caught), each path once (a fallback such as vendor_lt running vendor is that
/// path; 3xtf32's cuBLASLt products once, as vendor_lt), on GPUs those the cost model predicts
/// within GpuRule::measure_within of the fastest, the rule's own choice first; under an
/// explicit algorithm, that path alone. Throws as resolve does where the request itself is refused.
/// Pure, like resolve.
inline std::vector<Choice> measure_candidates(const Request& request, const Shape& s,
                                              const Facts& f, const char* function) {
  std::vector<Choice> out;
  const auto add = [&out](const Decision& d) {
    const Choice c{d.algorithm, d.precision, 0};
    if (std::none_of(out.begin(), out.end(), [&](const Choice& o) { return same_path(o, c); }))
      out.push_back(c);
  };
  Request rule = request;
  rule.measured = Choice{};
  add(resolve(rule, s, f, function));
  if (request.algorithm != Algorithm::Auto) return out;
  // The floor's own precision first, the more accurate (slower) ones after: where the budget
  // runs out, what is left untimed is what is least likely to win.
  for (const Precision p : {Precision::TF32, Precision::TF32x3, Precision::Strict}) {
    if (!meets_floor(p, request.precision)) continue;
    for (const Algorithm a : all_algorithms) {
      if (a == Algorithm::Auto) continue;
      // 3xtf32 on vendor and vendor_prefill runs vendor_lt's three cuBLASLt products, set up
      // with their 0.6 GB-class split operands each time: vendor_lt stands for the three.
      if (p == Precision::TF32x3 && f.cublaslt &&
          (a == Algorithm::Vendor || a == Algorithm::VendorPrefill))
        continue;
      try {
        add(resolve(Request{a, p, request.zero_multiplier, Choice{}}, s, f, function));
      } catch (const std::invalid_argument&) {
        // Refused for these Views, this build or device: not a candidate.
      }
    }
  }
  if (f.backend != Backend::Host) {
    // GPUs: only what the cost model predicts within GpuRule::measure_within of its least (the
    // best path fell within it on 99% of the cases the model was fitted on); the rule's choice
    // stays first.
    const auto predicted = [&](const Choice& c) {
      return gpu_predicted_ms({c.algorithm, c.precision}, s, f);
    };
    double least = predicted(out.front());
    for (const Choice& c : out) least = std::min(least, predicted(c));
    out.erase(std::remove_if(out.begin() + 1, out.end(),
                             [&](const Choice& c) {
                               return !(predicted(c) <= GpuRule::measure_within * least);
                             }),
              out.end());
  }
  return out;
}

/// One candidate's timing: its time (ms) and the calls it ran, the warm-ups included.
struct Timing {
  double ms = std::numeric_limits<double>::infinity();
  int calls = 0;
  double timed_ms = 0;  // its timed calls, the warm-ups left out
};

/// The lower median of n > 0 timed calls (reorders them): the middle one, of an even number the
/// lower of the two middle ones.
inline double lower_median(double* timed, int n) {
  std::nth_element(timed, timed + (n - 1) / 2, timed + n);
  return timed[(n - 1) / 2];
}

/// Times one candidate against the best time so far (infinity for the first), by
/// MeasureRule: `call(i)` runs the i-th call and returns its milliseconds. A warm-up call (two
/// where the first is over `retry_factor` times the best plus the slack), then timed calls until
/// they take MeasureRule::enough_ms and number at least `min_timed`, at most
/// MeasureRule::timed_calls, fewer once they show it cannot win; none where the warm-up shows
/// it. Its time is the timed calls' lower median; a dropped candidate's is the lower median of
/// the calls that dropped it (behind the best).
template <class Call>
Timing time_candidate(Call&& call, double best_ms,
                      double retry_factor = MeasureRule::warmup_retry_factor, int min_timed = 1) {
  Timing t;
  const auto next = [&] { return call(t.calls++); };
  double warmup = next();
  if (warmup > retry_factor * best_ms + MeasureRule::warmup_drop_slack_ms) warmup = next();
  if (warmup > MeasureRule::warmup_drop_factor * best_ms + MeasureRule::warmup_drop_slack_ms) {
    t.ms = warmup;
    return t;
  }
  double timed[MeasureRule::timed_calls];
  int n = 0;
  while (n < MeasureRule::timed_calls) {
    const double ms = next();
    timed[n++] = ms;
    t.timed_ms += ms;
    if (n < min_timed) continue;
    if (t.timed_ms >= MeasureRule::enough_ms) break;
    if (n == min_timed && lower_median(timed, n) > MeasureRule::first_call_drop_factor * best_ms)
      break;
  }
  t.ms = lower_median(timed, n);
  return t;
}

/// What Planning::Measure's timing found: the fastest candidate, set up (nullptr where none could
/// be), its choice and time, and every candidate listed (the chosen one not yet marked).
template <class CandidatePlan>
struct Fastest {
  std::unique_ptr<CandidatePlan> plan;
  Choice choice;
  double ms = std::numeric_limits<double>::infinity();
  bool rule = false;  // the choice is the rule's (MeasureRule::rule_margin)
  std::vector<Measurement> timed;
};

/// Two candidates timed again against each other.
struct Retimed {
  double ms[2];  // each one's timed calls' lower median
  int calls;     // each one's calls
};

/// The rule's choice and the fastest other candidate timed again, interleaved (MeasureRule::
/// retimed_calls), each call by `call(side, i)` (side 0: the rule's, 1: the other).
template <class Call>
Retimed retime_pair(Call&& call, int min_timed) {
  double timed[2][MeasureRule::timed_calls];
  double total[2] = {0, 0};
  int n = 0;
  while (n < MeasureRule::timed_calls) {
    // Alternate which side goes first, so that neither always follows the other's calls.
    for (int k = 0; k < 2; ++k) {
      const int side = (n + k) % 2;
      timed[side][n] = call(side, n);
      total[side] += timed[side][n];
    }
    ++n;
    if (n >= std::max(min_timed, MeasureRule::retimed_calls) &&
        std::min(total[0], total[1]) >= MeasureRule::enough_ms)
      break;
  }
  return {{lower_median(timed[0], n), lower_median(timed[1], n)}, n};
}

/// Times `candidates` in order by time_candidate, their first variants first and then the
/// others (`variants()`, `select(v)`: cuBLASLt's next algorithms refine a path already timed,
/// so every path is timed before them); the first is the rule's choice, which another must beat
/// by MeasureRule::rule_margin: `make(c)` sets one up (a std::unique_ptr<CandidatePlan>;
/// std::runtime_error where its memory cannot be had: listed, not timed); `call(candidate, c,
/// v, i)` runs its i-th call and returns the milliseconds; `bound(c)` is the least time it can
/// take (compute_bound_ms); `min_timed`: time_candidate's least number of timed calls.
/// `real_clock`: a candidate whose bound is not below the best so far, and all past
/// MeasureRule's budget, are listed, not timed (a test's fake clock has every candidate timed). The
/// previous best goes as a faster one is found (every call of it was waited for), but for the
/// rule's choice: where another leads at the end, the two are timed again (retime_pair) and the
/// other must still beat it by the margin.
template <class CandidatePlan, class Make, class Call, class Bound>
Fastest<CandidatePlan> time_candidates(const std::vector<Choice>& candidates, bool real_clock,
                                       Make&& make, Call&& call, Bound&& bound, int min_timed = 1) {
  Fastest<CandidatePlan> f;
  double spent_ms = 0;
  // The rule's choice, set up: the plan's, or kept here once another leads.
  CandidatePlan* rule_plan = nullptr;
  std::unique_ptr<CandidatePlan> rule_kept;
  const auto skipped = [&](double bound_ms) {
    return f.plan && real_clock &&
           (bound_ms >= f.ms ||
            spent_ms > std::max(MeasureRule::budget_calls * f.ms, MeasureRule::budget_min_ms));
  };
  const auto untimed = [&f](const Choice& c, int variant, double bound_ms) {
    Measurement m{c.algorithm, c.precision, variant, std::numeric_limits<double>::infinity(),
                  0,           false};
    m.bound_ms = bound_ms;
    f.timed.push_back(m);
  };
  // Sets one up (nullptr where its memory cannot be had), with the milliseconds it took.
  const auto set_up = [&](const Choice& c, double& setup_ms) -> std::unique_ptr<CandidatePlan> {
    Kokkos::Timer timer;
    try {
      std::unique_ptr<CandidatePlan> out = make(c);
      setup_ms = timer.seconds() * 1e3;
      return out;
    } catch (const std::runtime_error&) {
      return nullptr;
    }
  };
  // Times variant v of `candidate`; it becomes the plan where it is the fastest yet (by the
  // margin, against the rule's choice).
  const auto time_variant = [&](std::unique_ptr<CandidatePlan>& candidate, const Choice& c, int v,
                                double setup_ms, double bound_ms) {
    candidate->select(v);
    const Timing t = time_candidate(
        [&](int i) { return call(*candidate, c, v, i); }, f.ms,
        v == 0 ? MeasureRule::warmup_retry_factor : MeasureRule::variant_retry_factor, min_timed);
    spent_ms += t.calls * t.ms;
    Measurement m{c.algorithm, c.precision, v, t.ms, t.calls, false};
    m.setup_ms = setup_ms;
    m.bound_ms = bound_ms;
    f.timed.push_back(m);
    const bool rule = f.timed.size() == 1;  // the first candidate's first variant
    if (rule) rule_plan = candidate.get();
    if (t.ms < (f.rule ? f.ms / (1 + MeasureRule::rule_margin) : f.ms)) {
      f.ms = t.ms;
      f.choice = Choice{c.algorithm, c.precision, v};
      f.rule = rule;
      if (candidate.get() != f.plan.get()) {
        if (f.plan && f.plan.get() == rule_plan) rule_kept = std::move(f.plan);
        f.plan = std::move(candidate);
      }
    }
  };
  const auto is_plan = [&f](const Choice& c) { return f.plan && same_path(f.choice, c); };

  std::vector<std::pair<Choice, int>> with_variants;  // and how many
  for (const Choice& c : candidates) {
    const double bound_ms = bound(c);
    double setup_ms = 0;
    std::unique_ptr<CandidatePlan> candidate = skipped(bound_ms) ? nullptr : set_up(c, setup_ms);
    if (!candidate) {
      untimed(c, 0, bound_ms);
      continue;
    }
    const int variants = candidate->variants();
    time_variant(candidate, c, 0, setup_ms, bound_ms);
    if (variants > 1) with_variants.emplace_back(c, variants);
  }
  for (const auto& [c, variants] : with_variants) {
    const double bound_ms = bound(c);
    std::unique_ptr<CandidatePlan> own;  // set up again unless it is the plan
    double setup_ms = 0;
    for (int v = 1; v < variants; ++v) {
      // The plan's own engine where it leads, or the rule's: its variant is selected again below.
      std::unique_ptr<CandidatePlan>& on = is_plan(c) ? f.plan
                                           : rule_kept && same_path(candidates.front(), c)
                                               ? rule_kept
                                               : own;
      if (skipped(bound_ms) || (!on && !(on = set_up(c, setup_ms)))) {
        untimed(c, v, bound_ms);
        continue;
      }
      time_variant(on, c, v, std::exchange(setup_ms, 0), bound_ms);
    }
  }
  if (f.plan && rule_plan && !f.rule) {
    const auto rule_entry = f.timed.begin();
    const auto other_entry =
        std::find_if(f.timed.begin(), f.timed.end(), [&f](const Measurement& m) {
          return m.calls > 0 && m.algorithm == f.choice.algorithm &&
                 m.precision == f.choice.precision && m.variant == f.choice.variant;
        });
    const Choice rule{candidates.front().algorithm, candidates.front().precision, 0};
    CandidatePlan* const plans[2] = {rule_plan, f.plan.get()};
    const Choice choices[2] = {rule, f.choice};
    const int calls_before[2] = {rule_entry->calls, other_entry->calls};
    const Retimed r = retime_pair(
        [&](int side, int i) {
          plans[side]->select(choices[side].variant);
          return call(*plans[side], choices[side], choices[side].variant, calls_before[side] + i);
        },
        min_timed);
    rule_entry->ms = r.ms[0], other_entry->ms = r.ms[1];
    rule_entry->calls += r.calls, other_entry->calls += r.calls;
    if (r.ms[1] < r.ms[0] / (1 + MeasureRule::rule_margin)) {
      f.ms = r.ms[1];
    } else {
      f.ms = r.ms[0];
      f.choice = rule;
      f.rule = true;
      if (rule_kept) f.plan = std::move(rule_kept);
    }
  }
  if (f.plan) f.plan->select(f.choice.variant);
  for (Measurement& m : f.timed)
    m.chosen = f.plan && m.algorithm == f.choice.algorithm && m.precision == f.choice.precision &&
               m.variant == f.choice.variant;
  return f;
}

/// Milliseconds of work enqueued on an execution space instance: on CUDA events recorded on the
/// instance's stream around it (the device's time, launch gaps included); elsewhere a
/// Kokkos::Timer between fences of the instance. Each call waits for its work. Not for use
/// under CUDA graph capture (plans refuse to be made then).
template <class ExecSpace>
class CallTimer {
 public:
  CallTimer(const ExecSpace& exec, const char* function) : m_exec(exec) {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
      cuda_check(cudaEventCreate(&m_start), function, "create an event to time the candidates");
      if (cudaEventCreate(&m_stop) != cudaSuccess) {
        cudaEventDestroy(m_start);
        throw std::runtime_error(std::string(function) +
                                 ": cannot create an event to time the candidates");
      }
      m_function = function;
    }
#endif
    (void)function;
  }
  ~CallTimer() {
#if defined(KOKKOS_ENABLE_CUDA)
    if (m_start) cudaEventDestroy(m_start);
    if (m_stop) cudaEventDestroy(m_stop);
#endif
  }
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;

  template <class Work>
  double operator()(Work&& work) {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
      const cudaStream_t stream = m_exec.cuda_stream();
      cuda_check(cudaEventRecord(m_start, stream), m_function, "record an event");
      work();
      cuda_check(cudaEventRecord(m_stop, stream), m_function, "record an event");
      cuda_check(cudaEventSynchronize(m_stop), m_function, "wait for a timed candidate");
      float ms = 0;
      cuda_check(cudaEventElapsedTime(&ms, m_start, m_stop), m_function, "read an event timer");
      return double(ms);
    }
#endif
    m_exec.fence();
    Kokkos::Timer timer;
    work();
    m_exec.fence();
    return timer.seconds() * 1e3;
  }

 private:
  ExecSpace m_exec;
#if defined(KOKKOS_ENABLE_CUDA)
  cudaEvent_t m_start = nullptr, m_stop = nullptr;
  const char* m_function = "";
#endif
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
