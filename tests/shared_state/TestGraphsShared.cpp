// SPDX-License-Identifier: Apache-2.0
// The one-shot call under CUDA graphs, captures and devices (the host side is in
// TestSharedState.cpp). Each test skips outside a CUDA build.
//   GraphsShared.TwoGraphsOfOneKeyReplayedConcurrently  every served path: two graphs captured
//       on one stream with the same shape (one plan, shared) replayed at once on two other
//       streams, eager calls of that key on the capture stream meanwhile; every Y right
//   GraphsShared.SameKeyTwiceInOneCapture               two calls of one key in one capture
//   GraphsShared.CaptureWithoutAPlanIsRefused           a key never called outside a capture is
//       refused, the capture left intact; a second capture needs no call of its own
//   GraphsShared.GraphsKeepEvictedPlans                 graphs hold plans the cache dropped, and
//       a later capture finds them; freed once the graphs are destroyed
//   GraphsShared.CaptureOnAStreamMadeAfterEveryPlan     every served path captured on a stream
//       made after its plan, replayed beside eager calls on the plan's stream
//   GraphsShared.FortyLayersCapturedWhole               40 shapes called on one stream, captured
//       whole on another
//   GraphsShared.PerThreadStreamCapturedOnTwoThreads    cudaStreamPerThread captured (global
//       mode) on two threads at once, one key: both graphs right, replayed at once
//   GraphsShared.ReleasesOnAnotherThreadDuringCapture   a Plan destroyed, release_cached_plans(),
//       plans evicted, a duplicate plan of racing threads and a Kokkos instance handed to the
//       cache (as the PyTorch operator's eviction does), all during another thread's
//       global-mode capture: the capture stays valid and replays right
//   GraphsShared.ReleaseDuringCaptureIsDeferred          release_cached_plans() and a Plan's
//       destructor while a stream is being captured: nothing terminates, the capture stays
//       valid, the memory is freed after it
//   GraphsShared.DeviceSelectedBeforeAnyCudaCall         every direct CUDA call of the entry
//       points comes after their device guard (the order test standing in for two GPUs)
//   SharedStateCuda.WisdomIdentifiesTheCublasLtAlgorithm  wisdom's cuBLASLt algorithm named by
//       its configuration selects that algorithm, whatever list the plan holds
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/CudaGraphs.hpp"
#include "../common/TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;

#if defined(KOKKOS_ENABLE_CUDA)
using P = Problem<Kokkos::Cuda, float, Kokkos::LayoutRight>;

struct OwnStreams {
  std::vector<cudaStream_t> streams;
  std::vector<Kokkos::Cuda> spaces;
  explicit OwnStreams(int n) : streams(std::size_t(n)) {
    for (auto& s : streams)
      EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    for (auto& s : streams) spaces.emplace_back(s);
  }
  ~OwnStreams() {
    for (auto& s : spaces) s.fence();
    FusedLinear::release_cached_plans();
    spaces.clear();
    for (auto& s : streams) cudaStreamDestroy(s);
  }
};

/// The cache's counts (Impl::PlanCache): plans held, graphs' references, releases deferred.
std::size_t eager_plans() { return Impl::PlanCache::instance().size(); }
std::size_t captured_plans() { return Impl::PlanCache::instance().captured_size(); }
std::size_t deferred_plans() { return Impl::PlanCache::instance().deferred_size(); }

/// Polls `done` (calling release_cached_plans between tries: a graph's release reaches the
/// cache from a CUDA thread, asynchronously) for up to 10 s.
bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 1000; ++i) {
    FusedLinear::release_cached_plans();
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}
#endif

