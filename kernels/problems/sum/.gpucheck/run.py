"""Standalone GPU check and timing of problem folders (temporary helper, not part of the tree)."""
import importlib.util, os, re, sys, time, tomllib
from pathlib import Path
import numpy as np
import cupy as cp
import torch

ROOT = Path(__file__).resolve().parents[4]
spec = importlib.util.spec_from_file_location("kformula", ROOT / "kernels/formula.py")
F = importlib.util.module_from_spec(spec); spec.loader.exec_module(F)
SUFFIX = {"cuda": ".cu", "numba-cuda": ".numba_cuda.py", "triton": ".triton.py"}
DIRECTIVE = re.compile(r"^\s*(?://|#)\s*kplay:\s*(?P<body>.*)$", re.MULTILINE)


def backend_of(p):
    for k, s in SUFFIX.items():
        if p.name.endswith(s):
            return k


def load_mod(path, name):
    s = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m


def plan(default, src):
    lp = dict(kernel=default["kernel"], grid=list(default.get("grid", [])), block=list(default.get("block", [])),
              smem=default.get("shared_mem_bytes", "0"), num_warps=default.get("num_warps"),
              constants=dict(default.get("constants", {})))
    m = DIRECTIVE.search(src)
    if m:
        for tok in m.group("body").split():
            k, v = tok.split("=", 1)
            if k in ("grid", "block"):
                lp[k] = [x.strip() for x in v[1:-1].split(",")] if v.startswith("(") else [v]
            elif k == "smem": lp["smem"] = v
            elif k == "num_warps": lp["num_warps"] = int(v)
            elif k == "kernel": lp["kernel"] = v
            else: lp["constants"][k] = v
    return lp


def resolve(lp, params):
    env = dict(params); consts = {}
    for k, v in lp["constants"].items():
        consts[k] = F.evaluate_int(v, env); env[k] = consts[k]
    grid = tuple(max(1, F.evaluate_int(g, env)) for g in lp["grid"])
    block = tuple(F.evaluate_int(b, env) for b in lp["block"])
    return grid, block, F.evaluate_int(lp["smem"], env), consts


class Problem:
    def __init__(self, folder):
        self.folder = folder
        self.spec = tomllib.loads((folder / "problem.toml").read_text())
        self.ref = load_mod(folder / "reference.py", "ref_" + folder.name)
        self.cache = {}

    def inputs(self, params, seed):
        key = (tuple(sorted(params.items())), seed)
        if key not in self.cache:
            self.cache.clear()
            host = self.ref.generate(dict(params), np.random.default_rng(seed))
            exp = self.ref.reference(dict(host), dict(params))
            self.cache[key] = (host, exp)
        return self.cache[key]

    def make_args(self, params, seed):
        host, exp = self.inputs(params, seed)
        args, dev, outs = [], {}, []
        for a in self.spec["args"]:
            r = a["role"]; dt = a.get("dtype", "float32")
            if r == "param": args.append(np.dtype(dt).type(params[a["name"]]))
            elif r == "scalar": args.append(np.dtype(dt).type(host[a["name"]]))
            elif r == "in": d = cp.asarray(host[a["name"]]); dev[a["name"]] = d; args.append(d)
            else:
                shape = tuple(F.evaluate_int(s, params) for s in a["shape"])
                zeros = a.get("init") == "zeros"
                d = cp.zeros(shape, dt) if zeros else cp.full(shape, np.nan, dt)
                dev[a["name"]] = d; args.append(d); outs.append((a["name"], zeros))
        return args, dev, outs, host, exp

    def verify(self, dev, host, exp):
        tol = self.spec["tolerance"]["float32"]
        for a in self.spec["args"]:
            if a["role"] == "in" and not np.array_equal(cp.asnumpy(dev[a["name"]]), host[a["name"]]):
                return False, f"input {a['name']} written"
        worst = 0.0
        for name, e in exp.items():
            got = cp.asnumpy(dev[name]).astype(np.float64); e = np.asarray(e, np.float64)
            diff = np.abs(got - e)
            bad = ~(diff <= tol["atol"] + tol["rtol"] * np.abs(e))
            if bad.any():
                i = int(np.argmax(bad))
                return False, f"{name}[{i}] got {got.flat[i]:.7g} expected {e.flat[i]:.7g} ({int(bad.sum())} bad)"
            worst = max(worst, float((diff / np.maximum(np.abs(e), 1e-30)).max()))
        return True, f"max rel err {worst:.2e}"


