"""The long-context caveat: said where the attention core is most of a layer's time, and the
ranges it quotes are the long-sequence holdouts' errors past the same share, recomputed."""

import dataclasses
from pathlib import Path

import pytest

from markovsim.training import load_plan, operator_table, plan_caveats, runs_from_cases
from markovsim.training._outputs import ATTENTION_SHARE_FLAG, LONG_CONTEXT_CAVEAT, attention_share

from ._shipped import validated

CASES = Path(__file__).resolve().parents[2] / "models" / "cases"


def test_the_share_is_the_operator_tables():
    spec = load_plan("llama3_70b_h100_64")
    ops = operator_table(spec.workload, spec.hardware, spec.plan)
    core = next(o for o in ops if o.name == "attention_core")
    layer = sum(o.forward_s + o.backward_s for o in ops if o.where != "logit")
    assert attention_share(spec) == pytest.approx((core.forward_s + core.backward_s) / layer, rel=1e-12)
    assert 0 < attention_share(spec) < ATTENTION_SHARE_FLAG  # 8K tokens: no caveat
    assert not any(n.startswith("long context") for n in plan_caveats(spec))
    # the same plan at 128K tokens: attention is most of the layer, and the caveat says how much
    long = dataclasses.replace(spec, workload=dataclasses.replace(spec.workload, seq_len=131072))
    share = attention_share(long)
    assert share > ATTENTION_SHARE_FLAG
    said = [n for n in plan_caveats(long) if n.startswith("long context")]
    assert said == [LONG_CONTEXT_CAVEAT.format(share=100 * share, hardware=long.hardware.name,
                                               fraction=long.hardware.kernels.attention_peak_fraction)]
    assert f"{100 * share:.0f} % of this plan's layer time" in said[0]


def test_the_quoted_ranges_are_the_holdouts_past_the_share():
    text = LONG_CONTEXT_CAVEAT
    for suite, groups, digits in (("longcontext", {"H100": "on H100", "B200": "on B200"}, 1),
                                  ("torchtitan_h100", {"H100": "on torchtitan's"}, 0)):
        path = CASES / f"{suite}_training_runs.toml"
        share = {r.name.split(" [")[0]: attention_share(r.spec) for r in runs_from_cases(path, role="holdout")}
        rows = [r for r in validated(path).rows if r.role == "holdout" and share[r.case] >= ATTENTION_SHARE_FLAG]
        for key, where in groups.items():
            errors = [100 * r.error for r in rows if key in r.case]
            assert errors
            quoted = f"{min(errors):+.{digits}f} to {max(errors):+.{digits}f} % {where}"
            assert quoted in text, quoted
