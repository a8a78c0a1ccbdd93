// SPDX-License-Identifier: Apache-2.0
/// \file TorchOps.cpp
/// The PyTorch operators fused_linear::linear_leaky_relu and its gradient
/// fused_linear::linear_leaky_relu_backward: their schemas, CPU and CUDA kernels (the library
/// through KokkosBridge), Meta kernels (shapes only: torch.compile and FakeTensor trace with
/// them), the layer's Autograd kernel (its backward is the gradient operator) and Autocast
/// kernels (float32, as PyTorch's fp32-only ops). Includes no Kokkos header.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/autograd.h>
#include <torch/library.h>
#include <torch/version.h>

#if defined(FUSED_LINEAR_TORCH_CUDA)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "KokkosBridge.hpp"

namespace {

using FusedLinearTorch::BackwardCall;
using FusedLinearTorch::Call;
using FusedLinearTorch::DType;
using FusedLinearTorch::Where;
// The schema's `str`, one C++ type for every kernel: c10::string_view became an alias of
// std::string_view and is deprecated in recent PyTorch; 1.13 knows only its own class.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 7)
using Strings = std::string_view;
#else
using Strings = c10::string_view;
#endif

constexpr const char* op_name = "fused_linear.linear_leaky_relu";
constexpr const char* backward_name = "fused_linear.linear_leaky_relu_backward";

/// The library's std::invalid_argument ("FusedLinear::linear_leaky_relu: ...") becomes Python's
/// ValueError, anything else RuntimeError; the message is the library's, unchanged.
template <class F>
auto translating_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
  throw std::logic_error("unreachable");
}

/// Kokkos on first use: as many host threads as PyTorch's intra-op pool (so the two share the
/// cores alike), FUSED_LINEAR_NUM_THREADS overriding; CUDA on the device of the first CUDA call.
void ensure_kokkos(int cuda_device) {
  if (FusedLinearTorch::ready()) return;  // every call but the first
  int threads = at::get_num_threads();
  if (const char* env = std::getenv("FUSED_LINEAR_NUM_THREADS")) {
    const int parsed = std::atoi(env);
    TORCH_CHECK_VALUE(parsed > 0, "FUSED_LINEAR_NUM_THREADS must be a positive integer, got '", env,
                      "'");
    threads = parsed;
  }
#if defined(FUSED_LINEAR_TORCH_CUDA)
  if (cuda_device < 0 && c10::cuda::device_count() > 0) cuda_device = c10::cuda::current_device();
#endif
  translating_errors([&] {
    FusedLinearTorch::ensure_initialized(threads, cuda_device,
                                         std::getenv("FUSED_LINEAR_KOKKOS_ARGS"));
    return 0;
  });
}

void check_inputs(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK_VALUE(x.dim() == 2, op_name, ": x must be 2-D [M, K], got ", x.dim(),
                    "-D (the module FusedLinearLeakyReLU flattens leading dimensions)");
  TORCH_CHECK_VALUE(weight.dim() == 2, op_name, ": weight must be 2-D [N, K], got ", weight.dim(),
                    "-D");
  TORCH_CHECK_VALUE(bias.dim() == 1, op_name, ": bias must be 1-D [N], got ", bias.dim(), "-D");
  TORCH_CHECK_TYPE(x.layout() == at::kStrided && weight.layout() == at::kStrided &&
                       bias.layout() == at::kStrided,
                   op_name, ": x, weight and bias must be dense (strided) tensors");
  const auto dtype = x.scalar_type();
  TORCH_CHECK_TYPE(dtype == at::kFloat || dtype == at::kDouble, op_name,
                   ": x must be float32 or float64, got ", dtype);
  TORCH_CHECK_TYPE(weight.scalar_type() == dtype && bias.scalar_type() == dtype, op_name,
                   ": x, weight and bias must have one dtype, got ", dtype, ", ",
                   weight.scalar_type(), ", ", bias.scalar_type());
  TORCH_CHECK_VALUE(weight.device() == x.device() && bias.device() == x.device(), op_name,
                    ": x, weight and bias must be on one device, got ", x.device(), ", ",
                    weight.device(), ", ", bias.device());
}

