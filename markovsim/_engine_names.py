"""The engine's public names, kept in one place: ``markovsim.engine`` exports them, and the
root package resolves them on first use (``markovsim.gth`` imports the engine only when
read). Written as ``__all__`` because that is the form the API reference's reader (griffe)
follows into the packages that import it; this module itself defines none of them."""

__all__ = [
    "CTMC", "DTMC", "kronecker_product", "kronecker_sum",
    "GTH", "SparseDirect", "SparseIterative", "StationaryResult", "Status", "gth",
    "solve_stationary", "stationary_distribution", "stationary_distributions",
    "communicating_classes", "is_aperiodic", "is_irreducible", "period", "recurrent_classes",
    "transient_states", "validate_chain", "validate_generator", "validate_transition_matrix",
    "Squaring", "Uniformization", "accumulated_reward", "expected_time_in_states",
    "transient_distribution",
    "absorption_probabilities", "mean_first_passage_times", "mean_time_to_absorption",
    "long_run_reward_rate",
    "symbolic_mean_time_to_absorption", "symbolic_stationary_distribution", "to_jax_function",
    "Estimate", "SimulationResult", "SimulationStatus", "estimate_mean_time_to_absorption",
    "estimate_time_average", "simulate_ctmc", "simulate_dtmc",
]