// Guards against two graphs of one key racing on scratch: graphs captured on one stream with one
// shape share the cached plan's workspace (split operands, split-K partial sums and counters,
// cuBLASLt's workspace); replayed at once, each orders itself after the other's use through the
// plan's event, as eager calls do, or they overwrite each other's. Shapes: 256x4096x4096 (the
// vendor 3xTF32 split operands, fused_sm90's copies) and 17x4096x260 (split K); 20 rounds of
// concurrent replays and an eager call.
TEST(GraphsShared, TwoGraphsOfOneKeyReplayedConcurrently) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  OwnStreams s(3);
  const cudaStream_t capture_stream = s.streams[0];
  const std::int64_t shapes[][3] = {{256, 4096, 4096}, {17, 4096, 260}};
  int replayed = 0;
  for (const auto& sh : shapes) {
    std::vector<std::unique_ptr<P> > p;
    std::vector<Reference> ref;
    for (int i = 0; i < 3; ++i) {
      p.emplace_back(new P(sh[0], sh[1], sh[2], 700 + i));
      ref.push_back(p.back()->reference(2, 0.1));
    }
    for (const auto* v : {&p[1], &p[2]})
      ASSERT_TRUE(Impl::alignment_log2((*v)->X.data()) == Impl::alignment_log2(p[0]->X.data()) &&
                  Impl::alignment_log2((*v)->Y.data()) == Impl::alignment_log2(p[0]->Y.data()))
          << "the problems must share one plan key";
    for (const Options& o :
         served_requests(s.spaces[0], p[0]->X, p[0]->W, p[0]->b, p[0]->Y,
                         {Precision::Strict, Precision::TF32, Precision::TF32x3}, 4)) {
      SCOPED_TRACE(describe(o) + " splits " + std::to_string(o.tuning.skinny_splits) + " at " +
                   std::to_string(sh[0]) + "x" + std::to_string(sh[1]) + "x" +
                   std::to_string(sh[2]));
      FusedLinear::release_cached_plans();
      const auto call = [&](int i) {
        return FusedLinear::linear_leaky_relu(s.spaces[0], p[std::size_t(i)]->X,
                                              p[std::size_t(i)]->W, p[std::size_t(i)]->b,
                                              p[std::size_t(i)]->Y, 2.f, 0.1f, o);
      };
      Graph g[2];
      RunInfo info;
      std::string refused;
      for (int i = 0; i < 2 && refused.empty(); ++i) {
        info = call(i);  // an eager call before each capture, as graph recipes do
        s.spaces[0].fence();
        refused = capture(capture_stream, g[i], [&] { call(i); });
      }
      if (!refused.empty()) {
        // Only Kokkos Kernels 3.4's native gemm may refuse capture (README).
        EXPECT_TRUE(contains(refused, "graph capture") && info.gemm == Gemm::KokkosKernelsNative)
            << refused;
        continue;
      }
      EXPECT_EQ(captured_plans(), 2u) << "each graph holds the plan";
      EXPECT_EQ(eager_plans(), 1u) << "one plan for the key";
      const double rounding = product_rounding(info, sh[1]);
      for (int round = 0; round < 20; ++round) {
        for (auto& q : p) q->poison();
        Kokkos::fence();
        ASSERT_EQ(cudaGraphLaunch(g[0].exec, s.streams[1]), cudaSuccess);
        ASSERT_EQ(cudaGraphLaunch(g[1].exec, s.streams[2]), cudaSuccess);
        call(2);  // eager, same key, on the capture stream, while both graphs run
        for (auto& sp : s.spaces) sp.fence();
        for (int i = 0; i < 3; ++i) {
          const auto r = ref[std::size_t(i)].check<float>(p[std::size_t(i)]->output(), rounding);
          ASSERT_TRUE(r) << (i < 2 ? "graph " + std::to_string(i) : std::string("eager call"))
                         << ", round " << round;
        }
        ++replayed;
      }
    }
  }
  std::cout << "[          ] " << replayed << " rounds of two graphs and an eager call\n";
  EXPECT_GT(replayed, 0);
#endif
}

// Two calls of one key in one capture (two layers of one shape in one model) share the plan:
// the graph orders them, both right on replay; the graph holds the plan once.
TEST(GraphsShared, SameKeyTwiceInOneCapture) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  OwnStreams s(2);
  P a(17, 4096, 260, 711), b(17, 4096, 260, 712);
  const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 4);
  FusedLinear::release_cached_plans();
  const auto call = [&](P& p) {
    FusedLinear::linear_leaky_relu(s.spaces[0], p.X, p.W, p.b, p.Y, 2.f, 0.1f, o);
  };
  call(a);
  s.spaces[0].fence();
  Graph g;
  ASSERT_EQ(capture(s.streams[0], g, [&] { call(a), call(b); }), "");
  EXPECT_EQ(captured_plans(), 1u);
  for (int round = 0; round < 3; ++round) {
    a.poison(), b.poison();
    Kokkos::fence();
    ASSERT_EQ(cudaGraphLaunch(g.exec, s.streams[1]), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s.streams[1]), cudaSuccess);
    EXPECT_TRUE(matches_reference(a, 2, 0.1, a.Y)) << "round " << round;
    EXPECT_TRUE(matches_reference(b, 2, 0.1, b.Y)) << "round " << round;
  }
