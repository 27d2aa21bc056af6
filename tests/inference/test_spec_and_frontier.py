"""Model files, bad inputs, the throughput model and the frontier search."""

import dataclasses
import re
import warnings
from pathlib import Path

import pytest

import markovsim
from markovsim import HOUR, MINUTE, YEAR
from markovsim import inference as inf

MODELS = Path(__file__).resolve().parents[2] / "models" / "inference"
CM = MODELS / "deepseek_v3_cloudmatrix384.toml"


@pytest.mark.parametrize("path", sorted(MODELS.glob("*.toml")), ids=lambda p: p.name)
def test_model_files_load_and_every_number_has_a_source(path):
    m = inf.load_inference_model(path)
    assert m.decode.cards_per_instance == m.decode_layout.cards
    assert 0 < m.decode.demand < m.decode.instances
    assert m.target == pytest.approx(0.9995)
    for line in path.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[", "name =")):
            assert re.search(r"#\s*(source|derived|assumption)", line), f"unsourced: {line}"


def test_cloudmatrix_layout_counts_npus_not_dies():
    m = inf.load_inference_model(CM)
    assert m.decode_layout.expert_parallel == 320 and m.decode.cards_per_instance == 160
    # the card fault rate is 1 / (24 h x 384 NPUs)
    assert m.decode.card_fault_rate == pytest.approx(1.085e-4 / HOUR)


def _edit(tmp_path, old, new):
    text = CM.read_text()
    assert old in text
    p = tmp_path / "m.toml"
    p.write_text(text.replace(old, new, 1))
    return p


@pytest.mark.parametrize("old, new, field", [
    ('restart_time = "20 min"', "restart_time = 1200", "tiers.restart.restart_time"),        # missing unit
    ("coverage = 0.95", "coverage = 1.5", "tiers.traffic_switch.coverage"),                 # probability > 1
    ('card_fault_rate = "1.085e-4 /h"', 'card_fault_rate = "-1e-4 /h"', "faults.card_fault_rate"),  # negative
    ("soft_fault_share = 0.5", "soft_fault_share = 0.5\ncolour = 1", "colour"),              # unknown key
    ("data_parallel = 320", "data_parallel = 100", "tensor_parallel x data_parallel"),      # bad layout
    ("expert_parallel = 320", "expert_parallel = 321", "decode"),                           # odd dies
    ('hbm = "64 GiB"', 'hbm = "64 furlongs"', "hardware.hbm"),                              # unknown unit
    ("instances = 8", "instances = 6", "decode"),                                           # demand > fleet
    ("spare_cards = 16", "spare_cards = 16\nmax_recovering = 0", "decode.max_recovering"),  # truncation < 1
    ("spare_cards = 16", "spare_cards = 16\nmax_recovering = 2.5", "decode.max_recovering"),  # not an integer
    ('[tiers.repair]\nrepair_time = "72 h"', "[tiers.repair]", "tiers.repair.repair_time"), # missing key
])
def test_bad_model_files_name_the_field(tmp_path, old, new, field):
    with pytest.raises(markovsim.SpecError, match=re.escape(field)):
        inf.load_inference_model(_edit(tmp_path, old, new))


def test_max_recovering_from_the_model_file_truncates_each_pool(tmp_path):
    """A pool's ``max_recovering`` reaches its analysis: absent, the defaults (3 for the
    count chain of a finite spare pool, 12 for the product form of an unlimited one); a
    larger bound gives a larger chain and no more probability on the bound."""
    base = MODELS / "deepseek_v3_8gpu.toml"
    text = base.read_text()
    m = inf.load_inference_model(base)
    assert (m.max_recovering("decode"), m.max_recovering("prefill")) == (3, 12)
    default = inf.fleet_results(m)
    assert default["decode"].states == inf.analyze_fleet(m.decode, m.tiers, max_recovering=3).states
    runs = {}
    for j in (1, 2, 4):
        p = tmp_path / f"j{j}.toml"
        p.write_text(text.replace("spare_cards = 8", f"spare_cards = 8\nmax_recovering = {j}", 1)
                     .replace("instances = 7", f"instances = 7\nmax_recovering = {j}", 1))
        mj = inf.load_inference_model(p)
        assert mj.max_recovering("decode") == mj.max_recovering("prefill") == j
        with warnings.catch_warnings():  # small bounds are TRUNCATED, and say so
            warnings.simplefilter("ignore", markovsim.MarkovsimWarning)
            runs[j] = inf.fleet_results(mj)
    for role in ("decode", "prefill"):
        states = [runs[j][role].states for j in (1, 2, 4)]
        mass = [runs[j][role].truncation_mass for j in (1, 2, 4)]
        assert states[0] < states[1] < states[2], role
        assert mass[0] >= mass[1] >= mass[2], role
        # the product form's omitted tail (5e-9 here) is truncation, not OUT_OF_RANGE
        ok = (markovsim.ResultStatus.OK, markovsim.ResultStatus.TRUNCATED)
        assert all(runs[j][role].status in ok for j in (1, 2, 4)), role
    assert runs[1]["decode"].status == markovsim.ResultStatus.TRUNCATED


def test_a_truncated_answer_names_the_model_file_key():
    fleet = inf.Fleet(instances=6, cards_per_instance=64, card_fault_rate=1 / (30 * 24 * HOUR),
                      soft_fault_share=0.0, demand=5.0, spare_cards=2)
    tiers = inf.RecoveryTiers(inf.InstanceRestart(20 * MINUTE), inf.HardwareRepair(72 * HOUR))
    with pytest.warns(markovsim.MarkovsimWarning, match=r"TRUNCATED.*--set decode.max_recovering=2"):
        inf.analyze_fleet(fleet, tiers, max_recovering=1)


def test_missing_file_is_a_spec_error(tmp_path):
    with pytest.raises(markovsim.SpecError, match="not found"):
        inf.load_inference_model(tmp_path / "nope.toml")


@pytest.mark.parametrize("change, field", [
    (dict(instances=0), "fleet.instances"),
    (dict(card_fault_rate=-1.0), "fleet.card_fault_rate"),
    (dict(soft_fault_share=1.2), "fleet.soft_fault_share"),
    (dict(demand=5.0), "fleet.demand"),
    (dict(spare_cards=-1), "fleet.spare_cards"),
    (dict(card_fault_rate=float("nan")), "fleet.card_fault_rate"),
    (dict(card_fault_rate=2.0), "fleet.card_fault_rate"),  # above one fault per card per second
])
def test_bad_fleet_values_name_the_field(change, field):
    fleet = inf.Fleet(instances=2, cards_per_instance=8, card_fault_rate=1 / YEAR, soft_fault_share=0.5, demand=1.0)
    tiers = inf.RecoveryTiers(inf.InstanceRestart(20 * MINUTE), inf.HardwareRepair(HOUR))
    with pytest.raises(markovsim.InvalidParameterError, match=re.escape(field)):
        inf.analyze_fleet(dataclasses.replace(fleet, **change), tiers)


def test_bad_tiers_name_the_field():
    fleet = inf.Fleet(instances=2, cards_per_instance=8, card_fault_rate=1 / YEAR, soft_fault_share=0.5, demand=1.0)
    base = inf.RecoveryTiers(inf.InstanceRestart(20 * MINUTE), inf.HardwareRepair(HOUR))
    with pytest.raises(markovsim.InvalidParameterError, match="token_retry.coverage"):
        inf.analyze_fleet(fleet, dataclasses.replace(base, token_retry=inf.TokenRetry(30.0, 2.0)))
    with pytest.raises(markovsim.InvalidParameterError, match="restart.restart_time"):
        inf.analyze_fleet(fleet, dataclasses.replace(base, restart=inf.InstanceRestart(-5.0)))
    with pytest.raises(markovsim.InvalidParameterError, match="cards_per_instance"):
        inf.analyze_fleet(dataclasses.replace(fleet, cards_per_instance=1),
                          dataclasses.replace(base, elastic=inf.ElasticContinuation(10.0, 0.5, HOUR)))
    with pytest.raises(markovsim.InvalidParameterError, match="spare_cards"):
        inf.analyze_independent_fleet(dataclasses.replace(fleet, spare_cards=3), base)


def test_decode_throughput_closed_form_and_growth_with_instance_size():
    # memory-bound: b = (M - R - w)/(kL), step = (w + b kL)/(eta B) = (M - R)/(eta B)
    mm = inf.DecodeMemoryModel(replicated_weight_bytes=10e9, expert_weight_bytes=640e9, kv_bytes_per_token=1e5,
                               context_tokens=1000, hbm_bytes=80e9, reserved_bytes=10e9, hbm_bandwidth=2e12,
                               bandwidth_efficiency=1.0, time_per_output_token=1.0)
    for E in (16, 64):
        w = 10e9 + 640e9 / E
        b = (70e9 - w) / 1e8
        assert inf.decode_tokens_per_s_per_card(mm, E) == pytest.approx(b / (70e9 / 2e12), rel=1e-12)
    assert inf.decode_tokens_per_s_per_card(mm, 8) == 0.0  # 90 GB of weights do not fit in 80 GB
    m = inf.load_inference_model(CM)
    taus = [inf.decode_tokens_per_s_per_card(m.serving, E) for E in m.candidate_sizes]
    assert taus == sorted(taus) and taus[0] > 0


def test_frontier_meets_the_target_and_tiers_do_not_raise_cost():
    m = inf.load_inference_model(CM)
    sizes = (32, 160)
    costs = []
    for tiers in (m.tiers.only(inf.Tier.TRAFFIC_SWITCH), m.tiers):
        pts = inf.cheapest_fleet(m.decode_demand_tokens_per_s, sizes, tiers, serving=m.serving,
                                 card_fault_rate=m.decode.card_fault_rate, soft_fault_share=m.decode.soft_fault_share,
                                 target=0.999, measure=inf.Measure.REQUESTS)
        assert [p.cards_per_instance for p in pts] == list(sizes)
        for p in pts:
            assert p.meets_target and p.availability >= 0.999
            assert p.instances >= p.demand and p.cards == p.instances * p.cards_per_instance
        costs.append([p.cards for p in pts])
    assert all(b <= a for a, b in zip(*costs))


def test_tier_ladder_starts_bare_and_adds_in_order():
    m = inf.load_inference_model(MODELS / "deepseek_v3_8gpu.toml")
    fleet = dataclasses.replace(m.prefill, spare_cards=None)
    steps = inf.tier_ladder(fleet, m.tiers)
    assert [len(on) for on, _ in steps] == [0, 1, 2, 3, 4]
    assert steps[1][0] == (inf.Tier.TRAFFIC_SWITCH,)
    with pytest.raises(markovsim.InvalidParameterError, match="not deployed"):
        inf.tier_ladder(fleet, m.tiers.only(), order=[inf.Tier.ELASTIC])


def test_fault_rates_from_the_availability_catalogue():
    av = pytest.importorskip("markovsim.availability")
    cat = av.FaultCatalogue(
        components=(av.Component("npu", "card", 0.5 / YEAR), av.Component("software", "card", 0.3 / YEAR)),
        modes=(av.FaultMode("npu_hard", "npu", 0.6, av.Effect.INTERRUPT, av.BlastRadius.CARD, "restart", spare_nodes=1),
               av.FaultMode("hbm_uce", "npu", 0.3, av.Effect.INTERRUPT, av.BlastRadius.CARD, "online"),
               av.FaultMode("slow", "npu", 0.1, av.Effect.DEGRADE, av.BlastRadius.CARD, "isolate"),
               av.FaultMode("crash", "software", 1.0, av.Effect.INTERRUPT, av.BlastRadius.JOB, "restart")))
    shape = av.ClusterShape("one node", cards=8, cards_per_node=8)
    rate, soft = inf.fault_rates_from_catalogue(cat, shape)
    # interrupting: 0.5 x (0.6 + 0.3) + 0.3 per card-year; soft: 0.5 x 0.3 + 0.3
    assert rate == pytest.approx((0.45 + 0.3) / YEAR, rel=1e-12)
    assert soft == pytest.approx(0.45 / 0.75, rel=1e-12)