/// The call on row-major storage. Non-contiguous tensors are made contiguous first (one copy):
/// only then do the vendor BLAS, cuBLASLt and Hopper paths apply (they need one compile-time
/// layout), which beats a strided kernel on every shape where the copy is not negligible.
struct Prepared {
  at::Tensor x, w, b, y;
  Call call;
};

/// The place, value type, extents and parameters of a call on x [M,K] and weight [N,K].
void describe(FusedLinearTorch::CallPlace& c, const at::Tensor& x, const at::Tensor& weight,
              double multiplier, double negative_slope, Strings precision, Strings algorithm) {
  c.dtype = x.scalar_type() == at::kFloat ? DType::Float32 : DType::Float64;
  c.m = x.size(0), c.k = x.size(1), c.n = weight.size(0);  // the extents were checked
  c.multiplier = multiplier;
  c.negative_slope = negative_slope;
  c.algorithm = algorithm.data(), c.algorithm_size = algorithm.size();
  c.precision = precision.data(), c.precision_size = precision.size();
}

/// Call after check_inputs and check_extents.
Prepared prepare(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                 double multiplier, double negative_slope, Strings precision, Strings algorithm) {
  Prepared p;
  p.x = x.contiguous();
  p.w = weight.contiguous();
  p.b = bias.contiguous();
  p.y = at::empty({x.size(0), weight.size(0)}, x.options());
  Call& c = p.call;
  describe(c, x, weight, multiplier, negative_slope, precision, algorithm);
  c.x = p.x.data_ptr();
  c.w = p.w.data_ptr();
  c.b = p.b.data_ptr();
  c.y = p.y.data_ptr();
  return p;
}

/// Shape errors in the library's words, before any View is made (a View of wrong extents over
/// a tensor's storage must not exist even briefly).
void check_extents(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (weight.size(1) == x.size(1) && bias.size(0) == weight.size(0)) return;
  TORCH_CHECK_VALUE(false,
                    "FusedLinear::linear_leaky_relu: extents do not match: expected X [M,K], "
                    "W [N,K], b [N], Y [M,N]; got X [",
                    x.size(0), ",", x.size(1), "], W [", weight.size(0), ",", weight.size(1),
                    "], b [", bias.size(0), "]");
}

at::Tensor run_on(Prepared&& p, Where where) {
  p.call.where = where;
  translating_errors([&] {
    FusedLinearTorch::run(p.call);
    return 0;
  });
  return std::move(p.y);
}

at::Tensor linear_leaky_relu_cpu(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias, double multiplier, double negative_slope,
                                 Strings precision, Strings algorithm) {
  check_inputs(x, weight, bias);
  check_extents(x, weight, bias);
  ensure_kokkos(-1);
  return run_on(prepare(x, weight, bias, multiplier, negative_slope, precision, algorithm),
                Where::Host);
}

#if defined(FUSED_LINEAR_TORCH_CUDA)
/// The current stream of the tensors' device, which the guard makes current for the call (the
/// library then orders everything on that stream; Kokkos' instance for it is cached).
Call& on_current_stream(Prepared& p, const at::Tensor& x) {
  p.call.device = x.device().index();
  p.call.stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  return p.call;
}

at::Tensor linear_leaky_relu_cuda(const at::Tensor& x, const at::Tensor& weight,
                                  const at::Tensor& bias, double multiplier, double negative_slope,
                                  Strings precision, Strings algorithm) {
  check_inputs(x, weight, bias);
  check_extents(x, weight, bias);
  translating_errors([] {  // in a forked child, before torch's CUDA calls fail unexplained
    FusedLinearTorch::check_cuda_usable();
    return 0;
  });
  const c10::cuda::CUDAGuard guard(x.device());
  ensure_kokkos(x.device().index());
  Prepared p = prepare(x, weight, bias, multiplier, negative_slope, precision, algorithm);
  on_current_stream(p, x);
  return run_on(std::move(p), Where::Cuda);
}
#endif