#endif
}

// A key never called outside a capture has no plan, and none can be made during one: refused
// (std::invalid_argument naming the function, saying what to do), the capture left intact. A
// second capture of a key needs no call of its own: it shares the plan with the first graph.
TEST(GraphsShared, CaptureWithoutAPlanIsRefused) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  OwnStreams s(3);
  P a(17, 4096, 260, 721), b(17, 4096, 260, 722);
  const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 4);
  FusedLinear::release_cached_plans();
  const auto call = [&](P& p) {
    FusedLinear::linear_leaky_relu(s.spaces[0], p.X, p.W, p.b, p.Y, 2.f, 0.1f, o);
  };
  Graph refused, first, second;
  ASSERT_EQ(cudaStreamBeginCapture(s.streams[0], cudaStreamCaptureModeGlobal), cudaSuccess);
  std::string what;
  try {
    call(a);
  } catch (const std::invalid_argument& e) {
    what = e.what();
  }
  const cudaError_t ended = cudaStreamEndCapture(s.streams[0], &refused.graph);
  EXPECT_EQ(ended, cudaSuccess) << "the refusal broke the capture";
  EXPECT_TRUE(starts_with(what, "FusedLinear::linear_leaky_relu: ") &&
              contains(what, "before the capture"))
      << what;
  call(a);
  s.spaces[0].fence();
  ASSERT_EQ(capture(s.streams[0], first, [&] { call(a); }), "");
  ASSERT_EQ(capture(s.streams[0], second, [&] { call(b); }), "") << "no call between captures";
  EXPECT_EQ(captured_plans(), 2u);
  for (int round = 0; round < 5; ++round) {
    a.poison(), b.poison();
    Kokkos::fence();
    ASSERT_EQ(cudaGraphLaunch(first.exec, s.streams[1]), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(second.exec, s.streams[2]), cudaSuccess);
    Kokkos::fence();
    EXPECT_TRUE(matches_reference(a, 2, 0.1, a.Y)) << "round " << round;
    EXPECT_TRUE(matches_reference(b, 2, 0.1, b.Y)) << "round " << round;
  }
#endif
}

// Guards against a graph losing its plan: with the cache's limit lowered to 4, twelve graphs of
// distinct shapes hold twelve plans while the cache keeps four; every graph replays right, a
// capture of the first shape (no longer cached) finds the plan its graph holds, and each plan is
// freed once the graphs holding it are destroyed.
TEST(GraphsShared, GraphsKeepEvictedPlans) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  OwnStreams s(1);
  const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 4);
  FusedLinear::release_cached_plans();
  ASSERT_TRUE(eventually([] { return captured_plans() == 0; }));
  const std::size_t limit = FusedLinear::cached_plans_limit();
  FusedLinear::set_cached_plans_limit(4);
  std::vector<std::unique_ptr<P> > p;
  std::vector<std::unique_ptr<Graph> > graphs;
  const auto call = [&](int i) {
    FusedLinear::linear_leaky_relu(s.spaces[0], p[std::size_t(i)]->X, p[std::size_t(i)]->W,
                                   p[std::size_t(i)]->b, p[std::size_t(i)]->Y, 2.f, 0.1f, o);
  };
  for (int i = 0; i < 12; ++i) {
    p.emplace_back(new P(2, 64 + i, 3, 730 + i));
    call(i);
    s.spaces[0].fence();
    graphs.emplace_back(new Graph);
    ASSERT_EQ(capture(s.streams[0], *graphs.back(), [&] { call(i); }), "") << "graph " << i;
  }
  EXPECT_EQ(captured_plans(), 12u);
  EXPECT_EQ(eager_plans(), 4u);
  Graph again;
  EXPECT_EQ(capture(s.streams[0], again, [&] { call(0); }), "") << "the first graph's plan";
  FusedLinear::set_cached_plans_limit(limit);
  for (int i = 0; i < 12; ++i) {
    p[std::size_t(i)]->poison();
    Kokkos::fence();
    ASSERT_EQ(cudaGraphLaunch(graphs[std::size_t(i)]->exec, s.streams[0]), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s.streams[0]), cudaSuccess);
    EXPECT_TRUE(matches_reference(*p[std::size_t(i)], 2, 0.1, p[std::size_t(i)]->Y)) << i;
  }
  p[0]->poison();
  Kokkos::fence();
  ASSERT_EQ(cudaGraphLaunch(again.exec, s.streams[0]), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s.streams[0]), cudaSuccess);
  EXPECT_TRUE(matches_reference(*p[0], 2, 0.1, p[0]->Y)) << "the second graph of shape 0";
  for (int i = 0; i < 10; ++i) graphs[std::size_t(i)]->reset();
  EXPECT_TRUE(eventually([] { return captured_plans() == 3; }))
      << captured_plans() << " graph references held after 10 of 13 graphs were destroyed";
  graphs.clear(), again.reset();
  EXPECT_TRUE(eventually([] { return captured_plans() == 0; })) << captured_plans();
