"""Helpers shared by the reproduction scripts (not a script: its name starts with ``_``).

Paths to the model files, and the provenance of their fields: each field's comment says
``source:`` (cited) or ``assumption:`` / ``derived:``. A few fields were set from a
published figure that a row also compares with; ``TAKEN_FROM`` names them, so every row
that uses the file carries them as ``fitted-on:KEY`` and the figure's own row cannot count
as evidence. Fields fitted by maximum likelihood on a public data set (``DATA_FITS``: the
GPU catalogue's rates, fitted on the InfiniteHBD trace) are cited to that data set: they
were fitted on fault logs, not on any figure a row compares with.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from markovsim import HOUR
from markovsim.availability import Effect, mode_rates
from markovsim.repro import Input, inputs_from_model_file

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"

ATLAS = "models/clusters/atlas800t_a2_10k.toml"
CM384 = "models/clusters/cloudmatrix384_160k.toml"
GPU = "models/clusters/gpu_8x_16k.toml"
ASCEND_FAULTS = "models/faults/ascend_training.toml"
GPU_FAULTS = "models/faults/gpu_training.toml"
TIERED = "models/recovery/ascend_tiered.toml"
BASE = "models/recovery/checkpoint_only.toml"

TAKEN_FROM = {
    # "comm_setup_base = 5 s  # source: S-REC-4, re-run within seconds": the retry's length is the figure
    TIERED: {"tiers[operator retry].comm_setup_base": "S-REC-4"},
    # the card fault rate is 1 / (24 h x 384): S-MTBF-5's bound read as a supernode MTBF
    "models/inference/deepseek_v3_cloudmatrix384.toml": {"faults.card_fault_rate": "S-MTBF-5"},
    # the card fault rate is 3 / (10,000 cards x 1 day): S-MTBF-2's "several faults per day" as 3
    "models/inference/deepseek_v3_8gpu.toml": {"faults.card_fault_rate": "S-MTBF-2/faults-per-day"},
}


#: the public fault trace the GPU catalogue's rates are fitted on (markovsim/data/infinitehbd/)
INFINITEHBD = ("the public InfiniteHBD trace (stepfun-ai/InfiniteHBD-Trace 7aacdc8, arXiv 2502.03885; 400 GPU "
               "servers, days 0-209.39) by maximum likelihood")
DATA_FITS = {
    # "rate = ...  # derived: InfiniteHBD fit, class GPU: 71 events / 79,044 weighted node-days up"
    GPU_FAULTS: {"InfiniteHBD fit": INFINITEHBD},
    "models/recovery/gpu_tiered.toml": {"InfiniteHBD fit": INFINITEHBD},
    "models/recovery/gpu_checkpoint_only.toml": {"InfiniteHBD fit": INFINITEHBD},
}


def path(rel: str) -> Path:
    """Absolute path of a file given relative to the repository root."""
    return ROOT / rel


def file_inputs(*rels: str, fields: tuple[str, ...] | None = None) -> list[Input]:
    """Inputs of model files: every field when ``fields`` names some (a tier, a table), else a
    summary per provenance class (the report lists each field at its end)."""
    out: list[Input] = []
    for rel in rels:
        out += inputs_from_model_file(path(rel), root=ROOT, fields=fields, taken_from=TAKEN_FROM.get(rel),
                                      data_fits=DATA_FITS.get(rel), summary=fields is None)
    return out


def cluster_inputs(cluster: str) -> list[Input]:
    """Summary inputs of a cluster file and the fault catalogue it names."""
    faults = GPU_FAULTS if cluster == GPU else ASCEND_FAULTS
    return file_inputs(cluster, faults)


PHASES = ("detection", "isolation", "rescheduling", "comm_setup_base", "comm_setup_per_card", "state", "bandwidth",
          "compile")


def tier_inputs(rel: str, tier: str, *extra: str) -> list[Input]:
    """The fields of one recovery tier that make up its duration (and ``extra`` fields)."""
    return file_inputs(rel, fields=tuple(f"tiers[{tier}].{k}" for k in PHASES) + extra)


def mtbf_with_prediction(catalogue, shape, cards: int | None = None, *, leave_out: tuple[str, ...] = ()):
    """MTBF in hours of a job of ``cards`` cards as a function of the share of predictable
    faults that predictive maintenance moves off (0 to 1); faults of the components named in
    ``leave_out`` (e.g. software, for a hardware MTBF) are not counted."""
    rates = mode_rates(catalogue, shape, cards)
    keep = np.array([m.effect is Effect.INTERRUPT and m.component not in leave_out for m in catalogue.modes])
    predictable = np.array([m.predictable for m in catalogue.modes])

    def mtbf_h(coverage):
        return 1.0 / float((rates * (1.0 - coverage * predictable))[keep].sum()) / HOUR

    return mtbf_h