def compile_file(prob, backend, path, n=[0]):
    src = path.read_text(); n[0] += 1
    lp = plan(prob.spec["launch"][backend], src)
    if backend == "cuda":
        fn = cp.RawModule(code=src, options=("-std=c++17",)).get_function(lp["kernel"])
        def go(args, params):
            g, b, s, _ = resolve(lp, params); fn(g, b, tuple(args), shared_mem=s)
    elif backend == "numba-cuda":
        fn = getattr(load_mod(path, f"nc{n[0]}"), lp["kernel"])
        def go(args, params):
            g, b, s, _ = resolve(lp, params); fn[g, b, 0, s](*args)
    else:
        fn = getattr(load_mod(path, f"tr{n[0]}"), lp["kernel"])
        def go(args, params):
            g, b, s, c = resolve(lp, params)
            targs = [torch.as_tensor(a, device="cuda") if isinstance(a, cp.ndarray) else a.item() for a in args]
            kw = dict(c)
            if lp["num_warps"]: kw["num_warps"] = lp["num_warps"]
            fn[g](*targs, **kw)
    return go


def check_file(prob, backend, path, quiet=False):
    go = compile_file(prob, backend, path)
    results = []
    for case in prob.spec["tests"]:
        args, dev, outs, host, exp = prob.make_args(case["params"], case["seed"])
        try:
            go(args, case["params"]); cp.cuda.Device().synchronize()
            ok, msg = prob.verify(dev, host, exp)
        except Exception as e:
            ok, msg = False, f"ERROR {type(e).__name__}: {str(e)[:150]}"
        results.append((case["name"], ok, msg))
        if not quiet:
            print(f"    {case['name']:34s} {'ok  ' if ok else 'FAIL'} {msg}")
    return go, results


def time_it(fn, reset, reps=40):
    for _ in range(3):
        reset(); fn()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        reset()
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record(); fn(); e.record(); e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) * 1e3)
    return float(np.median(ts))


def bench(prob, label, go_or_base, backend_name):
    for case in prob.spec["benchmarks"]:
        if "numba-cpu" in (case.get("backends") or []):
            continue
        params = case["params"]
        args, dev, outs, host, exp = prob.make_args(params, case["seed"])
        def reset():
            for name, zeros in outs:
                if zeros: dev[name].fill(0)
        if label == "baseline":
            arrays = dict(dev)
            for a, v in zip(prob.spec["args"], args):
                if a["role"] in ("scalar", "param"): arrays[a["name"]] = v
            fn = lambda: go_or_base(arrays, dict(params), cp)
        else:
            fn = lambda: go_or_base(args, params)
        us = time_it(fn, reset)
        reset(); fn(); cp.cuda.Device().synchronize()
        ok, msg = prob.verify(dev, host, exp)
        nbytes = F.evaluate(prob.spec["bytes"], params)
        print(f"  BENCH {prob.folder.name:10s} {label:34s} {case['name']:30s} {us:9.1f} us "
              f"{nbytes / us / 1e3:7.0f} GB/s  recheck {'ok' if ok else 'FAIL'} {msg}")


def main():
    torch.cuda.init()
    a = cp.empty(1 << 28, np.float32); b = cp.empty_like(a)
    us = time_it(lambda: cp.copyto(b, a), lambda: None, reps=20)
    print(f"device copy: {2 * a.nbytes / us / 1e3:.0f} GB/s (read + write)"); del a, b
    races = sys.argv[2:] if len(sys.argv) > 2 else []
    for slug in sys.argv[1].split(","):
        prob = Problem(ROOT / "kernels/problems" / slug)
        folder = prob.folder
        for kind in ("starter", "correct", "wrong"):
            d = folder / ("starter" if kind == "starter" else f"solutions/{kind}")
            for path in sorted(d.iterdir()):
                backend = backend_of(path)
                if backend is None: continue
                t0 = time.time()
                try:
                    go, res = check_file(prob, backend, path, quiet=(kind != "correct"))
                except Exception as e:
                    print(f"{kind} {path.name}: COMPILE/LOAD ERROR {type(e).__name__}: {e}"[:600]); continue
                passed = all(ok for _, ok, _ in res)
                good = passed == (kind == "correct")
                fails = [f"{n}: {m}" for n, ok, m in res if not ok]
                print(f"{'GOOD' if good else '**BAD**'} {kind:7s} {slug}/{path.name} -> {'pass' if passed else 'fail'} "
                      f"({time.time() - t0:.1f}s) {fails[:2]}")
                if kind == "correct":
                    bench(prob, path.name, go, backend)
                if path.name in races:
                    nfail = 0
                    for _ in range(30):
                        _, res = check_file(prob, backend, path, quiet=True)
                        nfail += not all(ok for _, ok, _ in res)
                    print(f"  RACE {path.name}: {nfail}/30 full check runs failed")
        bench(prob, "baseline", prob.ref.baseline, "cupy")


if __name__ == "__main__":
    main()
