#!/usr/bin/env python3
"""Golden values for tb::optim's LR schedulers and GradScaler, from the pinned Python torch.

Writes, next to this script:
  lr_schedules.json  one entry per case: the scheduler config, the optimizer's groups, the lr
                     (and momentum/beta1 where cycled) of every group after construction and after
                     every step, and torch's scheduler state_dict() after `mid` steps and at the end.
  grad_scaler.json   torch.amp.GradScaler("cpu") over a scripted sequence of losses whose
                     coefficients hold inf/NaN/overflowing values at some steps, with torch SGD:
                     scale, growth tracker, whether the optimizer stepped, the unscaled grads and the
                     parameters after every step.

This is not a test: suites/optim/schedule_cases.cpp reads these files and replays every case with
the engine. Never edit the JSON by hand; regenerate (see README.md in this folder):
  /root/.cache/trainbench/venv-py3.11-5fcd54a2ce5a/bin/python reference/golden/make_optim_goldens.py
Configs are plain dicts so the C++ side builds the same schedulers from the same JSON.
"""
import json
import math
import os
import sys

import torch

SEED = 20240611
HERE = os.path.dirname(os.path.abspath(__file__))


def warmup_cosine(warmup_steps, total_steps, min_factor=0.0):
    """The factor of tb::optim::warmup_cosine (engine/optim/lr_scheduler.h), same arithmetic."""

    def f(step):
        if step < warmup_steps:
            return step / warmup_steps
        if step >= total_steps:
            return min_factor
        progress = (step - warmup_steps) / (total_steps - warmup_steps)
        return min_factor + (1.0 - min_factor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return f


def make_lambda(cfg):
    if cfg["lambda"] == "pow":  # factor = base ** epoch
        base = cfg["base"]
        return lambda e: base**e
    if cfg["lambda"] == "warmup_cosine":
        return warmup_cosine(cfg["warmup_steps"], cfg["total_steps"], cfg["min_factor"])
    raise ValueError(cfg["lambda"])


def build(opt, cfg):
    S = torch.optim.lr_scheduler
    t = cfg["type"]
    kw = {k: v for k, v in cfg.items() if k not in ("type", "schedulers", "lambda", "base",
                                                      "warmup_steps", "total_steps", "min_factor")}
    if t == "LambdaLR":
        return S.LambdaLR(opt, make_lambda(cfg))
    if t == "SequentialLR":
        subs = [build(opt, c) for c in cfg["schedulers"]]
        return S.SequentialLR(opt, subs, milestones=cfg["milestones"])
    if t == "OneCycleLR":
        kw["total_steps"] = cfg["total_steps"]
    return getattr(S, t)(opt, **kw)


def make_optimizer(spec, params):
    groups = [{"params": [p], "lr": lr} for p, lr in zip(params, spec["lrs"])]
    if spec["type"] == "SGD":
        return torch.optim.SGD(groups, lr=spec["lrs"][0], momentum=spec.get("momentum", 0.0))
    if spec["type"] == "Adam":
        return torch.optim.Adam(groups, lr=spec["lrs"][0], betas=tuple(spec["betas"]))
    raise ValueError(spec["type"])


def finite_json(x):
    """JSON has no inf/NaN: write them as the strings "inf", "-inf", "nan" (the engine does too)."""
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {str(k): finite_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite_json(v) for v in x]
    if isinstance(x, torch.Tensor):
        return finite_json(x.tolist())
    return x


def snapshot(opt):
    lrs = [g["lr"] for g in opt.param_groups]
    mom = None
    if "betas" in opt.param_groups[0]:
        mom = [g["betas"][0] for g in opt.param_groups]
    elif "momentum" in opt.param_groups[0]:
        mom = [g["momentum"] for g in opt.param_groups]
    return lrs, mom


def run_schedule(name, opt_spec, cfg, steps, mid, metrics=None):
    params = [torch.zeros(2, requires_grad=True) for _ in opt_spec["lrs"]]
    opt = make_optimizer(opt_spec, params)
    sched = build(opt, cfg)
    lrs, moms = [], []
    state_mid = None
    lr, mom = snapshot(opt)
    lrs.append(lr)
    moms.append(mom)
    for k in range(steps):
        opt.step()
        if metrics is not None:
            sched.step(metrics[k])
        else:
            sched.step()
        lr, mom = snapshot(opt)
        lrs.append(lr)
        moms.append(mom)
        if k + 1 == mid:
            state_mid = finite_json(sched.state_dict())
    case = {
        "name": name,
        "optimizer": opt_spec,
        "scheduler": cfg,
        "steps": steps,
        "mid": mid,
        "lrs": lrs,  # lrs[k][g]: group g after k scheduler steps (k = 0: after construction)
        "state_dict_mid": state_mid,
        "state_dict_final": finite_json(sched.state_dict()),
        "last_lr": finite_json(sched.get_last_lr()),
    }
    if metrics is not None:
        case["metrics"] = metrics
    if cfg["type"] == "OneCycleLR" and cfg.get("cycle_momentum", True):
        case["momentums"] = moms  # momentum (SGD) or beta1 (Adam) per group, same indexing
    return case


def schedule_cases():
    sgd3 = {"type": "SGD", "lrs": [0.1, 0.05, 0.3]}
    sgd2 = {"type": "SGD", "lrs": [1.0, 0.02]}
    sgd_m = {"type": "SGD", "lrs": [0.1, 0.05, 0.3], "momentum": 0.9}
    adam = {"type": "Adam", "lrs": [0.001, 0.003], "betas": [0.9, 0.999]}
    C = []
    C.append(run_schedule("StepLR/s7_g0.5", sgd3, {"type": "StepLR", "step_size": 7, "gamma": 0.5}, 40, 17))
    C.append(run_schedule("StepLR/default_gamma", sgd2, {"type": "StepLR", "step_size": 3}, 30, 10))
    C.append(run_schedule("MultiStepLR/dup_milestone", sgd3,
                          {"type": "MultiStepLR", "milestones": [5, 12, 12, 30], "gamma": 0.3}, 40, 12))
    C.append(run_schedule("ExponentialLR/g0.93", sgd3, {"type": "ExponentialLR", "gamma": 0.93}, 60, 25))
    C.append(run_schedule("LinearLR/default", sgd2, {"type": "LinearLR"}, 30, 3))
    C.append(run_schedule("LinearLR/0.25_to_0.9", sgd3,
                          {"type": "LinearLR", "start_factor": 0.25, "end_factor": 0.9, "total_iters": 10}, 30, 6))
    C.append(run_schedule("LinearLR/decay_to_0", sgd2,
                          {"type": "LinearLR", "start_factor": 1.0, "end_factor": 0.0, "total_iters": 8}, 20, 4))
    C.append(run_schedule("CosineAnnealingLR/T10_eta1e-3", sgd3,
                          {"type": "CosineAnnealingLR", "T_max": 10, "eta_min": 0.001}, 45, 13))
    C.append(run_schedule("CosineAnnealingLR/T7", sgd2, {"type": "CosineAnnealingLR", "T_max": 7}, 30, 7))
    C.append(run_schedule("CosineAnnealingWarmRestarts/T5_mult2", sgd3,
                          {"type": "CosineAnnealingWarmRestarts", "T_0": 5, "T_mult": 2, "eta_min": 0.0001}, 60, 22))
    C.append(run_schedule("CosineAnnealingWarmRestarts/T4_mult1", sgd2,
                          {"type": "CosineAnnealingWarmRestarts", "T_0": 4}, 30, 9))
    C.append(run_schedule("OneCycleLR/cos_sgd_momentum", sgd_m,
                          {"type": "OneCycleLR", "max_lr": [1.0, 0.5, 2.0], "total_steps": 50}, 50, 20))
    C.append(run_schedule("OneCycleLR/linear_three_phase_adam", adam,
                          {"type": "OneCycleLR", "max_lr": 0.01, "total_steps": 40, "pct_start": 0.25,
                           "anneal_strategy": "linear", "div_factor": 10.0, "final_div_factor": 100.0,
                           "three_phase": True, "base_momentum": 0.8, "max_momentum": 0.9}, 40, 15))
    C.append(run_schedule("OneCycleLR/no_momentum", sgd2,
                          {"type": "OneCycleLR", "max_lr": 0.4, "total_steps": 30, "cycle_momentum": False},
                          30, 11))
    C.append(run_schedule("LambdaLR/pow0.95", sgd3, {"type": "LambdaLR", "lambda": "pow", "base": 0.95}, 40, 10))
    C.append(run_schedule("LambdaLR/warmup_cosine", sgd3,
                          {"type": "LambdaLR", "lambda": "warmup_cosine", "warmup_steps": 10,
                           "total_steps": 50, "min_factor": 0.1}, 60, 8))
    C.append(run_schedule("LambdaLR/warmup_cosine_no_warmup", sgd2,
                          {"type": "LambdaLR", "lambda": "warmup_cosine", "warmup_steps": 0,
                           "total_steps": 20, "min_factor": 0.0}, 25, 5))
    C.append(run_schedule("SequentialLR/linear_then_cosine", sgd3,
                          {"type": "SequentialLR", "milestones": [5],
                           "schedulers": [{"type": "LinearLR", "start_factor": 0.1, "total_iters": 5},
                                          {"type": "CosineAnnealingLR", "T_max": 20, "eta_min": 0.0}]}, 40, 7))
    C.append(run_schedule("SequentialLR/exp_step_lambda", sgd2,
                          {"type": "SequentialLR", "milestones": [4, 10],
                           "schedulers": [{"type": "ExponentialLR", "gamma": 0.9},
                                          {"type": "StepLR", "step_size": 3, "gamma": 0.5},
                                          {"type": "LambdaLR", "lambda": "pow", "base": 0.8}]}, 30, 12))
    C.append(run_schedule("SequentialLR/warm_restarts_after_multistep", sgd2,
                          {"type": "SequentialLR", "milestones": [6],
                           "schedulers": [{"type": "MultiStepLR", "milestones": [2, 4], "gamma": 0.5},
                                          {"type": "CosineAnnealingWarmRestarts", "T_0": 3, "T_mult": 2}]}, 30, 9))
    metrics_min = [1.0, 0.9, 0.85, 0.86, 0.851, 0.849, 0.85, 0.852, 0.7, 0.71, 0.72, 0.73, 0.74, 0.69,
                   0.695, 0.7, 0.7, 0.7, 0.7, 0.7, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    C.append(run_schedule("ReduceLROnPlateau/min_rel_cooldown", sgd3,
                          {"type": "ReduceLROnPlateau", "mode": "min", "factor": 0.5, "patience": 2,
                           "threshold": 0.01, "threshold_mode": "rel", "cooldown": 1,
                           "min_lr": [0.001, 0.0, 0.05]}, len(metrics_min), 11, metrics_min))
    metrics_max = [0.1 * k if k < 8 else 0.75 + 0.001 * (k % 3) for k in range(40)]
    C.append(run_schedule("ReduceLROnPlateau/max_abs", sgd2,
                          {"type": "ReduceLROnPlateau", "mode": "max", "factor": 0.3, "patience": 3,
                           "threshold": 0.05, "threshold_mode": "abs", "min_lr": 0.0005, "eps": 1e-6},
                          len(metrics_max), 14, metrics_max))
    C.append(run_schedule("ReduceLROnPlateau/defaults", sgd2, {"type": "ReduceLROnPlateau"},
                          len(metrics_min), 15, metrics_min))
    return C


def grad_scaler_case(name, kwargs, steps, bad, explicit_unscale, mid):
    """torch.amp.GradScaler("cpu") + SGD(momentum 0.9) on loss = sum_i sum(p_i * c_i[k]).

    c_i[k] is standard normal except at the steps in `bad`, where one element is inf, NaN or a
    finite 1e36 that overflows float32 once multiplied by the scale. At the steps in
    explicit_unscale the script calls scaler.unscale_(opt) before scaler.step(opt) (as gradient
    clipping would), so step() must not unscale twice.
    """
    g = torch.Generator().manual_seed(SEED)
    shapes = [[3, 4], [5], [7]]
    params = [torch.randn(s, generator=g).requires_grad_() for s in shapes]
    init = [p.detach().clone() for p in params]
    opt = torch.optim.SGD([{"params": params[:2], "lr": 0.1}, {"params": params[2:], "lr": 0.05}],
                          lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", **kwargs)
    coeffs, records, state_mid = [], [], None
    for k in range(steps):
        cs = [torch.randn(s, generator=g) for s in shapes]
        if k in bad:
            kind = bad[k]
            value = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan, "overflow": 1e36}[kind]
            cs[k % 3].view(-1)[1] = value
        coeffs.append([finite_json(c.flatten()) for c in cs])
        opt.zero_grad()
        loss = sum((p * c).sum() for p, c in zip(params, cs))
        scaler.scale(loss).backward()
        if k in explicit_unscale:
            scaler.unscale_(opt)
        scaler.step(opt)
        found_inf = sum(v.item() for v in scaler._found_inf_per_device(opt).values())
        scaler.update()
        records.append({
            "stepped": found_inf == 0,
            "scale": scaler.get_scale(),
            "growth_tracker": scaler._get_growth_tracker(),
            "grads": [finite_json(p.grad.flatten()) for p in params],
            "params": [finite_json(p.detach().flatten()) for p in params],
        })
        if k + 1 == mid:
            state_mid = scaler.state_dict()
    return {
        "name": name,
        "kwargs": kwargs,
        "optimizer": {"type": "SGD", "group_lrs": [0.1, 0.05], "group_sizes": [2, 1], "momentum": 0.9},
        "shapes": shapes,
        "init_params": [finite_json(p.flatten()) for p in init],
        "steps": steps,
        "bad_steps": {str(k): v for k, v in bad.items()},
        "explicit_unscale": sorted(explicit_unscale),
        "coeffs": coeffs,  # coeffs[k][i]: flattened c_i at step k (float32 values)
        "records": records,
        "mid": mid,
        "state_dict_mid": state_mid,
        "state_dict_final": scaler.state_dict(),
    }


def main():
    torch.manual_seed(SEED)
    meta = {"torch_version": torch.__version__, "seed": SEED, "python": sys.version.split()[0],
            "generator": "reference/golden/make_optim_goldens.py"}
    with open(os.path.join(HERE, "lr_schedules.json"), "w") as f:
        json.dump({**meta, "cases": schedule_cases()}, f, indent=1, allow_nan=False)
    bad = {2: "inf", 3: "nan", 7: "overflow", 8: "-inf", 15: "overflow"}
    scaler_cases = [
        grad_scaler_case("pow2_scale", {"init_scale": 2.0**16, "growth_factor": 2.0, "backoff_factor": 0.5,
                                        "growth_interval": 3}, 24, bad, {5, 6, 12}, 10),
        # Factors that are not powers of two: the float32 rounding of the scale matters.
        grad_scaler_case("odd_factors", {"init_scale": 1000.0, "growth_factor": 1.7, "backoff_factor": 0.3,
                                         "growth_interval": 2}, 20, {4: "overflow", 5: "nan", 11: "inf"},
                         {9}, 7),
    ]
    with open(os.path.join(HERE, "grad_scaler.json"), "w") as f:
        json.dump({**meta, "cases": scaler_cases}, f, indent=1, allow_nan=False)
    print("wrote", os.path.join(HERE, "lr_schedules.json"), "and grad_scaler.json with torch", torch.__version__)


if __name__ == "__main__":
    main()
