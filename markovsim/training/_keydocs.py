"""One line per key of the training model files: what it means (for the generated
reference of model-file keys, ``markovsim keys``). Keys are paths in the file, ``[]`` for
an array of tables. A reader may also pass ``doc=`` where it reads a key."""

KEY_DOCS = {
    "workload": {
        "name": "label of the model",
        "layers": "transformer layers",
        "hidden": "hidden size",
        "ffn_hidden": "FFN inner size (dense layers)",
        "heads": "attention heads",
        "kv_heads": "key/value heads (grouped-query attention)",
        "head_dim": "size of one head (default: hidden / heads)",
        "vocab": "vocabulary size",
        "seq_len": "training sequence length in tokens",
        "ffn_kind": "FFN activation",
        "attention": "grouped-query or multi-head latent attention",
        "mla": "multi-head latent attention dimensions",
        "mla.q_lora_rank": "rank of the query down-projection",
        "mla.kv_lora_rank": "rank of the key/value down-projection",
        "mla.qk_nope_head_dim": "query/key head size without rotary embedding",
        "mla.qk_rope_head_dim": "query/key head size with rotary embedding",
        "mla.v_head_dim": "value head size",
        "moe": "mixture of experts",
        "moe.routed_experts": "routed experts per MoE layer",
        "moe.shared_experts": "shared experts, always used",
        "moe.top_k": "routed experts used per token",
        "moe.expert_ffn": "inner size of one expert",
        "moe.dense_layers": "first layers that are dense",
        "mtp_layers": "multi-token-prediction layers",
        "reported_total_params": "published parameter count, checked against the architecture",
        "reported_active_params": "published active parameters per token, checked likewise",
        "reported_params_tolerance": "relative tolerance of those checks",
        "moe.max_nodes_per_token": "node-limited routing: nodes a token's experts may span (0: no limit)",
        "tied_embeddings": "whether the input embedding and the output layer share weights",
        "dropout": "whether dropout masks are stored (activation memory)",
        "causal": "causal attention mask (counted in attention FLOPs and flash-attention time)",
        "attention_window": "sliding-window (local) attention span in tokens; 0: full attention",
        "window_layers": "layers with the sliding window (0 with a window: every layer)",
    },
    "hardware": {
        "name": "label of the accelerator",
        "peak_dense": "dense (not 2:4 sparse) tensor peak rates per card",
        "peak_dense.bf16": "dense BF16/FP16 tensor peak per card",
        "peak_dense.fp8": "dense FP8 tensor peak per card (absent: FP8 runs at the BF16 rate)",
        "kernels": "fitted kernel-model constants of the operator roofline (markovsim.training.calibrate)",
        "kernels.gemm_peak_fraction": "fraction of peak a large GEMM reaches",
        "kernels.gemm_traffic": "HBM traffic of a GEMM in units of its operands, for the shape-dependent roofline",
        "kernels.attention_peak_fraction": ("fraction of peak a fused (flash) attention kernel reaches, forward and "
                                            "backward, on the FLOPs it computes (its backward 2.5x the forward's)"),
        "kernels.memory_bandwidth_fraction": "fraction of HBM bandwidth memory-bound kernels reach",
        "kernels.collective_bandwidth_fraction": "fraction of a link's bandwidth a collective reaches",
        "kernels.step_overhead": "fixed host-side cost of one step (launches, synchronisation, logging)",
        "kernels.interleave_efficiency": ("share of the interleaved schedule's ideal bubble reduction realised "
                                          "(0: the 1F1B bubble, 1: (pp-1)/v)"),
        "kernels.fp8_gemm_peak_fraction": ("fraction of the FP8 peak a large FP8 GEMM reaches "
                                           "(0 or absent: the BF16 gemm_peak_fraction)"),
        "kernels.moe_expert_overhead": ("fixed cost per local expert of one MoE layer and micro-batch, forward "
                                        "and backward (launches, host synchronisation of the dropless path); "
                                        "0 or absent: not modelled"),
        "hbm": "HBM per card",
        "hbm_bandwidth": "HBM bandwidth per card",
        "levels": "link hierarchy, innermost first; the last covers the cluster",
        "levels[].name": "label of the level",
        "levels[].domain_size": "cards sharing this level (0: unbounded, the scale-out network)",
        "levels[].bandwidth": "bandwidth per card at this level, as the source quotes it (see direction)",
        "levels[].direction": "whether that bandwidth is per direction or the bidirectional sum (halved)",
        "levels[].latency": "latency per message (the alpha of the alpha-beta model)",
        "host_link": "link between one card and host memory (optional; needed by plans that offload activations)",
        "host_link.bandwidth": "bandwidth per card to host memory, as the source quotes it (see direction)",
        "host_link.direction": "whether that bandwidth is per direction or the bidirectional sum (halved)",
        "default_stack": ("the software stack whose communication overlaps a plan on this hardware gets for the "
                          "overlaps its [efficiency] does not write, when it names no stack: the stack the preset's "
                          "kernel constants were fitted under; one of 'default', 'megatron-core', 'megatron-lm-2021'"),
        "graph_compiler": ("the compiler every program on this hardware runs through: 'xla' (TPUs: element-wise "
                           "operators always fused, so no plan is asked about eager operators) or '' (GPUs, "
                           "Ascend: eager execution exists)"),
    },
    "plan": {
        "name": "label of the plan (default: workload on cards x hardware)",
        "workload": "the workload: a bare name in models/workloads/, a path relative to this file, or a table",
        "hardware": "the hardware: a bare name in models/hardware/, a path relative to this file, or a table",
        "tp": "tensor-parallel degree",
        "pp": "pipeline-parallel stages",
        "dp": "data-parallel replicas",
        "cp": "context-parallel degree",
        "ep": "expert-parallel degree",
        "global_batch": "sequences per training step",
        "micro_batch": "sequences per micro-batch",
        "virtual_stages": "model chunks per pipeline stage (interleaved schedules)",
        "zero_stage": "ZeRO optimizer-state sharding stage",
        "zero_shard_group": "data-parallel ranks one ZeRO shard group spans (hybrid sharding, HSDP); 0 = all",
        "sequence_parallel": "whether activations are split along the sequence in TP regions",
        "schedule": "pipeline schedule",
        "recompute": "activation recomputation",
        "recompute_layers": ("with recompute = 'full': layers of each pipeline chunk recomputed, the rest keep "
                             "their activations (Megatron's block method); 0: every layer"),
        "offload_layers": ("layers of each pipeline chunk whose activations are held in host memory between "
                           "their forward and backward (Megatron's cpu_offloading_num_layers); 0: none"),
        "fp8_params": ("FP8 runs: weights kept in FP8, no BF16 copy, ZeRO weight all-gather in FP8 "
                       "(Megatron's fp8_param_gather)"),
        "recompute_modules": ("with recompute = 'selective': the parts of each layer recomputed (Megatron's "
                              "--recompute-modules: core_attn, mla_up_proj, layernorm, mlp, moe, moe_act, "
                              "shared_experts); empty: core_attn"),
        "optimizer_moments": "number format of Adam's two moments (fp32: 12 bytes of optimizer state per "
                             "parameter with the FP32 master weights; bf16: 8)",
        "layer_split": "how layers are cut into pipeline chunks",
        "attention_kernel": ("fused attention (flash: FlashAttention-2 or later; flash1: FlashAttention v1 or its "
                             "Triton port, at half the speed) or unfused"),
        "elementwise": ("how the memory-bound operators run: fused (one kernel each: Megatron-core, Transformer "
                        "Engine, torch.compile) or eager (PyTorch eager mode with the block written from primitive "
                        "operators, as torchtitan without torch.compile: RMSNorm in FP32 steps, complex rotary, "
                        "SwiGLU in two kernels, GQA's key/value repeat and the attention output's layout copy)"),
        "precision": "number format of the GEMMs (fp8: FP8 GEMMs)",
        "grad_reduce": "number format of the gradient reduction",
        "ep_dispatch": ("what the expert all-to-all moves per token: per-expert (one copy per routed expert, "
                        "Megatron's alltoall dispatcher) or per-rank (one copy per destination GPU and node: "
                        "DeepEP, DeepSeek-V3's dispatch)"),
        "ep_dispatch_precision": ("number format of what the expert all-to-all moves toward the experts (the forward "
                                  "dispatch, the backward's gradients before the down-projection): bf16 (Megatron's "
                                  "alltoall, DeepEP and HybridEP dispatchers, also in FP8 runs) or fp8 (quantized "
                                  "before the transfer, DeepSeek-V3; needs precision = 'fp8'); the combines move BF16"),
        "combined_1f1b": ("Megatron's combined 1F1B schedule (--overlap-moe-expert-parallel-comm, Megatron-Bridge's "
                          "moe_a2a_overlap), 1f1b or interleaved with ep > 1: each micro-batch's expert all-to-all "
                          "hidden behind the paired micro-batch's computation (times efficiency.ep_pair_overlap, as "
                          "under DualPipe); the unpaired warm-up micro-batches hide efficiency.ep_overlap of theirs"),
        "fp8_recipe": ("with precision = 'fp8', Transformer Engine's scaling recipe: delayed (DelayedScaling, its "
                       "default and NeMo 24.x's: a blocking all-reduce of the amaxes over the pipeline stage's "
                       "tp x cp x dp ranks after each chunk's forward and backward, charged in sync), current "
                       "(Float8CurrentScaling, Megatron-Bridge's FP8-CS), mxfp8 (MXFP8BlockScaling) or blockwise "
                       "(DeepSeek-V3's tile/block scaling); the last three synchronise nothing across ranks; "
                       "a file that sets it and no precision is refused; with precision = 'bf16' it has no effect"),
        "expert_tp": ("Megatron's expert_tensor_parallel_size, as it places the expert-parallel group: its ep "
                      "ranks sit expert_tp ranks apart, spanning ep x expert_tp ranks (1: adjacent, NVIDIA's "
                      "current MoE recipes; Megatron-core's default when unset is tp)"),
        "expert_routing": ("with ep_dispatch = 'per-rank': the routing that sets how many GPUs a token reaches: "
                           "random (balanced random sets of experts) or consecutive (NeMo AutoModel's benchmark "
                           "FakeBalancedGate)"),
        "efficiency": "achievable fractions of peak and communication overlap",
        "efficiency.param_gather_overlap": "fraction of the ZeRO parameter all-gather hidden behind the next forward",
        "efficiency.data_loading": "exposed data-loading time per step",
        "efficiency.comm_sm_fraction": "share of the cores given to communication kernels while they overlap compute",
        "efficiency.compute": "fraction of peak FLOP/s the kernels reach (absent: the hardware's fitted kernel model)",
        "efficiency.bandwidth": "fraction of a link's bandwidth collectives reach (absent: the kernel model's)",
        "efficiency.stack": ("the software stack whose communication overlaps are the defaults of the keys beside "
                             "it (markovsim.training.SOFTWARE_STACKS): default (the library's: dp_overlap 0.9, "
                             "nothing else hidden), megatron-core (NeMo, Megatron-Bridge, Megatron-core: "
                             "tp_overlap 0.8, pp_overlap 0.5, dp_overlap 0.9, param_gather_overlap 0.9) or "
                             "megatron-lm-2021 (Narayanan et al. 2021: nothing hidden); keys written beside it win; "
                             "absent: the hardware's default_stack"),
        "efficiency.tp_overlap": "fraction of TP communication hidden behind compute",
        "efficiency.dp_overlap": "fraction of DP communication hidden behind compute",
        "efficiency.replica_overlap": ("hybrid sharding (zero_shard_group): fraction of the replicas' gradient "
                                       "all-reduce over the outermost level hidden behind compute (default: "
                                       "dp_overlap)"),
        "efficiency.ep_overlap": ("fraction of the expert all-to-all hidden behind compute, for micro-batches "
                                  "that are not paired"),
        "efficiency.ep_pair_overlap": ("under DualPipe or combined_1f1b: share of the paired micro-batch's "
                                       "computation that hides the expert all-to-all (1: all of it)"),
        "efficiency.pp_overlap": "fraction of PP communication hidden behind compute",
        "efficiency.usable_memory": "fraction of HBM available to weights, optimizer states and activations",
    },
}