#endif
}

// PyTorch's recipe in C++: the plans made by calls on one stream, the capture on a stream (and
// its Kokkos instance) made after them, as torch.cuda.graph's own capture stream is. Every
// served path; the graph replayed while eager calls of the same key run on the first stream.
TEST(GraphsShared, CaptureOnAStreamMadeAfterEveryPlan) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  OwnStreams s(1);
  P a(17, 4096, 260, 781), b(17, 4096, 260, 782);
  int captured = 0;
  for (const Options& o : served_requests(s.spaces[0], a.X, a.W, a.b, a.Y,
                                          {Precision::Strict, Precision::TF32x3}, 4)) {
    SCOPED_TRACE(describe(o) + " splits " + std::to_string(o.tuning.skinny_splits));
    FusedLinear::release_cached_plans();
    const RunInfo info =
        FusedLinear::linear_leaky_relu(s.spaces[0], a.X, a.W, a.b, a.Y, 2.f, 0.1f, o);
    s.spaces[0].fence();
    OwnStreams later(1);  // made after the plan
    Graph g;
    const std::string refused = capture(later.streams[0], g, [&] {
      FusedLinear::linear_leaky_relu(later.spaces[0], a.X, a.W, a.b, a.Y, 2.f, 0.1f, o);
    });
    if (!refused.empty()) {
      // Only Kokkos Kernels 3.4's native gemm may refuse capture (README).
      EXPECT_TRUE(contains(refused, "graph capture") && info.gemm == Gemm::KokkosKernelsNative)
          << refused;
      continue;
    }
    const double rounding = product_rounding(info, 4096);
    const Reference ra = a.reference(2, 0.1), rb = b.reference(2, 0.1);
    for (int round = 0; round < 5; ++round) {
      a.poison(), b.poison();
      Kokkos::fence();
      ASSERT_EQ(cudaGraphLaunch(g.exec, later.streams[0]), cudaSuccess);
      FusedLinear::linear_leaky_relu(s.spaces[0], b.X, b.W, b.b, b.Y, 2.f, 0.1f, o);
      Kokkos::fence();
      ASSERT_TRUE(ra.check<float>(a.output(), rounding)) << "graph, round " << round;
      ASSERT_TRUE(rb.check<float>(b.output(), rounding)) << "eager, round " << round;
    }
    ++captured;
  }
  EXPECT_GT(captured, 0);
#endif
}

