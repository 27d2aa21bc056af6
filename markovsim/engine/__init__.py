"""The Markov-chain engine: chains, structure, stationary and transient analysis,
absorption, rewards, symbolic references and simulation. It knows nothing of clusters."""

from .._engine_names import __all__  # (one list for the engine and the root package)
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
from ._absorption import (
    absorption_probabilities as absorption_probabilities,
    mean_first_passage_times as mean_first_passage_times,
    mean_time_to_absorption as mean_time_to_absorption,
)
from ._reward import long_run_reward_rate as long_run_reward_rate
from ._simulate import (
    Estimate as Estimate,
    SimulationResult as SimulationResult,
    SimulationStatus as SimulationStatus,
    estimate_mean_time_to_absorption as estimate_mean_time_to_absorption,
    estimate_time_average as estimate_time_average,
    simulate_ctmc as simulate_ctmc,
    simulate_dtmc as simulate_dtmc,
)
from ._symbolic import (
    symbolic_mean_time_to_absorption as symbolic_mean_time_to_absorption,
    symbolic_stationary_distribution as symbolic_stationary_distribution,
    to_jax_function as to_jax_function,
)
from ._transient import (
    Squaring as Squaring,
    Uniformization as Uniformization,
    accumulated_reward as accumulated_reward,
    expected_time_in_states as expected_time_in_states,
    transient_distribution as transient_distribution,
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


from .._entry import guard_public as _guard_public  # noqa: E402  (argument checks at every public function)

_guard_public(globals(), __all__)