/// Shapes, dtype and device only (meta and fake tensors): symbolic sizes stay symbolic.
at::Tensor linear_leaky_relu_meta(const at::Tensor& x, const at::Tensor& weight,
                                  const at::Tensor& bias, double multiplier, double negative_slope,
                                  Strings precision, Strings algorithm) {
  (void)multiplier, (void)negative_slope, (void)precision, (void)algorithm;
  check_inputs(x, weight, bias);
  TORCH_CHECK_VALUE(weight.sym_size(1) == x.sym_size(1) && bias.sym_size(0) == weight.sym_size(0),
                    "FusedLinear::linear_leaky_relu: extents do not match: expected X [M,K], "
                    "W [N,K], b [N], Y [M,N]; got X ",
                    x.sym_sizes(), ", W ", weight.sym_sizes(), ", b ", bias.sym_sizes());
  std::vector<c10::SymInt> sizes{x.sym_size(0), weight.sym_size(0)};
  return at::empty_symint(sizes, x.options());
}

const c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                          double, double, Strings, Strings)>&
op_handle() {
  static const auto handle =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("fused_linear::linear_leaky_relu", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double, double,
                            Strings, Strings)>();
  return handle;
}

// ------------------------------------------------------------------ the gradient operator
using Gradients = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

/// grad_y, x, weight, saved: 2-D, strided, one floating dtype (saved also bool: a mask of
/// z > 0) and device, and the forward's extents (x [M,K], weight [N,K], grad_y and saved
/// [M,N]), symbolic ones included.
void check_backward_inputs(const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& weight,
                           const at::Tensor& saved) {
  const std::array<const at::Tensor*, 4> all{&grad_y, &x, &weight, &saved};
  const std::array<const char*, 4> names{"grad_y", "x", "weight", "saved"};
  const auto dtype = x.scalar_type();
  TORCH_CHECK_TYPE(dtype == at::kFloat || dtype == at::kDouble, backward_name,
                   ": x must be float32 or float64, got ", dtype);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const at::Tensor& t = *all[i];
    TORCH_CHECK_VALUE(t.dim() == 2, backward_name, ": ", names[i], " must be 2-D, got ", t.dim(),
                      "-D");
    TORCH_CHECK_TYPE(t.layout() == at::kStrided, backward_name, ": ", names[i],
                     " must be a dense (strided) tensor");
    TORCH_CHECK_TYPE(t.scalar_type() == dtype || (&t == &saved && t.scalar_type() == at::kBool),
                     backward_name,
                     ": grad_y, x, weight and saved must have one dtype (saved may be a bool "
                     "mask), got ",
                     names[i], " ", t.scalar_type(), " and x ", dtype);
    TORCH_CHECK_VALUE(t.device() == x.device(), backward_name,
                      ": grad_y, x, weight and saved must be on one device, got ", names[i], " on ",
                      t.device(), " and x on ", x.device());
  }
  TORCH_CHECK_VALUE(weight.sym_size(1) == x.sym_size(1) && grad_y.sym_size(0) == x.sym_size(0) &&
                        grad_y.sym_size(1) == weight.sym_size(0) &&
                        saved.sym_sizes() == grad_y.sym_sizes(),
                    "FusedLinear::linear_leaky_relu_backward: extents do not match: expected "
                    "X [M,K], W [N,K], dY [M,N], saved [M,N]; got X ",
                    x.sym_sizes(), ", W ", weight.sym_sizes(), ", dY ", grad_y.sym_sizes(),
                    ", saved ", saved.sym_sizes());
}

/// The gradient call on row-major storage (inputs made contiguous, as the forward's), with the
/// outputs output_mask asks for allocated and the others undefined.
struct PreparedBackward {
  at::Tensor dy, x, w, saved, dx, dw, db;
  BackwardCall call;
};