// A model of 40 layers of distinct shapes, each called once on one stream, then captured whole
// on another stream: every layer finds its plan (the cache keeps 64), every output right.
TEST(GraphsShared, FortyLayersCapturedWhole) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  OwnStreams s(2);
  FusedLinear::release_cached_plans();
  std::vector<std::unique_ptr<P> > layers;
  for (int i = 0; i < 40; ++i) layers.emplace_back(new P(8 + i, 96 + 8 * i, 24 + 4 * i, 800 + i));
  const auto run = [&](const Kokkos::Cuda& exec) {
    for (auto& l : layers) FusedLinear::linear_leaky_relu(exec, l->X, l->W, l->b, l->Y, 2.f, 0.1f);
  };
  run(s.spaces[0]);
  s.spaces[0].fence();
  Graph g;
  ASSERT_EQ(capture(s.streams[1], g, [&] { run(s.spaces[1]); }), "");
  for (auto& l : layers) l->poison();
  Kokkos::fence();
  ASSERT_EQ(cudaGraphLaunch(g.exec, s.streams[1]), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s.streams[1]), cudaSuccess);
  for (std::size_t i = 0; i < layers.size(); ++i)
    EXPECT_TRUE(matches_reference(*layers[i], 2, 0.1, layers[i]->Y)) << "layer " << i;
#endif
}

// cudaStreamPerThread names another stream on every thread: two threads capture theirs at once
// (global mode), one key, after a call each; both graphs hold the one plan and, replayed at
// once, order their uses of it.
TEST(GraphsShared, PerThreadStreamCapturedOnTwoThreads) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  FusedLinear::release_cached_plans();
  P a(17, 4096, 260, 821), b(17, 4096, 260, 822);
  const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 4);
  Graph g[2];
  std::string errors[2];
  std::atomic<int> warmed{0}, begun{0}, called{0}, ended{0};
  const int device = Kokkos::Cuda().cuda_device();
  const auto worker = [&](int t, P& p) {
    cudaSetDevice(device);  // the thread's context, before Kokkos asks the stream for it
    const Kokkos::Cuda exec(cudaStreamPerThread);
    try {
      FusedLinear::linear_leaky_relu(exec, p.X, p.W, p.b, p.Y, 2.f, 0.1f, o);
      exec.fence();
    } catch (const std::exception& e) {
      errors[t] = e.what();
    }
    warmed.fetch_add(1);
    while (warmed.load() < 2) std::this_thread::yield();  // no allocation during a capture
    if (cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeGlobal) != cudaSuccess) {
      errors[t] = "cudaStreamBeginCapture failed";
      begun.fetch_add(1), called.fetch_add(1), ended.fetch_add(1);
      return;
    }
    begun.fetch_add(1);
    while (begun.load() < 2) std::this_thread::yield();  // both captures in progress
    try {
      FusedLinear::linear_leaky_relu(exec, p.X, p.W, p.b, p.Y, 2.f, 0.1f, o);
    } catch (const std::exception& e) {
      errors[t] = e.what();
    }
    called.fetch_add(1);
    while (called.load() < 2) std::this_thread::yield();
    const cudaError_t end = cudaStreamEndCapture(cudaStreamPerThread, &g[t].graph);
    if (errors[t].empty() && end != cudaSuccess) errors[t] = cudaGetErrorString(end);
    ended.fetch_add(1);
    while (ended.load() < 2) std::this_thread::yield();  // no free during the other's capture
    if (errors[t].empty() && cudaGraphInstantiate(&g[t].exec, g[t].graph, 0) != cudaSuccess)
      errors[t] = "cudaGraphInstantiate failed";
  };
  std::thread first(worker, 0, std::ref(a)), second(worker, 1, std::ref(b));
  first.join(), second.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  EXPECT_EQ(eager_plans(), 1u);
  EXPECT_EQ(captured_plans(), 2u);
  OwnStreams s(2);
  for (int round = 0; round < 5; ++round) {
    a.poison(), b.poison();
    Kokkos::fence();
    ASSERT_EQ(cudaGraphLaunch(g[0].exec, s.streams[0]), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(g[1].exec, s.streams[1]), cudaSuccess);
    Kokkos::fence();
    EXPECT_TRUE(matches_reference(a, 2, 0.1, a.Y)) << "round " << round;
    EXPECT_TRUE(matches_reference(b, 2, 0.1, b.Y)) << "round " << round;
  }
#endif
}

