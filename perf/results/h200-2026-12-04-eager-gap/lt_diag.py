# Throwaway diagnostic: eager PyTorch's pieces timed, and its kernels named, at given shapes.
import sys, torch, torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
reps = int(sys.argv[1]); shapes = sys.argv[2:]
def med(fn):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(); s.record(); fn(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort(); return ts[len(ts) // 2]
for shape in shapes:
    M, K, N = map(int, shape.split('x'))
    g = torch.Generator(device='cuda').manual_seed(1)
    x = torch.randn(M, K, device='cuda', generator=g)
    W = torch.randn(N, K, device='cuda', generator=g) * K ** -0.5
    b = torch.randn(N, device='cuda', generator=g)
    fns = {
        'eager': lambda: F.leaky_relu(F.linear(x, W, b) * 2.0, 0.1),
        'linear': lambda: F.linear(x, W, b),
        'mm': lambda: x @ W.t(),
    }
    print(shape, ' '.join(f'{n}={med(f):.4f}' for n, f in fns.items()), flush=True)
    if reps > 5:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            for _ in range(3):
                fns['eager'](); fns['mm']()
            torch.cuda.synchronize()
        print(p.key_averages().table(sort_by='cuda_time_total', row_limit=8, max_name_column_width=120))