PreparedBackward prepare_backward(const at::Tensor& grad_y, const at::Tensor& x,
                                  const at::Tensor& weight, const at::Tensor& saved,
                                  double multiplier, double negative_slope, bool saved_is_output,
                                  Strings precision, Strings algorithm,
                                  std::array<bool, 3> output_mask) {
  PreparedBackward p;
  p.dy = grad_y.contiguous();
  p.x = x.contiguous();
  p.w = weight.contiguous();
  p.saved = saved.contiguous();
  if (output_mask[0]) p.dx = at::empty(x.sizes(), x.options());
  if (output_mask[1]) p.dw = at::empty(weight.sizes(), x.options());
  if (output_mask[2]) p.db = at::empty({weight.size(0)}, x.options());
  BackwardCall& c = p.call;
  describe(c, x, weight, multiplier, negative_slope, precision, algorithm);
  c.x = p.x.data_ptr();
  c.w = p.w.data_ptr();
  c.dy = p.dy.data_ptr();
  c.saved = p.saved.data_ptr();
  c.dx = p.dx.defined() ? p.dx.data_ptr() : nullptr;
  c.dw = p.dw.defined() ? p.dw.data_ptr() : nullptr;
  c.db = p.db.defined() ? p.db.data_ptr() : nullptr;
  c.saved_is_output = saved_is_output;
  c.saved_is_sign = saved.scalar_type() == at::kBool;
  return p;
}

Gradients run_backward_on(PreparedBackward&& p, Where where) {
  p.call.where = where;
  translating_errors([&] {
    FusedLinearTorch::run_backward(p.call);
    return 0;
  });
  return {std::move(p.dx), std::move(p.dw), std::move(p.db)};
}

Gradients linear_leaky_relu_backward_cpu(const at::Tensor& grad_y, const at::Tensor& x,
                                         const at::Tensor& weight, const at::Tensor& saved,
                                         double multiplier, double negative_slope,
                                         bool saved_is_output, Strings precision, Strings algorithm,
                                         std::array<bool, 3> output_mask) {
  check_backward_inputs(grad_y, x, weight, saved);
  ensure_kokkos(-1);
  return run_backward_on(prepare_backward(grad_y, x, weight, saved, multiplier, negative_slope,
                                          saved_is_output, precision, algorithm, output_mask),
                         Where::Host);
}

#if defined(FUSED_LINEAR_TORCH_CUDA)
Gradients linear_leaky_relu_backward_cuda(const at::Tensor& grad_y, const at::Tensor& x,
                                          const at::Tensor& weight, const at::Tensor& saved,
                                          double multiplier, double negative_slope,
                                          bool saved_is_output, Strings precision,
                                          Strings algorithm, std::array<bool, 3> output_mask) {
  check_backward_inputs(grad_y, x, weight, saved);
  translating_errors([] {
    FusedLinearTorch::check_cuda_usable();
    return 0;
  });
  const c10::cuda::CUDAGuard guard(x.device());
  ensure_kokkos(x.device().index());
  PreparedBackward p = prepare_backward(grad_y, x, weight, saved, multiplier, negative_slope,
                                        saved_is_output, precision, algorithm, output_mask);
  p.call.device = x.device().index();
  p.call.stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  return run_backward_on(std::move(p), Where::Cuda);
}
#endif

/// Shapes, dtype and device only; an output output_mask leaves out is undefined (None).
Gradients linear_leaky_relu_backward_meta(const at::Tensor& grad_y, const at::Tensor& x,
                                          const at::Tensor& weight, const at::Tensor& saved,
                                          double multiplier, double negative_slope,
                                          bool saved_is_output, Strings precision,
                                          Strings algorithm, std::array<bool, 3> output_mask) {
  (void)multiplier, (void)negative_slope, (void)saved_is_output, (void)precision, (void)algorithm;
  check_backward_inputs(grad_y, x, weight, saved);
  at::Tensor dx, dw, db;
  if (output_mask[0]) dx = at::empty_symint(x.sym_sizes(), x.options());
  if (output_mask[1]) dw = at::empty_symint(weight.sym_sizes(), x.options());
  if (output_mask[2]) {
    std::vector<c10::SymInt> sizes{weight.sym_size(0)};
    db = at::empty_symint(sizes, x.options());
  }
  return {dx, dw, db};
}