// Guards against the library breaking another thread's capture: while thread A captures (global
// mode) a call of the layer, thread B destroys a Plan it executed, releases the cached plans,
// lowers the cache's limit (evictions), hands it a Kokkos instance to destroy (the PyTorch
// operator's eviction) and, with a third thread, makes the plan of one new key at once (one
// duplicate dropped). B works in relaxed mode, as a thread that allocates during
// another's global capture must. A's capture ends valid and replays right; B's destructions are
// deferred until it has ended.
TEST(GraphsShared, ReleasesOnAnotherThreadDuringCapture) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  OwnStreams s(3);
  const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 4);
  FusedLinear::release_cached_plans();
  P a(17, 4096, 260, 831), c(17, 2048, 130, 832), d(33, 512, 96, 833);
  for (int i = 0; i < 4; ++i) {  // plans of other keys, for the release and the eviction
    P q(2, 64 + i, 3, 840 + i);
    FusedLinear::linear_leaky_relu(s.spaces[1], q.X, q.W, q.b, q.Y, 2.f, 0.1f, o);
  }
  FusedLinear::linear_leaky_relu(s.spaces[0], a.X, a.W, a.b, a.Y, 2.f, 0.1f, o);
  using PlanType = FusedLinear::Plan<Kokkos::Cuda, P::Matrix, P::Matrix, P::Vector, P::Matrix>;
  std::optional<PlanType> plan;
  plan.emplace(s.spaces[1], c.X, c.W, c.b, c.Y, 2.f, 0.1f, o);
  ASSERT_GT(plan->workspace_bytes(), 0u);
  plan->execute(c.X, c.W, c.b, c.Y);
  Kokkos::fence();
  // A Kokkos instance of a stream of its own, handed to the cache as the PyTorch operator hands
  // the instance it evicts (freeing its scratch would break the capture).
  cudaStream_t extra = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&extra, cudaStreamNonBlocking), cudaSuccess);
  auto evicted = std::make_unique<Kokkos::Cuda>(extra);
  const std::size_t limit = FusedLinear::cached_plans_limit();
  std::atomic<int> stage{0};
  std::string error_a, error_b;
  Graph g;
  std::thread capturer([&] {
    if (cudaStreamBeginCapture(s.streams[0], cudaStreamCaptureModeGlobal) != cudaSuccess) {
      error_a = "cudaStreamBeginCapture failed";
      stage.store(1);
      return;
    }
    try {
      FusedLinear::linear_leaky_relu(s.spaces[0], a.X, a.W, a.b, a.Y, 2.f, 0.1f, o);
    } catch (const std::exception& e) {
      error_a = e.what();
    }
    stage.store(1);
    while (stage.load() < 2) std::this_thread::yield();
    const cudaError_t ended = cudaStreamEndCapture(s.streams[0], &g.graph);
    if (error_a.empty() && ended != cudaSuccess) error_a = cudaGetErrorString(ended);
    if (error_a.empty() && cudaGraphInstantiate(&g.exec, g.graph, 0) != cudaSuccess)
      error_a = "cudaGraphInstantiate failed";
  });
  while (stage.load() < 1) std::this_thread::yield();
  {
    Impl::RelaxedCaptureMode relaxed;
    try {
      FusedLinear::set_cached_plans_limit(1);  // four evicted
      plan.reset();
      FusedLinear::release_cached_plans();
      const Kokkos::Cuda exec = *evicted;
      Impl::PlanCache::instance().destroy_when_safe(std::move(evicted), exec);
      const auto make = [&](int i) {
        Impl::RelaxedCaptureMode relaxed_too;
        FusedLinear::linear_leaky_relu(s.spaces[1 + i], d.X, d.W, d.b, d.Y, 2.f, 0.1f, o);
      };
      std::thread racer(make, 1);
      make(0);
      racer.join();
    } catch (const std::exception& e) {
      error_b = e.what();
    }
    s.spaces[1].fence(), s.spaces[2].fence();
  }
  const std::size_t deferred = deferred_plans();
  stage.store(2);
  capturer.join();
  FusedLinear::set_cached_plans_limit(limit);
  EXPECT_EQ(error_b, "");
  ASSERT_EQ(error_a, "") << "the other thread broke the capture";
  EXPECT_GE(deferred, 7u) << "four plans evicted, the Plan, one released, the instance";
  FusedLinear::release_cached_plans();
  EXPECT_EQ(deferred_plans(), 0u) << "freed once the capture ended";
  EXPECT_EQ(cudaStreamDestroy(extra), cudaSuccess);
  a.poison();
  Kokkos::fence();
  ASSERT_EQ(cudaGraphLaunch(g.exec, s.streams[0]), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s.streams[0]), cudaSuccess);
  EXPECT_TRUE(matches_reference(a, 2, 0.1, a.Y));
  EXPECT_TRUE(matches_reference(d, 2, 0.1, d.Y));
