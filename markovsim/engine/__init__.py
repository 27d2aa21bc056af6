"""The Markov-chain engine: chains, structure, stationary and transient analysis,
absorption, rewards, symbolic references and simulation. It knows nothing of clusters."""

from ._chain import (
    CTMC as CTMC,
    DTMC as DTMC,
    kronecker_product as kronecker_product,
    kronecker_sum as kronecker_sum,
)
from ._stationary import (
    GTH as GTH,
    SparseDirect as SparseDirect,
    SparseIterative as SparseIterative,
    StationaryResult as StationaryResult,
    Status as Status,
    gth as gth,
    solve_stationary as solve_stationary,
    stationary_distribution as stationary_distribution,
    stationary_distributions as stationary_distributions,
)
from ._structure import (
    communicating_classes as communicating_classes,
    is_aperiodic as is_aperiodic,
    is_irreducible as is_irreducible,
    period as period,
    recurrent_classes as recurrent_classes,
    transient_states as transient_states,
    validate_chain as validate_chain,
    validate_generator as validate_generator,
    validate_transition_matrix as validate_transition_matrix,
)

__all__ = [
    "CTMC", "DTMC", "kronecker_product", "kronecker_sum",
    "GTH", "SparseDirect", "SparseIterative", "StationaryResult", "Status", "gth",
    "solve_stationary", "stationary_distribution", "stationary_distributions",
    "communicating_classes", "is_aperiodic", "is_irreducible", "period", "recurrent_classes",
    "transient_states", "validate_chain", "validate_generator", "validate_transition_matrix",
]