const c10::TypedOperatorHandle<Gradients(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         const at::Tensor&, double, double, bool, Strings, Strings,
                                         std::array<bool, 3>)>&
backward_handle() {
  static const auto handle =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("fused_linear::linear_leaky_relu_backward", "")
          .typed<Gradients(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                           const at::Tensor&, double, double, bool, Strings, Strings,
                           std::array<bool, 3>)>();
  return handle;
}

/// The gradient operator has no gradient of its own: called where autograd would record it (an
/// input requiring grad under grad mode) it refuses rather than return outputs that silently
/// have none. The layer's double backward does not come here (see LinearLeakyReLUFunction).
Gradients linear_leaky_relu_backward_autograd(const at::Tensor& grad_y, const at::Tensor& x,
                                              const at::Tensor& weight, const at::Tensor& saved,
                                              double multiplier, double negative_slope,
                                              bool saved_is_output, Strings precision,
                                              Strings algorithm, std::array<bool, 3> output_mask) {
  const bool records_graph =
      at::GradMode::is_enabled() && (grad_y.requires_grad() || x.requires_grad() ||
                                     weight.requires_grad() || saved.requires_grad());
  TORCH_CHECK(
      !records_graph, backward_name,
      " is not differentiable: call it under torch.no_grad() or on tensors that do not "
      "require grad (double backward of the layer, create_graph=True, needs no call of it)");
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return backward_handle().call(grad_y, x, weight, saved, multiplier, negative_slope,
                                saved_is_output, precision, algorithm, output_mask);
}

/// The gradient's algorithm for the forward's, at the same precision: vendor (KokkosBlas::gemm:
/// strict, tf32) or vendor_lt (cuBLASLt: 3xtf32 only) as asked, else auto, which under a 3xtf32
/// floor runs the Hopper 3xtf32 kernels where they serve (they take fewer Views than the
/// forward's fused_sm90, which pads W); fused and fused_skinny have no counterpart there.
Strings gradient_algorithm(Strings forward, Strings precision) {
  const std::string name(forward.data(), forward.size());
  if (name == "vendor" || name == "vendor_prefill") return "vendor";
  if (name == "vendor_lt")
    return std::string(precision.data(), precision.size()) == "3xtf32" ? "vendor_lt" : "vendor";
  return "auto";
}