#endif
}

// Guards against std::terminate from a release during a capture: release_cached_plans() while
// a stream is being captured (global mode), or a FusedLinear::Plan destroyed during its own
// stream's capture, must not run destructors that wait for the device and free memory (illegal
// during a capture; Kokkos throws from the destructor). The release is deferred, the capture
// stays intact, the memory is freed after it.
TEST(GraphsShared, ReleaseDuringCaptureIsDeferred) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  OwnStreams s(2);
  const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 4);
  FusedLinear::release_cached_plans();
  std::vector<std::unique_ptr<P> > p;
  for (int i = 0; i < 3; ++i) {
    p.emplace_back(new P(2, 64 + i, 3, 740 + i));
    FusedLinear::linear_leaky_relu(s.spaces[0], p.back()->X, p.back()->W, p.back()->b, p.back()->Y,
                                   2.f, 0.1f, o);
  }
  P a(17, 4096, 260, 745);
  FusedLinear::linear_leaky_relu(s.spaces[1], a.X, a.W, a.b, a.Y, 2.f, 0.1f, o);
  Kokkos::fence();
  ASSERT_EQ(eager_plans(), 4u);
  Graph g;
  ASSERT_EQ(cudaStreamBeginCapture(s.streams[1], cudaStreamCaptureModeGlobal), cudaSuccess);
  std::string error;
  try {
    FusedLinear::linear_leaky_relu(s.spaces[1], a.X, a.W, a.b, a.Y, 2.f, 0.1f, o);
    FusedLinear::release_cached_plans();  // the three eager plans: deferred
  } catch (const std::exception& e) {
    error = e.what();
  }
  const std::size_t deferred = deferred_plans();
  const cudaError_t ended = cudaStreamEndCapture(s.streams[1], &g.graph);
  EXPECT_EQ(error, "");
  EXPECT_EQ(ended, cudaSuccess) << "the release broke the capture";
  EXPECT_EQ(deferred, 4u) << "the graph's plan is dropped by the cache too";
  EXPECT_EQ(eager_plans(), 0u);
  FusedLinear::release_cached_plans();  // the capture is over: freed now
  EXPECT_EQ(deferred_plans(), 0u);
  g.reset();
  EXPECT_TRUE(eventually([] { return captured_plans() == 0; }));

  // A Plan destroyed while its stream is being captured: its destructor cannot wait for the
  // stream; it must not throw, and the memory goes once no capture is in progress.
  std::optional<FusedLinear::Plan<Kokkos::Cuda, P::Matrix, P::Matrix, P::Vector, P::Matrix> > plan;
  plan.emplace(s.spaces[1], a.X, a.W, a.b, a.Y, 2.f, 0.1f, o);
  ASSERT_GT(plan->workspace_bytes(), 0u);
  plan->execute(a.X, a.W, a.b, a.Y);
  s.spaces[1].fence();
  ASSERT_EQ(cudaStreamBeginCapture(s.streams[1], cudaStreamCaptureModeGlobal), cudaSuccess);
  plan->execute(a.X, a.W, a.b, a.Y);
  plan.reset();  // must not terminate
  Graph h;
  (void)cudaStreamEndCapture(s.streams[1], &h.graph);  // invalidated by the wait, or not
  (void)cudaGetLastError();
  h.reset();
  FusedLinear::release_cached_plans();
  EXPECT_EQ(deferred_plans(), 0u);
  a.poison();
  FusedLinear::linear_leaky_relu(s.spaces[1], a.X, a.W, a.b, a.Y, 2.f, 0.1f, o);
  s.spaces[1].fence();
  EXPECT_TRUE(matches_reference(a, 2, 0.1, a.Y)) << "the stream computes after it all";
