// skinny_sm90 (Sm90Skinny.cu) alone: co-resident clusters of 1..8 CTAs and the kernel timed at
// each forced K split, medians of 35 calls after 5, W cycled through copies past the L2.
// Built here: nvcc -std=c++17 -O3 -arch=sm_90a -Isrc -I<build>/src -o probe probe.cu
// (it includes the kernel source of a6d7a2d, whose choose_splits is "old_choice"), run on the
// H200 as .device-probe/probe > probe.txt.
#include "FusedLinear/impl/cuda/Sm90Skinny.cu"
#include <cstdio>
#include <vector>
#include <algorithm>
using namespace FusedLinear::Impl::Sm90;
using namespace FusedLinear::Impl::Sm90::skinny_detail;

template <int MT>
void capacity() {
  using C = Config<MT>;
  cudaFuncSetAttribute(skinny_kernel<MT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       C::SMEM_BYTES);
  printf("capacity MT=%d smem=%d:", MT, C::SMEM_BYTES);
  for (int S = 1; S <= 8; ++S) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(S * 64, 1);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = C::SMEM_BYTES;
    cudaLaunchAttribute a[1];
    a[0].id = cudaLaunchAttributeClusterDimension;
    a[0].val.clusterDim.x = S;
    a[0].val.clusterDim.y = 1;
    a[0].val.clusterDim.z = 1;
    cfg.attrs = a;
    cfg.numAttrs = 1;
    int n = -1;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&n, skinny_kernel<MT>, &cfg);
    printf(" S%d=%d%s", S, n, e ? "(err)" : "");
  }
  printf("\n");
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  Device d;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.multiprocessors = prop.multiProcessorCount;
  capacity<1>();
  capacity<16>();
  capacity<32>();
  capacity<64>();
  const int shapes[][3] = {{16, 8192, 3072}, {16, 8192, 4096},  {16, 8192, 6144}, {16, 8192, 8192},
                           {17, 8192, 3072}, {17, 8192, 4096},  {17, 8192, 6144}, {17, 8192, 8192},
                           {32, 8192, 4096}, {32, 16384, 4096}, {24, 4096, 4096}, {32, 4096, 4096},
                           {8, 8192, 4096},  {1, 8192, 8192},   {1, 4096, 4096},  {16, 65536, 1024},
                           {25, 1432, 2837}, {64, 8192, 8192},  {32, 8192, 2048}, {16, 4096, 4096},
                           {4, 8192, 5120},  {32, 12288, 4096}};
  const size_t maxW = size_t(16384) * 8192 * 2;  // floats
  const size_t pool = size_t(1) << 30;           // 4 GiB of floats: W copies cycled past the L2
  float *W, *X, *Y, *b;
  cudaMalloc(&W, pool * 4);
  cudaMalloc(&X, 64 * 65536 * 4);
  cudaMalloc(&Y, size_t(64) * 8192 * 4 * 2);
  cudaMalloc(&b, 65536 * 4);
  cudaMemset(W, 0, pool * 4);
  cudaMemset(X, 0, 64 * 65536 * 4);
  cudaMemset(b, 0, 65536 * 4);
  (void)maxW;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (auto& s : shapes) {
    Problem p;
    p.M = s[0];
    p.K = s[1];
    p.N = s[2];
    p.ldx = p.K;
    p.ldw = p.K;
    p.ldy = p.N;
    p.X = X;
    p.bias = b;
    p.Y = Y;
    p.multiplier = 2;
    p.slope = 0.1f;
    const size_t wsz = size_t(p.N) * p.K,
                 copies = std::max<size_t>(1, std::min<size_t>(16, pool / wsz));
    const int64_t nkb = (p.K + 31) / 32, MT = rows_per_cta(p.M);
    const int64_t tiles = (p.N + 127) / 128 * ((p.M + MT - 1) / MT);
    printf("%dx%dx%d tiles=%lld nkb=%lld old_choice=%d:", s[0], s[1], s[2], (long long)tiles,
           (long long)nkb, choose_splits(tiles, nkb, d.multiprocessors));
    for (int S = 1; S <= 8; ++S) {
      if (S > 1 && nkb < 8 * S) break;
      std::vector<float> t;
      for (int r = 0; r < 40; ++r) {
        p.W = W + (r % copies) * wsz;
        cudaEventRecord(e0);
        cudaError_t err = skinny_linear_leaky_relu(0, d, p, nullptr, 0, S);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        if (err) {
          printf(" launch error %d", err);
          break;
        }
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r >= 5) t.push_back(ms);
      }
      std::sort(t.begin(), t.end());
      printf(" S%d=%.4f", S, t.empty() ? -1.f : t[t.size() / 2]);
    }
    printf("\n");
    fflush(stdout);
  }
  printf("last error %d\n", (int)cudaGetLastError());
}