/// d/dz LeakyReLU(z) is 1 for z > 0, else the slope (PyTorch's choice at 0). The forward saves
/// that sign as a bool mask (M*N bytes), not the output, which the caller may then modify in
/// place, as the reference model allows: with a slope >= 0, z > 0 exactly where y > 0; a
/// negative slope maps both signs to positive outputs, so the forward computes z (the library
/// at slope 1, the identity), keeps z > 0 and returns leaky_relu(z, slope). The product is never
/// recomputed: the backward is the gradient operator, at the forward's precision.
class LinearLeakyReLUFunction : public torch::autograd::Function<LinearLeakyReLUFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight, const at::Tensor& bias, double multiplier,
                            double negative_slope, Strings precision, Strings algorithm,
                            bool records_graph) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    if (!records_graph || negative_slope >= 0) {
      at::Tensor y =
          op_handle().call(x, weight, bias, multiplier, negative_slope, precision, algorithm);
      if (!records_graph) return y;  // no backward will run: nothing to save
      save(ctx, x, weight, y > 0, multiplier, negative_slope, precision, algorithm);
      return y;
    }
    at::Tensor z = op_handle().call(x, weight, bias, multiplier, 1.0, precision, algorithm);
    save(ctx, x, weight, z > 0, multiplier, negative_slope, precision, algorithm);
    return at::leaky_relu(z, negative_slope);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &positive = saved[2];
    const double m = ctx->saved_data["multiplier"].toDouble();
    const double s = ctx->saved_data["negative_slope"].toDouble();
    const at::Tensor& dy = grads[0];
    at::Tensor dx, dw, db;
    const std::array<bool, 3> mask{ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                                   ctx->needs_input_grad(2)};
    if (dy.defined() && at::GradMode::is_enabled()) {
      // create_graph (double backward): PyTorch ops, whose own gradients autograd knows.
      const at::Tensor g = at::where(positive, dy, dy * s) * m;
      if (mask[0]) dx = g.mm(weight);
      if (mask[1]) dw = g.t().mm(x);
      if (mask[2]) db = g.sum(0);
    } else if (dy.defined()) {
      const std::string& precision = ctx->saved_data["precision"].toStringRef();
      const std::string& algorithm = ctx->saved_data["algorithm"].toStringRef();
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      std::tie(dx, dw, db) =
          backward_handle().call(dy, x, weight, positive, m, s, /*saved_is_output=*/false,
                                 Strings(precision.data(), precision.size()),
                                 Strings(algorithm.data(), algorithm.size()), mask);
    }
    return {dx, dw, db, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }

 private:
  /// x and weight (the inputs: no memory of their own), the mask of z > 0, and the call's
  /// parameters.
  static void save(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                   const at::Tensor& weight, const at::Tensor& positive, double multiplier,
                   double negative_slope, Strings precision, Strings algorithm) {
    ctx->save_for_backward({x, weight, positive});
    ctx->saved_data["multiplier"] = multiplier;
    ctx->saved_data["negative_slope"] = negative_slope;
    ctx->saved_data["precision"] = std::string(precision.data(), precision.size());
    const Strings gradient = gradient_algorithm(algorithm, precision);
    ctx->saved_data["algorithm"] = std::string(gradient.data(), gradient.size());
  }
};

at::Tensor linear_leaky_relu_autograd(const at::Tensor& x, const at::Tensor& weight,
                                      const at::Tensor& bias, double multiplier,
                                      double negative_slope, Strings precision, Strings algorithm) {
  const bool records_graph = at::GradMode::is_enabled() &&
                             (x.requires_grad() || weight.requires_grad() || bias.requires_grad());
  return LinearLeakyReLUFunction::apply(x, weight, bias, multiplier, negative_slope, precision,
                                        algorithm, records_graph);
}

/// Under torch.autocast the op is one of PyTorch's fp32-only ops (as its fp32 cast policy):
/// float16 and bfloat16 arguments become float32, float32 and float64 ones stay; then the op
/// runs with autocast off (so the casts are below it and recorded for autograd).
at::Tensor to_float32_if_low(const at::Tensor& t) {
  const auto dtype = t.scalar_type();
  return dtype == at::kHalf || dtype == at::kBFloat16 ? t.to(at::kFloat) : t;
}

template <c10::DispatchKey autocast_key>
at::Tensor linear_leaky_relu_autocast(const at::Tensor& x, const at::Tensor& weight,
                                      const at::Tensor& bias, double multiplier,
                                      double negative_slope, Strings precision, Strings algorithm) {
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(autocast_key);
  return op_handle().call(to_float32_if_low(x), to_float32_if_low(weight), to_float32_if_low(bias),
                          multiplier, negative_slope, precision, algorithm);
}

// ------------------------------------------------------------------ helpers for Python

/// Where the tensors live, for the helpers below (which take CPU or CUDA tensors).
Prepared prepared_on_device(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            double multiplier, double negative_slope, Strings precision,
                            Strings algorithm) {
  check_inputs(x, weight, bias);
  check_extents(x, weight, bias);
  if (x.is_cuda()) {
#if defined(FUSED_LINEAR_TORCH_CUDA)
    ensure_kokkos(x.device().index());
    Prepared p = prepare(x, weight, bias, multiplier, negative_slope, precision, algorithm);
    on_current_stream(p, x);
    p.call.where = Where::Cuda;
    return p;
#else
    TORCH_CHECK_VALUE(false, op_name, ": this build has no CUDA kernel");
#endif
  }
  TORCH_CHECK_VALUE(x.is_cpu(), op_name, ": CPU or CUDA tensors, got ", x.device());
  ensure_kokkos(-1);
  Prepared p = prepare(x, weight, bias, multiplier, negative_slope, precision, algorithm);
  p.call.where = Where::Host;
  return p;
}