#endif
}

// Guards against CUDA calls on the wrong device: querying the stream's capture or making and
// waiting for events before selecting the instance's device would, from a thread whose current
// device is another, create a context there and read the wrong device's state. Two GPUs would show
// it; on one, the order is checked: no direct CUDA call of the entry points (calls, captures,
// evictions, releases, a Plan's destruction) may come before a device guard, from the main thread
// and a worker thread.
TEST(GraphsShared, DeviceSelectedBeforeAnyCudaCall) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build";
#else
  const auto work = [] {
    OwnStreams s(1);
    const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 4);
    P a(17, 4096, 260, 751);
    const auto call = [&] {
      FusedLinear::linear_leaky_relu(s.spaces[0], a.X, a.W, a.b, a.Y, 2.f, 0.1f, o);
    };
    call(), call();
    s.spaces[0].fence();
    Graph g;
    EXPECT_EQ(capture(s.streams[0], g, call), "");
    for (int i = 0; i < 40; ++i) {  // evictions
      P q(2, 8 + i, 3, 760 + i);
      FusedLinear::linear_leaky_relu(s.spaces[0], q.X, q.W, q.b, q.Y, 2.f, 0.1f, o);
    }
    g.reset();
    FusedLinear::release_cached_plans();
  };
  int before = -1, after = -1;
  ASSERT_EQ(cudaGetDevice(&before), cudaSuccess);
  Impl::cuda_calls_without_guard().store(0);
  work();
  std::thread worker(work);
  worker.join();
  EXPECT_EQ(Impl::cuda_calls_without_guard().load(), 0)
      << "direct CUDA calls made before the device guard";
  ASSERT_EQ(cudaGetDevice(&after), cudaSuccess);
  EXPECT_EQ(after, before);
#endif
}

// Guards against wisdom selecting another cuBLASLt algorithm than the one measured: a rank in
// the heuristic's list does not name it (the list a plan from wisdom asks for is not the one
// measured: the 1 MiB algorithm lands elsewhere in a shorter list), its configuration does. A
// product made for few algorithms, given the configuration of one ranked further (or one it
// does not hold at all), runs that one; the text format keeps the configuration.
TEST(SharedStateCuda, WisdomIdentifiesTheCublasLtAlgorithm) {
#if !defined(FUSED_LINEAR_CUBLASLT)
  GTEST_SKIP() << "needs a CUDA build with cuBLASLt";
#else
  using Lt = Impl::LtProduct<float, Kokkos::LayoutRight>;
  P a(64, 1024, 512, 771);
  const std::size_t limit = std::size_t(256) << 20;
  const Lt measured(a.X, a.W, a.Y, false, Precision::Strict, limit, 7, 0);
  ASSERT_GE(measured.variants(), 2) << "cuBLASLt offers one algorithm here";
  int differ = 0;
  for (int v = 0; v < measured.variants(); ++v) {
    Lt m(a.X, a.W, a.Y, false, Precision::Strict, limit, 7, v);
    const std::string config = m.variant_config();
    ASSERT_FALSE(config.empty());
    const Lt by_rank(a.X, a.W, a.Y, false, Precision::Strict, limit, 1, v);
    differ += by_rank.variant_config() != config;
    const Lt by_config(a.X, a.W, a.Y, false, Precision::Strict, limit, 1, 0, config);
    EXPECT_EQ(by_config.variant_config(), config) << "rank " << v;
  }
  std::cout << "[          ] " << differ << " of " << measured.variants()
            << " ranks name another algorithm in a shorter list\n";
  // The round trip through the text format keeps the configuration.
  FusedLinear::forget_wisdom();
  const std::string text =
      "FusedLinear wisdom 2\nentry\tlibrary " + FusedLinear::Impl::build_identity() +
      "; k\tvendor_lt\tstrict\t3:" + measured.variant_config() + "\t0.5\nend\n";
  std::istringstream is(text);
  FusedLinear::import_wisdom(is);
  std::ostringstream os;
  FusedLinear::export_wisdom(os);
  EXPECT_EQ(os.str(), text);
  FusedLinear::forget_wisdom();
#endif
}

}  // namespace