/// What the library runs for these arguments (RunInfo), running it once.
std::string run_info(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                     double multiplier, double negative_slope, Strings precision,
                     Strings algorithm) {
  Prepared p =
      prepared_on_device(x, weight, bias, multiplier, negative_slope, precision, algorithm);
  c10::OptionalDeviceGuard guard;
  if (x.is_cuda()) guard.reset_device(x.device());
  return translating_errors([&] {
    std::string text(512, '\0');
    const std::size_t size = FusedLinearTorch::run_info(p.call, &text[0], text.size());
    text.resize(std::min(size, text.size() - 1));
    FusedLinearTorch::fence(p.call);
    return text;
  });
}

/// Per-call times in microseconds (a float64 CPU tensor) of `iters` calls: mode "plan"
/// (FusedLinear::Plan::execute, the C++ floor), "oneshot" (the library's one-shot call on the
/// same Views), or "op" (this operator through PyTorch's dispatcher, allocation included), each
/// followed by a wait for the stream when `sync`.
at::Tensor time_calls(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      double multiplier, double negative_slope, Strings precision,
                      Strings algorithm, Strings mode, int64_t iters, bool sync) {
  TORCH_CHECK_VALUE(iters > 0, "_time_calls: iters must be positive");
  Prepared p =
      prepared_on_device(x, weight, bias, multiplier, negative_slope, precision, algorithm);
  c10::OptionalDeviceGuard guard;
  if (x.is_cuda()) guard.reset_device(x.device());
  at::Tensor times = at::empty({iters}, at::TensorOptions().dtype(at::kDouble));
  double* us = times.data_ptr<double>();
  const std::string which(mode.data(), mode.size());
  if (which == "plan" || which == "oneshot") {
    translating_errors([&] {
      FusedLinearTorch::time_calls(p.call, which == "plan" ? 0 : 1, int(iters), sync, us);
      return 0;
    });
    return times;
  }
  TORCH_CHECK_VALUE(which == "op", "_time_calls: mode is plan, oneshot or op, got '", which, "'");
  const auto& op = op_handle();
  at::AutoDispatchBelowADInplaceOrView below_autograd;  // the kernel, as a no-grad call runs it
  op.call(x, weight, bias, multiplier, negative_slope, precision, algorithm);
  translating_errors([&] {
    FusedLinearTorch::fence(p.call);
    return 0;
  });
  for (int64_t i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    at::Tensor y = op.call(x, weight, bias, multiplier, negative_slope, precision, algorithm);
    if (sync) FusedLinearTorch::fence(p.call);
    us[i] =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  FusedLinearTorch::fence(p.call);
  return times;
}

std::string status() {
  const FusedLinearTorch::Status s = FusedLinearTorch::status();
  std::string text;
  auto add = [&](const char* key, const std::string& value) {
    text += (text.empty() ? "" : ";") + std::string(key) + "=" + value;
  };
  add("initialized", std::to_string(int(s.initialized)));
  add("owned", std::to_string(int(s.owned)));
  add("finalized", std::to_string(int(s.finalized)));
  add("kokkos_cuda", std::to_string(int(s.cuda)));
#if defined(FUSED_LINEAR_TORCH_CUDA)
  add("cuda_kernel", "1");
#else
  add("cuda_kernel", "0");
#endif
  add("forked", std::to_string(int(s.forked)));
  add("serial_fallback", std::to_string(int(s.serial_fallback)));
  add("host_space", s.host_space);
  add("host_threads", std::to_string(s.host_threads));
  add("cuda_device", std::to_string(s.cuda_device));
  add("cached_cuda_instances", std::to_string(s.cached_cuda_instances));
  add("cuda_capture_lanes", std::to_string(s.cuda_capture_lanes));
  add("kokkos_version", s.kokkos_version);
  add("torch_version", std::to_string(TORCH_VERSION_MAJOR) + "." +
                           std::to_string(TORCH_VERSION_MINOR) + "." +
                           std::to_string(TORCH_VERSION_PATCH));
  return text;
}

void initialize(int64_t num_threads, int64_t cuda_device) {
  int threads = num_threads > 0 ? int(num_threads) : at::get_num_threads();
  translating_errors([&] {
    FusedLinearTorch::ensure_initialized(threads, int(cuda_device),
                                         std::getenv("FUSED_LINEAR_KOKKOS_ARGS"));
    return 0;
  });
}

void finalize() {
  translating_errors([] {
    FusedLinearTorch::finalize();
    return 0;
  });
}

}  // namespace

TORCH_LIBRARY(fused_linear, m) {
  m.def(
      "linear_leaky_relu(Tensor x, Tensor weight, Tensor bias, float multiplier, "
      "float negative_slope, str precision=\"strict\", str algorithm=\"auto\") -> Tensor");
  // The layer's gradient (dX, dW, db; an output output_mask leaves out is None), from the
  // forward's output (saved_is_output, slope >= 0), its pre-activation (any slope) or a bool
  // mask of pre-activation > 0 (any slope; saved_is_output is then not read).
  m.def(
      "linear_leaky_relu_backward(Tensor grad_y, Tensor x, Tensor weight, Tensor saved, "
      "float multiplier, float negative_slope, bool saved_is_output, str precision, "
      "str algorithm, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  // Helpers: no autograd, no tracing (Python's fused_linear.run_info, status, ...).
  m.def(
      "run_info(Tensor x, Tensor weight, Tensor bias, float multiplier, float negative_slope, "
      "str precision=\"strict\", str algorithm=\"auto\") -> str",
      &run_info);
  m.def(
      "_time_calls(Tensor x, Tensor weight, Tensor bias, float multiplier, float negative_slope, "
      "str precision, str algorithm, str mode, int iters, bool sync) -> Tensor",
      &time_calls);
  m.def("_status() -> str", &status);
  m.def("_initialize(int num_threads=-1, int cuda_device=-1) -> ()", &initialize);
  m.def("_finalize() -> ()", &finalize);
}

TORCH_LIBRARY_IMPL(fused_linear, CPU, m) {
  m.impl("linear_leaky_relu", &linear_leaky_relu_cpu);
  m.impl("linear_leaky_relu_backward", &linear_leaky_relu_backward_cpu);
}
#if defined(FUSED_LINEAR_TORCH_CUDA)
TORCH_LIBRARY_IMPL(fused_linear, CUDA, m) {
  m.impl("linear_leaky_relu", &linear_leaky_relu_cuda);
  m.impl("linear_leaky_relu_backward", &linear_leaky_relu_backward_cuda);
}
#endif
TORCH_LIBRARY_IMPL(fused_linear, Meta, m) {
  m.impl("linear_leaky_relu", &linear_leaky_relu_meta);
  m.impl("linear_leaky_relu_backward", &linear_leaky_relu_backward_meta);
}
TORCH_LIBRARY_IMPL(fused_linear, Autograd, m) {
  m.impl("linear_leaky_relu", &linear_leaky_relu_autograd);
  m.impl("linear_leaky_relu_backward", &linear_leaky_relu_backward_autograd);
}
TORCH_LIBRARY_IMPL(fused_linear, AutocastCPU, m) {
  m.impl("linear_leaky_relu", &linear_leaky_relu_autocast<c10::DispatchKey::AutocastCPU>);
}
TORCH_LIBRARY_IMPL(fused_linear, AutocastCUDA, m) {
  m.impl("linear_leaky_relu", &linear_leaky_relu_autocast<c10::DispatchKey::AutocastCUDA>);
}
